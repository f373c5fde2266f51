"""``watch``: the live screen against logs the fake trainer writes, in-process and in tmux."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from textual.widgets import Log

from oom_wizard.application.follow import (
    JobRow,
    WatchTarget,
    read_job_row,
    watch_db_target,
    watch_target,
)
from oom_wizard.screens.app import create_app
from oom_wizard.screens.step import StepScreen
from oom_wizard.screens.watch import WatchApp, row_text
from tests.domain.logs.test_follow import fake_log
from tests.support.aitk_db import add_job, all_rows, make_db, stringify
from tests.support.app_support import until, wait_for_screen
from tests.support.autopilot_support import FAKE, SCENARIOS, write_config
from tests.support.tmux_support import HOLD, WIZARD, in_a_real_terminal, terminal


def text_of(app: WatchApp, selector: str) -> str:
    return str(app.query_one(selector).render())


async def test_the_live_screen_shows_progress_a_skip_then_leaves_for_the_wizard_on_the_crash(
    tmp_path: Path,
) -> None:
    data = fake_log(tmp_path)
    config = tmp_path / "image-early-steps.yaml"
    log = tmp_path / "log.txt"
    app = WatchApp(WatchTarget(log, config, "image-early-steps"), poll_s=0.02, probe=False)
    cut = data.index(b"# OOM during training step, skipping batch 1/3 #")
    async with app.run_test(size=(100, 30)) as pilot:

        async def shown(check: Callable[[], bool]) -> None:
            if not await until(pilot, check, idle=False):
                raise AssertionError("the screen never showed it")

        def warnings() -> str:
            return "\n".join(app.query_one("#warnings", Log).lines)

        await shown(lambda: "Waiting for the log" in text_of(app, "#progress"))
        log.write_bytes(data[:cut])
        await shown(lambda: "Phase training · step 0/3000" in text_of(app, "#progress"))
        log.write_bytes(data[: cut + 200])
        await shown(
            lambda: "OOM at step 1: the toolkit skipped the batch (1/3 in a row)" in warnings()
        )
        assert app.crash is None
        log.write_bytes(data)
        await shown(lambda: app.return_value is not None)
    report = app.crash
    assert report is not None
    assert report.verdict.startswith("The job ran out of GPU memory in training step 4")
    assert report.first_change is not None
    assert report.first_change.startswith("Gradient checkpointing on")
    result = app.return_value
    assert result is not None and result.open_wizard and result.state is not None
    assert (result.state.moment, result.state.log_path) == ("early_steps", log)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([config.name, "log.txt"])

    # The command opens the wizard on that state: the first change is on screen, Esc goes
    # back to the moment, Ctrl+Q quits; nothing was read again, nothing written.
    wizard = create_app(opened=result.state)
    async with wizard.run_test(size=(100, 30)) as pilot:
        await wait_for_screen(pilot, "StepScreen")
        step = wizard.screen
        assert isinstance(step, StepScreen) and step.step.id == "gradient_checkpointing"
        await pilot.press("escape")
        await wait_for_screen(pilot, "MomentScreen")
        await pilot.press("escape")
        await wait_for_screen(pilot, "LoadScreen")
        status = str(wizard.screen.query_one("#status").render())
        assert "Read. Enter: when did it crash?" in status
        await pilot.press("ctrl+q")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([config.name, "log.txt"])


async def test_a_crash_that_is_not_out_of_memory_stays_on_the_live_screen(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, SCENARIOS[0])
    log = tmp_path / "log.txt"
    app = WatchApp(WatchTarget(log, config, "image-early-steps"), poll_s=0.02, probe=False)
    async with app.run_test(size=(100, 30)) as pilot:
        log.write_bytes(
            b"Running 1 job\nflux_portrait_lora:   0%|          | 0/3000 [00:00<?, ?it/s]\r"
            b"flux_portrait_lora:   0%|          | 1/3000 [00:02<1:40:00,  2.00s/it, lr: 1.0e-04]"
            b"\nError running job: [Errno 2] No such file or directory: 'dataset/img'\n"
            b'Traceback (most recent call last):\n  File "run.py", line 90, in <module>\n'
            b"FileNotFoundError: [Errno 2] No such file or directory: 'dataset/img'\n"
        )
        await until(pilot, lambda: app.crash is not None, idle=False)
        assert app.crash is not None and app.crash.moment is None
        assert app.return_value is None  # still on the live screen
        assert "CRASHED" in text_of(app, "#crash")
        await pilot.press("enter")
    assert app.return_value is not None and app.return_value.state is None


def test_watch_finds_the_log_of_a_config_and_of_a_job_folder(tmp_path: Path) -> None:
    config = write_config(tmp_path, SCENARIOS[0])
    found = watch_target(config, None)
    assert found.log == Path("output") / "flux_portrait_lora" / "log.txt"
    assert found.name == "flux_portrait_lora"
    folder = tmp_path / "output" / "flux_portrait_lora"
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_bytes(config.read_bytes())
    assert watch_target(folder, None).log == folder / "log.txt"
    assert watch_target(None, tmp_path / "x.log").config is None


@in_a_real_terminal
def test_watch_in_tmux_beside_the_fake_trainer(tmp_path: Path) -> None:
    """The live screen, a skip warning, then the crash opening the wizard by itself."""
    scenario = next(s for s in SCENARIOS if s.name == "image-intermittent")
    config = write_config(tmp_path, scenario)
    log = tmp_path / "log.txt"
    command = f"{WIZARD} watch {config} --log {log} --no-probe; echo EXIT=$?; {HOLD}"
    trainer = None
    with terminal(command, cwd=tmp_path) as pane:
        try:
            pane.wait_for("Waiting for the log")
            env = {
                **os.environ,
                "FAKE_VRAM_GB": "24",
                "FAKE_STEP_S": "0.01",
                "FAKE_BIG_BUCKET_FROM": "40",
            }
            with log.open("wb") as sink:
                trainer = subprocess.Popen(
                    [sys.executable, str(FAKE), str(config)],
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                    env=env,
                )
                pane.wait_for("Phase training")
                pane.wait_for("OOM at step 41")
                # The crash opens the wizard by itself, diagnosed, on the first change.
                shown = pane.wait_for("Step 1 of")
                assert "Drop the biggest resolution" in shown
                # The verdict, as a notification: drawn a frame or more after the step.
                pane.wait_for("The job crashed")
                trainer.wait(30)
            pane.send("Escape")  # a way back: the moment, as the log says
            pane.wait_for("When did it crash?")
            pane.send("C-q")
            assert "EXIT=0" in pane.wait_for("EXIT=")
        finally:
            if trainer is not None and trainer.poll() is None:
                trainer.kill()


def test_a_failed_rows_step_is_the_last_save_not_the_step_that_failed() -> None:
    """After an exception AI Toolkit's trainer writes the last save's step into the row
    (`DiffusionTrainer.py`: `step=last_save_step`): the row says so, beside the log's own step."""
    assert row_text(JobRow("error", 250, "CUDA out of memory")) == (
        "UI job: error · last saved at step 250 · CUDA out of memory"
    )
    assert row_text(JobRow("running", 312, "Training")) == "UI job: running · step 312 · Training"


