"""Tests of ``oom_wizard.storage.jobdb`` against real SQLite files shaped like AI Toolkit's
``aitk_db.db``."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from oom_wizard.errors import ConfigError, JobDatabaseError
from oom_wizard.formats.document import load_document
from oom_wizard.paths import parse_path
from oom_wizard.storage import atomic
from oom_wizard.storage.changes import Change, Prepared, prepare
from oom_wizard.storage.jobdb import (
    AsNew,
    DbJob,
    InPlace,
    find_db,
    job_changelog_path,
    job_document,
    legacy_changelog_path,
    list_jobs,
    load_job,
    locate_job_log,
    read_job_changelog,
    restore_job,
)
from tests.support import exactness
from tests.support.aitk_db import (
    CREATED_MS,
    OLDEST_JOB_TABLE,
    SCHEMA,
    add_job,
    all_rows,
    job_row,
    make_db,
    set_setting,
    stringify,
    ui_job_config,
)
from tests.support.saving import save_to_db_after

BATCH = parse_path("config.process[0].train.batch_size")
CHECKPOINTING = parse_path("config.process[0].train.gradient_checkpointing")
RESOLUTION = parse_path("config.process[0].datasets[0].resolution")
CRASHED = (
    "Running 1 job\nmy_lora:   1%|          | 3/3000 [00:09<2:30:00]\n"
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    "Job process terminated with exit code 1.\n"
)
STOPPED = "Running 1 job\nmy_lora:   0%|          | 1/3000 [00:05<4:10:00]\nJob stopped\n"
ROLLBACK = (
    Change(CHECKPOINTING, True, "gradient_checkpointing", "saves activation memory"),
    Change(BATCH, 1, "batch_size", "one image per step"),
    Change(RESOLUTION, [512, 768], "top_bucket", "drop the 1024 bucket"),
)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A jobs database with the current schema and one crashed job, ``my_lora``."""
    path = make_db(tmp_path / "aitk_db.db")
    add_job(path, "my_lora", step=120)
    return path


def rollback(job: DbJob, changes: tuple[Change, ...] = ROLLBACK) -> Prepared:
    return prepare(job_document(job), changes)


def save(db: Path, mode: InPlace | AsNew, name: str = "my_lora", **kwargs: Any) -> Any:
    job = load_job(db, name)
    return save_to_db_after(
        rollback(job), job, mode, direction="rollback", moment="early_steps", **kwargs
    )


def key_order(text: str) -> list[list[str]]:
    """The keys of every object in the JSON text, in document order."""
    orders: list[list[str]] = []

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        orders.append([key for key, _ in pairs])
        return dict(pairs)

    json.loads(text, object_pairs_hook=hook)
    return orders


@pytest.fixture
def writer(db: Path) -> Iterator[sqlite3.Connection]:
    """A second connection, like the UI or a trainer, for tests that hold locks."""
    conn = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    yield conn
    if conn.in_transaction:
        conn.execute("ROLLBACK")
    conn.close()


# ----------------------------------------------------------------- reading


def test_list_shows_name_status_step_and_error_newest_first(db: Path) -> None:
    add_job(
        db,
        "newer",
        status="completed",
        step=3000,
        info="Training completed",
        created_ms=CREATED_MS + 60_000,
    )

    jobs = list_jobs(db)

    assert [(job.name, job.status, job.step) for job in jobs] == [
        ("newer", "completed", 3000),
        ("my_lora", "error", 120),
    ]
    assert jobs[1].error == "CUDA out of memory. Tried to allocate 2.00 GiB"
    assert jobs[0].error is None


def test_load_gives_the_same_document_as_the_json_file(db: Path, tmp_path: Path) -> None:
    job = load_job(db, "my_lora")
    file = tmp_path / "exported.json"
    file.write_text(job.job_config, encoding="utf-8")

    document = job_document(job)

    assert document.fmt == "json"
    assert document.source == tmp_path / "aitk_db.db#job=my_lora.json"
    assert document.tree == load_document(file).tree
    assert document.view() == load_document(file).view()
    assert document.view().processes[0].train.batch_size == 4


def test_an_unknown_job_is_refused_with_the_names_there_are(db: Path) -> None:
    with pytest.raises(JobDatabaseError, match="no job 'nope'; the jobs are 'my_lora'"):
        load_job(db, "nope")


def test_a_broken_job_config_is_a_config_error_at_its_column(db: Path) -> None:
    text = '{"job":"extension","config":{"name":"broken",}}'
    add_job(db, "broken", text=text)

    with pytest.raises(ConfigError) as caught:
        job_document(load_job(db, "broken"))

    assert caught.value.file is not None and caught.value.file.endswith("#job=broken.json")
    assert caught.value.message.startswith("a trailing comma")
    assert (caught.value.line, caught.value.column) == (1, text.index(",}") + 2)


def test_find_db_accepts_the_toolkit_folder(db: Path) -> None:
    assert find_db(db.parent) == db
    assert find_db(db) == db


