"""``oom-wizard [CONFIG | JOB_DIR] [--log LOG]``: the wizard itself (a Textual app)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_parser(subparsers: Any) -> None:
    """Register ``open`` (the default command)."""
    parser = subparsers.add_parser(
        "open",
        help="the wizard: from a crashed job to a saved retry config (the default command)",
        description=(
            "Open the wizard on a job config or an AI Toolkit job folder. Without one, "
            "the wizard asks for it."
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
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Start the app; the exit status is the app's."""
    from screens.app import create_app

    app = create_app(args.target, log=args.log)
    app.run()
    return app.return_code or 0
