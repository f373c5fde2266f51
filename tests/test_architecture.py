"""The layers: the domain never imports the UI, and both front ends reach the domain through
the application layer.

Every domain module of ``oom_wizard`` (the repository's ``wizard/``) loads without textual or
``oom_wizard.screens``; ``screens`` (the app) and ``wizard/commands`` (the command line) import
of ``wizard`` only the application layer (``oom_wizard.application`` and its facade
``oom_wizard.service``) and a few light value modules (see the README's Architecture section).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]

PROBE = """
import importlib, json, pkgutil, sys
import oom_wizard
UI = ("oom_wizard.screens", "oom_wizard.presets")
def domain(package):
    for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        if info.name in UI:
            continue
        module = importlib.import_module(info.name)
        yield info.name
        if info.ispkg:
            yield from domain(module)
names = sorted(domain(oom_wizard))
from oom_wizard.cli import build_parser
build_parser()  # every subcommand registers its arguments
ui = sorted(m for m in sys.modules if m.split(".")[0] == "textual" or m.startswith(UI[0]))
print(json.dumps({"modules": names, "ui": ui}), file=sys.stderr)
"""


def child_report(probe: str, *argv: str, cwd: Path = REPO) -> dict[str, Any]:
    """What ``probe`` (run as ``python -c`` in a child process of its own, so that nothing
    this test process imported counts) reports as JSON on the last line of its stderr."""
    completed = subprocess.run(
        [sys.executable, "-c", probe, *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        check=True,
    )
    report = json.loads(completed.stderr.strip().splitlines()[-1])
    assert isinstance(report, dict), completed.stderr
    return report


def test_no_wizard_module_imports_textual_or_screens() -> None:
    report = child_report(PROBE)

    assert report["ui"] == []
    # the probe really imported the package, commands included
    assert {
        "oom_wizard.cli",
        "oom_wizard.document",
        "oom_wizard.yamledit",
        "oom_wizard.commands.set_cmd",
    } <= set(report["modules"])


# --- both front ends talk to the domain through the application layer ---------------------------

#: The application layer: its use-case modules, and the facade that re-exports them all (with
#: the value types they hand out) for the app.
APPLICATION = ("oom_wizard.application", "oom_wizard.service")

#: The light value modules a front end may import besides: the one spelling of values, the
#: request, the errors and the stable identifiers.
VALUE_MODULES = frozenset(
    {
        "oom_wizard.spelling",
        "oom_wizard.request",
        "oom_wizard.errors",
        "oom_wizard.vocabulary",
    }
)

#: What the command line may import besides: its own modules, and the process plumbing of
#: signals (``interrupts``: Ctrl+C and SIGTERM, a front end's concern, no rule of the domain).
COMMANDS_MAY_IMPORT = frozenset({"oom_wizard.interrupts"})


def domain_imports(source: str, allowed: frozenset[str] = frozenset()) -> list[tuple[int, str]]:
    """Every ``wizard`` module a file imports (at the top, in functions, for type checking),
    with its line, that is neither the application layer nor a value module (nor ``allowed``)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "oom_wizard":
                names = [f"oom_wizard.{alias.name}" for alias in node.names]
            else:
                names = [node.module]
            found += [(node.lineno, name) for name in names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    found = [
        (line, name)
        for line, name in found
        if name.startswith("oom_wizard.")
        and not name.startswith(("oom_wizard.screens", "oom_wizard.presets"))
        and not any(name == layer or name.startswith(f"{layer}.") for layer in APPLICATION)
        and name not in VALUE_MODULES | allowed
    ]
    return found


def test_screens_import_only_the_service_and_the_value_types() -> None:
    offending = {
        f"{path.name}:{line}": name
        for path in sorted((REPO / "screens").glob("*.py"))
        for line, name in domain_imports(path.read_text(encoding="utf-8"))
    }
    assert offending == {}


def test_commands_import_only_the_application_layer_and_the_value_types() -> None:
    offending = {
        f"{path.name}:{line}": name
        for path in sorted((REPO / "wizard" / "commands").glob("*.py"))
        for line, name in domain_imports(
            path.read_text(encoding="utf-8"), COMMANDS_MAY_IMPORT | {"oom_wizard.commands"}
        )
        if not name.startswith("oom_wizard.commands.")
    }
    assert offending == {}


@pytest.mark.parametrize(
    "source",
    [
        "from oom_wizard.plan import StepChoice\n",
        "from oom_wizard import plan\n",
        "import oom_wizard.jobdb\n",
        "def f():\n    from oom_wizard.catalog import load_presets\n",
        "if TYPE_CHECKING:\n    from oom_wizard.changes import Prepared\n",
    ],
)
def test_the_import_rule_catches_a_domain_import(source: str) -> None:
    assert domain_imports(source)


def test_the_import_rule_lets_the_application_layer_through() -> None:
    source = (
        "from oom_wizard.service import WizardState\nfrom oom_wizard import spelling\n"
        "from oom_wizard.application.scale_up import save_scale_up\n"
        "from oom_wizard import application\n"
    )
    assert domain_imports(source) == []


def test_no_stage_imports_the_app() -> None:
    """``oom_wizard.screens.app`` imports the stages and nothing imports it back (no cycle)."""
    importers = [
        path.name
        for path in sorted((REPO / "screens").glob("*.py"))
        if path.name != "app.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and node.module == "oom_wizard.screens.app"
    ]
    assert importers == []


PLANNER_PROBE = """
import json, sys
import oom_wizard.plan, oom_wizard.scaleup, oom_wizard.estimate, oom_wizard.fields
print(json.dumps(sorted(m for m in sys.modules if m.startswith("oom_wizard."))))
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
    assert "oom_wizard.change" in loaded
    assert loaded.isdisjoint(
        {"oom_wizard.save", "oom_wizard.changes", "oom_wizard.jobdb", "oom_wizard.service"}
    )


COMMAND_PROBE = """
import json, sys
from oom_wizard.cli import main
try:
    status = main(sys.argv[1:])
except SystemExit as done:  # --version
    status = done.code
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("oom_wizard", "pydantic", "yaml"))
print(json.dumps({"status": status, "loaded": loaded}), file=sys.stderr)
"""


def command_loads(folder: Path, *argv: str) -> set[str]:
    """The modules of oom_wizard, pydantic and yaml that a command run in ``folder`` loads (in a
    child process of its own, as a user runs it)."""
    report = child_report(COMMAND_PROBE, *argv, cwd=folder)
    assert report["status"] == 0, report
    return set(report["loaded"])


#: The save pipeline, the config's models and the change log, and what only the wizard needs.
NOT_FOR_READING = {
    "oom_wizard.save",
    "oom_wizard.changelog",
    "oom_wizard.document",
    "oom_wizard.view",
    "oom_wizard.service",
    "oom_wizard.jobdb",
    "oom_wizard.plan",
}


def test_the_version_loads_no_domain_model(tmp_path: Path) -> None:
    loaded = command_loads(tmp_path, "--version")
    assert not {"pydantic", "yaml", "oom_wizard.catalog", *NOT_FOR_READING} & loaded


def test_diagnosing_a_log_alone_loads_no_config_or_save_module(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_text("torch.OutOfMemoryError: CUDA out of memory.\n", encoding="utf-8")
    loaded = command_loads(tmp_path, "diagnose", "--log", str(log), "--json", "--no-probe")
    assert {"oom_wizard.diagnosis", "oom_wizard.logscan"} <= loaded
    assert not NOT_FOR_READING & loaded