# ------------------------------------------------------------------ the log


def test_log_found_through_the_configs_training_folder(db: Path) -> None:
    folder = db.parent / "output" / "my_lora"
    (folder / "logs").mkdir(parents=True)
    (folder / "log.txt").write_text(CRASHED, encoding="utf-8")
    (folder / "logs" / "0_log.txt").write_text(CRASHED, encoding="utf-8")
    job = load_job(db, "my_lora")

    found = locate_job_log(job, job_document(job).tree)

    assert found.log == folder / "log.txt"
    assert found.log_note == "log.txt (the latest run)"
    assert found.ui_job and found.config == job.source


def test_the_newest_crashed_log_is_chosen_as_in_a_job_folder(db: Path) -> None:
    folder = db.parent / "output" / "my_lora"
    (folder / "logs").mkdir(parents=True)
    (folder / "log.txt").write_text(STOPPED, encoding="utf-8")
    (folder / "logs" / "0_log.txt").write_text(CRASHED, encoding="utf-8")
    (folder / "logs" / "1_log.txt").write_text(CRASHED, encoding="utf-8")
    job = load_job(db, "my_lora")

    found = locate_job_log(job, job_document(job).tree)

    assert found.log == folder / "logs" / "1_log.txt"
    assert found.log_scan is not None and found.log_scan.crashed


def test_a_log_that_printed_another_jobs_id_is_not_this_jobs(db: Path) -> None:
    """The job's folder holds the log of a deleted job of the same name: its ``Job ID`` is not
    this row's, so it is passed over for the older log this job printed its own id in."""
    job = load_job(db, "my_lora")
    folder = db.parent / "output" / "my_lora"
    (folder / "logs").mkdir(parents=True)
    (folder / "log.txt").write_text('Job ID: "a-deleted-job"\n' + CRASHED, encoding="utf-8")
    (folder / "logs" / "0_log.txt").write_text(f'Job ID: "{job.id}"\n' + CRASHED, "utf-8")

    found = locate_job_log(job, job_document(job).tree)

    assert found.log == folder / "logs" / "0_log.txt"
    assert found.log_note is not None
    assert 'log.txt looks like the log of another job (it printed Job ID "a-deleted-job"' in (
        found.log_note
    )


def test_log_found_through_the_training_folder_setting(db: Path, tmp_path: Path) -> None:
    config = ui_job_config("moved")
    config["config"]["process"][0]["training_folder"] = "/nowhere/that/exists"
    add_job(db, "moved", config=config)
    root = tmp_path / "trainings"
    set_setting(db, "TRAINING_FOLDER", str(root))
    (root / "moved").mkdir(parents=True)
    (root / "moved" / "log.txt").write_text(CRASHED, encoding="utf-8")
    job = load_job(db, "moved")

    assert locate_job_log(job, job_document(job).tree).log == root / "moved" / "log.txt"


def test_no_log_when_the_job_folder_is_not_reachable(db: Path) -> None:
    job = load_job(db, "my_lora")

    found = locate_job_log(job, job_document(job).tree)

    assert found.log is None
    assert found.log_note is not None and "--log" in found.log_note


# ----------------------------------------------------------- update in place


def test_update_in_place_changes_only_the_config_and_updated_at(db: Path) -> None:
    before = job_row(db, "my_lora")
    assert before is not None

    result = save(db, InPlace())

    after = job_row(db, "my_lora")
    assert after is not None
    assert result.in_place and result.job_name == "my_lora"
    assert {key for key in before if before[key] != after[key]} == {"job_config", "updated_at"}
    assert isinstance(after["updated_at"], int)
    assert after["updated_at"] >= time.time() * 1000 - 60_000
    tree = json.loads(after["job_config"])["config"]["process"][0]
    assert tree["train"]["batch_size"] == 1
    assert tree["train"]["gradient_checkpointing"] is True
    assert tree["datasets"][0]["resolution"] == [512, 768]
    job_id = load_job(db, "my_lora").id
    assert result.changelog == db.parent / "oom-wizard" / db.name / f"{job_id}.changelog.json"
    assert "start job 'my_lora' in AI Toolkit's UI" in result.next_step()


def test_in_place_update_is_exactly_the_logged_changes_and_keeps_key_order(
    db: Path, tmp_path: Path
) -> None:
    original = load_job(db, "my_lora").job_config

    result = save(db, InPlace())

    stored = load_job(db, "my_lora").job_config
    log = json.loads(result.changelog.read_text(encoding="utf-8"))
    expected = json.loads(original)
    for change in log["changes"]:
        node = expected
        path = parse_path(change["path"])
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = change["after"]
    assert json.loads(stored) == expected
    assert key_order(stored) == key_order(original)
    assert len(log["changes"]) == 3
    assert log["runs"][0]["database"]["job_config_before"] == original


