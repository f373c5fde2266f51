"""The user's settings: the theme and the keymap."""

from __future__ import annotations

from collections.abc import Sequence

from oom_wizard.storage.settings import (
    SettingProblem,
    UserKeymap,
    keymap_problems_line as line,
    read_keymap,
    save_theme,
    saved_theme as read,
    settings_place as place,
)


def saved_theme() -> str | None:
    """The app's theme as the user chose it last (:mod:`oom_wizard.storage.settings`)."""

    return read()


def remember_theme(theme: str) -> bool:
    """Remember the app's theme for the next start (atomically; False when it could not be)."""

    return save_theme(theme)


def settings_place() -> str:
    """Where this platform keeps the settings file, in words for the help."""

    return place()


def saved_keymap() -> UserKeymap:
    """The user's keymap in the settings file, as written (:mod:`oom_wizard.storage.settings`)."""

    return read_keymap()


def keymap_problems_line(keymap: UserKeymap, problems: Sequence[SettingProblem]) -> str | None:
    """The one line that reports what of ``keymap`` cannot be used (None: all of it can)."""

    return line(keymap.path, problems)
