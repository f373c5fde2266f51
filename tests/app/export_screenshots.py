"""Export the README's screenshots: the step screen and the result screen of the demo, 80x30.

Usage (from the repository root)::

    .venv/bin/python -m tests.app.export_screenshots

It runs the demo in a fresh folder under the temporary directory, always the same one (the
result screen shows the saved file's absolute path, so a random name would show up there), and
writes ``screens/screenshots/step.svg`` and ``screens/screenshots/result.svg``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import Input

from oom_wizard.application.demo import IMAGE_JOB, copy_demo
from oom_wizard.screens.app import OomWizardApp, create_app
from oom_wizard.screens.step import StepScreen

DOCS = Path(__file__).resolve().parents[2] / "screens" / "screenshots"
SIZE = (80, 30)
WORK = Path(tempfile.gettempdir()) / "oom-wizard-screenshots"


async def wait_for(pilot: Pilot[int], name: str) -> None:
    """Pause until the screen called ``name`` is on top."""
    for _ in range(100):
        if type(pilot.app.screen).__name__ == name:
            return
        await pilot.pause(0.1)
    raise RuntimeError(f"{name} never appeared")


def still(app: OomWizardApp) -> None:
    """No blinking cursor in the picture."""
    for field in app.screen.query(Input):
        field.cursor_blink = False


async def export() -> None:
    """Walk the demo with every default and save the two pictures on the way."""
    folder = copy_demo(Path("oom-wizard-demo"))
    app = create_app(folder / IMAGE_JOB.config, log=folder / IMAGE_JOB.log)
    async with app.run_test(size=SIZE) as pilot:
        while app.state is None:
            await pilot.pause(0.1)
        for _ in range(3):
            await pilot.press("enter")
            await pilot.pause(0.3)
        await wait_for(pilot, "StepScreen")
        app.save_screenshot("step.svg", path=str(DOCS))
        while isinstance(app.screen, StepScreen):
            await pilot.press("enter")
            await pilot.pause(0.3)
        await wait_for(pilot, "ReviewScreen")
        await pilot.press("enter")
        await wait_for(pilot, "ResultScreen")
        still(app)
        app.save_screenshot("result.svg", path=str(DOCS))


def main() -> None:
    """Export both pictures from a fresh demo folder, then remove it."""
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir()
    os.chdir(WORK)
    try:
        asyncio.run(export())
    finally:
        shutil.rmtree(WORK, ignore_errors=True)
    print(f"wrote {DOCS / 'step.svg'} and {DOCS / 'result.svg'}")


if __name__ == "__main__":
    main()
