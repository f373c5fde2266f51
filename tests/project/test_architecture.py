"""The layers: the domain never imports the UI, and both front ends reach the domain through
the application layer.

Every domain module of ``oom_wizard`` (the repository's ``wizard/``) loads without textual or
``oom_wizard.screens``; ``screens`` (the app) and ``wizard/commands`` (the command line) import
of ``wizard`` only the application layer (``oom_wizard.application`` and its facade
``oom_wizard.service``) and a few light value modules (see wizard/ARCHITECTURE.md).
"""

from __future__ import annotations

import ast
import itertools
import json
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
ARCHITECTURE = REPO / "wizard" / "ARCHITECTURE.md"

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
        "oom_wizard.formats.document",
        "oom_wizard.formats.yamledit",
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
COMMANDS_MAY_IMPORT = frozenset({"oom_wizard.host.interrupts"})


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
        "from oom_wizard.rules.plan import StepChoice\n",
        "from oom_wizard import plan\n",
        "import oom_wizard.storage.jobdb\n",
        "def f():\n    from oom_wizard.rules.catalog import load_presets\n",
        "if TYPE_CHECKING:\n    from oom_wizard.storage.changes import Prepared\n",
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
import oom_wizard.rules.plan, oom_wizard.rules.scaleup, oom_wizard.rules.estimate
import oom_wizard.formats.fields
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
    assert "oom_wizard.formats.change" in loaded
    assert loaded.isdisjoint(
        {
            "oom_wizard.storage.save",
            "oom_wizard.storage.changes",
            "oom_wizard.storage.jobdb",
            "oom_wizard.service",
        }
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
    "oom_wizard.storage.save",
    "oom_wizard.storage.changelog",
    "oom_wizard.formats.document",
    "oom_wizard.formats.view",
    "oom_wizard.service",
    "oom_wizard.storage.jobdb",
    "oom_wizard.rules.plan",
}


def test_the_version_loads_no_domain_model(tmp_path: Path) -> None:
    loaded = command_loads(tmp_path, "--version")
    assert not {"pydantic", "yaml", "oom_wizard.rules.catalog", *NOT_FOR_READING} & loaded


