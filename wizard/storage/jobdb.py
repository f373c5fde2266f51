"""AI Toolkit's jobs database: list a UI job, load it, save the fix back, restore it.

The toolkit's web UI keeps every job in a SQLite file, ``aitk_db.db`` in the
toolkit's folder, in the ``Job`` table of its Prisma schema. The job's config is
the ``job_config`` column (``JSON.stringify`` of the config), and the UI writes it
to ``<training folder>/<job>/.job_config.json`` on every start, so a fix reaches a
UI run only through this table.

Every write happens in one ``BEGIN IMMEDIATE`` transaction that first re-reads the
row: a job that is running (also with a stop pending), stopping or queued, or whose
config changed since it was loaded, is never touched. The trainer and the UI hold
the database only briefly; we wait a few seconds for them and otherwise refuse
with one line, having written nothing. The change log of a database job lives
beside the database, ``oom-wizard/<database file>/<job id>.changelog.json``: keyed by
the database and the ``Job`` table's primary key, so jobs whose names differ only in
characters a file name cannot hold (``a/b`` and ``a_b``), renamed jobs and jobs of two
databases in one folder never share a log. Each in-place save keeps the exact
``job_config`` it replaced there, which :func:`restore_job` puts back.

Prisma's SQLite connector stores ``DateTime`` as integer milliseconds since the
Unix epoch and ``Boolean`` as 0/1; so do we.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import time
import unicodedata
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final, TypeAlias

from oom_wizard.errors import ConfigError, JobDatabaseError, SaveRefused, WizardError
from oom_wizard.files import file_kind
from oom_wizard.formats.document import MAX_CONFIG_BYTES, JobDocument, parse_document
from oom_wizard.storage.atomic import (
    RowCommit,
    atomic_write,
    commit_pair,
    forget_written,
    note_written,
    settle,
    signals_held,
)
from oom_wizard.storage.changelog import (
    ChangeEntry,
    ChangeLog,
    DatabaseRecord,
    FileRef,
    RunFacts,
    RunRecord,
    changelog_for,
    read_changelog,
    sha256_of,
)
from oom_wizard.storage.changes import Change, Prepared, prepare
from oom_wizard.storage.jobdir import JobIdentity, JobLocation, choose_log
from oom_wizard.storage.leftovers import SETTLE_WAIT_S, alive

#: How long we wait for the UI or a trainer to release the database, in seconds.
BUSY_TIMEOUT_S: Final = 3.0

#: Statuses in which nothing runs the job and nothing will start it on its own.
SETTLED_STATUSES: Final = frozenset({"stopped", "error", "completed"})

#: Columns of ``Job`` that every AI Toolkit version with a web UI has, and that we use.
REQUIRED_COLUMNS: Final = (
    "id",
    "name",
    "gpu_ids",
    "job_config",
    "created_at",
    "updated_at",
    "status",
    "stop",
    "step",
    "info",
)

#: Columns we read when the table has them (newer toolkit versions).
OPTIONAL_COLUMNS: Final = ("return_to_queue", "queue_position", "pid", "job_type", "job_ref")

#: The ``job_type`` of a training job (AI Toolkit's UI also makes ``caption`` jobs, since
#: 2026-04, whose ``job_config`` is not a training config). A table without the column is
#: older than caption jobs: every row is a training job.
TRAIN_JOB_TYPE: Final = "train"

#: The database's file name in the toolkit's folder.
DB_FILE_NAME: Final = "aitk_db.db"

#: The folder beside ``aitk_db.db`` that holds the change logs of database jobs.
CHANGELOG_FOLDER: Final = "oom-wizard"

#: The name of a job saved as new: ``<name>_oomfix``, then ``<name>_oomfix_2``...
CLONE_TAG: Final = "oomfix"

_CLONE_NAME = re.compile(rf"^(?P<base>.+)_{CLONE_TAG}(?:_(?P<n>\d+))?$")
_PLAIN_ID = re.compile(r"[A-Za-z0-9_-]{1,100}")
_UNSAFE_FILE_CHARS = re.compile(r'[\\/:*?"<>|\x00-\x1f]')
_NAME_PATH = ("config", "name")


# ------------------------------------------------------------------ values


@dataclass(frozen=True)
class DbJob:
    """One row of the ``Job`` table, as it was when read.

    Attributes:
        db_path: The database file.
        id: The row's uuid.
        name: The job's unique name (also its folder name under the training folder).
        gpu_ids: The GPUs the UI runs it on (``"0"``, ``"0,1"``, ``"mps"``).
        job_config: The stored JSON text, exactly as read.
        status: ``stopped``, ``queued``, ``running``, ``stopping``, ``completed`` or ``error``.
        step: The last step the trainer recorded.
        info: The UI's status line; after a crash, the error text.
        stop: A stop was requested (the flag stays set after the job stopped, until the
            next start; it is pending only while the job still runs).
        return_to_queue: A stop-and-requeue was requested (pending while the job runs).
        pid: The trainer's process id the UI recorded (newer toolkit versions), or None.
        job_type: ``train``, or ``caption`` for the UI's dataset captioning jobs.
    """

    db_path: Path
    id: str
    name: str
    gpu_ids: str
    job_config: str
    status: str
    step: int
    info: str
    stop: bool = False
    return_to_queue: bool = False
    pid: int | None = None
    job_type: str = TRAIN_JOB_TYPE

    @property
    def source(self) -> Path:
        """A descriptive pseudo path for messages: ``.../aitk_db.db#job=NAME.json``."""
        return job_source(self.db_path, self.name)

    @property
    def changelog_path(self) -> Path:
        """Where this job's change log is written: ``<db folder>/oom-wizard/<db file>/<id>...``."""
        return job_changelog_path(self.db_path, self.id)

    @property
    def changelog_to_read(self) -> Path:
        """Where this job's change log is read from: :attr:`changelog_path`, or, until the
        job is saved again, where earlier versions of oom-wizard kept it by the job's name
        (:func:`legacy_changelog_path`) when that log tells this job's story. The next save
        or restore carries its runs over to :attr:`changelog_path`; the old file stays."""
        keyed = self.changelog_path
        if keyed.is_file():
            return keyed
        legacy = legacy_changelog_path(self.db_path, self.name)
        return legacy if _tells_of(legacy, self.id) else keyed

    @property
    def file_stem(self) -> str:
        """The job's name made safe as one file name (for an output named after the job)."""
        return _file_part(self.name)

    @property
    def error(self) -> str | None:
        """The first line of the error the trainer stored, when the job ended in an error."""
        if self.status != "error" or not self.info.strip():
            return None
        return self.info.strip().splitlines()[0]

    @property
    def crashed_while_running(self) -> bool:
        """The row says ``running`` but the trainer's process (``pid``) is gone: the job
        crashed without the UI noticing (it is not busy; nothing runs it)."""
        return self.status == "running" and self.pid is not None and not _process_alive(self.pid)

    @property
    def status_words(self) -> str:
        """The status as the user reads it: the row's, except that a ``running`` row whose
        process is gone says so (it is not running)."""
        if self.crashed_while_running:
            return f"{self.status}, but its process is gone (crashed)"
        return self.status

    @property
    def running_words(self) -> str | None:
        """What the row says of a job still running, in words (None when it says nothing):
        the diagnosis's one sign, with the processes on the card, that a log which just stops
        may belong to a live job."""
        if self.status not in ("running", "stopping") or self.crashed_while_running:
            return None
        return f"the web UI says job '{self.name}' is {self.status}"

    @property
    def status_short(self) -> str:
        """The status in a column of a list: ``crashed`` for a ``running`` row whose process
        is gone, else the row's."""
        return "crashed" if self.crashed_while_running else self.status

    def crashed_note(self) -> str | None:
        """What to say about a ``running`` row whose process is gone (None otherwise)."""
        if not self.crashed_while_running:
            return None
        return (
            f"job '{self.name}' is marked running, but its process (pid {self.pid}) is gone: "
            "it crashed without AI Toolkit's UI noticing, so nothing runs it and oom-wizard "
            "goes on (the UI's Stop button, or 'mark stopped', tidies its status)"
        )

    def new_job_warning(self) -> str:
        """What saving as a new job costs: AI Toolkit trains a job into
        ``<training_folder>/<name>/`` and resumes from the newest checkpoint there, so a new
        name starts an empty folder (the app, the command line and the change log say it,
        each front end with its own way to keep them)."""
        return (
            "A new name starts a new output folder: the checkpoints and steps made so far "
            f"(step {self.step} of '{self.name}') are not resumed."
        )

    def busy_reason(self) -> str | None:
        """Why this job must not be written now, or None when it is safe to write."""
        name = self.name
        if self.crashed_while_running:
            return None
        if self.status == "running" and (self.stop or self.return_to_queue):
            return (
                f"job '{name}' has a stop pending; wait until AI Toolkit's UI shows it stopped, "
                "then run oom-wizard again"
            )
        if self.status == "running":
            return (
                f"job '{name}' is running; stop it in AI Toolkit's UI and wait until it shows "
                "stopped, then run oom-wizard again"
            )
        if self.status == "stopping":
            return f"job '{name}' is stopping; wait until AI Toolkit's UI shows it stopped"
        if self.status == "queued":
            return (
                f"job '{name}' is queued and may start at any moment; remove it from the queue "
                "in AI Toolkit's UI first"
            )
        if self.status not in SETTLED_STATUSES:
            return (
                f"job '{name}' has status '{self.status}', which oom-wizard does not know; "
                "it is left untouched"
            )
        return None


