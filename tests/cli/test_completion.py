"""``oom-wizard completion SHELL``: scripts written from the parser, and what bash offers
with them (zsh and fish check the scripts' syntax where they are installed)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from oom_wizard import cli as cli_module
from oom_wizard.commands.completion import outline
from oom_wizard.vocabulary import MOMENTS
from tests.support.plan_support import cli


def script(shell: str) -> str:
    status, out, err = cli("completion", shell)
    assert status == 0, err
    return out


def offered(source: str, *words: str) -> list[str]:
    """What bash completes after ``oom-wizard WORDS`` (the last word is the one under the
    cursor), with the script ``source`` loaded."""
    program = (
        f"{source}\n"
        "COMP_WORDS=(oom-wizard"
        + "".join(f" '{word}'" for word in words)
        + ")\nCOMP_CWORD=$((${#COMP_WORDS[@]} - 1))\n_oom_wizard\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True)
    return done.stdout.split()


def test_the_outline_is_the_parsers_own() -> None:
    parser, commands = cli_module._build()
    line = outline(parser, default="open")
    assert [c.name for c in line.commands] == list(commands) == list(cli_module.COMMANDS)
    plan = next(c for c in line.commands if c.name == "plan")
    moment = next(o for o in plan.options if "--moment" in o.flags)
    assert (moment.takes, moment.choices) == ("choice", MOMENTS)
    assert next(o for o in plan.options if "--log" in o.flags).takes == "file"
    assert next(o for o in plan.options if "--json" in o.flags).takes == "nothing"


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completes_commands_options_choices_and_files(tmp_path: Path) -> None:
    source = script("bash")
    assert offered(source, "pl") == ["plan"]
    assert offered(source, "plan", "--mo") == ["--moment"]
    assert offered(source, "apply", "--moment", "") == list(MOMENTS)
    assert offered(source, "completion", "") == ["bash", "zsh", "fish"]
    assert offered(source, "fit", "--gpu", "") == []  # a number: nothing to offer
    assert "--debug" in offered(source, "--d")  # before a command: the global options too
    (tmp_path / "my_lora.yaml").write_text("job: extension\n")
    assert offered(source, "plan", str(tmp_path / "my_l")) == [str(tmp_path / "my_lora.yaml")]
    assert offered(source, "plan", "--log", str(tmp_path / "my")) == [
        str(tmp_path / "my_lora.yaml")
    ]


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_the_zsh_and_fish_scripts_parse(shell: str) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed")
    checked = subprocess.run([shell, "-n"], input=script(shell), capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


def test_each_script_names_every_command() -> None:
    for shell in ("bash", "zsh", "fish"):
        text = script(shell)
        assert all(name in text for name in cli_module.COMMANDS), shell
        assert "scale-up" in text and "max-retries" in text
