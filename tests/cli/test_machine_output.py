"""Every ``--json`` object names its shape and version in ``"schema"``, for every command that
has ``--json`` (found in the parser, so that a new one cannot be left out)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from oom_wizard import cli as cli_module
from oom_wizard.application.demo import IMAGE_JOB, copy_demo
from oom_wizard.application.fitting import VERDICT_STATUS
from tests.support.plan_support import cli

#: Each command with ``--json``: what it is run with besides the demo's config and log.
EXTRA = {"diagnose": (), "plan": (), "fit": ("--gpu", "24")}


def commands_with_json() -> set[str]:
    _, commands = cli_module._build()
    return {
        name
        for name, parser in commands.items()
        if any("--json" in action.option_strings for action in parser._actions)
    }


def test_every_json_output_names_its_command_and_a_version(tmp_path: Path) -> None:
    assert commands_with_json() == set(EXTRA)  # a new --json command is named here
    folder = copy_demo(tmp_path)
    config, log = folder / IMAGE_JOB.config, folder / IMAGE_JOB.log
    for command, extra in EXTRA.items():
        status, out, err = cli(command, config, "--log", log, "--no-probe", "--json", *extra)
        found = json.loads(out)
        # fit exits by its verdict (VERDICT_STATUS); the others 0
        assert status == (VERDICT_STATUS[found["verdict"]] if command == "fit" else 0), err
        schema = found["schema"]
        assert re.fullmatch(rf"oom-wizard\.{command}/[1-9][0-9]*", schema), schema


def test_a_log_alone_is_diagnosed_in_the_same_shape(tmp_path: Path) -> None:
    folder = copy_demo(tmp_path)
    status, out, err = cli("diagnose", "--log", folder / IMAGE_JOB.log, "--no-probe", "--json")
    assert status == 0, err
    assert json.loads(out)["schema"] == "oom-wizard.diagnose/1"