@dataclass(frozen=True)
class InPlace:
    """Save by updating the job's own row (``oom-wizard restore`` undoes it)."""


@dataclass(frozen=True)
class AsNew:
    """Save as a new job, like the UI's Clone.

    Attributes:
        name: The new job's name; None picks ``<name>_oomfix`` (then ``_2``, ``_3``...).
    """

    name: str | None = None


SaveMode: TypeAlias = InPlace | AsNew


@dataclass(frozen=True)
class DbSaveResult:
    """What a save or a restore wrote to the database.

    Attributes:
        db_path: The database file.
        job_id: The row written (the new row for a save as new).
        job_name: Its name: the job to start in the UI.
        origin_name: The job it was made from (the same name when updated in place).
        in_place: The job's own row was updated (False: a new row was inserted).
        changelog: The change log written.
        entries: The field changes this save made.
        restored_run: For a restore, the change log's run whose save was undone.
        warning: What the save costs (a new job does not resume the old one's checkpoints).
        log: The change log as written (so that nothing reads it back; None: not known).
    """

    db_path: Path
    job_id: str
    job_name: str
    origin_name: str
    in_place: bool
    changelog: Path
    entries: tuple[ChangeEntry, ...]
    restored_run: int | None = None
    warning: str | None = None
    log: ChangeLog | None = field(default=None, compare=False, repr=False)

    def next_step(self) -> str:
        """Exactly what to do next in AI Toolkit's UI."""
        start = (
            f"Next: start job '{self.job_name}' in AI Toolkit's UI (Jobs page, its Start ▶ "
            "button); the UI writes the new config to .job_config.json when the job starts."
        )
        if self.in_place:
            return start
        return f"{start} Job '{self.origin_name}' is unchanged."


# ---------------------------------------------------------------- locations


def find_db(path: Path) -> Path:
    """The database file: ``path`` itself, or ``aitk_db.db`` inside it when it is a folder."""
    return path / DB_FILE_NAME if path.is_dir() else path


def job_source(db_path: Path, name: str) -> Path:
    """The pseudo path that names a database job in messages and change logs."""
    return db_path.with_name(f"{db_path.name}#job={_file_part(name)}.json")


def changelog_folder(db_path: Path) -> Path:
    """``<db folder>/oom-wizard/<db file name>/``: where the change logs of the database's
    jobs are, and the journals of their saves."""
    return db_path.parent / CHANGELOG_FOLDER / db_path.name


