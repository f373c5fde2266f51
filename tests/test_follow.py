"""Following a growing log: tail -F semantics, the live reading, and its warnings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from oom_wizard.follow import Follower, LiveJob
from oom_wizard.logscan import LiveScan, scan_log, scan_text
from tests.autopilot_support import FAKE, SCENARIOS, write_config

REPORTS = Path(__file__).parent / "fixtures" / "reports"


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
