"""Every command recovers before it reads, from any folder (R5-2, R5-3): a save killed between
its pair's two renames (past the commit point) is finished by whatever command opens the job
next, even when that command is given the config the kill left unrenamed."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from oom_wizard.cli import main
from oom_wizard.storage.jobdb import CHANGELOG_FOLDER
from tests.support.aitk_db import add_job, job_row, make_db

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "flux_portrait_24gb.yaml"
TOKEN = "0123456789abcdef"
MOMENT = ("--moment", "sampling", "--no-probe")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _quiet(args: list[str]) -> int:
    """``oom-wizard ARGS`` in-process, its output dropped (for a module's fixtures)."""
    sink = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        return main(args)


@pytest.fixture(scope="module")
def saved_pair(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a job and the pair one ``apply`` saved of it (made once, copied)."""
    src = tmp_path_factory.mktemp("pair") / "src"
    src.mkdir()
    shutil.copyfile(FIXTURE, src / "job.yaml")
    assert _quiet(["apply", str(src / "job.yaml"), "--all", *MOMENT]) == 0
    return src


@pytest.fixture(scope="module")
def saved_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A toolkit folder whose job one ``apply --in-place`` saved (made once, copied)."""
    toolkit = tmp_path_factory.mktemp("db") / "toolkit"
    toolkit.mkdir()
    db = make_db(toolkit / "aitk_db.db")
    add_job(db, "my_lora", step=120)
    args = ["apply", "--db", str(db), "--job", "my_lora", "--in-place", "--all"]
    assert _quiet([*args, *MOMENT]) == 0
    return toolkit


def _half_pair(src: Path, pid: int) -> tuple[Path, Path]:
    """A saved pair as a SIGKILL between its renames leaves it: the change log renamed in,
    the config still its temp, the journal naming both (as ``commit_pair`` writes it)."""
    config, changelog = src / "job.oomfix.yaml", src / "job.oomfix.changelog.json"
    entries = []
    for final in (changelog, config):
        entries.append(
            {
                "final": final.name,
                "temp": f".{final.name}.oomw-{pid}-{TOKEN}.tmp",
                "backup": f".{final.name}.oomw-{pid}-{TOKEN}.bak",
                "sha256": _sha(final.read_bytes()),
            }
        )
    config.rename(src / entries[1]["temp"])
    journal = src / f".oomw-{pid}-{TOKEN}.journal"
    record = {"version": 2, "files": entries, "replace": False, "journals": [journal.name]}
    journal.write_text(json.dumps(record), encoding="utf-8")
    return config, changelog


@pytest.mark.parametrize(
    "command",
    [
        ("plan", "../src/job.oomfix.yaml", "--moment", "sampling", "--no-probe"),
        ("scale-up", "../src/job.oomfix.yaml", "--dry-run"),
        ("diagnose", "../src/job.oomfix.yaml", "--moment", "sampling", "--no-probe"),
        ("history", "../src/job.oomfix.yaml"),
    ],
    ids=lambda command: command[0],
)
def test_the_next_command_from_another_folder_finishes_a_killed_pair(
    command: tuple[str, ...],
    saved_pair: Path,
    tmp_path: Path,
    ended_pid: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    src, elsewhere = tmp_path / "src", tmp_path / "elsewhere"
    shutil.copytree(saved_pair, src)
    elsewhere.mkdir()
    config, changelog = _half_pair(src, ended_pid)
    monkeypatch.chdir(elsewhere)

    status = main(list(command))

    said = capsys.readouterr()
    assert status == 0, said.err
    assert "no such file" not in said.err and "note:" not in said.err, said.err
    log = json.loads(changelog.read_bytes())
    assert log["output"]["sha256"] == _sha(config.read_bytes())
    assert [path.name for path in src.iterdir() if ".oomw-" in path.name] == []


def _db_saved(root: Path, template: Path) -> tuple[Path, Path]:
    toolkit = root / "toolkit"
    shutil.copytree(template, toolkit)
    db = toolkit / "aitk_db.db"
    row = job_row(db, "my_lora")
    assert row is not None
    changelog = toolkit / CHANGELOG_FOLDER / db.name / f"{row['id']}.changelog.json"
    assert changelog.is_file()
    return db, changelog


def test_history_db_finishes_a_killed_database_save_before_it_reads(
    saved_db: Path,
    tmp_path: Path,
    ended_pid: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """R5-3: the row took the save (its commit point), the change log was still its temp."""
    db, changelog = _db_saved(tmp_path, saved_db)
    row = job_row(db, "my_lora")
    assert row is not None
    folder = changelog.parent
    temp = folder / f".{changelog.name}.oomw-{ended_pid}-{TOKEN}.tmp"
    journal = folder / f".oomw-{ended_pid}-{TOKEN}.journal"
    entry = {
        "final": changelog.name,
        "temp": temp.name,
        "backup": f".{changelog.name}.oomw-{ended_pid}-{TOKEN}.bak",
        "sha256": _sha(changelog.read_bytes()),
    }
    database = {
        "path": f"../../{db.name}",
        "job_id": row["id"],
        "sha256": _sha(str(row["job_config"]).encode("utf-8")),
        "updated_at": row["updated_at"],
        "before": None,
    }
    record = {"version": 2, "files": [entry], "replace": False, "journals": [journal.name]}
    journal.write_text(json.dumps({**record, "database": database}), encoding="utf-8")
    changelog.rename(temp)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)

    status = main(["history", "--db", "../toolkit/aitk_db.db", "--job", "my_lora"])

    said = capsys.readouterr()
    assert status == 0, said.err
    assert changelog.is_file() and not journal.exists() and not temp.exists()


def test_a_hot_sqlite_journal_is_rolled_back_not_called_read_only(
    saved_db: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """R5-3: a writer killed mid-transaction leaves ``aitk_db.db-journal``; a read-only open
    cannot roll it back, so every read said "the database is read-only for you"."""
    db, _ = _db_saved(tmp_path, saved_db)
    killed = (
        "import os, sqlite3, sys\n"
        "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "c.execute('PRAGMA cache_size=2')\n"
        "c.execute('BEGIN IMMEDIATE')\n"
        "c.execute('UPDATE \"Job\" SET \"info\" = \\'half\\'')\n"
        "c.execute('CREATE TABLE big(x)')\n"
        "for _ in range(200): c.execute('INSERT INTO big VALUES (?)', ('z' * 4000,))\n"
        "os._exit(9)\n"
    )
    subprocess.run([sys.executable, "-c", killed, str(db)], check=False)
    assert db.with_name(db.name + "-journal").stat().st_size > 0
    monkeypatch.chdir(tmp_path)

    status = main(["history", "--db", str(db), "--job", "my_lora"])

    said = capsys.readouterr()
    assert status == 0, said.err
    assert "read-only" not in said.err
    assert job_row(db, "my_lora") is not None and (job_row(db, "my_lora") or {})["info"] != "half"


def test_a_committed_save_on_read_only_media_is_said_as_such_not_as_an_edit(
    saved_db: Path,
    tmp_path: Path,
    ended_pid: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """R5-6: a second save of a web-UI job killed after the row's commit, its change log still
    the temp, on media that are read-only now: the row holds the new config and the change log
    on disk the old story. That is a save that could not be finished, not an edit in the UI."""
    import errno
    import sqlite3

    from oom_wizard.storage import atomic

    db, changelog = _db_saved(tmp_path, saved_db)
    row = job_row(db, "my_lora")
    assert row is not None
    newer = str(row["job_config"]).replace('"batch_size":', '"batch_size": 1, "x_":', 1)
    stamp = int(row["updated_at"]) + 1000
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        conn.execute(
            'UPDATE "Job" SET "job_config" = ?, "updated_at" = ? WHERE "id" = ?',
            (newer, stamp, row["id"]),
        )
    log = json.loads(changelog.read_bytes())
    log["output"]["sha256"] = _sha(newer.encode("utf-8"))
    new_log = json.dumps(log).encode("utf-8")
    folder = changelog.parent
    temp = folder / f".{changelog.name}.oomw-{ended_pid}-{TOKEN}.tmp"
    backup = folder / f".{changelog.name}.oomw-{ended_pid}-{TOKEN}.bak"
    temp.write_bytes(new_log)
    backup.hardlink_to(changelog)
    journal = folder / f".oomw-{ended_pid}-{TOKEN}.journal"
    entry = {"final": changelog.name, "temp": temp.name, "backup": backup.name}
    database = {
        "path": f"../../{db.name}",
        "job_id": row["id"],
        "sha256": _sha(newer.encode("utf-8")),
        "updated_at": stamp,
        "before": _sha(str(row["job_config"]).encode("utf-8")),
    }
    record = {"version": 2, "replace": True, "journals": [journal.name], "database": database}
    record["files"] = [{**entry, "sha256": _sha(new_log)}]
    journal.write_text(json.dumps(record), encoding="utf-8")

    def read_only(*_: object, **__: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(atomic, "_rename_in", read_only)
    monkeypatch.chdir(tmp_path)

    for command in (["plan", "--no-probe"], ["history"]):
        status = main([command[0], "--db", str(db), "--job", "my_lora", *command[1:]])

        err = capsys.readouterr().err
        assert status == 2
        assert "read-only" in err and "edited" not in err and "--edited-ok" not in err, err
        assert temp.exists() and journal.exists()