def job_changelog_path(db_path: Path, job_id: str) -> Path:
    """``<db folder>/oom-wizard/<db file name>/<job id>.changelog.json``.

    An id that is not a plain token (the UI's are UUIDs) is replaced by its hash, so that
    two ids never map to one file.
    """
    key = job_id if _PLAIN_ID.fullmatch(job_id) else "id-" + _sha(job_id)[:32]
    return changelog_folder(db_path) / f"{key}.changelog.json"


def legacy_changelog_path(db_path: Path, name: str) -> Path:
    """``<db folder>/oom-wizard/<name>.changelog.json``: where earlier versions of oom-wizard
    kept a job's change log, by its name (so ``a/b`` and ``a_b`` shared one)."""
    return db_path.parent / CHANGELOG_FOLDER / f"{_file_part(name)}.changelog.json"


def _tells_of(path: Path, job_id: str) -> bool:
    """Whether the change log at ``path`` has a run that read or wrote job ``job_id`` (a log
    shared by name with another job does not; one that cannot be read is not taken)."""
    if not path.is_file():
        return False
    try:
        log = read_changelog(path)
    except (WizardError, OSError):
        return False
    records = [run.database for run in log.runs]
    return any(r is not None and job_id in (r.job_id, r.new_job_id) for r in records)


def _file_part(name: str) -> str:
    """A job name made safe as one file name (path separators and the like become ``_``)."""
    safe = _UNSAFE_FILE_CHARS.sub("_", name).strip()
    return "_" if safe in ("", ".", "..") else safe


# ----------------------------------------------------------------- reading


def list_jobs(db_path: Path, *, busy_timeout: float = BUSY_TIMEOUT_S) -> tuple[DbJob, ...]:
    """Every job in the database, newest first (as the UI lists them).

    Raises:
        JobDatabaseError: the file is missing, not a SQLite database, not AI Toolkit's
            jobs database, or stayed locked for ``busy_timeout`` seconds.
    """
    with _connect(db_path, write=False, busy_timeout=busy_timeout) as conn:
        columns = _table_info(conn, db_path)
        only_training = 'WHERE "job_type" = ? ' if "job_type" in columns else ""
        rows = conn.execute(
            f'SELECT {_select_list(columns)} FROM "Job" {only_training}ORDER BY "created_at" DESC',
            (TRAIN_JOB_TYPE,) if only_training else (),
        ).fetchall()
    return tuple(_job_from_row(db_path, row) for row in rows)


def load_job(db_path: Path, name: str, *, busy_timeout: float = BUSY_TIMEOUT_S) -> DbJob:
    """The job called ``name``.

    Raises:
        JobDatabaseError: as :func:`list_jobs`, or no job has that name (the message
            lists the names there are).
    """
    with _connect(db_path, write=False, busy_timeout=busy_timeout) as conn:
        columns = _table_info(conn, db_path)
        row = conn.execute(
            f'SELECT {_select_list(columns)} FROM "Job" WHERE "name" = ?', (name,)
        ).fetchone()
        if row is None:
            only_training = ' WHERE "job_type" = ?' if "job_type" in columns else ""
            names = [
                found[0]
                for found in conn.execute(
                    f'SELECT "name" FROM "Job"{only_training} ORDER BY 1',
                    (TRAIN_JOB_TYPE,) if only_training else (),
                )
            ]
            raise JobDatabaseError(_no_such_job(name, names), file=db_path)
    job = _job_from_row(db_path, row)
    if job.job_type != TRAIN_JOB_TYPE:
        what = (
            "a caption job (AI Toolkit's dataset captioning)"
            if job.job_type == "caption"
            else (f"a '{job.job_type}' job")
        )
        raise JobDatabaseError(
            f"job '{name}' is {what}, not a training job: its config is not a training config, "
            "and oom-wizard fixes training jobs only",
            file=db_path,
        )
    return job


def job_document(job: DbJob) -> JobDocument:
    """The job's config as a document: the same typed view and plan as a ``.json`` file.

    Raises:
        ConfigError: the stored JSON is broken, too large or not a valid job config.
    """
    if len(job.job_config.encode("utf-8")) > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"the stored config is larger than {MAX_CONFIG_BYTES // (1024 * 1024)} MiB, "
            "which no job config is",
            file=job.source,
        )
    document = parse_document(job.job_config, source=job.source, fmt="json")
    document.view()  # validate now, as load_document does
    return document


def training_roots(
    job: DbJob, tree: dict[str, Any], *, busy_timeout: float = BUSY_TIMEOUT_S
) -> tuple[Path, ...]:
    """Where the UI may have put the job's folder, most likely first.

    The config's ``process[0].training_folder`` (the UI fills it from its setting), then
    the ``TRAINING_FOLDER`` setting, then the UI's default ``<toolkit>/output``. Relative
    paths are taken from the toolkit's folder, where the database is and the trainer runs.
    """
    toolkit = job.db_path.parent
    found: list[str] = []
    process = _first_process(tree)
    if isinstance(process.get("training_folder"), str):
        found.append(process["training_folder"])
    setting = _setting(job.db_path, "TRAINING_FOLDER", busy_timeout=busy_timeout)
    if setting:
        found.append(setting)
    found.append("output")
    roots: list[Path] = []
    for text in found:
        root = toolkit / Path(text).expanduser()
        if root not in roots:
            roots.append(root)
    return tuple(roots)


def locate_job_log(
    job: DbJob, tree: dict[str, Any], *, busy_timeout: float = BUSY_TIMEOUT_S
) -> JobLocation:
    """The job's log, chosen in its folder as for any UI job folder, and a note saying which.

    The ``config`` of the result is the job's pseudo path (the config is in the database).

    Raises:
        LogError: a log in the job's folder cannot be read.
    """
    roots = training_roots(job, tree, busy_timeout=busy_timeout)
    folder = _folder_in(roots, job.name)
    if folder is None:
        where = " or ".join(str(root) for root in roots)
        note = f"the job's folder '{job.name}' is not in {where}; pass its log with --log"
        return JobLocation(config=job.source, log=None, log_note=note, ui_job=True)
    log, note, scan = choose_log(folder, JobIdentity(job.name, job.id))
    return JobLocation(
        config=job.source, log=log, log_note=note, ui_job=True, log_scan=scan, folder=folder
    )


