"""Keys by id: every binding has one, the settings file's keymap rebinds them (what it cannot
use is one line, and the app goes on), the help's key table is the bindings in force, and the
list of ids in screens/README.md is the bindings'."""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
from pathlib import Path
from typing import Any

import pytest
from textual.app import App
from textual.binding import Binding
from textual.dom import DOMNode
from textual.widgets import Markdown

import oom_wizard.screens
from oom_wizard.rules.diagnosis import Answers
from oom_wizard.screens.app import OomWizardApp
from oom_wizard.screens.help import HelpScreen
from oom_wizard.screens.keys import binding_ids, key_problem, key_rows, key_words
from oom_wizard.screens.step import StepScreen
from oom_wizard.storage.settings import read_keymap, save_theme
from tests.support.app_support import (
    REPO,
    demo_app,
    demo_folder,
    press,
    screen_text,
    step_app,
    wait_for_screen,
    wait_for_state,
)

SIZE = (80, 24)


def declared_bindings() -> list[tuple[type[DOMNode], Binding]]:
    """Every class of the app's package with its own ``BINDINGS``, found without the app's
    helper: each module imported, then every subclass of Textual's node walked."""
    package = oom_wizard.screens
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{module.name}")
    found: list[tuple[type[DOMNode], Binding]] = []
    todo, seen = [DOMNode], set()
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            if sub not in seen:
                seen.add(sub)
                todo.append(sub)
    for cls in seen:
        if cls.__module__.startswith(package.__name__ + "."):
            for binding in cls.__dict__.get("BINDINGS", ()):
                assert isinstance(binding, Binding), f"{cls.__name__}: {binding!r} is no Binding"
                found.append((cls, binding))
    return found


def test_every_binding_of_every_screen_and_app_has_its_own_id() -> None:
    found = declared_bindings()
    owners = {cls.__name__ for cls, _ in found}
    assert {"OomWizardApp", "WatchApp", "StepScreen", "ReviewScreen", "LeaveScreen"} <= owners
    assert {"HelpScreen", "LoadScreen", "MomentScreen", "ResultScreen"} <= owners
    assert all(issubclass(cls, App) or "Screen" in cls.__name__ for cls, _ in found)
    missing = [f"{cls.__name__}: {b.key} -> {b.action}" for cls, b in found if b.id is None]
    assert missing == []
    ids = [str(b.id) for _, b in found]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    for binding_id in ids:
        assert binding_id is not None and re.fullmatch(r"[a-z_]+\.[a-z_]+", binding_id)
    assert binding_ids() == set(ids)


def readme_id_table() -> list[str]:
    """The table of keymap ids in screens/README.md, as it must read (sorted by id)."""
    rows = ["| Id | Keys | What it does |", "|---|---|---|"]
    for _, b in sorted(declared_bindings(), key=lambda found: str(found[1].id)):
        keys = ", ".join(key_words(key.strip()) for key in b.key.split(","))
        rows.append(f"| `{b.id}` | {keys} | {b.description} |")
    return rows


def test_the_screens_readme_lists_every_binding_id_with_its_keys() -> None:
    text = (REPO / "screens" / "README.md").read_text(encoding="utf-8")
    block = text.split("<!-- keymap ids:", 1)[1].split("<!-- /keymap ids -->", 1)[0]
    shown = block.splitlines()[1:]  # after the marker's own line
    assert shown == readme_id_table(), "\n" + "\n".join(readme_id_table())


@pytest.mark.parametrize(
    ("keys", "wrong"),
    [
        ("ctrl+k", None),
        ("f2,question_mark", None),
        ("?", None),
        ("ctrl+shift+left", None),
        ("enter , f5", None),
        ("ctlr+k", "'ctlr' in 'ctlr+k' is not a modifier"),
        ("ctrl+", "'ctrl+' has no key after its modifiers"),
        ("Enter", "'Enter' in 'Enter' is not a key"),
        ("k,,j", "'k,,j' names an empty key"),
        ("", "'' names an empty key"),
    ],
)
def test_a_key_string_is_checked_against_textuals_keys(keys: str, wrong: str | None) -> None:
    problem = key_problem(keys)
    assert problem == wrong if wrong is None else problem is not None and problem.startswith(wrong)


def write_settings(home: Path, settings: object) -> Path:
    path = home / "oom-wizard" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=2), encoding="utf-8")
    return path


