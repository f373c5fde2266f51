"""Bad input: one line on stderr, exit status 2, nothing written, the source untouched.

Each entry of the catalogue in issue 2 is one test. Most run the command line in
process (``oom_wizard.cli.main``); the last test runs a few of them through
``python -m oom_wizard`` in a real process to show that no traceback reaches the user.
The line must read ``oom-wizard: error: FILE:LINE:COL: message`` where the problem has a
position, and ``oom-wizard: error: FILE: message`` where it does not.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import pytest

from oom_wizard.cli import main
from oom_wizard.commands import _common
from tests.support.app_support import UI_JOB, ui_jobs_db

BATCH = "config.process[0].train.batch_size=1"

GOOD = """\
job: extension
config:
  name: test_job
  process:
    - type: sd_trainer
      train:
        batch_size: 4
        gradient_checkpointing: true
      datasets:
        - folder_path: /data
          resolution: [512, 768]
"""


@dataclass(frozen=True)
class Result:
    """What a command did."""

    status: int
    out: str
    err: str


def run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> Result:
    # demo's folder checks are made on a terminal: with none, demo refuses before them
    # (tests/cli/test_no_terminal.py).
    terminal = mock.patch.object(_common, "_a_terminal", return_value=True)
    with terminal if args and args[0] == "demo" else contextlib.nullcontext():
        status = main([str(arg) for arg in args])
    captured = capsys.readouterr()
    return Result(status, captured.out, captured.err)


Snapshot = dict[str, tuple[int, int, bytes | None]]


def snapshot(folder: Path) -> Snapshot:
    """Every path under ``folder``: size, modification time, and the bytes of small files."""
    found: Snapshot = {}
    for path in sorted(folder.rglob("*")):
        info = path.lstat()
        small = path.is_file() and info.st_size < 1024**2
        found[str(path.relative_to(folder))] = (
            info.st_size,
            info.st_mtime_ns,
            path.read_bytes() if small else None,
        )
    return found


class Frozen:
    """The working folder of a test that must write nothing once its setup is done."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.before: Snapshot | None = None

    def freeze(self) -> None:
        """Remember the folder as it is now: nothing in it may change from here on."""
        self.before = snapshot(self.folder)

    def check(self) -> None:
        assert self.before is not None, "the test never froze its folder"
        assert snapshot(self.folder) == self.before


@pytest.fixture
def frozen(tmp_path: Path) -> Iterator[Frozen]:
    """The test's folder; after the test, it must be exactly as it was when frozen."""
    folder = Frozen(tmp_path)
    yield folder
    folder.check()


def refused(result: Result, file: str | Path, where: tuple[int, int] | str | None = None) -> str:
    """Assert the one-line refusal and return its message.

    Args:
        result: The command's outcome.
        file: The file the line must name.
        where: (line, column) expected exactly, ``"any"`` for some position, None for none,
            ``"optional"`` for either.
    """
    assert result.status == 2, result
    assert "Traceback" not in result.err + result.out
    assert result.err.endswith("\n") and result.err.count("\n") == 1, result.err
    prefix = f"oom-wizard: error: {file}:"
    assert result.err.startswith(prefix), result.err
    rest = result.err[len(prefix) :]
    if where == "optional":
        where = "any" if re.match(r"\d+:\d+: ", rest) else None
    if where is None:
        assert rest.startswith(" "), result.err
        return rest.strip()
    position = re.match(r"(\d+):(\d+): ", rest)
    assert position is not None, result.err
    if where != "any":
        assert (int(position.group(1)), int(position.group(2))) == where, result.err
    return rest[position.end() :].strip()


def source(frozen: Frozen, name: str, data: str | bytes = GOOD) -> Path:
    """Write a config into the frozen folder, then freeze it."""
    path = frozen.folder / name
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8", newline="")
    else:
        path.write_bytes(data)
    frozen.freeze()
    return path


# ------------------------------------------------------------------ the file itself


def test_missing_file(capsys, frozen, tmp_path):
    missing = tmp_path / "nope.yaml"
    frozen.freeze()

    message = refused(run(capsys, "set", missing, BATCH), missing)

    assert "no such file" in message


