"""``watch`` waits for the whole crash before it sizes a fix (issue 40).

AI Toolkit prints ``Error running job: CUDA out of memory. Tried to allocate 512.00 MiB.`` on
stdout, then its result block, then the traceback on stderr, whose last line is PyTorch's full
message with the card's figures: in a log file the traceback lands a second or two later. The
crash is fed here one line per poll, half a second apart on an injected clock: the run counts
as crashed only at the traceback's error line, and the wizard opened then has the card and the
calibration from PyTorch's message. Without a traceback, a short quiet ends the wait.
"""

from __future__ import annotations

from pathlib import Path

from oom_wizard.application.follow import WatchTarget
from oom_wizard.application.settling import job_calibration
from oom_wizard.application.watching import diagnose_crash
from oom_wizard.logs.tail import SETTLE_S, LiveJob

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "configs"

TRAINING = "".join(
    f"portrait_flux_v2:   0%|          | {n}/3000 [00:{n * 4:02d}<3:20:00,  4.00s/it, "
    "lr: 1.0e-04 loss: 4.5e-01]\n"
    for n in range(1, 4)
)
CRASH = (
    "Error running job: CUDA out of memory. Tried to allocate 512.00 MiB.",
    "",
    "========================================",
    "Result:",
    " - 0 completed jobs",
    " - 1 failure",
    "========================================",
    "Traceback (most recent call last):",
    '  File "/opt/ai-toolkit/run.py", line 96, in main',
    "    job.run()",
    '  File "/opt/ai-toolkit/jobs/process/BaseSDTrainProcess.py", line 2130, in run',
    "    self.hook_train_loop(batch_list)",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB. GPU 0 has a total "
    "capacity of 23.55 GiB of which 212.31 MiB is free. Including non-PyTorch memory, this "
    "process has 23.33 GiB memory in use. Of the allocated memory 22.71 GiB is allocated by "
    "PyTorch, and 301.22 MiB is reserved by PyTorch but unallocated.",
)


def job(tmp_path: Path) -> tuple[Path, Path]:
    config = tmp_path / "job.yaml"
    config.write_text((FIXTURES / "flux_portrait_24gb.yaml").read_text(encoding="utf-8"))
    log = tmp_path / "log.txt"
    log.write_text("Running 1 job\n# Running job: portrait_flux_v2\n" + TRAINING)
    return config, log


def test_watch_opens_on_the_traceback_not_on_the_toolkits_first_error_line(
    tmp_path: Path,
) -> None:
    config, log = job(tmp_path)
    now = [0.0]
    live = LiveJob(log, clock=lambda: now[0])
    live.poll()
    crashed_at: list[int] = []
    for index, line in enumerate(CRASH):
        now[0] += 0.5  # the traceback comes on stderr, a moment after the toolkit's line
        with log.open("a", encoding="utf-8") as stream:
            stream.write(line + "\n")
        update = live.poll()
        assert not any("may go on" in told for told in update.warnings)  # the job ended
        if update.status.crashed:
            crashed_at.append(index)
            break
    assert crashed_at == [len(CRASH) - 1]
    report = diagnose_crash(WatchTarget(log=log, config=config, name="portrait_flux_v2"))
    assert report.state is not None and report.moment == "early_steps"
    diagnosis = report.state.diagnosis
    assert diagnosis.oom is not None and diagnosis.oom.total == 23.55
    calibration = job_calibration(report.state.job, diagnosis)
    assert calibration is not None and calibration.card_gib == 23.55
    assert calibration.at_least_gib is not None and calibration.at_least_gib > 23.0


def test_an_end_line_with_no_traceback_after_it_is_a_crash_after_a_short_quiet(
    tmp_path: Path,
) -> None:
    _, log = job(tmp_path)
    now = [0.0]
    live = LiveJob(log, clock=lambda: now[0], grace_s=30)
    live.poll()
    with log.open("a", encoding="utf-8") as stream:
        stream.write("\n".join(CRASH[:7]) + "\n")
    assert not live.poll().status.crashed
    now[0] += SETTLE_S - 0.5
    assert not live.poll().status.crashed
    now[0] += 1.0
    assert live.poll().status.crashed  # well before the 30 s grace of a failure that may go on
