"""Find a job's config and the right log from what the user points at.

The user may give a config file, or an AI Toolkit job folder ``<training_folder>/<name>/``. In
the folder, the web UI writes ``.job_config.json`` (regenerated from its database at every
start) and a CLI run writes ``config.yaml`` (a snapshot of the loaded config); the UI wins when
both are there. The job's output goes to ``log.txt``; before each start the UI moves the
previous one to ``logs/<n>_log.txt``.

The log to diagnose is the newest one that crashed: ``log.txt`` if it did, else the old log
with the highest ``n`` that did. A retry that is still running, or was stopped, does not hide
the crash before it. Which log was taken, and why, is said in ``JobLocation.log_note``.

A log is the job's only if it says so or says nothing: AI Toolkit's log names its job
(``# Running job: NAME``, the config's ``config.name``) and a web-UI job's id; a log that names
another job (:meth:`JobIdentity.other_job`) is never taken for this one.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from oom_wizard.errors import ConfigError
from oom_wizard.formats.document import JobDocument, load_document
from oom_wizard.logs.result import LogScan, log_still_written
from oom_wizard.logs.scan import scan_log
from oom_wizard.storage.atomic import recover_beside

UI_CONFIG: Final = ".job_config.json"
CLI_CONFIG: Final = "config.yaml"
LOG_FILE: Final = "log.txt"
OLD_LOGS_DIR: Final = "logs"
_OLD_LOG = re.compile(r"^(\d+)_log\.txt$")

#: The log ``python run.py -l`` writes for a saved config goes beside it, with this suffix.
RUN_LOG_SUFFIX: Final = ".log.txt"


def run_log_for(config: Path) -> Path:
    """Where the retry of a saved config should log: beside it, ``NAME.log.txt``, absolute.

    AI Toolkit writes no log file from the command line unless ``-l FILE`` is given, and a
    bare file name there crashes it (``os.makedirs('')``): the path is always absolute.
    """
    absolute = Path(os.path.abspath(config))
    return absolute.with_name(f"{absolute.stem}{RUN_LOG_SUFFIX}")


@dataclass(frozen=True)
class JobLocation:
    """Where a job's config and log are.

    Attributes:
        config: The config file.
        log: The log to diagnose, if one was found.
        log_note: Which log was taken and why (or why there is none), for the user.
        ui_job: The config is the web UI's ``.job_config.json``: a fixed config must go back
            into the UI, editing this file changes nothing.
        log_scan: The chosen log's scan, when choosing it needed one (saves a second read).
        folder: The job folder the log was chosen in (None: a config file alone).
    """

    config: Path
    log: Path | None
    log_note: str | None
    ui_job: bool
    log_scan: LogScan | None = None
    folder: Path | None = None


@dataclass(frozen=True)
class JobIdentity:
    """Who a job is, in the words its log would use: its ``config.name`` (AI Toolkit's job
    banner prints it, ``# Running job: NAME``) and, for a job of the web UI, its row's id
    (the trainer prints ``Job ID: "…"``).

    Attributes:
        name: ``config.name`` (a web-UI job's name; None: the config has none).
        id: The web-UI job's id (None: a config file).
    """

    name: str | None
    id: str | None = None

    def other_job(self, scan: LogScan) -> str | None:
        """Why ``scan`` is another job's log, in words (None: it is this job's, or it does not
        say whose it is). The id decides where the log and the job both have one (a job
        renamed in the UI keeps its id); else the job banner's name."""
        if self.id is not None and scan.job_id is not None:
            if scan.job_id == self.id:
                return None
            return f'it printed Job ID "{scan.job_id}", and this job\'s id is "{self.id}"'
        if self.name is not None and scan.job_name is not None and scan.job_name != self.name:
            return f"its job banner names job '{scan.job_name}', and this job is '{self.name}'"
        return None

    def refusal(self, log: str, scan: LogScan) -> str | None:
        """The note for a log found beside the job that is another job's: it is not read
        (None: it may be read)."""
        looks = self._looks_like(log, scan)
        return None if looks is None else f"{looks}: not read; pass this job's log with --log"

    def warning(self, log: str, scan: LogScan) -> str | None:
        """The note for a log the user gave (``--log``) that is another job's: it is read, as
        asked, and the note says whose it looks like (None: nothing to say)."""
        looks = self._looks_like(log, scan)
        return None if looks is None else f"{looks}: read as you asked; is it this job's log?"

    def _looks_like(self, log: str, scan: LogScan) -> str | None:
        why = self.other_job(scan)
        if why is None:
            return None
        whose = f"job '{scan.job_name}'" if scan.job_name is not None else "another job"
        return f"{log} looks like the log of {whose} ({why})"


def locate_job(path: Path, job: JobIdentity | None = None) -> JobLocation:
    """The config and log for a config file or a job folder (:func:`config_of`, then
    :func:`logs_of`).

    Raises:
        ConfigError: the path does not exist, or is a folder without a config.
        LogError: a log in the folder cannot be read.
    """
    config, folder = config_of(path)
    return logs_of(config, folder, job)


def config_of(path: Path) -> tuple[Path, Path | None]:
    """The config a path names, and the job folder whose logs go with it (None: a config file
    of its own, with no log: pass one with ``--log``). A config file named like the
    toolkit's own (``.job_config.json``, ``config.yaml``) in a folder that has logs is that
    job folder's config. No log is read.

    Raises:
        ConfigError: the path does not exist, or is a folder without a config.
    """
    if not path.exists():
        raise ConfigError("no such file or folder", file=path)
    if path.is_dir():
        return _folder_config(path), path
    if path.name in (UI_CONFIG, CLI_CONFIG) and _logs_in(path.parent):
        return path, path.parent
    return path, None


def logs_of(config: Path, folder: Path | None, job: JobIdentity | None = None) -> JobLocation:
    """The config with the log its job folder holds (none without a folder). A log that
    names another job than ``job`` is passed over (:func:`choose_log`).

    Raises:
        LogError: a log in the folder cannot be read.
    """
    ui_job = config.name == UI_CONFIG
    if folder is None:
        return JobLocation(config=config, log=None, log_note=None, ui_job=ui_job)
    log, note, scan = choose_log(folder, job)
    return JobLocation(config, log, note, ui_job, scan, folder)


def _folder_config(folder: Path) -> Path:
    for name in (UI_CONFIG, CLI_CONFIG):
        if (folder / name).is_file():
            return folder / name
    raise ConfigError(
        f"no {UI_CONFIG} or {CLI_CONFIG} in this folder; pass the config file", file=folder
    )


def _logs_in(folder: Path) -> list[Path]:
    """``log.txt`` first, then ``logs/<n>_log.txt`` from the highest ``n`` down."""
    found = [folder / LOG_FILE] if (folder / LOG_FILE).is_file() else []
    old_dir = folder / OLD_LOGS_DIR
    if old_dir.is_dir():
        numbered = [
            (int(match[1]), entry)
            for entry in old_dir.iterdir()
            if (match := _OLD_LOG.match(entry.name)) and entry.is_file()
        ]
        found.extend(entry for _, entry in sorted(numbered, reverse=True))
    return found


def choose_log(
    folder: Path, job: JobIdentity | None = None
) -> tuple[Path | None, str, LogScan | None]:
    """The newest log in ``folder`` that went wrong, a note saying which, and its scan.

    A log went wrong when its run crashed, or when it just stops inside a phase and has not
    been written for a while (:func:`~oom_wizard.logs.result.log_still_written`): that job
    stalled or was killed there, and it is newer than any crash before it. A log that stops
    but is still being written may be a retry that is running: an older crash is read
    instead. When nothing went wrong, the newest log is taken and the note says so. A log
    that names another job than ``job`` (:meth:`JobIdentity.other_job`) is never taken, and
    the note says which were left out.

    Raises:
        LogError: a log cannot be read.
    """
    candidates = _logs_in(folder)
    if not candidates:
        return None, f"no {LOG_FILE} in this folder; pass the log with --log", None

    now = time.time()
    own: list[tuple[Path, LogScan]] = []
    refused: list[str] = []
    for log in candidates:
        scan = scan_log(log)
        name = log.relative_to(folder).as_posix()
        refusal = job.refusal(name, scan) if job is not None else None
        if refusal is not None:
            refused.append(refusal)
            continue
        own.append((log, scan))
        if scan.crashed or (scan.ends_open and not log_still_written(scan, now)):
            note = _note(folder, log, own[0][0], crashed=scan.crashed)
            return log, _with_refused(note, refused), scan
    if not own:
        return None, "; ".join(refused), None
    newest, newest_scan = own[0]
    name = newest.relative_to(folder).as_posix()
    note = f"{name}: no log in this folder shows a crash; reading the newest"
    return newest, _with_refused(note, refused), newest_scan


def _with_refused(note: str, refused: list[str]) -> str:
    """The chosen log's note, with the logs left out as another job's."""
    return f"{note} (left out: {'; '.join(refused)})" if refused else note


def _note(folder: Path, chosen: Path, newest: Path, *, crashed: bool) -> str:
    name = chosen.relative_to(folder).as_posix()
    if chosen == newest:
        return f"{name} (the latest run)"
    newer = newest.relative_to(folder).as_posix()
    what = "crashed" if crashed else "stopped without finishing"
    return f"{name}: the newest run that {what} ({newer} shows no crash)"


def load_config(path: str | Path) -> JobDocument:
    """A user's config, read as :func:`~oom_wizard.formats.document.load_document` reads it,
    after finishing or undoing a save killed in its folder (``save.recover_beside``), so
    that whatever opens it next sees the old config and change log or the new pair.

    Raises:
        ConfigError: as ``load_document`` raises it.
    """
    recover_beside(Path(path))
    return load_document(path)
