"""The user's settings: the theme and the keymap."""

from __future__ import annotations

from collections.abc import Sequence

from oom_wizard.storage.settings import SettingProblem, UserKeymap


def saved_theme() -> str | None:
    """The app's theme as the user chose it last (:mod:`oom_wizard.storage.settings`)."""
    from oom_wizard.storage.settings import saved_theme as read

    return read()


def remember_theme(theme: str) -> bool:
    """Remember the app's theme for the next start (atomically; False when it could not be)."""
    from oom_wizard.storage.settings import save_theme

    return save_theme(theme)


def saved_keymap() -> UserKeymap:
    """The user's keymap in the settings file, as written (:mod:`oom_wizard.storage.settings`)."""
    from oom_wizard.storage.settings import read_keymap

    return read_keymap()


def keymap_problems_line(keymap: UserKeymap, problems: Sequence[SettingProblem]) -> str | None:
    """The one line that reports what of ``keymap`` cannot be used (None: all of it can)."""
    from oom_wizard.storage.settings import keymap_problems_line as line

    return line(keymap.path, problems)
