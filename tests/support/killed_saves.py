"""A save killed by SIGKILL at one of its system calls, and the next command after it, run from
the save's folder or from another one: the machinery of ``bench/bench_save_kill.py`` (every
call) and ``tests/domain/storage/test_killed_pairs.py`` (a fixed sample).

Each :class:`Scenario` is one kind of save on real files and a real SQLite jobs database: a
config and its change log (a first save, and one ``--force`` over an earlier pair, in one
folder or in two), a web-UI job saved in place or as a new job, and a ``restore``. The kill is
real: ``strace -e inject=CALL:signal=KILL:when=N`` kills the save at the N-th call of one kind
(``write``, ``pwrite64``, ``fsync``, ``fdatasync``, ``link``, ``rename``, ``unlink``); the
calls that touch the scenario's folder are counted first, from a traced save that runs to its
end. After the kill the folder is copied, and the next command runs on each copy, once from the
save's own folder and once from a folder beside it (``elsewhere/``): ``history`` on the config
for a file pair, ``diagnose`` on the job for the database. Then the pair is judged: ``old``
or ``new``, with nothing of the tool's left over, nothing false said (no "edited after
oom-wizard saved it", no note of a journal left unresolved, no traceback), and, for a job
saved in place, ``restore`` puts the original config back.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.aitk_db import add_job, make_db, stringify, ui_job_config

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "flux_portrait_24gb.yaml"

#: The calls a save makes on its files, and SQLite on the database.
CALLS = ("write", "pwrite64", "fsync", "fdatasync", "link", "rename", "unlink")

#: What the next command must never say after a killed save: every one of these is false
#: there (nobody edited anything, the tool did) or says that recovery failed.
FALSE = (
    "edited after oom-wizard saved it",
    "changed in AI Toolkit's UI",
    "Traceback",
    "internal error",
    "oom-wizard: note: ",  # a journal left unresolved (not a plan's "note: " on a step)
    "interrupted before the database took it",
)

WIZARD = [sys.executable, "-m", "oom_wizard"]
DB_JOB = "my_lora"
COPY = f"{DB_JOB}_oomfix"
#: The web-UI job's config before any save: what ``restore`` must always be able to put back.
ORIGINAL = stringify(ui_job_config(DB_JOB))
MOMENT = ["--moment", "sampling", "--all", "--no-probe"]


@dataclass(frozen=True)
class Scenario:
    """One kind of save: how its folder is made, the save, and what its pair is.

    Attributes:
        name: What it is called in the table.
        folder: The save's working folder, relative to the root.
        save: The save's arguments (after ``oom-wizard``), run in ``folder``.
        prepare: Makes the root: the sources, and any earlier save.
        database: The pair is a job row and its change log (else a config and its log).
        config: The config's path, relative to ``folder`` (a file pair).
        changelog: The change log's path, relative to ``folder`` (a file pair).
        opens: What ``history`` is given next (a file pair): the config, or the change log
            when it is not beside the config.
    """

    name: str
    folder: str
    save: tuple[str, ...]
    prepare: Callable[[Path], None] = field(repr=False)
    database: bool = False
    config: str = ""
    changelog: str = ""
    opens: str = ""


def _run(args: list[str], cwd: Path) -> None:
    subprocess.run(
        [*WIZARD, *args],
        cwd=cwd,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=quiet_env(),
    )


def _sources(root: Path) -> Path:
    src = root / "src"
    for folder in ("src", "dst", "logs", "elsewhere"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    text = FIXTURE.read_text(encoding="utf-8")
    (src / "job.yaml").write_text(text, encoding="utf-8")
    # A second job whose saved config differs from the first one's (not only its change log).
    second = text.replace('trigger_word: "m4rl0w"', 'trigger_word: "m4rl0w_v2"')
    assert second != text
    (src / "job2.yaml").write_text(second, "utf-8")
    return src


def _first_pair(root: Path) -> None:
    _sources(root)


def _earlier_pair(root: Path) -> None:
    _run(["apply", "job.yaml", *MOMENT], _sources(root))


def _earlier_pair_two_folders(root: Path) -> None:
    args = [
        "apply",
        "job.yaml",
        "-o",
        "../dst/out.yaml",
        "--changelog",
        "../logs/out.changelog.json",
    ]
    _run([*args, *MOMENT], _sources(root))


def _database(root: Path) -> None:
    toolkit = root / "toolkit"
    toolkit.mkdir(parents=True)
    (root / "elsewhere").mkdir()
    add_job(make_db(toolkit / "aitk_db.db"), DB_JOB, step=120)


def _database_saved(root: Path) -> None:
    _database(root)
    _run(["apply", "--db", "aitk_db.db", "--job", DB_JOB, "--in-place", *MOMENT], root / "toolkit")


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "file pair",
        "src",
        ("apply", "job.yaml", *MOMENT),
        _first_pair,
        config="job.oomfix.yaml",
        changelog="job.oomfix.changelog.json",
        opens="job.oomfix.yaml",
    ),
    Scenario(
        "--force",
        "src",
        ("apply", "job2.yaml", "-o", "job.oomfix.yaml", "--force", *MOMENT),
        _earlier_pair,
        config="job.oomfix.yaml",
        changelog="job.oomfix.changelog.json",
        opens="job.oomfix.yaml",
    ),
    Scenario(
        "--force, two folders",
        "src",
        (
            *("apply", "job2.yaml", "-o", "../dst/out.yaml"),
            *("--changelog", "../logs/out.changelog.json", "--force", *MOMENT),
        ),
        _earlier_pair_two_folders,
        config="../dst/out.yaml",
        changelog="../logs/out.changelog.json",
        opens="../logs/out.changelog.json",
    ),
    Scenario(
        "database, in place",
        "toolkit",
        ("apply", "--db", "aitk_db.db", "--job", DB_JOB, "--in-place", *MOMENT),
        _database,
        database=True,
    ),
    Scenario(
        "database, as new",
        "toolkit",
        ("apply", "--db", "aitk_db.db", "--job", DB_JOB, "--as-new", *MOMENT),
        _database,
        database=True,
    ),
    Scenario(
        "restore",
        "toolkit",
        ("restore", "--db", "aitk_db.db", "--job", DB_JOB),
        _database_saved,
        database=True,
    ),
)

BY_NAME = {scenario.name: scenario for scenario in SCENARIOS}


def quiet_env() -> dict[str, str]:
    """A save that writes no bytecode: a child that compiled a module would write its ``.pyc``
    (a write and a rename of its own), and the N-th call of one run would not be the N-th of
    the next."""
    return {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}


# ------------------------------------------------------------------ the pair


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Pair:
    """What the save is about, as it is now: the config's bytes (None: absent) and the
    change log's (None: absent); for the database, the rows' configs by name."""

    config: bytes | None
    changelog: bytes | None
    rows: tuple[tuple[str, str], ...] = ()


def rows(db: Path) -> tuple[tuple[str, str], ...]:
    conn = sqlite3.connect(db)
    try:
        found = conn.execute('SELECT "name", "job_config" FROM "Job" ORDER BY 1').fetchall()
    finally:
        conn.close()
    return tuple((str(name), str(text)) for name, text in found)


def pair_of(root: Path, scenario: Scenario) -> Pair:
    if not scenario.database:
        here = root / scenario.folder
        return Pair(_bytes(here / scenario.config), _bytes(here / scenario.changelog))
    db = root / "toolkit" / "aitk_db.db"
    found = rows(db)
    name = COPY if COPY in dict(found) else DB_JOB
    config = dict(found)[name].encode("utf-8")
    return Pair(config, _bytes(_db_log(root, db, name)), found)


def _db_log(root: Path, db: Path, name: str) -> Path:
    conn = sqlite3.connect(db)
    try:
        (job_id,) = conn.execute('SELECT "id" FROM "Job" WHERE "name" = ?', (name,)).fetchone()
    finally:
        conn.close()
    return root / "toolkit" / "oom-wizard" / "aitk_db.db" / f"{job_id}.changelog.json"


def _bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def runs(log: bytes | None) -> int:
    return len(json.loads(log)["runs"]) if log is not None else 0


def judge(now: Pair, old: Pair, new: Pair | None) -> str:
    """``old``, ``new``, or what is wrong with the pair (it must match and be one of them).

    Without ``new`` (the pair an undisturbed save writes), a new pair is any other whose change
    log names the config's bytes (the pair is whole, and not the old one)."""
    if now == old:
        return "old"
    if now.config is None or now.changelog is None:
        return "half a pair: " + ("no config" if now.config is None else "no change log")
    if json.loads(now.changelog)["output"]["sha256"] != sha(now.config):
        return "mismatched pair"
    if new is None:
        return "new"
    if now.config == new.config and runs(now.changelog) == runs(new.changelog):
        return "new"
    return "neither old nor new"


