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


TRAINER = """\
if [ -e marker ]; then echo "# edited while it ran" >> "$1"; else touch marker; fi
echo "step: 3/501"
echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
exit 1
"""


def test_the_edited_after_stop_names_each_file_written_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """R5-9: the roll-back's change log, written at its save and again with the attempt it
    records, was listed twice in the stop's "the save itself was complete" part."""
    shutil.copyfile(FIXTURE, tmp_path / "job.yaml")
    (tmp_path / "trainer.sh").write_text(TRAINER, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    args = ["run", "job.yaml", "--auto", "--validation-steps", "0"]

    status = main([*args, "--", "sh", "trainer.sh", "{config}"])

    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert status == 2 and "edited after oom-wizard saved it" in err, err
    written = err.split("the save itself was complete: ", 1)[1].removesuffix(" were written)")
    names = written.split(" and ")
    assert len(names) == len(set(names)) and "job.oomfix.changelog.json" in names, err
