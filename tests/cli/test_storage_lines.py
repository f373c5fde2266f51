"""One true line, exit 2, for the storage commands' bad inputs (issue 20: E1 and the lower
items): ``history`` on a folder or an empty name, ``--db`` on a FIFO or a device, the alias
refusal with its ``FILE:LINE:COL:``, and ``restore --help`` naming the change log's path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from oom_wizard.cli import main
from oom_wizard.storage.jobdb import job_changelog_path


@pytest.mark.parametrize("target", ["/", ".", ""])
def test_history_of_a_folder_or_an_empty_name_is_one_line(
    target: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["history", target]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("oom-wizard: error: ")
    assert "internal error" not in err
    assert ("empty" if target == "" else "folder") in err


def test_db_on_a_fifo_or_a_device_says_what_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    for path, kind in ((fifo, "a pipe (FIFO)"), (Path("/dev/zero"), "a device")):
        assert main(["plan", "--db", str(path), "--job", "x", "--no-probe"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"{path}: this is {kind}, not a database" in err
        assert "no such file" not in err


def test_the_alias_refusal_has_file_line_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "aliased.yaml"
    config.write_text(
        "job: extension\nconfig:\n  name: x\n  process:\n    - type: sd_trainer\n"
        "      train: &t\n        batch_size: 4\n        steps: 100\n"
        "      model: {name_or_path: black-forest-labs/FLUX.1-dev, arch: flux}\n"
        "      datasets: [{folder_path: /d, resolution: [512]}]\n"
        "      other: *t\n",
        encoding="utf-8",
    )
    assert main(["set", str(config), "config.process[0].train.batch_size=1", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"oom-wizard: error: {config}:6:14: ")
    assert "anchor &t" in err and err.count("\n") == 1


def test_restore_help_names_the_change_logs_path(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["restore", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    folder = job_changelog_path(Path("aitk_db.db"), "id").parent
    assert f"{folder}/" in text.replace("- ", "-")
    assert "oom-wizard/NAME.changelog.json" not in text


def test_history_of_a_fifo_or_a_device_says_what_it_is_and_never_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fuzz rerun found ``history /dev/zero`` reading forever."""
    fifo = tmp_path / "job.yaml"
    os.mkfifo(fifo)
    for path, kind in ((fifo, "a pipe (FIFO)"), (Path("/dev/zero"), "a device")):
        assert main(["history", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"{path}: this is {kind}" in err


def test_a_journal_left_alone_is_said_at_exit(
    tmp_path: Path,
    ended_pid: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A killed save's journal (of an earlier version, naming its files from another working
    folder) whose files cannot be found: the command leaves it and its temp, and says so."""
    import json

    token = "00112233445566aa"
    temp = tmp_path / f".job.oomfix.yaml.oomw-{ended_pid}-{token}.tmp"
    temp.write_text("job: extension\n", encoding="utf-8")
    journal = tmp_path / f".oomw-{ended_pid}-{token}.journal"
    backup = f"a/{temp.name.removesuffix('.tmp')}.bak"
    entry = {
        "final": "a/job.oomfix.yaml",
        "temp": f"a/{temp.name}",
        "backup": backup,
        "sha256": "0",
    }
    record = {"files": [entry], "replace": False, "journals": [f"a/{journal.name}"]}
    journal.write_text(json.dumps(record), encoding="utf-8")
    monkeypatch.chdir(tmp_path)

    main(["history", "job.oomfix.yaml"])

    err = capsys.readouterr().err
    assert f"oom-wizard: note: {journal}" in err and temp.name in err
    assert temp.exists() and journal.exists()
