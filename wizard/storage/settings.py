"""The user's own settings of the app (the theme, a keymap), where the platform keeps them.

On Linux and the other Unixes, ``$XDG_CONFIG_HOME/oom-wizard/settings.json``
(``~/.config/oom-wizard/`` when the variable is unset or not an absolute path, as the XDG Base
Directory specification says); on Windows ``%APPDATA%\\oom-wizard\\settings.json`` (the roaming
profile's, as Windows programs keep settings); on macOS
``~/Library/Application Support/oom-wizard/settings.json``, or under ``$XDG_CONFIG_HOME``
when that is set (both from platformdirs). The file
is a preference, not a job: one that is missing, unreadable or malformed is ignored (the
defaults apply; the app says so once when it is not JSON), and a write that fails is dropped
silently rather than stopping the app. Writes are atomic (a temp file in the same folder,
then a rename), and a file that is not valid JSON is never written over (it may be the
user's keymap with a typo in it).

The keymap is the user's own keys, ``{"keymap": {"step.skip": "ctrl+k", "app.help": "f2"}}``:
binding ids (the app's help lists them) to a key or several, comma-separated. This module
reads it as written and says where each entry is; which ids and keys exist is the app's
business (:mod:`oom_wizard.screens.keys`), which reports what it cannot use in one line
(:func:`keymap_problems_line`).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from platformdirs.macos import MacOS
from platformdirs.windows import Windows

from oom_wizard.errors import WizardError, error_line
from oom_wizard.storage.atomic import atomic_write

APP_FOLDER: Final = "oom-wizard"
SETTINGS_FILE: Final = "settings.json"
KEYMAP: Final = "keymap"


#: Where each platform's settings are described, for the help (Linux and the rest: XDG).
SETTINGS_PLACES: Final = {
    "win32": r"`%APPDATA%\oom-wizard\settings.json`",
    "darwin": "`~/Library/Application Support/oom-wizard/settings.json`",
}
XDG_PLACE: Final = (
    "`$XDG_CONFIG_HOME/oom-wizard/settings.json`, else `~/.config/oom-wizard/settings.json`"
)


def settings_path(platform: str = sys.platform) -> Path:
    """Where the settings live on ``platform`` (``sys.platform``'s spelling)."""
    if platform == "win32":
        folder = Windows(APP_FOLDER, appauthor=False, roaming=True).user_config_dir
        return Path(folder) / SETTINGS_FILE
    if platform == "darwin":
        return Path(MacOS(APP_FOLDER, appauthor=False).user_config_dir) / SETTINGS_FILE
    base = os.environ.get("XDG_CONFIG_HOME", "")
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".config"
    return root / APP_FOLDER / SETTINGS_FILE


def settings_place(platform: str = sys.platform) -> str:
    """Where the settings file is on ``platform``, in words for the help."""
    return SETTINGS_PLACES.get(platform, XDG_PLACE)


def read_settings() -> dict[str, Any]:
    """The settings as saved (empty when there are none, or they cannot be read)."""
    try:
        data = json.loads(settings_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


@dataclass(frozen=True)
class SettingProblem:
    """Something in the settings file that cannot be used (it is ignored)."""

    message: str
    line: int | None = None
    column: int | None = None


@dataclass(frozen=True)
class KeymapEntry:
    """One entry of the user's keymap, as written: a binding id and its key string."""

    binding: str
    keys: str
    line: int | None
    column: int | None

    def problem(self, message: str) -> SettingProblem:
        """``message`` about this entry, at its place in the file."""
        return SettingProblem(message, self.line, self.column)


@dataclass(frozen=True)
class UserKeymap:
    """The keymap of the settings file: its entries, and what cannot be an entry at all."""

    path: Path
    entries: tuple[KeymapEntry, ...] = ()
    problems: tuple[SettingProblem, ...] = ()

    @property
    def empty(self) -> bool:
        """Whether there is nothing to apply or report (no keymap, or an empty one)."""
        return not self.entries and not self.problems


def read_keymap() -> UserKeymap:
    """The user's keymap as written (no entries: none, or no settings file).

    A file that is not JSON, a ``keymap`` that is not an object and a key string that is
    not a string are problems (with their line and column); the rest are entries.
    """
    path = settings_path()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, ValueError):
        return UserKeymap(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        problem = SettingProblem(f"not valid JSON ({error.msg})", error.lineno, error.colno)
        return UserKeymap(path, problems=(problem,))
    section = data.get(KEYMAP) if isinstance(data, dict) else None
    if section is None:
        return UserKeymap(path)
    if not isinstance(section, dict):
        line, column = _position(text, KEYMAP)
        problem = SettingProblem('"keymap" must be an object of binding ids and keys', line, column)
        return UserKeymap(path, problems=(problem,))
    entries: list[KeymapEntry] = []
    problems: list[SettingProblem] = []
    for binding, keys in section.items():
        line, column = _position(text, binding)
        if isinstance(keys, str):
            entries.append(KeymapEntry(binding, keys, line, column))
        else:
            problems.append(
                SettingProblem(
                    f"{binding!r}: the keys must be a string like 'ctrl+k'", line, column
                )
            )
    return UserKeymap(path, tuple(entries), tuple(problems))


def _position(text: str, name: str) -> tuple[int | None, int | None]:
    """The 1-based line and column of the first object key ``name`` in the JSON ``text``."""
    found = re.search(re.escape(json.dumps(name)) + r"\s*:", text)
    if found is None:
        return None, None
    before = text[: found.start()]
    line = before.count("\n") + 1
    return line, found.start() - (before.rfind("\n") + 1) + 1


def keymap_problems_line(path: Path, problems: Sequence[SettingProblem]) -> str | None:
    """The one line that reports ``problems`` of the keymap in ``path`` (None: there are none).

    It is placed at the first problem, names every one, and says they are ignored.
    """

    if not problems:
        return None
    problems = sorted(problems, key=lambda p: (p.line or 0, p.column or 0))
    first = problems[0]
    words = "; ".join(problem.message for problem in problems)
    error = WizardError(
        f"keymap: {words} (ignored; the other keys work)",
        file=path,
        line=first.line,
        column=first.column,
    )
    return error_line(error, "app")  # the app's notice: the settings are the app's


def saved_theme() -> str | None:
    """The theme the user chose last (None: none saved)."""
    theme = read_settings().get("theme")
    return theme if isinstance(theme, str) and theme else None


def save_theme(theme: str) -> bool:
    """Remember ``theme``, keeping the other settings; whether it was written."""

    path = settings_path()
    try:
        settings = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        settings = {}
    except (OSError, ValueError):  # not ours to write over: the user may be editing it
        return False
    if not isinstance(settings, dict):
        return False
    if settings.get("theme") == theme:
        return True
    settings["theme"] = theme
    data = (json.dumps(settings, indent=2, sort_keys=True) + "\n").encode("utf-8")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, data, replace=True)
    except (OSError, WizardError):  # a preference that cannot be written stops nothing
        return False
    return True