@pytest.mark.parametrize("mode", [InPlace(), AsNew()], ids=["in_place", "as_new"])
def test_the_saved_job_passes_the_exactness_check(
    db: Path, tmp_path: Path, mode: InPlace | AsNew
) -> None:
    before_file = tmp_path / "before.json"
    before_file.write_text(load_job(db, "my_lora").job_config, encoding="utf-8")

    result = save(db, mode)

    after_file = tmp_path / "after.json"
    after_file.write_text(load_job(db, result.job_name).job_config, encoding="utf-8")
    verdict = exactness.check(before_file, after_file, result.changelog)
    assert verdict.ok, verdict.problems


def test_unicode_survives_byte_for_byte_outside_the_changed_values(db: Path) -> None:
    original = load_job(db, "my_lora").job_config

    save(db, InPlace())

    stored = load_job(db, "my_lora").job_config
    for text in ("zxq ✨ café", "東京の夜, neon 🌃", "/data/datasets/café_photos"):
        assert text in original and text in stored
    assert stored.encode("utf-8").count("🌃".encode()) == 1


def test_a_second_in_place_save_appends_to_the_change_log(db: Path) -> None:
    save(db, InPlace())
    job = load_job(db, "my_lora")
    more = prepare(
        job_document(job),
        [Change(parse_path("config.process[0].model.low_vram"), True, "low_vram", "offload")],
    )

    result = save_to_db_after(more, job, InPlace(), direction="rollback")

    log = json.loads(result.changelog.read_text(encoding="utf-8"))
    assert [run["direction"] for run in log["runs"]] == ["rollback", "rollback"]
    assert [change["run"] for change in log["changes"]] == [0, 0, 0, 1]


# ------------------------------------------------------------- save as new


def test_save_as_new_clones_the_row_like_the_ui(db: Path) -> None:
    add_job(db, "busy_queue", status="stopped", queue_position=5000)
    original = job_row(db, "my_lora")

    result = save(db, AsNew())

    row = job_row(db, "my_lora_oomfix")
    assert row is not None and original is not None
    assert job_row(db, "my_lora") == original
    assert not result.in_place and result.job_name == "my_lora_oomfix"
    assert row["id"] == result.job_id and row["id"] != original["id"]
    assert len(row["id"]) == 36 and row["id"].count("-") == 4
    assert (row["status"], row["gpu_ids"], row["step"], row["info"]) == ("stopped", "0", 0, "")
    assert (row["stop"], row["return_to_queue"], row["save_now"], row["sample_now"]) == (0,) * 4
    assert row["queue_position"] == 6000
    assert isinstance(row["created_at"], int) and row["created_at"] == row["updated_at"]
    config = json.loads(row["job_config"])
    assert config["config"]["name"] == "my_lora_oomfix"
    assert config["config"]["process"][0]["train"]["batch_size"] == 1
    assert key_order(row["job_config"]) == key_order(original["job_config"])
    folder = db.parent / "oom-wizard" / db.name
    assert result.changelog == folder / f"{result.job_id}.changelog.json"
    assert "start job 'my_lora_oomfix'" in result.next_step()
    assert "'my_lora' is unchanged" in result.next_step()


def test_save_as_new_logs_the_name_change_too(db: Path) -> None:
    result = save(db, AsNew())

    log = json.loads(result.changelog.read_text(encoding="utf-8"))
    assert {change["path"] for change in log["changes"]} == {
        "config.name",
        "config.process[0].train.batch_size",
        "config.process[0].train.gradient_checkpointing",
        "config.process[0].datasets[0].resolution",
    }
    assert log["output"]["path"].endswith("#job=my_lora_oomfix.json")


def test_a_name_collision_picks_the_next_free_name(db: Path) -> None:
    add_job(db, "my_lora_oomfix")
    (db.parent / "output" / "my_lora_oomfix_2").mkdir(parents=True)  # a deleted job's folder

    assert save(db, AsNew()).job_name == "my_lora_oomfix_3"
    assert save(db, AsNew(), name="my_lora_oomfix").job_name == "my_lora_oomfix_4"


def test_an_explicit_name_that_is_taken_is_refused(db: Path) -> None:
    add_job(db, "taken")
    before = all_rows(db)

    with pytest.raises(JobDatabaseError, match="the name 'taken' is taken"):
        save(db, AsNew("taken"))

    assert all_rows(db) == before
    assert not (db.parent / "oom-wizard").exists()


def test_an_explicit_name_is_used_as_given(db: Path) -> None:
    result = save(db, AsNew("café lora ✨"))

    row = job_row(db, "café lora ✨")
    assert row is not None and json.loads(row["job_config"])["config"]["name"] == "café lora ✨"
    assert result.changelog.name == f"{row['id']}.changelog.json"


# ------------------------------------------------------------------ restore


def test_restore_puts_back_the_exact_previous_text(db: Path) -> None:
    original = load_job(db, "my_lora").job_config
    save(db, InPlace())

    result = restore_job(load_job(db, "my_lora"))

    assert load_job(db, "my_lora").job_config == original
    assert result.restored_run == 0
    log = json.loads(result.changelog.read_text(encoding="utf-8"))
    assert [run["direction"] for run in log["runs"]] == ["rollback", "restore"]
    net = {change["path"]: change for change in log["changes"] if change["run"] == 1}
    assert net["config.process[0].train.batch_size"]["after"] == 4


