"""The apps' run in the user's terminal: the terminal closed ends it, and once it is over,
however it ended, no thread of Textual's still reads that terminal, so the process can exit."""

from __future__ import annotations

import sys
import threading
from typing import Any, TypeVar

from textual.app import App
from textual.driver import Driver

if sys.platform != "win32":  # Textual's driver for POSIX terminals (it needs termios)
    from textual.drivers.linux_driver import LinuxDriver

ResultT = TypeVar("ResultT")


class TerminalApp(App[ResultT]):
    """An app that lets go of its terminal: whatever ends the run (a quit, an error, a stop
    signal, the terminal closed), no reader of the terminal is left behind.

    Textual's driver reads the terminal in a thread that is no daemon (the interpreter waits
    for it before it exits) and stops it with an event that its tear-down sets, and clears
    again once that reader has ended. A reader left running reads a closed terminal's end of
    file in a loop, at most of a core, and the process (ignoring SIGINT and SIGTERM by then)
    never ends. Two ways left one: the SIGCONT the kernel sends with a closed terminal's SIGHUP,
    which Textual took for a resume (see :class:`_ResumedAfterItsStopOnly`); and a second
    SIGHUP (the shell forwards one, the kernel sends another when the shell exits) landing in
    the tear-down before the stop, which skips it. So once the run is over the event is set for
    good: every reader of the driver ends within its poll.
    """

    def get_driver_class(self) -> type[Driver]:
        """Textual's driver for this platform; on POSIX, one that only a stop lets SIGCONT
        resume."""
        driver = super().get_driver_class()
        if sys.platform != "win32" and driver is LinuxDriver:
            return _ResumedAfterItsStopOnly
        return driver

    def run(self, *args: Any, **kwargs: Any) -> ResultT | None:
        """Textual's run, then the terminal's readers stopped."""
        try:
            return super().run(*args, **kwargs)
        finally:
            _stop_reading(self)


def _stop_reading(app: App[Any]) -> None:
    """Set the stop of every thread ``app``'s driver started to read the terminal: Textual's
    terminal drivers name it ``exit_event``; a driver without one (headless) starts none."""
    stop = getattr(app._driver, "exit_event", None)
    if isinstance(stop, threading.Event):
        stop.set()


if sys.platform != "win32":

    class _ResumedAfterItsStopOnly(LinuxDriver):
        """Textual's POSIX driver, which a SIGCONT resumes (back in full screen, reading keys
        again) only after a SIGTSTP stopped it. Textual's resumes on any SIGCONT, and the
        kernel sends one with the SIGHUP of a terminal that closes: taken for a resume, it
        started a second reader of the terminal while the app was already ending, or one that
        nothing stopped, and its full-screen mode's output queued to a writer that the dead
        terminal had ended (queued past Textual's limit, the app's own last writes waited
        forever). A stray ``kill -CONT`` did the same to an app that runs."""

        _stopped = False

        def _sigtstp_application(self, *args: object) -> None:
            self._stopped = True
            super()._sigtstp_application(*args)

        def _sigcont_application(self, *args: object) -> None:
            if self._stopped:
                self._stopped = False
                super()._sigcont_application(*args)
