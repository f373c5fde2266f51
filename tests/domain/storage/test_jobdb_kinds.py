"""AI Toolkit's newer ``Job`` columns (issue 23): ``job_type`` (caption jobs are not training
jobs), ``pid`` (a ``running`` row whose process is gone crashed) and ``save_now`` (``watch``
asks a running web-UI job for a checkpoint, writing only that column). Real SQLite files
shaped by ``tests/support/aitk_db.py`` (the toolkit's Prisma schema)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from textual.widgets import Log

from oom_wizard.application.follow import watch_db_target
from oom_wizard.cli import main
from oom_wizard.screens.watch import WatchApp
from oom_wizard.storage.jobdb import list_jobs, load_job, request_save_now
from tests.domain.logs.test_follow import fake_log
from tests.support.aitk_db import OLDEST_JOB_TABLE, add_job, all_rows, make_db, stringify
from tests.support.autopilot_support import SCENARIOS, write_config

CAPTION_CONFIG = {"job": "caption", "config": {"name": "caption_fox", "process": []}}


@pytest.fixture
def both_kinds(tmp_path: Path) -> Path:
    db = make_db(tmp_path / "aitk_db.db")
    add_job(db, "my_lora", step=120)
    add_job(
        db,
        "caption_fox",
        text=json.dumps(CAPTION_CONFIG),
        status="completed",
        info="Captioned 40 images",
        job_type="caption",
        job_ref="/data/fox",
    )
    return db


def test_only_training_jobs_are_listed(
    both_kinds: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert [job.name for job in list_jobs(both_kinds)] == ["my_lora"]
    assert main(["apply", "--db", str(both_kinds)]) == 0
    out = capsys.readouterr().out
    assert "my_lora" in out and "caption_fox" not in out


def test_a_caption_job_named_on_the_command_line_is_one_line(
    both_kinds: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = all_rows(both_kinds)
    for command in ("plan", "apply", "diagnose"):
        argv = [command, "--db", str(both_kinds), "--job", "caption_fox", "--no-probe"]
        assert main([*argv, "--in-place"] if command == "apply" else argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert "job 'caption_fox' is a caption job" in err and "not a training job" in err
    assert all_rows(both_kinds) == rows


def test_an_older_table_without_job_type_lists_every_job(tmp_path: Path) -> None:
    db = make_db(tmp_path / "aitk_db.db", schema=OLDEST_JOB_TABLE)
    add_job(db, "my_lora")
    assert [job.name for job in list_jobs(db)] == ["my_lora"]
    assert load_job(db, "my_lora").job_type == "train"


def test_a_running_row_whose_process_is_gone_is_a_crash_not_a_busy_job(
    tmp_path: Path, ended_pid: int, capsys: pytest.CaptureFixture[str]
) -> None:
    db = make_db(tmp_path / "aitk_db.db")
    add_job(db, "my_lora", status="running", info="Training", step=40, pid=ended_pid)
    job = load_job(db, "my_lora")
    assert job.crashed_while_running and job.busy_reason() is None
    assert main(["apply", "--db", str(db), "--job", "my_lora", "--no-probe", "--in-place"]) == 0
    out = capsys.readouterr().out
    assert f"its process (pid {ended_pid}) is gone" in out and "crashed" in out
    assert "Updated job 'my_lora'" in out


@pytest.mark.parametrize(
    "command",
    [["diagnose"], ["diagnose", "--json"], ["plan"], ["fit", "--gpu", "24"]],
    ids=["diagnose", "diagnose-json", "plan", "fit"],
)
def test_every_command_that_opens_the_job_says_its_process_is_gone(
    tmp_path: Path, ended_pid: int, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    db = make_db(tmp_path / "aitk_db.db")
    add_job(db, "ghost_lora", status="running", info="Training", step=40, pid=ended_pid)
    status = main([*command, "--db", str(db), "--job", "ghost_lora", "--no-probe"])
    assert status in ((0, 3, 4) if command[0] == "fit" else (0,))  # fit exits by its verdict
    captured = capsys.readouterr()
    said = " ".join((captured.out + captured.err).split())
    assert f"its process (pid {ended_pid}) is gone" in said


def test_a_running_row_whose_process_is_gone_is_not_listed_as_plain_running(
    tmp_path: Path, ended_pid: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """The job list (``--db`` without ``--job``) and the app's row say the process is gone
    (issue 33): one property, :attr:`DbJob.status_words`."""
    db = make_db(tmp_path / "aitk_db.db")
    add_job(db, "my_lora", status="running", info="Training", step=40, pid=ended_pid)
    job = load_job(db, "my_lora")
    assert job.status_words == "running, but its process is gone (crashed)"
    assert job.status_short == "crashed"
    assert main(["plan", "--db", str(db)]) == 0
    assert "its process is gone" in " ".join(capsys.readouterr().out.split())


def test_a_running_row_whose_process_lives_is_still_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import os

    db = make_db(tmp_path / "aitk_db.db")
    add_job(db, "my_lora", status="running", info="Training", step=40, pid=os.getpid())
    rows = all_rows(db)
    assert main(["apply", "--db", str(db), "--job", "my_lora", "--no-probe", "--in-place"]) == 2
    assert "job 'my_lora' is running" in capsys.readouterr().err
    assert all_rows(db) == rows


def test_save_now_refuses_a_row_that_is_not_running(tmp_path: Path) -> None:
    from oom_wizard.errors import JobDatabaseError

    db = make_db(tmp_path / "aitk_db.db")
    add_job(db, "my_lora", status="error")
    rows = all_rows(db)
    with pytest.raises(JobDatabaseError, match="is not running"):
        request_save_now(db, "my_lora")
    assert all_rows(db) == rows


async def test_watch_asks_then_sets_only_save_now_on_the_running_row(
    tmp_path: Path,
) -> None:
    import os

    from oom_wizard.formats.document import load_document

    config = write_config(tmp_path, SCENARIOS[0])
    db = make_db(tmp_path / "aitk_db.db")
    add_job(
        db,
        "flux_portrait_lora",
        text=stringify(load_document(config).tree),
        status="running",
        info="Training",
        step=1,
        pid=os.getpid(),
    )
    add_job(db, "other", status="stopped", created_ms=1)
    log = tmp_path / "log.txt"
    data = fake_log(tmp_path)
    cut = data.index(b"# OOM during training step, skipping batch 1/3 #")
    app = WatchApp(watch_db_target(db, "flux_portrait_lora", log), poll_s=0.02, probe=False)
    async with app.run_test(size=(100, 30)) as pilot:

        async def until(check: Callable[[], bool]) -> None:
            for _ in range(200):
                if check():
                    return
                await pilot.pause(0.05)
            raise AssertionError("never")

        log.write_bytes(data[:cut])
        await until(lambda: "Phase training" in str(app.query_one("#progress").render()))
        assert app.check_action("save_now", ()) is False  # no trouble yet: no key
        log.write_bytes(data[: cut + 200])
        await until(lambda: "skipped the batch" in "\n".join(app.query_one("#warnings", Log).lines))
        assert app.check_action("save_now", ())
        before = all_rows(db)
        await pilot.press("s")
        await until(lambda: type(app.screen).__name__ == "SaveNowScreen")
        assert all_rows(db) == before  # asked first: nothing written yet
        await pilot.press("y")
        await until(lambda: all_rows(db) != before)
        await pilot.pause(0.1)
        after = all_rows(db)
    changed = [
        (row["name"], key)
        for old, row in zip(before, after, strict=True)
        for key in row
        if row[key] != old[key]
    ]
    assert changed == [("flux_portrait_lora", "save_now")]
    assert [row["save_now"] for row in after] == [1, 0]


async def test_watch_says_why_when_the_row_is_no_longer_running(tmp_path: Path) -> None:
    import os
    import sqlite3

    from oom_wizard.formats.document import load_document

    config = write_config(tmp_path, SCENARIOS[0])
    db = make_db(tmp_path / "aitk_db.db")
    add_job(
        db,
        "flux_portrait_lora",
        text=stringify(load_document(config).tree),
        status="running",
        pid=os.getpid(),
    )
    log = tmp_path / "log.txt"
    data = fake_log(tmp_path)
    cut = data.index(b"# OOM during training step, skipping batch 1/3 #")
    app = WatchApp(watch_db_target(db, "flux_portrait_lora", log), poll_s=0.02, probe=False)
    async with app.run_test(size=(100, 30)) as pilot:
        log.write_bytes(data[: cut + 200])
        for _ in range(200):
            if app.check_action("save_now", ()):
                break
            await pilot.pause(0.05)
        conn = sqlite3.connect(db)
        conn.execute("UPDATE \"Job\" SET status = 'stopped'")
        conn.commit()
        conn.close()
        before = all_rows(db)
        await pilot.press("s")
        await pilot.pause(0.2)
        await pilot.press("y")
        for _ in range(100):
            if app._notifications:
                break
            await pilot.pause(0.05)
        texts = [n.message for n in app._notifications]
    assert any("is not running (it is stopped)" in text for text in texts), texts
    assert all_rows(db) == before


def test_apply_as_new_warns_that_the_checkpoints_are_not_resumed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 19, item 4: the command line says what the app says, and the change log keeps it."""
    db = make_db(tmp_path / "aitk_db.db")
    add_job(db, "dog_lora", step=500)
    argv = ["apply", "--db", str(db), "--job", "dog_lora", "--no-probe", "--as-new", "dog_v2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "warning: A new name starts a new output folder" in out
    assert "(step 500 of 'dog_lora') are not resumed" in out and "--in-place" in out
    new = load_job(db, "dog_v2")
    log = json.loads(new.changelog_path.read_text(encoding="utf-8"))
    assert "(step 500 of 'dog_lora') are not resumed" in log["runs"][-1]["database"]["warning"]


def test_only_a_row_running_with_its_process_alive_says_the_job_may_still_run(
    tmp_path: Path, ended_pid: int
) -> None:
    """The diagnosis's sign of a live job (issue 40): the row's status, never a log's age."""
    db = make_db(tmp_path / "aitk_db.db")
    add_job(db, "alive", status="running", info="Training", step=40, pid=os.getpid())
    add_job(db, "gone", status="running", info="Training", step=40, pid=ended_pid)
    add_job(db, "failed", status="error", info="CUDA out of memory")
    assert load_job(db, "alive").running_words == "the web UI says job 'alive' is running"
    assert load_job(db, "gone").running_words is None
    assert load_job(db, "failed").running_words is None
