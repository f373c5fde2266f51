"""The watchdog of a trainer run: a small process of its own that ends the trainer's whole
process group (and the processes it started outside it) if ``run`` dies without saying that
all is well, SIGKILL included (:mod:`oom_wizard.host.supervision` starts it).

It runs as a script, ``python -I -S watchdog.py GRACE``, on the standard library alone (it
starts in milliseconds, and imports nothing of the project). Its stdin is the read end of a
pipe whose only write end is ``run``'s: the group's id on the first line, then one line per
process the trainer started outside its group (``PID STARTED``, the start time telling it from
a later process with the same pid), then ``done``. The pipe closing without ``done`` means
``run`` died: the group and those processes get SIGTERM, then SIGKILL after GRACE seconds.

On Windows the group is the trainer's process tree, ended with ``taskkill /T`` (first without
``/F``, then with it); the processes outside it cannot be named there (no ``/proc``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from typing import BinaryIO

ALL_IS_WELL = b"done\n"
"""The line the supervisor writes when all is well (:mod:`oom_wizard.host.supervision`)."""
WINDOWS = sys.platform == "win32"


def orders(stream: BinaryIO) -> tuple[int, list[tuple[int, bytes]]] | None:
    """The group's id and the strays named, read until the pipe's end; None when ``done``
    came (all is well) or no group was named."""
    first = stream.readline()
    if not first.strip().isdigit():
        return None
    strays: list[tuple[int, bytes]] = []
    for line in stream:
        if line.startswith(ALL_IS_WELL.rstrip()):
            return None
        words = line.split()
        if len(words) == 2 and words[0].isdigit():
            strays.append((int(words[0]), words[1]))
    return int(first), strays


def same(pid: int, started: bytes) -> bool:
    """Whether ``pid`` is still the process that started at ``started`` (Linux's ``/proc``)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return len(fields) > 19 and fields[19] == started and fields[0] not in (b"Z", b"X")


def group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` is left (POSIX)."""
    try:
        os.killpg(pgid, 0)
    except OSError:
        return False
    return True


def end_posix(pgid: int, strays: Iterable[int], grace: float) -> None:
    """SIGTERM, then SIGKILL after ``grace`` s, to the group and to each stray."""
    strays = list(strays)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(OSError):
            os.killpg(pgid, sig)
        for pid in strays:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and (
            group_alive(pgid) or any(os.path.exists(f"/proc/{pid}") for pid in strays)
        ):
            time.sleep(0.05)


def end_windows(
    pid: int,
    grace: float,
    run: Callable[[list[str]], int] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """The trainer's tree on Windows: ``taskkill /T`` (a close request), then, after
    ``grace`` s, ``taskkill /T /F`` (``run`` and ``sleep``: how, for the tests)."""
    call = run if run is not None else _taskkill
    if call(["taskkill", "/T", "/PID", str(pid)]) == 0:
        sleep(grace)
    call(["taskkill", "/T", "/F", "/PID", str(pid)])


def _taskkill(command: list[str]) -> int:
    return subprocess.run(command, capture_output=True, check=False).returncode


def main(argv: list[str]) -> int:
    grace = float(argv[1]) if len(argv) > 1 else 2.0
    found = orders(sys.stdin.buffer)
    if found is None:
        return 0
    pgid, strays = found
    if WINDOWS:
        end_windows(pgid, grace)
    else:
        end_posix(pgid, [pid for pid, started in strays if same(pid, started)], grace)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
