"""Helpers for the app's Pilot, snapshot and key-count tests: demo copies, logs, a jobs
database, driving."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, OptionList, Static
from textual.worker import WorkerFailed

from oom_wizard.application.demo import IMAGE_JOB, VIDEO_JOB, DemoJob, copy_demo
from oom_wizard.application.settling import start
from oom_wizard.request import JobRequest
from oom_wizard.rules.diagnosis import Answers
from oom_wizard.screens.app import OomWizardApp, create_app
from tests.support.aitk_db import CREATED_MS, add_job, make_db, ui_job_config
from tests.support.plan_support import cli

REPO = Path(__file__).resolve().parents[2]
FIXED_TIME = "2026-01-01T12:00:00+00:00"


def demo_folder(root: Path) -> Path:
    """A fresh copy of the demo jobs under ``root``."""
    return copy_demo(root / "oom-wizard-demo")


def rolled_back_demo(folder: Path) -> Path:
    """The image demo job of ``folder`` rolled back with every default, saved beside it; the
    saved config. ``apply`` in-process: the parity tests (``tests/application/test_parity.py``)
    hold that it saves the bytes and change log the app's walk saves, so a test about coming
    back starts from it rather than walking the first roll-back key by key."""
    status, out, err = cli("apply", folder / IMAGE_JOB.config, "--log", folder / IMAGE_JOB.log)
    assert status == 0, err
    return Path(next(line for line in out.splitlines() if line.startswith("Wrote "))[6:])


def rolled_back_ui_job(db: Path, job: str) -> None:
    """Job ``job`` of the jobs database ``db`` rolled back with every default and updated in
    place, as the app's first offer does (see :func:`rolled_back_demo`)."""
    status, _, err = cli("apply", "--db", db, "--job", job, "--in-place")
    assert status == 0, err


def review_app(request: JobRequest) -> OomWizardApp:
    """The app opened on the review of the fix preselected for ``request``'s job, settled as
    ``run`` opens it (``create_app(opened=..., first="review")``): for a test about what
    comes after the save, which need not walk the moment and every step to get there (the
    walk has tests of its own: ``test_app_flows.py``, the parity tests)."""
    return create_app(opened=start(request), first="review")


def step_app(folder: Path, answers: Answers, job: DemoJob = IMAGE_JOB) -> OomWizardApp:
    """The app on one demo job of ``folder``, opened on the first step of the walk for
    ``answers`` as the moment screen leaves it (``create_app(opened=start(...))``, as ``run``
    and ``watch`` open it): for a test about a step, which need not walk the load and moment
    screens (the walk to it has tests of its own: ``test_app_flows.py``, the parity tests)."""
    request = JobRequest(folder / job.config, log=folder / job.log, probe=False)
    return create_app(opened=start(request, answers))


def demo_app(folder: Path, job: DemoJob = IMAGE_JOB, *, log: Path | None = None) -> OomWizardApp:
    """The app on one demo job of ``folder`` (its own log unless ``log`` is given)."""
    return create_app(folder / job.config, log=log or folder / job.log)


def video_app(folder: Path) -> OomWizardApp:
    """The app on the video demo job."""
    return demo_app(folder, VIDEO_JOB)


def baseline_sample_log(folder: Path) -> Path:
    """A log of the image demo job that dies while generating the baseline sample."""
    text = (folder / IMAGE_JOB.log).read_text(encoding="utf-8")
    head = text[: text.index("Generating baseline samples before training")]
    tail = (
        "Generating baseline samples before training\n"
        "Generating Images:   0%|          | 0/3 [00:00<?, ?it/s]\n"
        "Error running job: CUDA out of memory. Tried to allocate 4.50 GiB. GPU 0 has a total "
        "capacity of 23.54 GiB of which 2.87 GiB is free. Including non-PyTorch memory, this "
        "process has 20.66 GiB memory in use. Of the allocated memory 19.98 GiB is allocated by "
        "PyTorch, and 218.40 MiB is reserved by PyTorch but unallocated.\n\n"
        "========================================\nResult:\n - 0 completed jobs\n"
        " - 1 failure\n========================================\n"
        "Traceback (most recent call last):\n"
        '  File "/home/me/ai-toolkit/run.py", line 96, in main\n'
        "    job.run()\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.50 GiB. GPU 0 has a "
        "total capacity of 23.54 GiB of which 2.87 GiB is free. Including non-PyTorch memory, "
        "this process has 20.66 GiB memory in use. Of the allocated memory 19.98 GiB is "
        "allocated by PyTorch, and 218.40 MiB is reserved by PyTorch but unallocated.\n"
    )
    path = folder / "baseline_sample.log"
    path.write_text(head + tail, encoding="utf-8")
    return path


