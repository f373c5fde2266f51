"""``run`` with a trainer that cannot start writes nothing on its exit 2 (R5-7): it left an
empty ``<config>.run.log`` each time."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from oom_wizard.cli import main

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "flux_portrait_24gb.yaml"


@pytest.mark.parametrize("trainer", ["/nonexistent/trainer", "./not-executable", ""])
def test_a_trainer_that_cannot_start_leaves_no_file(
    trainer: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    shutil.copyfile(FIXTURE, tmp_path / "job.yaml")
    (tmp_path / "not-executable").write_text("#!/bin/sh\n", encoding="utf-8")
    before = sorted(path.name for path in tmp_path.iterdir())
    monkeypatch.chdir(tmp_path)

    status = main(["run", "job.yaml", "--", trainer, "{config}"])

    err = capsys.readouterr().err
    assert status == 2 and "cannot start the trainer" in err, err
    assert sorted(path.name for path in tmp_path.iterdir()) == before