@pytest.mark.parametrize("prefix", [(), ("open",)], ids=["default", "open"])
def test_a_mistyped_path_for_the_wizard_is_one_line_not_a_picker(capsys, frozen, tmp_path, prefix):
    missing = tmp_path / "my_lroa.yaml"
    frozen.freeze()

    message = refused(run(capsys, *prefix, missing), missing)

    assert "no such config or job folder" in message


def test_a_mistyped_log_for_the_wizard_is_one_line(capsys, frozen, tmp_path):
    config = source(frozen, "job.yaml")
    missing = tmp_path / "lgo.txt"

    message = refused(run(capsys, config, "--log", missing), missing)

    assert "no such log" in message


@pytest.mark.parametrize("command", ["set", "diagnose"])
def test_a_folder_with_no_config(capsys, frozen, tmp_path, command):
    folder = tmp_path / "job_folder"
    folder.mkdir()
    (folder / "notes.txt").write_text("nothing here\n")
    frozen.freeze()
    args = ["set", folder, BATCH] if command == "set" else ["diagnose", folder]

    message = refused(run(capsys, *args), folder)

    assert "folder" in message


@pytest.mark.parametrize("content", ["", "\n\n", "# only a comment\n", "---\n"])
def test_empty_file(capsys, frozen, tmp_path, content):
    path = source(frozen, "job.yaml", content)

    assert "empty" in refused(run(capsys, "set", path, BATCH), path)


@pytest.mark.parametrize(
    ("content", "what"), [("- a\n- b\n", "a list"), ("just text\n", "a single value")]
)
def test_not_a_mapping(capsys, frozen, tmp_path, content, what):
    path = source(frozen, "job.yaml", content)

    assert what in refused(run(capsys, "set", path, BATCH), path, (1, 1))


def test_no_config_process(capsys, frozen, tmp_path):
    path = source(frozen, "job.yaml", "job: extension\nconfig:\n  name: x\n")

    assert "process" in refused(run(capsys, "set", path, BATCH), path, "any")


def test_process_not_a_list(capsys, frozen, tmp_path):
    path = source(frozen, "job.yaml", "job: extension\nconfig:\n  process: 3\n")

    assert "process" in refused(run(capsys, "set", path, BATCH), path, (3, 12))


@pytest.mark.parametrize(
    ("content", "where", "words"),
    [
        (GOOD.replace("      train:\n", "  \ttrain:\n"), (6, 3), "tabs"),
        (GOOD.replace("name: test_job", 'name: "test_job'), (3, 9), "quote"),
        (GOOD.replace("        gradient_c", "       gradient_c"), (8, 8), "indentation"),
    ],
    ids=["tab indentation", "unclosed quote", "bad indentation"],
)  # fmt: skip
def test_yaml_syntax_errors_name_line_and_column(capsys, frozen, tmp_path, content, where, words):
    path = source(frozen, "job.yaml", content)

    assert words in refused(run(capsys, "set", path, BATCH), path, where)


def test_duplicate_keys_warn_which_one_counts_and_go_on(capsys, tmp_path):
    text = GOOD.replace("batch_size: 4\n", "batch_size: 4\n        batch_size: 2\n")
    path = tmp_path / "job.yaml"
    path.write_text(text)

    result = run(capsys, "set", path, "config.process[0].train.batch_size=1")

    assert result.status == 0, result
    assert (
        f"warning: {path}:8:9: key 'batch_size' is written twice in the same section "
        "(also on line 7); AI Toolkit silently uses this one, the last"
    ) in result.out
    saved = (tmp_path / "job.oomfix.yaml").read_text()
    assert "        batch_size: 4\n        batch_size: 1\n" in saved
    assert path.read_text() == text


def test_non_utf8_bytes_are_located(capsys, frozen, tmp_path):
    data = GOOD.replace("test_job", "caf\udce9", 1).encode("utf-8", "surrogateescape")
    path = source(frozen, "job.yaml", data)

    assert "UTF-8" in refused(run(capsys, "set", path, BATCH), path, (3, 12))


def test_a_binary_file(capsys, frozen, tmp_path):
    path = source(frozen, "job.yaml", bytes(range(256)) * 4)

    assert "binary" in refused(run(capsys, "set", path, BATCH), path)


def test_a_huge_file_is_refused_without_reading_it(capsys, frozen, tmp_path):
    path = tmp_path / "job.yaml"
    with path.open("wb") as handle:
        handle.truncate(4 * 1024**3)  # 4 GiB, sparse: reading it all would take long
    frozen.freeze()

    started = time.perf_counter()
    message = refused(run(capsys, "set", path, BATCH), path)

    assert time.perf_counter() - started < 1.0
    assert "larger than" in message


