"""The trainer as a child process: started in its own process group, watched, stopped cleanly
(``run``'s supervision; its options are one value, :class:`Supervision`).

No shell stands between us and the trainer: the command is a list of arguments with
``{config}`` replaced by the config's path. The child gets a new session (so its own process
group, and the terminal's Ctrl-C reaches only us); its stdout and stderr share one pipe, which a
thread copies to the terminal and to the log file as the bytes come, so the order is the order
the trainer printed in and ``\\r`` redraws stay as they are.

Stopping is for the whole group, workers included: SIGINT (the trainer's own clean stop),
then SIGTERM, then SIGKILL, each after a grace period; a second Ctrl-C (or SIGTERM) during the
stop goes on to the next signal at once. When the trainer's own process has ended, every
process it started that still lives is ended too (SIGTERM, then SIGKILL), those that left its
group included: on Linux we are their child subreaper while it runs
(:mod:`oom_wizard.host.processes`), so an orphan comes to us and ``/proc`` shows it; elsewhere
only its group can be reached, and :func:`processes_note` says so. Its output is read until
the pipe closes, or until it has been quiet for :data:`QUIET_S` seconds (at most
:data:`DRAIN_S`) after the trainer's own process ended: a process that holds the pipe open
cannot keep the run waiting. When the trainer exits non-zero, one
line is appended to the log as AI Toolkit's UI worker appends it (``Job process terminated
with exit code 1.`` / ``… with signal SIGKILL.``), so that a kill from outside, which leaves no
Python traceback, still shows in the log.

A trainer that printed its fatal error but does not exit (DataLoader workers, NCCL) is ended
as a group after :data:`FATAL_SILENCE_S` seconds with no new output, and the run goes on as
after an exit (:attr:`TrainerEnd.hung_after_error`).

The trainer dies with us, even when we are killed with SIGKILL: on Linux the child asks the
kernel for SIGKILL when its parent dies (``PR_SET_PDEATHSIG``, set before the exec), and a
small watchdog process holds the read end of a pipe whose only write end is ours; when the
pipe closes without the word that all is well (our death closes it), the watchdog ends the
trainer's whole process group, the workers the kernel signal does not reach included, and the
processes it started outside the group, which we name to it as we find them (Linux). The
watchdog is a module of its own (:mod:`oom_wizard.host.watchdog`), run as a script.

On Windows (:data:`WINDOWS`) there are no signals to a process group, no ``fork`` before the
exec and no ``select`` on a pipe: the child starts in a new process group
(``CREATE_NEW_PROCESS_GROUP``), the clean stop is CTRL_BREAK (what Python programs read as
KeyboardInterrupt there), and the rest is ``taskkill /T`` (then ``/F``) on its process tree
(:func:`group_stop`); the output is read by blocking reads, so a process that holds the pipe
open after the trainer ended keeps the reading on until it closes; nothing asks the kernel to
end the child with us (the watchdog alone does), and the processes it started outside its tree
cannot be found (:attr:`TrainerEnd.sees_all` is False). tests/application/test_windows_seams.py
drives these branches on Linux; the README says what is tested where.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

from oom_wizard.host.interrupts import Terminated
from oom_wizard.host.probe import ProbeResult, probe_gpu
from oom_wizard.host.processes import (
    adopt_orphans,
    children_of,
    die_with_parent,
    process_table,
    reap,
    signal_each,
    tree_below,
)
from oom_wizard.host.watchdog import ALL_IS_WELL

GRACE_S: Final = 10.0
"""Seconds each signal of the stop sequence gets before the next one."""
FATAL_SILENCE_S: Final = 60.0
"""Seconds with no new output after the trainer printed its fatal error before its group is
ended: a trainer whose workers keep it alive after the traceback never exits by itself."""
POLL_S: Final = 0.2
"""Seconds between two looks at a running trainer."""
QUIET_S: Final = 1.0
"""Seconds of no output, once the trainer's own process has ended, after which its output is
no longer read (a process it started may hold the pipe open for as long as it lives)."""
DRAIN_S: Final = 5.0
"""Seconds at most that output is read after the trainer's own process ended, however much a
process that holds the pipe still writes."""
STRAGGLER_GRACE_S: Final = 2.0
"""Seconds the trainer's leftover processes get after SIGTERM before SIGKILL."""
LOOK_S: Final = 1.0
"""Seconds between two looks for processes the trainer started outside its group (named to
the watchdog) while it runs."""
MEASURE_S: Final = 2.0
"""Seconds between two readings of ``nvidia-smi`` while the trainer runs."""
WATCHDOG_GRACE_S: Final = 2.0
"""Seconds the watchdog gives the group between SIGTERM and SIGKILL once we are gone."""
WATCHDOG: Final = Path(__file__).with_name("watchdog.py")
"""The watchdog's program (:mod:`oom_wizard.host.watchdog`), run as ``python -I -S WATCHDOG``."""

WINDOWS: Final = sys.platform == "win32"
"""Windows: process groups, stops and reading as the module doc says."""
_KILL: Final[Any] = getattr(signal, "SIGKILL", "SIGKILL")
"""SIGKILL; Windows has none, and :func:`group_stop` reads its name."""

READ_BYTES: Final = 64 * 1024


class StartFailed(Exception):
    """The trainer's command could not be started (its message says why)."""


@dataclass(frozen=True)
class Supervision:
    """How a run of the trainer is supervised: one value, from ``run``'s options.

    Attributes:
        grace_s: Seconds each stop signal is given before the next.
        silence_s: Seconds of silence after a fatal error before the group is ended.
        measure_s: Seconds between two readings of the card's memory.
        echo: Where the output is copied besides the log (the terminal), if anywhere.
        env: The child's environment (None: ours).
        cwd: The child's working folder (None: ours).
        fatal_error: Whether the log ends in a fatal error (the rule is the logs' own: the
            application layer gives it; by default nothing is).
        read_card: One reading of the card, or None when there is none to trust (the
            application layer checks it against the limits; default: ``nvidia-smi`` as is).
    """

    grace_s: float = GRACE_S
    silence_s: float = FATAL_SILENCE_S
    measure_s: float = MEASURE_S
    echo: IO[bytes] | None = None
    env: Mapping[str, str] | None = None
    cwd: Path | None = None
    fatal_error: Callable[[Path], bool] = lambda _log: False
    read_card: Callable[[], ProbeResult | None] = probe_gpu


@dataclass(frozen=True)
class TrainerEnd:
    """How one run of the trainer ended.

    Attributes:
        returncode: The exit status; negative: the signal that ended it.
        duration_s: Seconds from start to end.
        interrupted: We stopped it (the user pressed Ctrl-C, or we were told to end).
        terminated: What stopped us was SIGTERM (or SIGHUP), not Ctrl-C.
        hung_after_error: The trainer printed its fatal error and then nothing for this many
            seconds without exiting, so its group was ended (None: it exited by itself).
        peak_gib: The most memory in use on the card ``nvidia-smi`` showed while it ran
            (None: no ``nvidia-smi``, or it did not answer).
        card_gib: That card's memory.
        left_running: Processes it started that still ran after they were sent SIGKILL
            (their pids; a process stuck in the kernel ends only when the kernel lets it).
        outside_group: Processes it started outside its process group (a helper in a session
            of its own) that were ended after it.
        sees_all: Every process it started could be found (Linux: we were their subreaper
            and read ``/proc``); False: only its process group could be reached.
        output_cut: Its output was still open when reading stopped (after :data:`QUIET_S`
            seconds of quiet, or :data:`DRAIN_S`, once its own process had ended).
    """

    returncode: int
    duration_s: float
    interrupted: bool = False
    terminated: bool = False
    hung_after_error: float | None = None
    peak_gib: float | None = None
    card_gib: float | None = None
    left_running: tuple[int, ...] = ()
    outside_group: int = 0
    sees_all: bool = True
    output_cut: bool = False