#: The crashed job of :func:`ui_jobs_db` (newest, first in the list), and a running one.
UI_JOB = "flux_portrait"
RUNNING_JOB = "wan_dance_clips"


def ui_jobs_db(root: Path) -> Path:
    """A jobs database in ``root`` as AI Toolkit's UI leaves it after an OOM crash.

    Four jobs, newest first: ``flux_portrait`` died with CUDA out of memory (its folder,
    ``root/output/flux_portrait``, holds the image demo's log), one completed, one still
    running, one never started.
    """
    db = make_db(root / "aitk_db.db")
    jobs = [
        (UI_JOB, "error", 4, "CUDA out of memory. Tried to allocate 2.25 GiB. GPU 0 has 23.54 GiB"),
        ("sdxl_style", "completed", 3000, "Job completed"),
        (RUNNING_JOB, "running", 812, "Training"),
        ("first_try", "stopped", 0, ""),
    ]
    for age, (name, status, step, info) in enumerate(jobs):
        config = ui_job_config(name)
        add_job(
            db,
            name,
            config=config,
            status=status,
            step=step,
            info=info,
            created_ms=CREATED_MS - age,
        )
    folder = root / "output" / UI_JOB
    folder.mkdir(parents=True)
    (folder / "log.txt").write_bytes(demo_log_as(UI_JOB))
    return db


def demo_log_as(job: str) -> bytes:
    """The image demo's log as job ``job`` writes it: its job banner names ``job`` (a log
    whose banner names another job is not taken for this one)."""
    log = (REPO / "presets" / "demo" / IMAGE_JOB.log).read_bytes()
    banner = f"# Running job: {Path(IMAGE_JOB.log).stem}\n".encode()
    assert banner in log
    return log.replace(banner, f"# Running job: {job}\n".encode())


def ui_job_folder(root: Path) -> Path:
    """The UI's job folder ``root/output/flux_portrait`` of :func:`ui_jobs_db`, with the
    ``.job_config.json`` the UI writes there: its ``sqlite_db_path`` names that database."""
    db = ui_jobs_db(root)
    folder = root / "output" / UI_JOB
    tree = ui_job_config(UI_JOB)
    tree["config"]["process"][0]["sqlite_db_path"] = str(db)
    (folder / ".job_config.json").write_text(json.dumps(tree, indent=2), encoding="utf-8")
    return folder


