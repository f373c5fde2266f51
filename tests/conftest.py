"""What every test shares: the user's own settings folder is never the real one, the
children the tests start run as Python runs on a user's machine, and the collector runs
less often; the property tests draw the same examples on every run; and a process that has
ended, for the tests of what a killed save leaves."""

from __future__ import annotations

import gc
import os
import signal
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

#: The property tests draw the same examples every run, and keep none between runs, so that the
#: suite's verdict depends on the code alone. ``HYPOTHESIS_PROFILE=explore`` draws fresh ones
#: (and remembers the failures it finds), for a search beyond the suite.
settings.register_profile("suite", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "suite"))

#: Allocations between two young collections while the tests run (Python's default: 700).
YOUNG_COLLECTION_EVERY = 10_000

#: xdist workers per core under ``-n auto`` (xdist's own: one).
WORKERS_PER_CORE = 1.5


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """Three workers for two cores under ``-n auto``: the suite spends a good part of its
    wall time waiting (Textual's Pilot sleeps until the app is idle after every key, the
    real-process tests wait for their children and tmux), and a core a waiting worker leaves
    idle is taken by another; but each worker also collects the whole suite, assertion
    rewriting included (about 9 s of CPU). In a fresh clone on two cores, with idle workers
    stealing tests (``--dist worksteal``), pytest took 205 s with two workers, 168 s with
    three and 182 s with four. ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still sets the number."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist's own hook reads it
    return max(1, round(WORKERS_PER_CORE * len(os.sched_getaffinity(0))))


def pytest_configure(config: pytest.Config) -> None:
    """Collect garbage less often from the start, collection included.

    Collecting imports every test module and rewrites its asserts: hundreds of thousands of
    syntax-tree nodes, most of them kept. At Python's default threshold the collector walks
    them again and again (about a sixth of each worker's collection CPU); the young
    generation is collected every :data:`YOUNG_COLLECTION_EVERY` allocations instead.
    """
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_EVERY, middle, old)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what collection left, for the tests that follow.

    Every Pilot test builds and drops a whole Textual app: thousands of short-lived objects
    in reference cycles. At Python's default threshold the collector runs so often, and
    walks the session's long-lived objects (imported modules, collected tests) so many
    times, that it costs about a sixth of the suite's CPU time. Once collection is over,
    the objects alive now are frozen (never scanned again), and the young generation stays
    collected every :data:`YOUNG_COLLECTION_EVERY` allocations (:func:`pytest_configure`);
    garbage is still collected, in larger batches.
    """
    gc.collect()
    gc.freeze()


_STOPS = (signal.SIGINT, signal.SIGTERM)


@pytest.fixture(autouse=True)
def signals_as_found(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each test leaves SIGINT and SIGTERM as it found them, handlers and mask: the children
    later tests start inherit both, and a stop they never hear fails a test far away. A test
    that changed them is named in the warnings summary, and the state is put back."""
    handlers = [signal.getsignal(stop) for stop in _STOPS]
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    yield
    now = [signal.getsignal(stop) for stop in _STOPS]
    now_mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    if now == handlers and now_mask == mask:
        return
    for stop, handler in zip(_STOPS, handlers, strict=True):
        if handler is not None:
            signal.signal(stop, handler)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    warnings.warn(
        f"{request.node.nodeid} left the signals changed: {now} {sorted(now_mask)}",
        stacklevel=1,
    )


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


@pytest.fixture
def ended_pid() -> int:
    """The id of a process that has ended: forked, exited and reaped (a leftover's owner)."""
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid
