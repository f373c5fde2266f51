"""Saving: always a new file, never the source, atomically, with its change log.

A save writes two files, the config and its change log. Each is written to a
temporary file in its destination folder, flushed and fsynced, then renamed into
place, so a kill at any moment leaves either no output or a complete one. Before
anything is written every refusal is checked: the source itself (also through a
symlink or another path to the same file), an existing output without ``force``,
a folder that does not exist or cannot be written.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from wizard.changelog import ChangeLog, changelog_path_for
from wizard.document import JobDocument
from wizard.errors import SaveRefused

OUTPUT_TAG: Final = "oomfix"
HEADER: Final = (
    "Edited by oom-wizard: what changed and why is in the .changelog.json file of the same name."
)
_TAGGED_STEM = re.compile(rf"^(?P<base>.+)\.{OUTPUT_TAG}(?:-(?P<n>\d+))?$")


@dataclass(frozen=True)
class SaveResult:
    """Where a save wrote."""

    config: Path
    changelog: Path


def default_output_path(source: Path) -> Path:
    """The first free name: ``my_job.yaml`` → ``my_job.oomfix.yaml``, then ``-2``, ``-3``...

    A source that is itself an output (``my_job.oomfix.yaml``) continues the series
    (``my_job.oomfix-2.yaml``) instead of stacking tags.
    """
    stem, suffix = source.stem, source.suffix
    match = _TAGGED_STEM.match(stem)
    base = match.group("base") if match else stem
    number = int(match.group("n") or 1) + 1 if match else 1
    while True:
        tag = OUTPUT_TAG if number == 1 else f"{OUTPUT_TAG}-{number}"
        candidate = source.with_name(f"{base}.{tag}{suffix}")
        if not candidate.exists() and not changelog_path_for(candidate).exists():
            return candidate
        number += 1


def check_output(output: Path, *, source: Path | None, force: bool = False) -> None:
    """Refuse an output that is the source, exists (without ``force``) or cannot be written.

    Raises:
        SaveRefused: one line that says what to do instead.
    """
    if source is not None and _same_file(output, source):
        raise SaveRefused(
            "this is the source config itself; oom-wizard never writes the source. "
            "Pick another output name with -o",
            file=output,
        )
    if output.is_dir():
        raise SaveRefused("this is a folder; give a file name with -o", file=output)
    if (output.exists() or output.is_symlink()) and not force:
        raise SaveRefused(
            "already exists and will not be overwritten; pick another name with -o "
            "(or pass --force to replace it)",
            file=output,
        )
    folder = output.parent
    if folder.exists() and not folder.is_dir():
        raise SaveRefused(f"{folder} is a file, not a folder; choose another place", file=output)
    if not folder.is_dir():
        raise SaveRefused(f"the folder {folder} does not exist; create it first", file=output)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise SaveRefused(
            f"the folder {folder} is not writable; choose another place with -o", file=output
        )


def save(
    document: JobDocument,
    changelog: ChangeLog,
    *,
    output: Path,
    changelog_path: Path | None = None,
    source: Path | None = None,
    force: bool = False,
) -> SaveResult:
    """Write ``document`` to ``output`` and ``changelog`` beside it, atomically.

    Args:
        document: The edited document (its ``source`` is the file it came from).
        changelog: The change log to write (its output hash is filled in here).
        output: Where the config goes; never the source, never over a file unless ``force``.
        changelog_path: Where the change log goes (default: beside the output).
        source: The source file to protect, and whose permission bits to copy.
        force: Replace an existing output and change log.

    Raises:
        SaveRefused: before anything is written, if any target is refused.
    """
    from wizard.changelog import FileRef, sha256_of

    source = source if source is not None else document.source
    log_path = changelog_path or changelog_path_for(output)
    check_output(output, source=source, force=force)
    check_output(log_path, source=source, force=force)
    if _same_file(log_path, output) or log_path == output:
        raise SaveRefused("the change log cannot be the config itself", file=log_path)
    final = document.with_header_comment(HEADER)
    data = final.to_bytes()
    log = changelog.model_copy(update={"output": FileRef(path=str(output), sha256=sha256_of(data))})
    mode = _mode_of(source)
    written: list[Path] = []
    try:
        atomic_write(output, data, mode=mode, replace=force)
        written.append(output)
        atomic_write(log_path, log.to_json().encode("utf-8"), mode=mode, replace=force)
        written.append(log_path)
    except OSError as exc:
        for path in written:
            with contextlib.suppress(OSError):
                path.unlink()
        raise SaveRefused(f"could not write: {exc.strerror or exc}", file=output) from None
    return SaveResult(config=output, changelog=log_path)


def atomic_write(path: Path, data: bytes, *, mode: int = 0o644, replace: bool = False) -> None:
    """Write ``data`` to ``path`` through a temp file in the same folder, fsync and rename.

    A kill at any moment leaves either the old state or the complete new file.

    Args:
        path: The destination.
        data: The bytes to write.
        mode: Permission bits of the new file.
        replace: Replace an existing file; otherwise a file that appears meanwhile is
            never overwritten (``SaveRefused``).
    """
    handle, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    temp = Path(temp_name)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temp, mode)
        if replace:
            os.replace(temp, path)
        else:
            # link() fails if the target appeared meanwhile: never overwrite by accident.
            try:
                os.link(temp, path)
            except FileExistsError:
                raise SaveRefused(
                    "appeared while saving; nothing was overwritten", file=path
                ) from None
            except OSError:
                if path.exists():
                    raise
                os.replace(temp, path)
        _fsync_dir(path.parent)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _mode_of(source: Path | None) -> int:
    if source is not None:
        with contextlib.suppress(OSError):
            return stat.S_IMODE(source.stat().st_mode)
    return 0o644


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except OSError:
        return False