def _folder_in(roots: Sequence[Path], name: str) -> Path | None:
    return next((root / name for root in roots if (root / name).is_dir()), None)


def read_job_changelog(job: DbJob) -> ChangeLog | None:
    """The change log that describes the job's current config, if there is one.

    A log whose last save is not what the database holds now (the job was edited in
    the UI since) describes another config, and is not returned.

    Raises:
        WizardError: the change log file is damaged.
    """
    belonging = changelog_for(job.source, job.job_config.encode("utf-8"), job.changelog_to_read)
    return belonging.log if belonging is not None and not belonging.edited else None


# ----------------------------------------------------------------- writing


def save_to_db(
    prepared: Prepared,
    job: DbJob,
    mode: SaveMode,
    run_facts: RunFacts,
    *,
    busy_timeout: float = BUSY_TIMEOUT_S,
    prior: ChangeLog | None,
) -> DbSaveResult:
    """Save ``prepared`` (made from ``job_document(job)``) into the database, after ``prior``,
    the job's change log as the open read it (:func:`read_job_changelog`; None: none).

    ``InPlace`` updates the job's ``job_config`` and ``updated_at``; ``AsNew`` inserts a
    row like the UI's Clone (new uuid, a free name that ``config.name`` follows, status
    ``stopped``, the same GPUs). Either way in one transaction, and only when the job is
    settled and unchanged since it was read; the change log is written before the
    transaction commits and put back if the commit fails.

    Raises:
        JobDatabaseError: the job is busy, changed, gone, the name is taken, the
            database stayed locked or lacks columns we need. Nothing is written.
        EditError: ``config.name`` cannot be changed for a save as new.
    """
    if prepared.before.text != job.job_config:
        raise ValueError("the prepared changes were not made from this job's config")
    if isinstance(mode, AsNew) and mode.name is not None:
        problem = new_job_name_problem(mode.name.strip())
        if problem is not None:
            raise JobDatabaseError(f"{problem}; nothing was written", file=job.db_path)
    _check_writable_folder(job)
    run = run_facts.record(DatabaseRecord(job_id=job.id, job_name=job.name))
    if isinstance(mode, InPlace):
        with _connect(job.db_path, write=True, busy_timeout=busy_timeout) as conn:
            _begin(conn, job)
            return _update_in_place(conn, job, prepared, prior, run)
    roots = training_roots(job, prepared.after.tree, busy_timeout=busy_timeout)
    with _connect(job.db_path, write=True, busy_timeout=busy_timeout) as conn:
        columns = _begin(conn, job)
        name = _new_name(conn, job, roots, mode.name)
        return _insert_copy(conn, columns, job, prepared, prior, run, name)


def request_save_now(db_path: Path, name: str, *, busy_timeout: float = BUSY_TIMEOUT_S) -> str:
    """Ask the running job ``name`` to save a checkpoint at its next step, as the UI's
    "save now" does: ``save_now = true`` on its row, and nothing else (no other column, no
    other row). The trainer clears it once it has saved. A retry then resumes from there.

    Returns:
        The line to show: what was asked.

    Raises:
        JobDatabaseError: the job is not running (or its process is gone, or a stop is
            pending), the table has no ``save_now`` column (an older AI Toolkit), or the
            database stayed locked. Nothing is written.
    """
    with _connect(db_path, write=True, busy_timeout=busy_timeout) as conn:
        conn.execute("BEGIN IMMEDIATE")
        columns = _table_info(conn, db_path)
        if "save_now" not in columns:
            raise JobDatabaseError(
                "this AI Toolkit's Job table has no save_now column (the UI's \"save now\" "
                "came later); nothing was written",
                file=db_path,
            )
        row = conn.execute(
            f'SELECT {_select_list(columns)} FROM "Job" WHERE "name" = ?', (name,)
        ).fetchone()
        if row is None:
            raise JobDatabaseError(f"no job '{name}'; nothing was written", file=db_path)
        job = _job_from_row(db_path, row)
        if job.status != "running" or job.crashed_while_running:
            now = "its process is gone" if job.crashed_while_running else f"it is {job.status}"
            raise JobDatabaseError(
                f"job '{name}' is not running ({now}), so there is nothing to save a checkpoint "
                "of; nothing was written",
                file=db_path,
            )
        if job.stop or job.return_to_queue:
            raise JobDatabaseError(
                f"job '{name}' has a stop pending; nothing was written", file=db_path
            )
        conn.execute(
            'UPDATE "Job" SET "save_now" = 1 WHERE "id" = ? AND "status" = ?', (job.id, "running")
        )
        conn.execute("COMMIT")
    return (
        f"Asked job '{name}' to save a checkpoint at its next step (save_now, as the UI's "
        "Save button does); a retry resumes from it"
    )