def test_an_alias_bomb_is_refused_fast_in_bounded_memory(capsys, frozen, tmp_path):
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    path = source(frozen, "job.yaml", "\n".join(lines) + "\n")
    run(capsys, "set", tmp_path / "warm-up.yaml", BATCH)  # imports happen outside the trace

    tracemalloc.start()
    started = time.perf_counter()
    try:
        result = run(capsys, "set", path, BATCH)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert time.perf_counter() - started < 5.0
    assert peak < 64 * 1024**2
    assert "alias" in refused(result, path, "any")


@pytest.mark.parametrize(
    "tagged",
    [
        '!!python/object/apply:os.system ["touch {marker}"]',
        '!!python/object/apply:builtins.open ["{marker}", "w"]',
        '!!python/object/new:builtins.open ["{marker}", "w"]',
        "!!python/name:os.system",
        "!!python/module:os",
        "!Ref something",
    ],
)
def test_unsafe_tags_are_refused_and_never_run(capsys, frozen, tmp_path, tagged):
    marker = tmp_path / "MARKER"
    text = GOOD.replace("name: test_job", f"name: {tagged.format(marker=marker)}")
    path = source(frozen, "job.yaml", text)

    message = refused(run(capsys, "set", path, BATCH), path, (3, 9))

    assert "tag" in message
    assert not marker.exists()


def test_json_with_a_trailing_comma(capsys, frozen, tmp_path):
    text = '{\n  "job": "extension",\n  "config": {"process": [{"type": "sd_trainer"},]}\n}\n'
    path = source(frozen, "job.json", text)

    assert "trailing comma" in refused(run(capsys, "set", path, BATCH), path, (3, 49))


def test_several_yaml_documents(capsys, frozen, tmp_path):
    path = source(frozen, "job.yaml", GOOD + "---\njob: other\n")

    assert "document" in refused(run(capsys, "set", path, BATCH), path, (12, 1))


# ------------------------------------------------------------------- set arguments


def test_set_an_unknown_path(capsys, frozen, tmp_path):
    path = source(frozen, "job.yaml")

    result = run(capsys, "set", path, "config.process[0].train.batchsize=1")

    assert "batchsize" in refused(result, path)


def test_set_a_value_of_the_wrong_type(capsys, frozen, tmp_path):
    path = source(frozen, "job.yaml")

    result = run(capsys, "set", path, "config.process[0].train.batch_size=abc")

    message = refused(result, path, "optional")
    assert "batch_size" in message


@pytest.mark.parametrize(
    "assignment",
    [
        "config.process[0].train.batchsize=1",
        "config.process[0].train.batch_size=abc",
        "config.process[0].train.batch_size=[1,",
        "config.process[5].train.batch_size=1",
        "config.process[0].train.batch_size",
    ],
)
def test_bad_set_arguments_are_one_line_and_write_nothing(capsys, frozen, tmp_path, assignment):
    path = source(frozen, "job.yaml")

    result = run(capsys, "set", path, assignment)

    assert result.status == 2
    assert result.err.startswith("oom-wizard: error: ")
    assert result.err.count("\n") == 1
    assert "Traceback" not in result.err


# ------------------------------------------------------------------------- output


