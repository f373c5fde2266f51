"""The trainer as a child process: started in its own process group, watched, stopped cleanly.

No shell stands between us and the trainer: the command is a list of arguments with
``{config}`` replaced by the config's path. The child gets a new session (so its own process
group, and the terminal's Ctrl-C reaches only us); its stdout and stderr share one pipe, which a
thread copies to the terminal and to the log file as the bytes come, so the order is the order
the trainer printed in and ``\\r`` redraws stay as they are.

Stopping is for the whole group, workers included: SIGINT (the trainer's own clean stop),
then SIGTERM, then SIGKILL, each after a grace period. When the trainer exits non-zero, one
line is appended to the log as AI Toolkit's UI worker appends it (``Job process terminated
with exit code 1.`` / ``… with signal SIGKILL.``), so that a kill from outside, which leaves no
Python traceback, still shows in the log.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final

from oom_wizard.errors import WizardError

GRACE_S: Final = 10.0
"""Seconds each signal of the stop sequence gets before the next one."""
CONFIG_FIELD: Final = "{config}"
READ_BYTES: Final = 64 * 1024


def trainer_argv(template: Sequence[str], config: Path) -> list[str]:
    """The command with ``{config}`` replaced; without the field, the config is appended.

    Raises:
        WizardError: an empty command.
    """
    if not template:
        raise WizardError("no trainer command: give it after --, e.g. -- python run.py {config}")
    if not any(CONFIG_FIELD in part for part in template):
        return [*template, str(config)]
    return [part.replace(CONFIG_FIELD, str(config)) for part in template]


def default_command(folder: Path) -> list[str] | None:
    """``python run.py {config}`` when ``folder`` is AI Toolkit's folder (it has run.py)."""
    return ["python", "run.py", CONFIG_FIELD] if (folder / "run.py").is_file() else None


@dataclass(frozen=True)
class TrainerEnd:
    """How one run of the trainer ended.

    Attributes:
        returncode: The exit status; negative: the signal that ended it.
        duration_s: Seconds from start to end.
        interrupted: We stopped it (the user pressed Ctrl-C).
    """

    returncode: int
    duration_s: float
    interrupted: bool = False


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

    def __init__(
        self,
        argv: Sequence[str],
        log: Path,
        *,
        echo: IO[bytes] | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        grace_s: float = GRACE_S,
    ) -> None:
        self.argv = list(argv)
        self.log = log
        self.echo = echo
        self.grace_s = grace_s
        self._env = dict(env) if env is not None else None
        self._cwd = cwd
        self._proc: subprocess.Popen[bytes] | None = None
        self._pump: threading.Thread | None = None
        self._started = 0.0
        self.pgid: int | None = None

    def start(self) -> None:
        """Start the child in a new session, its output copied to the log (and the terminal).

        Raises:
            WizardError: the command cannot be started.
        """
        self.log.parent.mkdir(parents=True, exist_ok=True)
        sink = self.log.open("ab")
        env = dict(os.environ if self._env is None else self._env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        try:
            self._proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
                cwd=self._cwd,
            )
        except OSError as exc:
            sink.close()
            raise WizardError(f"cannot start the trainer {self.argv[0]!r}: {exc}") from None
        self._started = time.monotonic()
        self.pgid = self._proc.pid
        self._pump = threading.Thread(target=self._copy, args=(sink,), daemon=True)
        self._pump.start()

    @property
    def pid(self) -> int | None:
        """The child's pid (also its process group's id)."""
        return self._proc.pid if self._proc is not None else None

    def _copy(self, sink: IO[bytes]) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        with sink:
            while True:
                try:
                    data = os.read(fd, READ_BYTES)
                except OSError:
                    break
                if not data:
                    break
                sink.write(data)
                sink.flush()
                if self.echo is not None:
                    with contextlib.suppress(OSError, ValueError):
                        self.echo.write(data)
                        self.echo.flush()

    def wait(self, timeout: float | None = None) -> TrainerEnd:
        """Wait for the child to end; the group's stragglers are stopped too."""
        assert self._proc is not None
        returncode = self._proc.wait(timeout)
        return self._finish(returncode, interrupted=False)

    def stop(self) -> TrainerEnd:
        """Stop the whole group: SIGINT, then SIGTERM, then SIGKILL, each after the grace."""
        assert self._proc is not None
        returncode: int | None = None
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            self._signal_group(sig)
            try:
                returncode = self._proc.wait(self.grace_s)
                break
            except subprocess.TimeoutExpired:
                continue
        if returncode is None:
            returncode = self._proc.wait()
        return self._finish(returncode, interrupted=True)

    def _signal_group(self, sig: signal.Signals) -> bool:
        """Send ``sig`` to the group; False when nobody is left in it."""
        if self.pgid is None:
            return False
        try:
            os.killpg(self.pgid, sig)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def group_alive(self) -> bool:
        """Whether any live process (not a zombie) of the child's group still exists."""
        return self.pgid is not None and group_alive(self.pgid)

    def _reap_group(self) -> None:
        """Workers the trainer left behind get SIGTERM, then SIGKILL."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if not self._signal_group(sig):
                return
            deadline = time.monotonic() + min(self.grace_s, 2.0)
            while self.group_alive() and time.monotonic() < deadline:
                time.sleep(0.02)

    def _finish(self, returncode: int, *, interrupted: bool) -> TrainerEnd:
        self._reap_group()
        if self._pump is not None:
            self._pump.join()
        if returncode != 0:
            with self.log.open("ab") as sink:
                sink.write(b"\n" if _ends_mid_line(self.log) else b"")
                sink.write(epilogue(returncode).encode())
        return TrainerEnd(
            returncode=returncode,
            duration_s=time.monotonic() - self._started,
            interrupted=interrupted,
        )


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


def _ends_mid_line(log: Path) -> bool:
    """Whether the log's last byte is not a newline (a bar redraw ends with ``\\r``)."""
    try:
        with log.open("rb") as stream:
            stream.seek(-1, os.SEEK_END)
            return stream.read(1) != b"\n"
    except OSError:
        return False


def run_trainer(
    argv: Sequence[str],
    log: Path,
    *,
    echo: IO[bytes] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    grace_s: float = GRACE_S,
) -> TrainerEnd:
    """Run the trainer to its end; Ctrl-C (KeyboardInterrupt) stops its whole group cleanly.

    Raises:
        WizardError: the command cannot be started.
    """
    child = TrainerProcess(argv, log, echo=echo, env=env, cwd=cwd, grace_s=grace_s)
    child.start()
    try:
        return child.wait()
    except KeyboardInterrupt:
        return child.stop()
