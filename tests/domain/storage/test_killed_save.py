"""A save killed by SIGKILL at each of its system calls: the next command to open either file
of the pair sees the old pair or the new one, in every folder the save touched.

The kill is real: ``strace -e inject=SYSCALL:signal=KILL:when=N`` runs ``oom-wizard apply
--force`` over an earlier pair and kills it at the N-th call of each write step (``write``
and ``fsync`` of the temp files and journals, ``link`` of the backups, ``rename`` of the
pair, ``unlink`` of the leftovers). The calls are counted first, from a traced save that
runs to its end. The command that opens the pair next runs in another folder (so the
start-up recovery of the working folder never helps), and opens only one of the two files:
the config (``scale-up``) or the change log (``history``).

The suite kills the save at the last call of each step before the pair is renamed, at
both renames and at the first unlink after them: the points where the pair changes from old
to new. They are named by their place (the last ``write``, the first ``unlink``), so that
collecting the tests traces nothing; the calls are counted once per run, by the first test
(of any xdist worker) that needs them, and the folder before the save is made once per layout
and copied.
``python -m tests.domain.storage.test_killed_save`` kills it at every injection point and
prints the table.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from oom_wizard.cli import main
from tests.support.once import once_per_run

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "configs" / "flux_portrait_24gb.yaml"
STEPS = ("write", "fsync", "link", "rename", "unlink")

pytestmark = pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")


@dataclass(frozen=True)
class Layout:
    """Where the pair goes: its config and change log (in one folder, or in two)."""

    name: str
    output: str
    changelog: str | None

    def save_args(self, source: str, *, force: bool) -> list[str]:
        args = [sys.executable, "-m", "oom_wizard", "apply", source, "--no-probe"]
        args += ["-o", self.output]
        if self.changelog is not None:
            args += ["--changelog", self.changelog]
        return [*args, "--force"] if force else args

    def log_path(self) -> str:
        return self.changelog or self.output.replace(".yaml", ".changelog.json")


ONE_FOLDER = Layout("one folder", "../dst/out.yaml", None)
TWO_FOLDERS = Layout("two folders", "../dst/out.yaml", "../logs/out.changelog.json")


def prepare(root: Path, layout: Layout) -> tuple[Path, dict[str, bytes]]:
    """A source, a heavier second source, and the first pair saved: the folder before (a
    copy of the one :func:`before` saved, times kept: the pair names its files by relative
    paths, so the copy is the same folder elsewhere)."""
    shutil.copytree(before(layout), root, dirs_exist_ok=True)
    src = root / "src"
    return src, pair(src, layout)


_BEFORE: dict[str, Path] = {}
_TEMPORARY: list[tempfile.TemporaryDirectory[str]] = []


def before(layout: Layout) -> Path:
    """The folder before the second save, saved for real once per run and layout (see
    :func:`made_once_per_run`)."""
    if layout.name not in _BEFORE:
        _TEMPORARY.append(tempfile.TemporaryDirectory())
        root = _BEFORE[layout.name] = Path(_TEMPORARY[-1].name)
        src = root / "src"
        for folder in ("src", "dst", "logs"):
            (root / folder).mkdir()
        text = FIXTURE.read_text(encoding="utf-8")
        (src / "job.yaml").write_text(text, encoding="utf-8")
        (src / "job2.yaml").write_text(text.replace("m4rl0w", "m4rl0w_v2"), "utf-8")
        subprocess.run(
            layout.save_args("job.yaml", force=False),
            cwd=src,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    return _BEFORE[layout.name]


def pair(src: Path, layout: Layout) -> dict[str, bytes]:
    return {
        "config": (src / layout.output).read_bytes(),
        "changelog": (src / layout.log_path()).read_bytes(),
    }


def second_save(layout: Layout) -> list[str]:
    return [*layout.save_args("job2.yaml", force=True), "--moment", "sampling", "--all"]


def traced_env() -> dict[str, str]:
    """The environment of a traced or killed save: it writes no bytecode. A child that
    compiled a module would write its ``.pyc`` (a write and a rename of its own), and the
    N-th call counted in one run would not be the N-th in the next, depending on which
    modules an earlier child had compiled (in a fresh clone, on the order of the tests)."""
    return {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}


def count_calls(root: Path, layout: Layout) -> dict[str, list[int]]:
    """For each step's system call, the numbers N of its calls that the save makes on files
    (``write`` to the terminal is not a write step)."""
    src, _ = prepare(root, layout)
    trace = root / "trace.txt"
    calls = ",".join(STEPS)
    command = ["strace", "-f", "-qq", "-e", f"trace={calls}", "-o", str(trace)]
    subprocess.run(
        [*command, *second_save(layout)],
        cwd=src,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=traced_env(),
    )
    seen = dict.fromkeys(STEPS, 0)
    points: dict[str, list[int]] = {step: [] for step in STEPS}
    for line in trace.read_text().splitlines():
        match = re.match(r"^\d+\s+(\w+)\((\d+)?", line)
        if match is None or match.group(1) not in seen:
            continue
        name = match.group(1)
        seen[name] += 1
        if name == "write" and int(match.group(2) or 0) <= 2:
            continue  # the terminal
        if name == "unlink" and ".oomw-" not in line:
            continue
        points[name].append(seen[name])
    return points


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def judge(src: Path, layout: Layout, old: dict[str, bytes], new: dict[str, bytes]) -> str:
    """``old``, ``new``, or what is wrong with the pair (it must match and be one or the other)."""
    try:
        now = pair(src, layout)
    except FileNotFoundError as exc:
        return f"missing {exc.filename}"
    log = json.loads(now["changelog"])
    if log["output"]["sha256"] != sha(now["config"]):
        return "mismatched pair"
    if now == old:
        return "old"
    if now["config"] == new["config"] and len(log["runs"]) == len(
        json.loads(new["changelog"])["runs"]
    ):
        return "new"
    return "neither old nor new"


_REFERENCES: dict[str, dict[str, bytes]] = {}


def reference(layout: Layout) -> dict[str, bytes]:
    """The new pair, as the second save writes it when nothing stops it (made once)."""
    if layout.name not in _REFERENCES:
        with tempfile.TemporaryDirectory() as folder:
            src, _ = prepare(Path(folder), layout)
            subprocess.run(
                second_save(layout),
                cwd=src,
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            _REFERENCES[layout.name] = pair(src, layout)
    return _REFERENCES[layout.name]


def leftovers(root: Path) -> list[str]:
    return sorted(
        f"{folder}/{name}"
        for folder in ("src", "dst", "logs")
        for name in os.listdir(root / folder)
        if ".oomw-" in name
    )


def kill_at(root: Path, layout: Layout, call: str, when: int, opener: str) -> tuple[str, str]:
    """Kill the second save at the ``when``-th ``call``, open one file of the pair with
    ``opener`` in process (from the source folder), and judge the pair."""
    src, old = prepare(root, layout)
    inject = f"inject={call}:signal=KILL:when={when}"
    killed = subprocess.run(
        ["strace", "-f", "-o", os.devnull, "-e", inject, *second_save(layout)],
        cwd=src,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=traced_env(),
    )
    new = reference(layout)
    cwd = Path.cwd()
    os.chdir(src)
    try:
        if opener == "config":
            status = main(
                ["scale-up", layout.output, "--changelog", layout.log_path(), "--dry-run"]
            )
        else:
            status = main(["history", layout.log_path()])
    finally:
        os.chdir(cwd)
    outcome = judge(src, layout, old, new)
    left = leftovers(root)
    killed_word = "killed" if killed.returncode != 0 else "ran to its end"
    return outcome, f"{killed_word}; next command exit {status}; leftovers {left or 'none'}"


_POINTS: list[tuple[Layout, str, int, str]] = []


def injection_points() -> list[tuple[Layout, str, int, str]]:
    """Every (layout, call, N, which file is opened next), counted once per run."""
    if not _POINTS:
        _POINTS.extend(counted_points())
    return _POINTS


def counted_points() -> list[tuple[Layout, str, int, str]]:
    """Every (layout, call, N, which file is opened next), from two traced saves."""
    found: list[tuple[Layout, str, int, str]] = []
    for layout in (ONE_FOLDER, TWO_FOLDERS):
        with tempfile.TemporaryDirectory() as folder:
            points = count_calls(Path(folder), layout)
        for call, numbers in points.items():
            if layout is TWO_FOLDERS and call == "fsync":
                continue  # the same steps as in one folder, with the folders fsynced twice
            for index, when in enumerate(numbers):
                opener = ("config", "changelog")[index % 2] if layout is ONE_FOLDER else "changelog"
                found.append((layout, call, when, opener))
    return found


LAYOUTS = {layout.name: layout for layout in (ONE_FOLDER, TWO_FOLDERS)}


def _made(folder: Path) -> None:
    """What every test of this module starts from, into ``folder``: the counted calls, and
    per layout the folder before the second save and the new pair it writes. The new pairs
    come first: their saves are not traced, and compile what the traced and killed ones (which
    write no bytecode, see :func:`traced_env`) then only read."""
    references = {layout.name: reference(layout) for layout in LAYOUTS.values()}
    found = [[point[0].name, *point[1:]] for point in injection_points()]
    (folder / "points.json").write_text(json.dumps(found), encoding="utf-8")
    for layout in LAYOUTS.values():
        mine = folder / layout.name.replace(" ", "-")
        shutil.copytree(before(layout), mine / "before")
        for key, data in references[layout.name].items():
            (mine / f"new-{key}").write_bytes(data)


@pytest.fixture(autouse=True, scope="module")
def made_once_per_run(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The calls counted, the folders before and the new pairs, made by the first xdist
    worker that runs one of these tests and read by the others (each of them traced two
    saves and ran six, up to 5 s of CPU, before its first test)."""
    folder = once_per_run(tmp_path_factory, "killed-save", _made)
    if not _POINTS:
        for name, call, when, opener in json.loads((folder / "points.json").read_text()):
            _POINTS.append((LAYOUTS[name], call, when, opener))
    for layout in LAYOUTS.values():
        mine = folder / layout.name.replace(" ", "-")
        _BEFORE.setdefault(layout.name, mine / "before")
        if layout.name not in _REFERENCES:
            keys = ("config", "changelog")
            _REFERENCES[layout.name] = {key: (mine / f"new-{key}").read_bytes() for key in keys}


