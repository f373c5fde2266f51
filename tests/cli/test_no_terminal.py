"""No terminal, no app (R5-8): the full-screen commands started with standard input or output
redirected never ended and wrote escape sequences into the output. They refuse in one line,
exit 2, and name what does the same job without a terminal; ``demo`` copies nothing first."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from textual.app import App

from oom_wizard.cli import main

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "flux_portrait_24gb.yaml"


@pytest.mark.parametrize(
    "args",
    [(), ("job.yaml",), ("open", "job.yaml"), ("demo",), ("watch", "job.yaml")],
    ids=lambda args: " ".join(args) or "(none)",
)
def test_a_full_screen_command_without_a_terminal_refuses_in_one_line(
    args: tuple[str, ...],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def started(*_: object, **__: object) -> None:
        raise AssertionError("the app started with no terminal")

    monkeypatch.setattr(App, "run", started)
    shutil.copyfile(FIXTURE, tmp_path / "job.yaml")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))  # demo's default folder, if it copied

    status = main(list(args))  # under pytest neither stdin nor stdout is a terminal

    said = capsys.readouterr()
    assert status == 2, said.err
    assert said.out == "" and len(said.err.splitlines()) == 1, said
    assert "needs a terminal" in said.err and "oom-wizard " in said.err.split(";", 1)[1]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["job.yaml"]
