"""What every test shares: the user's own settings folder is never the real one."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def own_config_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """``XDG_CONFIG_HOME`` in a fresh temporary folder: a theme the user picked on this
    machine never changes a snapshot, and no test writes into ``~/.config``."""
    home = tmp_path_factory.mktemp("config-home")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    return home
