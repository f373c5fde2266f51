"""The layers: the domain never imports the UI, and the UI reaches the domain through the service.

Every ``wizard`` module loads without textual or screens; ``screens`` imports of ``wizard``
only the service and the value types (see the README's Architecture section).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

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


# --- the app talks to the domain through the service ---------------------------------------------

#: What ``screens`` may import of ``wizard``: the application service (which re-exports the
#: value types the screens render), the one spelling of values, the request, the errors and
#: the stable identifiers.
SCREENS_MAY_IMPORT = frozenset(
    {"wizard.service", "wizard.spelling", "wizard.request", "wizard.errors", "wizard.vocabulary"}
)
#: A development tool that the installed package will not ship: it copies the demo job.
EXEMPT = frozenset({"export_screenshots.py"})


def domain_imports(source: str) -> list[tuple[int, str]]:
    """Every ``wizard`` module a file imports (at the top, in functions, for type checking),
    with its line, that is not one the screens may import."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "wizard":
                names = [f"wizard.{alias.name}" for alias in node.names]
            else:
                names = [node.module]
            found += [(node.lineno, name) for name in names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    found = [
        (line, name)
        for line, name in found
        if name.split(".")[0] == "wizard" and name not in SCREENS_MAY_IMPORT
    ]
    return found


def test_screens_import_only_the_service_and_the_value_types() -> None:
    offending = {
        f"{path.name}:{line}": name
        for path in sorted((REPO / "screens").glob("*.py"))
        if path.name not in EXEMPT
        for line, name in domain_imports(path.read_text(encoding="utf-8"))
    }
    assert offending == {}


@pytest.mark.parametrize(
    "source",
    [
        "from wizard.plan import StepChoice\n",
        "from wizard import plan\n",
        "import wizard.jobdb\n",
        "def f():\n    from wizard.presets import load_presets\n",
        "if TYPE_CHECKING:\n    from wizard.changes import Prepared\n",
    ],
)
def test_the_import_rule_catches_a_domain_import(source: str) -> None:
    assert domain_imports(source)


def test_the_import_rule_lets_the_service_through() -> None:
    source = "from wizard.service import WizardState\nfrom wizard import spelling\n"
    assert domain_imports(source) == []


def test_no_stage_imports_the_app() -> None:
    """``screens.app`` imports the stages and nothing imports it back: no import cycle."""
    importers = [
        path.name
        for path in sorted((REPO / "screens").glob("*.py"))
        if path.name not in {"app.py", *EXEMPT}
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and node.module == "screens.app"
    ]
    assert importers == []


PLANNER_PROBE = """
import json, sys
import wizard.plan, wizard.scaleup, wizard.estimate, wizard.fields
print(json.dumps(sorted(m for m in sys.modules if m.startswith("wizard."))))
"""


def test_the_planner_imports_no_file_writer() -> None:
    """The change value lives beside the document: planning loads neither the save pipeline
    nor the jobs database."""
    completed = subprocess.run(
        [sys.executable, "-c", PLANNER_PROBE],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=True,
    )
    loaded = set(json.loads(completed.stdout.strip().splitlines()[-1]))
    assert "wizard.change" in loaded
    assert loaded.isdisjoint({"wizard.save", "wizard.changes", "wizard.jobdb", "wizard.service"})
