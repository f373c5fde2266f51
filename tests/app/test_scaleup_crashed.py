"""A scale-up that gives back the exact config that crashed says so, and ``history`` stops
offering a re-add that crashed every time it was tried (issue 19, item 17)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from oom_wizard.cli import main

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "flux_portrait_24gb.yaml"


def run(*argv: str | Path) -> int:
    return main([str(arg) for arg in argv])


@pytest.fixture
def rolled_back(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    source = tmp_path / "job.yaml"
    shutil.copy(FIXTURE, source)
    assert (
        run("apply", source, "--no-probe", "--moment", "early_steps", "--steps", "batch_size") == 0
    )
    capsys.readouterr()
    return tmp_path / "job.oomfix.yaml"


def test_a_re_add_that_gives_back_the_crashed_config_says_so(
    rolled_back: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("scale-up", rolled_back, "--dry-run") == 0
    out = capsys.readouterr().out
    assert "warning: this is the config that crashed (early steps), before the roll-back of" in out
    assert "it will crash again unless something else changed" in out


def test_a_re_add_that_leaves_a_setting_lowered_says_nothing_of_the_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "job.yaml"
    shutil.copy(FIXTURE, source)
    assert run("apply", source, "--no-probe", "--moment", "early_steps", "--all") == 0
    capsys.readouterr()
    assert run("scale-up", tmp_path / "job.oomfix.yaml", "--dry-run") == 0
    assert "the config that crashed" not in capsys.readouterr().out


def test_history_stops_offering_a_re_add_that_crashed_every_time(
    rolled_back: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = rolled_back.parent
    assert run("scale-up", rolled_back, "--yes") == 0  # batch back: tried ...
    second = folder / "job.oomfix-2.yaml"
    assert (
        run("apply", second, "--no-probe", "--moment", "early_steps", "--steps", "batch_size") == 0
    )
    capsys.readouterr()  # ... and it crashed: rolled back again
    third = folder / "job.oomfix-3.yaml"

    assert run("history", third) == 0
    out = capsys.readouterr().out
    assert (
        "Next scale-up: none offered; Larger batch [batch_size] crashed the one time it was tried"
        in out
    )
    assert "Later, one setting back per retry" not in out

    assert run("scale-up", third, "--dry-run") == 0
    assert "warning: Larger batch [batch_size] crashed the one time" in capsys.readouterr().out


def test_history_still_offers_a_re_add_not_yet_tried(
    rolled_back: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("history", rolled_back) == 0
    assert "Next scale-up: Larger batch [batch_size]" in capsys.readouterr().out


async def test_the_apps_scale_up_says_it_gives_back_the_crashed_config(
    rolled_back: Path,
) -> None:
    from textual.widgets import Static

    from oom_wizard.screens.app import create_app
    from tests.support.app_support import press, screen_name, wait_for_state

    app = create_app(rolled_back, probe=False)
    async with app.run_test(size=(110, 40)) as pilot:
        await wait_for_state(pilot)
        await press(pilot, "enter")
        assert screen_name(pilot) == "ComingBackScreen"
        await press(pilot, "down", "enter")  # Yes: no log says it (none preselected)
        assert screen_name(pilot) == "ScaleUpScreen"
        note = app.screen.query_one("#crashed-note", Static)
        assert note.display and "this is the config that crashed" in str(note.render())
        # The command line's prediction, word for word (issue 33).
        from oom_wizard.application.scale_up import next_scale_up, scale_up_prediction

        state = app.require_state()
        step = next_scale_up(state)
        assert step is not None
        # No card is known here (no probe, no capacity in the log): no prediction, as the
        # command line prints none (the scale-up snapshot shows one with the demo's card).
        assert scale_up_prediction(state, step) is None
        assert not app.screen.query("#prediction")
