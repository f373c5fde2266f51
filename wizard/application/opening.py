"""Opening a job: a config file, a job folder or a web-UI job, with its log, its change
log and the GPU, read once into one :class:`OpenedJob`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from oom_wizard.errors import WizardError
from oom_wizard.formats.document import load_document
from oom_wizard.host.probe import read_probe
from oom_wizard.logs.scan import scan_log
from oom_wizard.rules.diagnosis import diagnose
from oom_wizard.rules.limits import check_changelog, check_document, probe_problem
from oom_wizard.storage.atomic import recover_beside, settle
from oom_wizard.storage.changelog import (
    EditedSinceSave,
    changelog_for,
    changelog_path_for,
    refuse_edited,
)
from oom_wizard.storage.jobdb import (
    changelog_folder,
    find_db,
    job_document,
    list_jobs as db_jobs,
    load_job,
    locate_job_log,
)
from oom_wizard.storage.jobdir import JobIdentity, config_of, logs_of, run_log_for
from oom_wizard.storage.leftovers import SETTLE_WAIT_S, unfinished_in

if TYPE_CHECKING:
    from oom_wizard.formats.document import JobDocument
    from oom_wizard.host.probe import ProbeResult
    from oom_wizard.logs.result import LogScan
    from oom_wizard.request import JobRequest
    from oom_wizard.rules.diagnosis import Diagnosis
    from oom_wizard.storage.changelog import Belonging, ChangeLog
    from oom_wizard.storage.jobdb import DbJob
    from oom_wizard.storage.jobdir import JobLocation


@dataclass(frozen=True)
class OpenedJob:
    """A job as read: its config, its log and change log, the GPU now, and the log's verdict.

    Attributes:
        document: The config as loaded (never written).
        log_path: The training log used for the diagnosis, if any.
        log_note: Which log was taken and why (or why there is none), from the job folder.
        scan: What the log shows (read once, here).
        changelog: The change log that describes this config, when it is our own output.
        changelog_path: Where that change log is.
        ui_job: The config is the web UI's ``.job_config.json``: the fix goes back into the UI.
        db_job: The row of AI Toolkit's jobs database the config was read from, when it was
            (``document.source`` is then the job's pseudo path, not a file).
        probe: The GPU as ``nvidia-smi`` showed it at the open (None: not probed, or none).
        log_diagnosis: The diagnosis before any answer of the user: what "the log points to"
            shows, whatever the user picks.
        changelog_note: What to say about that change log (the config was edited after our
            save and the user goes on with it), None: nothing.
        probe_note: Why nvidia-smi's answer was ignored (not its answer, or figures no card
            has), None: it was not.
        crashed_since_rollback: The log is newer than the change log's last roll-back and
            shows a crash: the retry of our own fix crashed too (the plan goes a rung further).
        card_read: A reading of the card the caller made already (``run``: before its first
            attempt, while no trainer of its own held the card): the job's card and its other
            tenants come from it where the open made no probe. The diagnosis does not read it
            (a crash is told by its own log; a reading from before it is not the card "now").
    """

    document: JobDocument
    log_path: Path | None
    log_note: str | None
    scan: LogScan | None
    changelog: ChangeLog | None
    changelog_path: Path | None
    ui_job: bool
    db_job: DbJob | None
    probe: ProbeResult | None
    log_diagnosis: Diagnosis
    crashed_since_rollback: bool
    changelog_note: str | None = None
    probe_note: str | None = None
    card_read: ProbeResult | None = None

    @property
    def source(self) -> Path:
        """The config file the job was opened from (a database job's pseudo path)."""
        return self.document.source

    @property
    def card_probe(self) -> ProbeResult | None:
        """What the job's card is read from: the probe at the open, else the caller's
        reading (:attr:`card_read`)."""
        return self.probe if self.probe is not None else self.card_read


# The domain is imported where a job is opened, not with the module: the load screen asks
# for its light names (the log suffixes, the picker's folder) before its first frame.


def open_job(request: JobRequest, *, card_read: ProbeResult | None = None) -> OpenedJob:
    """Read what the request names: the config, its log, its change log, and the GPU
    (``card_read``: the caller's reading of the card, :attr:`OpenedJob.card_read`).

    This reads files (and the database): the app runs it in a worker thread.

    Raises:
        WizardError: nothing to open, no such job, or a config, log or change log that
            cannot be read (the change log too: see the module's policy).
    """

    if request.db is not None:
        if request.job is None:
            raise WizardError("pick a job with --job NAME (without it, --db lists the jobs)")

        job, belonging = _db_job_in_step(find_db(request.db), request.job)
        document = job_document(job)
        located = locate_job_log(job, document.tree)
        db_job: DbJob | None = job
    elif request.target is not None:
        config, folder = config_of(request.target)
        changelog_file = request.changelog or changelog_path_for(config)
        # A save killed in either folder is finished or undone first: from here on the job is
        # only read, and reads the old pair or the new one.
        recover_beside(config, changelog_file)
        document = load_document(config)
        # The folder's logs are read once the job is known (its own only), and not for --log.
        located = logs_of(config, folder if request.log is None else None, _identity(document))
        belonging = changelog_for(
            config,
            _bytes_of(config),
            changelog_file,
            given=request.changelog is not None,
        )
        db_job = None
    else:
        raise WizardError("give the job's config file (or its folder), or --db PATH --job NAME")
    check_document(document)
    if belonging is not None and belonging.edited and not request.edited_ok:
        # A committed save that could not be finished (a read-only folder) is not an edit.
        unfinished = unfinished_in(belonging.path.parent)
        if unfinished is not None:
            raise WizardError(f"{unfinished}; nothing was written", file=belonging.path)
        raise refuse_edited(belonging, document.source)
    if belonging is not None:
        check_changelog(belonging.log, belonging.path)
    changelog = belonging.log if belonging is not None else None
    changelog_path = belonging.path if belonging is not None else None
    log_path, note, scan = _chosen_log(located, request.log, _identity(document, db_job))
    probe, probe_note = _probe() if request.probe else (None, None)
    running = db_job.running_words if db_job is not None else None
    log_diagnosis = diagnose(
        scan, document.view(), answers=None, probe=probe, changelog=changelog, running=running
    )
    return OpenedJob(
        document=document,
        log_path=log_path,
        log_note=note,
        scan=scan,
        changelog=changelog,
        changelog_path=changelog_path if changelog is not None else None,
        ui_job=located.ui_job,
        db_job=db_job,
        probe=probe,
        log_diagnosis=log_diagnosis,
        crashed_since_rollback=_crashed_since(log_path, changelog, log_diagnosis),
        changelog_note=belonging.note(document.source) if belonging is not None else None,
        probe_note=probe_note,
        card_read=card_read,
    )


def edited_words(refusal: Exception) -> str:
    """The app's question for a config edited after our save (the command line's refusal
    asks for ``--edited-ok``; the app asks yes or no instead)."""

    if not isinstance(refusal, EditedSinceSave):
        return str(refusal)
    belonging = refusal.belonging
    return (
        f"{refusal.file}: edited after oom-wizard saved it: its SHA-256 is not the one its "
        f"change log {belonging.path} recorded, so that log's story may not describe it. "
        "Go on from the file as it is now, with that change log?"
    )


def _bytes_of(path: Path) -> bytes:
    """The config's bytes as read (for the change log's SHA-256), empty when unreadable."""
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _identity(document: JobDocument, db_job: DbJob | None = None) -> JobIdentity:
    """The job as its log would name it: ``config.name``, and a web-UI job's id."""
    if db_job is not None:
        return JobIdentity(db_job.name, db_job.id)
    name = document.get(("config", "name"))
    return JobIdentity(name if isinstance(name, str) and name.strip() else None)


def _chosen_log(
    located: JobLocation, log: Path | None, identity: JobIdentity
) -> tuple[Path | None, str | None, LogScan | None]:
    """The log given by the user (it wins), else the job folder's, else the one beside a
    config file that the result screen told the user to write (``NAME.log.txt``); its note
    and its scan. A log found (not given) that names another job is not read; a log given that
    does is read, as asked. Either way the note says whose it looks like
    (:meth:`~oom_wizard.storage.jobdir.JobIdentity.refusal`, ``warning``)."""
    if log is not None:
        given = scan_log(log)
        return log, identity.warning(log.name, given), given
    if located.log is None and not located.ui_job:
        beside = run_log_for(located.config)  # the log the result screen said to write
        if beside.is_file():
            found = scan_log(beside)
            refusal = identity.refusal(beside.name, found)
            if refusal is not None:
                return None, refusal, None
            note = f"the log beside the config, {beside.name} (python run.py ... -l)"
            return beside, note, found
    scan = located.log_scan
    if scan is None and located.log is not None:
        scan = scan_log(located.log)
    return located.log, located.log_note, scan


def _probe() -> tuple[ProbeResult | None, str | None]:
    """The GPU probe, and why its answer was ignored (not nvidia-smi's, or figures no card
    has: :func:`oom_wizard.rules.limits.probe_problem`)."""
    probe, note = read_probe()
    problem = probe_problem(probe) if probe is not None else None
    if problem is not None:
        return None, f"{problem}; the GPU probe is ignored"
    return probe, note


def _crashed_since(log: Path | None, changelog: ChangeLog | None, diagnosis: Diagnosis) -> bool:
    """Whether the log crashed after the change log's last roll-back was saved."""
    if log is None or changelog is None or not diagnosis.crashed:
        return False
    rollbacks = [run for run in changelog.runs if run.direction == "rollback"]
    if not rollbacks:
        return False
    try:
        saved = datetime.fromisoformat(rollbacks[-1].at)
        written = datetime.fromtimestamp(log.stat().st_mtime, tz=timezone.utc)
    except (ValueError, OSError):
        return False
    return written > saved


def _db_job_in_step(db_path: Path, name: str) -> tuple[DbJob, Belonging | None]:
    """The job's row and the change log that describes it, read in step.

    The row and the log are two reads: another oom-wizard run can commit the row between them
    and rename its change log in a moment later. Such a run keeps its journal beside the logs
    from before its commit until after the rename, so a pair read out of step ("edited") is
    read again once no live run has one there; what is still out of step then was edited.
    """

    for _ in range(3):
        job = load_job(settle_database(db_path), name)
        belonging = changelog_for(job.source, job.job_config.encode("utf-8"), job.changelog_to_read)
        if belonging is None or not belonging.edited:
            break
    return job, belonging


def settle_database(db_path: Path) -> Path:
    """Before a job of the jobs database ``db_path`` is read: finish or undo a save of one of
    its jobs that was killed between the row's commit and its change log's rename, and wait
    for one that another oom-wizard run is committing right now (so that the row and its
    change log are read in step). Returns ``db_path``.
    """

    settle(changelog_folder(db_path), wait_s=SETTLE_WAIT_S)
    return db_path


def list_jobs(db: Path) -> tuple[Path, tuple[DbJob, ...]]:
    """The jobs database ``db`` points to, and its jobs (newest first).

    Raises:
        JobDatabaseError: no database there, or one that cannot be read.
    """

    path = find_db(db)
    return path, db_jobs(path)


def picker_folder(target: Path | None) -> Path:
    """Where the app's file picker opens after a target that could not be opened: that
    folder, or the named file's folder, when it is there; else the working folder."""
    if target is not None:
        folder = target.expanduser()
        if not folder.is_dir():
            folder = folder.parent
        if folder.is_dir() and str(folder) not in ("", "."):
            return folder
    return Path.cwd()


#: A training log the picker offers beside the configs: AI Toolkit's ``log.txt`` (and the
#: UI's ``logs/N_log.txt``), ``run.py -l FILE``'s file, a log saved with another name.
LOG_SUFFIXES = (".txt", ".log")