def boundaries(points: list[tuple[Layout, str, int, str]]) -> list[tuple[Layout, str, int, str]]:
    """The points where the pair turns from old to new, per layout: the last call of each
    step before the renames, every rename, and the first unlink after them."""
    chosen: list[tuple[Layout, str, int, str]] = []
    for layout in (ONE_FOLDER, TWO_FOLDERS):
        mine = [point for point in points if point[0] is layout]
        for call in STEPS:
            calls = [point for point in mine if point[1] == call]
            if call == "rename":
                chosen += calls
            elif calls:
                chosen.append(calls[0] if call == "unlink" else calls[-1])
    return chosen


Place = str | int
"""Which call of a step: ``"first"``, ``"last"``, or the N-th (from 1)."""

#: The suite's points, by place (what :func:`boundaries` picks from the counted calls, which
#: :func:`test_the_suites_points_are_each_steps_boundary_and_open_both_files` holds them to),
#: with the file that the next command opens. In one folder, fsync is a step of its own; in
#: two, its calls are the same steps with the folders fsynced twice.
SUITE_PLACES: list[tuple[Layout, str, Place, str]] = [
    (ONE_FOLDER, "write", "last", "config"),
    (ONE_FOLDER, "fsync", "last", "config"),
    (ONE_FOLDER, "link", "last", "changelog"),
    (ONE_FOLDER, "rename", 1, "config"),
    (ONE_FOLDER, "rename", 2, "changelog"),
    (ONE_FOLDER, "unlink", "first", "config"),
    (TWO_FOLDERS, "write", "last", "changelog"),
    (TWO_FOLDERS, "link", "last", "changelog"),
    (TWO_FOLDERS, "rename", 1, "changelog"),
    (TWO_FOLDERS, "rename", 2, "changelog"),
    (TWO_FOLDERS, "unlink", "first", "changelog"),
]


