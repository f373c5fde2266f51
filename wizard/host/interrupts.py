"""Ctrl-C and SIGTERM as exceptions, delivered where the program can act on them.

Python raises ``KeyboardInterrupt`` wherever the main thread happens to be. When that is
inside a callback the interpreter runs on its own (a weak reference's callback in the
import system, a ``__del__``), the exception cannot propagate: CPython prints it as an
"Exception ignored in ..." traceback and carries on, so the interrupt is both shown as a
crash and lost. :func:`redeliver_lost_interrupts` turns that case into the signal sent
again a moment later, from a short-lived thread, so that it lands once the callback has
returned, at a line of ordinary code where the command line's clean exit handles it.
(Raised from the hook itself, it would run the handler inside the hook, where it is
swallowed the same way.)

Standard library only: ``python -m oom_wizard`` installs it before importing anything else.
"""

from __future__ import annotations

import _thread
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

# Long enough for the hook and the callback to have returned (microseconds), short next to
# anyone's patience. Landing in another callback only repeats the round.
_RESEND_AFTER = 0.01


def _send_later(signum: int) -> None:
    # To the process, not to this thread: pending while the main thread holds the signal
    # (a save in progress), ignored once the process has said what it did, as decided by
    # whoever set the signal's disposition.
    time.sleep(_RESEND_AFTER)
    os.kill(os.getpid(), signum)


def _resend(signum: int) -> None:
    # A bare thread: ``threading.Thread.start`` waits until the new thread runs, and on a
    # loaded machine the resent signal can land in that wait, inside the hook, where it would
    # be lost as the first one was.
    _thread.start_new_thread(_send_later, (signum,))


class Terminated(KeyboardInterrupt):
    """SIGTERM (or SIGHUP), raised where the program is, so the same clean-up runs as for
    Ctrl-C."""


def raise_terminated(signum: int, frame: object) -> None:
    """The handler for SIGTERM and SIGHUP."""
    raise Terminated


def redeliver_lost_interrupts() -> Callable[[], None]:
    """Make an interrupt that landed in an interpreter callback arrive again, not vanish;
    return what puts the previous hook back."""
    previous = sys.unraisablehook
    if getattr(previous, "redelivers_interrupts", False):
        return lambda: None

    def hook(unraisable: Any) -> None:
        exc = unraisable.exc_value
        if isinstance(exc, KeyboardInterrupt):
            signum = signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT
            try:
                _resend(signum)
            except KeyboardInterrupt:  # a second Ctrl-C this instant: owed the same way
                _resend(signum)
            return
        previous(unraisable)

    hook.redelivers_interrupts = True  # type: ignore[attr-defined]
    sys.unraisablehook = hook

    def restore() -> None:
        sys.unraisablehook = previous

    return restore
