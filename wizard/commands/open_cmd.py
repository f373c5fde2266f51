"""``oom-wizard [CONFIG | JOB_DIR] [--log LOG]``, ``oom-wizard --db PATH [--job NAME]``: the wizard.

The wizard itself is a Textual app (``screens``), started here and nowhere else but ``demo``.
With ``--db`` the job comes from AI Toolkit's jobs database: ``--job`` opens it at once,
without it the app lists the database's jobs to pick one.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from oom_wizard.commands._common import add_probe_argument, need_terminal, run_wizard
from oom_wizard.commands._jobdb import add_db_arguments, wants_db
from oom_wizard.errors import WizardError


def add_parser(subparsers: Any) -> None:
    """Register ``open`` (the default command)."""
    parser = subparsers.add_parser(
        "open",
        help="the wizard: from a crashed job to a saved retry config (the default command)",
        description=(
            "Open the wizard on a job config, an AI Toolkit job folder, or a job of the web "
            "UI's jobs database (--db). Without any, the wizard asks for a config."
        ),
    )
    parser.add_argument(
        "target",
        nargs="?",
        type=Path,
        metavar="CONFIG | JOB_DIR",
        help="the job config (.yaml, .json) or its output folder (with log.txt)",
    )
    parser.add_argument("--log", type=Path, metavar="LOG", help="the training log to diagnose")
    add_probe_argument(parser)
    add_db_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Start the app; the exit status is the app's.

    A path named on the command line must be there: a mistyped one is a one-line error with
    exit status 2, before the app starts (the app's own picker is for choosing, not fixing).
    """

    for given, what in ((args.target, "config or job folder"), (args.log, "log")):
        if given is not None and not given.exists():
            raise WizardError(f"no such {what}; check the path", file=given)
    need_terminal(
        "open",
        "without one, 'oom-wizard diagnose' says why it crashed, 'oom-wizard plan' shows the "
        "roll-back and 'oom-wizard apply --all' saves it",
    )
    # boundary (a): the app, imported only to start it
    from oom_wizard.screens.app import create_app

    probe = not args.no_probe
    debug = bool(getattr(args, "debug", False))
    if wants_db(args, args.target):
        app = create_app(log=args.log, db=args.db, job=args.job, probe=probe, debug=debug)
    else:
        app = create_app(args.target, log=args.log, probe=probe, debug=debug)
    return run_wizard(app)
