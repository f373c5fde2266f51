"""A pytest plugin for ``bench/bench_suite.py``: the wall and CPU time of every test.

Loaded with ``-p suite_cpu`` (``bench/`` on ``PYTHONPATH``); each process (each xdist worker)
writes its rows as JSON into the folder named by ``OOMW_SUITE_CPU``: node id, whether the
test drives the Textual app (its module runs one under Pilot or takes snapshots), wall
seconds, the process's own CPU seconds and its children's. With ``OOMW_SUITE_DEFAULT_GC`` set,
the collector keeps Python's default thresholds instead of the suite's (``tests/conftest.py``),
to measure what that setting is worth.
"""

from __future__ import annotations

import functools
import gc
import json
import os
import resource
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

OUT = "OOMW_SUITE_CPU"
DEFAULT_GC = "OOMW_SUITE_DEFAULT_GC"
#: Python's own collector thresholds.
PYTHON_THRESHOLDS = (700, 10, 10)
_rows: list[dict[str, Any]] = []


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    if os.environ.get(DEFAULT_GC):
        gc.unfreeze()
        gc.set_threshold(*PYTHON_THRESHOLDS)


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@functools.cache
def _drives_the_app(module: Path) -> bool:
    """Whether the test module runs the app under Pilot or takes snapshots (read once)."""
    source = module.read_text(encoding="utf-8")
    return "run_test(" in source or "snap_compare" in source


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    own, children = _cpu()
    start = time.perf_counter()
    yield
    wall = time.perf_counter() - start
    own_after, children_after = _cpu()
    _rows.append(
        {
            "test": item.nodeid,
            "app": _drives_the_app(item.path),
            "wall": wall,
            "cpu": own_after - own,
            "children": children_after - children,
        }
    )


def pytest_sessionfinish(session: pytest.Session) -> None:
    folder = os.environ.get(OUT)
    if folder and _rows:
        (Path(folder) / f"{os.getpid()}.json").write_text(json.dumps(_rows), encoding="utf-8")