def epilogue(returncode: int) -> str:
    """The line AI Toolkit's UI worker appends to the log after a non-zero exit."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"Job process terminated with signal {name}.\n"
    return f"Job process terminated with exit code {returncode}.\n"


class TrainerProcess:
    """One trainer child: its process group, the copy of its output, its stop."""

    def __init__(self, argv: Sequence[str], log: Path, options: Supervision) -> None:
        self.argv = list(argv)
        self.options = options
        self.measure_s = options.measure_s
        self.log = log
        self.echo = options.echo
        self.grace_s = options.grace_s
        self.silence_s = options.silence_s
        self._last_output = 0.0
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._leash: int | None = None
        self._measuring = threading.Event()
        self._meter: threading.Thread | None = None
        self.peak_gib: float | None = None
        self.card_gib: float | None = None
        self._own_peak: float | None = None
        self._card_peak: float | None = None
        self._env = dict(options.env) if options.env is not None else None
        self._cwd = options.cwd
        self._proc: subprocess.Popen[bytes] | None = None
        self._pump: threading.Thread | None = None
        self._started = 0.0
        self.pgid: int | None = None
        self._ended_at: float | None = None
        """When the trainer's own process ended (the pump reads on until quiet after it)."""
        self._cut = False
        """Stop reading as soon as nothing is waiting in the pipe (asked to stop at once)."""
        self._output_cut = False
        self._release_subreaper: Callable[[], None] | None = None
        self._sees_all = False
        """We are the subreaper of what it starts and ``/proc`` shows us the tree."""
        self._children_before: frozenset[int] = frozenset()
        self._end: TrainerEnd | None = None
        self._told: set[int] = set()
        """The processes outside its group the watchdog was told about."""

    def start(self) -> None:
        """Start the child in a new session, its output copied to the log (and the terminal).

        Raises:
            StartFailed: the command cannot be started.
        """
        self.log.parent.mkdir(parents=True, exist_ok=True)
        existed = self.log.exists()
        sink = self.log.open("ab")
        env = dict(os.environ if self._env is None else self._env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        self._start_watchdog()
        self._adopt_what_it_starts()
        try:
            self._proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self._cwd,
                **child_options(WINDOWS),
            )
        except (OSError, subprocess.SubprocessError) as exc:
            sink.close()
            if not existed:  # nothing was written on exit 2: not even an empty log
                with contextlib.suppress(OSError):
                    self.log.unlink()
            self._release_watchdog()
            self._stop_adopting()
            raise StartFailed(f"cannot start the trainer {self.argv[0]!r}: {exc}") from None
        self._started = self._last_output = time.monotonic()
        self.pgid = self._proc.pid
        self._arm_watchdog(self.pgid)
        self._pump = threading.Thread(target=self._copy, args=(sink,), daemon=True)
        self._pump.start()
        self._meter = threading.Thread(target=self._measure, daemon=True)
        self._meter.start()

    @property
    def pid(self) -> int | None:
        """The child's pid (also its process group's id)."""
        return self._proc.pid if self._proc is not None else None

    def _adopt_what_it_starts(self) -> None:
        """Become the subreaper of what the trainer starts, and note our children before it
        (any child that comes later, but the watchdog and the trainer, is its orphan)."""
        self._release_subreaper = adopt_orphans()
        table = process_table() if self._release_subreaper is not None else None
        self._sees_all = table is not None
        if table is not None:
            self._children_before = frozenset(children_of(table, os.getpid()))

    def _stop_adopting(self) -> None:
        release, self._release_subreaper = self._release_subreaper, None
        if release is not None:
            release()

    def _copy(self, sink: IO[bytes]) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        with sink:
            while True:
                try:
                    ready = pipe_ready(fd, POLL_S, WINDOWS)
                except (OSError, ValueError):
                    break
                if not ready:
                    if self._reading_done():
                        self._output_cut = True
                        break
                    continue
                try:
                    data = os.read(fd, READ_BYTES)
                except OSError:
                    break
                if not data:
                    break
                self._last_output = time.monotonic()
                sink.write(data)
                sink.flush()
                if self.echo is not None:
                    with contextlib.suppress(OSError, ValueError):
                        self.echo.write(data)
                        self.echo.flush()

    def _reading_done(self) -> bool:
        """Whether to stop reading a pipe that has nothing waiting: the trainer's own process
        ended, and its output has been quiet for :data:`QUIET_S` s (or :data:`DRAIN_S` s have
        passed since it ended), or we were asked to stop at once."""
        ended = self._ended_at
        if ended is None:
            return False
        if self._cut:
            return True
        now = time.monotonic()
        return now - max(ended, self._last_output) >= QUIET_S or now - ended >= DRAIN_S

    def _measure(self) -> None:
        """Read the card's memory every ``measure_s`` s (:data:`MEASURE_S`); keep the highest.

        What the trainer's own processes hold when ``nvidia-smi`` lists them with figures
        (their pids are in its group); else what is in use on the busiest card.
        """

        while True:
            found = self.options.read_card()
            if found is None:
                return  # no nvidia-smi here, or no answer a card could give: nothing measured
            card = max(found.gpus, key=lambda gpu: gpu.used_gib)
            own = [
                p.used_gib
                for p in found.processes
                if p.used_gib is not None and self.pgid is not None and _in_group(p.pid, self.pgid)
            ]
            self.card_gib = card.total_gib
            self._card_peak = max(self._card_peak or 0.0, card.used_gib)
            if own:
                self._own_peak = max(self._own_peak or 0.0, sum(own))
            # The trainer's own processes' figures when nvidia-smi ever listed them; else (a
            # container's pids, a driver that hides them) what was in use on the card.
            self.peak_gib = self._own_peak if self._own_peak is not None else self._card_peak
            if self._measuring.wait(self.measure_s):
                return

    def wait(self) -> TrainerEnd:
        """Wait for the child to end; the group's stragglers are stopped too.

        A trainer whose log ends in a fatal error and that has printed nothing for
        ``silence_s`` seconds is ended (its whole group) and counts as ended by itself.
        """
        assert self._proc is not None
        checked = -1.0
        looked = 0.0
        while True:
            try:
                returncode = self._proc.wait(POLL_S)
                break
            except subprocess.TimeoutExpired:
                pass
            if time.monotonic() - looked >= LOOK_S:
                looked = time.monotonic()
                self._tell_watchdog_about_strays()
            quiet = time.monotonic() - self._last_output
            if quiet < self.silence_s or checked == self._last_output:
                continue
            checked = self._last_output
            if self.options.fatal_error(self.log):
                returncode = self._end_group()
                # No epilogue: the signal is ours, and the log's last word is the trainer's
                # own fatal error, as when it exits after it.
                end = self._finish(returncode, interrupted=False, note_exit=False)
                return dataclasses.replace(end, hung_after_error=round(quiet, 1))
        return self._finish(returncode, interrupted=False)

    def _end_group(self) -> int:
        """SIGTERM, then SIGKILL, to the group; the child's exit status."""
        assert self._proc is not None
        for sig in (signal.SIGTERM, _KILL):
            self._signal_group(sig)
            try:
                return self._proc.wait(min(self.grace_s, 5.0))
            except subprocess.TimeoutExpired:
                continue
        return self._proc.wait()

    def stop(self, *, terminated: bool = False) -> TrainerEnd:
        """Stop the whole group: SIGINT, then SIGTERM, then SIGKILL, each after the grace;
        asked again meanwhile (Ctrl-C, SIGTERM), the next signal goes at once. Then every
        process it started that still lives is ended (:meth:`_finish`)."""

        assert self._proc is not None
        if self._end is not None:  # it had ended already: the interrupt came after
            return dataclasses.replace(self._end, interrupted=True, terminated=terminated)
        returncode: int | None = None
        for sig in (signal.SIGINT, signal.SIGTERM, _KILL):
            try:
                self._signal_group(sig)
                returncode = self._proc.wait(self.grace_s)
                break
            except subprocess.TimeoutExpired:
                continue
            except KeyboardInterrupt as again:
                terminated = terminated or isinstance(again, Terminated)
                continue
        while returncode is None:
            try:
                returncode = self._proc.wait()
            except KeyboardInterrupt as again:
                terminated = terminated or isinstance(again, Terminated)
        return self._finish(returncode, interrupted=True, terminated=terminated)

    def _start_watchdog(self) -> None:
        """The watchdog that ends the group if we die (module doc); best effort."""
        try:
            read, write = os.pipe()
        except OSError:
            return
        try:
            self._watchdog = subprocess.Popen(
                [sys.executable, "-I", "-S", str(WATCHDOG), str(WATCHDOG_GRACE_S)],
                stdin=read,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                **child_options(WINDOWS, before_exec=False),
            )
        except OSError:
            os.close(write)
            return
        finally:
            os.close(read)
        self._leash = write

    def _tell_watchdog_about_strays(self) -> None:
        """Name to the watchdog each process the trainer started outside its group, so that
        it is ended too if we are killed (our subreaper's orphans would go to init then)."""
        if self._leash is None or not self._sees_all:
            return
        table = process_table()
        found = self._left_behind() if table is not None else None
        for pid in sorted((found or set()) - self._told):
            entry = table.get(pid) if table is not None else None
            if entry is None or entry.group == self.pgid:
                continue
            self._told.add(pid)
            with contextlib.suppress(OSError):
                os.write(self._leash, f"{pid} {entry.started}\n".encode())

    def _arm_watchdog(self, pgid: int) -> None:
        if self._leash is not None:
            with contextlib.suppress(OSError):
                os.write(self._leash, f"{pgid}\n".encode())

    def _release_watchdog(self) -> None:
        """Tell the watchdog all is well (the group is reaped) and let it go."""
        leash, self._leash = self._leash, None
        if leash is not None:
            with contextlib.suppress(OSError):
                os.write(leash, ALL_IS_WELL)
            os.close(leash)
        if self._watchdog is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._watchdog.wait(5)

    def _signal_group(self, sig: signal.Signals | str) -> bool:
        """Send ``sig`` to the group (on Windows: :func:`group_stop`); False when nobody is
        left in it."""
        if self.pgid is None:
            return False
        if WINDOWS:
            assert self._proc is not None
            return group_stop(self._proc, sig)
        assert isinstance(sig, signal.Signals)
        try:
            os.killpg(self.pgid, sig)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def group_alive(self) -> bool:
        """Whether any live process (not a zombie) of the child's group still exists (on
        Windows: whether the trainer's own process does; its tree cannot be listed)."""
        if WINDOWS:
            return self._proc is not None and self._proc.poll() is None
        return self.pgid is not None and group_alive(self.pgid)

    def _left_behind(self) -> set[int] | None:
        """The live processes the trainer started, its own process excepted: those below it,
        and the orphans handed to us (our children since it started but the watchdog and
        the trainer); None where they cannot be seen (no subreaper, no ``/proc``)."""
        if not self._sees_all:
            return None
        table = process_table()
        if table is None:
            return None
        ours = {self.pid, self._watchdog.pid if self._watchdog is not None else None}
        adopted = children_of(table, os.getpid()) - self._children_before - ours
        roots = adopted | {pid for pid in (self.pid,) if pid is not None}
        return {pid for pid in tree_below(table, roots) if table[pid].alive} - {self.pid}

    def _end_the_rest(self, *, at_once: bool) -> tuple[tuple[int, ...], int]:
        """End what the trainer left running: its group, and (where they can be seen) the
        processes it started outside the group; SIGTERM, then SIGKILL (at once: SIGKILL).
        Returns the pids still alive after SIGKILL, and how many were outside its group."""
        outside: set[int] = set()
        for sig in (_KILL,) if at_once else (signal.SIGTERM, _KILL):
            found = self._left_behind() or set()
            outside |= {pid for pid in found if not _in_group(pid, self.pgid or -1)}
            if not self._signal_group(sig) and not found:
                break
            signal_each(found, sig)
            deadline = time.monotonic() + min(self.grace_s, STRAGGLER_GRACE_S)
            while time.monotonic() < deadline and (self.group_alive() or self._left_behind()):
                self._reap_adopted()
                time.sleep(0.02)
        self._reap_adopted()
        left = self._left_behind() or set()
        return tuple(sorted(left)), len(outside)

    def _reap_adopted(self) -> None:
        """Collect the orphans handed to us that have ended (else they stay zombies)."""
        if not self._sees_all:
            return
        table = process_table()
        if table is not None:
            ours = {self.pid, self._watchdog.pid if self._watchdog is not None else None}
            reap(children_of(table, os.getpid()) - self._children_before - ours)

    def _finish(
        self,
        returncode: int,
        *,
        interrupted: bool,
        terminated: bool = False,
        note_exit: bool = True,
    ) -> TrainerEnd:
        """After the trainer's own process ended: end what it left running, stop reading
        (at the pipe's end, or once quiet), and note a non-zero exit in the log.

        A Ctrl-C (or SIGTERM) meanwhile does not wait: what is left gets SIGKILL, reading
        stops at once, and the run counts as interrupted.
        """

        self._ended_at = time.monotonic()
        self._measuring.set()
        at_once = False
        left: tuple[int, ...] = ()
        outside = 0
        while True:
            try:
                if self._meter is not None:
                    self._meter.join()
                found = self._end_the_rest(at_once=at_once)
                left, outside = found[0], max(outside, found[1])
                if self._pump is not None:
                    self._pump.join()
                break
            except KeyboardInterrupt as again:
                interrupted, at_once, self._cut = True, True, True
                terminated = terminated or isinstance(again, Terminated)
        self._stop_adopting()
        self._release_watchdog()
        if self._proc is not None and self._proc.stdout is not None:
            self._proc.stdout.close()
        if returncode != 0 and note_exit:
            with self.log.open("ab") as sink:
                sink.write(b"\n" if _ends_mid_line(self.log) else b"")
                sink.write(epilogue(returncode).encode())
        self._end = TrainerEnd(
            returncode=returncode,
            duration_s=time.monotonic() - self._started,
            interrupted=interrupted,
            terminated=terminated,
            peak_gib=None if self.peak_gib is None else round(self.peak_gib, 2),
            card_gib=None if self.card_gib is None else round(self.card_gib, 2),
            left_running=left,
            outside_group=outside,
            sees_all=self._sees_all,
            output_cut=self._output_cut,
        )
        return self._end


