"""What the commands print of the application layer's results: a database's jobs, the
changes a save makes, where it went and the command that runs it; and where a web-UI job's
save goes (``--in-place`` | ``--as-new [NAME]``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from oom_wizard.application.leaving import run_command_for
from oom_wizard.application.opening import list_jobs
from oom_wizard.application.saving import AsNew, InPlace
from oom_wizard.commands._common import change_line
from oom_wizard.errors import WizardError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from oom_wizard.storage.changes import Prepared
    from oom_wizard.storage.jobdb import DbJob, DbSaveResult, SaveMode
    from oom_wizard.storage.save import SaveResult

#: The longest ``info`` shown in the job list (the UI stores whole exception texts).
INFO_WIDTH = 70


def show_jobs(db: Path, console: Console) -> int:
    """Print the jobs of the database (name, status, step, info) and how to pick one."""

    path, jobs = list_jobs(db)
    if not jobs:
        console.print(f"No jobs in {path}.", markup=False)
        return 0
    console.print(f"Jobs in {path}, newest first:", markup=False)
    console.print(job_table(jobs))
    console.print("Pick one with --job NAME.")
    return 0


def job_table(jobs: tuple[DbJob, ...]) -> Table:
    """The job list as a table: name, status, step and the first line of ``info``."""
    from rich.table import Table  # rich's tables on the paths that print one only
    from rich.text import Text

    table = Table(box=None, pad_edge=False, show_edge=False)
    for title in ("NAME", "STATUS", "STEP", "INFO"):
        table.add_column(title, justify="right" if title == "STEP" else "left")
    for job in jobs:
        info = job.info.strip().splitlines()[0] if job.info.strip() else ""
        if len(info) > INFO_WIDTH:
            info = info[: INFO_WIDTH - 1] + "…"
        table.add_row(Text(job.name), Text(job.status_words), str(job.step), Text(info))
    return table


def print_changes(console: Console, prepared: Prepared) -> None:
    """One line per changed field: ``path: before → after``."""
    if not prepared.entries:
        console.print("Nothing to change: the config already has these values.")
        return
    for entry in prepared.entries:
        console.print(change_line(entry.path, entry.before, entry.after), markup=False)


def print_saved(console: Console, result: SaveResult, *, ui_job: bool = False) -> None:
    """Where the config and its change log went, and the command that runs it (not for a
    config of the web UI, which starts the job itself)."""

    console.print(f"Wrote {result.config}", markup=False)
    console.print(f"Change log {result.changelog}", markup=False)
    if not ui_job:
        console.print(
            "Run it from AI Toolkit's folder (-l keeps a log for the next crash):", markup=False
        )
        console.print(f"  {run_command_for(result.config)}", markup=False)


def save_mode(args: argparse.Namespace) -> SaveMode:
    """``--in-place`` or ``--as-new [NAME]``; refuses a save to the database without either."""

    if args.in_place:
        return InPlace()
    if args.as_new is not None:
        return AsNew(args.as_new or None)
    raise WizardError(
        "say where the fix goes: --in-place (update this job) or --as-new [NAME] (a new job)"
    )


def print_db_saved(console: Console, result: DbSaveResult) -> None:
    """What was written, where the change log is, and what to do next in the UI."""
    if result.restored_run is not None:
        console.print(
            f"Restored job '{result.job_name}' to its config before oom-wizard's save "
            f"(run {result.restored_run} of the change log)",
            markup=False,
        )
    elif result.in_place:
        console.print(f"Updated job '{result.job_name}' in {result.db_path}", markup=False)
    else:
        console.print(
            f"Created job '{result.job_name}' (a copy of '{result.origin_name}') "
            f"in {result.db_path}",
            markup=False,
        )
    for entry in result.entries:
        console.print(change_line(entry.path, entry.before, entry.after), markup=False)
    if result.warning is not None:
        console.print(
            f"warning: {result.warning} To keep them, save with --in-place instead "
            "(oom-wizard restore undoes it).",
            markup=False,
        )
    console.print(f"Change log {result.changelog}", markup=False)
    console.print(result.next_step(), markup=False)
