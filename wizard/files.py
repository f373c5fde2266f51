"""What a path that is not a regular file is, in the words every refusal of one uses."""

from __future__ import annotations

import stat


def file_kind(mode: int) -> str:
    """``st_mode`` in words: "a folder", "a pipe (FIFO)", "a device", "a socket", or, for
    anything else that is not a regular file, "not a regular file"."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"
