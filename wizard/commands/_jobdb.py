"""``--db PATH --job NAME``: the arguments and output shared by the commands that work on UI jobs.

``diagnose``, ``plan`` and ``apply`` take a job from AI Toolkit's jobs database
instead of a CONFIG file; ``restore`` works only there. Without ``--job`` they list
the jobs. The work is the application layer's (:mod:`oom_wizard.storage.jobdb` behind it); this
module turns arguments into its calls and its results into lines.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from oom_wizard.application.opening import list_jobs
from oom_wizard.application.saving import AsNew, InPlace
from oom_wizard.commands._common import change_line
from oom_wizard.errors import WizardError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from oom_wizard.storage.jobdb import DbJob, DbSaveResult, SaveMode

#: The longest ``info`` shown in the job list (the UI stores whole exception texts).
INFO_WIDTH = 70


def add_db_arguments(parser: argparse.ArgumentParser, *, saving: bool = False) -> None:
    """``--db PATH``, ``--job NAME``; with ``saving`` also ``--in-place`` | ``--as-new [NAME]``."""
    group = parser.add_argument_group("a job of AI Toolkit's web UI (instead of a config file)")
    group.add_argument(
        "--db",
        type=Path,
        metavar="PATH",
        help="AI Toolkit's jobs database, aitk_db.db in the toolkit's folder (or that folder); "
        "without --job, list its jobs",
    )
    group.add_argument("--job", metavar="NAME", help="the job's name, as the UI lists it")
    if not saving:
        return
    where = group.add_mutually_exclusive_group()
    where.add_argument(
        "--in-place",
        action="store_true",
        help="update the job itself (never while it runs); 'oom-wizard restore' undoes it",
    )
    where.add_argument(
        "--as-new",
        nargs="?",
        const="",
        default=None,
        metavar="NAME",
        help="save as a new job, like the UI's Clone (default name: JOB_oomfix)",
    )


def wants_db(args: argparse.Namespace, config: object = None) -> bool:
    """Was ``--db`` given? Refuses ``--db`` together with a CONFIG or ``--job`` without ``--db``.

    Args:
        args: The parsed arguments (with ``db`` and ``job`` from :func:`add_db_arguments`).
        config: The command's CONFIG / JOB_DIR argument, if it has one.
    """
    db = getattr(args, "db", None)
    if db is None:
        if getattr(args, "job", None) is not None:
            raise WizardError("--job NAME needs --db PATH (AI Toolkit's aitk_db.db)")
        return False
    if config is not None:
        raise WizardError("give either a config file or --db PATH --job NAME, not both")
    return True


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
    from rich.table import Table
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