# ------------------------------------------------------------------ the points


def count_points(root: Path, scenario: Scenario) -> list[tuple[str, int]]:
    """Every (call, N) of the save that touches its root: a traced save run to its end."""
    scenario.prepare(root)
    trace = root.parent / f"{root.name}.trace"
    command = ["strace", "-f", "-qq", "-y", "-e", f"trace={','.join(CALLS)}", "-o", str(trace)]
    subprocess.run(
        [*command, *WIZARD, *scenario.save],
        cwd=root / scenario.folder,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=quiet_env(),
    )
    seen = dict.fromkeys(CALLS, 0)
    points: list[tuple[str, int]] = []
    real = os.path.realpath(root)
    for line in trace.read_text().splitlines():
        match = re.match(r"^\d+\s+(\w+)\(", line)
        if match is None or match.group(1) not in seen:
            continue
        name = match.group(1)
        seen[name] += 1
        on_fd = name in ("write", "pwrite64", "fsync", "fdatasync")
        if on_fd and f"<{real}" not in line and f"<{root}" not in line:
            continue  # the terminal, a pipe, the interpreter's own files
        points.append((name, seen[name]))
    trace.unlink()
    return points


def kill_at(root: Path, scenario: Scenario, call: str, when: int) -> tuple[str, Pair]:
    """Make the root, then run the save killed at the ``when``-th ``call``; say whether it
    was killed, and return the pair as it was before the save."""
    scenario.prepare(root)
    old = pair_of(root, scenario)
    inject = f"inject={call}:signal=KILL:when={when}"
    killed = subprocess.run(
        ["strace", "-f", "-o", os.devnull, "-e", inject, *WIZARD, *scenario.save],
        cwd=root / scenario.folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=quiet_env(),
    )
    return ("killed" if killed.returncode != 0 else "ran to its end"), old