async def test_a_web_ui_job_shows_its_row_and_is_read_without_blocking(tmp_path: Path) -> None:
    db = make_db(tmp_path / "aitk_db.db")
    add_job(db, "my_lora", status="running", step=250, info="Training")
    target = watch_db_target(db, "my_lora", None)
    assert target.log == tmp_path / "output" / "my_lora" / "log.txt"
    assert target.can_open_wizard and target.config is None

    app = WatchApp(target, poll_s=0.05, probe=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: "UI job" in text_of(app, "#row"), idle=False)
        assert text_of(app, "#row") == "UI job: running · step 250 · Training"

    assert read_job_row(db, "my_lora") == JobRow("running", 250, "Training")
    writer = sqlite3.connect(db, isolation_level=None)
    try:
        writer.execute("BEGIN EXCLUSIVE")  # the UI in the middle of a write
        assert read_job_row(db, "my_lora", busy_timeout=0.05) is None
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert all_rows(db)[0]["step"] == 250  # nothing of the job's was written


async def test_a_web_ui_job_that_crashes_opens_the_wizard_on_its_row(tmp_path: Path) -> None:
    from oom_wizard.formats.document import load_document

    config = write_config(tmp_path, SCENARIOS[0])
    db = make_db(tmp_path / "aitk_db.db")
    add_job(db, "flux_portrait_lora", text=stringify(load_document(config).tree))
    log = tmp_path / "log.txt"
    app = WatchApp(watch_db_target(db, "flux_portrait_lora", log), poll_s=0.02, probe=False)
    async with app.run_test(size=(100, 30)) as pilot:
        log.write_bytes(fake_log(tmp_path))
        await until(pilot, lambda: app.return_value is not None, idle=False)
    result = app.return_value
    assert result is not None and result.state is not None
    assert result.state.db_job is not None and result.state.db_job.name == "flux_portrait_lora"
    assert result.state.moment == "early_steps"
    assert all_rows(db)[0]["job_config"] == stringify(load_document(config).tree)