def freeze_changelog_time(path: Path) -> None:
    """Give every run of a change log the same timestamp (for snapshots)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    for run in data["runs"]:
        run["at"] = FIXED_TIME
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def wizard(pilot: Pilot[int]) -> OomWizardApp:
    """The app a pilot drives, typed."""
    app = pilot.app
    assert isinstance(app, OomWizardApp)
    return app


def screen_name(pilot: Pilot[int]) -> str:
    """The class name of the screen on top."""
    return type(pilot.app.screen).__name__


def screen_text(pilot: Pilot[int], selector: str) -> str:
    """The text of one Static on the screen on top."""
    return str(pilot.app.screen.query_one(selector, Static).render())


SCREEN_WAIT_S = 120.0
"""How long a wait for the app lets pass before it fails: generous, because on a busy
two-core machine a worker's thread (the job loaded, a save) can take tens of seconds; a test
that passes waits only as long as the app takes."""


async def until(pilot: Pilot[Any], check: Callable[[], bool], *, idle: bool = True) -> bool:
    """Let the app run until ``check`` holds, at most :data:`SCREEN_WAIT_S` seconds; whether it
    held. Each round lets everything under way land first (``idle``: the workers finish, then
    every message is handled; else the messages only), then waits a little."""
    deadline = time.monotonic() + SCREEN_WAIT_S
    while True:
        if check():
            return True
        if time.monotonic() > deadline:
            return False
        if idle:
            await settle(pilot)
        if check():
            return True
        await pilot.pause(0.02)


async def settle(pilot: Pilot[Any]) -> None:
    """Let everything under way land: the workers finish, then every message is handled.

    A worker that failed is not an error here: the app reports it (see ``report_failure``),
    and the tests look at what it reported.
    """
    with contextlib.suppress(WorkerFailed):
        await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def wait_for_screen(pilot: Pilot[int], name: str) -> None:
    """Wait until the screen called ``name`` is on top (after workers and screen changes).
    A pushed screen is on top before its widgets are mounted: wait for those with
    :func:`wait_for_widget`."""
    if not await until(pilot, lambda: screen_name(pilot) == name):
        raise AssertionError(f"expected {name}, got {screen_name(pilot)}")


async def wait_for_widget(pilot: Pilot[int], selector: str) -> None:
    """Wait until the screen on top has mounted a widget matching ``selector``."""
    if not await until(pilot, lambda: bool(pilot.app.screen.query(selector)), idle=False):
        raise AssertionError(f"{selector} never appeared on {screen_name(pilot)}")


async def wait_for_state(pilot: Pilot[int]) -> None:
    """Wait until the load worker has put a state on the app, and its screen has updated."""
    if not await until(pilot, lambda: wizard(pilot).state is not None):
        pytest.fail("the job did not load")
    await settle(pilot)


async def wait_for_jobs(pilot: Pilot[int]) -> OptionList:
    """Wait until the jobs database's list is filled; the list."""

    def listed() -> bool:
        jobs = pilot.app.screen.query("#jobs").results(OptionList)
        return any(found.option_count for found in jobs)

    if not await until(pilot, listed):
        pytest.fail("the jobs were not listed")
    return pilot.app.screen.query_one("#jobs", OptionList)


async def wait_for_error(pilot: Pilot[int]) -> str:
    """Wait until the screen's ``#error`` line says something; that line."""

    def said() -> bool:
        return bool(pilot.app.screen.query("#error")) and bool(screen_text(pilot, "#error"))

    if not await until(pilot, said):
        pytest.fail("no error was shown")
    return screen_text(pilot, "#error")


async def press(pilot: Pilot[int], *keys: str) -> None:
    """Press keys one by one, letting each screen change land."""
    for key in keys:
        await pilot.press(key)
        await settle(pilot)


async def accept_steps(pilot: Pilot[int]) -> list[str]:
    """Press Enter on every step screen, accepting its toggles; the step ids seen."""
    from oom_wizard.screens.step import StepScreen

    seen: list[str] = []
    while isinstance(screen := pilot.app.screen, StepScreen):
        seen.append(screen.step.id)
        await press(pilot, "enter")
    return seen


async def save_from_review(pilot: Pilot[int]) -> None:
    """Once the review is on top, save to the destination shown and wait for the result."""
    await wait_for_screen(pilot, "ReviewScreen")
    await press(pilot, "enter")
    await wait_for_screen(pilot, "ResultScreen")


async def review_first_step(pilot: Pilot[int]) -> None:
    """From launch to the review of the first step alone (Ctrl+S, "save now", on it)."""
    await wait_for_state(pilot)
    await press(pilot, "enter", "enter", "ctrl+s")
    await wait_for_screen(pilot, "ReviewScreen")


async def roll_back_with_defaults(pilot: Pilot[int]) -> list[str]:
    """From launch to the result, every default accepted; the step ids seen."""
    await wait_for_state(pilot)
    await press(pilot, "enter", "enter")
    seen = await accept_steps(pilot)
    await save_from_review(pilot)
    return seen


def freeze_inputs(app: OomWizardApp) -> None:
    """Stop the cursor blinking in every input on screen (deterministic snapshots)."""
    for field in app.screen.query(Input):
        field.cursor_blink = False
