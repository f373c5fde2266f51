"""The app on a config edited after oom-wizard saved it: it asks before planning from the
change log (the command line refuses without ``--edited-ok``; the same rule, one service)."""

from __future__ import annotations

from pathlib import Path

import pytest

from oom_wizard.application.demo import IMAGE_JOB
from oom_wizard.cli import main
from oom_wizard.screens.app import create_app
from tests.support.app_support import (
    demo_folder,
    press,
    screen_name,
    screen_text,
    wait_for_screen,
    wait_for_state,
    wait_for_widget,
    wizard,
)

SIZE = (110, 40)


def edited_output(tmp_path: Path) -> Path:
    """The demo job rolled back, then edited by hand after the save."""
    folder = demo_folder(tmp_path)
    output = folder / "fixed.yaml"
    status = main(["apply", str(folder / IMAGE_JOB.config), "--no-probe", "-o", str(output)])
    assert status == 0
    output.write_text(output.read_text(encoding="utf-8") + "# my own edit\n", encoding="utf-8")
    return output


async def test_an_edited_output_asks_before_going_on_with_its_change_log(tmp_path: Path) -> None:
    output = edited_output(tmp_path)
    app = create_app(output, probe=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_screen(pilot, "GoOnEditedScreen")
        await wait_for_widget(pilot, "#ask-text")
        assert "edited after oom-wizard saved it" in screen_text(pilot, "#ask-text")
        assert wizard(pilot).state is None  # nothing is planned before the answer
        await press(pilot, "g")
        await wait_for_state(pilot)
        state = wizard(pilot).require_state()
        assert state.changelog is not None and state.changelog.runs


async def test_no_to_the_question_plans_nothing_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    output = edited_output(tmp_path)
    monkeypatch.chdir(tmp_path)  # the picker shows the working folder
    app = create_app(output, probe=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_screen(pilot, "GoOnEditedScreen")
        await wait_for_widget(pilot, "#no")
        await pilot.press("escape")
        await pilot.pause()  # not settle(): the picker's directory loader never completes
        error = screen_text(pilot, "#error")
        assert "edited after oom-wizard saved it" in error and "\n" not in error.strip()
        assert screen_name(pilot) == "LoadScreen" and wizard(pilot).state is None
