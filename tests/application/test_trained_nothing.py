"""A fix that fits and trains nothing is no fix: after a clean run, ``run`` reads the LoRA AI
Toolkit saved and the loss its bar reported (real children of the fake trainer, which writes a
real safetensors LoRA with ``FAKE_ADAPTER``)."""

from __future__ import annotations

import dataclasses
import json
import struct
from pathlib import Path

import pytest

from oom_wizard.application.autopilot import autopilot
from oom_wizard.formats.document import load_document
from oom_wizard.logs.loss import loss_trace
from oom_wizard.storage.adapter import check_adapter, is_zero, same_tensors
from tests.support.autopilot_support import (
    FAKE_COMMAND,
    SCENARIOS,
    fake_runner,
    run_here,
    write_config,
)
from tests.support.fake_trainer import write_lora

EARLY = next(s for s in SCENARIOS if s.name == "image-early-steps")
SHORT = dataclasses.replace(EARLY, name="short", edits={**EARLY.edits, "process.0.train.steps": 40})


def test_a_lora_whose_up_weights_stayed_zero_is_not_a_fit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, SHORT)
    args = ["run", str(config), "--auto", "--", *FAKE_COMMAND]
    env = {"FAKE_VRAM_GB": "48", "FAKE_ADAPTER": "zero"}
    done = run_here(monkeypatch, capsys, tmp_path, args, env)

    assert done.returncode == 2
    said = " ".join(done.stdout.split())
    assert "the LoRA did not change: this config trains nothing" in said
    assert "all 3 of its up weights are still zero" in said
    assert "fits" not in said.replace("not a fit", "")
    assert "1. short.yaml (full): ran to its end (40 steps), but its adapter did not change" in said


def test_a_lora_that_moved_is_a_fit_and_says_what_was_read(tmp_path: Path) -> None:
    config = write_config(tmp_path, SHORT)
    outcome = autopilot(config, fake_runner(48, {"FAKE_ADAPTER": "trained"}))
    (attempt,) = outcome.attempts
    assert outcome.exit_status == 0 and attempt.outcome == "finished"
    assert attempt.learned.startswith("its up weights are not all zero")
    assert "the loss went from" in attempt.learned


def test_without_a_file_a_flat_loss_says_it_trained_nothing(tmp_path: Path) -> None:
    config = write_config(tmp_path, SHORT)
    outcome = autopilot(config, fake_runner(48, {"FAKE_FLAT_LOSS": "1"}))
    (attempt,) = outcome.attempts
    assert attempt.outcome == "trained_nothing" and outcome.exit_status == 2
    assert "no output folder" in attempt.learned and "0.4512" in attempt.learned


def test_an_older_file_is_another_runs_and_is_not_read(tmp_path: Path) -> None:
    config = write_config(tmp_path, SHORT)
    document = load_document(config)
    name = document.get(("config", "name"))
    lora = tmp_path / "output" / str(name) / f"{name}.safetensors"
    write_lora(lora, 40, trained=False)
    assert check_adapter(document, since=0.0).moved is False
    assert check_adapter(document, since=lora.stat().st_mtime + 10).moved is None


def test_zero_is_read_in_each_dtype_with_its_sign() -> None:
    assert is_zero(struct.pack("<4H", 0, 0x8000, 0, 0), "BF16")  # -0.0 is zero
    assert not is_zero(struct.pack("<4H", 0, 0, 0x0001, 0), "F16")
    assert is_zero(struct.pack("<2f", 0.0, -0.0), "F32")
    assert not is_zero(struct.pack("<2f", 0.0, 1e-30), "F32")


def test_a_lokr_is_compared_with_its_first_checkpoint(tmp_path: Path) -> None:
    first, last = tmp_path / "a_000000010.safetensors", tmp_path / "a.safetensors"
    write_lora(first, 10, trained=True)
    write_lora(last, 20, trained=True)
    check = same_tensors(first, last)
    assert check.moved is False and "as in" in check.words
    head = json.loads(last.read_bytes()[8 : 8 + struct.unpack("<Q", last.read_bytes()[:8])[0]])
    assert head  # the fake's file is a real safetensors header
    write_lora(last, 20, trained=False)
    assert same_tensors(first, last).moved is True


def test_the_loss_is_read_from_the_bar_redraws(tmp_path: Path) -> None:
    log = tmp_path / "log"
    bars = "".join(
        f"job: {i}%| | {i}/10 [00:0{i}<00:10, 1.0s/it, lr: 1e-04 loss: 4.5e-01]\r"
        for i in range(1, 11)
    )
    log.write_text(bars)
    assert loss_trace(log).moved is False
    log.write_text(bars.replace("4.5e-01]\r", "4.4e-01]\n", 1))
    assert loss_trace(log).moved is True
