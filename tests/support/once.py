"""Work that the tests of one run share across xdist workers: done once, by the first worker
that needs it, under a lock; the other workers wait for it and read what it left.

Module- and session-scoped fixtures are made once per worker, so a costly one (a wheel built
by pip, a save traced under strace) is made by every worker that runs one of its tests. The
folder lives in the run's own temporary folder, the parent of each worker's (or in the
process's own, without xdist), which pytest removes with its old runs.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def once_per_run(factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """The folder ``name``, filled by ``make(folder)`` once in this test run.

    A ``make`` that failed leaves no folder behind it: the next worker that needs it makes it
    again (and fails the same way, in its own test).
    """
    base = factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = root / f"once-{name}"
    with open(root / f"once-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / ".made").exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            try:
                make(folder)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            (folder / ".made").touch()
    return folder
