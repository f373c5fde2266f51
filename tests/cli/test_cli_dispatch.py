"""The command line's own parsing: subcommand dispatch with ``open`` as the default, and
``--debug`` parsed as an option wherever it stands."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from oom_wizard import cli as cli_module
from oom_wizard.commands import open_cmd
from oom_wizard.storage.leftovers import NAME as LEFTOVER
from tests.support.plan_support import cli


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[argparse.Namespace]:
    """What ``open`` was called with (the app is not started)."""
    calls: list[argparse.Namespace] = []

    def fake_run(args: argparse.Namespace) -> int:
        calls.append(args)
        return 0

    monkeypatch.setattr(open_cmd, "run", fake_run)
    return calls


@pytest.mark.parametrize(
    ("argv", "target", "db"),
    [
        ([], None, None),
        (["job.yaml"], Path("job.yaml"), None),
        (["open", "job.yaml"], Path("job.yaml"), None),
        (["--debug", "job.yaml", "--log", "log.txt"], Path("job.yaml"), None),
        (["--db", "aitk_db.db"], None, Path("aitk_db.db")),
    ],
)
def test_anything_but_a_command_opens_the_wizard(
    opened: list[argparse.Namespace], argv: list[str], target: Path | None, db: Path | None
) -> None:
    assert cli_module.main(argv) == 0
    [args] = opened
    assert (args.target, args.db) == (target, db)


def test_a_command_name_dispatches_to_that_command(
    opened: list[argparse.Namespace], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        cli_module.main(["plan", "--help"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith("usage: oom-wizard plan ")
    assert opened == []


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_module.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in cli_module.COMMANDS)


def test_debug_is_an_option_wherever_it_stands(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    line = f"oom-wizard: error: {missing}: no such file or folder"
    runs: list[list[str | Path]] = [["--debug", "plan", missing], ["plan", missing, "--debug"]]
    for argv in runs:
        status, _, err = cli(*argv)
        assert status == 2
        assert "Traceback (most recent call last)" in err
        assert err.rstrip().splitlines()[-1] == line
    status, _, err = cli("plan", missing)
    assert (status, err) == (2, line + "\n")


def test_a_command_clears_what_a_killed_save_left_in_the_working_folder(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    ended_pid: int,
) -> None:
    """Start-up recovery (the save pipeline is loaded only when such a name is there)."""
    stray = tmp_path / f".job.oomfix.yaml.oomw-{ended_pid}-0123456789abcdef.tmp"
    stray.write_text("half a config", encoding="utf-8")
    mine = tmp_path / "job.oomw-notes.txt"  # not the tool's name: never touched
    mine.write_text("notes", encoding="utf-8")
    log = tmp_path / "log.txt"
    log.write_text("torch.OutOfMemoryError: CUDA out of memory.\n", encoding="utf-8")
    assert LEFTOVER.match(stray.name)  # a name of the save pipeline's own
    monkeypatch.chdir(tmp_path)
    assert cli_module.main(["diagnose", "--log", str(log), "--json", "--no-probe"]) == 0
    capsys.readouterr()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.oomw-notes.txt", "log.txt"]


def test_a_ctrl_c_that_a_library_wrapped_is_an_interrupt_not_an_internal_error() -> None:
    """pydantic-core builds a schema in Rust: a Ctrl-C landing there comes out as a
    ``SchemaError`` naming KeyboardInterrupt, with no Python chain. It, and any exception
    chained to a KeyboardInterrupt, is an interrupt (exit 130), not an internal error."""

    class SchemaError(Exception):
        pass

    wrapped = SchemaError("Error building `literal` serializer:\n  KeyboardInterrupt: ")
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as interrupt:
            raise RuntimeError("while importing") from interrupt
    except RuntimeError as chained:
        assert cli_module._an_interrupt_inside(chained)
    assert cli_module._an_interrupt_inside(wrapped)
    assert not cli_module._an_interrupt_inside(SchemaError("Error building `literal`"))
    assert not cli_module._an_interrupt_inside(ValueError("KeyboardInterrupt"))
