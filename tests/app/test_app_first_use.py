"""First use at 80x24: where the focus starts, the help, the progress line, the steps that
can still be opened, datasets by name, and the theme remembered across starts."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from textual.widgets import Markdown

from oom_wizard.application.demo import IMAGE_JOB
from oom_wizard.request import JobRequest
from oom_wizard.rules.diagnosis import Answers
from oom_wizard.screens.app import OomWizardApp
from oom_wizard.screens.help import HelpScreen
from oom_wizard.screens.step import StepScreen
from oom_wizard.screens.toggles import Choice, Tick
from oom_wizard.screens.widgets import ladder_legend
from oom_wizard.storage.settings import settings_path
from tests.support.app_support import (
    demo_app,
    demo_folder,
    press,
    review_app,
    save_from_review,
    screen_name,
    screen_text,
    settle,
    step_app,
    wait_for_screen,
    wait_for_state,
)

SIZE = (80, 24)


def first_step_app(folder: Path) -> OomWizardApp:
    """The app on the demo, opened on the first step of its walk (``step_app``): for the tests
    of the step screen's help, progress line and palette. The walk from the load screen is
    tested in ``test_app_flows.py`` and, for the focus on arrival, just below."""
    return step_app(folder, Answers())


async def test_the_focus_starts_on_the_first_toggle(tmp_path: Path) -> None:
    app = demo_app(demo_folder(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        await press(pilot, "enter", "enter")
        assert isinstance(app.screen, StepScreen)
        first = app.screen.query(Tick).first()
        assert app.focused is first
        before = first.value
        await press(pilot, "space")
        assert first.value is not before  # Space toggles it at once


async def test_help_says_how_to_close_it_and_explains_the_progress_line(tmp_path: Path) -> None:
    app = first_step_app(demo_folder(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_screen(pilot, "StepScreen")
        await press(pilot, "f1")
        assert isinstance(app.screen, HelpScreen)
        text = app.screen.query_one(Markdown).source
        assert "**Escape**, **Enter**, **F1** or **?** closes this help." in text
        assert ladder_legend() in text
        for mark in ("▶", "+", "−", "✓", "·"):
            assert f"{mark} " in ladder_legend()
        await press(pilot, "escape")
        assert isinstance(app.screen, StepScreen)


async def test_the_progress_line_says_why_it_jumps_and_marks_each_step(tmp_path: Path) -> None:
    app = first_step_app(demo_folder(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_screen(pilot, "StepScreen")
        assert screen_text(pilot, "#step-title").startswith("Step 1 of 15 · ")
        await press(pilot, "enter")  # accepted: in the just-enough fix the crash's figures size
        for _ in range(2):  # accepted: switched on by hand (the just-enough fix leaves them off)
            app.screen.query_one("#step-on", Tick).value = True
            await press(pilot, "enter")
        await press(pilot, "ctrl+n")  # then a skip: the walk ends (what is left is optional)
        assert screen_name(pilot) == "ReviewScreen"
        app.open_step("extra_passes")  # as a click on it in the progress line does
        await settle(pilot)
        title = screen_text(pilot, "#step-title")
        assert title == (
            "Step 10 of 15 · Extra passes and copies off (steps 5-9 already done in the config, "
            "or for a later retry, or optional)"
        )
        ladder = screen_text(pilot, "#ladder")
    assert "+ Gradient checkpointing on" in ladder and "+ Batch size to 1" in ladder
    assert "− Lighter samples" in ladder
    assert "· Quantized weights" in ladder and "× Offload layers to system RAM" in ladder
    assert "▶ Extra passes and copies off" in ladder  # the demo keeps an EMA copy


async def test_a_done_step_opens_from_the_palette_with_its_rows(tmp_path: Path) -> None:
    app = first_step_app(demo_folder(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_screen(pilot, "StepScreen")
        state = app.require_state()
        done = next(s for s in state.rollback_steps() if s.satisfied and s.available)
        number = state.step_index(done.id) + 1
        commands = [c.title for c in app.get_system_commands(app.screen)]
        assert f"Step {number}: {done.title} (done)" in commands
        await press(pilot, "ctrl+p")
        await pilot.press(*f"Step {number}: {done.title}")
        await settle(pilot)
        await press(pilot, "enter")
        assert isinstance(app.screen, StepScreen) and app.screen.step.id == done.id
        assert "Already done" in screen_text(pilot, "#done-note")
        assert not app.screen.query_one("#step-on", Tick).value  # nothing on by default
        await press(pilot, "enter")  # accepted as it is: on to the next step of the walk
        assert number > state.step_index("sampling") + 1  # none is left after it: the review
        assert screen_name(pilot) == "ReviewScreen"


async def test_the_load_screen_names_the_dataset(tmp_path: Path) -> None:
    app = demo_app(demo_folder(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        summary = screen_text(pilot, "#summary")
    assert "  Dataset   portraits · buckets 512, 768, 1024" in summary
    assert "Dataset 0" not in summary and "Dataset N" not in summary


async def test_the_theme_is_remembered_in_the_xdg_config_folder(
    tmp_path: Path, own_config_home: Path
) -> None:
    folder = demo_folder(tmp_path)
    app = demo_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        assert app.theme != "nord"
        app.theme = "nord"
        await settle(pilot)
    path = own_config_home / "oom-wizard" / "settings.json"
    assert settings_path() == path
    assert json.loads(path.read_text(encoding="utf-8")) == {"theme": "nord"}
    assert [p.name for p in path.parent.iterdir()] == ["settings.json"]  # no temp file left
    again = demo_app(folder)
    async with again.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        assert again.theme == "nord"


@pytest.mark.parametrize("content", ["{not json", '{"theme": "no-such-theme"}', '["nord"]'])
async def test_a_bad_settings_file_is_ignored(
    tmp_path: Path, own_config_home: Path, content: str
) -> None:
    path = own_config_home / "oom-wizard" / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_text(content, encoding="utf-8")
    app = demo_app(demo_folder(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        assert app.theme == "textual-dark"


def test_without_xdg_config_home_the_settings_go_to_dot_config(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert settings_path() == tmp_path / ".config" / "oom-wizard" / "settings.json"
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/ignored")
    assert settings_path() == tmp_path / ".config" / "oom-wizard" / "settings.json"
    assert os.environ["XDG_CONFIG_HOME"] == "relative/ignored"


async def test_the_result_names_the_dataset_in_the_ui_hint(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    app = review_app(JobRequest(target=folder / IMAGE_JOB.config, log=folder / IMAGE_JOB.log))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_screen(pilot, "ReviewScreen")
        app.screen.query_one("#fix-safe", Choice).value = True  # the safe set drops a bucket
        await pilot.pause()
        await save_from_review(pilot)
        changes = screen_text(pilot, "#changes")
    line = next(row for row in changes.splitlines() if "datasets[0].resolution" in row)
    assert "(UI: Datasets → the 'portraits' dataset → Resolutions)" in line
    assert "Dataset N" not in changes


async def test_a_click_on_a_step_of_the_progress_line_opens_it(tmp_path: Path) -> None:
    app = first_step_app(demo_folder(tmp_path))
    async with app.run_test(size=(320, 40)) as pilot:  # wide: the line does not wrap
        await wait_for_screen(pilot, "StepScreen")
        await press(pilot, "enter")
        assert isinstance(app.screen, StepScreen) and app.screen.index == 1
        state = app.require_state()
        done = next(s for s in state.rollback_steps() if s.satisfied and s.available)
        ladder = screen_text(pilot, "#ladder")
        await pilot.click("#ladder", offset=(ladder.index(done.title), 0))
        await settle(pilot)
        assert isinstance(app.screen, StepScreen) and app.screen.step.id == done.id
        await pilot.click("#ladder", offset=(2, 0))  # the first step, accepted before
        await settle(pilot)
        assert isinstance(app.screen, StepScreen) and app.screen.index == 0
