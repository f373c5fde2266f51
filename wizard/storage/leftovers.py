"""The names a save gives its files while it runs, and the ones a killed save left behind.

A save (:mod:`oom_wizard.storage.save`) writes ``.NAME.oomw-PID-TOKEN.tmp`` beside each file,
moves an old file it replaces to ``.NAME.oomw-PID-TOKEN.bak``, and describes its renames in
``.oomw-PID-TOKEN.journal``. Whatever a dead process left under those names is its own to
finish or undo; nothing else is ever touched. A journal is a request, not an order: it is
followed only for names of its own save (:func:`save_name`, with its own PID and token) in
the folders that save wrote, whatever else it names (``oom_wizard.storage.atomic``).

Every use case that opens a job first settles its folders with
:func:`oom_wizard.storage.save.recover_beside`, so that the reads after it write nothing; a
journal that recovery could not finish or undo is noted (:func:`unresolved_notes`), and the
command line says so at exit. This module sits below the save pipeline: it names, the save
writes and recovers.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Final, Literal

#: What every leftover's name holds (the cheap test before the pattern).
MARK: Final = ".oomw-"

#: The tool's own names: a file being written, a file about to be replaced, a commit.
NAME: Final = re.compile(
    r"^\.(?:.*\.)?oomw-(?P<pid>\d+)-(?P<token>[0-9a-f]{16})\.(?P<kind>tmp|bak|journal)$"
)

#: How much of the destination's name a temp name keeps (so that it fits NAME_MAX).
_NAME_KEPT: Final = 80

Kind = Literal["tmp", "bak", "journal"]


def temp_name(path: Path, token: str, kind: Literal["tmp", "bak"]) -> Path:
    """The name of this process's temp file or backup of ``path``, for the save ``token``."""
    return path.parent / save_name(path.name, os.getpid(), token, kind)


def save_name(final: str, pid: int, token: str, kind: Literal["tmp", "bak"]) -> str:
    """The bare name that the save ``token`` of process ``pid`` gives the temp file or the
    backup of a file named ``final`` (in the same folder): the one name recovery may act on."""
    return f".{final[:_NAME_KEPT]}{MARK}{pid}-{token}.{kind}"


def journal_name(folder: Path, token: str) -> Path:
    """The name of this process's journal in ``folder``, for the save ``token``."""
    return folder / f"{MARK}{os.getpid()}-{token}.journal"


def dead_leftovers(folder: Path) -> list[tuple[Kind, Path]]:
    """The files of ``folder`` that a save of a dead process left, journals first; none when
    the folder cannot be read."""
    found: list[tuple[Kind, Path]] = []
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if MARK not in entry.name:
                    continue
                match = NAME.match(entry.name)
                if match is None or not entry.is_file(follow_symlinks=False):
                    continue
                if not alive(int(match.group("pid"))):
                    kind: Kind = match.group("kind")  # type: ignore[assignment]
                    found.append((kind, Path(entry.path)))
    except OSError:
        return []
    return sorted(found, key=lambda item: item[0] != "journal")


def journal_of(path: Path) -> Path:
    """The journal of the save that a temp or backup ``path`` belongs to (in its folder)."""
    match = NAME.match(path.name)
    if match is None:
        raise ValueError(f"not a name of a save: {path.name}")
    return path.parent / f"{MARK}{match.group('pid')}-{match.group('token')}.journal"


#: How long opening a job waits for another process's save in its folders to finish.
SETTLE_WAIT_S: Final = 3.0


_unresolved: list[str] = []


def note_unresolved(note: str) -> None:
    """Record that a killed save's journal was left as it is, and why (said at exit)."""
    if note not in _unresolved:
        _unresolved.append(note)


_unfinished: dict[str, str] = {}


def note_unfinished(folder: Path, why: str) -> None:
    """Record that a killed save in ``folder`` passed its commit point and could not be
    finished now, and why (a read-only folder): what is read there is then half a save."""
    _unfinished[os.path.realpath(folder)] = why


def unfinished_in(folder: Path) -> str | None:
    """Why a committed save in ``folder`` could not be finished by this process (None: none)."""
    return _unfinished.get(os.path.realpath(folder))


def unresolved_notes() -> tuple[str, ...]:
    """Every journal this process found and could not finish or undo, each in a line."""
    return tuple(_unresolved)


def alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (this one always does; one we may not signal too)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True
