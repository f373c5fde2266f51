"""Pilot tests of reading a big log in the load screen: progress on screen, Esc cancels.

The log is the image demo's own, with 32 MB of ordinary lines (library warnings, a logger's
chatter) put in after its start, as a long job writes them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import ProgressBar
from textual.worker import WorkerState

from oom_wizard.application.demo import IMAGE_JOB
from oom_wizard.logs import read as logread
from oom_wizard.screens.load import LoadScreen
from tests.support.app_support import (
    demo_app,
    demo_folder,
    screen_text,
    until,
    wait_for_screen,
    wizard,
)

FILLER = (
    "/venv/lib/python3.10/site-packages/torch/utils/checkpoint.py:91: UserWarning: None of the "
    "inputs have requires_grad=True. Gradients will be None\n"
    "  warnings.warn(\n"
    "[2025-03-14 10:49:12,004] [INFO] [logging.py:128:log_dist] [Rank 0] step=12, skipped=0\n"
    "Token indices sequence length is longer than the specified maximum sequence length for "
    "this model (93 > 77). Running this sequence through the model will result in errors\n"
)
BIG = 32 << 20
SIZE = (110, 40)


def big_log(folder: Path, size: int = BIG) -> Path:
    """The image demo's log with ``size`` bytes of ordinary lines after its first lines."""
    lines = (folder / IMAGE_JOB.log).read_text(encoding="utf-8").splitlines(keepends=True)
    path = folder / "big.log"
    with path.open("w", encoding="utf-8", newline="") as out:
        out.writelines(lines[:60])
        block = FILLER * (1 << 20 // len(FILLER))
        for _ in range(size // len(block)):
            out.write(block)
        out.writelines(lines[60:])
    return path


async def wait_until(pilot: Pilot[int], condition: Callable[[], bool]) -> None:
    """Let the app run until ``condition`` holds (the worker's messages arrive meanwhile)."""
    if not await until(pilot, condition, idle=False):
        pytest.fail("the condition never held")


class ReadSpy:
    """Counts the scanner's reads and whether one of them stopped the scan (wraps the real)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reads = 0
        self.cancelled = False
        real = logread.WatchedReader.read

        def read(reader: logread.WatchedReader, size: int, /) -> bytes:
            try:
                data = real(reader, size)
            except logread.ScanCancelled:
                self.cancelled = True
                raise
            self.reads += 1
            return data

        monkeypatch.setattr(logread.WatchedReader, "read", read)


async def test_a_big_log_shows_progress_and_esc_cancels_the_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = demo_folder(tmp_path)
    log = big_log(folder)
    spy = ReadSpy(monkeypatch)
    app = demo_app(folder, log=log)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_screen(pilot, "LoadScreen")
        screen = pilot.app.screen
        assert isinstance(screen, LoadScreen)
        await wait_until(pilot, lambda: bool(screen.query("#reading-bar")))
        bar = screen.query_one("#reading-bar", ProgressBar)
        reading = screen.query_one("#reading")
        await wait_until(pilot, lambda: (bar.progress or 0) > 0)
        assert reading.display
        assert bar.total == log.stat().st_size
        status = screen_text(pilot, "#status")
        assert (
            status.startswith("Reading the log: ")
            and f" of {log.stat().st_size / 1e6:,.0f} MB" in status
        )
        reader = screen.reader
        assert reader is not None

        await pilot.press("escape")
        await wait_until(pilot, lambda: spy.cancelled)
        await wait_until(pilot, lambda: reader.state == WorkerState.CANCELLED)
        assert screen.reader is None
        assert wizard(pilot).state is None
        assert not reading.display
        assert (bar.progress or 0) < log.stat().st_size
        assert screen_text(pilot, "#status").startswith("Reading cancelled.")
        assert screen_text(pilot, "#error") == ""

        # Still usable: Enter reads the job again, to the end this time.
        reads_before = spy.reads
        await pilot.press("enter")
        await wait_until(pilot, lambda: wizard(pilot).state is not None)
        await pilot.pause()
        assert spy.reads > reads_before
        assert screen_text(pilot, "#status").startswith("Read.")
        assert screen_text(pilot, "#error") == ""
        assert not reading.display
        state = wizard(pilot).require_state()
        assert state.log_path == log
        assert state.diagnosis is not None


async def test_a_small_log_shows_no_progress_bar(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    app = demo_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_screen(pilot, "LoadScreen")
        await wait_until(pilot, lambda: wizard(pilot).state is not None)
        await pilot.pause()
        assert not pilot.app.screen.query_one("#reading").display
        assert not pilot.app.screen.query(ProgressBar), "no bar is built for a small log"
        assert screen_text(pilot, "#status").startswith("Read.")


async def test_esc_does_nothing_to_a_loaded_job(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    app = demo_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_screen(pilot, "LoadScreen")
        await wait_until(pilot, lambda: wizard(pilot).state is not None)
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
        assert wizard(pilot).state is not None
        assert screen_text(pilot, "#status").startswith("Read.")