def test_restore_walks_back_one_save_at_a_time(db: Path) -> None:
    original = load_job(db, "my_lora").job_config
    save(db, InPlace())
    middle = load_job(db, "my_lora")
    save_to_db_after(
        prepare(job_document(middle), [Change(BATCH, 2)]), middle, InPlace(), direction="scale_up"
    )

    restore_job(load_job(db, "my_lora"))
    assert load_job(db, "my_lora").job_config == middle.job_config
    restore_job(load_job(db, "my_lora"))
    assert load_job(db, "my_lora").job_config == original
    with pytest.raises(JobDatabaseError, match="undone already"):
        restore_job(load_job(db, "my_lora"))


def test_restore_refuses_when_the_ui_changed_the_job_since(db: Path) -> None:
    save(db, InPlace())
    edited = stringify(ui_job_config("my_lora", batch_size=2))
    conn = sqlite3.connect(db)
    conn.execute('UPDATE "Job" SET "job_config" = ? WHERE "name" = ?', (edited, "my_lora"))
    conn.commit()
    conn.close()

    with pytest.raises(JobDatabaseError, match="pass --force"):
        restore_job(load_job(db, "my_lora"))
    assert load_job(db, "my_lora").job_config == edited
    restore_job(load_job(db, "my_lora"), force=True)
    assert (
        json.loads(load_job(db, "my_lora").job_config)["config"]["process"][0]["train"][
            "batch_size"
        ]
        == 4
    )


def test_restore_of_a_copy_points_at_the_original(db: Path) -> None:
    save(db, AsNew())

    with pytest.raises(JobDatabaseError, match="copy of 'my_lora', which is unchanged"):
        restore_job(load_job(db, "my_lora_oomfix"))


def test_restore_without_a_change_log_is_refused(db: Path) -> None:
    with pytest.raises(JobDatabaseError, match="nothing to restore"):
        restore_job(load_job(db, "my_lora"))


def test_a_change_log_of_an_older_version_is_set_aside(db: Path) -> None:
    save(db, InPlace())
    conn = sqlite3.connect(db)
    conn.execute(
        'UPDATE "Job" SET "job_config" = ? WHERE "name" = ?',
        (stringify(ui_job_config("my_lora")), "my_lora"),
    )
    conn.commit()
    conn.close()
    job = load_job(db, "my_lora")
    assert read_job_changelog(job) is None

    result = save_to_db_after(rollback(job), job, InPlace(), direction="rollback")

    assert len(json.loads(result.changelog.read_text(encoding="utf-8"))["runs"]) == 1
    aside = result.changelog.name.removesuffix(".json") + ".old-1.json"
    assert (result.changelog.parent / aside).is_file()


# ------------------------------------------------------------ refusals


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ({"status": "running"}, "is running; stop it"),
        ({"status": "stopping"}, "is stopping"),
        ({"status": "queued"}, "is queued"),
        ({"status": "running", "stop": 1}, "has a stop pending"),
        ({"status": "running", "return_to_queue": 1}, "has a stop pending"),
        ({"status": "paused"}, "status 'paused'"),
    ],
)
@pytest.mark.parametrize("mode", [InPlace(), AsNew()])
def test_a_busy_job_is_never_touched(
    tmp_path: Path, columns: dict[str, Any], message: str, mode: InPlace | AsNew
) -> None:
    db = make_db(tmp_path / "aitk_db.db")
    add_job(db, "my_lora", **columns)
    before = all_rows(db)

    with pytest.raises(JobDatabaseError, match=message):
        save(db, mode)

    assert all_rows(db) == before
    assert not (tmp_path / "oom-wizard").exists()


def test_a_job_the_user_stopped_can_be_updated(tmp_path: Path) -> None:
    db = make_db(tmp_path / "aitk_db.db")
    add_job(db, "my_lora", status="stopped", stop=1, info="Job stopped")  # the flag stays set

    assert save(db, InPlace()).in_place


def test_a_job_that_started_after_loading_is_refused(db: Path) -> None:
    job = load_job(db, "my_lora")
    prepared = rollback(job)
    conn = sqlite3.connect(db)
    conn.execute('UPDATE "Job" SET "status" = ? WHERE "id" = ?', ("running", job.id))
    conn.commit()
    conn.close()

    with pytest.raises(JobDatabaseError, match="is running"):
        save_to_db_after(prepared, job, InPlace(), direction="rollback")
    assert load_job(db, "my_lora").job_config == job.job_config