def restore_job(
    job: DbJob, *, force: bool = False, busy_timeout: float = BUSY_TIMEOUT_S
) -> DbSaveResult:
    """Put back the ``job_config`` that the last in-place save replaced.

    Restores walk back one save at a time. The restore is a run of its own in the
    change log, with the reverse changes, so the log still tells the whole story.

    Args:
        job: The job, as just loaded.
        force: Restore even though the job was edited in the UI since our last save
            (those edits are lost).
        busy_timeout: Seconds to wait for a locked database.

    Raises:
        JobDatabaseError: no change log, nothing left to restore, the job is busy or was
            edited since, or the database stayed locked. Nothing is written.
    """
    path = job.changelog_to_read
    if not path.is_file():
        raise JobDatabaseError(
            f"oom-wizard has not updated job '{job.name}' in place (no change log here), "
            "so there is nothing to restore",
            file=path,
        )
    log = read_changelog(path)
    if log.output.sha256 != _sha(job.job_config) and _interrupted_save(log, job):
        raise JobDatabaseError(
            f"the last save of job '{job.name}' by oom-wizard was interrupted before the "
            "database took it: the job still has the config from before that save, so "
            "there is nothing of it to restore (its change log keeps every earlier config)",
            file=path,
        )
    target = _restorable_run(log, job)
    if log.output.sha256 != _sha(job.job_config) and not force:
        raise JobDatabaseError(
            f"job '{job.name}' was changed in AI Toolkit's UI after oom-wizard saved it; "
            "restoring would lose those edits (pass --force to restore anyway)",
            file=path,
        )
    record = log.runs[target].database
    previous = record.job_config_before if record is not None else None
    assert previous is not None  # _restorable_run picks only in-place saves that kept it
    entries = tuple(
        ChangeEntry(
            run=0,
            step=entry.step,
            path=entry.path,
            before=entry.after,
            after=entry.before,
            reason=f"restored the config saved before run {target}",
        )
        for entry in reversed(log.changes_of_run(target))
    )
    run = RunFacts("restore").record(
        DatabaseRecord(job_id=job.id, job_name=job.name, undoes=target)
    )
    new_log = log.with_run(
        run, entries, output=FileRef(path=str(job.source), sha256=_sha(previous))
    )
    _check_writable_folder(job)
    with _connect(job.db_path, write=True, busy_timeout=busy_timeout) as conn:
        _begin(conn, job)
        stamp = _write_config(conn, job, previous)
        row = RowCommit(job.db_path, job.id, _sha(previous), stamp, before=_sha(job.job_config))
        _commit_with_log(conn, job.changelog_path, new_log, row, set_aside=False)
    result = _result(
        job, job.id, job.name, in_place=True, changelog=job.changelog_path, entries=entries
    )
    return replace(result, restored_run=target)


# ------------------------------------------------------------- the writes


def _update_in_place(
    conn: sqlite3.Connection,
    job: DbJob,
    prepared: Prepared,
    prior: ChangeLog | None,
    run: RunRecord,
) -> DbSaveResult:
    after = prepared.after.text
    run = _with_database(run, saved="in_place", job_config_before=job.job_config)
    log = _base_log(job, prior).with_run(
        run, prepared.entries, output=FileRef(path=str(job.source), sha256=_sha(after))
    )
    stamp = _write_config(conn, job, after)
    path = job.changelog_path
    row = RowCommit(job.db_path, job.id, _sha(after), stamp, before=_sha(job.job_config))
    _commit_with_log(conn, path, log, row, set_aside=prior is None)
    return _result(
        job, job.id, job.name, in_place=True, changelog=path, entries=prepared.entries, log=log
    )


def _write_config(conn: sqlite3.Connection, job: DbJob, text: str) -> int:
    """Replace the job's ``job_config`` with ``text`` and stamp ``updated_at``; return the
    stamp (with the config's hash, how a journal tells that the row committed)."""
    stamp = _now_ms()
    conn.execute(
        'UPDATE "Job" SET "job_config" = ?, "updated_at" = ? WHERE "id" = ?',
        (text, stamp, job.id),
    )
    return stamp


def _insert_copy(
    conn: sqlite3.Connection,
    columns: dict[str, _Column],
    job: DbJob,
    prepared: Prepared,
    prior: ChangeLog | None,
    run: RunRecord,
    name: str,
) -> DbSaveResult:
    renamed = prepare(
        prepared.after,
        [Change(_NAME_PATH, name, reason=f"the name of the new job, a copy of '{job.name}'")],
    )
    entries = (*prepared.entries, *renamed.entries)
    new_id = str(uuid.uuid4())
    new_source = job_source(job.db_path, name)
    run = _with_database(
        run, saved="as_new", new_job_id=new_id, new_job_name=name, warning=job.new_job_warning()
    )
    log = _base_log(job, prior).with_run(
        run, entries, output=FileRef(path=str(new_source), sha256=_sha(renamed.after.text))
    )
    now = _now_ms()
    values: dict[str, Any] = {
        "id": new_id,
        "name": name,
        "gpu_ids": job.gpu_ids,
        "job_config": renamed.after.text,
        "created_at": now,
        "updated_at": now,
        "status": "stopped",
    }
    if "queue_position" in columns:
        (highest,) = conn.execute('SELECT MAX("queue_position") FROM "Job"').fetchone()
        values["queue_position"] = (highest or 0) + 1000
    _check_fillable(columns, values, job)
    names = ", ".join(f'"{column}"' for column in values)
    marks = ", ".join("?" for _ in values)
    conn.execute(f'INSERT INTO "Job" ({names}) VALUES ({marks})', tuple(values.values()))
    path = job_changelog_path(job.db_path, new_id)
    row = RowCommit(job.db_path, new_id, _sha(renamed.after.text), now)
    _commit_with_log(conn, path, log, row, set_aside=False)
    result = _result(job, new_id, name, in_place=False, changelog=path, entries=entries, log=log)
    return replace(result, warning=job.new_job_warning())


def _new_name(
    conn: sqlite3.Connection, job: DbJob, roots: Sequence[Path], wanted: str | None
) -> str:
    """A name no job, job folder or change log has yet (an explicit one must be free).

    A job folder left by a deleted job counts as taken: the trainer would resume from
    the checkpoints it finds there.
    """
    taken = {row[0] for row in conn.execute('SELECT "name" FROM "Job"')}

    def free(name: str) -> bool:
        return name not in taken and not any((root / name).exists() for root in roots)

    if wanted is not None:
        wanted = wanted.strip()
        if not free(wanted):
            raise JobDatabaseError(f"{_taken_words(wanted)}; nothing was written", file=job.db_path)
        return wanted
    match = _CLONE_NAME.match(job.name)
    base = match.group("base") if match else job.name
    number = int(match.group("n") or 1) + 1 if match else 1
    while True:
        name = f"{base}_{CLONE_TAG}" if number == 1 else f"{base}_{CLONE_TAG}_{number}"
        problem = new_job_name_problem(name)  # the rule holds for the name we make up too
        if problem is not None:
            raise JobDatabaseError(
                f"{problem}; it comes from the job's own name '{job.name}', so give the new "
                "job a name of its own (--as-new NAME); nothing was written",
                file=job.db_path,
            )
        if free(name):
            return name
        number += 1


def _taken_words(name: str) -> str:
    return f"the name '{name}' is taken (a job, its folder or its change log has it); pick another"


