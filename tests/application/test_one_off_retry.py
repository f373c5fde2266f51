"""``run --auto`` and a crash that is not the config's: one retry of the same config with the
allocator setting PyTorch names, in the trainer's environment only; a roll-back only when it
crashes again (real children of the fake trainer, ``FAKE_FRAGMENTED``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from oom_wizard.application.autopilot import Settings, autopilot
from oom_wizard.storage.changelog import changelog_path_for, read_changelog
from tests.support.autopilot_support import (
    FAKE_COMMAND,
    SCENARIOS,
    fake_runner,
    run_here,
    write_config,
)
from tests.support.plan_support import cli

EARLY = next(s for s in SCENARIOS if s.name == "image-early-steps")
SHORT = dataclasses.replace(
    EARLY, name="fragmented", edits={**EARLY.edits, "process.0.train.steps": 60}
)
SETTING = "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"


def test_a_fragmented_crash_is_retried_once_unchanged_and_then_it_fits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    config = write_config(tmp_path, SHORT)
    before = config.read_bytes()
    args = ["run", str(config), "--auto", "--", *FAKE_COMMAND]
    done = run_here(
        monkeypatch, capsys, tmp_path, args, {"FAKE_VRAM_GB": "48", "FAKE_FRAGMENTED": "1"}
    )

    assert done.returncode == 0, done.stdout
    assert (
        "A one-off, not the config: PyTorch held 6.00 GiB reserved but unallocated" in done.stdout
    )
    assert f"Retrying the same config once with {SETTING}" in done.stdout
    assert (
        f"2. fragmented.yaml (full) with {SETTING}, the config unchanged: finished" in done.stdout
    )
    assert config.read_bytes() == before  # nothing of the user's changed
    assert not list(tmp_path.glob("*.oomfix*"))  # no roll-back saved


def test_a_retry_that_crashes_again_is_rolled_back_with_both_attempts_in_the_change_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    config = write_config(tmp_path, SHORT)
    runner = fake_runner(48, {"FAKE_FRAGMENTED": "always"})
    said: list[str] = []

    outcome = autopilot(config, runner, settings=Settings(max_retries=1), say=said.append)

    first, second, third = outcome.attempts[:3]
    assert (first.outcome, first.environment) == ("crashed", ())
    assert (second.outcome, second.environment, second.config) == ("crashed", (SETTING,), config)
    assert third.changed and not third.environment  # the roll-back, without the setting
    assert sum("A one-off" in line for line in said) == 1  # once per run of the loop
    log = read_changelog(changelog_path_for(outcome.saved[0]))
    assert [(a.outcome, a.environment) for a in log.attempts[:2]] == [
        ("crashed", ()),
        ("crashed", (SETTING,)),
    ]


def test_a_crash_of_a_config_too_big_is_rolled_back_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    config = write_config(tmp_path, SHORT)
    outcome = autopilot(config, fake_runner(24), settings=Settings(max_retries=1))
    assert outcome.attempts[0].outcome == "crashed"
    assert all(not a.environment for a in outcome.attempts)
    assert outcome.attempts[1].changed


def test_diagnose_says_the_same_in_words(tmp_path: Path) -> None:
    config = write_config(tmp_path, SHORT)
    log = tmp_path / "crash.log"
    runner = fake_runner(48, {"FAKE_FRAGMENTED": "always"})
    runner(config, log)
    status, out, _ = cli("diagnose", config, "--log", log, "--no-probe")
    assert status == 0
    words = " ".join(out.split())
    assert "A one-off, not the config: PyTorch held 6.00 GiB reserved but unallocated" in words
    assert f"'oom-wizard run --auto' retries such a crash once with {SETTING}" in words
