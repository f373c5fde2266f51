"""The layers: the domain never imports the UI, both front ends call the domain through the
application layer, and no module imports itself back.

Every domain module of ``oom_wizard`` (the repository's ``wizard/``) loads without textual or
``oom_wizard.screens``; ``screens`` (the app) and ``wizard/commands`` (the command line) call of
``wizard`` only the application layer (``oom_wizard.application``) and a few light value modules
(see wizard/ARCHITECTURE.md); the app names the domain's value types where they are defined.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import itertools
import json
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from oom_wizard.application.demo import IMAGE_JOB, copy_demo

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

#: The application layer: one module per use case, the one door of both front ends.
APPLICATION = ("oom_wizard.application",)

#: The light value modules a front end may import besides: the one spelling of values, the
#: request, the errors and the stable identifiers.
VALUE_MODULES = frozenset(
    {
        "oom_wizard.spelling",
        "oom_wizard.request",
        "oom_wizard.errors",
        "oom_wizard.vocabulary",
        "oom_wizard.paths",
    }
)

#: What the command line may import besides: its own modules, and the process plumbing of
#: signals (``interrupts``: Ctrl+C and SIGTERM, a front end's concern, no rule of the domain).
COMMANDS_MAY_IMPORT = frozenset({"oom_wizard.host.interrupts"})


def is_value_type(module: str, name: str) -> bool:
    """Whether ``module.name`` is a value type or a constant (what the app may name from the
    domain: the values the application layer hands out), not a function to call."""
    return not inspect.isfunction(getattr(importlib.import_module(module), name))


def domain_imports(
    source: str, allowed: frozenset[str] = frozenset(), *, value_types: bool = False
) -> list[tuple[int, str]]:
    """Every ``wizard`` module a file imports (at the top, in functions, for type checking),
    with its line, that is neither the application layer nor a value module (nor ``allowed``);
    with ``value_types``, a type or constant imported from the domain is let through."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "oom_wizard":
                names = [f"oom_wizard.{alias.name}" for alias in node.names]
            elif value_types and node.module.startswith("oom_wizard."):
                names = [
                    node.module
                    for alias in node.names
                    if not is_value_type(node.module, alias.name)
                ]
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


def test_screens_call_only_the_application_layer() -> None:
    offending = {
        f"{path.name}:{line}": name
        for path in sorted((REPO / "screens").glob("*.py"))
        for line, name in domain_imports(path.read_text(encoding="utf-8"), value_types=True)
    }
    assert offending == {}


def test_commands_call_only_the_application_layer() -> None:
    offending = {
        f"{path.name}:{line}": name
        for path in sorted((REPO / "wizard" / "commands").glob("*.py"))
        for line, name in domain_imports(
            path.read_text(encoding="utf-8"),
            COMMANDS_MAY_IMPORT | {"oom_wizard.commands"},
            value_types=True,
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
        "from oom_wizard.application.settling import WizardState\n"
        "from oom_wizard import spelling\n"
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
            "oom_wizard.storage.jobdb",
        }
    )


COMMAND_PROBE = """
import json, sys
from oom_wizard.cli import main
status = main(sys.argv[1:])
loaded = sorted(m for m in sys.modules if m.startswith(("oom_wizard.", "textual")))
print(json.dumps({"status": status, "loaded": loaded}), file=sys.stderr)
"""


def test_the_command_line_imports_only_the_command_it_runs(tmp_path: Path) -> None:
    """Boundary (a), ``oom_wizard.cli``'s dispatch: a command loads its own module and the
    command line's shared helpers (``commands._*``), no other command and not the app."""
    log = tmp_path / "log.txt"
    log.write_text("torch.OutOfMemoryError: CUDA out of memory.\n", encoding="utf-8")
    report = child_report(COMMAND_PROBE, "diagnose", "--log", str(log), "--json", "--no-probe")
    assert report["status"] == 0
    commands = {m for m in report["loaded"] if m.startswith("oom_wizard.commands.")}
    assert {m for m in commands if not m.startswith("oom_wizard.commands._")} == {
        "oom_wizard.commands.diagnose"
    }
    assert not any(m.startswith(("textual", "oom_wizard.screens")) for m in report["loaded"])