def test_a_config_edited_in_the_ui_after_loading_is_refused(db: Path) -> None:
    job = load_job(db, "my_lora")
    prepared = rollback(job)
    edited = stringify(ui_job_config("my_lora", steps=500))
    conn = sqlite3.connect(db)
    conn.execute('UPDATE "Job" SET "job_config" = ? WHERE "id" = ?', (edited, job.id))
    conn.commit()
    conn.close()

    with pytest.raises(JobDatabaseError, match="changed in AI Toolkit's UI while"):
        save_to_db_after(prepared, job, InPlace(), direction="rollback")
    assert load_job(db, "my_lora").job_config == edited


def test_a_write_lock_held_elsewhere_makes_us_wait_then_fail_cleanly(
    db: Path, writer: sqlite3.Connection
) -> None:
    job = load_job(db, "my_lora")
    prepared = rollback(job)
    before = all_rows(db)
    writer.execute("BEGIN IMMEDIATE")

    started = time.monotonic()
    with pytest.raises(JobDatabaseError, match=r"stayed locked for 0\.5 s") as caught:
        save_to_db_after(prepared, job, InPlace(), direction="rollback", busy_timeout=0.5)
    waited = time.monotonic() - started

    writer.execute("ROLLBACK")
    assert 0.4 <= waited < 5
    assert "nothing was written" in caught.value.message
    assert all_rows(db) == before
    assert not (db.parent / "oom-wizard").exists()


def test_a_lock_released_while_we_wait_lets_the_save_through(
    db: Path, writer: sqlite3.Connection
) -> None:
    job = load_job(db, "my_lora")
    prepared = rollback(job)
    writer.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.3, writer.execute, args=("COMMIT",))
    release.start()

    result = save_to_db_after(prepared, job, InPlace(), direction="rollback", busy_timeout=5)

    release.join()
    assert result.in_place
    assert (
        json.loads(load_job(db, "my_lora").job_config)["config"]["process"][0]["train"][
            "batch_size"
        ]
        == 1
    )


def test_an_exclusive_lock_makes_reading_fail_cleanly(db: Path, writer: sqlite3.Connection) -> None:
    writer.execute("BEGIN EXCLUSIVE")

    with pytest.raises(JobDatabaseError, match="stayed locked"):
        list_jobs(db, busy_timeout=0.2)


def test_a_change_log_that_cannot_be_written_rolls_the_save_back(db: Path) -> None:
    (db.parent / "oom-wizard").write_text("a file where the folder should be", encoding="utf-8")
    before = all_rows(db)

    with pytest.raises(JobDatabaseError, match="cannot write the change log"):
        save(db, InPlace())

    assert all_rows(db) == before


def test_a_job_table_without_the_columns_we_need_is_refused(tmp_path: Path) -> None:
    db = make_db(tmp_path / "aitk_db.db", schema=SCHEMA.replace('"info" TEXT', '"infos" TEXT'))

    with pytest.raises(JobDatabaseError, match="the Job table has no column info"):
        list_jobs(db)


def test_an_unknown_required_column_refuses_a_save_as_new(tmp_path: Path) -> None:
    schema = SCHEMA.replace(
        '"sample_now" BOOLEAN NOT NULL DEFAULT false',
        '"sample_now" BOOLEAN NOT NULL DEFAULT false, "owner" TEXT NOT NULL',
    )
    db = make_db(tmp_path / "aitk_db.db", schema=schema)
    add_job(db, "my_lora", owner="me")
    before = all_rows(db)

    with pytest.raises(JobDatabaseError, match="needs a value for owner"):
        save(db, AsNew())

    assert all_rows(db) == before
    assert not (tmp_path / "oom-wizard").exists()
    assert save(db, InPlace()).in_place


def test_the_oldest_ui_schema_works(tmp_path: Path) -> None:
    db = make_db(tmp_path / "aitk_db.db", schema=OLDEST_JOB_TABLE)
    add_job(db, "my_lora")

    assert save(db, InPlace()).in_place
    assert save(db, AsNew()).job_name == "my_lora_oomfix"
    assert restore_job(load_job(db, "my_lora")).restored_run == 0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"this is not sqlite at all" * 100, "not a SQLite database"),
        (None, "no Job table"),
    ],
)
def test_a_file_that_is_not_the_jobs_database_is_refused(
    tmp_path: Path, content: bytes | None, message: str
) -> None:
    path = tmp_path / "aitk_db.db"
    if content is None:
        sqlite3.connect(path).close()
        make_db(path, schema='CREATE TABLE "Other" ("id" INTEGER);')
    else:
        path.write_bytes(content)

    with pytest.raises(JobDatabaseError, match=message):
        list_jobs(path)


def test_a_missing_database_is_refused_without_creating_it(tmp_path: Path) -> None:
    with pytest.raises(JobDatabaseError, match="no such file"):
        list_jobs(tmp_path / "aitk_db.db")
    assert not (tmp_path / "aitk_db.db").exists()


def test_the_change_log_is_keyed_by_the_database_and_the_job_id(tmp_path: Path) -> None:
    path = job_changelog_path(tmp_path / "aitk_db.db", "d7ebfd7e-5792-4245-88d2-0b329b6b8a66")

    assert path == (
        tmp_path
        / "oom-wizard"
        / "aitk_db.db"
        / "d7ebfd7e-5792-4245-88d2-0b329b6b8a66.changelog.json"
    )