def taken_name_problem(
    job: DbJob, name: str, *, busy_timeout: float = BUSY_TIMEOUT_S
) -> str | None:
    """Why ``name`` cannot name a new job copied from ``job`` because something has it
    already (a job, a job folder), as the save as new refuses it; None when it is free
    (the app's "New name" field says it as it is typed).

    Raises:
        JobDatabaseError: the database cannot be read.
    """
    wanted = name.strip()
    if not wanted:
        return None
    roots = training_roots(job, job_document(job).tree, busy_timeout=busy_timeout)
    with _connect(job.db_path, write=False, busy_timeout=busy_timeout) as conn:
        taken = {row[0] for row in conn.execute('SELECT "name" FROM "Job"')}
    if wanted in taken or any((root / wanted).exists() for root in roots):
        return _taken_words(wanted)
    return None


#: The longest job name: AI Toolkit makes it a folder name (``<training folder>/<name>``).
MAX_JOB_NAME_BYTES: Final = 255


def new_job_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a new job, or None when it can.

    AI Toolkit's UI requires a name (its "Training Name" field is ``required``) that no job
    has (the ``Job.name`` column is ``@unique``: checked against the database on save), and
    the trainer writes the job to ``<training folder>/<name>/``: so a name must also be one
    folder name, never a path. Refused: an empty name, path separators (``/``, ``\\``), a
    ``..``, a name that is only ``.``, control characters (a newline, a tab, ...), and a name
    longer than a folder name can be.
    """
    shown = name.encode("unicode_escape").decode("ascii")
    if not name.strip():
        return "the new job's name is empty; AI Toolkit's UI requires one"
    if any(unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp") for char in name):
        return (
            f"the new job's name '{shown}' holds a control character (a newline, a tab ...); "
            "AI Toolkit names the job's folder after it: use letters, digits, _ and -"
        )
    if "/" in name or "\\" in name:
        return (
            f"the new job's name '{name}' holds a path separator, so AI Toolkit would write "
            "the job outside its training folder: use letters, digits, _ and -"
        )
    if ".." in name or name.strip() == ".":
        return (
            f"the new job's name '{name}' holds '..' (or is '.'), a folder name that climbs out "
            "of the training folder: use letters, digits, _ and -"
        )
    if len(name.encode("utf-8")) > MAX_JOB_NAME_BYTES:
        return (
            f"the new job's name is longer than the {MAX_JOB_NAME_BYTES} bytes a folder name "
            "can be; pick a shorter name"
        )
    return None


def _begin(conn: sqlite3.Connection, job: DbJob) -> dict[str, _Column]:
    """Take the write lock and check that the job may still be written as we read it."""
    conn.execute("BEGIN IMMEDIATE")
    columns = _table_info(conn, job.db_path)
    row = conn.execute(
        f'SELECT {_select_list(columns)} FROM "Job" WHERE "id" = ?', (job.id,)
    ).fetchone()
    if row is None:
        raise JobDatabaseError(
            f"job '{job.name}' is no longer in the database; nothing was written",
            file=job.db_path,
        )
    now = _job_from_row(job.db_path, row)
    reason = now.busy_reason()
    if reason is not None:
        raise JobDatabaseError(f"{reason}; nothing was written", file=job.db_path)
    if now.job_config != job.job_config or now.name != job.name:
        raise JobDatabaseError(
            f"job '{job.name}' {_changed_by(now)} while oom-wizard had it open; "
            "nothing was written: run oom-wizard again on the new version",
            file=job.db_path,
        )
    return columns


def _changed_by(now: DbJob) -> str:
    """Who changed the job: another save of this tool (its change log names the config the
    database holds now), or, failing that, AI Toolkit's UI."""

    # Another run's pair may be just between its commit and its change log's rename (or
    # have died there): let it land first, then read the log.
    settle(changelog_folder(now.db_path), wait_s=SETTLE_WAIT_S)
    with contextlib.suppress(WizardError, OSError):
        path = now.changelog_to_read
        if path.is_file() and read_changelog(path).output.sha256 == _sha(now.job_config):
            return "was just saved by another oom-wizard run"
    return "was changed in AI Toolkit's UI"


def _interrupted_save(log: ChangeLog, job: DbJob) -> bool:
    """The log's last in-place save never reached the database: the job still holds the
    exact config that save recorded as its starting point (a kill during the commit)."""
    last = log.last_run()
    if last is None:
        return False
    before = last.database.job_config_before if last.database is not None else None
    return before is not None and before == job.job_config


def _commit_with_log(
    conn: sqlite3.Connection, path: Path, log: ChangeLog, row: RowCommit, *, set_aside: bool
) -> None:
    """Commit the row and its change log as one pair: the row's commit is the commit point.

    The new change log is written to a temp file beside ``path`` and a journal recording
    ``row`` is written and fsynced; then the transaction commits; then the change log is
    renamed in (``save.commit_pair``). A kill before the commit leaves the row and the log
    as they were (the next open rolls the temp back); a kill after it leaves the row saved,
    and the next open renames the change log in (``save.recover``), whatever folder it runs
    from.

    Args:
        conn: The connection, inside the write transaction.
        path: Where the change log goes.
        log: The change log to write.
        row: What the commit puts in the row (for the journal).
        set_aside: Keep an existing log at ``path`` under another name (it describes an
            older version of the job) instead of replacing it.
    """
    aside: Path | None = None
    try:
        # Ctrl-C and SIGTERM wait until the pair (log, commit) is done or undone, so the
        # exit line can say exactly what was written.
        with signals_held():
            path.parent.mkdir(parents=True, exist_ok=True)
            if set_aside and path.is_file():
                aside = _aside_path(path)
                atomic_write(aside, path.read_bytes(), replace=True)
            commit_pair(
                [(path, log.to_json().encode("utf-8"))],
                replace=True,
                wrap=False,
                what=lambda _: "the change log",
                commit=lambda: _commit(conn),
                row=row,
            )
            note_written(Path(f"{conn_db_name(conn)} (job '{log_job_name(log)}')"))
    except BaseException as exc:
        if conn.in_transaction:  # not committed: the folder goes back as it was too
            if aside is not None:
                aside.unlink(missing_ok=True)
            forget_written([path])
        else:
            note_written(Path(f"{conn_db_name(conn)} (job '{log_job_name(log)}')"))
        if isinstance(exc, SaveRefused):
            raise JobDatabaseError(exc.message, file=path) from None
        if isinstance(exc, OSError):
            raise JobDatabaseError(
                f"cannot write the change log: {exc.strerror or exc}; nothing was written",
                file=path,
            ) from None
        raise


