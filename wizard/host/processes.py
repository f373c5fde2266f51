"""Every process a command starts, found and ended even when it left the command's group.

A trainer's helper may start a session of its own (``setsid``): then neither the terminal's
Ctrl-C nor a signal to the trainer's process group reaches it, and when the trainer exits the
helper is handed to the system's first process, out of our sight. On Linux a process may ask
to be the *child subreaper* of everything below it (``prctl(PR_SET_CHILD_SUBREAPER)``): an
orphan below it is then handed to it instead, so every process the trainer started stays in
our tree, in its group or not, and ``/proc`` shows that tree (:func:`tree_below`).

Elsewhere (macOS, the BSDs) there is no such request and no ``/proc``: :func:`adopt_orphans`
returns None, :func:`process_table` returns None, and what can be reached is the trainer's
process group only. A caller says so rather than claim more.

Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

_PR_SET_PDEATHSIG: Final = 1
_PR_SET_CHILD_SUBREAPER: Final = 36
_PR_GET_CHILD_SUBREAPER: Final = 37
PROC: Final = Path("/proc")


def _prctl() -> Callable[..., int] | None:
    """Linux's ``prctl`` (None elsewhere, or where the C library does not have it)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        call: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return call


@dataclass(frozen=True)
class ProcessEntry:
    """One process as ``/proc/PID/stat`` shows it."""

    pid: int
    parent: int
    group: int
    state: str
    """``R``, ``S``, ``D``…; ``Z`` (a zombie: ended, waiting for its parent) or ``X`` (dead)."""
    started: str = ""
    """When it started (clock ticks since boot): with the pid, who it is (a pid is reused)."""

    @property
    def alive(self) -> bool:
        """Whether it still runs (a zombie does not)."""
        return self.state not in ("Z", "X")


def adopt_orphans() -> Callable[[], None] | None:
    """Make this process the child subreaper of its descendants (Linux): an orphan below it
    comes to it, not to the system's first process. Returns what puts the previous setting
    back, or None where the system has no such request (or refuses it)."""
    prctl = _prctl()
    if prctl is None:
        return None
    import ctypes

    before = ctypes.c_int(0)
    if prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(before), 0, 0, 0) != 0:
        return None
    if prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        return None
    previous = before.value

    def restore() -> None:
        prctl(_PR_SET_CHILD_SUBREAPER, previous, 0, 0, 0)

    return restore


def die_with_parent() -> Callable[[], None] | None:
    """What a child runs before its exec so that it gets SIGKILL when we die (Linux's
    ``PR_SET_PDEATHSIG``); None elsewhere (there the watchdog alone ends it)."""
    prctl = _prctl()
    if prctl is None:
        return None
    parent = os.getpid()

    def arm() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the request was made
            os._exit(137)

    return arm


def process_table() -> dict[int, ProcessEntry] | None:
    """Every process this user can see, by pid (None: no ``/proc`` on this system)."""
    if not PROC.is_dir():
        return None
    table: dict[int, ProcessEntry] = {}
    with contextlib.suppress(OSError):
        for entry in os.scandir(PROC):
            if not entry.name.isdigit():
                continue
            try:
                with open(os.path.join(entry.path, "stat"), "rb") as stream:
                    stat = stream.read().decode("ascii", "replace")
            except OSError:
                continue  # it ended while we looked
            # ``pid (comm) state ppid pgrp …``: the name may hold spaces and parentheses.
            fields = stat[stat.rfind(")") + 2 :].split()
            if len(fields) < 20:
                continue
            pid = int(entry.name)
            table[pid] = ProcessEntry(pid, int(fields[1]), int(fields[2]), fields[0], fields[19])
    return table


def children_of(table: Mapping[int, ProcessEntry], parent: int) -> set[int]:
    """The pids whose parent is ``parent``."""
    return {entry.pid for entry in table.values() if entry.parent == parent}


def tree_below(table: Mapping[int, ProcessEntry], roots: Iterable[int]) -> set[int]:
    """``roots`` that are in the table and every process below them."""
    kids: dict[int, list[int]] = {}
    for entry in table.values():
        kids.setdefault(entry.parent, []).append(entry.pid)
    found: set[int] = set()
    todo = [pid for pid in roots if pid in table]
    while todo:
        pid = todo.pop()
        if pid in found:
            continue
        found.add(pid)
        todo.extend(kids.get(pid, ()))
    return found


def signal_each(pids: Iterable[int], sig: signal.Signals) -> None:
    """Send ``sig`` to each of ``pids``; one that has ended (or is not ours) is passed over."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def reap(pids: Collection[int]) -> None:
    """Collect the exit status of those of ``pids`` that are our own ended children (an
    adopted orphan is ours to reap, or it stays a zombie until we exit); never waits."""
    for pid in pids:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