def test_an_id_that_is_not_a_plain_token_is_hashed_so_two_never_meet(tmp_path: Path) -> None:
    db = tmp_path / "aitk_db.db"
    first, second = job_changelog_path(db, "a/b"), job_changelog_path(db, "a_b")

    assert first != second
    assert first.parent == tmp_path / "oom-wizard" / "aitk_db.db"
    assert "/" not in first.name.removesuffix(".changelog.json")


# ------------------------------------------ issue 12: one change log per database and job id


def _in_place_then_restore(db: Path, name: str) -> tuple[str, str, str]:
    """(original, after the in-place save, after the restore) job_config of job ``name``."""
    original = load_job(db, name).job_config
    save(db, InPlace(), name=name)
    saved = load_job(db, name).job_config
    restore_job(load_job(db, name))
    return original, saved, load_job(db, name).job_config


@pytest.mark.parametrize(("first", "second"), [("a/b", "a_b"), (" x", "x"), ("a:b", "a?b")])
def test_jobs_whose_names_map_to_one_file_name_each_restore_their_own(
    db: Path, first: str, second: str
) -> None:
    add_job(db, first, config=ui_job_config(first, batch_size=4))
    add_job(db, second, config=ui_job_config(second, batch_size=8))
    save(db, InPlace(), name=first)
    save(db, InPlace(), name=second)  # used to move the first job's change log aside

    restore_job(load_job(db, first))
    restore_job(load_job(db, second))

    assert json.loads(load_job(db, first).job_config) == ui_job_config(first, batch_size=4)
    assert json.loads(load_job(db, second).job_config) == ui_job_config(second, batch_size=8)
    assert load_job(db, first).changelog_path != load_job(db, second).changelog_path


def test_two_databases_in_one_folder_each_restore_their_own_job(tmp_path: Path) -> None:
    one = make_db(tmp_path / "aitk_db.db")
    two = make_db(tmp_path / "aitk_db_copy.db")
    add_job(one, "my_lora", config=ui_job_config("my_lora", batch_size=4))
    add_job(two, "my_lora", config=ui_job_config("my_lora", batch_size=6))

    results = [_in_place_then_restore(db, "my_lora") for db in (one, two)]

    for original, saved, restored in results:
        assert saved != original and restored == original
    assert load_job(one, "my_lora").changelog_path.parent != (
        load_job(two, "my_lora").changelog_path.parent
    )


def test_a_renamed_job_keeps_its_change_log(db: Path) -> None:
    original = load_job(db, "my_lora").job_config
    save(db, InPlace())
    conn = sqlite3.connect(db)
    conn.execute('UPDATE "Job" SET "name" = ? WHERE "name" = ?', ("renamed", "my_lora"))
    conn.commit()
    conn.close()

    restore_job(load_job(db, "renamed"))

    assert load_job(db, "renamed").job_config == original


def test_every_previous_config_stays_reachable_after_a_ui_edit(db: Path) -> None:
    first = load_job(db, "my_lora").job_config
    save(db, InPlace())
    conn = sqlite3.connect(db)
    edited = stringify(ui_job_config("my_lora", batch_size=3))
    conn.execute('UPDATE "Job" SET "job_config" = ? WHERE "name" = ?', (edited, "my_lora"))
    conn.commit()
    conn.close()
    result = save(db, InPlace())  # the old log describes another version: set aside

    folder = result.changelog.parent
    recorded = []
    for path in sorted(folder.glob("*.json")):
        for run in json.loads(path.read_text(encoding="utf-8"))["runs"]:
            recorded.append(run["database"]["job_config_before"])
    assert first in recorded and edited in recorded


@pytest.mark.parametrize("step", ["abc", 1.5, -3, "12", "9" * 40])
def test_a_step_that_is_not_an_integer_does_not_break_the_list(db: Path, step: Any) -> None:
    conn = sqlite3.connect(db)
    conn.execute('UPDATE "Job" SET "step" = ? WHERE "name" = ?', (step, "my_lora"))
    conn.commit()
    conn.close()

    (job,) = list_jobs(db)

    assert job.step == (12 if step == "12" else 0)


def test_a_concurrent_save_of_this_tool_is_not_blamed_on_the_ui(db: Path) -> None:
    stale = load_job(db, "my_lora")
    save(db, InPlace())

    with pytest.raises(JobDatabaseError, match="just saved by another oom-wizard run"):
        save_to_db_after(rollback(stale), stale, InPlace(), direction="rollback")


def test_a_ui_edit_is_still_named_as_one(db: Path) -> None:
    stale = load_job(db, "my_lora")
    conn = sqlite3.connect(db)
    edited = stringify(ui_job_config("my_lora", batch_size=3))
    conn.execute('UPDATE "Job" SET "job_config" = ? WHERE "name" = ?', (edited, "my_lora"))
    conn.commit()
    conn.close()

    with pytest.raises(JobDatabaseError, match="changed in AI Toolkit's UI"):
        save_to_db_after(rollback(stale), stale, InPlace(), direction="rollback")


