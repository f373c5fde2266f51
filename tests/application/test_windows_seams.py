"""The Windows branches of ``run``'s supervision and of the host probe, driven on this Linux
machine through their seams (the platform as an argument, the system call answered here).
What runs on Windows itself (``taskkill``, CTRL_BREAK, ``GlobalMemoryStatusEx``) is not run
here: the README says what is tested where."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from oom_wizard.host import watchdog
from oom_wizard.host.probe import GIB, read_host_memory
from oom_wizard.host.supervision import WATCHDOG, child_options, group_stop, pipe_ready


class Ran:
    """``taskkill`` as the tests answer it: each command recorded, ``answer`` its status."""

    def __init__(self, answer: int = 0) -> None:
        self.answer = answer
        self.commands: list[list[str]] = []

    def __call__(self, argv: list[str]) -> int:
        self.commands.append(argv)
        return self.answer


class FakeProcess:
    """What ``group_stop`` uses of a ``Popen``: its pid, whether it ended, a signal."""

    def __init__(self, *, ended: bool = False) -> None:
        self.pid = 4242
        self.ended = ended
        self.sent: list[object] = []

    def poll(self) -> int | None:
        return 0 if self.ended else None

    def send_signal(self, sig: object) -> None:
        self.sent.append(sig)


def test_a_windows_child_gets_a_process_group_and_no_posix_only_option() -> None:
    windows = child_options(True)
    assert windows == {"creationflags": getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0x200)}
    posix = child_options(False)
    assert posix["start_new_session"] is True and callable(posix["preexec_fn"])
    assert child_options(False, before_exec=False) == {"start_new_session": True}


@pytest.mark.parametrize(
    ("sig", "command"),
    [
        (signal.SIGTERM, ["taskkill", "/T", "/PID", "4242"]),
        ("SIGKILL", ["taskkill", "/T", "/F", "/PID", "4242"]),
        (signal.SIGKILL, ["taskkill", "/T", "/F", "/PID", "4242"]),
    ],
)
def test_on_windows_a_stop_ends_the_process_tree_with_taskkill(
    sig: object, command: list[str]
) -> None:
    ran = Ran()
    process = FakeProcess()
    assert group_stop(process, sig, run=ran)  # type: ignore[arg-type]
    assert ran.commands == [command] and process.sent == []


def test_on_windows_the_clean_stop_is_ctrl_break() -> None:
    ran = Ran()
    process = FakeProcess()
    assert group_stop(process, signal.SIGINT, run=ran)  # type: ignore[arg-type]
    assert ran.commands == [] and process.sent == [
        getattr(signal, "CTRL_BREAK_EVENT", signal.SIGINT)
    ]


def test_on_windows_an_ended_trainer_is_not_stopped_again() -> None:
    ran = Ran()
    assert not group_stop(FakeProcess(ended=True), "SIGKILL", run=ran)  # type: ignore[arg-type]
    assert ran.commands == []


def test_on_windows_the_pipe_is_read_without_select() -> None:
    assert pipe_ready(-1, 0.0, True)  # no select on an invalid descriptor: never asked


def test_the_watchdog_on_windows_asks_then_forces_the_tree_to_end() -> None:
    ran, slept = Ran(), list[float]()
    watchdog.end_windows(4242, 2.0, run=ran, sleep=slept.append)
    assert ran.commands == [
        ["taskkill", "/T", "/PID", "4242"],
        ["taskkill", "/T", "/F", "/PID", "4242"],
    ]
    assert slept == [2.0]
    refused = Ran(answer=1)
    watchdog.end_windows(4242, 2.0, run=refused, sleep=slept.append)
    assert len(refused.commands) == 2 and slept == [2.0]  # a refused request: forced at once


def test_the_watchdog_is_a_module_run_as_a_script(tmp_path: Path) -> None:
    """``run`` starts it as ``python -I -S WATCHDOG``; told ``done``, it ends and ends nothing."""
    import sys

    assert WATCHDOG.is_file() and Path(watchdog.__file__) == WATCHDOG
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(WATCHDOG), "0.1"],
        input=b"999999999\ndone\n",
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0 and done.stderr == b""


def test_host_memory_on_windows_comes_from_global_memory_status() -> None:
    total, available = read_host_memory(
        platform="win32", windows_status=lambda: (int(64 * GIB), int(40 * GIB))
    )
    assert (total, available) == (64.0, 40.0)
    assert read_host_memory(platform="win32", windows_status=lambda: None) == (None, None)


def test_host_memory_without_proc_comes_from_the_page_counts(tmp_path: Path) -> None:
    pages = {"SC_PHYS_PAGES": 4 * 1024 * 1024, "SC_PAGE_SIZE": 4096}
    total, available = read_host_memory(
        tmp_path / "no-meminfo", platform="darwin", pages=pages.__getitem__
    )
    assert (total, available) == (16.0, None)


def test_host_memory_on_linux_is_still_proc_meminfo(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       33554432 kB\nMemAvailable:   16777216 kB\n")
    assert read_host_memory(meminfo, platform="linux") == (32.0, 16.0)


def test_without_a_signal_mask_a_stop_during_the_renames_lands_after_them() -> None:
    """Windows has no ``pthread_sigmask``: the save's renames hold SIGINT off with handlers
    of their own, and the Ctrl-C lands once they are done (run here for real, on Linux)."""
    from oom_wizard.storage.atomic import signals_held

    done: list[str] = []
    with pytest.raises(KeyboardInterrupt), signals_held(mask=False):
        # raised in this thread: a kill() of the process may go to another of the worker's
        # threads, and its handler run only once the block is over (on a loaded machine)
        signal.raise_signal(signal.SIGINT)
        done.append("renamed")  # not interrupted in the middle
    assert done == ["renamed"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_the_command_line_starts_where_there_is_no_sighup(monkeypatch: pytest.MonkeyPatch) -> None:
    from oom_wizard import cli
    from oom_wizard.host.interrupts import raise_terminated

    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.delattr(signal, "SIGHUP")
    restore = cli._install_signal_handlers()
    try:
        assert signal.getsignal(signal.SIGTERM) is raise_terminated
    finally:
        restore()
    assert signal.getsignal(signal.SIGTERM) is before
