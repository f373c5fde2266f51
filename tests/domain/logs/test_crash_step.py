"""The step a run ended in (:func:`oom_wizard.logs.result.crash_step`): one rule, read off
AI Toolkit's bar, which counts the steps completed."""

from __future__ import annotations

import pytest

from oom_wizard.logs.result import crash_phase, crash_step, crash_step_of
from oom_wizard.logs.scan import scan_log, scan_text
from tests.support.corpus import CASES, REPORTS

BAR = "lora:   0%|          | {n}/3000 [00:{n:02d}<3:10:00,  3.91s/it, lr: 1.0e-04 loss: 3.1e-01]"
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."


@pytest.mark.parametrize(
    ("done", "phase", "step"),
    [
        (4, "training", 5),  # the bar reads 4/3000 while step 5 runs
        (0, "training", 1),  # the first step: the bar still at 0/3000
        (250, "periodic_sample", 250),  # "Saving at step 250", samples …__000000250_…
        (250, "save", 250),
        (500, "baseline_sample", None),  # before a step of this run
        (3, "model_load", None),
        (7, "unknown", None),
        (None, "training", None),
    ],
)
def test_the_step_a_run_ended_in_by_its_bar_and_phase(
    done: int | None, phase: str, step: int | None
) -> None:
    assert crash_step_of(done, phase) == step


def test_a_crash_after_the_bar_reads_4_of_3000_is_in_step_5() -> None:
    scan = scan_text("\n".join(["Loading Flux model", *(BAR.format(n=n) for n in range(5)), OOM]))
    assert (scan.last_step, scan.phase, crash_step(scan)) == (4, "training", 5)


def test_a_finished_run_ended_in_no_step() -> None:
    scan = scan_text("\n".join(BAR.format(n=n) for n in (2998, 2999, 3000)))
    assert scan.finished and crash_step(scan) is None


def test_the_host_killed_wan_run_ended_in_the_step_after_its_bars_152() -> None:
    """A real report: the bar's last reading is 152/3000, then the kernel's OOM killer."""
    scan = scan_log(REPORTS / "aitk-787-wan22-host-oom-killer" / "log.txt")
    assert (scan.last_step, crash_step(scan)) == (152, 153)


@pytest.mark.skipif(CASES is None or not CASES.is_dir(), reason="../shared/cases is not here")
def test_a_skip_banner_with_the_bar_at_0_is_step_1() -> None:
    """The shared case 04: the bar at 0/N, then AI Toolkit's skip banner and its follow-on
    error; the case's own label says the OOM was at step 1."""
    assert CASES is not None
    scan = scan_log(CASES / "04_aitk-wan22-i2v-5090-oom-skip-batch-then-crash" / "log.txt")
    assert crash_phase(scan) == "training"
    assert crash_step(scan) == 1