def killed_at(step: str, action: Callable[[], object]) -> None:
    """Run ``action`` in a forked child that SIGKILLs itself at the save's ``step``."""
    import os
    import signal

    pid = os.fork()
    if pid == 0:
        try:

            def die(name: str, path: Path) -> None:
                if name == step:
                    os.kill(os.getpid(), signal.SIGKILL)

            atomic.STEP_HOOK = die
            action()
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == -signal.SIGKILL


def opened(db: Path, name: str = "my_lora") -> DbJob:
    """The job as the next command opens it: its database's killed saves settled first."""
    from oom_wizard.application.opening import settle_database

    return load_job(settle_database(db), name)


def test_a_kill_before_the_database_commit_leaves_the_job_and_its_log_as_they_were(
    db: Path,
) -> None:
    """SIGKILL with the change log's temp and the journal on disk, before COMMIT."""
    original = load_job(db, "my_lora").job_config
    killed_at("commit", lambda: save(db, InPlace()))

    job = opened(db)

    assert job.job_config == original and not job.changelog_path.exists()
    assert [p.name for p in job.changelog_path.parent.iterdir()] == []
    with pytest.raises(JobDatabaseError, match="has not updated job 'my_lora' in place"):
        restore_job(job)


def test_a_kill_after_the_database_commit_puts_the_change_log_in_place_on_the_next_open(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL after COMMIT, before the change log's rename: the next open, from another
    folder, renames it in; the pair then describes the row and restore puts the original back."""
    original = load_job(db, "my_lora").job_config
    killed_at("rename", lambda: save(db, InPlace()))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)

    job = opened(db)

    assert job.job_config != original
    assert read_job_changelog(job) is not None  # the log describes the row: nothing "edited"
    assert [p.name for p in job.changelog_path.parent.iterdir()] == [job.changelog_path.name]
    restore_job(job)
    assert load_job(db, "my_lora").job_config == original


def test_a_killed_restore_can_be_run_again_or_is_done(db: Path) -> None:
    """Round 3 (R4-3): a restore killed before its commit left the row with the fix and the
    log saying it was undone, so no restore could put the original back."""
    original = load_job(db, "my_lora").job_config
    save(db, InPlace())
    killed_at("commit", lambda: restore_job(load_job(db, "my_lora")))
    restore_job(opened(db))
    assert load_job(db, "my_lora").job_config == original

    save(db, InPlace())
    killed_at("rename", lambda: restore_job(load_job(db, "my_lora")))
    job = opened(db)
    assert job.job_config == original
    with pytest.raises(JobDatabaseError, match="undone already"):
        restore_job(job)


def test_a_save_as_new_killed_after_its_commit_gets_its_change_log(db: Path) -> None:
    killed_at("rename", lambda: save(db, AsNew()))

    job = opened(db, "my_lora_oomfix")

    assert read_job_changelog(job) is not None


def test_a_save_that_lost_to_one_killed_after_its_commit_names_the_other_run(db: Path) -> None:
    """The winner committed its row and died before its change log's rename: the loser's
    refusal still names another oom-wizard run, not the UI."""
    stale = load_job(db, "my_lora")
    killed_at("rename", lambda: save(db, InPlace()))

    with pytest.raises(JobDatabaseError, match="just saved by another oom-wizard run"):
        save_to_db_after(rollback(stale), stale, InPlace(), direction="rollback")


def test_a_wal_database_that_cannot_get_its_side_files_says_so(tmp_path: Path) -> None:
    from oom_wizard.storage.jobdb import _database_error

    db = make_db(tmp_path / "aitk_db.db")
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.close()

    error = _database_error(sqlite3.OperationalError("unable to open database file"), db, 5.0)

    assert "WAL mode" in error.message and "-wal and -shm" in error.message


def test_a_job_config_nested_too_deeply_is_one_line(db: Path) -> None:
    conn = sqlite3.connect(db)
    deep = '{"job": "extension", "config": ' + "[" * 3000 + "]" * 3000 + "}"
    conn.execute('UPDATE "Job" SET "job_config" = ? WHERE "name" = ?', (deep, "my_lora"))
    conn.commit()
    conn.close()

    with pytest.raises(ConfigError, match="nests deeper than 100 levels"):
        job_document(load_job(db, "my_lora"))


# ------------------------------------------- change logs of earlier versions, kept by name


def _as_if_written_by_an_earlier_version(db: Path, name: str = "my_lora") -> Path:
    """Move the job's change log to where oom-wizard kept it by name before logs were keyed
    by the job's id; the old place."""
    job = load_job(db, name)
    legacy = legacy_changelog_path(db, name)
    job.changelog_path.rename(legacy)
    return legacy


def test_a_change_log_kept_by_name_is_still_restored_from(db: Path) -> None:
    original = load_job(db, "my_lora").job_config
    save(db, InPlace())
    legacy = _as_if_written_by_an_earlier_version(db)

    assert read_job_changelog(load_job(db, "my_lora")) is not None
    result = restore_job(load_job(db, "my_lora"))

    assert load_job(db, "my_lora").job_config == original
    assert result.changelog == load_job(db, "my_lora").changelog_path  # carried over
    runs = json.loads(result.changelog.read_text(encoding="utf-8"))["runs"]
    assert [run["direction"] for run in runs] == ["rollback", "restore"]
    assert legacy.is_file()  # the old file is left as it was


def test_the_next_save_carries_a_change_log_kept_by_name_over(db: Path) -> None:
    original = load_job(db, "my_lora").job_config
    save(db, InPlace())
    _as_if_written_by_an_earlier_version(db)
    middle = load_job(db, "my_lora")
    save_to_db_after(
        prepare(job_document(middle), [Change(BATCH, 2)]), middle, InPlace(), direction="scale_up"
    )

    restore_job(load_job(db, "my_lora"))
    restore_job(load_job(db, "my_lora"))

    assert load_job(db, "my_lora").job_config == original  # every earlier config reachable


def test_a_change_log_kept_by_name_for_another_job_is_not_taken(db: Path) -> None:
    """``a/b`` and ``a_b`` shared one file by name: it belongs to the job whose id it names."""
    add_job(db, "a/b", config=ui_job_config("a/b", batch_size=4))
    add_job(db, "a_b", config=ui_job_config("a_b", batch_size=8))
    save(db, InPlace(), name="a/b")
    _as_if_written_by_an_earlier_version(db, "a/b")

    other = load_job(db, "a_b")
    assert other.changelog_to_read == other.changelog_path
    assert read_job_changelog(other) is None
    with pytest.raises(JobDatabaseError, match="nothing to restore"):
        restore_job(other)


def test_a_job_opened_while_another_run_commits_it_is_read_in_step(db: Path) -> None:
    """Another run has committed the row and not yet renamed its change log in: the open
    waits for it (a few milliseconds), so the row and its log are never read out of step
    ("edited after oom-wizard saved it", round 3's R4-3 told 4 of 10 losers of a race)."""
    import os

    ready, go = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(ready)

            def pause(step: str, path: Path) -> None:
                if step == "rename":
                    os.write(go, b"x")
                    time.sleep(0.3)

            atomic.STEP_HOOK = pause
            save(db, InPlace())
            os._exit(0)
        finally:
            os._exit(1)
    os.close(go)
    assert os.read(ready, 1) == b"x"  # the child is between its commit and its rename
    job = opened(db)
    log = read_job_changelog(job)  # still inside the child's pause, unless the open waited
    os.close(ready)
    _, status = os.waitpid(pid, 0)

    assert os.waitstatus_to_exitcode(status) == 0
    assert log is not None


def test_a_save_killed_after_its_commit_keeps_its_run_when_the_ui_edits_the_job_first(
    db: Path,
) -> None:
    """The row was committed, then edited in the UI before any oom-wizard command ran: the
    change log's temp is the only record of that save (and of the config restore puts back),
    so it is renamed in, and the job then reads as edited since, which is true."""
    original = load_job(db, "my_lora").job_config
    killed_at("rename", lambda: save(db, InPlace()))
    conn = sqlite3.connect(db)
    edited = stringify(ui_job_config("my_lora", batch_size=3))
    later = int(time.time() * 1000) + 1000
    conn.execute(
        'UPDATE "Job" SET "job_config" = ?, "updated_at" = ? WHERE "name" = ?',
        (edited, later, "my_lora"),
    )
    conn.commit()
    conn.close()

    job = opened(db)

    log = json.loads(job.changelog_path.read_bytes())
    assert log["runs"][0]["database"]["job_config_before"] == original
    assert read_job_changelog(job) is None  # edited in the UI since: not this config's story
    restore_job(job, force=True)
    assert load_job(db, "my_lora").job_config == original


def test_a_change_log_that_cannot_be_renamed_in_after_the_commit_is_kept_for_the_next_run(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the row's commit nothing is undone: the error says the save was committed, and
    the change log's temp and journal stay for the next command to rename in."""

    def fail(step: str, path: Path) -> None:
        if step == "rename":
            raise OSError(5, "Input/output error")

    monkeypatch.setattr(atomic, "STEP_HOOK", fail)
    with pytest.raises(JobDatabaseError, match="the save was committed, but the change log"):
        save(db, InPlace())
    monkeypatch.setattr(atomic, "STEP_HOOK", None)

    job = load_job(db, "my_lora")
    assert job.job_config != stringify(ui_job_config("my_lora"))
    left = sorted(p.name for p in job.changelog_path.parent.iterdir())
    assert sorted(name.rsplit(".", 1)[-1] for name in left) == ["journal", "tmp"]
