"""Files written all or none: one file (:func:`atomic_write`) or a pair (:func:`commit_pair`),
and the recovery of what a killed process left half done (:func:`recover`).

The commit of a pair goes: both files are written to temp files in their destination folders
and fsynced; a journal naming the files and both hashes is written and fsynced in every folder
the commit touches (each copy naming them relative to its own folder); with ``replace``, each
file about to be replaced gets a hard-linked backup first; the files are renamed into place,
the last one last; the folders are fsynced; the backups and the journals are removed. A
failure at any step puts back what was there. Catchable signals (SIGINT, SIGTERM) are held
off during the renames. For SIGKILL, :func:`recover` finishes or undoes what a dead process
left (see :mod:`oom_wizard.storage.save` for how a config save uses it).

A database pair (:mod:`oom_wizard.storage.jobdb`) is the same commit with its commit point
moved: the change log's temp and the journal are written, then the row's transaction
commits (``commit``), then the change log is renamed in.

Every write step calls :data:`STEP_HOOK` when a test has set it: the seam the fault tests
use to fail or kill a save at each step deterministically. This module needs no model of a
config: the settings file and the demo's copy are written through it before one is loaded.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import signal
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from oom_wizard.errors import NameTaken, SaveRefused
from oom_wizard.storage.leftovers import (
    MARK,
    NAME as LEFTOVER_NAME,
    alive,
    dead_leftovers,
    journal_name,
    journal_of,
    note_unfinished,
    note_unresolved,
    save_name,
    temp_name,
)

#: Called as ``STEP_HOOK(step, path)`` before every write step of a save (tests only).
STEP_HOOK: Callable[[str, Path], None] | None = None

_written: list[Path] = []


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
    commit: Callable[[], None] | None = None,
    row: RowCommit | None = None,
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
        commit: Called once the temps and the journal are on disk, before the first rename:
            the commit point of a database pair (its transaction's ``COMMIT``). Once it has
            returned, nothing is undone: a rename that fails then is left to :func:`recover`
            (the journal stays) and the error says so.
        row: What the journal records of that commit, so that :func:`recover` can tell
            whether it happened (``commit`` and ``row`` come together).

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
    committed = False
    current = files[0][0]
    try:
        for (path, data), temp in zip(files, temps, strict=True):
            current = path
            _write_temp(temp, data, mode, created)
        with signals_held():
            if journal:
                current = journal_path
                _step("journal", journal_path)
                entries = [
                    (path, temp, backup, _sha(data))
                    for (path, data), temp, backup in zip(files, temps, backups, strict=True)
                ]
                for written in journal_paths:
                    current = written
                    text = _journal_text(written, entries, replace, journal_paths, row)
                    _write_temp(written, text, 0o600, created)
                    _fsync_dir(written.parent)
            if replace:
                for (path, _), backup in zip(files, backups, strict=True):
                    if path.exists():
                        current = path
                        _step("backup", path)
                        _backup(path, backup)
                        created.append(backup)
            if commit is not None:
                _step("commit", journal_path)
                commit()
                committed = True
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
        if committed:
            # The database took the commit: nothing may be undone now. The journal and the
            # temps stay, and the next run's recovery renames the rest in (:func:`recover`).
            if not isinstance(exc, (OSError, SaveRefused)):
                raise
            raise SaveRefused(
                f"the save was committed, but {what(current)} could not be put in place "
                f"({_reason(exc)}); it is kept beside it, and the next oom-wizard command "
                "run on this job puts it in place",
                file=current,
            ) from None
        lost = _roll_back(files, temps, backups, renamed, replace)
        for leftover in created:
            if leftover not in lost.values():
                with contextlib.suppress(OSError):
                    _unlink(leftover)
        _forget([path for path, _ in files])
        if not wrap or not isinstance(exc, (OSError, SaveRefused)):
            raise
        raise _refusal(exc, current, what, lost) from None


@dataclass(frozen=True)
class RowCommit:
    """The commit point of a database pair, as its journal records it: the row ``job_id`` of
    the jobs database ``db_path`` holds a config with SHA-256 ``sha256``, stamped
    ``updated_at`` (Prisma's milliseconds), once the transaction committed and not before.
    ``before`` is the SHA-256 of the config the row held until then (None: a new row)."""

    db_path: Path
    job_id: str
    sha256: str
    updated_at: int
    before: str | None = None


#: The journal's format: 2 names every path relative to the journal's own folder.
JOURNAL_VERSION: Final = 2


def _journal_text(
    journal: Path,
    entries: list[tuple[Path, Path, Path, str]],
    replace: bool,
    journals: list[Path],
    row: RowCommit | None,
) -> bytes:
    """The journal at ``journal``: every path relative to its own folder, so that it means
    the same from any working folder (and after the whole tree is moved)."""
    here = journal.parent
    record: dict[str, object] = {
        "version": JOURNAL_VERSION,
        "files": [
            {
                "final": _relative(final, here),
                "temp": _relative(temp, here),
                "backup": _relative(backup, here),
                "sha256": sha,
            }
            for final, temp, backup, sha in entries
        ],
        "replace": replace,
        "journals": [_relative(path, here) for path in journals],
    }
    if row is not None:
        record["database"] = {
            "path": _relative(row.db_path, here),
            "job_id": row.job_id,
            "sha256": row.sha256,
            "updated_at": row.updated_at,
            "before": row.before,
        }
    return json.dumps(record).encode("utf-8")


def _relative(path: Path, folder: Path) -> str:
    """``path`` as seen from ``folder``, both through their real folders (a symlinked folder
    and a ``..`` then agree: ``..`` is taken on the real path, as the system takes it)."""
    real = os.path.join(os.path.realpath(path.parent), path.name)
    return os.path.relpath(real, os.path.realpath(folder))


def _reason(exc: BaseException) -> str:
    if isinstance(exc, SaveRefused):
        return exc.message
    assert isinstance(exc, OSError)
    return str(exc.strerror or exc)


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

    return hashlib.sha256(data).hexdigest()


_HELD: Final = frozenset({signal.SIGINT, signal.SIGTERM})


@contextlib.contextmanager
def signals_held(*, mask: bool = hasattr(signal, "pthread_sigmask")) -> Iterator[None]:
    """Hold SIGINT and SIGTERM off while the renames run (main thread only).

    A signal that arrives meanwhile is delivered when the block ends, so it lands
    before the renames or after all of them, never between. POSIX masks them; Windows has no
    signal mask (``mask`` False), so there they are noted by handlers of our own meanwhile and
    raised again once the block ends.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if not mask:
        with _signals_noted():
            yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@contextlib.contextmanager
def _signals_noted() -> Iterator[None]:
    """SIGINT and SIGTERM noted, not acted on, until the block ends; then raised again."""
    noted: list[int] = []
    previous = {
        held: signal.signal(held, lambda number, _frame: noted.append(number)) for held in _HELD
    }
    try:
        yield
    finally:
        for held, handler in previous.items():
            signal.signal(held, handler)
        for number in dict.fromkeys(noted):
            signal.raise_signal(number)


# ------------------------------------------------------------------ recovery


def recover(folder: Path) -> tuple[Path, ...]:
    """Finish or undo the saves that dead processes left in ``folder``; return what changed.

    A journal whose commit point was passed rolls forward: the remaining temps are renamed
    in. The commit point of a file pair is its first rename (a final name holds the bytes the
    journal recorded for it); that of a database pair is its row's commit. Any other journal
    rolls back: its temps and backups are removed and every final name is left as it was. A
    journal whose files are not where it says (a folder renamed since, a database that cannot
    be read now) is left as it is, with every file of its save, and noted
    (:func:`oom_wizard.storage.leftovers.unresolved_notes`). Temps and backups of a save
    without a journal in their folder (a process killed before its renames began) are
    removed. Only the tool's own names whose process is gone are touched
    (:func:`oom_wizard.storage.leftovers.dead_leftovers`), and a journal is followed only for
    the names its own save could have made (:func:`_read_journal`): one that names anything
    else is left as it is, with every file it names, and noted. A committed save that cannot
    be finished now (a read-only folder) is left for a later run and recorded as such
    (:func:`oom_wizard.storage.leftovers.unfinished_in`). Other errors are ignored (recovery
    never stops a save).
    """
    touched: list[Path] = []
    for kind, path in dead_leftovers(folder):
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            if kind == "journal":
                touched.extend(_replay(path))
            elif path.exists() and not journal_of(path).exists():
                # A save's journal is on disk before its first rename, in the folder of
                # every file it renames: without one, this temp or backup was never needed.
                _unlink(path)
                touched.append(path)
    return tuple(touched)


def recover_beside(*paths: Path, wait_s: float = 0.0) -> None:
    """Before a job is opened: finish or undo a killed save in the folders of ``paths``.

    A save killed between its two renames (or between a database's commit and its change
    log's rename) leaves a config and a change log that do not belong together until its
    journal is replayed (``save.recover``). Every use case that opens a job calls this
    first, before it reads anything, so that what it reads next is the old pair or the new
    one and the reads themselves write nothing. With ``wait_s``, a save that another live
    process is committing there right now is waited for (up to ``wait_s`` seconds), so that
    a job is never read between the two halves of a pair.
    """
    settle(*dict.fromkeys(Path(path).parent for path in paths), wait_s=wait_s)


def settle(*folders: Path, wait_s: float = 0.0) -> None:
    """:func:`recover_beside` for the folders themselves."""
    for folder in folders:
        _wait_for_live_commits(folder, wait_s)
        if dead_leftovers(folder):
            recover(folder)


def _wait_for_live_commits(folder: Path, wait_s: float) -> None:
    """Wait (up to ``wait_s``) until no other live process has a journal in ``folder``."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and _live_journals(folder):
        time.sleep(0.01)


def _live_journals(folder: Path) -> bool:
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                match = LEFTOVER_NAME.match(entry.name) if MARK in entry.name else None
                if match is None or match.group("kind") != "journal":
                    continue
                pid = int(match.group("pid"))
                if pid != os.getpid() and alive(pid):
                    return True
    except OSError:
        return False
    return False


@dataclass(frozen=True)
class _Entry:
    """One file of a journal, its paths resolved. ``own``: its folder is the journal's or holds
    a copy of it, so recovery may act on it; otherwise it is only looked at (a folder whose copy
    an earlier recovery already removed)."""

    final: Path
    temp: Path
    backup: Path
    sha256: str
    own: bool = True


@dataclass(frozen=True)
class _Journal:
    """A journal as read: its files, its copies in other folders (each checked to be the same
    journal), and ``foreign``: the first name in it that its own save could not have made
    (None: every one could)."""

    files: tuple[_Entry, ...]
    replace: bool
    copies: tuple[Path, ...]
    row: dict[str, object] | None
    database: Path | None
    foreign: str | None


#: How much of a journal is read (a real one is a few hundred bytes).
_JOURNAL_MAX: Final = 1024 * 1024


def _replay(journal: Path) -> list[Path]:
    """Finish (roll forward) or undo (roll back) the commit that ``journal`` describes.

    A journal is a request, not an order: it is followed only for the names its own save could
    have made (:func:`_read_journal`); one that names anything else is left as it is, with every
    file it names, and noted.
    """
    try:
        read = _read_journal(journal)
    except (ValueError, KeyError, TypeError, AttributeError):
        # Cut short while it was written: it is fsynced before the first rename, so no
        # rename happened. Its temps are strays of a dead process, removed like any other.
        _unlink(journal)
        return [journal]
    if read.foreign is not None:
        _note_foreign(journal, read.foreign)
        return []
    files = list(read.files)
    # Every file of the save is either still its temp or in place with its bytes: a journal
    # whose files are elsewhere (or gone) is not understood, and nothing of it is touched.
    # Only in a folder without its copy may a temp be gone: the save was killed before it
    # wrote that copy (no rename happened), and the temp was swept as a stray.
    gone = [entry for entry in files if not entry.temp.exists() and not _holds(entry)]
    missing = [entry for entry in gone if entry.own or not entry.final.parent.is_dir()]
    committed = (
        _row_committed(read.database, read.row)
        if read.row is not None and read.database is not None
        else _any_holds(files)
    )
    if committed and not missing:
        missing = gone  # past the commit point, every file must be there to finish it
    if missing or committed is None:
        _note_unresolved(journal, files, missing, read.row if committed is None else None)
        return []
    if not committed:
        # Before the commit point: the journals go first (the temps left without one are
        # strays the next recovery removes), then every temp and backup (its own names: in
        # any folder it names, with or without its copy there, only they are removed).
        touched = _remove([*read.copies, journal])
        return touched + _remove([path for entry in files for path in (entry.temp, entry.backup)])
    mine = [entry for entry in files if entry.own]
    refused = _unsafe_forward(files, read.replace)
    if refused is not None:
        _note_foreign(journal, refused)
        return []
    touched = []
    try:
        for entry in mine:
            if entry.temp.exists() and not _holds(entry):
                try:
                    _rename_in(entry.temp, entry.final, replace=read.replace)
                except OSError as exc:
                    _note_unfinished(journal, entry, exc)
                    return touched
                touched.append(entry.final)
    except SaveRefused:
        # A name was taken meanwhile (never without --force): undo ours instead.
        for entry in mine:
            if read.replace and entry.backup.exists():
                os.replace(entry.backup, entry.final)
            elif _holds(entry):
                _unlink(entry.final)
            touched.append(entry.final)
    touched += _remove([path for entry in mine for path in (entry.temp, entry.backup)])
    # Its copies in the other folders go last: until then, either folder can replay it.
    return touched + _remove([*read.copies, journal])


def _unsafe_forward(files: list[_Entry], replace: bool) -> str | None:
    """Why rolling ``files`` forward would do what no save of the tool leaves to do (None: it
    would not): rename into a folder without the journal, rename what is not a plain file, or
    replace a file whose backup (made before the first rename of a save) is not a copy of it."""
    for entry in files:
        if entry.temp.exists() and not _holds(entry):
            if not entry.own:
                return f"{entry.final} is in a folder that does not hold this journal"
            if not _regular(entry.temp):
                return f"{entry.temp.name} is not a plain file"
            present = entry.final.exists() or entry.final.is_symlink()
            if replace and present and not _backs_up(entry):
                return f"{entry.final.name} would be replaced, and it has no backup"
    return None


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _backs_up(entry: _Entry) -> bool:
    """Whether ``entry``'s backup is a copy of its final (a hard link, or the same bytes)."""
    if not _regular(entry.backup) or not _regular(entry.final):
        return False
    try:
        if os.path.samefile(entry.backup, entry.final):
            return True
        return entry.backup.read_bytes() == entry.final.read_bytes()
    except OSError:
        return False


def _read_journal(journal: Path) -> _Journal:
    """``journal``, read, its names checked against those its own save could have made.

    A save of process PID with token TOKEN writes ``.NAME.oomw-PID-TOKEN.tmp`` (and ``.bak``)
    beside each file NAME, in the folder of that file, and a copy of its journal in each of
    those folders. So every path is relative; a temp and a backup carry the journal's own PID
    and token and the name of their file; each file is in the journal's folder or in one that
    holds a copy of the same journal (or held it: one an earlier recovery finished, which is
    then only looked at); a database is the one the folder is named after, two folders up
    (``jobdb.changelog_folder``). Anything else makes ``foreign`` say what.

    Raises:
        ValueError, KeyError, TypeError, AttributeError: not a journal (cut short).
    """
    base, raw, replace, named, row = _journal_fields(journal)
    match = LEFTOVER_NAME.match(journal.name)
    if match is None:
        raise ValueError(journal.name)
    pid, token = int(match.group("pid")), match.group("token")
    own = os.path.realpath(journal.parent)
    foreign = _foreign_name(raw, named, pid, token, journal.name)
    copies: list[Path] = []
    holding = {own}
    named_folders = {own}
    if foreign is None:
        signature = _signature(base, raw, replace)
        for rel in named:
            copy = Path(_real(base, rel))
            named_folders.add(str(copy.parent))
            if str(copy.parent) == own:
                continue
            if not copy.exists() and not copy.is_symlink():
                continue  # removed by an earlier recovery of this journal
            same = _same_journal(copy, signature)
            if same is False:
                foreign = f"{rel} is not a copy of it"
                break
            copies.append(copy)
            if same:
                holding.add(str(copy.parent))
    files = []
    for final, temp, backup, sha in raw:
        folder = os.path.realpath(os.path.join(base, os.path.dirname(final)))
        if foreign is None and folder not in named_folders:
            foreign = f"{final} is outside the folders it names"
        files.append(
            _Entry(
                Path(folder, os.path.basename(final)),
                Path(folder, os.path.basename(temp)),
                Path(folder, os.path.basename(backup)),
                sha,
                own=folder in holding,
            )
        )
    database = None
    if row is not None:
        path = str(row["path"])
        database = Path(_real(base, path))
        expected = os.path.join(os.path.dirname(os.path.dirname(own)), os.path.basename(own))
        if foreign is None and (_absolute(path) or str(database) != expected):
            foreign = f"{path} is not the jobs database of this folder"
    return _Journal(tuple(files), replace, tuple(copies), row, database, foreign)


def _journal_fields(
    journal: Path,
) -> tuple[Path, list[tuple[str, str, str, str]], bool, list[str], dict[str, object] | None]:
    """A journal's fields as written: the folder its paths start from, its files (final,
    temp, backup, hash), ``replace``, its copies, its database row."""
    with open(journal, "rb") as stream:
        record = json.loads(stream.read(_JOURNAL_MAX))
    if not isinstance(record, dict):
        raise TypeError("not a journal")
    items = record["files"]
    named = record.get("journals", [])
    if not isinstance(items, list) or not isinstance(named, list):
        raise TypeError("not a journal")
    raw = [
        (str(item["final"]), str(item["temp"]), str(item["backup"]), str(item["sha256"]))
        for item in items
    ]
    row = record.get("database")
    if row is not None and not isinstance(row, dict):
        raise TypeError("not a journal")
    copies = [str(path) for path in named]
    return _journal_base(journal, record), raw, bool(record["replace"]), copies, row


def _foreign_name(
    raw: list[tuple[str, str, str, str]], named: list[str], pid: int, token: str, name: str
) -> str | None:
    """The first name that the save ``pid``/``token`` could not have written (None: none)."""
    for final, temp, backup, _ in raw:
        for path in (final, temp, backup):
            if _absolute(path):
                return f"{path} is an absolute path"
        folder, bare = os.path.split(final)
        if bare in ("", os.curdir, os.pardir):
            return f"{final} is not a file name"
        for path, kind in ((temp, "tmp"), (backup, "bak")):
            expected = save_name(bare, pid, token, kind)  # type: ignore[arg-type]
            if os.path.split(path) != (folder, expected):
                return f"{path} is not the {'temp' if kind == 'tmp' else 'backup'} of {final}"
    for path in named:
        if _absolute(path):
            return f"{path} is an absolute path"
        if os.path.basename(path) != name:
            return f"{path} is not a copy of {name}"
    return None


def _absolute(path: str) -> bool:
    """An absolute path on this system or any other (``/x``, ``C:\\x``, ``\\\\host\\x``)."""
    return os.path.isabs(path) or path.startswith(("/", "\\")) or (len(path) > 1 and path[1] == ":")


def _real(base: Path, path: str) -> str:
    """``base / path``, its folder resolved (the file itself, a link or not, is not)."""
    joined = os.path.join(base, path)
    return os.path.join(os.path.realpath(os.path.dirname(joined)), os.path.basename(joined))


def _signature(
    base: Path, raw: list[tuple[str, str, str, str]], replace: bool
) -> tuple[object, ...]:
    """What a journal's copies must agree on: its files, resolved, and ``replace``."""
    files = tuple(
        (_real(base, final), _real(base, temp), _real(base, backup), sha)
        for final, temp, backup, sha in raw
    )
    return (files, replace)


def _same_journal(copy: Path, signature: tuple[object, ...]) -> bool | None:
    """Whether ``copy`` is a plain file holding the same journal (its paths from its folder);
    None when it was cut short while it was written (so no rename of its save happened)."""
    if not _regular(copy):
        return False
    try:
        base, raw, replace, _, _ = _journal_fields(copy)
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    except OSError:
        return False
    return _signature(base, raw, replace) == signature


def _journal_base(journal: Path, record: dict[str, object]) -> Path:
    """The folder a journal's relative paths start from: its own (real) folder; for a
    journal of an earlier version, which named them from the working folder of its save,
    the working folder now (what cannot be found from there is left alone)."""
    if record.get("version") == JOURNAL_VERSION:
        return Path(os.path.realpath(journal.parent))
    return Path.cwd()


def _any_holds(files: list[_Entry]) -> bool:
    """The renames run in order, so a file pair got past its point of no return when any
    final name holds the bytes it was to receive."""
    return any(_holds(entry) for entry in files)


def _row_committed(db_path: Path, row: dict[str, object]) -> bool | None:
    """Whether a database pair's transaction committed: the row holds the saved config,
    stamped when it was saved (None: the database cannot be read now, so nobody can tell)."""
    import sqlite3  # deferred: only a database pair's journal needs it

    if not db_path.is_file():
        return None
    try:
        # Read-write (never created): SQLite itself rolls back what the dead process left
        # half-written in the database file before answering.
        uri = f"{db_path.resolve().as_uri()}?mode=rw"
        conn = sqlite3.connect(uri, uri=True, timeout=3.0, isolation_level=None)
        try:
            found = conn.execute(
                'SELECT "job_config", "updated_at" FROM "Job" WHERE "id" = ?', (str(row["job_id"]),)
            ).fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    if found is None:
        return False
    config, stamp = found
    now = _sha(str(config).encode("utf-8"))
    if now == row["sha256"] and stamp == row["updated_at"]:
        return True
    if now == row.get("before") or not isinstance(stamp, int):
        return False  # still the config from before the save
    # A third config: the row was changed since (in the UI). It was changed after the save
    # committed when it was stamped after it; the change log then keeps that save's run.
    return stamp > int(str(row["updated_at"]))


def _note_unresolved(
    journal: Path, files: list[_Entry], missing: list[_Entry], row: object
) -> None:
    what = (
        f"its jobs database {Path(str(row['path'])).name} cannot be read now"
        if isinstance(row, dict) and not missing
        else "these files are not where it says: "
        + ", ".join(f"{entry.final} (or its temp {entry.temp.name})" for entry in missing)
    )
    kept = ", ".join(entry.temp.name for entry in files if entry.temp.exists()) or "none"
    note_unresolved(
        f"{journal}: a save killed earlier left this journal, and {what}; it and the save's "
        f"temp files ({kept}) are left as they are: move the folders back, or copy the temp "
        "files you need, then delete the journal"
    )


def _note_unfinished(journal: Path, entry: _Entry, exc: OSError) -> None:
    """A committed save whose next rename failed now: said as what it is (a read-only folder
    is not an edit), its temp and journal kept for a run where the folder can be written."""
    read_only = exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM)
    why = (
        f"its folder {entry.final.parent} is read-only"
        if read_only
        else f"{entry.final.name} could not be put in place ({exc.strerror or exc})"
    )
    note_unfinished(
        journal.parent,
        f"a save killed earlier was committed, but could not be finished because {why}; "
        f"its new {entry.final.name} is kept as {entry.temp.name}, and the next oom-wizard "
        "command run where the folder can be written finishes it",
    )
    note_unresolved(
        f"{journal}: a save killed earlier was committed and could not be finished because "
        f"{why}; it and {entry.temp.name} are kept until a command runs where it can be written"
    )


def _note_foreign(journal: Path, why: str) -> None:
    note_unresolved(
        f"{journal}: a save journal that oom-wizard did not follow, because {why}: a save of "
        "oom-wizard never writes that, so nothing it names was touched; delete it if you "
        "did not expect it"
    )


def _remove(paths: Iterable[Path]) -> list[Path]:
    """Remove each of ``paths`` that exists; return those removed."""
    removed = []
    for path in paths:
        if path.exists():
            _unlink(path)
            removed.append(path)
    return removed


def _holds(entry: _Entry) -> bool:

    try:
        return entry.final.is_file() and _sha(entry.final.read_bytes()) == entry.sha256
    except OSError:
        return False


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def mode_of(source: Path | None) -> int:
    if source is not None:
        with contextlib.suppress(OSError):
            return stat.S_IMODE(source.stat().st_mode)
    return 0o644


def same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except OSError:
        return False
