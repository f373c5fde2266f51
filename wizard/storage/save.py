"""Saving: always a new file, never the source, atomically, with its change log as a pair.

A save writes two files, the config and its change log, and the user sees both or
neither. The commit (:func:`save`) goes:

1. every refusal is checked before anything is written: the source itself (also
   through a symlink or another path to the same file), an existing output without
   ``force``, a folder that does not exist or cannot be written, a name that is too
   long or not UTF-8;
2. both files are written to temp files in their destination folders and fsynced;
3. a journal naming the four paths and both hashes is written and fsynced beside
   the config; with ``force``, each file about to be replaced gets a hard-linked
   backup first;
4. the change log is renamed into place, then the config; the folders are fsynced;
5. the backups and the journal are removed.

A failure at any step puts back what was there (the backups restore a replaced
file), so an error leaves the folder as it was. Catchable signals (SIGINT, SIGTERM)
are held off during steps 3 to 5, so they land before the renames (nothing is
written) or after them (both are). For SIGKILL, :func:`recover` — run by every save
and at start-up in the working folder — finishes or undoes what a dead process left:
a journal whose change log is in place rolls forward (the config is renamed in);
otherwise the temps and backups are removed. Only the tool's own names are touched
(``.NAME.oomw-PID-TOKEN.tmp`` and friends), and only when process PID is gone.

Every write step calls :data:`STEP_HOOK` when a test has set it: the seam the
fault tests use to fail or kill a save at each step deterministically.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import signal
import stat
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

from oom_wizard.errors import NameTaken, SaveRefused
from oom_wizard.storage.leftovers import dead_leftovers, journal_name, temp_name

if TYPE_CHECKING:  # the writer itself (``atomic_write``: the demo's copy) needs no model
    from oom_wizard.formats.document import JobDocument
    from oom_wizard.storage.changelog import ChangeLog

OUTPUT_TAG: Final = "oomfix"
HEADER: Final = (
    "Edited by oom-wizard: what changed and why is in the .changelog.json file of the same name."
)
_TAGGED_STEM = re.compile(rf"^(?P<base>.+)\.{OUTPUT_TAG}(?:-(?P<n>\d+))?$")


#: Called as ``STEP_HOOK(step, path)`` before every write step of a save (tests only).
STEP_HOOK: Callable[[str, Path], None] | None = None

_written: list[Path] = []


@dataclass(frozen=True)
class SaveResult:
    """Where a save wrote, and the change log as written (so that nothing reads it back).

    Attributes:
        config: The new config.
        changelog: Its change log's path.
        log: The change log written there (None: not known to whoever made this result).
    """

    config: Path
    changelog: Path
    log: ChangeLog | None = field(default=None, compare=False, repr=False)


def default_output_path(source: Path) -> Path:
    """The first free name: ``my_job.yaml`` → ``my_job.oomfix.yaml``, then ``-2``, ``-3``...

    A source that is itself an output (``my_job.oomfix.yaml``) continues the series
    (``my_job.oomfix-2.yaml``) instead of stacking tags.
    """
    from oom_wizard.storage.changelog import changelog_path_for

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
    check_name(output)
    _check_suffix(output, source)
    try:
        _check_output(output, source=source, force=force)
    except OSError as exc:
        raise SaveRefused(f"cannot use this name: {exc.strerror or exc}", file=output) from None


def _check_suffix(output: Path, source: Path | None) -> None:
    """Refuse a config name AI Toolkit would not read: it picks its reader by the exact,
    lower-case suffix (``.yaml``, ``.yml``, ``.json``, ``.jsonc``) and refuses the rest."""
    from oom_wizard.formats.document import JSON_SUFFIXES, YAML_SUFFIXES

    known = (*YAML_SUFFIXES, *JSON_SUFFIXES)
    if output.suffix in known:
        return
    keep = source.suffix if source is not None and source.suffix in known else ".yaml"
    named = f"'{output.suffix}'" if output.suffix else "a name without one"
    raise SaveRefused(
        f"AI Toolkit reads only job files ending in lower-case {', '.join(known)} and "
        f"refuses {named}; name the output {output.stem}{keep}",
        file=output,
    )


def check_name(path: Path, *, what: str = "file") -> None:
    """Refuse a name the change log cannot record (not UTF-8) or the folder cannot hold.

    Raises:
        SaveRefused: the name is not valid UTF-8, or longer than the file system allows.
    """
    shown = os.fsencode(path).decode("utf-8", "replace")
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        raise SaveRefused(
            f"this {what} name is not valid UTF-8, so the change log cannot record it; "
            "pick a name in UTF-8",
            file=shown,
        ) from None
    limit = _name_max(path.parent)
    if len(os.fsencode(path.name)) > limit:
        raise SaveRefused(
            f"this {what} name is longer than the {limit} bytes the file system allows; "
            "pick a shorter name",
            file=shown,
        )


def _name_max(folder: Path) -> int:
    try:
        return int(os.pathconf(folder if folder.is_dir() else ".", "PC_NAME_MAX"))
    except (OSError, ValueError):
        return 255


def _check_output(output: Path, *, source: Path | None, force: bool) -> None:
    if source is not None and _same_file(output, source):
        raise SaveRefused(
            "this is the source config itself; oom-wizard never writes the source",
            file=output,
            remedy="rename",
        )
    if output.is_dir():
        raise SaveRefused("this is a folder", file=output, remedy="file_name")
    if (output.exists() or output.is_symlink()) and not force:
        raise NameTaken(
            "already exists and will not be overwritten",
            file=output,
            remedy="rename_or_force",
        )
    if output.exists() and not output.is_file():
        raise SaveRefused("this is not a regular file; it will not be replaced", file=output)
    folder = output.parent
    if folder.exists() and not folder.is_dir():
        raise SaveRefused(f"{folder} is a file, not a folder; choose another place", file=output)
    if not folder.is_dir():
        raise SaveRefused(f"the folder {folder} does not exist; create it first", file=output)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise SaveRefused(f"the folder {folder} is not writable", file=output, remedy="place")


def save(
    document: JobDocument,
    changelog: ChangeLog,
    *,
    output: Path,
    changelog_path: Path | None = None,
    source: Path | None = None,
    force: bool = False,
) -> SaveResult:
    """Write ``document`` to ``output`` and ``changelog`` beside it, as one pair.

    Args:
        document: The edited document (its ``source`` is the file it came from).
        changelog: The change log to write (its output hash is filled in here).
        output: Where the config goes; never the source, never over a file unless ``force``.
        changelog_path: Where the change log goes (default: beside the output).
        source: The source file to protect, and whose permission bits to copy.
        force: Replace an existing output and change log (each is backed up until the
            pair is in place, and put back on any failure).

    Raises:
        SaveRefused: a target is refused, or a write failed; either way the folders are
            as they were (the message says so, or says exactly what is not).
    """
    from oom_wizard.storage.changelog import FileRef, changelog_path_for, record_path, sha256_of

    source = source if source is not None else document.source
    log_path = changelog_path or changelog_path_for(output)
    if source is not None:
        check_name(source, what="source")
    check_output(output, source=source, force=force)
    check_output(log_path, source=source, force=force)
    if _same_file(log_path, output) or log_path == output:
        raise SaveRefused("the change log cannot be the config itself", file=log_path)
    _check_format(document, output)
    for folder in {output.parent, log_path.parent}:
        recover(folder)
    final = document.with_header_comment(HEADER)
    data = final.to_bytes()
    recorded = FileRef(path=record_path(output, log_path), sha256=sha256_of(data))
    update: dict[str, FileRef] = {"output": recorded}
    if len(changelog.runs) <= 1 and not Path(changelog.source.path).is_absolute():
        # A log that starts here: a source named relative to the current folder is
        # recorded relative to the change log's folder instead.
        source_path = record_path(Path(changelog.source.path), log_path)
        update["source"] = changelog.source.model_copy(update={"path": source_path})
    log = changelog.model_copy(update=update)
    # pydantic wraps an exception raised inside its serializer (a Ctrl-C or SIGTERM landing
    # there) in its own error; held here, the signal lands just after, as itself.
    with signals_held():
        log_data = log.to_json().encode("utf-8")
    mode = _mode_of(source)
    commit_pair(
        [(log_path, log_data), (output, data)], mode=mode, replace=force, what=_what(log_path)
    )
    return SaveResult(config=output, changelog=log_path, log=log)


def _check_format(document: JobDocument, output: Path) -> None:
    """Refuse an output whose name says another format than the text it would hold."""
    suffix = output.suffix.lower()
    named = (
        "json" if suffix in (".json", ".jsonc") else "yaml" if suffix in (".yaml", ".yml") else None
    )
    if suffix == ".json" and document.fmt == "json":
        from oom_wizard.formats.document import strip_json_comments

        if "/" in document.text and strip_json_comments(document.text) != document.text:
            raise SaveRefused(
                "the config has // or /* */ comments, which AI Toolkit's json.loads refuses "
                "in a .json file (and so does oom-wizard); name the output .jsonc",
                file=output,
            )
    if named is not None and named != document.fmt:
        kind = "YAML" if document.fmt == "yaml" else "JSON"
        keep = ".yaml" if document.fmt == "yaml" else ".json"
        raise SaveRefused(
            f"the config is {kind} and is saved as {kind} (only the changed lines differ), so "
            f"a {suffix} name would not be readable by AI Toolkit; name the output {keep}",
            file=output,
        )


def _what(log_path: Path) -> Callable[[Path], str]:
    return lambda path: "the change log" if path == log_path else "the config"


def atomic_write(path: Path, data: bytes, *, mode: int = 0o644, replace: bool = False) -> None:
    """Write one file through a temp file in the same folder, fsync and rename.

    A kill at any moment leaves either the old state or the complete new file.

    Args:
        path: The destination.
        data: The bytes to write.
        mode: Permission bits of the new file.
        replace: Replace an existing file; otherwise a file that appears meanwhile is
            never overwritten (``SaveRefused``).

    Raises:
        OSError: the write failed; nothing changed at ``path``.
        SaveRefused: ``path`` appeared meanwhile (without ``replace``).
    """
    commit_pair([(path, data)], mode=mode, replace=replace, journal=False, wrap=False)


def commit_pair(
    files: list[tuple[Path, bytes]],
    *,
    mode: int = 0o644,
    replace: bool = False,
    journal: bool = True,
    wrap: bool = True,
    what: Callable[[Path], str] = lambda path: str(path.name),
) -> None:
    """Write ``files`` so that all of them or none of them appear, in the order given.

    Args:
        files: (destination, bytes) pairs; the last one is renamed in last.
        mode: Permission bits of the new files.
        replace: Replace existing files (backed up until the commit is done).
        journal: Write a journal so that :func:`recover` can finish a commit a SIGKILL
            interrupted between the renames.
        wrap: Turn an ``OSError`` into a ``SaveRefused`` that says what is on disk.
        what: How to name a destination in a message.

    Raises:
        SaveRefused: a write failed or a destination appeared; nothing was written.
        OSError: the same, when ``wrap`` is false.
    """
    token = os.urandom(8).hex()  # secrets.token_hex's own source, without its imports (hmac)
    temps = [temp_name(path, token, "tmp") for path, _ in files]
    backups = [temp_name(path, token, "bak") for path, _ in files]
    # One journal in every folder the commit touches, so that whatever opens either file
    # next (in either folder) finds it and makes the pair old or new (:func:`recover`).
    journal_paths = [journal_name(folder, token) for folder in _folders(files)]
    journal_path = journal_paths[-1]
    created: list[Path] = []
    renamed: list[int] = []
    recorded = False
    current = files[0][0]
    try:
        for (path, data), temp in zip(files, temps, strict=True):
            current = path
            _write_temp(temp, data, mode, created)
        with signals_held():
            if journal:
                current = journal_path
                _step("journal", journal_path)
                record = {
                    "files": [
                        {
                            "final": str(path),
                            "temp": str(temp),
                            "backup": str(backup),
                            "sha256": _sha(data),
                        }
                        for (path, data), temp, backup in zip(files, temps, backups, strict=True)
                    ],
                    "replace": replace,
                    "journals": [str(path) for path in journal_paths],
                }
                text = json.dumps(record).encode("utf-8")
                for written in journal_paths:
                    current = written
                    _write_temp(written, text, 0o600, created)
                    _fsync_dir(written.parent)
            if replace:
                for (path, _), backup in zip(files, backups, strict=True):
                    if path.exists():
                        current = path
                        _step("backup", path)
                        _backup(path, backup)
                        created.append(backup)
            for index, ((path, _), temp) in enumerate(zip(files, temps, strict=True)):
                current = path
                _step("rename", path)
                _rename_in(temp, path, replace=replace)
                renamed.append(index)
                created.remove(temp)
            for folder in _folders(files):
                _step("fsync-dir", folder)
                _fsync_dir(folder)
            _written.extend(path for path, _ in files)
            recorded = True
            for leftover in [path for path in created if path not in journal_paths]:
                _step("cleanup", leftover)
                _unlink(leftover)
                created.remove(leftover)
            if journal:
                for written in journal_paths:
                    _step("unjournal", written)
                    _unlink(written)
                    created.remove(written)
    except BaseException as exc:
        if len(renamed) == len(files):
            # Everything is in place; only leftovers remain. The save stands.
            if not recorded:
                _written.extend(path for path, _ in files)
            for leftover in created:
                with contextlib.suppress(OSError):
                    _unlink(leftover)
            if isinstance(exc, (OSError, SaveRefused)):
                return
            raise
        lost = _roll_back(files, temps, backups, renamed, replace)
        for leftover in created:
            if leftover not in lost.values():
                with contextlib.suppress(OSError):
                    _unlink(leftover)
        _forget([path for path, _ in files])
        if not wrap or not isinstance(exc, (OSError, SaveRefused)):
            raise
        raise _refusal(exc, current, what, lost) from None


def _folders(files: list[tuple[Path, bytes]]) -> list[Path]:
    """The folders of ``files``, each once, in order (the config's last)."""
    return list(dict.fromkeys(path.parent for path, _ in reversed(files)))[::-1]


def _refusal(
    exc: BaseException, current: Path, what: Callable[[Path], str], lost: dict[Path, Path]
) -> SaveRefused:
    if isinstance(exc, SaveRefused):
        base = exc.message
        file = exc.file or str(current)
    else:
        assert isinstance(exc, OSError)
        name = what(current) if not current.name.endswith(".journal") else "the save journal"
        base = f"could not write {name}: {exc.strerror or exc}"
        file = str(current)
    if lost:
        kept = "; ".join(f"{final} is kept as {backup}" for final, backup in lost.items())
        return SaveRefused(f"{base}; could not put back every file: {kept}", file=file)
    kind = NameTaken if isinstance(exc, NameTaken) else SaveRefused
    return kind(f"{base}; nothing was written, every existing file is as it was", file=file)


def _roll_back(
    files: list[tuple[Path, bytes]],
    temps: list[Path],
    backups: list[Path],
    renamed: list[int],
    replace: bool,
) -> dict[Path, Path]:
    """Undo the renames done so far; return {final: backup} for any that could not be."""
    lost: dict[Path, Path] = {}
    for index in reversed(renamed):
        path = files[index][0]
        backup = backups[index]
        try:
            if replace and backup.exists():
                os.replace(backup, path)
            else:
                _unlink(path)
        except OSError:
            if replace and backup.exists():
                lost[path] = backup
    return lost


def written_this_process() -> tuple[Path, ...]:
    """Every file a save of this process has put in place (for an honest exit message)."""
    return tuple(_written)


def note_written(path: Path) -> None:
    """Record a write made outside :func:`commit_pair` (a database commit)."""
    _written.append(path)


def forget_written(paths: Iterable[Path]) -> None:
    """Drop ``paths`` from the record: their writes were undone."""
    _forget(list(paths))


def _forget(paths: list[Path]) -> None:
    for path in paths:
        while path in _written:
            _written.remove(path)


def _step(step: str, path: Path) -> None:
    hook = STEP_HOOK
    if hook is not None:
        hook(step, path)


def _write_temp(temp: Path, data: bytes, mode: int, created: list[Path]) -> None:
    _step("create", temp)
    # Recorded before it exists: a signal that lands right after the open must still find
    # it to clean up (the name is ours alone: our pid and a random token).
    created.append(temp)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as stream:
        _step("write", temp)
        stream.write(data)
        stream.flush()
        _step("fsync", temp)
        os.fsync(stream.fileno())
    os.chmod(temp, mode)


def _backup(path: Path, backup: Path) -> None:
    try:
        os.link(path, backup)
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise
        shutil.copy2(path, backup)


def _rename_in(temp: Path, path: Path, *, replace: bool) -> None:
    if replace:
        os.replace(temp, path)
        return
    # link() fails if the target appeared meanwhile: never overwrite by accident.
    try:
        os.link(temp, path)
    except FileExistsError:
        raise NameTaken("appeared while saving; it was not overwritten", file=path) from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise
        if path.exists() or path.is_symlink():
            raise NameTaken("appeared while saving; it was not overwritten", file=path) from None
        os.replace(temp, path)
        return
    # The final name is in place now; the temp is only a second name for it (a leftover
    # if it cannot go, which the next run removes).
    with contextlib.suppress(OSError):
        _unlink(temp)


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _sha(data: bytes) -> str:
    from oom_wizard.storage.changelog import sha256_of

    return sha256_of(data)


_HELD: Final = frozenset({signal.SIGINT, signal.SIGTERM})


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM off while the renames run (main thread only).

    A signal that arrives meanwhile is delivered when the block ends, so it lands
    before the renames or after all of them, never between.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


# ------------------------------------------------------------------ recovery


def recover(folder: Path) -> tuple[Path, ...]:
    """Finish or undo the saves that dead processes left in ``folder``; return what changed.

    A journal whose last-but-one file (the change log) is in place with its recorded hash
    rolls forward: the remaining temps are renamed in. Any other journal rolls back: its
    temps and backups are removed and every final name is left as it was. Temps without a
    journal (a process killed before its renames began) are removed. Only the tool's own names
    whose process is gone are touched (:func:`oom_wizard.storage.leftovers.dead_leftovers`); errors
    are ignored (recovery never stops a save).
    """
    touched: list[Path] = []
    for kind, path in dead_leftovers(folder):
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            if kind == "journal":
                touched.extend(_replay(path))
            elif path.exists():
                _unlink(path)
                touched.append(path)
    return tuple(touched)


def _replay(journal: Path) -> list[Path]:
    """Finish (roll forward) or undo (roll back) the commit that ``journal`` describes."""
    touched: list[Path] = []
    try:
        record = json.loads(journal.read_bytes()[: 1024 * 1024])
        files = [
            (Path(item["final"]), Path(item["temp"]), Path(item["backup"]), str(item["sha256"]))
            for item in record["files"]
        ]
        replace = bool(record["replace"])
    except (ValueError, KeyError, TypeError):
        # Cut short while it was written: it is fsynced before the first rename, so no
        # rename happened. Its temps are strays of a dead process, removed like any other.
        _unlink(journal)
        return [journal]
    # The renames run in order, so the commit got past its point of no return when any
    # final name holds the bytes it was to receive: then every other temp goes in too.
    if any(_holds(final, sha) for final, _temp, _backup, sha in files):
        try:
            for final, temp, _backup, sha in files:
                if temp.exists() and not _holds(final, sha):
                    _rename_in(temp, final, replace=replace)
                    touched.append(final)
        except SaveRefused:
            # A name was taken meanwhile (never without --force): undo ours instead.
            for final, _temp, backup, sha in files:
                if backup.exists():
                    os.replace(backup, final)
                elif _holds(final, sha):
                    _unlink(final)
                touched.append(final)
    for _final, temp, backup, _sha in files:
        for leftover in (temp, backup):
            if leftover.exists():
                _unlink(leftover)
                touched.append(leftover)
    # Its copies in the other folders go last: until then, either folder can replay it.
    others = [Path(str(path)) for path in record.get("journals", ())]
    for copy in [*(path for path in others if path != journal), journal]:
        if copy.exists():
            _unlink(copy)
            touched.append(copy)
    return touched


def _holds(final: Path, sha: str) -> bool:
    from oom_wizard.storage.changelog import sha256_of

    try:
        return final.is_file() and sha256_of(final.read_bytes()) == sha
    except OSError:
        return False


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
