"""The user's own settings of the app (today: the theme), in the XDG config folder.

``$XDG_CONFIG_HOME/oom-wizard/settings.json`` (``~/.config/oom-wizard/`` when the variable
is unset or not an absolute path, as the XDG Base Directory specification says). The file
is a preference, not a job: one that is missing, unreadable or malformed is ignored (the
defaults apply), and a write that fails is dropped silently rather than stopping the app.
Writes are atomic (a temp file in the same folder, then a rename).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Final

APP_FOLDER: Final = "oom-wizard"
SETTINGS_FILE: Final = "settings.json"


def settings_path() -> Path:
    """Where the settings live, per the XDG convention."""
    base = os.environ.get("XDG_CONFIG_HOME", "")
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".config"
    return root / APP_FOLDER / SETTINGS_FILE


def read_settings() -> dict[str, Any]:
    """The settings as saved (empty when there are none, or they cannot be read)."""
    try:
        data = json.loads(settings_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def saved_theme() -> str | None:
    """The theme the user chose last (None: none saved)."""
    theme = read_settings().get("theme")
    return theme if isinstance(theme, str) and theme else None


def save_theme(theme: str) -> bool:
    """Remember ``theme``, keeping the other settings; whether it was written."""
    from oom_wizard.errors import WizardError
    from oom_wizard.save import atomic_write

    settings = read_settings()
    if settings.get("theme") == theme:
        return True
    settings["theme"] = theme
    path = settings_path()
    data = (json.dumps(settings, indent=2, sort_keys=True) + "\n").encode("utf-8")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, data, replace=True)
    except (OSError, WizardError):  # a preference that cannot be written stops nothing
        return False
    return True
