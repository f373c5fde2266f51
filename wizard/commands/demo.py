"""``oom-wizard demo [--dir DIR] [--video]``: the wizard on a bundled job that ran out of memory.

The demo jobs (a FLUX image LoRA that dies in its first steps, a Wan video LoRA that dies
now and then) are copied with their logs into ``./oom-wizard-demo/``, so that what the user
saves lands there and never inside the installed package.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from oom_wizard.application.demo import IMAGE_JOB, VIDEO_JOB, copy_demo
from oom_wizard.commands._common import need_terminal, run_wizard

DEFAULT_DIR = Path("oom-wizard-demo")


def add_parser(subparsers: Any) -> None:
    """Register ``demo``."""
    parser = subparsers.add_parser(
        "demo",
        help="try the wizard on a bundled job that died with CUDA out of memory",
        description=(
            "Copy two bundled jobs and their logs (a FLUX image LoRA, a Wan video LoRA) into "
            "DIR and open the wizard on one of them. Saved files land in DIR."
        ),
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=DEFAULT_DIR,
        metavar="DIR",
        help=f"where to put the demo jobs (default: ./{DEFAULT_DIR})",
    )
    parser.add_argument(
        "--video", action="store_true", help="open the video job instead of the image job"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Copy the demo jobs and open the wizard on one of them."""
    need_terminal(
        "demo",
        "without one, 'oom-wizard plan' and 'oom-wizard apply --all' do the wizard's work "
        "on a config of yours",
    )
    # boundary (a): the app, imported only to start it
    from oom_wizard.screens.app import create_app

    folder = copy_demo(args.dir)
    job = VIDEO_JOB if args.video else IMAGE_JOB
    app = create_app(folder / job.config, log=folder / job.log, debug=getattr(args, "debug", False))
    return run_wizard(app)