def reference(root: Path, scenario: Scenario) -> Pair:
    """The pair after the save, when nothing stops it (its config is the same bytes in every
    run; its change log differs only by the times and ids it records)."""
    scenario.prepare(root)
    _run(list(scenario.save), root / scenario.folder)
    return pair_of(root, scenario)


# ------------------------------------------------------------------ the next command


def in_process(args: list[str], cwd: Path) -> tuple[int, str]:
    """``oom-wizard ARGS`` run in this process from ``cwd``: its exit status and output."""
    from oom_wizard.cli import main

    out = io.StringIO()
    here = Path.cwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            status = main(args)
    finally:
        os.chdir(here)
    return status, out.getvalue()


#: The commands a user may run next (``--next`` of the bench): ``history`` on a file pair and
#: ``diagnose --db`` on a database job (the default), ``plan``, ``scale-up --dry-run``, and
#: ``history`` (``--db`` for a database job).
NEXT = ("default", "plan", "scale-up", "history")


def next_command(
    root: Path, scenario: Scenario, where: str, variant: str = "default"
) -> tuple[int, str]:
    """The command a user runs next, from the save's folder (``here``) or another one."""
    cwd = root / scenario.folder if where == "here" else root / "elsewhere"
    prefix = "" if where == "here" else f"../{scenario.folder}/"
    if not scenario.database:
        config = [prefix + scenario.config]
        if scenario.opens != scenario.config:  # a change log in another folder: named
            config += ["--changelog", prefix + scenario.changelog]
        if variant == "plan":
            return in_process(["plan", prefix + scenario.config, "--moment", "sampling"], cwd)
        if variant == "scale-up":
            return in_process(["scale-up", *config, "--dry-run"], cwd)
        return in_process(["history", prefix + scenario.opens], cwd)
    name = COPY if COPY in dict(rows(root / "toolkit" / "aitk_db.db")) else DB_JOB
    job = ["--db", prefix + "aitk_db.db", "--job", name]
    if variant == "plan":
        return in_process(["plan", *job, "--moment", "sampling", "--no-probe"], cwd)
    if variant == "scale-up":
        return in_process(["scale-up", *job, "--dry-run"], cwd)
    if variant == "history":
        return in_process(["history", *job], cwd)
    return in_process(["diagnose", *job, "--no-probe"], cwd)


