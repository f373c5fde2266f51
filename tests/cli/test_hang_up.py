"""A closed terminal ends the app: ``oom-wizard demo`` in a real terminal that hangs up.

When a terminal window closes, its shell forwards SIGHUP to the job in front, and the kernel
sends SIGHUP and SIGCONT when that shell exits. Textual's driver took that SIGCONT for a resume
and started reading the terminal again while the app was ending; and a second SIGHUP landing in
the tear-down skipped the stop of the reader. Either left a thread reading the dead terminal
(each read an end of file, at once: it spun at most of a core) that nothing told to stop, and
the interpreter waited for it forever: the process outlived its terminal, ignoring SIGINT and
SIGTERM.
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
#: first screen is up it gets a SIGCONT with no stop before it, then says on ``READY`` how many
#: threads read its terminal. Once the tear-down has stopped reading the terminal for the last
#: time (its second stop), a reader starts again, as Textual's resume did on the kernel's
#: SIGCONT (and as a second SIGHUP that skips the stop leaves one), every time.
CHILD = """
import fcntl, functools, os, signal, struct, sys, termios, threading

fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
from oom_wizard import cli
from oom_wizard.commands import demo

READY = int(sys.argv[1])

async def up(pilot):
    await pilot.pause()
    os.kill(os.getpid(), signal.SIGCONT)
    await pilot.pause()
    readers = [t for t in threading.enumerate() if t.name == "textual-input"]
    driver = pilot.app._driver
    stop_reading = driver.disable_input
    stops = []

    def then_read_again():
        stop_reading()
        stops.append(1)
        if len(stops) == 2:
            driver.resume_application_mode()

    driver.disable_input = then_read_again
    os.write(READY, str(len(readers)).encode())

demo.run_wizard = functools.partial(demo.run_wizard, auto_pilot=up)
sys.argv = ["oom-wizard", "demo"]
sys.exit(cli.main())
"""


def test_a_closed_terminal_ends_the_app_whatever_reads_it_then(tmp_path: Path) -> None:
    ready, said = os.pipe()
    pid, terminal = os.forkpty()  # the child leads a session whose terminal this is
    if pid == 0:  # pragma: no cover (the child)
        os.close(ready)
        os.set_inheritable(said, True)
        os.chdir(tmp_path)
        os.execv(sys.executable, [sys.executable, "-c", CHILD, str(said)])
    os.close(said)
    try:
        readers = _wait_until_up(terminal, ready, pid)
        assert readers == 1, "a SIGCONT with no stop before it started another reader"
        os.close(terminal)  # the window closes: the kernel hangs the terminal up
        terminal = -1
        status = _exit_status(pid, END_S)
        assert status is not None, f"the app was still running {END_S:.0f} s after the hang-up"
        assert os.waitstatus_to_exitcode(status) == 143  # terminated, as by SIGTERM
    finally:
        if terminal != -1:
            os.close(terminal)
        os.close(ready)
        _kill(pid)


def _wait_until_up(terminal: int, ready: int, pid: int) -> int:
    """Read the terminal (the app writes its screen there) until the child says it is up;
    the number of its terminal's readers it said."""
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        readable, _, _ = select.select([terminal, ready], [], [], 0.5)
        if ready in readable:
            said = os.read(ready, 16)
            if said:
                return int(said)
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
