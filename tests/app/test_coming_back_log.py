"""Coming back to a saved config: the log the result screen told the user to write is the one
read, and without a log no answer is preselected (issue 33)."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import OptionList

from oom_wizard.screens.app import create_app
from oom_wizard.storage.jobdir import run_log_for
from tests.app.test_app_refusals_and_typed_values import crashed_log, rolled_back
from tests.support.app_support import demo_folder, press, screen_name, wait_for_state

SIZE = (100, 30)


async def test_the_log_named_on_the_result_screen_is_read_when_the_config_is_reopened(
    tmp_path: Path,
) -> None:
    folder = demo_folder(tmp_path)
    saved = rolled_back(folder)
    beside = run_log_for(saved)  # python run.py SAVED -l SAVED-stem.log.txt
    assert beside.name == "flux_portrait_lora.oomfix.log.txt"
    crashed_log(folder).rename(beside)
    app = create_app(saved, probe=False)  # no --log: the wizard finds it
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        assert app.require_state().log_path == beside
        await press(pilot, "enter")
        assert screen_name(pilot) == "ComingBackScreen"
        chosen = app.screen.query_one("#answer-list", OptionList).highlighted_option
        assert chosen is not None and chosen.id == "crashed"


async def test_without_a_log_no_answer_is_preselected_and_enter_asks(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    saved = rolled_back(folder)
    app = create_app(saved, probe=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        assert app.require_state().log_path is None
        await press(pilot, "enter")
        assert screen_name(pilot) == "ComingBackScreen"
        assert app.screen.query_one("#answer-list", OptionList).highlighted is None
        await press(pilot, "enter")
        assert screen_name(pilot) == "ComingBackScreen"  # Enter asks; it picks nothing
        assert any("Pick Yes or No first" in n.message for n in app._notifications)
        await press(pilot, "down", "enter")
        assert screen_name(pilot) == "ScaleUpScreen"
