"""``oom-wizard restore --db PATH --job NAME``: put back a UI job's config before our last save."""

from __future__ import annotations

import argparse
from typing import Any

from oom_wizard.application.restoring import restore
from oom_wizard.commands._common import stdout
from oom_wizard.commands._jobdb import add_db_arguments, wants_db
from oom_wizard.commands._report import print_db_saved, show_jobs
from oom_wizard.errors import WizardError


def add_parser(subparsers: Any) -> None:
    """Register ``restore``."""
    parser = subparsers.add_parser(
        "restore",
        help="undo oom-wizard's last in-place update of a job in AI Toolkit's jobs database",
        description=(
            "Put back the config that oom-wizard's last in-place save replaced in AI Toolkit's "
            "jobs database (the exact text, kept in the job's change log beside the database, "
            "oom-wizard/DB_FILE/JOB_ID.changelog.json, e.g. "
            "oom-wizard/aitk_db.db/<the job's id>.changelog.json). Run it again to walk back "
            "further. Never while the job runs."
        ),
    )
    add_db_arguments(parser)
    parser.add_argument(
        "--force",
        action="store_true",
        help="restore even if the job was edited in the UI after oom-wizard saved it",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Restore the job, or list the jobs when ``--job`` is missing."""

    if not wants_db(args):
        raise WizardError("restore needs --db PATH (AI Toolkit's aitk_db.db) and --job NAME")
    console = stdout()
    if args.job is None:
        return show_jobs(args.db, console)
    result = restore(args.db, args.job, force=args.force)
    print_db_saved(console, result)
    console.print(
        "The restored config is the one that ran out of memory: started as it is, the job "
        f"will most likely crash the same way. 'oom-wizard plan --db {args.db} --job "
        f"{args.job}' shows the roll-back again.",
        markup=False,
    )
    return 0