def restore_reaches_the_original(root: Path, original: str, where: str) -> str | None:
    """``restore`` until the job holds ``original`` again; None, or what went wrong."""
    cwd = root / ("toolkit" if where == "here" else "elsewhere")
    db = "aitk_db.db" if where == "here" else "../toolkit/aitk_db.db"
    for _ in range(3):
        if dict(rows(root / "toolkit" / "aitk_db.db"))[DB_JOB] == original:
            return None
        status, said = in_process(["restore", "--db", db, "--job", DB_JOB], cwd)
        if status != 0 or any(text in said for text in FALSE):
            return f"restore exit {status}: {said.strip().splitlines()[-1:]}"
    return "restore did not reach the original config"


def leftovers(root: Path) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in root.rglob("*") if ".oomw-" in path.name)


@dataclass(frozen=True)
class Outcome:
    """One kill point followed by the next command from one folder."""

    pair: str
    status: int
    said: str
    left: tuple[str, ...]
    restore: str | None

    @property
    def held(self) -> bool:
        return (
            self.pair in ("old", "new")
            and not any(text in self.said for text in FALSE)
            and not self.left
            and self.restore is None
        )

    def detail(self) -> str:
        line = next((t for t in FALSE if t in self.said), None)
        return (
            f"pair {self.pair}; next command exit {self.status}"
            + (f", said '{line}'" if line else "")
            + (f"; leftovers {list(self.left)}" if self.left else "")
            + (f"; {self.restore}" if self.restore else "")
        )


def after_kill(
    root: Path,
    scenario: Scenario,
    where: str,
    old: Pair,
    new: Pair | None,
    variant: str = "default",
) -> Outcome:
    """Run the next command on the killed folder at ``root`` from ``where``, and judge it."""
    status, said = next_command(root, scenario, where, variant)
    outcome = judge(pair_of(root, scenario), old, new)
    restore = restore_reaches_the_original(root, ORIGINAL, where) if scenario.database else None
    left = leftovers(root)
    if variant == "plan" and scenario.opens != scenario.config:
        # plan takes no --changelog: it settles the config's folder only, and what a save
        # killed before it wrote the journal there left in the change log's folder waits for
        # the next command that opens that change log (history, scale-up --changelog).
        folder = str(Path(scenario.folder, scenario.config).parent)
        left = [
            path for path in left if os.path.normpath(Path(path).parent) == os.path.normpath(folder)
        ]
    return Outcome(outcome, status, said, tuple(left), restore)


def kill_and_check(
    folder: Path,
    scenario: Scenario,
    call: str,
    when: int,
    new: Pair | None = None,
    variants: tuple[str, ...] = ("default",),
) -> tuple[str, dict[str, Outcome]]:
    """Kill the save at (``call``, ``when``), copy the folder, and run the next command on
    each copy from the save's folder and from another one (``new``: :func:`reference`); with
    several ``variants`` (:data:`NEXT`), each on copies of its own, keyed ``VARIANT WHERE``."""
    killed_at = folder / "killed"
    killed, old = kill_at(killed_at, scenario, call, when)
    outcomes: dict[str, Outcome] = {}
    for variant in variants:
        for where in ("here", "elsewhere"):
            copy = folder / f"{variant}-{where}"
            shutil.copytree(killed_at, copy, symlinks=True)
            key = where if variants == ("default",) else f"{variant} {where}"
            outcomes[key] = after_kill(copy, scenario, where, old, new, variant)
    return killed, outcomes
