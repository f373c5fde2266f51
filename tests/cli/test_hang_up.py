"""A closed terminal ends the app: ``oom-wizard demo`` in a real terminal that hangs up.

When a terminal window closes, its shell forwards SIGHUP to the job in front, and the kernel
sends SIGHUP and SIGCONT when that shell exits: the app can get a second hang-up while Textual
tears the app down after the first, and a SIGCONT makes Textual's driver start reading the
terminal again. Either left a thread reading the dead terminal (each read an end of file, at
once, so the thread spun at most of a core) that nothing told to stop, and the interpreter
waited for it forever: the process outlived its terminal, ignoring SIGINT and SIGTERM.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "forkpty"), reason="needs a POSIX terminal")

#: How long the app may take to start, and then to end once its terminal is gone (a loaded
#: two-core machine; a process that passes ends in well under a second).
START_S = 90.0
END_S = 30.0

#: The child: ``oom-wizard demo`` as the command line runs it, in an 80x24 terminal. Once its
#: first screen is up it says so on ``READY``; and each time Textual has stopped reading the
#: terminal, a SIGCONT comes, as the kernel's (sent with the SIGHUP of a shell that exits)
#: can: the last one, after the tear-down's last stop, every time.
CHILD = """
import fcntl, functools, os, signal, struct, sys, termios

fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
from oom_wizard import cli
from oom_wizard.commands import demo

READY = int(sys.argv[1])

async def up(pilot):
    await pilot.pause()
    driver = pilot.app._driver
    stop_reading = driver.disable_input

    def then_sigcont():
        stop_reading()
        os.kill(os.getpid(), signal.SIGCONT)

    driver.disable_input = then_sigcont
    os.write(READY, b"up")

demo.run_wizard = functools.partial(demo.run_wizard, auto_pilot=up)
sys.argv = ["oom-wizard", "demo"]
sys.exit(cli.main())
"""


def test_the_app_ends_when_its_terminal_hangs_up_even_with_a_second_hang_up(
    tmp_path: Path,
) -> None:
    ready, said = os.pipe()
    pid, terminal = os.forkpty()  # the child leads a session whose terminal this is
    if pid == 0:  # pragma: no cover (the child)
        os.close(ready)
        os.set_inheritable(said, True)
        os.chdir(tmp_path)
        os.execv(sys.executable, [sys.executable, "-c", CHILD, str(said)])
    os.close(said)
    try:
        _wait_until_up(terminal, ready, pid)
        os.close(terminal)  # the window closes: the kernel hangs the terminal up
        terminal = -1
        status = _exit_status(pid, END_S)
        assert status is not None, f"the app was still running {END_S:.0f} s after the hang-up"
        assert os.waitstatus_to_exitcode(status) == 143  # terminated, as for SIGTERM
    finally:
        if terminal != -1:
            os.close(terminal)
        os.close(ready)
        _kill(pid)


def _wait_until_up(terminal: int, ready: int, pid: int) -> None:
    """Read the terminal (the app writes its screen there) until the child says it is up."""
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        readable, _, _ = select.select([terminal, ready], [], [], 0.5)
        if ready in readable:
            if os.read(ready, 2) == b"up":
                return
            break  # the child ended before it was up
        if terminal in readable:
            try:
                os.read(terminal, 65536)
            except OSError:  # the child ended: its terminal has no other side
                break
    status = _exit_status(pid, 0.0)
    raise AssertionError(f"the app never came up (wait status {status})")


def _exit_status(pid: int, within_s: float) -> int | None:
    """The child's wait status once it has ended, or None if it runs ``within_s`` on."""
    deadline = time.monotonic() + within_s
    while True:
        ended, status = os.waitpid(pid, os.WNOHANG)
        if ended:
            return status
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)


def _kill(pid: int) -> None:
    """SIGKILL the child if it still runs, and reap it: no test leaves a process behind."""
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass
