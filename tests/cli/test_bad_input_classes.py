"""Every class of bad input, through every command that reads it: one line, exit 2, nothing
written (issue 32, Build 5).

The classes: what a config file may hold that no reader accepts (a control character, bytes
that are not UTF-8, a YAML error, a number outside the limits, a value that is not a finite
number), what a hand-edited change log may hold (a number outside the limits, not-a-number,
a control character that breaks its JSON), and what the card's memory may be (``--gpu`` out of
range, an ``nvidia-smi`` answer that is not UTF-8 or names a card no one makes). Each cell of
command × class runs the command line in process (``oom_wizard.cli.main``) in a folder
frozen after its setup, and asserts the exit status, the one line on stderr, and that nothing
in the folder changed.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from oom_wizard.cli import main
from tests.cli.test_bad_input import snapshot

CONFIG = """\
job: extension
config:
  name: bad_input_job  # a comment
  process:
    - type: sd_trainer
      train:
        batch_size: 4
        steps: 100
        lr: 1e-4
      model: {arch: flux, name_or_path: black-forest-labs/FLUX.1-dev}
      datasets:
        - folder_path: /data/x
          resolution: [512, 768]
"""
TRAINER = ("--", sys.executable, "-c", "print('never started')")

#: command → its arguments for the config at the path given.
COMMANDS: dict[str, Callable[[Path], list[str]]] = {
    "diagnose": lambda c: ["diagnose", str(c), "--no-probe"],
    "plan": lambda c: ["plan", str(c), "--moment", "early_steps", "--no-probe"],
    "apply": lambda c: ["apply", str(c), "--moment", "early_steps", "--no-probe"],
    "set": lambda c: ["set", str(c), "config.process[0].train.steps=50"],
    "scale-up": lambda c: ["scale-up", str(c), "--yes"],
    "fit": lambda c: ["fit", str(c), "--gpu", "24"],
    "run": lambda c: ["run", str(c), "--auto", *TRAINER],
    "watch": lambda c: ["watch", str(c)],
    "history": lambda c: ["history", str(c)],
}
#: The commands that read a config's content (``history`` reads its change log; of the
#: config, only its checksum).
READS_CONFIG = ("diagnose", "plan", "apply", "set", "scale-up", "fit", "run", "watch")
#: The commands that read the change log beside a config oom-wizard saved.
READS_CHANGELOG = ("diagnose", "plan", "apply", "set", "scale-up", "fit", "run", "history")


def _config_with(old: str, new: str | bytes) -> Callable[[Path], Path]:
    def build(folder: Path) -> Path:
        path = folder / "job.yaml"
        piece = new if isinstance(new, bytes) else new.encode()
        path.write_bytes(CONFIG.encode().replace(old.encode(), piece, 1))
        return path

    return build


def _saved_with(tamper: Callable[[dict[str, object]], str]) -> Callable[[Path], Path]:
    """A config oom-wizard saved (``set``), its change log then edited by hand."""

    def build(folder: Path) -> Path:
        source = folder / "job.yaml"
        source.write_text(CONFIG, encoding="utf-8")
        saved = folder / "fixed.yaml"
        argv = ["set", str(source), "config.process[0].train.batch_size=2", "-o", str(saved)]
        assert main(argv) == 0
        log = folder / "fixed.changelog.json"
        log.write_text(tamper(json.loads(log.read_text(encoding="utf-8"))), encoding="utf-8")
        return saved

    return build


def _entry_after(value: object) -> Callable[[dict[str, object]], str]:
    def tamper(log: dict[str, object]) -> str:
        changes = log["changes"]
        assert isinstance(changes, list)
        changes[0]["after"] = value
        return json.dumps(log, indent=2)

    return tamper


def _control_character(log: dict[str, object]) -> str:
    return json.dumps(log, indent=2).replace('"runs"', '"ru\x1bns"', 1)


#: class → (build the input in a folder and return the config's path, the commands it
#: reaches, words the one line must hold).
CLASSES: dict[str, tuple[Callable[[Path], Path], tuple[str, ...], str]] = {
    "ESC in a comment": (
        _config_with("# a comment", "# a \x1b[31mred\x1b[0m comment"),
        READS_CONFIG,
        "control character U+001B",
    ),
    "0x0F in a value": (_config_with("bad_input_job", "bad\x0fjob"), READS_CONFIG, "U+000F"),
    "DEL in a comment": (_config_with("# a comment", "# a \x7f comment"), READS_CONFIG, "U+007F"),
    "bytes not UTF-8": (
        _config_with("# a comment", b"# caf\xe9"),
        READS_CONFIG,
        "is not UTF-8 text",
    ),
    "YAML syntax error": (
        _config_with("batch_size: 4", "batch_size: [4"),
        READS_CONFIG,
        "YAML syntax error",
    ),
    "batch 10^50": (
        _config_with("batch_size: 4", "batch_size: 1" + "0" * 50),
        READS_CONFIG,
        "above the largest sensible value, 256",
    ),
    "resolution 1e9": (
        _config_with("[512, 768]", "[512, 1000000000]"),
        READS_CONFIG,
        "above the largest sensible value, 4096",
    ),
    "lr NaN": (_config_with("lr: 1e-4", "lr: .nan"), READS_CONFIG, "not a finite number"),
    "change log: batch 10^50": (
        _saved_with(_entry_after(10**50)),
        READS_CHANGELOG,
        "above the largest sensible value, 256",
    ),
    "change log: NaN": (
        _saved_with(_entry_after(float("nan"))),
        READS_CHANGELOG,
        "not a finite number",
    ),
    "change log: control character": (
        _saved_with(_control_character),
        READS_CHANGELOG,
        "not JSON",
    ),
}

CELLS = [
    pytest.param(command, case, id=f"{command}-{case}")
    for case, (_build, commands, _words) in CLASSES.items()
    for command in commands
]


@pytest.mark.parametrize(("command", "case"), CELLS)
def test_every_class_of_bad_input_is_one_line_exit_2_nothing_written(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str, case: str
) -> None:
    build, _commands, words = CLASSES[case]
    config = build(tmp_path)
    capsys.readouterr()
    before = snapshot(tmp_path)

    status = main(COMMANDS[command](config))

    out, err = capsys.readouterr()
    assert status == 2, (out, err)
    assert err.count("\n") == 1 and err.startswith("oom-wizard: error: "), err
    assert "Traceback" not in out + err and "internal error" not in err
    assert words in err, err
    assert snapshot(tmp_path) == before


def _nvidia_smi(folder: Path, answer: bytes) -> Path:
    """An ``nvidia-smi`` that answers ``answer`` to every query."""
    folder.mkdir()
    script = folder / "nvidia-smi"
    octal = "".join(f"\\{byte:03o}" for byte in answer)
    script.write_text(f"#!/bin/sh\nprintf '{octal}'\n", encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return folder


CARDS: dict[str, tuple[list[str], bytes | None, str]] = {
    "--gpu 1e308": (["--gpu", "1e308"], None, "above the largest sensible value, 1024"),
    "--gpu 1e-9": (["--gpu", "1e-9"], None, "below the smallest sensible value, 1"),
    "--gpu nan": (["--gpu", "nan"], None, "is not a card size"),
    "probe not UTF-8": ([], b"0, NVIDIA \xff\xfe, 24564, 0, 24564\n", "is not UTF-8 text"),
    "probe card 1e308 MiB": ([], b"0, NVIDIA X, 1e308, 0, 24564\n", "above the largest"),
}


@pytest.mark.skipif(not sys.platform.startswith(("linux", "darwin")), reason="a sh script")
@pytest.mark.parametrize("case", CARDS)
def test_a_card_outside_the_limits_is_one_line_exit_2_for_fit(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    case: str,
) -> None:
    """``fit`` needs the card: ``--gpu`` outside the limits is refused; an ``nvidia-smi``
    answer that is not its answer is ignored, and with no ``--gpu`` that says why."""
    args, answer, words = CARDS[case]
    config = tmp_path / "job.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    path = str(_nvidia_smi(tmp_path / "bin", answer)) if answer is not None else ""
    monkeypatch.setenv("PATH", os.pathsep.join(filter(None, [path, os.environ["PATH"]])))
    monkeypatch.setattr(sys.stdin, "isatty", lambda: False)
    before = snapshot(tmp_path)

    status = main(["fit", str(config), *args])

    out, err = capsys.readouterr()
    assert status == 2, (out, err)
    assert err.count("\n") == 1 and err.startswith("oom-wizard: error: "), err
    assert words in err, err
    assert snapshot(tmp_path) == before


def test_a_probe_that_is_not_nvidia_smis_answer_is_ignored_with_a_note(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other commands do not need the card: they go on without the probe, and say so."""
    config = tmp_path / "job.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    bin_folder = _nvidia_smi(tmp_path / "bin", b"0, NVIDIA \xff, 24564, 0, 24564\n")
    monkeypatch.setenv("PATH", f"{bin_folder}{os.pathsep}{os.environ['PATH']}")

    status = main(["plan", str(config), "--moment", "early_steps"])

    out, err = capsys.readouterr()
    assert status == 0, err
    assert "nvidia-smi's answer is not UTF-8 text (byte 0xff); the GPU probe is ignored" in out
