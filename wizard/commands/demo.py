"""``oom-wizard demo [--dir DIR] [--video]``: the wizard on a bundled job that ran out of memory.

The demo jobs (a FLUX image LoRA that dies in its first steps, a Wan video LoRA that dies
now and then) are copied with their logs into ``./oom-wizard-demo/``, so that what the user
saves lands there and never inside the installed package.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from oom_wizard.errors import SaveRefused

DEFAULT_DIR = Path("oom-wizard-demo")


@dataclass(frozen=True)
class DemoJob:
    """One bundled job: its config and its training log (file names in ``presets/demo``)."""

    config: str
    log: str


IMAGE_JOB = DemoJob("flux_portrait_lora.yaml", "flux_portrait_lora.log")
VIDEO_JOB = DemoJob("wan_dance_lora.yaml", "wan_dance_lora.log")
DEMO_JOBS = (IMAGE_JOB, VIDEO_JOB)


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


def copy_demo(folder: Path) -> Path:
    """Copy the demo jobs into ``folder``; an identical file already there is reused.

    Returns:
        The folder.

    Raises:
        SaveRefused: a file of the same name with other content is there (nothing is written).
    """
    from oom_wizard.save import atomic_write

    bundled = resources.files("oom_wizard.presets") / "demo"
    names = [name for job in DEMO_JOBS for name in (job.config, job.log)]
    payload = {name: (bundled / name).read_bytes() for name in names}
    try:
        if folder.exists() and not folder.is_dir():
            raise SaveRefused("this is a file, not a folder; pick a folder with --dir", file=folder)
        for name, data in payload.items():
            target = folder / name
            if target.exists() and (not target.is_file() or target.read_bytes() != data):
                raise SaveRefused(
                    "exists with other content and will not be overwritten; "
                    "remove it or pick another folder with --dir",
                    file=target,
                )
        folder.mkdir(parents=True, exist_ok=True)
        if not os.access(folder, os.W_OK | os.X_OK) and any(
            not (folder / name).exists() for name in payload
        ):
            raise SaveRefused("this folder is not writable; pick another with --dir", file=folder)
        for name, data in payload.items():
            target = folder / name
            if not target.exists():
                atomic_write(target, data)
    except OSError as exc:
        raise SaveRefused(
            f"cannot put the demo here: {exc.strerror or exc}; pick another folder with --dir",
            file=folder,
        ) from None
    return folder


def run(args: argparse.Namespace) -> int:
    """Copy the demo jobs and open the wizard on one of them."""
    from oom_wizard.commands._common import run_wizard
    from oom_wizard.screens.app import create_app

    folder = copy_demo(args.dir)
    job = VIDEO_JOB if args.video else IMAGE_JOB
    app = create_app(folder / job.config, log=folder / job.log, debug=getattr(args, "debug", False))
    return run_wizard(app)
