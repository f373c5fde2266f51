"""``oom-wizard watch [CONFIG | JOB_DIR | --db PATH --job NAME] [--log LOG]``: follow a job live.

The live screen (``oom_wizard.screens.watch``) follows the job's log as it grows, shows its phase,
progress, speed, skips and the GPU, tells a skip, a stall or a slowdown as it happens, and when
the job runs out of memory opens the wizard on that crash, already diagnosed, on its first
change (another crash shows its verdict; Enter opens the wizard). It never writes anything
of the job's; what ``nvidia-smi`` showed in each phase goes into the job's change log when
oom-wizard saved its config (a point of the one calibration ``fit`` and ``plan`` use), and
the line it prints on leaving says where, or that it was not kept.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from oom_wizard.application.follow import watch_db_target, watch_target
from oom_wizard.application.watching import keep_readings
from oom_wizard.commands._common import need_terminal, run_wizard
from oom_wizard.commands._jobdb import add_db_arguments, wants_db
from oom_wizard.errors import WizardError


def add_parser(subparsers: Any) -> None:
    """Register ``watch``."""
    parser = subparsers.add_parser(
        "watch",
        help="follow a running job live, and open the wizard when it crashes",
        description=(
            "Follow a running job's log like tail -F (it may not exist yet, and may be "
            "truncated or rotated by a restart), show its phase, step, speed, OOM skips and "
            "the GPU, warn of a skip, a stall or a slowdown as it happens, and when the job "
            "crashes, show the diagnosis and open the wizard on it. Writes nothing of the "
            "job's; when oom-wizard saved its config, what nvidia-smi showed in each phase "
            "is kept in its change log, and fit and plan use it."
        ),
    )
    parser.add_argument(
        "target",
        nargs="?",
        type=Path,
        metavar="CONFIG | JOB_DIR",
        help="the job config, or its output folder (<training_folder>/<name>/)",
    )
    parser.add_argument(
        "--log", type=Path, metavar="LOG", help="the log to follow (default: the job's log.txt)"
    )
    parser.add_argument(
        "--stall-minutes",
        type=float,
        default=10.0,
        metavar="N",
        help="warn when no new step comes for N minutes (10)",
    )
    parser.add_argument(
        "--no-probe", action="store_true", help="do not ask nvidia-smi about the GPU"
    )
    add_db_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Show the live screen; open the wizard on an out-of-memory crash (or when asked)."""
    # boundary (a): the app, imported only to start it
    from oom_wizard.screens.watch import WatchApp

    if wants_db(args, args.target):
        if args.job is None:
            raise WizardError("watch a web-UI job with --db PATH --job NAME")
        target = watch_db_target(args.db, args.job, args.log)
    else:
        target = watch_target(args.target, args.log)
    need_terminal(
        "watch",
        "without one, 'oom-wizard run' starts the trainer and says its warnings line by line, "
        "and 'oom-wizard diagnose' reads the log as it is now",
    )
    app = WatchApp(target, probe=not args.no_probe, stall_s=args.stall_minutes * 60)
    result = app.run()
    if result is not None:
        kept = keep_readings(target, result.readings, result.status)
        if kept is not None:
            print(kept, flush=True)
    if result is None or not result.open_wizard:
        return 0
    # boundary (a): the app, imported only to start it
    from oom_wizard.screens.app import create_app

    if result.state is not None:
        wizard = create_app(opened=result.state)
    elif target.job is not None:
        wizard = create_app(log=target.log, db=target.db, job=target.job)
    else:
        wizard = create_app(target.config, log=target.log)
    return run_wizard(wizard)
