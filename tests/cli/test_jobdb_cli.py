"""Tests of ``oom-wizard restore`` and of the ``--db PATH --job NAME`` argument helpers."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from rich.console import Console

from oom_wizard.application.opening import open_job
from oom_wizard.cli import main
from oom_wizard.commands._jobdb import add_db_arguments, wants_db
from oom_wizard.commands._report import print_db_saved, save_mode
from oom_wizard.errors import WizardError
from oom_wizard.paths import parse_path
from oom_wizard.request import JobRequest
from oom_wizard.storage.changes import Change, prepare
from oom_wizard.storage.jobdb import AsNew, InPlace, job_document, load_job
from tests.support.aitk_db import add_job, all_rows, job_row, make_db
from tests.support.saving import save_to_db_after

BATCH = parse_path("config.process[0].train.batch_size")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A jobs database with a crashed job ``my_lora`` and a running one."""
    path = make_db(tmp_path / "aitk_db.db")
    add_job(path, "my_lora", step=120)
    add_job(path, "busy", status="running", info="Training", step=40)
    return path


def saved_in_place(db: Path) -> None:
    job = load_job(db, "my_lora")
    prepared = prepare(job_document(job), [Change(BATCH, 1, "batch_size", "smaller")])
    save_to_db_after(prepared, job, InPlace(), direction="rollback")


def parser() -> argparse.ArgumentParser:
    result = argparse.ArgumentParser(prog="apply", exit_on_error=False)
    add_db_arguments(result, saving=True)
    return result


def test_restore_without_a_job_lists_the_jobs(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["restore", "--db", str(db.parent)]) == 0

    out = capsys.readouterr().out
    assert "my_lora" in out and "error" in out and "120" in out
    assert "CUDA out of memory" in out
    assert "busy" in out and "running" in out
    assert "--job NAME" in out


def test_restore_puts_the_config_back_and_says_what_to_do(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved_in_place(db)

    assert main(["restore", "--db", str(db), "--job", "my_lora"]) == 0

    out = capsys.readouterr().out
    row = job_row(db, "my_lora")
    assert row is not None
    assert json.loads(row["job_config"])["config"]["process"][0]["train"]["batch_size"] == 4
    assert "Restored job 'my_lora'" in out
    assert "config.process[0].train.batch_size: 1 → 4" in out
    assert str(load_job(db, "my_lora").changelog_path) in out
    assert "start job 'my_lora' in AI Toolkit's UI" in out


def test_restore_of_a_running_job_is_one_line_and_status_2(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["restore", "--db", str(db), "--job", "busy"]) == 2

    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("oom-wizard: error: ")


@pytest.mark.parametrize(
    "argv",
    [["restore", "--job", "my_lora"], ["restore"]],
)
def test_restore_needs_db(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert "--db PATH" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--in-place"], InPlace()),
        (["--as-new"], AsNew(None)),
        (["--as-new", "fixed ✨"], AsNew("fixed ✨")),
    ],
)
def test_save_mode_from_the_arguments(argv: list[str], expected: InPlace | AsNew) -> None:
    args = parser().parse_args(["--db", "x.db", "--job", "j", *argv])

    assert save_mode(args) == expected


def test_a_save_to_the_database_needs_a_mode() -> None:
    args = parser().parse_args(["--db", "x.db", "--job", "j"])

    with pytest.raises(WizardError, match=r"--in-place .* or --as-new"):
        save_mode(args)


def test_in_place_and_as_new_exclude_each_other() -> None:
    with pytest.raises((argparse.ArgumentError, SystemExit)):
        parser().parse_args(["--db", "x.db", "--job", "j", "--in-place", "--as-new"])


def test_wants_db_refuses_a_config_and_a_database_together() -> None:
    args = parser().parse_args(["--db", "x.db", "--job", "j"])

    assert wants_db(args)
    with pytest.raises(WizardError, match="not both"):
        wants_db(args, config="job.yaml")
    assert not wants_db(parser().parse_args([]), config="job.yaml")
    with pytest.raises(WizardError, match="--job NAME needs --db PATH"):
        wants_db(parser().parse_args(["--job", "j"]))


def test_the_service_opens_a_db_job_with_its_document_and_log(db: Path) -> None:
    folder = db.parent / "output" / "my_lora"
    folder.mkdir(parents=True)
    (folder / "log.txt").write_text("CUDA out of memory\n", encoding="utf-8")

    opened = open_job(JobRequest(db=db.parent, job="my_lora", probe=False))

    assert opened.db_job is not None
    assert opened.db_job.name == "my_lora" and opened.db_job.status == "error"
    assert opened.document.view().processes[0].train.batch_size == 4
    assert opened.log_path == folder / "log.txt" and opened.ui_job


def test_opening_a_db_job_needs_a_job(db: Path) -> None:
    with pytest.raises(WizardError, match="--job NAME"):
        open_job(JobRequest(db=db, probe=False))


