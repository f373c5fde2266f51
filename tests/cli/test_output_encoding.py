"""Output that never crashes on an encoding (R5-5): with an ASCII-only stdout and stderr
(``PYTHONIOENCODING=ascii``, a C locale without UTF-8 coercion), every command wrote its
``→`` and ``×`` and died with an internal error, ``set`` after its pair was saved."""

from __future__ import annotations

import io
import shutil
import sys
from pathlib import Path

import pytest

from oom_wizard.application.fitting import VERDICT_STATUS
from oom_wizard.cli import main

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "flux_portrait_24gb.yaml"


def _ascii(errors: str) -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(), encoding="ascii", errors=errors, write_through=True)


@pytest.mark.parametrize("errors", ["strict", "surrogateescape"])
@pytest.mark.parametrize(
    "args",
    [
        ("plan", "job.yaml", "--moment", "sampling", "--no-probe"),
        ("fit", "job.yaml", "--gpu", "24", "--no-probe"),
        ("set", "job.yaml", "config.process[0].train.batch_size=1"),
    ],
    ids=lambda args: args[0],
)
def test_an_ascii_only_terminal_gets_ascii_not_an_internal_error(
    args: tuple[str, ...], errors: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copyfile(FIXTURE, tmp_path / "job.yaml")
    monkeypatch.chdir(tmp_path)
    out, err = _ascii(errors), _ascii(errors)
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)

    status = main(list(args))

    said = out.buffer.getvalue() + err.buffer.getvalue()  # type: ignore[attr-defined]
    # fit exits by its verdict (0 fits, 3 tight, 4 won't fit); 1 would be the internal error
    expected = set(VERDICT_STATUS.values()) if args[0] == "fit" else {0}
    assert status in expected, said.decode("ascii", "replace")
    said.decode("ascii")  # every byte ASCII
    if args[0] == "set":
        assert b"->" in said and (tmp_path / "job.oomfix.yaml").is_file()


def test_an_internal_error_after_a_complete_save_says_the_save_is_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import oom_wizard.commands.set_cmd as set_cmd

    def broken(*_: object) -> None:
        raise RuntimeError("a printing bug")

    shutil.copyfile(FIXTURE, tmp_path / "job.yaml")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(set_cmd, "print_saved", broken)

    status = main(["set", "job.yaml", "config.process[0].train.batch_size=1"])

    err = capsys.readouterr().err
    assert status == 1 and "the save itself was complete" in err and "job.oomfix.yaml" in err
