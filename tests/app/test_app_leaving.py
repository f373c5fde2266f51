"""Leaving the wizard: the summary the terminal keeps, and Ctrl+Q with choices not saved.

The summary is computed by the application layer
(:func:`oom_wizard.application.leaving.leaving_summary`) and
printed by the command line once the app is closed (``commands._common.run_wizard``).
"""

from __future__ import annotations

import io
import os
import shlex
from pathlib import Path
from typing import cast

from rich.console import Console
from textual.pilot import Pilot

from oom_wizard.application.demo import IMAGE_JOB
from oom_wizard.commands._common import run_wizard
from oom_wizard.request import JobRequest
from oom_wizard.rules.diagnosis import Answers
from oom_wizard.screens.app import create_app
from oom_wizard.screens.ask import LeaveScreen
from oom_wizard.screens.result import ResultScreen
from oom_wizard.screens.step import StepScreen
from tests.support.app_support import (
    REPO,
    UI_JOB,
    demo_app,
    demo_folder,
    press,
    review_app,
    save_from_review,
    screen_text,
    step_app,
    ui_job_folder,
    ui_jobs_db,
    wait_for_screen,
    wait_for_state,
)

SIZE = (80, 24)


def demo_request(folder: Path) -> JobRequest:
    """The image demo job of ``folder`` with its log."""
    return JobRequest(target=folder / IMAGE_JOB.config, log=folder / IMAGE_JOB.log)


def expected_commands(folder: Path) -> tuple[str, str]:
    """The run command and the wizard's command for the demo's first fix."""
    config = os.path.abspath(folder / "flux_portrait_lora.oomfix.yaml")
    log = os.path.abspath(folder / "flux_portrait_lora.oomfix.log.txt")
    return (
        f"python run.py {shlex.quote(config)} -l {shlex.quote(log)}",
        f"oom-wizard {shlex.quote(config)} --log {shlex.quote(log)}",
    )


async def test_the_summary_names_the_files_and_the_command_with_its_log(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    app = review_app(demo_request(folder))
    async with app.run_test(size=SIZE) as pilot:
        await save_from_review(pilot)
        assert isinstance(app.screen, ResultScreen)
        run, reopen = expected_commands(folder)
        assert run in screen_text(pilot, "#run")  # the screen and the summary agree
        await press(pilot, "enter")
        assert app.return_code == 0
    summary = app.leaving()
    assert summary.saved
    text = summary.text()
    assert str(folder / "flux_portrait_lora.oomfix.yaml") in text
    assert str(folder / "flux_portrait_lora.oomfix.changelog.json") in text
    assert f"  {run}" in summary.lines
    assert f"  {reopen}" in summary.lines
    assert (folder / "flux_portrait_lora.oomfix.yaml").is_file()


async def test_ctrl_q_on_a_step_asks_and_stay_keeps_the_wizard(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    app = step_app(folder, Answers())
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_screen(pilot, "StepScreen")
        assert isinstance(app.screen, StepScreen)
        await press(pilot, "enter")  # one step decided
        step = app.screen
        assert isinstance(step, StepScreen)
        await press(pilot, "ctrl+q")
        assert isinstance(app.screen, LeaveScreen)
        assert app.return_code is None
        await press(pilot, "escape")
        assert app.screen is step
        assert app.return_code is None
        await press(pilot, "ctrl+q", "enter")  # Stay has the focus: Enter keeps the work
        assert app.screen is step
        assert len(app.require_state().choices) == 1
        await press(pilot, "ctrl+q", "l")
        assert app.return_code == 0
    assert app.leaving().lines == (
        f"oom-wizard: nothing saved; {folder / IMAGE_JOB.config} is as it was.",
    )
    assert not list(folder.glob("*.oomfix*"))
    bundled = REPO / "presets" / "demo" / IMAGE_JOB.config
    assert (folder / IMAGE_JOB.config).read_bytes() == bundled.read_bytes()


async def test_ctrl_q_twice_leaves(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    app = step_app(folder, Answers())
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_screen(pilot, "StepScreen")
        await press(pilot, "ctrl+q")
        assert isinstance(app.screen, LeaveScreen)
        await press(pilot, "ctrl+q")
        assert app.return_code == 0
    assert not app.leaving().saved


async def test_ctrl_q_before_any_choice_leaves_at_once(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    app = demo_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        await press(pilot, "enter")  # the moment screen: nothing decided yet
        await press(pilot, "ctrl+q")
        assert app.return_code == 0


async def test_ctrl_q_after_the_save_leaves_at_once(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    app = review_app(demo_request(folder))
    async with app.run_test(size=SIZE) as pilot:
        await save_from_review(pilot)
        await press(pilot, "ctrl+q")
        assert app.return_code == 0
    assert app.leaving().saved


def test_the_command_line_prints_the_summary_after_the_app(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    app = review_app(demo_request(folder))

    async def drive(pilot: Pilot[object]) -> None:
        driven = cast("Pilot[int]", pilot)  # Textual types the auto-pilot's pilot loosely
        await save_from_review(driven)
        await press(driven, "enter")

    out = io.StringIO()
    status = run_wizard(app, Console(file=out, width=400), headless=True, auto_pilot=drive)
    assert status == 0
    printed = out.getvalue().splitlines()
    assert printed == list(app.leaving().lines)
    run, reopen = expected_commands(folder)
    assert f"  {run}" in printed and f"  {reopen}" in printed


async def test_the_summary_of_a_ui_job_names_the_job_to_start(tmp_path: Path) -> None:
    db = ui_jobs_db(tmp_path)
    app = review_app(JobRequest(db=db, job=UI_JOB))
    async with app.run_test(size=SIZE) as pilot:
        await save_from_review(pilot)  # "Update job" is the first place offered
        await press(pilot, "enter")
        assert app.return_code == 0
    lines = app.leaving().lines
    assert lines[0] == f"oom-wizard saved UI job '{UI_JOB}' (updated in place)"
    assert f"  database:   {db}" in lines
    assert any(line.startswith(f"Next: start job '{UI_JOB}' in AI Toolkit's UI") for line in lines)
    assert f"To undo it: oom-wizard restore --db {db} --job {UI_JOB}" in lines
    assert not any("python run.py" in line for line in lines)


async def test_ctrl_q_on_a_ui_job_names_the_job_not_a_pseudo_path(tmp_path: Path) -> None:
    app = create_app(db=ui_jobs_db(tmp_path), job=UI_JOB)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        await press(pilot, "enter", "enter", "ctrl+q")
        assert isinstance(app.screen, LeaveScreen)
        assert f"UI job '{UI_JOB}' stays as it was" in screen_text(pilot, "#ask-text")
        await press(pilot, "l")
    assert app.leaving().lines == (f"oom-wizard: nothing saved; UI job '{UI_JOB}' is as it was.",)


async def test_a_ui_job_folder_saved_as_a_file_says_what_to_do_in_the_ui(tmp_path: Path) -> None:
    folder = ui_job_folder(tmp_path)
    db = tmp_path / "aitk_db.db"
    app = review_app(JobRequest(target=folder, probe=False))
    async with app.run_test(size=SIZE) as pilot:
        await save_from_review(pilot)
        await press(pilot, "enter")
    lines = app.leaving().lines
    assert app.leaving().saved
    assert not any("python run.py" in line for line in lines)
    assert any("paste the new config under Show Advanced" in line for line in lines)
    assert any(f"use --db {db} --job {UI_JOB}" in line for line in lines)