def test_diagnosing_a_log_alone_loads_no_config_or_save_module(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_text("torch.OutOfMemoryError: CUDA out of memory.\n", encoding="utf-8")
    loaded = command_loads(tmp_path, "diagnose", "--log", str(log), "--json", "--no-probe")
    assert {"oom_wizard.rules.diagnosis", "oom_wizard.logs.scan"} <= loaded
    assert not NOT_FOR_READING & loaded


# --- start-up: each path loads what it uses (issues 18 and 21) ------------------------------------

LOADED_PROBE = """
import json, sys
from oom_wizard.cli import main
status = main(sys.argv[1:])
print(json.dumps({"status": status, "loaded": sorted(sys.modules)}), file=sys.stderr)
"""

#: What ``fit`` has no use for: the app, the jobs database, the save pipeline, the live watch,
#: the settings file, the value checks of the step screens and the other commands; and, on a
#: config without a log, the log scanner. (It does make the fix's edits in memory,
#: ``oom_wizard.storage.changes``: a later step counts from what earlier ones leave.)
NOT_FOR_FIT = {
    "textual",
    "oom_wizard.screens",
    "sqlite3",
    "oom_wizard.storage.jobdb",
    "oom_wizard.storage.save",
    "oom_wizard.application.follow",
    "oom_wizard.storage.settings",
    "oom_wizard.rules.values",
    "oom_wizard.host.probe",
    "oom_wizard.logs.scan",
    "oom_wizard.commands.demo",
    "oom_wizard.commands.run",
}


def test_fit_loads_neither_the_app_nor_the_writers(tmp_path: Path) -> None:
    config = tmp_path / "small.yaml"
    config.write_text(
        "job: extension\nconfig:\n  name: small\n  process:\n    - type: sd_trainer\n"
        "      network: {type: lora, linear: 16}\n      train: {batch_size: 1, steps: 10}\n"
        "      model: {arch: flux, name_or_path: x, quantize: true}\n"
        "      datasets: [{folder_path: /data/x, resolution: [512]}]\n",
        encoding="utf-8",
    )
    report = child_report(
        LOADED_PROBE, "fit", str(config), "--gpu", "24", "--no-probe", "--json", cwd=tmp_path
    )
    assert report["status"] == 0
    loaded = set(report["loaded"])
    assert {
        "oom_wizard.rules.memory",
        "oom_wizard.rules.catalog",
        "oom_wizard.rules.plan",
    } <= loaded
    assert not NOT_FOR_FIT & loaded


SERVICE_PROBE = """
import json, sys
import oom_wizard.service as service
before = sorted(m for m in sys.modules if m.startswith(("oom_wizard.", "pydantic", "yaml")))
plan = service.Plan  # a re-exported value type: imported when asked for
print(json.dumps({"before": before, "plan": plan.__module__}), file=sys.stderr)
"""


def test_importing_the_service_loads_no_domain_module() -> None:
    """The app imports the service before its first frame (the theme, the keymap): that must not
    cost the domain; a re-exported name is imported from its module when first used."""
    report = child_report(SERVICE_PROBE)
    assert set(report["before"]) <= {
        "oom_wizard.service",
        "oom_wizard.errors",
        "oom_wizard.paths",
        "oom_wizard.request",
        "oom_wizard.vocabulary",
    }
    assert report["plan"] == "oom_wizard.rules.plan"


def test_every_name_the_service_exports_resolves() -> None:
    import oom_wizard.service as service

    missing = [name for name in service.__all__ if not hasattr(service, name)]
    assert missing == []


def test_the_service_names_each_export_once_for_the_type_checker_and_the_run() -> None:
    """The facade's two lists, the imports the type checker reads and the table that
    ``__getattr__`` imports from, name the same modules and the same names."""
    import oom_wizard.service as service

    tree = ast.parse(Path(service.__file__).read_text(encoding="utf-8"))
    (guarded,) = (
        node
        for node in tree.body
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name)
        if node.test.id == "TYPE_CHECKING"
    )
    typed = {
        (node.module, alias.name)
        for node in guarded.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    run = {(module, name) for module, names in service._SOURCES.items() for name in names}
    assert typed == run
    assert sorted(service.__all__) == sorted(name for _, name in run)


DEMO_COPY_PROBE = """
import json, sys
from pathlib import Path
from oom_wizard.application.demo import copy_demo
copy_demo(Path(sys.argv[1]))
print(json.dumps({"loaded": sorted(sys.modules)}), file=sys.stderr)
"""


def test_copying_the_demo_loads_no_model(tmp_path: Path) -> None:
    """``demo`` copies its jobs before the app starts: the atomic writer needs no pydantic."""
    loaded = set(child_report(DEMO_COPY_PROBE, str(tmp_path / "demo"))["loaded"])
    assert (tmp_path / "demo").is_dir()
    assert "oom_wizard.storage.save" in loaded
    assert not {"pydantic", "oom_wizard.storage.changelog", "oom_wizard.formats.document"} & loaded


FIRST_FRAME_PROBE = """
import asyncio, json, sys
from pathlib import Path
from oom_wizard.application.demo import IMAGE_JOB, copy_demo
from oom_wizard.screens import load
from oom_wizard.screens.app import create_app

seen = {}

def reading(screen, target):  # where the load screen starts its worker, after its first refresh
    seen["loaded"] = sorted(sys.modules)
    seen["screen"] = type(app.screen).__name__
    seen["title"] = str(app.screen.query_one(".title").render())
    app.exit()

load.LoadScreen.load = reading
folder = copy_demo(Path(sys.argv[1]))
app = create_app(folder / IMAGE_JOB.config, log=folder / IMAGE_JOB.log, probe=False)

async def main():
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(100):
            if seen:
                break
            await pilot.pause(0.02)

asyncio.run(main())
print(json.dumps(seen), file=sys.stderr)
"""


def test_the_load_screen_is_up_before_the_domain_loads(tmp_path: Path) -> None:
    """Issue 21: the first screen needs Textual and the service's settings only; the job is read
    (pydantic, the presets and the config's models imported) in the worker that the load screen
    starts once it is on screen."""
    seen = child_report(FIRST_FRAME_PROBE, str(tmp_path / "demo"), cwd=tmp_path)
    assert seen["screen"] == "LoadScreen"
    assert seen["title"] == "Load the job that ran out of memory"
    assert not {
        "pydantic",
        "oom_wizard.rules.catalog",
        "oom_wizard.formats.document",
        "oom_wizard.storage.changelog",
    } & set(seen["loaded"])


# --- the rooms: ARCHITECTURE.md's table of layers is every import of wizard/ and screens/ ------

ROOMS_MARK = "<!-- rooms: "


def architecture_rooms(text: str) -> dict[str, tuple[tuple[str, ...], frozenset[str]]]:
    """The architecture's table of rooms: room → (its folders and files, the rooms it imports)."""
    lines = text[text.index(ROOMS_MARK) :].splitlines()[3:]
    rooms: dict[str, tuple[tuple[str, ...], frozenset[str]]] = {}
    for line in itertools.takewhile(lambda text: text.startswith("|"), lines):
        room, folders, _, imports = (cell.strip() for cell in line.strip("|").split("|"))
        rooms[room.strip("`")] = (
            tuple(re.findall(r"`([^`]+)`", folders)),
            frozenset(re.findall(r"`([^`]+)`", imports)),
        )
    return rooms


def room_of(path: str, rooms: Mapping[str, tuple[tuple[str, ...], frozenset[str]]]) -> str:
    """The room a repository file belongs to: the row naming the file itself, else the row of
    the deepest folder that holds it, else the row of ``wizard/*.py`` for the package's top."""
    by_file = [room for room, (places, _) in rooms.items() if path in places]
    if by_file:
        return by_file[0]
    folders = [
        (len(place), room)
        for room, (places, _) in rooms.items()
        for place in places
        if place.endswith("/") and path.startswith(place)
    ]
    if folders:
        return max(folders)[1]
    if path.startswith("wizard/") and path.count("/") == 1:
        return next(room for room, (places, _) in rooms.items() if "wizard/*.py" in places)
    raise AssertionError(f"{path} is in no room of wizard/ARCHITECTURE.md's table")


def module_file(module: str) -> str:
    """The repository file of an ``oom_wizard`` module (a package: its ``__init__.py``)."""
    parts = module.split(".")[1:]
    if parts[:1] == ["screens"]:
        base = REPO / "screens" / Path(*parts[1:])
    else:
        base = REPO / "wizard" / Path(*parts)
    path = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
    return path.relative_to(REPO).as_posix()


def imported_modules(source: str) -> list[str]:
    """Every ``oom_wizard`` module a file imports: at the top, in functions, for type checking;
    ``from oom_wizard import x`` names module ``x`` where there is one."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "oom_wizard":
                found += [
                    f"oom_wizard.{alias.name}"
                    if (REPO / "wizard" / f"{alias.name}.py").is_file()
                    or (REPO / "wizard" / alias.name).is_dir()
                    else "oom_wizard"
                    for alias in node.names
                ]
            else:
                found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.Call) and _named(node.func) == "import_module" and node.args:
            found += _dynamic_module(node.args[0])
    return [
        name
        for name in found
        if name.split(".")[0] == "oom_wizard" and not name.startswith("oom_wizard.presets")
    ]


def _named(func: ast.expr) -> str | None:
    """The name a call calls: ``f`` of ``f(...)`` or of ``module.f(...)``."""
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else None


def _dynamic_module(argument: ast.expr) -> list[str]:
    """The module ``importlib.import_module`` is handed: a constant name, or the fixed part of
    an f-string (``f"oom_wizard.commands.{name}"`` imports from ``oom_wizard.commands``)."""
    if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
        return [argument.value]
    if isinstance(argument, ast.JoinedStr) and argument.values:
        head = argument.values[0]
        if isinstance(head, ast.Constant) and isinstance(head.value, str):
            return [head.value.rstrip(".")]
    return []


def room_arrows(
    files: Mapping[str, str], rooms: Mapping[str, tuple[tuple[str, ...], frozenset[str]]]
) -> dict[tuple[str, str], list[str]]:
    """Every arrow between two rooms that the sources (path → text) import, with its imports."""
    arrows: dict[tuple[str, str], list[str]] = {}
    for path, source in files.items():
        here = room_of(path, rooms)
        for module in imported_modules(source):
            there = room_of(module_file(module), rooms)
            if there != here:
                arrows.setdefault((here, there), []).append(f"{path} imports {module}")
    return arrows


def package_sources() -> dict[str, str]:
    return {
        path.relative_to(REPO).as_posix(): path.read_text(encoding="utf-8")
        for folder in ("wizard", "screens")
        for path in sorted((REPO / folder).rglob("*.py"))
    }


@pytest.fixture(scope="module")
def rooms() -> dict[str, tuple[tuple[str, ...], frozenset[str]]]:
    return architecture_rooms(ARCHITECTURE.read_text(encoding="utf-8"))


def test_every_import_follows_an_arrow_of_the_architecture(rooms) -> None:
    arrows = room_arrows(package_sources(), rooms)
    undrawn = {
        arrow: imports[:3]
        for arrow, imports in arrows.items()
        if arrow[1] not in rooms[arrow[0]][1]
    }
    assert undrawn == {}


def test_every_arrow_of_the_architecture_is_an_import(rooms) -> None:
    used = set(room_arrows(package_sources(), rooms))
    drawn = {(room, there) for room, (_, imports) in rooms.items() for there in imports}
    assert {arrow for arrow in drawn if arrow[0] != arrow[1]} - used == set()


def test_every_folder_of_wizard_is_a_room(rooms) -> None:
    places = {place for places, _ in rooms.values() for place in places}
    folders = {
        f"{path.relative_to(REPO).as_posix()}/"
        for path in (REPO / "wizard").iterdir()
        if path.is_dir() and (path / "__init__.py").is_file()
    }
    assert folders - places == set()


@pytest.mark.parametrize(
    ("path", "source"),
    [
        ("wizard/formats/document.py", "from oom_wizard.rules.plan import Plan\n"),
        ("wizard/logs/scan.py", "def f():\n    from oom_wizard.storage import save\n"),
        ("wizard/storage/jobdir.py", "from oom_wizard.service import WizardState\n"),
        ("wizard/commands/fit.py", "from oom_wizard.rules.memory import job_memory\n"),
        ("screens/step.py", "import oom_wizard.formats.yamledit\n"),
        ("wizard/errors.py", "if TYPE_CHECKING:\n    from oom_wizard.logs.scan import LogScan\n"),
        ("wizard/formats/view.py", 'importlib.import_module(f"oom_wizard.rules.{name}")\n'),
    ],
)
def test_an_import_against_the_arrows_is_caught(rooms, path: str, source: str) -> None:
    arrows = room_arrows({path: source}, rooms)
    assert arrows
    assert all(there not in rooms[here][1] for here, there in arrows)
