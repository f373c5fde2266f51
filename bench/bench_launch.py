"""Launch time of the wizard beside a bare Textual app, in the same run, and its idle memory.

Each program runs in a fresh pseudo-terminal (80x24). The clock runs from the spawn to the
moment its first screen's text appears in the terminal output:

- bare:   a Textual app with a Header, one Static and a Footer;
- wizard: ``python -m oom_wizard demo --dir TMP``, until the load screen is painted, and then
          until the demo job is read, diagnosed and shown ("Read. Enter: …");
- app:    the same app started without the command line (what the parser costs).

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
from oom_wizard.screens.app import create_app
from oom_wizard.application.demo import IMAGE_JOB, copy_demo

folder = copy_demo(Path(sys.argv[1]))
create_app(folder / IMAGE_JOB.config, log=folder / IMAGE_JOB.log).run()
"""
TIMEOUT_S = 30.0


def spawn(argv: list[str]) -> tuple[int, int]:
    """Start ``argv`` in a new 80x24 pseudo-terminal; (pid, master fd)."""
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "xterm-256color"
        os.execv(argv[0], argv)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    return pid, fd


def wait_for(fd: int, markers: list[bytes], start: float) -> list[float]:
    """Seconds from ``start`` until each marker has appeared in the (ANSI-stripped) output."""
    seen: list[float] = []
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
            seen.append(time.perf_counter() - start)
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


def run_bare() -> float:
    start = time.perf_counter()
    pid, fd = spawn([sys.executable, "-c", BARE_APP])
    try:
        return wait_for(fd, [b"bare app painted"], start)[0]
    finally:
        stop(pid, fd)


def run_app_only() -> float:
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        pid, fd = spawn([sys.executable, "-c", APP_ONLY, folder])
        try:
            return wait_for(fd, [b"Load the job that ran out of memory"], start)[0]
        finally:
            stop(pid, fd)


def run_wizard() -> tuple[float, float, float]:
    """(first screen painted, job shown, idle RSS MiB)."""
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        pid, fd = spawn([sys.executable, "-m", "oom_wizard", "demo", "--dir", folder])
        try:
            painted, shown = wait_for(
                fd, [b"Load the job that ran out of memory", b"Read. Enter"], start
            )
            time.sleep(1.0)
            return painted, shown, rss_mib(pid)
        finally:
            stop(pid, fd)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    bytecode = tempfile.TemporaryDirectory(prefix="bench-launch-bytecode-")
    os.environ["PYTHONPYCACHEPREFIX"] = bytecode.name
    bare: list[float] = []
    painted: list[float] = []
    shown: list[float] = []
    memory: list[float] = []
    app_only: list[float] = []
    run_bare()  # warm the file cache for both
    run_wizard()
    for _ in range(args.runs):
        bare.append(run_bare())
        first, loaded, rss = run_wizard()
        painted.append(first)
        shown.append(loaded)
        memory.append(rss)
        app_only.append(run_app_only())
    b, p, s = statistics.median(bare), statistics.median(painted), statistics.median(shown)
    print(f"runs: {args.runs} each, alternating, medians")
    print(f"bare Textual app, first screen painted: {b * 1000:7.0f} ms")
    print(f"oom-wizard demo, first screen painted:  {p * 1000:7.0f} ms   ratio {p / b:.2f}x")
    print(f"oom-wizard demo, job read and shown:    {s * 1000:7.0f} ms   ratio {s / b:.2f}x")
    for what, times in (("painted", painted), ("shown", shown)):
        ratios = sorted(t / base for t, base in zip(times, bare, strict=True))
        print(f"  {what}: ratio run by run from {ratios[0]:.2f}x to {ratios[-1]:.2f}x")
    a = statistics.median(app_only)
    print(f"the app without the CLI, painted:       {a * 1000:7.0f} ms   ratio {a / b:.2f}x")
    print(f"oom-wizard idle memory (RSS):           {statistics.median(memory):7.1f} MiB")
    bytecode.cleanup()


if __name__ == "__main__":
    main()