def test_output_exists(capsys, frozen, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(GOOD)
    output = tmp_path / "taken.yaml"
    output.write_text("someone else's file\n")
    frozen.freeze()

    assert "already exists" in refused(run(capsys, "set", path, BATCH, "-o", output), output)


@pytest.mark.parametrize("where", ["under a file", "missing folder"])
def test_output_folder_is_not_a_folder(capsys, frozen, tmp_path, where):
    path = tmp_path / "job.yaml"
    path.write_text(GOOD)
    (tmp_path / "a_file").write_text("not a folder\n")
    output = tmp_path / ("a_file" if where == "under a file" else "missing") / "out.yaml"
    frozen.freeze()

    message = refused(run(capsys, "set", path, BATCH, "-o", output), output)

    assert ("is a file" if where == "under a file" else "does not exist") in message


def test_output_folder_not_writable(capsys, frozen, tmp_path, monkeypatch):
    path = tmp_path / "job.yaml"
    path.write_text(GOOD)
    locked = tmp_path / "locked"
    locked.mkdir()
    frozen.freeze()
    real_access = os.access

    def access(target: object, mode: int, **kwargs: object) -> bool:
        if Path(str(target)) == locked and mode & os.W_OK:
            return False
        return real_access(target, mode, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "access", access)

    output = locked / "out.yaml"
    assert "not writable" in refused(run(capsys, "set", path, BATCH, "-o", output), output)


@pytest.mark.parametrize("how", ["same path", "through ..", "symlink", "hard link"])
@pytest.mark.parametrize("force", [False, True])
def test_output_is_the_source(capsys, frozen, tmp_path, how, force):
    path = tmp_path / "job.yaml"
    path.write_text(GOOD)
    (tmp_path / "sub").mkdir()
    output = {
        "same path": path,
        "through ..": tmp_path / "sub" / ".." / "job.yaml",
        "symlink": tmp_path / "link.yaml",
        "hard link": tmp_path / "hard.yaml",
    }[how]
    if how == "symlink":
        output.symlink_to(path)
    if how == "hard link":
        os.link(path, output)
    frozen.freeze()
    flags = ["--force"] if force else []

    message = refused(run(capsys, "set", path, BATCH, "-o", output, *flags), output)

    assert "source config itself" in message


def test_changelog_is_the_source(capsys, frozen, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(GOOD)
    frozen.freeze()
    output = tmp_path / "out.yaml"

    result = run(capsys, "set", path, BATCH, "-o", output, "--changelog", path)

    assert "source config itself" in refused(result, path)


def test_force_replaces_an_output_and_permission_bits_follow_the_source(capsys, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(GOOD)
    path.chmod(0o640)
    output = tmp_path / "out.yaml"
    output.write_text("old\n")

    result = run(capsys, "set", path, BATCH, "-o", output, "--force")

    assert result.status == 0, result
    assert "batch_size: 1" in output.read_text()
    assert output.stat().st_mode & 0o777 == 0o640
    assert path.read_text() == GOOD


# -------------------------------------------------------------- in a real process

REAL_PROCESS_CASES = {
    "missing file": None,
    "empty file": "",
    "unsafe tag": '!!python/object/apply:os.system ["echo pwned"]\n',
    "syntax error": "job: extension\nconfig:\n\tname: x\n",
    "binary": "\x00\x01\x02",
}


@pytest.mark.parametrize("case", REAL_PROCESS_CASES)
def test_python_dash_m_wizard_prints_one_line_and_exits_2(frozen, tmp_path, case):
    content = REAL_PROCESS_CASES[case]
    path = tmp_path / "job.yaml"
    if content is not None:
        path.write_text(content)
    frozen.freeze()

    completed = subprocess.run(
        [sys.executable, "-m", "oom_wizard", "set", str(path), BATCH],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert completed.returncode == 2
    assert completed.stdout == ""
    assert completed.stderr.startswith(f"oom-wizard: error: {path}:")
    assert completed.stderr.count("\n") == 1
    assert "pwned" not in completed.stdout + completed.stderr


# ------------------------------------------- issue 12: the abuse table (items 10, 11, 14)

ANCHORED_TRAIN = """\
job: extension
config:
  name: test_job
  process:
    - type: sd_trainer
      train: &train
        batch_size: 4
      datasets:
        - folder_path: /data
    - type: sd_trainer
      train: *train
      datasets:
        - folder_path: /data
"""

ANCHORED_FLOW = """\
job: extension
config:
  name: test_job
  process:
    - type: sd_trainer
      train:
        batch_size: 4
      datasets:
        - folder_path: /a
          resolution: &res [512, 768]
        - folder_path: /b
          resolution: *res
"""


def _fifo(folder: Path, name: str) -> Path:
    path = folder / name
    os.mkfifo(path)
    return path


def _write(folder: Path, name: str, data: str | bytes) -> Path:
    path = folder / name
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return path


def _good(folder: Path) -> Path:
    return _write(folder, "job.yaml", GOOD)


DEEP = 3000
LONG = "9" * 5000
NOT_UTF8 = os.fsdecode(b"job\xff.yaml")
TOO_LONG = "a" * 300 + ".yaml"

#: name → (build the folder and return the arguments, what the one line must contain).
ABUSE: dict[str, tuple[object, str]] = {
    "deep YAML": (
        lambda d: ["plan", _write(d, "job.yaml", "job: x\nconfig: " + "[" * DEEP + "]" * DEEP)],
        "nests deeper than 100 levels",
    ),
    "deep block YAML": (
        lambda d: [
            "plan",
            _write(
                d,
                "job.yaml",
                "job: x\nconfig:\n" + "".join(f"{' ' * (i + 1)}k{i}:\n" for i in range(400)),
            ),
        ],
        "nests deeper than 100 levels",
    ),
    "deep JSON": (
        lambda d: [
            "plan",
            _write(d, "job.json", '{"job": "x", "config": ' + "[" * DEEP + "]" * DEEP + "}"),
        ],
        "nests deeper than 100 levels",
    ),
    "deep set value": (
        lambda d: ["set", _good(d), "config.process[0].train.lr=" + "[" * DEEP + "]" * DEEP],
        "nests deeper than 100 levels",
    ),
    "deep change log": (
        lambda d: [
            "scale-up",
            _good(d),
            "--changelog",
            _write(d, "deep.changelog.json", "[" * DEEP + "]" * DEEP),
        ],
        "nests deeper than 100 levels",
    ),
    "long integer in YAML": (
        lambda d: ["plan", _write(d, "job.yaml", GOOD.replace("batch_size: 4", "steps: " + LONG))],
        "5,000 digits",
    ),
    "long integer in JSON": (
        lambda d: ["plan", _write(d, "job.json", '{"job": "x", "config": {"n": ' + LONG + "}}")],
        "5,000 digits",
    ),
    "long integer in a set value": (
        lambda d: ["set", _good(d), "config.process[0].train.steps=" + LONG],
        "5,000 digits",
    ),
    "non-UTF-8 source name": (
        lambda d: ["set", _write(d, NOT_UTF8, GOOD), BATCH, "-o", d / "out.yaml"],
        "not valid UTF-8",
    ),
    "non-UTF-8 output name": (
        lambda d: ["set", _good(d), BATCH, "-o", d / NOT_UTF8],
        "not valid UTF-8",
    ),
    "source name too long": (lambda d: ["plan", d / TOO_LONG], "too long"),
    "output name too long": (
        lambda d: ["set", _good(d), BATCH, "-o", d / TOO_LONG],
        "longer than the 255 bytes",
    ),
    "change log name too long": (
        lambda d: ["set", _good(d), BATCH, "-o", d / "o.yaml", "--changelog", d / TOO_LONG],
        "longer than the 255 bytes",
    ),
    "demo --dir a file": (lambda d: ["demo", "--dir", _good(d)], "not a folder"),
    "change log is /dev/zero": (
        lambda d: ["scale-up", _good(d), "--changelog", "/dev/zero"],
        "a device",
    ),
    "config is a FIFO": (lambda d: ["plan", _fifo(d, "job.yaml")], "a pipe (FIFO)"),
    "log is a FIFO": (
        lambda d: ["plan", _good(d), "--log", _fifo(d, "log.txt")],
        "a pipe (FIFO)",
    ),
    "change log is a FIFO": (
        lambda d: ["scale-up", _good(d), "--changelog", _fifo(d, "x.changelog.json")],
        "a pipe (FIFO)",
    ),
    "log is /dev/zero": (lambda d: ["plan", _good(d), "--log", "/dev/zero"], "a device"),
    "UTF-32 config": (
        lambda d: ["plan", _write(d, "job.yaml", GOOD.encode("utf-32"))],
        "saved as UTF-32",
    ),
    "// comment in .json": (
        lambda d: ["plan", _write(d, "job.json", '{\n  "job": "extension", // why\n  "c": 1}\n')],
        "a // comment",
    ),
    "/* */ comment in .json": (
        lambda d: ["plan", _write(d, "job.json", '{"job": /* why */ "extension"}\n')],
        "a /* */ comment",
    ),
    "infinite lr": (
        lambda d: ["set", _good(d), "config.process[0].train.lr=1e400"],
        "inf is not a finite number",
    ),
    "NaN lr": (
        lambda d: ["set", _good(d), "config.process[0].train.lr=.nan"],
        "nan is not a finite number",
    ),
    "unset config.name": (
        lambda d: ["set", _good(d), "--unset", "config.name"],
        "config.name cannot be removed",
    ),
    "unset a list item": (
        lambda d: ["set", _good(d), "--unset", "config.process[0].datasets[0]"],
        "is a list item",
    ),
    "YAML saved as .json": (
        lambda d: ["set", _good(d), BATCH, "-o", d / "out.json"],
        "name the output .yaml",
    ),
    "JSONC with comments saved as .json": (
        lambda d: [
            "set",
            _write(
                d,
                "job.jsonc",
                '{\n  // why\n  "job": "extension",\n  "config": {"name": "n", "process": '
                '[{"type": "sd_trainer", "train": {"batch_size": 4}}]}\n}\n',
            ),
            BATCH,
            "-o",
            d / "out.json",
        ],
        "name the output .jsonc",
    ),
    "a child of an aliased mapping": (
        lambda d: [
            "set",
            _write(d, "job.yaml", ANCHORED_TRAIN),
            "config.process[0].train.batch_size=1",
        ],
        "the anchor &train (line 6)",
    ),
    "restore without --db": (lambda d: ["restore", "--job", "a"], "--job NAME needs --db"),
    "restore a missing database": (
        lambda d: ["restore", "--db", d / "aitk_db.db", "--job", "a"],
        "no such file",
    ),
    "restore from a file that is not a database": (
        lambda d: ["restore", "--db", _good(d), "--job", "a"],
        "not a SQLite database",
    ),
    "restore a job the database lacks": (
        lambda d: ["restore", "--db", ui_jobs_db(d), "--job", "nobody"],
        "no job 'nobody'; the jobs are",
    ),
    "restore a job never updated in place": (
        lambda d: ["restore", "--db", ui_jobs_db(d), "--job", UI_JOB],
        "so there is nothing to restore",
    ),
    "an anchored flow list": (
        lambda d: [
            "set",
            _write(d, "job.yaml", ANCHORED_FLOW),
            "config.process[0].datasets[0].resolution=[512]",
        ],
        "the anchor &res (line 10)",
    ),
}


@pytest.mark.parametrize("case", ABUSE)
def test_abuse_is_one_line_exit_2_and_nothing_written(capsys, frozen, tmp_path, case):
    build, expected = ABUSE[case]
    args = build(tmp_path)  # type: ignore[operator]
    frozen.freeze()
    started = time.perf_counter()

    result = run(capsys, *args)

    seconds = time.perf_counter() - started
    print(f"{case}: {seconds:.3f} s")  # measured, never asserted (a shared machine)
    assert result.status == 2, result
    assert "Traceback" not in result.err and "internal error" not in result.err
    assert result.err.count("\n") == 1 and result.err.startswith("oom-wizard: error: ")
    assert expected in result.err, result.err


def test_a_full_standard_output_is_one_line_that_says_what_was_saved(tmp_path):
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    source = tmp_path / "job.yaml"
    source.write_text(GOOD, encoding="utf-8")
    with open("/dev/full", "w") as full:
        completed = subprocess.run(
            [sys.executable, "-m", "oom_wizard", "set", str(source), BATCH, "-o", "out.yaml"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            timeout=60,
            check=False,
        )
    assert completed.returncode == 2
    assert completed.stderr.count("\n") == 1, completed.stderr
    assert "cannot write the output: No space left on device" in completed.stderr
    # The save had finished before the output failed; the line says so, and it is true.
    assert "out.yaml" in completed.stderr and (tmp_path / "out.yaml").is_file()


def test_a_diagnosis_to_a_full_standard_output_writes_nothing_and_says_so(tmp_path):
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    source = tmp_path / "job.yaml"
    source.write_text(GOOD, encoding="utf-8")
    with open("/dev/full", "w") as full:
        completed = subprocess.run(
            [sys.executable, "-m", "oom_wizard", "plan", str(source)],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    assert completed.returncode == 2
    assert completed.stderr == (
        "oom-wizard: error: cannot write the output: No space left on device\n"
    )


def test_demo_in_a_folder_that_cannot_be_written(capsys, tmp_path):
    folder = Path("/proc/1/oom-wizard-demo")
    result = run(capsys, "demo", "--dir", folder)
    assert result.status == 2, result
    assert result.err.startswith(f"oom-wizard: error: {folder}: ")
    assert not folder.exists()