def _commit(conn: sqlite3.Connection) -> None:
    conn.execute("COMMIT")


def conn_db_name(conn: sqlite3.Connection) -> str:
    """The file of the connection's main database."""
    row = conn.execute("PRAGMA database_list").fetchone()
    return str(row[2]) if row is not None else "the jobs database"


def log_job_name(log: ChangeLog) -> str:
    """The job the last run of ``log`` saved (its database record), for the exit line."""
    last = log.last_run()
    database = last.database if last is not None else None
    if database is None:
        return "?"
    return database.new_job_name or database.job_name


def _aside_path(path: Path) -> Path:
    """``NAME.changelog.json`` → the first free ``NAME.changelog.old-N.json``."""
    stem = path.name.removesuffix(".json")
    number = 1
    while (candidate := path.with_name(f"{stem}.old-{number}.json")).exists():
        number += 1
    return candidate


def _check_writable_folder(job: DbJob) -> None:
    folder = job.changelog_path.parent
    writable = next(
        (f for f in (folder, folder.parent, folder.parent.parent) if f.is_dir()), folder
    )
    if not os.access(writable, os.W_OK | os.X_OK):
        raise JobDatabaseError(
            f"cannot write the change log in {folder}; nothing was written", file=job.db_path
        )


def _check_fillable(columns: dict[str, _Column], values: dict[str, Any], job: DbJob) -> None:
    """Refuse a table with a NOT NULL column that has no default and that we do not fill."""
    unknown = [
        column.name for column in columns.values() if column.required and column.name not in values
    ]
    if unknown:
        raise JobDatabaseError(
            f"the Job table needs a value for {', '.join(unknown)}, which this AI Toolkit "
            "version added and oom-wizard does not know; nothing was written",
            file=job.db_path,
        )


# --------------------------------------------------------------- the log


def _with_database(run: RunRecord, **extra: Any) -> RunRecord:
    """The run with more of what it did to the database (how it saved, what it kept)."""
    if run.database is None:
        raise ValueError("only a run on a database job records what it did to the database")
    return run.model_copy(update={"database": run.database.model_copy(update=extra)})


def _base_log(job: DbJob, prior: ChangeLog | None) -> ChangeLog:
    if prior is not None:
        return prior
    source = FileRef(path=str(job.source), sha256=_sha(job.job_config))
    return ChangeLog(source=source, output=source)


def _restorable_run(log: ChangeLog, job: DbJob) -> int:
    """The latest in-place save of this job that no restore has undone yet."""
    records = [run.database for run in log.runs]
    undone = {record.undoes for record in records if record is not None}
    saves = [
        index
        for index, record in enumerate(records)
        if record is not None
        and record.job_id == job.id
        and record.saved == "in_place"
        and record.job_config_before is not None
    ]
    left = [index for index in saves if index not in undone]
    if left:
        return left[-1]
    if saves:
        message = f"every in-place save of job '{job.name}' has been undone already"
    else:
        message = f"oom-wizard has not updated job '{job.name}' in place"
        origins = [
            record.job_name
            for record in records
            if record is not None and record.new_job_id == job.id
        ]
        if origins:
            message += (
                f"; it made it as a copy of '{origins[-1]}', which is unchanged: "
                f"start '{origins[-1]}' to go back"
            )
    raise JobDatabaseError(f"nothing to restore: {message}", file=job.changelog_path)


def _result(
    job: DbJob,
    job_id: str,
    name: str,
    *,
    in_place: bool,
    changelog: Path,
    entries: tuple[ChangeEntry, ...],
    log: ChangeLog | None = None,
) -> DbSaveResult:
    return DbSaveResult(
        db_path=job.db_path,
        job_id=job_id,
        job_name=name,
        origin_name=job.name,
        in_place=in_place,
        changelog=changelog,
        entries=entries,
        log=log,
    )


# ------------------------------------------------------------- SQLite


@dataclass(frozen=True)
class _Column:
    """One column of the ``Job`` table, from ``PRAGMA table_info``."""

    name: str
    required: bool  # NOT NULL without a default: an INSERT must give a value


@contextlib.contextmanager
def _connect(db_path: Path, *, write: bool, busy_timeout: float) -> Iterator[sqlite3.Connection]:
    """A connection in autocommit mode; SQLite errors become one clear line.

    An open transaction is rolled back when the block raises.
    """
    if not db_path.is_file():
        raise JobDatabaseError(f"{_what_is(db_path)}; {_WHERE_THE_DB_IS}", file=db_path)
    # A writer killed mid-transaction leaves a hot rollback journal, which SQLite rolls back on
    # the next read, and only through a connection that may write: a read opens read-write then
    # (it writes nothing of its own), where the file lets it.
    writable = write or (_hot_journal(db_path) and os.access(db_path, os.W_OK))
    uri = f"{db_path.resolve().as_uri()}?mode={'rw' if writable else 'ro'}"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=busy_timeout, isolation_level=None)
    except sqlite3.Error as exc:
        if "unable to open" in str(exc) and _is_wal(db_path):
            raise _database_error(exc, db_path, busy_timeout) from None
        raise JobDatabaseError(f"cannot open the database: {exc}", file=db_path) from None
    conn.row_factory = sqlite3.Row
    try:
        yield conn
    except sqlite3.Error as exc:
        raise _database_error(exc, db_path, busy_timeout) from None
    finally:
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        conn.close()


_WHERE_THE_DB_IS: Final = "AI Toolkit's jobs database is aitk_db.db in the toolkit's folder"