FIRST_FRAME_PROBE = """
import asyncio, json, sys
from pathlib import Path
import oom_wizard.commands.demo, oom_wizard.commands.open_cmd  # the command line, up to the app
from oom_wizard.screens import load
from oom_wizard.screens.app import create_app

seen = {}

def reading(screen, target):  # where the load screen starts its worker, after its first refresh
    seen["loaded"] = sorted(sys.modules)
    seen["screen"] = type(app.screen).__name__
    seen["title"] = str(app.screen.query_one(".title").render())
    app.exit()

load.LoadScreen.load = reading
app = create_app(Path(sys.argv[1]), log=Path(sys.argv[2]), probe=False)

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
    """Boundary (b), the app's: the first screen needs Textual and the user's settings only, and
    so does the command line that starts it (``open``, ``demo``); the job is read (pydantic, the
    presets and the config's models imported) in the worker that the load screen starts once
    it is on screen. The stages that are not the first (help among them) load when they open."""
    folder = copy_demo(tmp_path / "demo")
    config, log = folder / IMAGE_JOB.config, folder / IMAGE_JOB.log
    seen = child_report(FIRST_FRAME_PROBE, str(config), str(log), cwd=tmp_path)
    assert seen["screen"] == "LoadScreen"
    assert seen["title"] == "Load the job that ran out of memory"
    assert not {
        "pydantic",
        "oom_wizard.application.settling",
        "oom_wizard.screens.help",
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


def package_sources(root: Path = REPO) -> dict[str, str]:
    """The package's files under ``root`` (``wizard/``, ``screens/``), path → source."""
    return {
        path.relative_to(root).as_posix(): path.read_text(encoding="utf-8")
        for folder in ("wizard", "screens")
        for path in sorted((root / folder).rglob("*.py"))
    }


def file_module(path: str) -> str:
    """The ``oom_wizard`` module of a repository file (the inverse of :func:`module_file`)."""
    parts = list(Path(path).with_suffix("").parts)
    parts = parts[1:] if parts[0] == "wizard" else parts
    return ".".join(["oom_wizard", *(parts[:-1] if parts[-1] == "__init__" else parts)])


def module_imports(source: str, modules: frozenset[str]) -> set[str]:
    """The modules of ``modules`` that a file imports: at the top, in functions, for the type
    checker; ``from package import module`` is an import of that module."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {
                f"{node.module}.{alias.name}"
                if f"{node.module}.{alias.name}" in modules
                else node.module
                for alias in node.names
            }
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return found & modules


def import_cycles(files: Mapping[str, str]) -> list[list[str]]:
    """Every set of modules that import one another round (the strongly connected components
    of the import graph with more than one module), each sorted; Tarjan's algorithm."""
    modules = frozenset(file_module(path) for path in files)
    graph = {
        file_module(path): sorted(module_imports(source, modules) - {file_module(path)})
        for path, source in files.items()
    }
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for there in graph[module]:
            if there not in order:
                visit(there)
                low[module] = min(low[module], low[there])
            elif there in stack:
                low[module] = min(low[module], order[there])
        if low[module] == order[module]:
            component = [stack.pop()]
            while component[-1] != module:
                component.append(stack.pop())
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return cycles


#: The memory model's wing: its package's ``__init__`` is the one door the rest of the code uses.
MEMORY_WING = "oom_wizard.rules.memory"


def side_doors(files: Mapping[str, str], wing: str = MEMORY_WING) -> list[str]:
    """Every import of one of ``wing``'s modules by a file outside the wing (the package
    itself, its front door, is what the others import)."""
    inside = "wizard/" + "/".join(wing.split(".")[1:]) + "/"
    return [
        f"{path} imports {module}"
        for path, source in files.items()
        if not path.startswith(inside)
        for module in imported_modules(source)
        if module.startswith(wing + ".")
    ]


def test_the_memory_wing_is_entered_by_its_front_door() -> None:
    assert side_doors(package_sources()) == []


def test_a_side_door_into_the_memory_wing_is_caught() -> None:
    files = package_sources()
    files["wizard/rules/plan.py"] += "from oom_wizard.rules.memory.bands import Band\n"
    assert side_doors(files) == ["wizard/rules/plan.py imports oom_wizard.rules.memory.bands"]


def test_no_module_imports_itself_back() -> None:
    """No cycle between modules, counting every import: at the top, in a function, and for
    the type checker only (a deferred import that closes a cycle is a cycle all the same)."""
    assert import_cycles(package_sources()) == []


@pytest.mark.parametrize(
    ("path", "planted"),
    [
        ("wizard/storage/changelog.py", "from oom_wizard.storage.save import save\n"),
        ("wizard/rules/catalog.py", "def f():\n    from oom_wizard.rules.plan import Plan\n"),
        (
            "wizard/application/labels.py",
            "if TYPE_CHECKING:\n    from oom_wizard.application.settling import WizardState\n",
        ),
    ],
)
def test_a_planted_cycle_is_caught(path: str, planted: str) -> None:
    files = package_sources()
    files[path] += planted
    assert any(file_module(path) in cycle for cycle in import_cycles(files))


def test_a_cycle_in_a_package_on_disk_is_caught(tmp_path: Path) -> None:
    """The checker on a package of its own: ``a`` imports ``b`` at its top, ``b`` imports
    ``a`` back inside a function, ``c`` imports ``a`` and is in no cycle."""
    files = {
        "wizard/__init__.py": "",
        "wizard/rooms/__init__.py": "",
        "wizard/rooms/a.py": "from oom_wizard.rooms.b import helper\n",
        "wizard/rooms/b.py": "def helper():\n    from oom_wizard.rooms import a\n",
        "wizard/rooms/c.py": "import oom_wizard.rooms.a\n",
        "screens/__init__.py": "",
    }
    for path, source in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(source, encoding="utf-8")

    assert import_cycles(package_sources(tmp_path)) == [
        ["oom_wizard.rooms.a", "oom_wizard.rooms.b"]
    ]
    (tmp_path / "wizard/rooms/b.py").write_text("def helper():\n    pass\n", encoding="utf-8")
    assert import_cycles(package_sources(tmp_path)) == []


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
        ("wizard/storage/jobdir.py", "from oom_wizard.application.settling import WizardState\n"),
        ("wizard/commands/fit.py", "from oom_wizard.logs.scan import scan_log\n"),
        ("screens/step.py", "import oom_wizard.formats.yamledit\n"),
        ("wizard/errors.py", "if TYPE_CHECKING:\n    from oom_wizard.logs.scan import LogScan\n"),
        ("wizard/formats/view.py", 'importlib.import_module(f"oom_wizard.rules.{name}")\n'),
    ],
)
def test_an_import_against_the_arrows_is_caught(rooms, path: str, source: str) -> None:
    arrows = room_arrows({path: source}, rooms)
    assert arrows
    assert all(there not in rooms[here][1] for here, there in arrows)
