"""``run`` sizes each roll-back against the card as it read it before the first attempt, the
card's other tenants included, as ``fit`` and ``plan`` weigh a job; and says so. The fake
trainer is a real child; the card is a fake probe (or a fake ``nvidia-smi`` for the command)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from oom_wizard.application.autopilot import autopilot
from oom_wizard.application.card_wait import CardWait
from oom_wizard.application.settling import WizardState, job_calibration
from oom_wizard.host.probe import GpuInfo, GpuProcess, ProbeResult
from tests.cli.test_card_tenants import fake_smi
from tests.support.autopilot_support import (
    FAKE_COMMAND,
    FLUX,
    Scenario,
    fake_runner,
    run_here,
    write_config,
)

SIZED = "The roll-back is sized against the card as read before the first attempt"


def card(other_gib: float) -> ProbeResult:
    """A 24 GiB card with another process (pid 4242, python) holding ``other_gib``."""
    gpu = GpuInfo(0, "NVIDIA RTX 4090", 24.0, other_gib, 24.0 - other_gib)
    return ProbeResult((gpu,), (GpuProcess(4242, "python", other_gib),))


def crash_once(
    tmp_path: Path,
    env: dict[str, str],
    probe: ProbeResult | None,
    edits: Mapping[str, object] | None = None,
) -> tuple[WizardState, list[str]]:
    """One attempt of the fake trainer on FLUX with ``edits`` (none: it crashes in its first
    steps), ``run``'s card wait before it reading ``probe``; the state the roll-back was sized
    on, and what was said (the asker says no: no second attempt)."""
    tmp_path.mkdir(exist_ok=True)
    case = Scenario("flux", FLUX, 24, edits or {}, env)
    wait = CardWait(lambda: probe, lambda s: None, lambda: 0.0)
    trainer = fake_runner(24, env)
    said: list[str] = []
    states: list[WizardState] = []

    def runner(config: Path, log: Path) -> object:
        wait.before_attempt(said.append)
        return trainer(config, log)

    def ask(state: WizardState, fix: Sequence[str]) -> bool:
        states.append(state)
        return False

    outcome = autopilot(
        write_config(tmp_path, case),
        runner,  # type: ignore[arg-type]
        ask=ask,
        say=said.append,
        card_read=lambda: wait.first,
    )
    assert len(outcome.attempts) == 1 and states, outcome.reason
    return states[0], said


def test_a_roll_back_is_sized_against_what_the_other_process_leaves(tmp_path: Path) -> None:
    # PyTorch's old message names no other process: only run's own reading of the card shows
    # the 6 GiB another process held beside the job.
    env = {"FAKE_OLD_TORCH": "1", "FAKE_OTHER_GB": "6"}
    state, said = crash_once(tmp_path / "read", env, card(6.0))
    assert state.moment == "early_steps"
    assert state.plan.sizing is not None and state.plan.sizing.card_gib == 18.0
    line = next(s for s in said if s.startswith(SIZED))
    assert "pid 4242 python 6.00 GiB" in line and "the 18.00 GiB free" in line
    assert said.index(line) > 0  # after the crash, before the question
    # Without a reading (no nvidia-smi) nothing says what the other process held.
    state, said = crash_once(tmp_path / "unread", env, None)
    assert state.plan.sizing is None and not any(s.startswith(SIZED) for s in said)


def test_the_crash_figures_and_the_card_count_the_other_process_once(tmp_path: Path) -> None:
    # A sample of 1536² runs out of memory with PyTorch's message, which lists a 2 GiB
    # process beside the job, and the reading shows it: the crash's floor is the job's own
    # (allocated plus what it asked for), the card is the whole card (a small share), and
    # nothing is said of it at the roll-back.
    big_sample = {
        "process.0.train.batch_size": 1,
        "process.0.train.gradient_checkpointing": True,
        "process.0.train.skip_first_sample": True,
        "process.0.sample.width": 1536,
        "process.0.sample.height": 1536,
    }
    state, said = crash_once(tmp_path, {"FAKE_OTHER_GB": "2"}, card(2.0), big_sample)
    oom = state.diagnosis.oom
    assert oom is not None and oom.others_total == 2.0
    calibration = job_calibration(state.job, state.diagnosis)
    assert calibration is not None and oom.allocated is not None and oom.tried is not None
    assert calibration.at_least_gib == pytest.approx(oom.allocated + oom.tried)
    assert state.plan.sizing is not None and state.plan.sizing.card_gib == 24.0
    assert not any(s.startswith(SIZED) for s in said)


def test_the_command_says_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_smi(tmp_path / "bin", monkeypatch)
    config = write_config(tmp_path, Scenario("flux", FLUX, 24))
    env = {"FAKE_VRAM_GB": "24", "FAKE_OLD_TORCH": "1", "FAKE_OTHER_GB": "6"}
    args = ["run", "--auto", "--max-retries", "1", str(config), "--", *FAKE_COMMAND]
    ran = run_here(monkeypatch, capsys, tmp_path, args, env)
    text = " ".join(ran.stdout.split())
    assert "[oom-wizard] On the card: another process holds a real share" in text
    assert f"[oom-wizard] {SIZED}: another process holds a real share" in text
    assert "pid 4242 python 6.00 GiB" in text and "the 18.00 GiB free" in text
