"""What every test shares: the user's own settings folder is never the real one, and the
children the tests start run as Python runs on a user's machine."""

from __future__ import annotations

from collections.abc import Iterator
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


@pytest.fixture(autouse=True, scope="session")
def children_keep_bytecode() -> Iterator[None]:
    """The Python children that the tests start write their compiled modules, as they do on
    a user's machine. A machine that sets ``PYTHONDONTWRITEBYTECODE`` (this one does) would
    make every child compile the whole project again from source: a third of its start-up.
    They go where Python puts them, in ``__pycache__`` folders that git ignores."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
        yield
