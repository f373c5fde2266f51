"""The domain never imports the UI: every ``wizard`` module loads without textual or screens."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PROBE = """
import importlib, json, pkgutil, sys
import wizard
names = sorted(
    info.name
    for info in pkgutil.walk_packages(wizard.__path__, "wizard.")
    if info.name != "wizard.__main__"  # importing it runs the command line
)
for name in names:
    importlib.import_module(name)
from wizard.cli import build_parser
build_parser()  # every subcommand registers its arguments
ui = sorted(m for m in sys.modules if m.split(".")[0] in ("textual", "screens"))
print(json.dumps({"modules": names, "ui": ui}))
"""


def test_no_wizard_module_imports_textual_or_screens() -> None:
    completed = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=True,
    )
    report = json.loads(completed.stdout.strip().splitlines()[-1])

    assert report["ui"] == []
    # the probe really imported the package, commands included
    assert {"wizard.cli", "wizard.document", "wizard.yamledit", "wizard.commands.set_cmd"} <= set(
        report["modules"]
    )