def test_the_keymap_is_read_with_where_each_entry_is(own_config_home: Path) -> None:
    path = write_settings(own_config_home, {"keymap": {"step.skip": "ctrl+k", "app.quit": 3}})
    keymap = read_keymap()
    assert keymap.path == path
    assert [(e.binding, e.keys, e.line, e.column) for e in keymap.entries] == [
        ("step.skip", "ctrl+k", 3, 5)
    ]
    assert [(p.message, p.line, p.column) for p in keymap.problems] == [
        ("'app.quit': the keys must be a string like 'ctrl+k'", 4, 5)
    ]


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ('{"theme": "nord",\n "keymap": ["ctrl+k"]}', (2, 2)),
        ('{"theme": "nord",\n  "keymap": {"step.skip": "ctrl+k",}}', (2, 36)),
    ],
)
def test_a_keymap_that_is_not_an_object_or_not_json_is_one_problem(
    own_config_home: Path, content: str, problem: tuple[int, int]
) -> None:
    path = write_settings(own_config_home, {})
    path.write_text(content, encoding="utf-8")
    keymap = read_keymap()
    assert keymap.entries == ()
    assert [(p.line, p.column) for p in keymap.problems] == [problem]


def test_a_settings_file_that_is_not_json_is_never_written_over(own_config_home: Path) -> None:
    path = write_settings(own_config_home, {})
    broken = '{"theme": "nord", "keymap": {"step.skip": "ctrl+k",}}'
    path.write_text(broken, encoding="utf-8")
    assert save_theme("gruvbox") is False
    assert path.read_text(encoding="utf-8") == broken


def test_a_new_theme_keeps_the_keymap(own_config_home: Path) -> None:
    path = write_settings(own_config_home, {"keymap": {"step.skip": "ctrl+k"}})
    assert save_theme("nord") is True
    assert json.loads(path.read_text(encoding="utf-8")) == {
        "keymap": {"step.skip": "ctrl+k"},
        "theme": "nord",
    }


def first_step_app(folder: Path) -> OomWizardApp:
    """The app on the demo, opened on the first step of its walk as the moment screen leaves
    it (``step_app``); the tests that read the notifications open on the load screen, which
    shows none but the keymap's."""
    return step_app(folder, Answers())


def notifications(app: App[Any]) -> list[str]:
    return [notification.message for notification in app._notifications]


def help_text(app: App[Any]) -> str:
    assert isinstance(app.screen, HelpScreen)
    return app.screen.query_one(Markdown).source


