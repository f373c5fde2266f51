"""Following a training log as it grows (``tail -F``), and what it says as it happens.

:class:`Follower` reads only the bytes that are new since the last poll. It copes with a log
that does not exist yet (it waits), with a job that restarts and truncates it, and with AI
Toolkit's rotation (the UI moves the old ``log.txt`` to ``logs/<n>_log.txt`` and starts a new
one): the rest of the old file is read first, then the new one from its start. It never
writes anything.

:class:`LiveJob` feeds those bytes to the log scanner's rules (:class:`oom_wizard.logscan.LiveScan`,
the same rules ``diagnose`` uses) and keeps what the live screen shows: the phase, step/total,
the time left, the s/it of every new training-bar step, the skip banners, and the warnings as
they happen: an OOM skip with its step; a stall (no new step for ``stall_s`` seconds while the
log shows no end); a slowdown (s/it ``slow_factor`` times its own stable stretch). When the
run ends (a crash, a stop, or the end of training), ``ended`` says so.

What a crash means (its diagnosis, the first change, the wizard opened on it) is the
service's (:func:`oom_wizard.service.diagnose_crash`): one rule for ``diagnose``, ``watch`` and
``run``.
"""

from __future__ import annotations

import os
import re
import statistics
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final, Literal

from oom_wizard.logscan import LiveScan, LogScan

READ_LIMIT: Final = 8 << 20
"""Bytes read per poll at most (a huge backlog is read over several polls)."""
RATES_KEPT: Final = 120
"""s/it figures kept for the sparkline."""
STABLE_AFTER: Final = 5
"""Steps left out of the stable stretch (the first steps are slow: compile, warm-up)."""
STALL_S: Final = 600.0
SLOW_FACTOR: Final = 3.0
BAR_TAIL: Final = 4096
"""Bytes at the end of new data searched for the last training-bar redraw."""

_RATE = re.compile(
    rb"(\d+)/(\d+) \[[^<\]\r\n]*<(?P<left>[^,\]\r\n]*),\s*(?P<x>[\d.]+)(?P<unit>s/it|it/s), lr:"
)

Restart = Literal["opened", "rotated", "truncated"]


class Follower:
    """``tail -F`` of one path, polled: the new bytes, and whether the file started over."""

    def __init__(self, path: Path, *, read_limit: int = READ_LIMIT) -> None:
        self.path = path
        self.read_limit = read_limit
        self._file: IO[bytes] | None = None
        self._inode: tuple[int, int] | None = None
        self.offset = 0

    def close(self) -> None:
        """Let go of the file."""
        if self._file is not None:
            self._file.close()
        self._file = None

    def poll(self) -> tuple[bytes, Restart | None]:
        """What was written since the last poll; ``restart`` when a new file is read from 0.

        When the file was rotated or replaced, what is returned is the old file's rest
        followed on the next poll by the new file (the restart is reported with it).
        """
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            return self._drain_old(), None
        identity = (stat.st_dev, stat.st_ino)
        if self._file is None:
            return self._open(identity, "opened")
        if identity != self._inode:
            rest = self._drain_old()
            if rest:
                return rest, None
            return self._open(identity, "rotated")
        if stat.st_size < self.offset:
            self._file.seek(0)
            self.offset = 0
            return self._read(), "truncated"
        if stat.st_size == self.offset:
            return b"", None
        return self._read(), None

    def _open(self, identity: tuple[int, int], why: Restart) -> tuple[bytes, Restart | None]:
        self.close()
        try:
            self._file = self.path.open("rb")
        except OSError:
            return b"", None
        self._inode = identity
        self.offset = 0
        return self._read(), why

    def _drain_old(self) -> bytes:
        """The rest of a file that was moved or deleted, then it is let go."""
        if self._file is None:
            return b""
        data = self._read()
        if not data:
            self.close()
            self._inode = None
        return data

    def _read(self) -> bytes:
        assert self._file is not None
        data = self._file.read(self.read_limit)
        self.offset += len(data)
        return data


@dataclass(frozen=True)
class LiveStatus:
    """What the live screen shows about the run being followed."""

    phase: str
    step: int | None
    total: int | None
    seconds_per_step: float | None
    left: str | None
    rates: tuple[float, ...]
    skip_count: int
    skip_steps: tuple[int | None, ...]
    ended: bool
    crashed: bool
    stopped: bool
    waiting: bool
    bytes_read: int


