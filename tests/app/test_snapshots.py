"""An SVG snapshot of every stage at 80x24 and 120x40 (update: pytest --snapshot-update).

Besides the demo's stages: the job list of a web-UI jobs database, and the review of one
of its jobs (where the fix goes: the job itself, a new job or a file).

Every run works in its own temporary folder (``tmp_path``): paths on screen are relative to
it, change-log times are fixed and the input cursor does not blink, so the pictures are the
same on every run. The result screen's run command holds an absolute path: there the
temporary folder is shown as :data:`SHOWN_ROOT` (the files themselves are in ``tmp_path``).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import OptionList

from oom_wizard.screens.app import create_app
from tests.support.app_support import (
    UI_JOB,
    demo_app,
    demo_folder,
    freeze_changelog_time,
    freeze_inputs,
    press,
    settle,
    ui_jobs_db,
    wait_for_jobs,
    wait_for_screen,
    wait_for_state,
    wizard,
)

SIZES = [(80, 24), (120, 40)]

#: How the result stage's run command shows the run's temporary folder.
SHOWN_ROOT = "/tmp/oomw"


class ShownRoot:
    """``os`` for the modules that word the run command's paths (``application.leaving`` and
    ``storage.jobdir``'s ``run_log_for``): absolute paths under ``root`` are shown under
    :data:`SHOWN_ROOT`, so that the command reads the same on every run; the rest is ``os``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = self

    def abspath(self, path: str | Path) -> str:
        real = Path(os.path.abspath(path))
        return str(Path(SHOWN_ROOT) / real.relative_to(self.root))

    def __getattr__(self, name: str) -> Any:
        return getattr(os.path if name in vars(os.path) else os, name)


Steps = Callable[[Pilot[int]], Awaitable[None]]


async def loaded(pilot: Pilot[int]) -> None:
    await wait_for_state(pilot)


async def listed(pilot: Pilot[int]) -> None:
    await wait_for_jobs(pilot)


async def to_moment(pilot: Pilot[int]) -> None:
    await loaded(pilot)
    await press(pilot, "enter")


async def to_environment(pilot: Pilot[int]) -> None:
    await to_moment(pilot)
    pilot.app.screen.query_one("#moments", OptionList).highlighted = 4
    await press(pilot, "enter")


async def to_step(pilot: Pilot[int]) -> None:
    await to_moment(pilot)
    await press(pilot, "enter", "enter")


async def to_help(pilot: Pilot[int]) -> None:
    await to_step(pilot)
    await press(pilot, "f1")


async def to_review(pilot: Pilot[int]) -> None:
    await to_step(pilot)
    await press(pilot, "ctrl+s")


async def to_result(pilot: Pilot[int]) -> None:
    await to_review(pilot)
    await press(pilot, "enter")
    await wait_for_screen(pilot, "ResultScreen")


async def to_coming_back(pilot: Pilot[int]) -> None:
    await to_moment(pilot)


async def to_scale_up(pilot: Pilot[int]) -> None:
    await to_moment(pilot)
    await press(pilot, "down", "enter")  # Yes (no log says how the retry went)


STAGES: dict[str, tuple[str, Steps]] = {
    "load": ("first", loaded),
    "moment": ("first", to_moment),
    "environment": ("first", to_environment),
    "step": ("first", to_step),
    "help": ("first", to_help),
    "review": ("first", to_review),
    "result": ("fixed", to_result),
    "coming_back": ("again", to_coming_back),
    "scale_up": ("again", to_scale_up),
    "db_jobs": ("db", listed),
    "db_review": ("db_job", to_review),
}


def rolled_back_demo() -> Path:
    """The demo folder after one roll-back saved with every default (for coming back)."""
    from oom_wizard.application.choosing import effective_choices
    from oom_wizard.application.saving import ToFile, save
    from oom_wizard.application.settling import start
    from oom_wizard.request import JobRequest
    from oom_wizard.storage.save import SaveResult

    folder = demo_folder(Path.cwd())
    state = start(
        JobRequest(
            Path("oom-wizard-demo/flux_portrait_lora.yaml"), folder / "flux_portrait_lora.log"
        )
    )
    result = save(state, effective_choices(state), ToFile())
    assert isinstance(result, SaveResult)
    freeze_changelog_time(result.changelog)
    return Path("oom-wizard-demo") / result.config.name


@pytest.mark.parametrize("size", SIZES, ids=lambda size: f"{size[0]}x{size[1]}")
@pytest.mark.parametrize("stage", list(STAGES))
def test_stage(
    stage: str, size: tuple[int, int], snap_compare: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.chdir(tmp_path)
    which, steps = STAGES[stage]
    if which == "again":
        app = create_app(rolled_back_demo())
    elif which in ("db", "db_job"):
        ui_jobs_db(tmp_path)
        app = create_app(db=Path("aitk_db.db"), job=UI_JOB if which == "db_job" else None)
    elif which == "fixed":
        from oom_wizard.application import leaving
        from oom_wizard.storage import jobdir

        monkeypatch.setattr(leaving, "os", ShownRoot(tmp_path))
        monkeypatch.setattr(jobdir, "os", ShownRoot(tmp_path))
        demo_folder(tmp_path)
        app = demo_app(Path("oom-wizard-demo"))
    else:
        demo_folder(tmp_path)
        app = demo_app(Path("oom-wizard-demo"))

    async def run_before(pilot: Pilot[int]) -> None:
        await steps(pilot)
        freeze_inputs(wizard(pilot))
        await settle(pilot)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


#: PyTorch's message and nothing else (the shape of haotian-liu/LLaVA#1152): the log does not
#: settle when it crashed, so the moment screen asks (its sure counterpart is stage "moment").
OOM_LINE_ONLY = (
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 284.00 MiB (GPU 0; 31.75 "
    "GiB total capacity; 27.12 GiB already allocated; 99.50 MiB free; 30.44 GiB reserved in "
    "total by PyTorch)\n"
)


def test_the_moment_screen_asks_when_the_log_does_not_settle_it(
    snap_compare: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.chdir(tmp_path)
    folder = demo_folder(tmp_path)
    log = tmp_path / "oom_line_only.log"
    log.write_text(OOM_LINE_ONLY, encoding="utf-8")
    app = demo_app(Path("oom-wizard-demo"), log=Path(log.name))
    assert folder.is_dir()

    async def run_before(pilot: Pilot[int]) -> None:
        await to_moment(pilot)
        freeze_inputs(wizard(pilot))
        await settle(pilot)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
