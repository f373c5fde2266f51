"""``demo``: the bundled jobs that ran out of memory, copied where the user's saves can land.

The demo jobs (a FLUX image LoRA that dies in its first steps, a Wan video LoRA that dies
now and then) are copied with their logs into a folder of the user's, never saved into the
installed package.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from oom_wizard.errors import SaveRefused
from oom_wizard.storage.atomic import commit_pair

__all__ = ["DEMO_JOBS", "IMAGE_JOB", "VIDEO_JOB", "DemoJob", "copy_demo"]


@dataclass(frozen=True)
class DemoJob:
    """One bundled job: its config and its training log (file names in ``presets/demo``)."""

    config: str
    log: str


IMAGE_JOB = DemoJob("flux_portrait_lora.yaml", "flux_portrait_lora.log")
VIDEO_JOB = DemoJob("wan_dance_lora.yaml", "wan_dance_lora.log")
DEMO_JOBS = (IMAGE_JOB, VIDEO_JOB)


def copy_demo(folder: Path) -> Path:
    """Copy the demo jobs into ``folder``; an identical file already there is reused.

    Returns:
        The folder.

    Raises:
        SaveRefused: a file of the same name with other content is there (nothing is written).
    """
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
        missing = [
            (folder / name, data) for name, data in payload.items() if not (folder / name).exists()
        ]
        if missing:  # one commit: the folder is synced once, and a failure leaves none of them
            commit_pair(missing, journal=False, wrap=False)
    except OSError as exc:
        raise SaveRefused(
            f"cannot put the demo here: {exc.strerror or exc}; pick another folder with --dir",
            file=folder,
        ) from None
    return folder
