"""One owner for "which change log belongs to this config" (issue 21): read once, by SHA-256
or name with a note, and handed to the save, so the plan and the save never tell two stories.

The case that forked before: a web-UI job edited in the UI after our in-place save. The open
read its change log (and planned from it) while the save judged it anew, found the SHA-256
changed, set it aside and started a new one."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from oom_wizard.cli import main
from oom_wizard.storage.jobdb import load_job
from tests.support.aitk_db import add_job, make_db, ui_job_config


@pytest.fixture
def edited_in_the_ui(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    db = make_db(tmp_path / "aitk_db.db")
    add_job(db, "my_lora", step=120)
    assert main(["apply", "--db", str(db), "--job", "my_lora", "--no-probe", "--in-place"]) == 0
    config = ui_job_config("my_lora", batch_size=1, gradient_accumulation=2)
    config["config"]["process"][0]["train"]["lr"] = 0.0002  # the user's own edit in the UI
    conn = sqlite3.connect(db)
    conn.execute(
        'UPDATE "Job" SET "job_config" = ? WHERE "name" = ?',
        (json.dumps(config, separators=(",", ":")), "my_lora"),
    )
    conn.commit()
    conn.close()
    capsys.readouterr()
    return db


def test_an_edited_web_ui_job_is_not_planned_from_its_log_without_the_users_word(
    edited_in_the_ui: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["plan", "--db", str(edited_in_the_ui), "--job", "my_lora", "--no-probe"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "edited after oom-wizard saved it" in err
    assert "--edited-ok" in err


def test_with_the_users_word_the_save_extends_the_log_it_planned_from(
    edited_in_the_ui: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = load_job(edited_in_the_ui, "my_lora")
    argv = ["apply", "--db", str(edited_in_the_ui), "--job", "my_lora", "--no-probe"]
    assert main([*argv, "--in-place", "--edited-ok", "--all"]) == 0, capsys.readouterr().err
    log = json.loads(job.changelog_path.read_text(encoding="utf-8"))
    assert [run["direction"] for run in log["runs"]] == ["rollback", "rollback"]
    assert not list(job.changelog_path.parent.glob("*.old-*.json"))  # no forked history
