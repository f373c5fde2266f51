"""``--db PATH --job NAME``: the arguments of the commands that work on UI jobs.

``diagnose``, ``plan`` and ``apply`` take a job from AI Toolkit's jobs database
instead of a CONFIG file; ``restore`` works only there; ``open`` starts the app on one.
Without ``--job`` they list the jobs (:func:`oom_wizard.commands._report.show_jobs`). Loaded
before the app starts, so it stays off the application layer.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from oom_wizard.errors import WizardError


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
