"""Tests of ``oom_wizard.storage.changes``: preparing is in memory only; committing extends the
right log."""

from __future__ import annotations

from pathlib import Path

import pytest

from oom_wizard.errors import WizardError
from oom_wizard.formats.document import load_document
from oom_wizard.storage.changelog import read_changelog
from oom_wizard.storage.changes import Change, prepare
from tests.support.saving import commit_beside

JOB = """\
job: extension
config:
  name: job
  process:
    - type: sd_trainer
      train:
        batch_size: 4
"""
BATCH = ("config", "process", 0, "train", "batch_size")


def write(path: Path, text: str = JOB) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_prepare_reads_no_change_log(tmp_path: Path) -> None:
    source = write(tmp_path / "job.yaml")
    write(tmp_path / "job.changelog.json", "not json")

    prepared = prepare(load_document(source), [Change(BATCH, 1, "batch_size", "why")])

    assert prepared.changed and "batch_size: 1" in prepared.after.text
    with pytest.raises(WizardError, match="not JSON"):
        commit_beside(prepared, direction="rollback")


def test_commit_extends_the_log_of_our_own_output_and_starts_one_otherwise(
    tmp_path: Path,
) -> None:
    source = write(tmp_path / "job.yaml")
    first = commit_beside(prepare(load_document(source), [Change(BATCH, 2)]), direction="rollback")
    second = commit_beside(
        prepare(load_document(first.config), [Change(BATCH, 4)]), direction="scale_up"
    )

    log = read_changelog(second.changelog)
    assert [run.direction for run in log.runs] == ["rollback", "scale_up"]
    assert log.source.path == str(source)
    assert log.net()["config.process[0].train.batch_size"] == (4, 4)

    # A log beside a file that it does not describe (neither its name nor its bytes: one
    # rule, changelog.changelog_for) is not extended.
    copy = write(tmp_path / "copy.yaml", first.config.read_text(encoding="utf-8") + "# mine\n")
    write(tmp_path / "copy.changelog.json", first.changelog.read_text(encoding="utf-8"))
    fresh = commit_beside(prepare(load_document(copy), [Change(BATCH, 1)]), direction="rollback")
    assert [run.direction for run in read_changelog(fresh.changelog).runs] == ["rollback"]
