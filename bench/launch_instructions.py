"""Instructions executed to the wizard's first paint and to the demo job shown, beside a bare
Textual app: the launch figures of ``bench_launch.py`` counted instead of timed.

On a machine shared with other work, times (even CPU times) move by a tenth from one run to
the next, more than most single changes to the start-up save. The number of instructions the
process executes until a screen's text is written does not: valgrind's cachegrind counts them,
the same programs as ``bench_launch.py`` run in a pseudo-terminal (80x24), and each one ends
itself (``os._exit``) in the write that first carries its marker. Every thread counts. The
bytecode is cached, as installed (a first, uncounted run of each program writes it).

Needs ``valgrind`` on the PATH; each count takes a few seconds. Usage::

    .venv/bin/python bench/launch_instructions.py
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import pty
import re
import select
import shutil
import signal
import struct
import sys
import tempfile
import termios
import time
from pathlib import Path

#: Replaces the Linux driver's write with one that ends the process at the marker, then runs
#: the program given (argv[1]: "bare" or "wizard"; argv[2]: the marker; argv[3]: a folder).
PROGRAM = """
import os, sys
from textual.drivers.linux_driver import LinuxDriver

what, marker, folder = sys.argv[1:4]
write = LinuxDriver.write

def write_until_marker(self, data):
    if marker in data:
        os._exit(0)
    return write(self, data)

LinuxDriver.write = write_until_marker
if what == "bare":
    from textual.app import App
    from textual.widgets import Footer, Header, Static

    class Bare(App):
        def compose(self):
            yield Header()
            yield Static("bare app painted")
            yield Footer()

    Bare().run()
else:
    sys.argv = ["oom-wizard", "demo", "--dir", folder]
    from oom_wizard.__main__ import main

    main()
"""
TIMEOUT_S = 300.0
REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def count(what: str, marker: str, *, counted: bool = True) -> float:
    """Millions of instructions ``what`` executes until it writes ``marker``."""
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "valgrind.log"
        argv = [sys.executable, "-c", PROGRAM, what, marker, str(Path(folder) / "demo")]
        if counted:
            argv = [
                "valgrind",
                "--tool=cachegrind",
                "--cache-sim=no",
                "--cachegrind-out-file=/dev/null",
                f"--log-file={log}",
                *argv,
            ]
        pid, fd = pty.fork()
        if pid == 0:
            os.environ["TERM"] = "xterm-256color"
            os.execvp(argv[0], argv)
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        deadline = time.monotonic() + TIMEOUT_S
        while not os.waitpid(pid, os.WNOHANG)[0]:
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
            if select.select([fd], [], [], 0.05)[0]:
                with contextlib.suppress(OSError):
                    os.read(fd, 65536)  # keep the terminal drained
        os.close(fd)
        if not counted:
            return 0.0
        found = REFS.search(log.read_text())
        if found is None:
            raise RuntimeError(f"valgrind counted nothing for {what} until {marker!r}")
        return int(found.group(1).replace(",", "")) / 1e6


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("launch_instructions: valgrind is not on the PATH")
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    bytecode = tempfile.TemporaryDirectory(prefix="launch-instructions-bytecode-")
    os.environ["PYTHONPYCACHEPREFIX"] = bytecode.name
    runs = [
        ("bare Textual app, first screen painted", "bare", "bare app painted"),
        ("oom-wizard demo, first screen painted", "wizard", "Load the job that ran out"),
        ("oom-wizard demo, job read and shown", "wizard", "Read. Enter"),
    ]
    for _, what, marker in runs:
        count(what, marker, counted=False)  # writes the bytecode
    bare = 0.0
    for label, what, marker in runs:
        millions = count(what, marker)
        bare = bare or millions
        print(f"{label + ':':<40}{millions:7.0f} M instructions  {millions / bare:5.2f}x")
    bytecode.cleanup()


if __name__ == "__main__":
    main()
