"""Pilot tests of the wizard on jobs of AI Toolkit's web UI, read from a real ``aitk_db.db``.

The database is a SQLite file with the toolkit's own table definitions
(``tests/support/aitk_db.py``): the wizard lists its jobs, opens one, rolls it back and saves it
into the database (the job itself, or a new job), or into a file when the database must not be
touched.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input, OptionList

from oom_wizard.paths import FieldPath, parse_path
from oom_wizard.request import JobRequest
from oom_wizard.screens.app import create_app
from oom_wizard.screens.destination import AS_NEW, IN_PLACE, TO_FILE, DestinationPicker
from oom_wizard.storage.jobdb import load_job
from tests.support import exactness
from tests.support.aitk_db import all_rows, job_row
from tests.support.app_support import (
    RUNNING_JOB,
    UI_JOB,
    accept_steps,
    press,
    review_app,
    rolled_back_ui_job,
    save_from_review,
    screen_name,
    screen_text,
    settle,
    ui_job_folder,
    ui_jobs_db,
    wait_for_error,
    wait_for_jobs,
    wait_for_screen,
    wait_for_state,
)
from tests.support.plan_support import cli

SIZE = (80, 24)


def apply_changes(tree: Any, changes: list[dict[str, Any]]) -> Any:
    """``tree`` with the change log's changes made (a null ``after`` removes the key)."""
    for change in changes:
        path: FieldPath = parse_path(change["path"])
        parent = tree
        for key in path[:-1]:
            parent = parent[key]
        if change["after"] is None:
            del parent[path[-1]]
        else:
            parent[path[-1]] = change["after"]
    return tree


def key_order(tree: Any, prefix: str = "") -> list[str]:
    """Every key path of ``tree``, in document order."""
    if isinstance(tree, dict):
        found: list[str] = []
        for key, value in tree.items():
            found += [f"{prefix}.{key}", *key_order(value, f"{prefix}.{key}")]
        return found
    if isinstance(tree, list):
        return [path for i, item in enumerate(tree) for path in key_order(item, f"{prefix}[{i}]")]
    return []


async def test_a_database_job_rolled_back_and_updated_in_place(tmp_path: Path) -> None:
    db = ui_jobs_db(tmp_path)
    before = job_row(db, UI_JOB)
    assert before is not None
    app = create_app(db=db)
    async with app.run_test(size=SIZE) as pilot:
        jobs = await wait_for_jobs(pilot)
        assert jobs.option_count == 4
        assert jobs.get_option_at_index(0).id == UI_JOB
        await press(pilot, "enter")
        await wait_for_state(pilot)
        state = app.require_state()
        assert state.db_job is not None and state.db_job.name == UI_JOB
        assert state.log_path == tmp_path / "output" / UI_JOB / "log.txt"
        assert "CUDA out of memory" in screen_text(pilot, "#summary")
        await press(pilot, "enter", "enter")
        assert app.require_state().moment == "early_steps"
        await accept_steps(pilot)
        await wait_for_screen(pilot, "ReviewScreen")
        assert app.screen.query_one(DestinationPicker).choice == IN_PLACE
        await save_from_review(pilot)
        how = screen_text(pilot, "#run")
        assert f"start job '{UI_JOB}' in AI Toolkit's UI" in how
        assert f"oom-wizard restore --db {db} --job {UI_JOB}" in how
    after = job_row(db, UI_JOB)
    assert after is not None
    log = json.loads(load_job(db, UI_JOB).changelog_path.read_text())
    assert [run["direction"] for run in log["runs"]] == ["rollback"]
    assert log["changes"], "the roll-back changed nothing"
    old, new = json.loads(before["job_config"]), json.loads(after["job_config"])
    assert new == apply_changes(json.loads(before["job_config"]), log["changes"])
    kept = set(key_order(old)) & set(key_order(new))
    assert [k for k in key_order(new) if k in kept] == [k for k in key_order(old) if k in kept]
    assert {key: after[key] for key in ("id", "status", "gpu_ids")} == {
        key: before[key] for key in ("id", "status", "gpu_ids")
    }
    (tmp_path / "before.json").write_text(before["job_config"], encoding="utf-8")
    (tmp_path / "after.json").write_text(after["job_config"], encoding="utf-8")
    verdict = exactness.check(
        tmp_path / "before.json",
        tmp_path / "after.json",
        load_job(db, UI_JOB).changelog_path,
    )
    assert verdict.ok, verdict.problems


async def test_coming_back_to_a_database_job_scales_it_up_in_place(tmp_path: Path) -> None:
    db = ui_jobs_db(tmp_path)
    rolled_back_ui_job(db, UI_JOB)
    again = create_app(db=db, job=UI_JOB)
    async with again.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        assert again.require_state().coming_back
        await press(pilot, "enter")
        assert screen_name(pilot) == "ComingBackScreen"
        await press(pilot, "down", "enter")  # Yes: no log says it (none preselected)
        assert screen_name(pilot) == "ScaleUpScreen"
        await press(pilot, "enter")
        await wait_for_screen(pilot, "ResultScreen")
        assert f"start job '{UI_JOB}'" in screen_text(pilot, "#run")
    log = json.loads(load_job(db, UI_JOB).changelog_path.read_text())
    assert [run["direction"] for run in log["runs"]] == ["rollback", "scale_up"]


