"""Following a growing log: tail -F semantics, the live reading, and its warnings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from oom_wizard.logs.scan import LiveScan, scan_log, scan_text
from oom_wizard.logs.tail import Follower, LiveJob
from tests.support.autopilot_support import FAKE, SCENARIOS, write_config

REPORTS = Path(__file__).resolve().parents[2] / "fixtures" / "reports"


def fake_log(tmp_path: Path, name: str = "image-early-steps", **env: str) -> bytes:
    """A log of the fake trainer, as the trainer wrote it (stdout and stderr in one)."""
    scenario = next(s for s in SCENARIOS if s.name == name)
    config = write_config(tmp_path, scenario)
    done = subprocess.run(
        [sys.executable, str(FAKE), str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "FAKE_VRAM_GB": str(scenario.card_gb), **env},
        check=False,
    )
    return done.stdout


def append(path: Path, data: bytes) -> None:
    with path.open("ab") as stream:
        stream.write(data)


def test_the_follower_waits_for_a_log_that_does_not_exist_yet(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    follower = Follower(log)
    assert follower.poll() == (b"", None)
    append(log, b"Running 1 job\n")
    assert follower.poll() == (b"Running 1 job\n", "opened")
    append(log, b"Loading Flux model\n")
    assert follower.poll() == (b"Loading Flux model\n", None)
    assert follower.poll() == (b"", None)


def test_truncation_starts_over_from_the_top(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_bytes(b"first run line one\nfirst run line two\n")
    follower = Follower(log)
    follower.poll()
    log.write_bytes(b"new\n")  # same file, cut short (a restart that truncates)
    assert follower.poll() == (b"new\n", "truncated")


def test_rotation_reads_the_old_files_rest_then_the_new_one(tmp_path: Path) -> None:
    folder = tmp_path / "job"
    (folder / "logs").mkdir(parents=True)
    log = folder / "log.txt"
    log.write_bytes(b"old start\n")
    follower = Follower(log)
    assert follower.poll() == (b"old start\n", "opened")
    append(log, b"old end\n")
    log.rename(folder / "logs" / "0_log.txt")  # AI Toolkit's UI before it starts a job again
    log.write_bytes(b"Running 1 job\n")
    assert follower.poll() == (b"old end\n", None)
    assert follower.poll() == (b"Running 1 job\n", "rotated")


def test_a_log_fed_in_odd_pieces_reads_like_the_whole_file(tmp_path: Path) -> None:
    data = fake_log(tmp_path)
    assert b"\r" in data
    whole = scan_text(data)
    live = LiveScan()
    for start in range(0, len(data), 333):
        live.feed(data[start : start + 333])
        live.snapshot()  # a snapshot in between changes nothing
    seen = live.snapshot()
    for name in ("phase", "last_step", "total_steps", "skip_count", "crashed", "signals"):
        assert getattr(seen, name) == getattr(whole, name), name
    assert seen.evidence == whole.evidence


@pytest.mark.parametrize("report", sorted(p.name for p in REPORTS.iterdir()))
def test_real_report_logs_followed_byte_by_chunk_match_the_scan(report: str) -> None:
    path = REPORTS / report / "log.txt"
    data = path.read_bytes()
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        pytest.skip("a UTF-16 log is not followed live")
    whole = scan_log(path)
    live = LiveScan()
    for start in range(0, len(data), 97):
        live.feed(data[start : start + 97])
    live.feed(b"\n" if not data.endswith((b"\n", b"\r")) else b"")
    seen = live.snapshot()
    assert (seen.phase, seen.crashed, seen.last_step, seen.skip_count, seen.signals) == (
        whole.phase,
        whole.crashed,
        whole.last_step,
        whole.skip_count,
        whole.signals,
    )


def test_live_job_warns_of_each_skip_with_its_step_then_sees_the_crash(tmp_path: Path) -> None:
    data = fake_log(tmp_path)
    log = tmp_path / "log.txt"
    job = LiveJob(log)
    assert job.poll().status.waiting
    warnings: list[str] = []
    for start in range(0, len(data), 500):
        append(log, data[start : start + 500])
        warnings.extend(job.poll().warnings)
    status = job.status()
    assert [w for w in warnings if w.startswith("OOM at step")] == [
        "OOM at step 1: the toolkit skipped the batch (1/3 in a row)",
        "OOM at step 2: the toolkit skipped the batch (2/3 in a row)",
        "OOM at step 3: the toolkit skipped the batch (3/3 in a row)",
    ]
    assert status.crashed and status.ended and status.phase == "training"
    assert (status.step, status.total) == (3, 3000)
    assert status.seconds_per_step is not None and status.left is not None


def test_a_finished_run_ends_without_a_crash(tmp_path: Path) -> None:
    data = fake_log(tmp_path, FAKE_VRAM_GB="48")
    log = tmp_path / "log.txt"
    job = LiveJob(log)
    for start in range(0, len(data), 2000):
        append(log, data[start : start + 2000])
        job.poll()
    status = job.status()
    assert status.ended and not status.crashed
    assert status.step == status.total == 3000
    assert len(status.rates) > 50 and status.seconds_per_step in status.rates


def bar(step: int, rate: float) -> bytes:
    post = "lr: 1.0e-04 loss: 4.5e-01"
    return f"job:   1%|          | {step}/3000 [00:10<59:00, {rate:.2f}s/it, {post}]\r".encode()


def test_the_newest_readings_step_moves_on_when_the_window_is_full_of_equal_readings(
    tmp_path: Path,
) -> None:
    """``watch``'s chart caption names this step: once the window holds :data:`RATES_KEPT`
    equal readings, the readings alone no longer tell a new one."""
    log = tmp_path / "log.txt"
    log.write_bytes(b"Running 1 job\n")
    job = LiveJob(log)
    for step in range(1, 130):
        append(log, bar(step, 2.0))
        job.poll()
    before = job.status()
    append(log, bar(130, 2.0))
    job.poll()
    after = job.status()
    assert before.rates == after.rates  # the same window, to the reading
    assert (before.rate_step, after.rate_step) == (129, 130)


def test_a_stall_is_told_once_when_no_step_comes(tmp_path: Path) -> None:
    now = [0.0]
    log = tmp_path / "log.txt"
    log.write_bytes(b"Running 1 job\n" + b"".join(bar(n, 1.5) for n in range(1, 8)))
    job = LiveJob(log, stall_s=300, clock=lambda: now[0])
    assert job.poll().warnings == ()
    now[0] = 200.0
    assert job.poll().warnings == ()
    now[0] = 360.0
    (warning,) = job.poll().warnings
    assert warning.startswith("Stalled: no new step for 6 min after step 7")
    now[0] = 900.0
    assert job.poll().warnings == ()
    append(log, bar(8, 1.5))
    assert job.poll().warnings == ()


def test_a_slowdown_against_its_own_stable_stretch_is_told(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_bytes(b"Running 1 job\n")
    job = LiveJob(log)
    warnings: list[str] = []
    for step in range(1, 30):
        append(log, bar(step, 1.5 if step < 25 else 6.0))
        warnings.extend(job.poll().warnings)
    assert len(warnings) == 1
    assert warnings[0].startswith("Slowdown: 6.00 s/it at step 25, 4.0x its stable 1.50 s/it")


# --- what is not a log, a log that grows too fast, and a run that goes on after an OOM ---------


def poll_in_a_thread(follower: Follower) -> tuple[bytes, object]:
    """One poll, in a thread that must be done within a few seconds (it must never block)."""
    import threading

    done: list[tuple[bytes, object]] = []
    thread = threading.Thread(target=lambda: done.append(follower.poll()), daemon=True)
    thread.start()
    thread.join(5)
    assert not thread.is_alive(), "the poll blocked"
    return done[0]


@pytest.mark.parametrize("link", [False, True])
def test_a_fifo_in_the_logs_place_is_refused_without_blocking(tmp_path: Path, link: bool) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    log = tmp_path / "log.txt"
    if link:
        log.symlink_to(fifo)
    else:
        fifo.rename(log)
    job = LiveJob(log)
    assert poll_in_a_thread(job.follower) == (b"", None)
    assert job.follower.refused == "this is a pipe (FIFO), not a log file: it is not read"
    update = job.poll()
    assert update.warnings == (f"{log}: this is a pipe (FIFO), not a log file: it is not read",)
    assert update.status.refused is not None and job.poll().warnings == ()


def test_a_log_replaced_by_a_fifo_is_read_to_its_end_then_refused(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_bytes(b"Running 1 job\n")
    follower = Follower(log)
    assert follower.poll() == (b"Running 1 job\n", "opened")
    append(log, b"Loading Flux model\n")
    log.unlink()
    os.mkfifo(log)
    assert poll_in_a_thread(follower) == (b"Loading Flux model\n", None)
    assert poll_in_a_thread(follower) == (b"", None)
    assert follower.refused is not None and "FIFO" in follower.refused


def test_a_device_in_the_logs_place_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.symlink_to("/dev/urandom")
    follower = Follower(log)
    assert poll_in_a_thread(follower) == (b"", None)
    assert follower.refused == "this is a device, not a log file: it is not read"


def test_binary_content_is_given_up_after_a_bounded_look(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_bytes(os.urandom(3 << 20))
    job = LiveJob(log)
    update = job.poll()
    assert update.warnings == (f"{log}: this is not a text log (binary bytes): not read",)
    assert update.status.refused is not None and update.scan is None
    append(log, b"Running 1 job\n")
    assert job.poll().warnings == () and job.follower.offset <= 8 << 20


def test_a_log_that_grows_faster_than_it_is_read_is_read_from_its_tail(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_bytes(b"Running 1 job\n")
    job = LiveJob(log, follower=Follower(log, behind_bytes=1 << 20, tail_bytes=64 << 10))
    job.poll()
    filler = b"W1009 22:44:38 redirects.py:29] NOTE: Redirects are not supported.\n" * 40_000
    append(log, filler + bar(7, 1.5) + b"\n")
    update = job.poll()
    (warning,) = [w for w in update.warnings if w.startswith("Fell behind")]
    assert warning.startswith("Fell behind the log: skipped 3 MB")
    assert update.status.step == 7


def test_a_log_cut_short_and_written_again_past_the_read_position_starts_over(
    tmp_path: Path,
) -> None:
    log = tmp_path / "log.txt"
    log.write_bytes(b"first run: a short line\n")
    follower = Follower(log)
    follower.poll()
    with log.open("r+b") as stream:  # the same file, cut and written again within one poll
        stream.truncate(0)
        stream.write(b"Running 1 job\n" + b"second run, longer than the first one\n")
    data, restart = follower.poll()
    assert restart == "truncated"
    assert data == b"Running 1 job\nsecond run, longer than the first one\n"


OOM_LINE = (
    b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.27 GiB. GPU 0 has a total "
    b"capacity of 23.55 GiB of which 412.31 MiB is free.\n"
)
SKIP = b"\n# OOM during training step, skipping batch 1/3 #\n"


def test_an_oom_the_trainer_goes_on_from_is_not_a_crash(tmp_path: Path) -> None:
    now = [0.0]
    log = tmp_path / "log.txt"
    log.write_bytes(b"Running 1 job\n" + b"".join(bar(n, 1.5) for n in range(1, 8)))
    job = LiveJob(log, clock=lambda: now[0])
    job.poll()
    append(log, b"\n" + OOM_LINE)
    update = job.poll()
    assert not update.status.crashed and not update.status.ended and update.status.failing
    (told,) = update.warnings
    assert told.startswith("torch.OutOfMemoryError: CUDA out of memory")
    now[0] = 10.0
    append(log, SKIP + bar(8, 1.5) + bar(9, 1.5))
    update = job.poll()
    assert not update.status.crashed and not update.status.failing
    assert update.warnings == ("OOM at step 8: the toolkit skipped the batch (1/3 in a row)",)
    now[0] = 100.0
    assert not job.poll().status.crashed


def test_a_failure_followed_by_silence_is_a_crash_after_the_grace(tmp_path: Path) -> None:
    now = [0.0]
    log = tmp_path / "log.txt"
    log.write_bytes(b"Running 1 job\n" + b"".join(bar(n, 1.5) for n in range(1, 8)) + b"\n")
    job = LiveJob(log, clock=lambda: now[0], grace_s=30)
    job.poll()
    append(log, OOM_LINE)
    assert not job.poll().status.crashed
    now[0] = 29.0
    assert not job.poll().status.crashed
    now[0] = 31.0
    status = job.poll().status
    assert status.crashed and status.ended and status.crash_log == log


QUOTED_OOM = (
    b' - Prompt: a meme, the caption "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has'
    b' a total capacity of 23.55 GiB"\n'
)
"""A sample prompt that quotes an OOM, as the toolkit prints the prompts it samples (R4-8)."""


def test_an_oom_quoted_in_a_prompt_then_a_slow_sample_is_no_crash(tmp_path: Path) -> None:
    """Silence after a failure ends the run only when the failure is shaped as one (an
    exception line, a traceback, an exit): a quoted message and a 30 s sample are not."""
    now = [0.0]
    log = tmp_path / "log.txt"
    log.write_bytes(b"Running 1 job\n" + b"".join(bar(n, 1.5) for n in range(1, 8)) + b"\n")
    job = LiveJob(log, clock=lambda: now[0], grace_s=30)
    job.poll()
    append(log, b"Generating Images\n" + QUOTED_OOM)
    job.poll()
    now[0] = 95.0
    status = job.poll().status
    assert not status.crashed and not status.ended
    append(log, OOM_LINE)  # the real thing: an exception line, then silence
    job.poll()
    now[0] = 130.0
    assert job.poll().status.crashed


def test_the_toolkits_failure_block_is_a_crash_at_once(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_bytes(b"Running 1 job\n" + b"".join(bar(n, 1.5) for n in range(1, 8)) + b"\n")
    job = LiveJob(log, clock=lambda: 0.0)
    job.poll()
    append(log, b"Error running job: CUDA out of memory. Tried to allocate 1.27 GiB.\n" + OOM_LINE)
    assert job.poll().status.crashed


@pytest.mark.parametrize(
    "block", [b"Error running job: CUDA out of memory.\n" + OOM_LINE, OOM_LINE]
)
@pytest.mark.parametrize("read_before", [False, True])
def test_a_crash_rotated_away_within_one_poll_is_the_one_diagnosed(
    tmp_path: Path, block: bytes, read_before: bool
) -> None:
    folder = tmp_path / "job"
    (folder / "logs").mkdir(parents=True)
    log = folder / "log.txt"
    log.write_bytes(b"Running 1 job\n" + b"".join(bar(n, 1.5) for n in range(1, 8)) + b"\n")
    job = LiveJob(log, clock=lambda: 0.0)
    job.poll()
    append(log, block)
    if read_before:
        assert not job.poll().status.ended or block.startswith(b"Error")
    log.rename(folder / "logs" / "0_log.txt")  # the UI starts the job again
    log.write_bytes(b"Running 1 job\n")
    for _ in range(3):
        status = job.poll().status
    assert status.crashed
    assert status.crash_log == folder / "logs" / "0_log.txt"


def test_a_killed_trainer_is_a_crash_at_once_never_one_that_may_go_on(tmp_path: Path) -> None:
    """The kernel's OOM killer sends SIGKILL, which no trainer survives: the shell's
    ``Killed`` ends the run at once, without "the job may go on" (issue 33)."""
    log = tmp_path / "log.txt"
    log.write_bytes(b"Running 1 job\n" + b"".join(bar(n, 1.5) for n in range(1, 8)) + b"\n")
    job = LiveJob(log, clock=lambda: 0.0, grace_s=30)
    job.poll()
    append(log, b"Killed\n")
    update = job.poll()
    assert update.status.crashed and update.status.ended
    assert not any("may go on" in line for line in update.warnings)


def test_a_rotation_seen_between_the_move_and_the_new_log_is_a_new_run(tmp_path: Path) -> None:
    """R5-10: AI Toolkit moves ``log.txt`` to ``logs/0_log.txt`` and then starts a new one; a
    poll between the two found no file, the next one opened the new log as if it were the
    first, and the run that crashed next was diagnosed from the old run's log."""
    folder = tmp_path / "job"
    (folder / "logs").mkdir(parents=True)
    log = folder / "log.txt"
    log.write_bytes(b"Running 1 job\n" + bar(5, 1.5) + b"\nThe run before, it finished\n")
    job = LiveJob(log, clock=lambda: 0.0)
    job.poll()
    log.rename(folder / "logs" / "0_log.txt")  # the UI starts the job again
    job.poll()  # between the move and the new log
    log.write_bytes(b"Running 1 job\n" + b"".join(bar(n, 1.5) for n in range(1, 4)) + b"\n")
    update = job.poll()
    assert update.restart == "rotated"
    append(log, b"Error running job: CUDA out of memory.\n" + OOM_LINE)
    status = job.poll().status

    assert status.crashed and status.crash_log == log


def test_the_waiting_line_ends_when_the_wait_does(tmp_path: Path) -> None:
    """R4-8's residue: after a prompt quoting an OOM and the grace period's silence, the run is
    no crash, and no longer "waiting to see whether the job goes on" either."""
    now = [0.0]
    log = tmp_path / "log.txt"
    log.write_bytes(b"Running 1 job\n" + b"".join(bar(n, 1.5) for n in range(1, 8)) + b"\n")
    job = LiveJob(log, clock=lambda: now[0], grace_s=30)
    job.poll()
    append(log, b"Generating Images\n" + QUOTED_OOM)
    assert job.poll().status.failing
    now[0] = 40.0
    status = job.poll().status
    assert not status.crashed and not status.failing
