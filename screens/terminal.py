"""The apps' run in the user's terminal: once it is over, however it ended, no thread of
Textual's still reads that terminal, so the process can exit."""

from __future__ import annotations

import threading
from typing import Any, TypeVar

from textual.app import App

ResultT = TypeVar("ResultT")


class TerminalApp(App[ResultT]):
    """An app whose run leaves no reader of the terminal behind (a quit, an error, a stop
    signal, the terminal closed).

    Textual's driver reads the terminal in a thread that is no daemon (the interpreter waits
    for it before it exits) and stops it with an event that its tear-down sets, and clears
    again once that reader has ended. A closed terminal breaks that twice over: a second
    SIGHUP (the shell forwards one, the kernel sends another when the shell exits) that lands
    in the tear-down before the stop skips it; and the SIGCONT the kernel sends with its SIGHUP
    makes the driver start reading again (its resume after a suspend), during the tear-down or
    after its last stop. A reader left so reads the dead terminal's end of file in a loop, at
    most of a core, and the process (ignoring SIGINT and SIGTERM by then) never ends. Once the
    run is over the event is set for good: every reader of the driver ends within its poll.
    """

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
