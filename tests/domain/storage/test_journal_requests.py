"""What recovery will do for a journal, and what it will not (R5-1): it acts only on the names
that the journal's own save could have made. The command-line view of the same rule, six hostile
shapes under every command, is ``tests/cli/test_planted_journals.py``."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from oom_wizard.storage import atomic
from oom_wizard.storage.leftovers import unresolved_notes

TOKEN = "0123456789abcdef"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _journal(folder: Path, pid: int, files: list[dict[str, str]], *, replace: bool) -> Path:
    path = folder / f".oomw-{pid}-{TOKEN}.journal"
    record = {"version": 2, "files": files, "replace": replace, "journals": [path.name]}
    path.write_text(json.dumps(record), encoding="utf-8")
    return path


def _entry(final: str, pid: int, data: bytes) -> dict[str, str]:
    return {
        "final": final,
        "temp": f".{final}.oomw-{pid}-{TOKEN}.tmp",
        "backup": f".{final}.oomw-{pid}-{TOKEN}.bak",
        "sha256": _sha(data),
    }


def test_a_committed_save_of_its_own_names_rolls_forward(tmp_path: Path, ended_pid: int) -> None:
    (tmp_path / "a.changelog.json").write_bytes(b"log")  # the first rename happened
    temp = tmp_path / f".a.yaml.oomw-{ended_pid}-{TOKEN}.tmp"
    temp.write_bytes(b"new")
    journal = _journal(
        tmp_path,
        ended_pid,
        [_entry("a.changelog.json", ended_pid, b"log"), _entry("a.yaml", ended_pid, b"new")],
        replace=False,
    )

    atomic.recover(tmp_path)

    assert (tmp_path / "a.yaml").read_bytes() == b"new"
    assert not temp.exists() and not journal.exists()


def test_a_replace_without_the_backup_every_save_makes_first_is_refused(
    tmp_path: Path, ended_pid: int
) -> None:
    """A save that replaces a file links its backup before the first rename: a journal that
    would replace a file in its own folder with no backup of it is not one of ours."""
    (tmp_path / "held.txt").write_bytes(b"held")
    victim = tmp_path / "notes.txt"
    victim.write_bytes(b"the user's notes")
    (tmp_path / f".notes.txt.oomw-{ended_pid}-{TOKEN}.tmp").write_bytes(b"EVIL")
    journal = _journal(
        tmp_path,
        ended_pid,
        [_entry("held.txt", ended_pid, b"held"), _entry("notes.txt", ended_pid, b"EVIL")],
        replace=True,
    )

    assert atomic.recover(tmp_path) == ()

    assert victim.read_bytes() == b"the user's notes"
    assert journal.exists()
    assert any(journal.name in note and "no backup" in note for note in unresolved_notes())


def test_a_temp_that_is_a_link_is_never_renamed_in(tmp_path: Path, ended_pid: int) -> None:
    (tmp_path / "held.txt").write_bytes(b"held")
    secret = tmp_path.parent / f"{tmp_path.name}-secret"
    secret.write_bytes(b"secret")
    os.symlink(secret, tmp_path / f".cfg.yaml.oomw-{ended_pid}-{TOKEN}.tmp")
    _journal(
        tmp_path,
        ended_pid,
        [_entry("held.txt", ended_pid, b"held"), _entry("cfg.yaml", ended_pid, b"x")],
        replace=False,
    )

    atomic.recover(tmp_path)

    assert not (tmp_path / "cfg.yaml").exists() and secret.read_bytes() == b"secret"


def test_a_copy_that_is_another_journal_is_refused(tmp_path: Path, ended_pid: int) -> None:
    """A folder is the save's only when it holds a copy of the same journal: a file of the
    journal's name with other files in it does not make it one."""
    job, other = tmp_path / "job", tmp_path / "other"
    job.mkdir()
    other.mkdir()
    (job / "held.txt").write_bytes(b"held")
    victim = other / "cfg.yaml"
    victim.write_bytes(b"mine")
    (other / f".cfg.yaml.oomw-{ended_pid}-{TOKEN}.tmp").write_bytes(b"EVIL")
    (other / f".oomw-{ended_pid}-{TOKEN}.journal").write_text(
        json.dumps({"version": 2, "files": [], "replace": True, "journals": []}), "utf-8"
    )
    journal = job / f".oomw-{ended_pid}-{TOKEN}.journal"
    files = [_entry("held.txt", ended_pid, b"held"), _entry("cfg.yaml", ended_pid, b"EVIL")]
    files[1] = {
        key: f"../other/{value}" if key != "sha256" else value for key, value in files[1].items()
    }
    record = {
        "version": 2,
        "files": files,
        "replace": True,
        "journals": [journal.name, f"../other/{journal.name}"],
    }
    journal.write_text(json.dumps(record), encoding="utf-8")

    assert atomic.recover(job) == ()

    assert victim.read_bytes() == b"mine" and journal.exists()


def test_a_save_killed_before_its_second_journal_rolls_back_without_a_note(
    tmp_path: Path, ended_pid: int
) -> None:
    """A pair in two folders killed after its first journal copy: the other folder has only a
    temp, swept as a stray by whichever folder is settled first (here: the config's). The
    change log's folder then rolls back without a note: no rename happened."""
    logs, dst = tmp_path / "logs", tmp_path / "dst"
    logs.mkdir()
    dst.mkdir()
    (dst / "out.yaml").write_bytes(b"old config")
    (logs / "out.changelog.json").write_bytes(b"old log")
    log_temp = logs / f".out.changelog.json.oomw-{ended_pid}-{TOKEN}.tmp"
    log_temp.write_bytes(b"new log")
    config_temp = dst / f".out.yaml.oomw-{ended_pid}-{TOKEN}.tmp"
    config_temp.write_bytes(b"new config")
    journal = logs / f".oomw-{ended_pid}-{TOKEN}.journal"
    config_entry = {
        key: f"../dst/{value}" if key != "sha256" else value
        for key, value in _entry("out.yaml", ended_pid, b"new config").items()
    }
    record = {
        "version": 2,
        "files": [_entry("out.changelog.json", ended_pid, b"new log"), config_entry],
        "replace": True,
        "journals": [journal.name, f"../dst/{journal.name}"],
    }
    journal.write_text(json.dumps(record), encoding="utf-8")
    before = len(unresolved_notes())

    atomic.recover(dst)  # the stray temp goes
    atomic.recover(logs)

    assert not config_temp.exists() and not log_temp.exists() and not journal.exists()
    assert (dst / "out.yaml").read_bytes() == b"old config"
    assert (logs / "out.changelog.json").read_bytes() == b"old log"
    assert unresolved_notes()[before:] == ()
