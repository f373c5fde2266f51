"""An interrupt that lands inside an interpreter callback is delivered again, not printed
as an ignored exception and lost (the import system's weak-reference callbacks are where a
Ctrl-C of ``python -m oom_wizard`` once turned into a traceback)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from oom_wizard.application.running import stops_as_from_a_terminal

CHILD = textwrap.dedent(
    """
    import signal, sys, time
    import oom_wizard.host.interrupts
    from oom_wizard.host.interrupts import Terminated, raise_terminated, redeliver_lost_interrupts

    if len(sys.argv) > 3:
        oom_wizard.host.interrupts._RESEND_AFTER = float(sys.argv[3])

    if sys.argv[1] == "installed":
        redeliver_lost_interrupts()
    signal.signal(signal.SIGTERM, raise_terminated)

    class RaisesInCallback:
        def __del__(self):
            raise {exception}

    try:
        RaisesInCallback()  # dropped at once: its __del__ runs as an interpreter callback
        deadline = time.monotonic() + float(sys.argv[2])
        while time.monotonic() < deadline:
            time.sleep(0.005)  # ordinary code; a signal ends the sleep and raises here
        print("lost")
    except Terminated:
        print("terminated")
    except KeyboardInterrupt:
        print("interrupted")
    """
)


def run_child(exception: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The child above, raising ``exception`` in a callback, started as from a terminal."""
    return subprocess.run(
        [sys.executable, "-c", CHILD.format(exception=exception), *args],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=stops_as_from_a_terminal,
    )


@pytest.mark.parametrize(
    ("exception", "arrives_as"),
    [("KeyboardInterrupt", "interrupted"), ("Terminated", "terminated")],
)
def test_an_interrupt_raised_in_a_callback_arrives_again_in_ordinary_code(exception, arrives_as):
    done = run_child(exception, "installed", "5")
    assert done.stdout.strip() == arrives_as
    assert "Exception ignored" not in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("exception", ["KeyboardInterrupt", "Terminated"])
def test_a_resend_that_lands_while_the_hook_still_runs_arrives(exception):
    """The resend with no delay lands at once: on a loaded machine, that is what the 10 ms
    become while the main thread waits for its turn. It used to land inside the hook, in the
    wait for the resending thread to start, and was swallowed there (20 lost of 20)."""
    arrives_as = "terminated" if exception == "Terminated" else "interrupted"
    for _ in range(5):
        done = run_child(exception, "installed", "5", "0")
        assert done.stdout.strip() == arrives_as
        assert "Traceback" not in done.stderr


def test_without_the_hook_the_interpreter_prints_it_and_carries_on():
    """The behaviour the hook exists for, so the test above cannot pass by accident.

    The child waits a second for an interrupt that never comes: a hundred times the hook's
    resend delay (the installed child above is woken after about 10 ms of its 5 s)."""
    done = run_child("KeyboardInterrupt", "bare", "1")
    assert done.stdout.strip() == "lost"
    assert "Exception ignored" in done.stderr


def test_the_command_line_puts_the_previous_hook_back():
    from oom_wizard import cli

    before = sys.unraisablehook
    assert cli.main(["diagnose", "/no/such/job.yaml"]) == cli.EXIT_BAD_INPUT
    assert sys.unraisablehook is before
