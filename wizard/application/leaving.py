"""Leaving the wizard: what was saved, and the commands to go on."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from oom_wizard.application.settling import WizardState
from oom_wizard.storage.jobdb import (
    DB_FILE_NAME,
    DbSaveResult,
    new_job_name_problem as problem,
    taken_name_problem,
)
from oom_wizard.storage.jobdir import run_log_for

if TYPE_CHECKING:  # only named in annotations: what a save returned
    from oom_wizard.application.saving import Saved
    from oom_wizard.storage.save import SaveResult


def run_command(state: WizardState, saved: Saved) -> str | None:
    """``python run.py CONFIG -l LOG`` for a saved config file (None for a web-UI job).

    The paths are absolute: run.py looks for a relative path in its own ``config/`` folder
    first, and it runs from the toolkit's folder, not from where the wizard saved.
    """

    if isinstance(saved, DbSaveResult) or state.ui_job:
        return None
    return run_command_for(saved.config)


def run_command_for(config: Path) -> str:
    """``python run.py CONFIG -l LOG`` for a saved config file, both paths absolute: the
    one command the app's result, its leaving summary, ``apply`` and ``scale-up`` print."""
    quoted = shlex.quote(os.path.abspath(config))
    return f"python run.py {quoted} -l {shlex.quote(str(run_log_for(config)))}"


def reopen_command(saved: SaveResult) -> str:
    """``oom-wizard CONFIG --log LOG``: the wizard on the saved config and its retry's log."""
    config = shlex.quote(os.path.abspath(saved.config))
    return f"oom-wizard {config} --log {shlex.quote(str(run_log_for(saved.config)))}"


def ui_job_instructions() -> str:
    """What to do with a config saved from the web UI's ``.job_config.json``."""
    return (
        "This job comes from AI Toolkit's web UI, which rewrites .job_config.json on every "
        "start. Open the job in the UI, change the fields below (each says where), or paste "
        "the new config under Show Advanced; then start the job."
    )


def db_job_arguments(saved: DbSaveResult) -> str:
    """``--db PATH --job NAME`` for a saved database job, quoted for a shell."""
    return f"--db {shlex.quote(str(saved.db_path))} --job {shlex.quote(saved.job_name)}"


@dataclass(frozen=True)
class LeavingSummary:
    """What the terminal keeps when the wizard closes: what was saved and how to go on.

    Attributes:
        saved: Whether a fix was saved in this session.
        lines: The summary, line by line (the command line prints them after the app).
    """

    saved: bool
    lines: tuple[str, ...]

    def text(self) -> str:
        """The summary as one text."""
        return "\n".join(self.lines)


def source_words(state: WizardState) -> str:
    """The config the wizard was opened on, as the user knows it: its file, or the UI job."""
    if state.db_job is not None:
        return f"UI job '{state.db_job.name}'"
    return str(state.source)


def leaving_summary(state: WizardState | None, saved: Saved | None) -> LeavingSummary:
    """The summary for the terminal: the saved files (or UI job), and the command to run it.

    A config file gets ``python run.py CONFIG -l LOG`` (see :func:`run_command`) and the
    wizard's command for the next crash; a database job gets the UI's next step; a session
    that saved nothing says that the source is as it was.
    """
    if saved is None or state is None:
        where = f"; {source_words(state)} is as it was" if state is not None else ""
        return LeavingSummary(False, (f"oom-wizard: nothing saved{where}.",))

    if isinstance(saved, DbSaveResult):
        how = (
            "updated in place"
            if saved.in_place
            else f"a new job, copied from '{saved.origin_name}'"
        )
        lines = [
            f"oom-wizard saved UI job '{saved.job_name}' ({how})",
            f"  database:   {saved.db_path}",
            f"  change log: {saved.changelog}",
            saved.next_step(),
        ]
        if saved.in_place:
            lines.append(f"To undo it: oom-wizard restore {db_job_arguments(saved)}")
        return LeavingSummary(True, tuple(lines))
    lines = [
        "oom-wizard saved a new config (the original is unchanged)",
        f"  config:     {saved.config}",
        f"  change log: {saved.changelog}",
    ]
    command = run_command(state, saved)
    if command is None:
        lines.append(ui_job_instructions())
        note = ui_job_note(state)
        if note is not None:
            lines.append(note)
    else:
        lines += [
            "Run it from AI Toolkit's folder (-l keeps a log for the next crash):",
            f"  {command}",
            "If it runs out of memory again, or once it trains through:",
            f"  {reopen_command(saved)}",
        ]
    return LeavingSummary(True, tuple(lines))


def ui_job_note(state: WizardState) -> str | None:
    """For a web-UI job opened from its folder (its ``.job_config.json``), without ``--db``:
    the UI rewrites that file from its database at every start, so point to ``--db`` and
    the database found for it (None for any other job). The command line and the app show
    this same line."""
    if not state.job.ui_job or state.db_job is not None:
        return None

    config = state.source
    name = config.parent.name
    candidates = []
    primary = state.document.view().primary
    recorded = state.document.get(primary.path("sqlite_db_path")) if primary is not None else None
    if isinstance(recorded, str) and recorded:
        candidates.append(Path(recorded))
    candidates.append(config.parent.parent.parent / DB_FILE_NAME)
    found = next((path for path in candidates if path.is_file()), None)
    where = f"--db {found} --job {name}" if found else f"--db PATH/{DB_FILE_NAME} --job {name}"
    return (
        f"{config.name} is written anew from AI Toolkit's jobs database at every start, so a "
        f"fixed copy of it changes nothing in the UI; to fix the job itself use {where}"
        + ("" if found else " (the database is aitk_db.db in the toolkit's folder)")
    )


def new_job_name_problem(name: str) -> str | None:
    """Why a typed name cannot name a new web-UI job (None: it can; empty picks one)."""

    return problem(name.strip()) if name.strip() else None


def new_job_name_taken(state: WizardState, name: str) -> str | None:
    """Why a typed name is taken for a new copy of the state's web-UI job, in the words the
    save refuses it with (None: it is free, or this is no web-UI job). Reads the database:
    call it off the screen's thread.

    Raises:
        JobDatabaseError: the database cannot be read.
    """
    job = state.db_job
    return taken_name_problem(job, name) if job is not None else None


def crashed_job_note(state: WizardState) -> str | None:
    """For a web-UI job whose row says ``running`` but whose process is gone: that it
    crashed, and that oom-wizard goes on (the command line and the app show this line)."""
    return state.db_job.crashed_note() if state.db_job is not None else None


def job_notes(state: WizardState) -> tuple[str, ...]:
    """What every command that opens a job says about the job itself, besides its log: a
    web-UI job's file opened without ``--db`` (:func:`ui_job_note`), a ``running`` row whose
    process is gone (:func:`crashed_job_note`)."""
    return tuple(note for note in (ui_job_note(state), crashed_job_note(state)) if note)


def new_job_warning(state: WizardState) -> str | None:
    """What "save as a new job" costs, for a job of the web UI's database (None otherwise):
    :meth:`~oom_wizard.storage.jobdb.DbJob.new_job_warning`, the one rule the command line, the
    app and the change log word alike."""
    job = state.db_job
    if job is None:
        return None
    return (
        f"{job.new_job_warning()} To keep them, pick \"Update job '{job.name}'\" instead "
        "(oom-wizard restore undoes it)."
    )
