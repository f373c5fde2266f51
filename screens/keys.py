"""The app's keys: every binding has an id, the user's keymap rebinds them by id, and the help
screen's table is made from the bindings in force.

The ids are ``stage.action`` (``step.skip``, ``review.save``, ``app.quit``): :func:`bindings`
finds them in the ``BINDINGS`` of every class of this package, so a new screen's keys are
in the keymap and the help without a list to keep up. The keymap is read by the application layer
from the settings file (:mod:`oom_wizard.storage.settings`); :func:`apply_user_keymap` applies the
entries whose keys are keys, and after the first frame reports in one notification those
that cannot be used (an id no binding has, keys that are not keys).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from textual.app import App
from textual.binding import Binding
from textual.dom import DOMNode
from textual.keys import REPLACED_KEYS, Keys, key_to_character
from textual.screen import Screen

from oom_wizard.application.preferences import keymap_problems_line, saved_keymap
from oom_wizard.spelling import mid_sentence

if TYPE_CHECKING:
    from oom_wizard.storage.settings import UserKeymap

#: The modifiers a key string may name before its key (``ctrl+shift+k``).
MODIFIERS: Final = frozenset({"ctrl", "shift", "alt", "meta", "super", "hyper"})

#: The names of keys that are not characters (``enter``, ``f5``, ``pageup``), as Textual has them.
_NAMED_KEYS: Final = frozenset(
    key.value for key in Keys if "+" not in key.value and not key.value.startswith("<")
)


@dataclass(frozen=True)
class Declared:
    """One binding as a class of the app declares it (its key string before any keymap)."""

    owner: type[DOMNode]
    binding: Binding


def bindings() -> list[Declared]:
    """Every binding the classes of this package declare (each class's own ``BINDINGS``)."""
    package = __name__.rpartition(".")[0]
    for module in pkgutil.iter_modules(importlib.import_module(package).__path__):
        importlib.import_module(f"{package}.{module.name}")
    found: list[Declared] = []
    for owner in _subclasses(DOMNode):
        if not owner.__module__.startswith(f"{package}."):
            continue
        for declared in owner.__dict__.get("BINDINGS", ()):
            binding = declared if isinstance(declared, Binding) else Binding(*declared)
            found.append(Declared(owner, binding))
    return found


def _subclasses(cls: type[DOMNode]) -> Iterator[type[DOMNode]]:
    """Every subclass of ``cls``, once each."""
    seen: set[type[DOMNode]] = set()
    todo = list(cls.__subclasses__())
    while todo:
        sub = todo.pop()
        if sub not in seen:
            seen.add(sub)
            todo.extend(sub.__subclasses__())
            yield sub


def binding_ids() -> frozenset[str]:
    """The id of every binding of the app (what a keymap may name)."""
    return frozenset(d.binding.id for d in bindings() if d.binding.id is not None)


def key_problem(keys: str) -> str | None:
    """What is wrong with the key string ``keys`` ("ctrl+k", "f2,question_mark"), if anything."""
    for key in (part.strip() for part in keys.split(",")):
        if not key:
            return f"{keys!r} names an empty key"
        *modifiers, name = key.split("+")
        if not name:
            return f"{keys!r} has no key after its modifiers"
        for modifier in modifiers:
            if modifier not in MODIFIERS:
                return (
                    f"{modifier!r} in {keys!r} is not a modifier ({', '.join(sorted(MODIFIERS))})"
                )
        if not _is_key(name):
            return f"{name!r} in {keys!r} is not a key"
    return None


def _is_key(name: str) -> bool:
    """Whether Textual knows ``name`` as a key: a character, or the name of one or of a key."""
    if len(name) == 1:
        return name.isprintable()
    return name in _NAMED_KEYS or key_to_character(REPLACED_KEYS.get(name, name)) is not None


def apply_user_keymap(app: App[Any], keymap: UserKeymap | None = None) -> None:
    """Rebind ``app``'s keys as the user's keymap says (``keymap``: as read already, else
    read now); report what of it cannot be used.

    An entry whose keys are not keys is left out; one whose id no binding has changes
    nothing. Once the first frame is drawn (finding every binding imports every screen),
    all such entries are named in one notification: the line the command line would print,
    with the settings file's name. The other entries apply.
    """

    if keymap is None:
        keymap = saved_keymap()
    if keymap.empty:
        return
    usable = {e.binding: e.keys for e in keymap.entries if key_problem(e.keys) is None}
    if usable:
        app.set_keymap(usable)
    app.call_after_refresh(_report_keymap, app, keymap)


def _report_keymap(app: App[Any], keymap: UserKeymap) -> None:
    """Notify once of what in ``keymap`` cannot be used (nothing when all of it can)."""

    known = binding_ids()
    problems = list(keymap.problems)
    for entry in keymap.entries:
        if entry.binding not in known:
            problems.append(entry.problem(f"{entry.binding!r} is not a binding id"))
        elif (wrong := key_problem(entry.keys)) is not None:
            problems.append(entry.problem(f"{entry.binding!r}: {wrong}"))
    line = keymap_problems_line(keymap, problems)
    if line is not None:
        app.notify(line, title="Keymap", severity="warning", timeout=20, markup=False)


# --- the keys as the help shows them ---------------------------------------------------------


def key_words(key: str) -> str:
    """A key as the help names it: ``ctrl+n`` is "Ctrl+N", ``question_mark`` is "?"."""
    *modifiers, name = key.split("+")
    character = name if len(name) == 1 else key_to_character(REPLACED_KEYS.get(name, name))
    if character is not None and character.isprintable() and not character.isspace():
        shown = character.upper() if modifiers else character
    else:
        shown = name[:1].upper() + name[1:]
    return "+".join([*(modifier.capitalize() for modifier in modifiers), shown])


@dataclass(frozen=True)
class KeyRow:
    """One row of the help's key table: the keys of one binding, what it does, its id."""

    keys: tuple[str, ...]
    """The keys, as Textual names them (``ctrl+n``), in the order they are bound."""
    what: str
    binding_id: str | None
    """The id a keymap rebinds it by (None: one of Textual's own, not rebindable)."""


def key_rows(screen: Screen[Any]) -> list[KeyRow]:
    """The keys in force on ``screen``, its own and the app's, after the user's keymap.

    Made from the screen's active bindings (those of the focused widget left out, and those
    its ``check_action`` turns off), so the table says what the keys do now; one row per
    binding id (a binding of Textual's own: per action), keys in the order they are bound.
    """
    keys: dict[tuple[int, str], list[str]] = {}
    rows: dict[tuple[int, str], Binding] = {}
    for key, active in screen.active_bindings.items():
        node, binding = active.node, active.binding
        if node is not screen and node is not screen.app:
            continue
        if binding.system or not binding.description:
            continue
        group = _group(node, binding)
        rows.setdefault(group, binding)
        keys.setdefault(group, []).append(key)
    declared = [*_declared_order(screen), *_declared_order(screen.app)]
    order = {group: index for index, group in reversed(list(enumerate(declared)))}
    shown = sorted(rows, key=lambda group: (group[0] != id(screen), order.get(group, len(order))))
    return [KeyRow(tuple(keys[group]), _what(rows[group]), rows[group].id) for group in shown]


def _group(node: DOMNode, binding: Binding) -> tuple[int, str]:
    """The row of the help that ``binding`` of ``node`` is shown in (one per id or action)."""
    return id(node), binding.id or f"action:{binding.action}"


def _declared_order(node: DOMNode) -> list[tuple[int, str]]:
    """The rows of ``node``'s bindings as its classes declare them, its own class first."""
    return [
        _group(node, declared if isinstance(declared, Binding) else Binding(*declared))
        for cls in type(node).__mro__
        for declared in cls.__dict__.get("BINDINGS", ())
    ]


def _what(binding: Binding) -> str:
    """The description, with the tooltip after it where there is one."""
    tooltip = binding.tooltip
    if not tooltip or tooltip == binding.description:
        return binding.description
    return f"{binding.description}: {mid_sentence(tooltip)}"


def keys_phrase(keys: tuple[str, ...] | list[str]) -> str:
    """``("escape", "enter", "f1")`` as "**Escape**, **Enter** or **F1**" (Markdown)."""
    shown = [f"**{key_words(key)}**" for key in keys]
    if len(shown) < 2:
        return "".join(shown)
    return f"{', '.join(shown[:-1])} or {shown[-1]}"


def key_table(screen: Screen[Any]) -> str:
    """The Markdown table of :func:`key_rows` for ``screen``."""
    lines = ["| Key | What it does | Keymap id |", "|---|---|---|"]
    for row in key_rows(screen):
        binding_id = f"`{row.binding_id}`" if row.binding_id else "(Textual's own)"
        lines.append(f"| {keys_phrase(row.keys)} | {row.what} | {binding_id} |")
    return "\n".join(lines)
