"""A real terminal for the end-to-end tests: a detached tmux session running one command,
whose screen the test reads and into which it types."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

TMUX = shutil.which("tmux")
WIZARD = Path(sys.executable).with_name("oom-wizard")
"""The installed console script, as a user runs it."""

Test = TypeVar("Test", bound=Callable[..., object])

#: How long a screen must stay the same to count as drawn.
STILL_S = 0.2

SCREEN_WAIT_S = 120.0
"""How long a test waits for the screen to show something before it fails: generous, because
on a busy two-core machine (the app tests driven beside it, other work beside the suite) a
screen can take tens of seconds to come; a test that passes waits only as long as it takes."""

HOLD = "sleep 600"
"""What a test's command ends with, so that the pane stays readable after the program exits
(the server is killed on the way out, whatever the test did)."""


def in_a_real_terminal(test: Test) -> Test:
    """Mark ``test`` end to end, skipped (with the reason) without tmux or the script."""
    marks = (
        pytest.mark.e2e,
        pytest.mark.skipif(TMUX is None, reason="tmux is not installed"),
        pytest.mark.skipif(not WIZARD.exists(), reason="the oom-wizard script is not installed"),
    )
    for mark in marks:
        test = mark(test)
    return test


def tmux(*args: str, socket: str) -> str:
    """Run one tmux command against the server of ``socket``; its output."""
    assert TMUX is not None
    command = [TMUX, "-L", socket, *args]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


@dataclass(frozen=True)
class Pane:
    """The session's one pane, on a tmux server of its own."""

    session: str

    def screen(self, *, joined: bool = False) -> str:
        """What the pane shows now (``joined``: wrapped lines joined back into one)."""
        joining = ["-J"] if joined else []
        return tmux("capture-pane", "-p", *joining, "-t", self.session, socket=self.session)

    def wait_for(self, text: str, timeout: float = SCREEN_WAIT_S) -> str:
        """The screen, once it shows ``text`` (fails with the screen after ``timeout`` s)."""
        return self.wait_until(lambda shown: text in shown, f"{text!r} never appeared", timeout)

    def wait_until(
        self, check: Callable[[str], bool], failure: str, timeout: float = SCREEN_WAIT_S
    ) -> str:
        """The screen, once ``check`` holds for it (fails with ``failure`` and the screen
        after ``timeout`` s)."""
        deadline = time.monotonic() + timeout
        shown = self.screen()
        while not check(shown):
            if time.monotonic() > deadline:
                raise AssertionError(f"{failure}; the pane shows:\n{shown}")
            time.sleep(0.1)
            shown = self.screen()
        return shown

    def wait_for_change(
        self, before: str, *, top: int = 8, timeout: float = SCREEN_WAIT_S, still_s: float = STILL_S
    ) -> str:
        """The screen, once its ``top`` lines differ from those of ``before`` (where each
        stage shows its title; notifications are drawn at the bottom) and it has stopped
        changing (two captures ``still_s`` apart are the same)."""
        deadline = time.monotonic() + timeout
        shown = self.screen()
        while shown.splitlines()[:top] == before.splitlines()[:top]:
            if time.monotonic() > deadline:
                raise AssertionError(f"the screen did not change; it shows:\n{shown}")
            time.sleep(0.05)
            shown = self.screen()
        while True:
            time.sleep(still_s)
            again = self.screen()
            if again == shown or time.monotonic() > deadline:
                return again
            shown = again

    def send(self, *keys: str) -> None:
        """Type ``keys`` (tmux key names: ``Enter``, ``C-c``...)."""
        tmux("send-keys", "-t", self.session, *keys, socket=self.session)


@contextmanager
def terminal(command: str, *, cwd: Path, width: int = 100, height: int = 30) -> Iterator[Pane]:
    """A ``width`` x ``height`` terminal in ``cwd`` running ``command`` through the shell,
    on a tmux server of its own (two tests starting the shared server at once race: one
    of them is told "server exited unexpectedly"); the server is killed on the way out,
    whatever the test did."""
    session = f"oomwiz-{uuid.uuid4().hex[:8]}"
    tmux(
        "new-session", "-d", "-s", session, "-x", str(width), "-y", str(height),
        "-c", str(cwd), command, socket=session,
    )  # fmt: skip
    try:
        yield Pane(session)
    finally:
        _end_the_panes_processes(session)
        subprocess.run([TMUX or "tmux", "-L", session, "kill-server"], capture_output=True)


def _end_the_panes_processes(session: str) -> None:
    """SIGKILL to the pane's process group (its shell, the program and its children share
    it: the shell does no job control): a program left running when the server goes, which
    the hang-up did not end, would spin on a terminal that is gone and slow the rest of the
    suite (a run found an ``oom-wizard demo`` at 84 % of a core an hour on)."""
    listed = subprocess.run(
        [TMUX or "tmux", "-L", session, "list-panes", "-F", "#{pane_pid}"],
        capture_output=True,
        text=True,
    )
    for pid in listed.stdout.split():
        with contextlib.suppress(ProcessLookupError, PermissionError, ValueError):
            os.killpg(int(pid), signal.SIGKILL)