@dataclass(frozen=True)
class LiveUpdate:
    """One poll: the status, and the warnings that are new."""

    status: LiveStatus
    warnings: tuple[str, ...]
    restart: Restart | None
    scan: LogScan | None


class LiveJob:
    """A followed log and its live reading (see the module docstring)."""

    def __init__(
        self,
        path: Path,
        *,
        stall_s: float = STALL_S,
        slow_factor: float = SLOW_FACTOR,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self.follower = Follower(path)
        self.stall_s = stall_s
        self.slow_factor = slow_factor
        self.clock = clock
        self._reset()

    def _reset(self) -> None:
        self.scan = LiveScan()
        self.rates: deque[float] = deque(maxlen=RATES_KEPT)
        self._stable: list[float] = []
        self._last_step: int | None = None
        self._last_step_at = self.clock()
        self._left: str | None = None
        self._skips_seen = 0
        self._stall_warned = False
        self._slow_warned = False
        self._bytes = 0
        self._seen_any = False
        self._latest: LogScan | None = None

    def poll(self) -> LiveUpdate:
        """Read what is new and say what it means."""
        data, restart = self.follower.poll()
        warnings: list[str] = []
        if restart in ("rotated", "truncated"):
            self._reset()
            warnings.append(
                "The log started over (the job was restarted)"
                if restart == "truncated"
                else "A new log was started (the old one was rotated away): a new run"
            )
        if data:
            self._seen_any = True
            self._bytes += len(data)
            self.scan.feed(data)
            self._rate(data[-BAR_TAIL:])
            self._latest = self.scan.snapshot(str(self.path))
        scan = self._latest
        if scan is not None:
            warnings.extend(self._news(scan))
        return LiveUpdate(self.status(), tuple(warnings), restart, scan)

    def _rate(self, tail: bytes) -> None:
        """The s/it of the last training-bar redraw in ``tail``, once per new step."""
        matches = list(_RATE.finditer(tail))
        if not matches:
            return
        found = matches[-1]
        step = int(found[1])
        if step == self._last_step or step == 0:
            return
        value = float(found["x"])
        seconds = value if found["unit"] == b"s/it" else (1 / value if value else 0.0)
        self.rates.append(seconds)
        if step > STABLE_AFTER and len(self._stable) < 50:
            self._stable.append(seconds)
        self._left = found["left"].decode("ascii", "replace").strip() or None

    def _news(self, scan: LogScan) -> list[str]:
        news: list[str] = []
        new_skips = scan.skip_count - self._skips_seen
        if new_skips > 0:
            for banner in list(scan.skips)[-min(new_skips, len(scan.skips)) :]:
                # The bar shows the steps done: the one that ran out is the next.
                at = f"step {banner.step + 1}" if banner.step is not None else "a training step"
                news.append(
                    f"OOM at {at}: the toolkit skipped the batch ({banner.attempt}/3 in a row)"
                )
            self._skips_seen = scan.skip_count
        now = self.clock()
        if scan.last_step is not None and scan.last_step != self._last_step:
            self._last_step = scan.last_step
            self._last_step_at = now
            self._stall_warned = False
        ended = scan.crashed or scan.stopped
        if (
            not ended
            and scan.training_started
            and not self._stall_warned
            and now - self._last_step_at >= self.stall_s
        ):
            self._stall_warned = True
            minutes = (now - self._last_step_at) / 60
            news.append(
                f"Stalled: no new step for {minutes:.0f} min after step {self._last_step} "
                "while the log shows no end"
            )
        if len(self._stable) >= 5 and self.rates and not self._slow_warned:
            stable = statistics.median(self._stable)
            if stable > 0 and self.rates[-1] >= self.slow_factor * stable:
                self._slow_warned = True
                news.append(
                    f"Slowdown: {self.rates[-1]:.2f} s/it at step {self._last_step}, "
                    f"{self.rates[-1] / stable:.1f}x its stable {stable:.2f} s/it "
                    "(memory spilling to system RAM?)"
                )
        return news

    def status(self) -> LiveStatus:
        """The status as of the last poll."""
        scan = self._latest
        ended = scan is not None and (scan.crashed or scan.stopped or _finished(scan))
        return LiveStatus(
            phase=scan.phase if scan is not None else "unknown",
            step=scan.last_step if scan is not None else None,
            total=scan.total_steps if scan is not None else None,
            seconds_per_step=self.rates[-1] if self.rates else None,
            left=self._left,
            rates=tuple(self.rates),
            skip_count=scan.skip_count if scan is not None else 0,
            skip_steps=tuple(s.step for s in scan.skips) if scan is not None else (),
            ended=ended,
            crashed=scan is not None and scan.crashed,
            stopped=scan is not None and scan.stopped,
            waiting=not self._seen_any,
            bytes_read=self._bytes,
        )


def _finished(scan: LogScan) -> bool:
    """The training bar reached its total and the run did not fail."""
    return (
        scan.total_steps is not None
        and scan.last_step is not None
        and scan.last_step >= scan.total_steps
        and scan.exit_code in (None, 0)
    )


@dataclass(frozen=True)
class WatchTarget:
    """The log to follow, and the config it belongs to (a file, or a job of the UI's database).

    Attributes:
        log: The log to follow (it may not exist yet).
        config: The config file, when the job is a file.
        name: The job's name.
        db: The UI's jobs database, for a database job.
        job: The database job's name.
    """

    log: Path
    config: Path | None
    name: str
    db: Path | None = None
    job: str | None = None

    @property
    def can_open_wizard(self) -> bool:
        """Whether the wizard can be opened on the job (a config, or a database job)."""
        return self.config is not None or self.job is not None


def watch_db_target(db: Path, name: str, log: Path | None) -> WatchTarget:
    """A job of AI Toolkit's web UI: its folder's ``log.txt`` (it may not exist yet).

    Raises:
        WizardError: no such database or job, or a job config that cannot be read.
    """
    from oom_wizard.jobdb import find_db, job_document, load_job, training_roots
    from oom_wizard.jobdir import LOG_FILE

    found = find_db(db)
    job = load_job(found, name)
    roots = training_roots(job, job_document(job).tree)
    folder = next((root / name for root in roots if (root / name).is_dir()), roots[0] / name)
    return WatchTarget(log or folder / LOG_FILE, None, name, db=found, job=name)


@dataclass(frozen=True)
class JobRow:
    """The UI's row of a job: what the trainer last wrote there."""

    status: str
    step: int
    info: str


ROW_BUSY_S: Final = 0.2
"""Seconds a read of the UI's database may wait for a lock before it is skipped."""


def read_job_row(db: Path, name: str, *, busy_timeout: float = ROW_BUSY_S) -> JobRow | None:
    """The job's row, read-only, in one short autocommit read; None when the database is busy
    or unreadable (the next poll tries again: the UI's writers never wait on us for long)."""
    from oom_wizard.errors import WizardError
    from oom_wizard.jobdb import load_job

    try:
        job = load_job(db, name, busy_timeout=busy_timeout)
    except WizardError:
        return None
    return JobRow(job.status, job.step, job.info)


def watch_target(target: Path | None, log: Path | None) -> WatchTarget:
    """What ``watch`` follows for a config, a job folder, and/or ``--log``.

    A job folder's log is its ``log.txt`` (AI Toolkit writes it there; it may not exist yet).
    A config's is ``<training_folder>/<name>/log.txt`` as the toolkit resolves it (relative to
    the current folder), unless ``--log`` names one.

    Raises:
        WizardError: nothing to follow, or a config that cannot be read.
    """
    from oom_wizard.errors import WizardError
    from oom_wizard.jobdir import CLI_CONFIG, LOG_FILE, UI_CONFIG, locate_job

    if target is None:
        if log is None:
            raise WizardError("give the job's config, its output folder, or --log LOG")
        return WatchTarget(log, None, log.parent.name)
    if target.is_dir():
        config = locate_job(target).config
        return WatchTarget(log or target / LOG_FILE, config, target.name)
    if not target.is_file():
        raise WizardError("no such file or folder", file=target)
    from oom_wizard.document import load_document

    document = load_document(target)
    name = str(document.get(("config", "name"), target.stem))
    if log is not None:
        return WatchTarget(log, target, name)
    if target.name in (CLI_CONFIG, UI_CONFIG):
        return WatchTarget(target.parent / LOG_FILE, target, name)
    folder = document.get(("config", "process", 0, "training_folder"), "output")
    return WatchTarget(Path(str(folder)) / name / LOG_FILE, target, name)