PILOT_ON_A_FIFO = """
import asyncio, sys
from pathlib import Path
from oom_wizard.application.follow import WatchTarget
from oom_wizard.screens.watch import WatchApp

async def main() -> None:
    log = Path(sys.argv[1])
    app = WatchApp(WatchTarget(log, None, "job"), poll_s=0.02, probe=False)
    async with app.run_test(size=(100, 30)) as pilot:
        for _ in range(100):
            shown = str(app.query_one("#progress").render())
            if shown.startswith("Not following"):
                break
            await pilot.pause(0.05)
        print(shown)
        await pilot.press("q")
    print("left", app.return_value)

asyncio.run(main())
"""


def test_watch_on_a_fifo_says_so_and_quits_on_q(tmp_path: Path) -> None:
    """A real process: the live screen on a log that is a FIFO (nobody writes to it) shows one
    line and leaves on q; it never blocks in open or read."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    log = tmp_path / "log.txt"
    log.symlink_to(fifo)
    child = subprocess.Popen(
        [sys.executable, "-c", PILOT_ON_A_FIFO, str(log)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        out, _ = child.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        raise AssertionError("watch blocked on the FIFO") from None
    assert child.returncode == 0, out
    assert "Not following the log: this is a pipe (FIFO), not a log file: it is not read" in out
    assert "left WatchResult(open_wizard=False" in out


async def test_an_oom_the_job_goes_on_from_does_not_open_the_wizard(tmp_path: Path) -> None:
    config = write_config(tmp_path, SCENARIOS[0])
    log = tmp_path / "log.txt"
    bar = "flux_portrait_lora:   0%|          | {n}/3000 [00:10<1:40:00,  2.00s/it, lr: 1.0e-04]\r"
    log.write_bytes(("Running 1 job\n" + "".join(bar.format(n=n) for n in range(1, 6))).encode())
    app = WatchApp(WatchTarget(log, config, "image-early-steps"), poll_s=0.02, probe=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: "step 5/3000" in text_of(app, "#progress"), idle=False)
        with log.open("ab") as stream:
            stream.write(
                b"\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.27 GiB.\n"
            )
        await until(pilot, lambda: "error printed" in text_of(app, "#progress"), idle=False)
        assert "error printed: waiting to see whether the job goes on" in text_of(app, "#progress")
        await pilot.pause(0.5)
        assert (app.crash, app.diagnosing, app.return_value) == (None, False, None)
        with log.open("ab") as stream:
            stream.write(b"\n# OOM during training step, skipping batch 1/3 #\n")
            stream.write("".join(bar.format(n=n) for n in range(6, 9)).encode())
        await until(pilot, lambda: "step 8/3000" in text_of(app, "#progress"), idle=False)
        assert "error printed" not in text_of(app, "#progress")
        warnings = "\n".join(app.query_one("#warnings", Log).lines)
        assert "OOM at step 6: the toolkit skipped the batch (1/3 in a row)" in warnings
        assert (app.crash, app.diagnosing, app.return_value) == (None, False, None)
        await pilot.press("q")
    assert app.return_value is not None and not app.return_value.open_wizard


async def test_quitting_stops_the_reading_worker_without_waiting_for_its_next_read(
    tmp_path: Path,
) -> None:
    """Between two reads the worker sleeps; a quit ends that sleep rather than wait it out
    (it used to keep the program alive for the rest of the interval)."""
    target = WatchTarget(tmp_path / "log.txt", tmp_path / "job.yaml", "job")
    app = WatchApp(target, poll_s=120, probe=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.1)  # the worker has read once and sleeps now
        started = time.monotonic()
        await pilot.press("q")
    assert app.return_value is not None
    assert time.monotonic() - started < 60  # not the 120 s of its interval


async def test_the_live_screen_reads_the_card_in_each_phase_and_leaves_with_the_readings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A phase change is read at once (a short phase is read too); the readings leave with
    the screen, for the command to keep (:func:`keep_readings`)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(
        '#!/bin/sh\ncase "$1" in --query-gpu=*) echo "0, Fake RTX, 24576, 18227, 6349";; esac\n'
    )
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    data = fake_log(tmp_path)
    log = tmp_path / "log.txt"
    log.write_bytes(data[: data.index(b"# OOM during training step, skipping batch 1/3 #")])
    target = WatchTarget(log, tmp_path / "image-early-steps.yaml", "image-early-steps")
    app = WatchApp(target, poll_s=0.02)
    async with app.run_test(size=(100, 30)) as pilot:
        assert await until(pilot, lambda: "training" in app.readings.peaks.get(0, {}), idle=False)
        await pilot.press("q")
    result = app.return_value
    assert result is not None and not result.open_wizard
    assert result.readings.peaks[0]["training"] == pytest.approx(17.8, abs=0.01)
    assert result.status is not None and result.status.phase == "training"