def group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` lives; zombies waiting for a reaper do not count."""
    proc = Path("/proc")
    if proc.is_dir():
        for entry in proc.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2 :].split()
            if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
                return True
        return False
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _in_group(pid: int, pgid: int) -> bool:
    """Whether process ``pid`` is in process group ``pgid``."""
    try:
        return os.getpgid(pid) == pgid
    except OSError:
        return False


_STOPS: Final = (signal.SIGINT, signal.SIGTERM)


def stops_as_from_a_terminal() -> None:
    """SIGINT and SIGTERM at their defaults and unblocked, as a program started from a
    terminal has them (run in a child before its exec).

    ``run`` started in the background (``&`` in a script ignores SIGINT), or forked while
    signals were held, would hand the trainer a SIGINT it never sees: the stop's first
    signal, the trainer's own clean stop, would go unheard.
    """
    for stop in _STOPS:
        signal.signal(stop, signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):  # POSIX only (this runs before a POSIX exec)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPS)


def _before_exec() -> Callable[[], None]:
    """What the child runs before the exec (POSIX): :func:`stops_as_from_a_terminal`, then
    (Linux) its death with ours (:func:`~oom_wizard.host.processes.die_with_parent`)."""
    with_parent = die_with_parent()

    def prepare() -> None:
        stops_as_from_a_terminal()
        if with_parent is not None:
            with_parent()

    return prepare


def pipe_ready(fd: int, timeout: float, windows: bool) -> bool:
    """Whether the pipe has bytes (or its end) to read within ``timeout`` s. Windows cannot
    ``select`` on a pipe: the read there blocks until bytes or the end come, so it is always
    "ready" (and a process holding the pipe open keeps the reading on)."""
    if windows:
        return True
    ready, _, _ = select.select([fd], [], [], timeout)
    return bool(ready)


def child_options(windows: bool, *, before_exec: bool = True) -> dict[str, Any]:
    """``Popen``'s options for a child in a process group of its own: on POSIX a new session
    (and, for the trainer, :func:`_before_exec`); on Windows a new process group, since
    Windows has neither sessions nor code run between fork and exec."""
    if windows:
        return {"creationflags": getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0x200)}
    options: dict[str, Any] = {"start_new_session": True}
    if before_exec:
        options["preexec_fn"] = _before_exec()
    return options


#: Each stop signal's Windows counterpart: the clean stop is CTRL_BREAK (Python reads it as
#: KeyboardInterrupt); the others end the process tree, asked, then forced.
WINDOWS_STOPS: Final = {
    "SIGINT": "ctrl_break",
    "SIGTERM": "taskkill",
    "SIGKILL": "taskkill_force",
}


def group_stop(
    proc: subprocess.Popen[bytes],
    sig: signal.Signals | str,
    run: Callable[[list[str]], int] | None = None,
) -> bool:
    """A stop signal (``SIGINT``, ``SIGTERM``, ``SIGKILL``, or its name) to the trainer's
    tree on Windows; False when it has ended. ``run`` runs ``taskkill`` (for the tests)."""
    if proc.poll() is not None:
        return False
    name = sig.name if isinstance(sig, signal.Signals) else sig
    how = WINDOWS_STOPS.get(name, "taskkill_force")
    if how == "ctrl_break":
        proc.send_signal(getattr(signal, "CTRL_BREAK_EVENT", signal.SIGINT))
        return True
    command = ["taskkill", "/T", *(["/F"] if how == "taskkill_force" else []), "/PID"]
    call = run if run is not None else _taskkill
    return call([*command, str(proc.pid)]) == 0


def _taskkill(command: list[str]) -> int:
    return subprocess.run(command, capture_output=True, check=False).returncode


def _ends_mid_line(log: Path) -> bool:
    """Whether the log's last byte is not a newline (a bar redraw ends with ``\\r``)."""
    try:
        with log.open("rb") as stream:
            stream.seek(-1, os.SEEK_END)
            return stream.read(1) != b"\n"
    except OSError:
        return False


def run_trainer(argv: Sequence[str], log: Path, options: Supervision) -> TrainerEnd:
    """Run the trainer to its end; Ctrl-C (KeyboardInterrupt) or SIGTERM
    (:class:`~oom_wizard.host.interrupts.Terminated`) stops its whole group cleanly.

    Raises:
        StartFailed: the command cannot be started.
    """

    child = TrainerProcess(argv, log, options)
    child.start()
    try:
        return child.wait()
    except KeyboardInterrupt as exc:
        return child.stop(terminated=isinstance(exc, Terminated))