async def test_saving_as_a_new_job_under_a_typed_name(tmp_path: Path) -> None:
    db = ui_jobs_db(tmp_path)
    rows_before = all_rows(db)
    app = review_app(JobRequest(db=db, job=UI_JOB))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_screen(pilot, "ReviewScreen")
        assert not app.screen.query_one("#name-row").display
        await press(pilot, "down")
        assert app.screen.query_one(DestinationPicker).choice == AS_NEW
        assert app.screen.query_one("#name-row").display
        assert not app.screen.query_one("#file-rows").display
        app.screen.query_one("#new-name", Input).value = "flux_portrait_small"
        await press(pilot, "enter")
        await wait_for_screen(pilot, "ResultScreen")
        assert "start job 'flux_portrait_small'" in screen_text(pilot, "#run")
        assert f"a copy of '{UI_JOB}'" in screen_text(pilot, "#files")
    created = job_row(db, "flux_portrait_small")
    assert created is not None and created["status"] == "stopped"
    assert json.loads(created["job_config"])["config"]["name"] == "flux_portrait_small"
    assert job_row(db, UI_JOB) == next(row for row in rows_before if row["name"] == UI_JOB)


async def test_a_taken_new_name_is_said_as_it_is_typed(tmp_path: Path) -> None:
    """ "Save as a new job" under the name of another job says it is taken on its row as it
    is typed, in the words the save refuses it with, not only once Save is pressed."""
    db = ui_jobs_db(tmp_path)
    app = review_app(JobRequest(db=db, job=UI_JOB))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_screen(pilot, "ReviewScreen")
        await press(pilot, "down")
        assert app.screen.query_one(DestinationPicker).choice == AS_NEW
        app.screen.query_one("#new-name", Input).value = "sdxl_style"  # another job's
        await settle(pilot)
        note = screen_text(pilot, "#new-job-note")
        assert note.startswith("Not this name: the name 'sdxl_style' is taken")
        app.screen.query_one("#new-name", Input).value = "flux_portrait_small"
        await settle(pilot)
        assert "is taken" not in screen_text(pilot, "#new-job-note")


async def test_a_running_job_is_saved_only_to_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    db = ui_jobs_db(tmp_path)
    rows_before = all_rows(db)
    app = review_app(JobRequest(db=db, job=RUNNING_JOB))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_screen(pilot, "ReviewScreen")
        where = app.screen.query_one("#where", OptionList)
        assert [where.get_option(option).disabled for option in (IN_PLACE, AS_NEW, TO_FILE)] == [
            True,
            True,
            False,
        ]
        busy = screen_text(pilot, "#busy")
        assert busy.startswith(f"Not now: job '{RUNNING_JOB}' is running")
        assert "\n" not in busy
        assert app.screen.query_one(DestinationPicker).choice == TO_FILE
        await press(pilot, "enter")
        await wait_for_screen(pilot, "ResultScreen")
    assert all_rows(db) == rows_before
    saved = tmp_path / f"{RUNNING_JOB}.oomfix.json"
    assert json.loads(saved.read_text(encoding="utf-8"))["config"]["name"] == RUNNING_JOB
    assert (tmp_path / f"{RUNNING_JOB}.oomfix.changelog.json").is_file()


async def test_a_database_that_cannot_be_read_shows_one_line(tmp_path: Path) -> None:
    not_a_db = tmp_path / "aitk_db.db"
    not_a_db.write_text("this is not SQLite\n", encoding="utf-8")
    app = create_app(db=not_a_db)
    async with app.run_test(size=SIZE) as pilot:
        error = await wait_for_error(pilot)
        assert error.startswith(f"{not_a_db}")  # the app's line: no "oom-wizard: error:"
        assert "\n" not in error.strip()


@pytest.mark.parametrize(
    "argv",
    [["--job", UI_JOB], ["config.yaml", "--db", "aitk_db.db"]],
    ids=["job-without-db", "config-and-db"],
)
def test_the_wizard_refuses_half_a_database_job(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from oom_wizard.cli import main

    assert main(argv) == 2
    error = capsys.readouterr().err
    assert error.startswith("oom-wizard: error: ") and error.count("\n") == 1


async def test_saving_as_a_new_job_warns_that_nothing_is_resumed(tmp_path: Path) -> None:
    db = ui_jobs_db(tmp_path)
    app = review_app(JobRequest(db=db, job=UI_JOB))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_screen(pilot, "ReviewScreen")
        note = app.screen.query_one("#new-job-note")
        assert not note.display  # "Update job" is highlighted: nothing to warn about
        await press(pilot, "down")
        assert app.screen.query_one(DestinationPicker).choice == AS_NEW
        assert note.display
        warning = screen_text(pilot, "#new-job-note")
    assert "A new name starts a new output folder" in warning
    assert "step 4 of 'flux_portrait'" in warning and "are not resumed" in warning
    assert f"\"Update job '{UI_JOB}'\" instead" in warning


async def test_a_ui_job_folder_without_db_points_to_the_database_found(tmp_path: Path) -> None:
    folder = ui_job_folder(tmp_path)
    db = tmp_path / "aitk_db.db"
    app = create_app(folder, probe=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        summary = screen_text(pilot, "#summary")
    assert f"to fix the job itself use --db {db} --job {UI_JOB}" in summary
    status, out, _ = cli("plan", folder, "--moment", "early_steps", "--no-probe")
    assert status == 0
    note = next(line for line in out.splitlines() if "written anew" in line)
    assert note.split(": ", 1)[-1] in summary  # the command line's words, in the app