def test_print_db_saved_for_a_new_job(db: Path) -> None:
    job = load_job(db, "my_lora")
    prepared = prepare(job_document(job), [Change(BATCH, 1, "batch_size", "smaller")])
    result = save_to_db_after(prepared, job, AsNew(), direction="rollback")
    console = Console(record=True, width=200)

    print_db_saved(console, result)

    text = console.export_text()
    assert "Created job 'my_lora_oomfix' (a copy of 'my_lora')" in text
    assert 'config.name: "my_lora" → "my_lora_oomfix"' in text
    assert "start job 'my_lora_oomfix' in AI Toolkit's UI" in text
    assert "Job 'my_lora' is unchanged." in text


# ------------------------------------------------- the whole flow on the command line


@pytest.fixture
def crashed(db: Path) -> Path:
    """``my_lora``'s folder under the toolkit's ``output`` with a log that crashed at step 3."""
    folder = db.parent / "output" / "my_lora"
    folder.mkdir(parents=True)
    (folder / "log.txt").write_text(
        "Running 1 job\nmy_lora:   0%|          | 3/3000 [00:09<2:30:00]\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n",
        encoding="utf-8",
    )
    return db


def stored_train(db: Path, name: str) -> dict[str, object]:
    row = job_row(db, name)
    assert row is not None
    train: dict[str, object] = json.loads(row["job_config"])["config"]["process"][0]["train"]
    return train


def test_plan_of_a_database_job_is_the_plan_of_its_json(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exported = tmp_path / "my_lora.json"
    exported.write_text(load_job(db, "my_lora").job_config, encoding="utf-8")

    assert main(["plan", "--db", str(db), "--job", "my_lora", "--json"]) == 0
    from_db = json.loads(capsys.readouterr().out)
    assert main(["plan", str(exported), "--json"]) == 0

    assert from_db == json.loads(capsys.readouterr().out)
    assert from_db["steps"]


def test_apply_in_place_then_restore(crashed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["apply", "--db", str(crashed), "--job", "my_lora", "--in-place"]) == 0
    out = capsys.readouterr().out
    assert "log.txt (the latest run)" in out
    assert "Updated job 'my_lora'" in out
    assert "Next: start job 'my_lora' in AI Toolkit's UI" in out
    assert stored_train(crashed, "my_lora")["batch_size"] == 1

    assert main(["restore", "--db", str(crashed), "--job", "my_lora"]) == 0
    assert stored_train(crashed, "my_lora")["batch_size"] == 4


def test_apply_as_new_leaves_the_job_alone(
    crashed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = job_row(crashed, "my_lora")

    assert main(["apply", "--db", str(crashed), "--job", "my_lora", "--as-new"]) == 0

    assert job_row(crashed, "my_lora") == before
    assert stored_train(crashed, "my_lora_oomfix")["batch_size"] == 1
    assert "Next: start job 'my_lora_oomfix' in AI Toolkit's UI" in capsys.readouterr().out


def test_apply_without_a_mode_writes_nothing(
    crashed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = job_row(crashed, "my_lora")

    assert main(["apply", "--db", str(crashed), "--job", "my_lora"]) == 2

    assert "--in-place" in capsys.readouterr().err
    assert job_row(crashed, "my_lora") == before
    assert not (crashed.parent / "oom-wizard").exists()


def test_apply_to_a_running_job_is_refused(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = job_row(db, "busy")

    assert main(["apply", "--db", str(db), "--job", "busy", "--in-place"]) == 2

    assert "job 'busy' is running" in capsys.readouterr().err
    assert job_row(db, "busy") == before


def test_as_new_with_a_name_too_long_is_one_line_and_writes_nothing(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 12, item 10: ENAMETOOLONG for --as-new is bad input, not an internal error."""
    rows = all_rows(db)
    status = main(
        [
            "set",
            "--db",
            str(db),
            "--job",
            "my_lora",
            "config.process[0].train.batch_size=1",
            "--as-new",
            "n" * 300,
        ]
    )
    err = capsys.readouterr().err
    assert status == 2, err
    assert err.count("\n") == 1 and err.startswith("oom-wizard: error: ")
    assert all_rows(db) == rows


# ------------------------------------------------- R4-7: the default --as-new name obeys the rule


@pytest.mark.parametrize("name", ["../../evil", "a/b", "x" * 250])
def test_the_default_as_new_name_is_held_to_the_job_name_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """A job whose own name is no folder name gets no copy named after it: ``../../evil``
    would make ``../../evil_oomfix``, a job written outside the training folder."""
    db = make_db(tmp_path / "aitk_db.db")
    add_job(db, name, step=3)
    before = all_rows(db)
    files = sorted(tmp_path.rglob("*"))

    status = main(["apply", "--db", str(db), "--job", name, "--moment", "early_steps", "--as-new"])

    err = capsys.readouterr().err
    assert status == 2, err
    assert err.count("\n") == 1 and err.startswith("oom-wizard: error: ")
    assert f"it comes from the job's own name '{name}'" in err and "--as-new NAME" in err
    assert all_rows(db) == before
    assert sorted(tmp_path.rglob("*")) == files
