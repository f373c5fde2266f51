"""What ``run`` takes from the user before anything starts (issue 32: R4-9, R4-4)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from oom_wizard.cli import main
from tests.support.autopilot_support import run_here

CONFIG = """\
job: extension
config:
  name: edited_job
  process:
    - type: sd_trainer
      train: {batch_size: 4, steps: 10}
      model: {arch: flux, name_or_path: x}
      datasets: [{folder_path: /data/x, resolution: [512]}]
"""
TRAINER = [sys.executable, "-c", "print('trained nothing')"]


def test_run_takes_the_edited_ok_its_refusal_asks_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "job.yaml"
    source.write_text(CONFIG, encoding="utf-8")
    assert main(["set", str(source), "config.process[0].train.batch_size=1", "-o",
                 str(tmp_path / "fixed.yaml")]) == 0  # fmt: skip
    fixed = tmp_path / "fixed.yaml"
    fixed.write_text(fixed.read_text(encoding="utf-8") + "# my own note\n", encoding="utf-8")
    before = sorted(p.name for p in tmp_path.iterdir())

    refused = run_here(monkeypatch, capsys, tmp_path, ["run", str(fixed), "--auto", "--", *TRAINER])

    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and "pass --edited-ok" in refused.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # refused before it started

    taken = run_here(
        monkeypatch, capsys, tmp_path, ["run", str(fixed), "--auto", "--edited-ok", "--", *TRAINER]
    )

    assert "unrecognized arguments" not in taken.stderr, taken.stderr
    assert "Attempt 1: full run of" in taken.stdout and "trained nothing" in taken.stdout
    assert (tmp_path / "fixed.run.log").is_file()


def test_run_refuses_a_config_value_outside_the_limits_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "job.yaml"
    config.write_text(CONFIG.replace("batch_size: 4", "batch_size: " + "1" + "0" * 50))

    status = main(["run", str(config), "--auto", "--", *TRAINER])

    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1
    assert "train.batch_size" in err and "above the largest sensible value, 256" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.yaml"]
