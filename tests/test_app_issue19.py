"""Issue 19: what a new user found wrong in the app (the app's items)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import Input, Static

from oom_wizard.commands.demo import IMAGE_JOB
from tests.app_support import (
    demo_app,
    demo_folder,
    press,
    review_first_step,
    screen_name,
    settle,
)

SIZE = (80, 24)


def row_reason(app: object, selector: str = "#output-reason") -> str:
    return str(app.screen.query_one(selector, Static).render())  # type: ignore[attr-defined]


async def clear_output(pilot: Pilot[int]) -> None:
    output = pilot.app.screen.query_one("#output", Input)
    output.focus()
    await settle(pilot)
    await press(pilot, "end", "ctrl+u")


async def test_an_empty_save_as_is_refused_on_its_row_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    folder = demo_folder(tmp_path)
    before = sorted(path.name for path in folder.iterdir())
    app = demo_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await review_first_step(pilot)
        await clear_output(pilot)
        assert app.screen.query_one("#output", Input).value == ""
        await press(pilot, "enter")
        assert screen_name(pilot) == "ReviewScreen"
        assert "a file name is needed" in row_reason(app)
    assert sorted(path.name for path in folder.iterdir()) == before


async def test_the_source_typed_then_cleared_is_refused_on_the_row(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    source = folder / IMAGE_JOB.config
    before = source.read_bytes()
    app = demo_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await review_first_step(pilot)
        await clear_output(pilot)
        await pilot.press(*str(source))
        await press(pilot, "enter")
        assert screen_name(pilot) == "ReviewScreen"
        reason = row_reason(app)
        assert "source config" in reason
        assert " -o" not in reason
        await press(pilot, "ctrl+u", "enter")
        assert screen_name(pilot) == "ReviewScreen"
        assert "a file name is needed" in row_reason(app)
    assert source.read_bytes() == before


async def test_a_refused_save_says_what_to_do_in_the_app_not_with_a_flag(tmp_path: Path) -> None:
    """Item 12: the app names its own field; the command line its flag (one source)."""
    folder = demo_folder(tmp_path)
    taken = folder / "taken.yaml"
    taken.write_text("# mine\n", encoding="utf-8")
    app = demo_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await review_first_step(pilot)
        app.screen.query_one("#output", Input).value = str(taken)
        await press(pilot, "enter")
        error = str(app.screen.query_one("#error", Static).render())
    assert "already exists" in error
    assert "type another name in Save as" in error
    assert " -o" not in error and "--force" not in error
    cli = subprocess.run(
        [sys.executable, "-m", "oom_wizard", "apply", str(folder / IMAGE_JOB.config),
         "--log", str(folder / IMAGE_JOB.log), "--no-probe", "-o", str(taken)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert cli.returncode == 2
    assert "pick another name with -o (or pass --force to replace it)" in cli.stderr


def test_the_service_checks_a_typed_file_destination(tmp_path: Path) -> None:
    from oom_wizard.request import JobRequest
    from oom_wizard.service import file_target, start

    folder = demo_folder(tmp_path)
    state = start(JobRequest(folder / IMAGE_JOB.config, folder / IMAGE_JOB.log, probe=False))
    assert file_target(state, "  ", None).reasons()[0] == (
        "a file name is needed for the new config; type a file name in Save as"
    )
    assert file_target(state, str(folder) + "/", None).destination is None
    assert "source config" in (file_target(state, str(folder / IMAGE_JOB.config), None)
                               .reasons()[0] or "")  # fmt: skip
    fine = file_target(state, str(folder / "new.yaml"), "")
    assert fine.destination is None
    assert fine.reasons()[1] == (
        "a file name is needed for the change log; type a file name in Change log"
    )
    good = file_target(state, str(folder / "new.yaml"), None).destination
    assert good is not None and good.changelog == folder / "new.changelog.json"
