"""A journal is a request, not an order (R5-1): a ``.oomw-*.journal`` that a job folder brings
with it (a zipped job posted for help, a synced folder, a repository of configs) is followed
only for the names its own save could have made. Six hostile shapes are planted together in a
job folder, and every command that opens a job runs on it in-process: nothing outside the
job's own files changes, and a note names each journal that was left alone."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from oom_wizard.cli import main
from oom_wizard.storage.jobdb import CHANGELOG_FOLDER
from tests.support.aitk_db import add_job, make_db

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "flux_portrait_24gb.yaml"
LOG = (
    "step: 12/2000 loss 0.12\n"
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
)

MOMENT = ("--moment", "sampling", "--no-probe")
STEPS = "config.process[0].train.steps=10"
DB = ("--db", "../toolkit/aitk_db.db", "--job", "my_lora")

#: Every command that opens a job, as a user runs it on the job's config or on a job of the
#: web UI's database (the working folder is the folder beside them, which holds the files a
#: hostile journal aims at), and where the journals are planted: the job's folder, or the
#: database's change-log folder.
COMMANDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "diagnose": ("job", ("diagnose", "../job/job.yaml", *MOMENT)),
    "plan": ("job", ("plan", "../job/job.yaml", *MOMENT)),
    "fit": ("job", ("fit", "../job/job.yaml", "--gpu", "24", *MOMENT)),
    "history": ("job", ("history", "../job/job.yaml")),
    "apply --dry-run": ("job", ("apply", "../job/job.yaml", "--dry-run", "--all", *MOMENT)),
    "apply": ("job", ("apply", "../job/job.yaml", "--all", *MOMENT)),
    "set --dry-run": ("job", ("set", "../job/job.yaml", STEPS, "--dry-run")),
    "set": ("job", ("set", "../job/job.yaml", STEPS)),
    "scale-up --dry-run": ("job", ("scale-up", "../job/job.yaml", "--dry-run")),
    "run": ("job", ("run", "../job/job.yaml", "--", "/nonexistent/trainer", "{config}")),
    # The full-screen ones refuse without a terminal (as here), after the recovery.
    "open": ("job", ("../job/job.yaml",)),
    "watch": ("job", ("watch", "../job/job.yaml")),
    "plan --db": ("db", ("plan", *DB, *MOMENT)),
    "fit --db": ("db", ("fit", *DB, "--gpu", "24", *MOMENT)),
    "diagnose --db": ("db", ("diagnose", *DB, *MOMENT)),
    "apply --db --dry-run": ("db", ("apply", *DB, "--in-place", "--dry-run", "--all", *MOMENT)),
    "history --db": ("db", ("history", *DB)),
    "restore --db": ("db", ("restore", *DB)),
    "scale-up --db --dry-run": ("db", ("scale-up", *DB, "--dry-run")),
}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _plant(job: Path, outside: Path, pid: int) -> dict[str, Path]:
    """The six shapes, each its own journal (token) and its own target outside the job."""
    up = os.path.relpath(outside, job)  # ../outside from a job's folder
    held = job / "held.txt"  # a file the journal says its save put in place (the commit point)
    held.write_bytes(b"held\n")
    planted: dict[str, Path] = {}

    def journal(token: str, record: dict[str, object]) -> None:
        path = job / f".oomw-{pid}-{token}.journal"
        path.write_text(json.dumps(record), encoding="utf-8")
        planted[token] = path

    def holding(token: str) -> dict[str, str]:
        return {
            "final": held.name,
            "temp": f".held.txt.oomw-{pid}-{token}.tmp",
            "backup": f".held.txt.oomw-{pid}-{token}.bak",
            "sha256": _sha(held.read_bytes()),
        }

    def target(name: str) -> Path:
        path = outside / name
        path.write_text(f"the user's own {name}\n", encoding="utf-8")
        return path

    # 1. delete relative: a roll-back removes its "temp" and "backup" through ../
    target("rel.txt")
    target("rel.bak")
    journal(
        "1" * 16,
        {
            "version": 2,
            "files": [
                {"final": "x.yaml", "temp": f"{up}/rel.txt", "backup": f"{up}/rel.bak"}
                | {"sha256": "0" * 64}
            ],
            "replace": False,
            "journals": [f".oomw-{pid}-{'1' * 16}.journal"],
        },
    )
    # 2. delete absolute
    absolute = target("abs.txt")
    journal(
        "2" * 16,
        {
            "version": 2,
            "files": [
                {"final": "x.yaml", "temp": str(absolute), "backup": str(absolute), "sha256": "0"}
            ],
            "replace": False,
            "journals": [f".oomw-{pid}-{'2' * 16}.journal"],
        },
    )
    # 3. through `journals`: its "copies" are removed
    target("copy.txt")
    journal("3" * 16, {"version": 2, "files": [], "replace": False, "journals": [f"{up}/copy.txt"]})
    # 4. overwrite: past the commit point, a "temp" of its own is renamed over a file outside
    target("over.txt")
    (job / "evil4.tmp").write_bytes(b"EVIL\n")
    journal(
        "4" * 16,
        {
            "version": 2,
            "files": [
                holding("4" * 16),
                {"final": f"{up}/over.txt", "temp": "evil4.tmp", "backup": "nothing.bak"}
                | {"sha256": _sha(b"EVIL\n")},
            ],
            "replace": True,
            "journals": [f".oomw-{pid}-{'4' * 16}.journal"],
        },
    )
    # 5. move to an absolute path: a file of its own is renamed to a new name outside
    (job / "evil5.tmp").write_bytes(b"EVIL\n")
    journal(
        "5" * 16,
        {
            "version": 2,
            "files": [
                holding("5" * 16),
                {"final": str(outside / "moved.txt"), "temp": "evil5.tmp", "backup": "n.bak"}
                | {"sha256": _sha(b"EVIL\n")},
            ],
            "replace": False,
            "journals": [f".oomw-{pid}-{'5' * 16}.journal"],
        },
    )
    # 6. a version-1 journal: its names start from the working folder (here: outside)
    target("v1.txt")
    journal(
        "6" * 16,
        {
            "files": [{"final": "x.yaml", "temp": "v1.txt", "backup": "v1.bak", "sha256": "0"}],
            "replace": False,
            "journals": [f"{os.path.relpath(job, outside)}/.oomw-{pid}-{'6' * 16}.journal"],
        },
    )
    return planted


def _tree(root: Path) -> dict[str, bytes]:
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("planted")
    job, outside = root / "job", root / "outside"
    job.mkdir()
    outside.mkdir()
    shutil.copyfile(FIXTURE, job / "job.yaml")
    (job / "log.txt").write_text(LOG, encoding="utf-8")
    toolkit = root / "toolkit"
    toolkit.mkdir()
    add_job(make_db(toolkit / "aitk_db.db"), "my_lora", step=120)
    (toolkit / CHANGELOG_FOLDER / "aitk_db.db").mkdir(parents=True)
    return root


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_planted_journal_touches_nothing_outside_the_job(
    command: str,
    template: Path,
    tmp_path: Path,
    ended_pid: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = tmp_path / "root"
    shutil.copytree(template, root)
    where, args = COMMANDS[command]
    job = root / "job" if where == "job" else root / "toolkit" / CHANGELOG_FOLDER / "aitk_db.db"
    outside = root / "outside"
    planted = _plant(job, outside, ended_pid)
    before = _tree(root)
    monkeypatch.chdir(outside)

    status = main(list(args))
    err = capsys.readouterr().err

    assert "Traceback" not in err and "internal error" not in err, err
    after = _tree(root)
    # Nothing that was there changed or went (but the database, which a save may write);
    # only the job's folder may gain its outputs.
    changed = {name for name in before if after.get(name) != before[name]}
    assert changed <= {"toolkit/aitk_db.db"}, (command, status, changed, err)
    assert {name for name in after if name not in before} <= {
        name for name in after if name.startswith(("job/", "toolkit/")) and ".oomw-" not in name
    }, (command, sorted(set(after) - set(before)))
    notes = [line for line in err.splitlines() if line.startswith("oom-wizard: note: ")]
    for path in planted.values():
        assert sum(path.name in note for note in notes) == 1, (command, path.name, err)