def _what_is(path: Path) -> str:
    """What a path that is not a regular file is: missing, a folder, a FIFO, a device..."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "no such file"
    except OSError as exc:
        return f"cannot look at it: {exc.strerror or exc}"
    kind = file_kind(mode)
    if kind == "a folder":
        return f"a folder without {DB_FILE_NAME}"
    if kind == "not a regular file":
        return "not a regular file, so not a database"
    return f"this is {kind}, not a database"


def _database_error(exc: sqlite3.Error, db_path: Path, busy_timeout: float) -> JobDatabaseError:
    text = str(exc)
    if "locked" in text or "busy" in text:
        return JobDatabaseError(
            f"the jobs database stayed locked for {busy_timeout:g} s (AI Toolkit's UI or a "
            "trainer is writing to it); nothing was written: try again in a moment",
            file=db_path,
        )
    if isinstance(exc, sqlite3.IntegrityError):
        return JobDatabaseError(
            f"the database refused the change ({text}); nothing was written", file=db_path
        )
    if "not a database" in text or "malformed" in text:
        return JobDatabaseError(
            "this is not a SQLite database (or it is damaged); AI Toolkit's jobs database "
            "is aitk_db.db in the toolkit's folder",
            file=db_path,
        )
    if "unable to open" in text and _is_wal(db_path):
        return JobDatabaseError(
            "this database is in WAL mode, and SQLite must create its -wal and -shm files "
            f"beside it in {db_path.parent}, which it cannot (read-only media or folder): "
            "copy aitk_db.db with its -wal file to a writable folder, or open it where AI "
            "Toolkit runs; nothing was written",
            file=db_path,
        )
    if "readonly" in text:
        return JobDatabaseError(
            "the database is read-only for you; nothing was written", file=db_path
        )
    return JobDatabaseError(f"SQLite error: {text}; nothing was written", file=db_path)


def _hot_journal(db_path: Path) -> bool:
    """A rollback journal beside the database that is not empty (SQLite's own test for a hot
    one adds the locks, which it takes itself when it opens)."""
    try:
        return db_path.with_name(db_path.name + "-journal").stat().st_size > 0
    except OSError:
        return False


def _is_wal(db_path: Path) -> bool:
    """The file's header says WAL mode (bytes 18 and 19 are 2)."""
    try:
        with db_path.open("rb") as handle:
            header = handle.read(20)
    except OSError:
        return False
    return len(header) == 20 and header[18] == 2 and header[19] == 2


def _table_info(conn: sqlite3.Connection, db_path: Path) -> dict[str, _Column]:
    rows = conn.execute('PRAGMA table_info("Job")').fetchall()
    if not rows:
        raise JobDatabaseError(
            "no Job table: this is not AI Toolkit's jobs database (aitk_db.db in the "
            "toolkit's folder)",
            file=db_path,
        )
    columns = {
        row["name"]: _Column(
            row["name"], required=bool(row["notnull"]) and row["dflt_value"] is None
        )
        for row in rows
    }
    missing = [name for name in REQUIRED_COLUMNS if name not in columns]
    if missing:
        raise JobDatabaseError(
            f"the Job table has no column {', '.join(missing)}: a different AI Toolkit version "
            "than oom-wizard knows; nothing was read or written",
            file=db_path,
        )
    return columns


def _step_of(value: Any) -> int:
    """The ``step`` column as a step number; anything that is not one (text, a fraction,
    a negative) reads as 0, "not started": it only ever describes, never decides."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(value, 0)
    if isinstance(value, float) and value.is_integer() and 0 <= value < 1e15:
        return int(value)
    if isinstance(value, str) and value.strip().isdigit() and len(value.strip()) < 20:
        return int(value.strip())
    return 0


def _select_list(columns: dict[str, _Column]) -> str:
    wanted = [*REQUIRED_COLUMNS, *(name for name in OPTIONAL_COLUMNS if name in columns)]
    return ", ".join(f'"{name}"' for name in wanted)


def _job_from_row(db_path: Path, row: sqlite3.Row) -> DbJob:
    values = dict(zip(row.keys(), row, strict=True))
    return DbJob(
        db_path=db_path,
        id=str(values["id"]),
        name=str(values["name"]),
        gpu_ids=str(values["gpu_ids"]),
        job_config=str(values["job_config"]),
        status=str(values["status"]),
        step=_step_of(values["step"]),
        info=str(values["info"] or ""),
        stop=bool(values["stop"]),
        return_to_queue=bool(values.get("return_to_queue") or 0),
        pid=_pid_of(values.get("pid")),
        job_type=str(values.get("job_type") or TRAIN_JOB_TYPE),
    )


def _pid_of(value: Any) -> int | None:
    """The ``pid`` column as a process id (None: not recorded, or not a process id)."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    return value


def _process_alive(pid: int) -> bool:

    return alive(pid)


def _setting(db_path: Path, key: str, *, busy_timeout: float) -> str | None:
    """A value of the UI's ``Settings`` table, or None (also when the table is absent)."""
    with _connect(db_path, write=False, busy_timeout=busy_timeout) as conn:
        if not conn.execute('PRAGMA table_info("Settings")').fetchall():
            return None
        row = conn.execute('SELECT "value" FROM "Settings" WHERE "key" = ?', (key,)).fetchone()
    return str(row[0]) if row is not None and row[0] else None


# --------------------------------------------------------------- helpers


def _first_process(tree: dict[str, Any]) -> dict[str, Any]:
    config = tree.get("config")
    processes = config.get("process") if isinstance(config, dict) else None
    if isinstance(processes, list) and processes and isinstance(processes[0], dict):
        return processes[0]
    return {}


def _no_such_job(name: str, names: Sequence[str]) -> str:
    if not names:
        return f"no job '{name}': the database has no jobs"
    shown = ", ".join(f"'{found}'" for found in names[:10])
    more = f" and {len(names) - 10} more" if len(names) > 10 else ""
    return f"no job '{name}'; the jobs are {shown}{more}"


def _sha(text: str) -> str:
    return sha256_of(text.encode("utf-8"))


def _now_ms() -> int:
    """Now, as Prisma's SQLite connector stores a DateTime: milliseconds since the epoch."""
    return time.time_ns() // 1_000_000
