"""The demo, every default accepted, reaches a saved config in at most 8 key presses."""

from __future__ import annotations

from pathlib import Path

from oom_wizard.application.demo import IMAGE_JOB
from oom_wizard.screens.review import ReviewScreen
from tests.support import exactness
from tests.support.app_support import (
    demo_app,
    demo_folder,
    screen_name,
    settle,
    wait_for_screen,
    wait_for_state,
)

MAX_PRESSES = 8


async def test_demo_to_saved_config_in_at_most_eight_presses(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    app = demo_app(folder)
    presses = 0
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for_state(pilot)
        while screen_name(pilot) != "ResultScreen" and presses < MAX_PRESSES + 5:
            await pilot.press("enter")
            presses += 1
            await settle(pilot)
            if isinstance(app.screen, ReviewScreen) and app.screen.saving:
                await wait_for_screen(pilot, "ResultScreen")
    assert presses <= MAX_PRESSES, f"{presses} presses"
    output = folder / "flux_portrait_lora.oomfix.yaml"
    changelog = folder / "flux_portrait_lora.oomfix.changelog.json"
    assert output.is_file() and changelog.is_file()
    source = folder / IMAGE_JOB.config
    verdict = exactness.check(source, output, changelog)
    assert verdict.ok, verdict.problems