def when_at(layout: Layout, call: str, place: Place) -> int:
    """The number N of the call at ``place`` among the save's ``call``s on files."""
    numbers = [p[2] for p in injection_points() if p[0] is layout and p[1] == call]
    assert numbers, f"the save makes no {call} in {layout.name}"
    if place == "first":
        return numbers[0]
    if place == "last":
        return numbers[-1]
    assert isinstance(place, int) and 0 < place <= len(numbers), (call, place, numbers)
    return numbers[place - 1]


@pytest.mark.parametrize(
    ("layout", "call", "place", "opener"),
    SUITE_PLACES,
    ids=[f"{p[0].name.replace(' ', '-')}-{p[1]}-{p[2]}-open-{p[3]}" for p in SUITE_PLACES],
)
def test_a_killed_save_leaves_the_pair_old_or_new_for_the_next_reader(
    tmp_path: Path,
    layout: Layout,
    call: str,
    place: Place,
    opener: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    outcome, detail = kill_at(tmp_path, layout, call, when_at(layout, call, place), opener)
    capsys.readouterr()
    assert outcome in ("old", "new"), detail
    assert "leftovers none" in detail, detail


def test_every_write_step_is_an_injection_point() -> None:
    calls = {(p[0].name, p[1]) for p in injection_points()}
    for layout in (ONE_FOLDER, TWO_FOLDERS):
        for call in ("write", "rename", "link", "unlink"):
            assert (layout.name, call) in calls
    assert (ONE_FOLDER.name, "fsync") in calls


def test_the_suites_points_are_each_steps_boundary_and_open_both_files() -> None:
    points = injection_points()
    chosen = {(p[0].name, p[1], when_at(p[0], p[1], p[2])) for p in SUITE_PLACES}
    assert chosen == {(p[0].name, p[1], p[2]) for p in boundaries(points)}
    for layout in (ONE_FOLDER, TWO_FOLDERS):
        mine = [p for p in points if p[0] is layout]
        renames = [p[2] for p in mine if p[1] == "rename"]
        assert {(layout.name, "rename", when) for when in renames} <= chosen
        assert (layout.name, "unlink", min(p[2] for p in mine if p[1] == "unlink")) in chosen
        assert (layout.name, "write", max(p[2] for p in mine if p[1] == "write")) in chosen
    assert {p[3] for p in SUITE_PLACES} == {"config", "changelog"}


if __name__ == "__main__":  # the table for a report
    import contextlib
    import io

    print("| layout | killed at | next opens | pair | detail |")
    print("|---|---|---|---|---|")
    for layout, call, when, opener in injection_points():
        with tempfile.TemporaryDirectory() as folder, contextlib.redirect_stdout(io.StringIO()):
            outcome, detail = kill_at(Path(folder), layout, call, when, opener)
        print(f"| {layout.name} | {call} #{when} | {opener} | {outcome} | {detail} |")
