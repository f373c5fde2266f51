"""The scale-up through both front ends, for ``tests/test_parity_scale_up.py`` and
``bench/parity_table.py``.

A :class:`ScaleUpCase` is a demo job rolled back with ``apply`` (a kind answered or not),
then scaled up once: by ``oom-wizard scale-up --yes`` (:func:`through_cli`), and by what the
app's scale-up screen calls, :func:`oom_wizard.service.save_scale_up` on the state the app
opens the saved config with (:func:`through_app_service`). Both give the saved bytes and the
change log, its timestamps and the root left out.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oom_wizard.application.demo import IMAGE_JOB, VIDEO_JOB, DemoJob
from oom_wizard.request import JobRequest
from oom_wizard.service import SaveResult, ToFile, next_scale_up, save_scale_up, start
from tests.parity_support import DEMO, normal
from tests.plan_support import cli


@dataclass(frozen=True)
class ScaleUpCase:
    """A demo job, the kind answered at its roll-back (None: the config's), scaled up once."""

    demo: DemoJob
    kind: str | None

    @property
    def name(self) -> str:
        """``scale-up/file/image-job/video``, as the table lists it."""
        job = "image-job" if self.demo == IMAGE_JOB else "video-job"
        return f"scale-up/file/{job}/{self.kind or 'from-config'}"


#: The case that forked first (an image job rolled back as video), then each job as it is.
SCALE_UP_CASES = (
    ScaleUpCase(IMAGE_JOB, "video"),
    ScaleUpCase(IMAGE_JOB, None),
    ScaleUpCase(VIDEO_JOB, None),
)


@dataclass(frozen=True)
class ScaledUp:
    """What one front end's scale-up wrote."""

    saved: bytes
    changelog: Any


def rolled_back(root: Path, case: ScaleUpCase) -> Path:
    """The demo job under ``root``, rolled back by ``apply`` (every default step): the new
    config, with its change log beside it."""
    root.mkdir(parents=True)
    config = root / case.demo.config
    shutil.copyfile(DEMO / case.demo.config, config)
    shutil.copyfile(DEMO / case.demo.log, root / case.demo.log)
    kind = ["--kind", case.kind] if case.kind is not None else []
    status, out, err = cli("apply", config, "--log", root / case.demo.log, "--no-probe", *kind)
    assert status == 0, err
    return Path(next(line for line in out.splitlines() if line.startswith("Wrote "))[6:])


def through_cli(root: Path, case: ScaleUpCase) -> ScaledUp:
    """``oom-wizard scale-up CONFIG --yes`` on the rolled-back config."""
    config = rolled_back(root, case)
    status, out, err = cli("scale-up", config, "--yes")
    assert status == 0, err
    lines = out.splitlines()
    saved = Path(next(line for line in lines if line.startswith("Wrote "))[6:])
    changelog = Path(next(line for line in lines if line.startswith("Change log "))[11:])
    return ScaledUp(saved.read_bytes(), normal(changelog, root))


def through_app_service(root: Path, case: ScaleUpCase) -> ScaledUp:
    """The app's scale-up: the saved config opened as the app opens it, its next re-add saved
    to the default file, as the scale-up screen saves it."""
    config = rolled_back(root, case)
    state = start(JobRequest(config, probe=False))
    scale_up = next_scale_up(state)
    assert scale_up is not None
    saved = save_scale_up(state, scale_up, ToFile())
    assert isinstance(saved, SaveResult)
    return ScaledUp(saved.config.read_bytes(), normal(saved.changelog, root))
