"""Issue 12, item 13: a worker that fails on any screen reaches the user as the CLI's line.

``Worker.StateChanged`` does not bubble, so an app-level handler alone never sees a
screen's worker fail: the app stayed on "Reading …" forever. Every stage now hands its
failed workers to the app, which shows the one line the command line prints (and, with
``--debug``, names a log file holding the traceback).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Static

from oom_wizard.application import settling
from oom_wizard.application.demo import IMAGE_JOB
from oom_wizard.screens.app import create_app
from oom_wizard.storage import atomic
from tests.support.app_support import (
    demo_app,
    demo_folder,
    press,
    review_first_step,
    settle,
    wait_for_screen,
)

SIZE = (80, 24)

INTERNAL = "oom-wizard: internal error: RuntimeError: boom (run again with --debug"


def notified(app: object) -> list[str]:
    return [note.message for note in app._notifications]  # type: ignore[attr-defined]


async def wait_for_notice(pilot, tries: int = 40) -> list[str]:
    for _ in range(tries):
        if notified(pilot.app):
            return notified(pilot.app)
        await settle(pilot)
    raise AssertionError("no notification came")


def boom(*_args: object, **_kwargs: object) -> settling.WizardState:
    raise RuntimeError("boom")


async def test_a_load_worker_that_fails_shows_the_clis_line(tmp_path, monkeypatch):
    monkeypatch.setattr(settling, "start", boom)
    folder = demo_folder(tmp_path)
    app = demo_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_screen(pilot, "LoadScreen")
        notes = await wait_for_notice(pilot)
        assert any(note.startswith(INTERNAL) for note in notes), notes
        status = str(app.screen.query_one("#status", Static).render())
        error = str(app.screen.query_one("#error", Static).render())
    assert "Reading" not in status
    assert error.startswith(INTERNAL)


async def test_with_debug_the_traceback_goes_to_a_named_log_file(tmp_path, monkeypatch):
    monkeypatch.setattr(settling, "start", boom)
    folder = demo_folder(tmp_path)
    app = create_app(folder / IMAGE_JOB.config, debug=True)
    async with app.run_test(size=SIZE) as pilot:
        notes = await wait_for_notice(pilot)
    (line,) = [note for note in notes if note.startswith(INTERNAL)]
    log = Path(line.rsplit("(traceback in ", 1)[1].rstrip(")"))
    try:
        text = log.read_text(encoding="utf-8")
        assert "Traceback (most recent call last)" in text and "RuntimeError: boom" in text
    finally:
        log.unlink()


async def test_a_save_worker_that_fails_shows_the_line_and_writes_nothing(tmp_path):
    folder = demo_folder(tmp_path)
    before = sorted(path.name for path in folder.iterdir())
    app = demo_app(folder)

    def fail(step: str, path: Path) -> None:
        if step == "rename":
            raise RuntimeError("boom")

    atomic.STEP_HOOK = fail
    try:
        async with app.run_test(size=SIZE) as pilot:
            await review_first_step(pilot)
            await press(pilot, "enter")
            notes = await wait_for_notice(pilot)
            error = str(app.screen.query_one("#error", Static).render())
    finally:
        atomic.STEP_HOOK = None
    assert any(note.startswith(INTERNAL) for note in notes), notes
    assert error.startswith(INTERNAL)
    assert sorted(path.name for path in folder.iterdir()) == before


@pytest.fixture(autouse=True)
def _no_hook_left():
    yield
    atomic.STEP_HOOK = None
