"""A new web-UI job's name is one folder name: AI Toolkit writes the job to
``<training folder>/<name>/``, so a name that is a path, climbs with ``..`` or holds a control
character is refused (issue 20, D2), on the command line and on the app's row alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from oom_wizard.cli import main
from oom_wizard.storage.jobdb import new_job_name_problem
from tests.support.aitk_db import add_job, all_rows, make_db

BAD_NAMES = [
    "../../evil",
    "..",
    ".",
    "/tmp/evil",
    "a/b",
    "a\\b",
    "two\nlines",
    "tab\there",
    "bell\x07",
    "   ",
]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = make_db(tmp_path / "aitk_db.db")
    add_job(path, "my_lora", step=120)
    return path


@pytest.mark.parametrize("name", BAD_NAMES)
def test_apply_as_new_refuses_a_name_that_is_not_one_folder(
    db: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = all_rows(db)
    status = main(["apply", "--db", str(db), "--job", "my_lora", "--no-probe", "--as-new", name])
    err = capsys.readouterr().err
    assert status == 2, err
    assert err.count("\n") == 1 and err.startswith(f"oom-wizard: error: {db}: ")
    assert all_rows(db) == rows
    assert not (db.parent / "oom-wizard").exists()
    assert not any(p.name == "evil" for p in db.parent.parent.rglob("evil"))


@pytest.mark.parametrize("name", ["my_lora_small", "lora-v2", "café_photos", "v1.5"])
def test_a_plain_name_is_taken(name: str) -> None:
    assert new_job_name_problem(name) is None


def test_every_bad_name_is_refused_with_its_reason() -> None:
    for name in BAD_NAMES:
        assert new_job_name_problem(name.strip() or name) is not None, name
    assert "path separator" in (new_job_name_problem("a/b") or "")
    assert "control character" in (new_job_name_problem("a\nb") or "")
    assert "\n" not in (new_job_name_problem("a\nb") or "")


async def test_the_apps_new_job_row_says_why_a_name_is_refused_and_saves_nothing(
    tmp_path: Path,
) -> None:
    from textual.widgets import Input, Static

    from oom_wizard.screens.app import create_app
    from tests.support.app_support import (
        UI_JOB,
        press,
        review_first_step,
        ui_jobs_db,
        wait_for_error,
    )

    db = ui_jobs_db(tmp_path)
    rows = all_rows(db)
    app = create_app(db=db, job=UI_JOB)
    async with app.run_test(size=(110, 40)) as pilot:
        await review_first_step(pilot)
        await press(pilot, "down")
        app.screen.query_one("#new-name", Input).value = "../../evil"
        await pilot.pause()
        note = str(app.screen.query_one("#new-job-note", Static).render())
        assert note.startswith("Not this name:") and "path separator" in note
        await press(pilot, "enter")
        error = await wait_for_error(pilot)
        assert "path separator" in error and "\n" not in error.strip()
    assert all_rows(db) == rows
