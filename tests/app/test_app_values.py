"""Values typed on a step are checked as they are typed (through the application layer's
check_value).

On the demo's "Lighter samples" step (FLUX, size step 32, sample.width 1024 → 768): a width
of 6 is refused with the reason on its row and blocks Next; a width of 4096, above today's,
asks for a confirmation and is then logged as an increase; a refused value on a row that is
switched off does not block.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from textual.pilot import Pilot
from textual.widgets import Input, Static

from oom_wizard.rules.diagnosis import Answers
from oom_wizard.screens.app import OomWizardApp
from oom_wizard.screens.step import FieldRow, StepScreen
from oom_wizard.screens.toggles import Tick
from tests.support.app_support import (
    demo_folder,
    press,
    save_from_review,
    settle,
    step_app,
    wait_for_screen,
)

SIZE = (80, 24)
WIDTH = "config.process[0].sample.width"


def sampling_app(folder: Path) -> OomWizardApp:
    """The app on the demo, opened on the walk for "while generating samples" (picking a
    moment on the moment screen is walked by the parity tests, ``parity_support.py``)."""
    return step_app(folder, Answers(moment="sampling"))


async def to_lighter_samples(app: OomWizardApp, pilot: Pilot[int]) -> StepScreen:
    """The "Lighter samples" step, first of that walk."""
    await wait_for_screen(pilot, "StepScreen")
    screen = app.screen
    assert isinstance(screen, StepScreen) and screen.step.id == "sampling"
    row = next(r for r in screen.query(FieldRow) if r.proposal.key == WIDTH)
    assert row.index == 0
    return screen


def top(app: OomWizardApp) -> str:
    """The class name of the screen on top."""
    return type(app.screen).__name__


def reason(screen: StepScreen) -> Static:
    """The width row's reason line."""
    return screen.query_one("#reason-0", Static)


async def type_width(pilot: Pilot[int], screen: StepScreen, text: str) -> None:
    """Put ``text`` in the width's input, as typing it does (its Changed message included)."""
    screen.query_one("#value-0", Input).value = text
    await settle(pilot)


async def test_a_width_of_6_is_refused_on_its_row_and_blocks_next(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    app = sampling_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        screen = await to_lighter_samples(app, pilot)
        assert not reason(screen).display  # the proposed 768 is fine
        await type_width(pilot, screen, "6")
        shown = reason(screen)
        assert shown.display and shown.has_class("refused")
        assert "6 is below the smallest sensible value, 64" in str(shown.render())
        await press(pilot, "enter")
        assert app.screen is screen  # Next is blocked
        assert screen.query_one("#value-0", Input).has_focus
        await press(pilot, "ctrl+s")
        assert app.screen is screen  # and so is "save now"
        await type_width(pilot, screen, "1000")
        assert "not a multiple of 32; use 992 or 1024" in str(reason(screen).render())
        await type_width(pilot, screen, "640")
        assert not reason(screen).display
        await press(pilot, "enter")
        assert app.screen is not screen
    assert not list(folder.glob("*.oomfix*"))


async def test_a_refused_value_on_a_row_switched_off_does_not_block(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    app = sampling_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        screen = await to_lighter_samples(app, pilot)
        await type_width(pilot, screen, "6")
        screen.query_one("#toggle-0", Tick).value = False
        await settle(pilot)
        await press(pilot, "enter")
        assert app.screen is not screen
        choice = app.require_state().choices["sampling"]
        assert choice.fields[WIDTH] is False and WIDTH not in choice.values


async def test_a_width_above_todays_asks_and_is_logged_as_an_increase(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    app = sampling_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        screen = await to_lighter_samples(app, pilot)
        await type_width(pilot, screen, "4096")
        shown = reason(screen)
        assert shown.display and not shown.has_class("refused")
        assert "4096 is above today's 1024" in str(shown.render())
        await press(pilot, "enter")
        assert top(app) == "ConfirmIncreaseScreen"
        await press(pilot, "escape")  # "edit it": back on the step, on the value
        assert app.screen is screen
        assert screen.query_one("#value-0", Input).has_focus
        await press(pilot, "ctrl+s")
        assert top(app) == "ConfirmIncreaseScreen"
        await press(pilot, "k")  # keep it: the review of this step
        await save_from_review(pilot)
    config = yaml.safe_load((folder / "flux_portrait_lora.oomfix.yaml").read_text("utf-8"))
    assert config["config"]["process"][0]["sample"]["width"] == 4096
    log = json.loads((folder / "flux_portrait_lora.oomfix.changelog.json").read_text("utf-8"))
    width = next(c for c in log["changes"] if c["path"] == WIDTH)
    assert "an increase: 1024 → 4096, confirmed" in width["reason"]


async def test_a_kept_value_is_shown_again_when_the_step_is_reopened(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    app = sampling_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        screen = await to_lighter_samples(app, pilot)
        await type_width(pilot, screen, "4096")
        await press(pilot, "enter", "k")  # kept: on to the next step
        assert top(app) == "StepScreen" and app.screen is not screen
        assert app.require_state().choices["sampling"].values[WIDTH] == 4096
        await press(pilot, "escape")  # back to "Lighter samples"
        again = app.screen
        assert isinstance(again, StepScreen) and again.step.id == "sampling"
        assert again.query_one("#value-0", Input).value == "4096"
        await press(pilot, "enter")  # confirmed before: no second question
        assert top(app) == "StepScreen" and app.screen is not again
        assert app.require_state().choices["sampling"].values[WIDTH] == 4096


async def test_a_typed_value_whose_switch_is_off_is_said_not_used(tmp_path: Path) -> None:
    """Enter on a step whose row is switched off keeps the typed width out of the config,
    and says so rather than dropping it silently (issue 33)."""
    folder = demo_folder(tmp_path)
    app = sampling_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        screen = await to_lighter_samples(app, pilot)
        await type_width(pilot, screen, "640")
        screen.query_one("#toggle-0", Tick).value = False
        await settle(pilot)
        await press(pilot, "enter")
        assert app.screen is not screen
        said = [n.message for n in app._notifications]
        assert any(
            message.startswith("Typed but not used, its switch is off: ")
            and "sample.width 640" in message
            for message in said
        ), said
