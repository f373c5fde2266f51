"""Launch time of the wizard beside a bare Textual app, in the same run, and its idle memory.

Each program runs in a fresh pseudo-terminal (80x24). The clock runs from the spawn to the
moment its first screen's text appears in the terminal output:

- bare:   a Textual app with a Header, one Static and a Footer;
- wizard: ``python -m oom_wizard demo --dir TMP``, until the load screen is painted, and then
          until the demo job is read, diagnosed and shown ("Read. Enter: …");
- app:    the same app started without the command line (what the parser costs).

Beside each wall-clock time, the CPU time the program had used by then (user and system, of
all its threads, from ``/proc``; in clock ticks, 10 ms each): on a machine shared with other
work the wall clock also counts the waits for a core, the CPU time does not.

Idle memory is the wizard's resident set size once the job is shown and nothing happens.
Runs alternate between the programs; medians are reported, and the spread of the ratios of
the runs side by side. Every program runs with its bytecode cached in a folder of its own
(``PYTHONPYCACHEPREFIX``, even where the shell sets ``PYTHONDONTWRITEBYTECODE``), as an
installed package has it; the warm-up runs fill it. Usage::

    .venv/bin/python bench/bench_launch.py [--runs N]
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import re
import select
import signal
import statistics
import struct
import sys
import tempfile
import termios
import time
from pathlib import Path
from typing import NamedTuple

ANSI = re.compile(rb"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
BARE_APP = """
from textual.app import App
from textual.widgets import Footer, Header, Static

class Bare(App):
    def compose(self):
        yield Header()
        yield Static("bare app painted")
        yield Footer()

Bare().run()
"""
APP_ONLY = """
import sys
from pathlib import Path
from typing import NamedTuple
from oom_wizard.screens.app import create_app
from oom_wizard.application.demo import IMAGE_JOB, copy_demo

folder = copy_demo(Path(sys.argv[1]))
create_app(folder / IMAGE_JOB.config, log=folder / IMAGE_JOB.log).run()
"""
TIMEOUT_S = 30.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def spawn(argv: list[str]) -> tuple[int, int]:
    """Start ``argv`` in a new 80x24 pseudo-terminal; (pid, master fd)."""
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "xterm-256color"
        os.execv(argv[0], argv)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    return pid, fd


class Seen(NamedTuple):
    """When a marker appeared: wall-clock seconds since the spawn, CPU seconds used by then."""

    wall: float
    cpu: float


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of ``pid`` so far, its threads' included (ended ones too)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def wait_for(pid: int, fd: int, markers: list[bytes], start: float) -> list[Seen]:
    """When each marker has appeared in the (ANSI-stripped) output of ``pid``."""
    seen: list[Seen] = []
    buffer = b""
    deadline = start + TIMEOUT_S
    while len(seen) < len(markers) and time.perf_counter() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        buffer += chunk
        plain = ANSI.sub(b"", buffer)
        while len(seen) < len(markers) and markers[len(seen)] in plain:
            seen.append(Seen(time.perf_counter() - start, cpu_seconds(pid)))
    if len(seen) < len(markers):
        raise RuntimeError(f"never painted {markers[len(seen)]!r}")
    return seen


def rss_mib(pid: int) -> float:
    """Resident set size of ``pid`` in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def stop(pid: int, fd: int) -> None:
    """End the program (it is ours) and close its terminal."""
    os.kill(pid, signal.SIGTERM)
    os.waitpid(pid, 0)
    os.close(fd)


def run_bare() -> Seen:
    start = time.perf_counter()
    pid, fd = spawn([sys.executable, "-c", BARE_APP])
    try:
        return wait_for(pid, fd, [b"bare app painted"], start)[0]
    finally:
        stop(pid, fd)


def run_app_only() -> Seen:
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        pid, fd = spawn([sys.executable, "-c", APP_ONLY, folder])
        try:
            return wait_for(pid, fd, [b"Load the job that ran out of memory"], start)[0]
        finally:
            stop(pid, fd)


def run_wizard() -> tuple[Seen, Seen, float]:
    """(first screen painted, job shown, idle RSS MiB)."""
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        pid, fd = spawn([sys.executable, "-m", "oom_wizard", "demo", "--dir", folder])
        try:
            painted, shown = wait_for(
                pid, fd, [b"Load the job that ran out of memory", b"Read. Enter"], start
            )
            time.sleep(1.0)
            return painted, shown, rss_mib(pid)
        finally:
            stop(pid, fd)


def report(what: str, times: list[Seen], base: Seen | None = None) -> Seen:
    """One line: the medians of ``times``, with their ratios to ``base``; the medians."""
    median = Seen(statistics.median(t.wall for t in times), statistics.median(t.cpu for t in times))
    line = f"{what + ':':<40}{median.wall * 1000:7.0f} ms wall"
    if base is not None:
        line += f" {median.wall / base.wall:5.2f}x"
    line += f"   {median.cpu * 1000:5.0f} ms CPU"
    if base is not None:
        line += f" {median.cpu / base.cpu:5.2f}x"
    print(line)
    return median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    bytecode = tempfile.TemporaryDirectory(prefix="bench-launch-bytecode-")
    os.environ["PYTHONPYCACHEPREFIX"] = bytecode.name
    bare: list[Seen] = []
    painted: list[Seen] = []
    shown: list[Seen] = []
    memory: list[float] = []
    app_only: list[Seen] = []
    run_bare()  # warm the file cache for both
    run_wizard()
    for _ in range(args.runs):
        bare.append(run_bare())
        first, loaded, rss = run_wizard()
        painted.append(first)
        shown.append(loaded)
        memory.append(rss)
        app_only.append(run_app_only())
    print(f"runs: {args.runs} each, alternating, medians (wall clock, and CPU time used by then)")
    b = report("bare Textual app, first screen painted", bare)
    report("oom-wizard demo, first screen painted", painted, b)
    report("oom-wizard demo, job read and shown", shown, b)
    for what, times in (("painted", painted), ("shown", shown)):
        for clock in ("wall", "cpu"):
            ratios = sorted(
                getattr(t, clock) / getattr(base, clock)
                for t, base in zip(times, bare, strict=True)
            )
            print(f"  {what}, {clock}: ratio run by run from {ratios[0]:.2f}x to {ratios[-1]:.2f}x")
    report("the app without the CLI, painted", app_only, b)
    print(f"{'oom-wizard idle memory (RSS)':<40}{statistics.median(memory):7.1f} MiB")
    bytecode.cleanup()


if __name__ == "__main__":
    main()
