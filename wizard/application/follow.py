"""What ``watch`` and ``run`` follow: the log a job writes (a config's, a job folder's, a job
of the web UI's), the UI's row of that job, and the live reading of the log
(:func:`follow_log`; the reader itself is :class:`oom_wizard.logs.tail.LiveJob`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from oom_wizard.errors import WizardError
from oom_wizard.logs.tail import STALL_S, LiveJob
from oom_wizard.rules.limits import check_document
from oom_wizard.storage.jobdb import find_db, job_document, load_job, training_roots
from oom_wizard.storage.jobdir import CLI_CONFIG, LOG_FILE, UI_CONFIG, config_of, load_config


def follow_log(
    log: Path, *, stall_s: float = STALL_S, between: Callable[[], None] | None = None
) -> LiveJob:
    """The live reading of ``log`` (it may not exist yet): poll it for what is new.

    Args:
        log: The log to follow.
        stall_s: Seconds without a new step, while the log shows no end, before a stall is told.
        between: Called between two pieces of a long backlog read (a reading thread lets
            others run).
    """
    return LiveJob(log, stall_s=stall_s, between=between)


@dataclass(frozen=True)
class WatchTarget:
    """The log to follow, and the config it belongs to (a file, or a job of the UI's database).

    Attributes:
        log: The log to follow (it may not exist yet).
        config: The config file, when the job is a file.
        name: The job's name.
        db: The UI's jobs database, for a database job.
        job: The database job's name.
    """

    log: Path
    config: Path | None
    name: str
    db: Path | None = None
    job: str | None = None

    @property
    def can_open_wizard(self) -> bool:
        """Whether the wizard can be opened on the job (a config, or a database job)."""
        return self.config is not None or self.job is not None


def watch_db_target(db: Path, name: str, log: Path | None) -> WatchTarget:
    """A job of AI Toolkit's web UI: its folder's ``log.txt`` (it may not exist yet).

    Raises:
        WizardError: no such database or job, or a job config that cannot be read.
    """

    found = find_db(db)
    job = load_job(found, name)
    roots = training_roots(job, job_document(job).tree)
    folder = next((root / name for root in roots if (root / name).is_dir()), roots[0] / name)
    return WatchTarget(log or folder / LOG_FILE, None, name, db=found, job=name)


@dataclass(frozen=True)
class JobRow:
    """The UI's row of a job: what the trainer last wrote there."""

    status: str
    step: int
    info: str

    @property
    def step_words(self) -> str:
        """The row's step as the user reads it: after an error AI Toolkit puts the last save's
        step there (``DiffusionTrainer.py``: ``step=last_save_step``), not the step that failed."""
        if self.status == "error":
            return f"last saved at step {self.step}"
        return f"step {self.step}"


ROW_BUSY_S: Final = 0.2
"""Seconds a read of the UI's database may wait for a lock before it is skipped."""


def read_job_row(db: Path, name: str, *, busy_timeout: float = ROW_BUSY_S) -> JobRow | None:
    """The job's row, read-only, in one short autocommit read; None when the database is busy
    or unreadable (the next poll tries again: the UI's writers never wait on us for long)."""

    try:
        job = load_job(db, name, busy_timeout=busy_timeout)
    except WizardError:
        return None
    return JobRow(job.status, job.step, job.info)


def watch_target(target: Path | None, log: Path | None) -> WatchTarget:
    """What ``watch`` follows for a config, a job folder, and/or ``--log``.

    A job folder's log is its ``log.txt`` (AI Toolkit writes it there; it may not exist yet).
    A config's is ``<training_folder>/<name>/log.txt`` as the toolkit resolves it (relative to
    the current folder), unless ``--log`` names one.

    Raises:
        WizardError: nothing to follow, or a config that cannot be read.
    """

    if target is None:
        if log is None:
            raise WizardError("give the job's config, its output folder, or --log LOG")
        return WatchTarget(log, None, log.parent.name)
    if target.is_dir():
        config, _ = config_of(target)
        return WatchTarget(log or target / LOG_FILE, config, target.name)
    if not target.is_file():
        raise WizardError("no such file or folder", file=target)

    document = load_config(target)
    check_document(document)
    name = str(document.get(("config", "name"), target.stem))
    if log is not None:
        return WatchTarget(log, target, name)
    if target.name in (CLI_CONFIG, UI_CONFIG):
        return WatchTarget(target.parent / LOG_FILE, target, name)
    folder = document.get(("config", "process", 0, "training_folder"), "output")
    return WatchTarget(Path(str(folder)) / name / LOG_FILE, target, name)