async def test_a_keymap_rebinds_a_key_and_the_help_shows_it(
    tmp_path: Path, own_config_home: Path
) -> None:
    write_settings(own_config_home, {"keymap": {"step.skip": "ctrl+k", "app.help": "f2"}})
    app = demo_app(demo_folder(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        await press(pilot, "enter", "enter")
        first = screen_text(pilot, "#step-title")
        await press(pilot, "ctrl+n")  # the old key does nothing any more
        assert screen_text(pilot, "#step-title") == first
        await press(pilot, "ctrl+k")
        assert isinstance(app.screen, StepScreen)
        assert screen_text(pilot, "#step-title") != first
        await press(pilot, "f1")
        assert not isinstance(app.screen, HelpScreen)
        await press(pilot, "f2")
        text = help_text(app)
        assert notifications(app) == []
    assert "| **Ctrl+K** | Skip step | `step.skip` |" in text
    assert "| **F2** | Help: keys and the procedure | `app.help` |" in text
    assert "Ctrl+N" not in text and "**F1** | Help" not in text


async def test_a_bad_keymap_entry_is_one_line_and_the_others_apply(
    tmp_path: Path, own_config_home: Path
) -> None:
    path = write_settings(
        own_config_home,
        {"keymap": {"step.skip": "ctrl+k", "review.sav": "x", "step.back": "ctlr+b"}},
    )
    app = demo_app(demo_folder(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        [line] = notifications(app)
        await press(pilot, "enter", "enter")
        first = screen_text(pilot, "#step-title")
        await press(pilot, "ctrl+k")
        assert screen_text(pilot, "#step-title") != first
        await press(pilot, "escape")  # step.back keeps its own key
        assert screen_text(pilot, "#step-title") == first
        assert notifications(app) == [line]  # once
    assert "\n" not in line
    assert line == (
        f"{path}:4:5: keymap: 'review.sav' is not a binding id; "
        "'step.back': 'ctlr' in 'ctlr+b' is not a modifier "
        "(alt, ctrl, hyper, meta, shift, super) (ignored; the other keys work)"
    )


async def test_a_settings_file_that_is_not_json_is_one_line(
    tmp_path: Path, own_config_home: Path
) -> None:
    path = write_settings(own_config_home, {})
    path.write_text('{"keymap": {"step.skip": "ctrl+k",}}', encoding="utf-8")
    app = demo_app(demo_folder(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        await press(pilot, "enter", "enter")
        first = screen_text(pilot, "#step-title")
        await press(pilot, "ctrl+n")  # the default keys work
        assert screen_text(pilot, "#step-title") != first
        [line] = notifications(app)
    assert line.startswith(f"{path}:1:35: keymap: not valid JSON")


class NoQuitApp(OomWizardApp, inherit_bindings=False):
    """The app without its quit binding (nor Textual's own)."""

    CSS_PATH = str(Path(oom_wizard.screens.__file__).parent / "app.tcss")

    BINDINGS = [  # noqa: RUF012
        b for b in OomWizardApp.BINDINGS if isinstance(b, Binding) and b.id != "app.quit"
    ]


async def test_the_help_table_is_the_bindings_in_force(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    tables: list[list[tuple[tuple[str, ...], str | None]]] = []
    default = first_step_app(folder)
    for app in (default, NoQuitApp(default.request, opened=default.opened)):
        async with app.run_test(size=SIZE) as pilot:
            await wait_for_screen(pilot, "StepScreen")
            stage = app.screen
            rows = [(row.keys, row.binding_id) for row in key_rows(stage)]
            await press(pilot, "f1")
            text = help_text(app)
            for row in key_rows(stage):
                keys = " or ".join(f"**{key_words(key)}**" for key in row.keys)
                assert f"| {keys} | {row.what} |" in text
        tables.append(rows)
    full, without_quit = tables
    step = [(tuple(b.key.split(",")), b.id) for b in StepScreen.BINDINGS if isinstance(b, Binding)]
    assert full[: len(step)] == step  # the stage's own keys first, as declared
    assert (("ctrl+q",), "app.quit") in full
    assert [row for row in full if row[1] != "app.quit"] == without_quit


async def test_a_key_taken_from_another_binding_of_the_stage_moves(
    tmp_path: Path, own_config_home: Path
) -> None:
    write_settings(own_config_home, {"keymap": {"step.skip": "ctrl+s"}})
    app = first_step_app(demo_folder(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_screen(pilot, "StepScreen")
        first = screen_text(pilot, "#step-title")
        await press(pilot, "ctrl+s")  # skips: it no longer saves now
        assert isinstance(app.screen, StepScreen)
        assert screen_text(pilot, "#step-title") != first


async def test_a_question_names_its_keys_as_bound(tmp_path: Path, own_config_home: Path) -> None:
    from textual.widgets import Button

    from oom_wizard.screens.ask import LeaveScreen

    folder = demo_folder(tmp_path)
    labels: list[tuple[str, str]] = []
    for keymap in ({}, {"leave.yes": "x", "ask.no": "n"}):
        write_settings(own_config_home, {"keymap": keymap})
        app = first_step_app(folder)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for_screen(pilot, "StepScreen")
            await press(pilot, "enter", "ctrl+q")
            assert isinstance(app.screen, LeaveScreen)
            no, yes = (app.screen.query_one(f"#{i}", Button) for i in ("no", "yes"))
            labels.append((str(no.label), str(yes.label)))
            if keymap:
                await press(pilot, "l")  # the old key asks no more
                assert isinstance(app.screen, LeaveScreen)
                await press(pilot, "x")
                assert app.return_code == 0
    assert labels == [("Stay (Escape)", "Leave (l)"), ("Stay (n)", "Leave (x)")]


async def test_the_live_screen_takes_the_keymap_too(tmp_path: Path, own_config_home: Path) -> None:
    from oom_wizard.application.follow import WatchTarget
    from oom_wizard.screens.watch import WatchApp

    write_settings(own_config_home, {"keymap": {"watch.quit": "x"}})
    target = WatchTarget(tmp_path / "log.txt", tmp_path / "job.yaml", "job")
    app = WatchApp(target, poll_s=60, probe=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await pilot.press("q")
        await pilot.pause()
        assert app.return_value is None
        await pilot.press("x")
        await pilot.pause()
        assert app.return_value is not None and not app.return_value.open_wizard
        assert notifications(app) == []
