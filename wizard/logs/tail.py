"""Following a training log as it grows (``tail -F``), and what it says as it happens.

:class:`Follower` reads only the bytes that are new since the last poll. It copes with a log
that does not exist yet (it waits), with a job that restarts and truncates it, and with AI
Toolkit's rotation (the UI moves the old ``log.txt`` to ``logs/<n>_log.txt`` and starts a new
one): the rest of the old file is read first, then the new one from its start. It never
writes anything.

:class:`LiveJob` feeds those bytes to the log scanner's rules
(:class:`oom_wizard.logs.scan.LiveScan`, the same rules ``diagnose`` uses) and keeps what the
live screen shows: the phase, step/total, the time left, the s/it of every new training-bar
step, the skip banners, and the warnings as they happen: an OOM skip with its step; a stall (no
new step for ``stall_s`` seconds while the log shows no end); a slowdown (s/it ``slow_factor``
times its own stable stretch). When the run ends (a crash, a stop, or the end of training),
``ended`` says so.

What a crash means (its diagnosis, the first change, the wizard opened on it) is the
application layer's (:func:`oom_wizard.application.watching.diagnose_crash`): one rule for
``diagnose``, ``watch`` and ``run``; which log a job writes is
:mod:`oom_wizard.application.follow`'s.
"""

from __future__ import annotations

import os
import re
import stat
import statistics
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from oom_wizard.files import file_kind
from oom_wizard.logs.bars import RATE, TRAINING_POSTFIX
from oom_wizard.logs.result import LogScan, crash_step, crash_step_of
from oom_wizard.logs.scan import LiveScan

READ_LIMIT: Final = 4 << 20
"""Bytes read per poll at most (a huge backlog is read over several polls)."""
BEHIND_BYTES: Final = 8 << 20
"""A backlog larger than this (the log grows faster than it is read) is skipped: the reading
goes on from ``TAIL_BYTES`` before the end (what a crash says is at the end)."""
TAIL_BYTES: Final = 1 << 20
BINARY_LOOK: Final = 64 * 1024
"""Bytes of a file looked at to tell that it is not text (then it is not followed)."""
FINGERPRINT: Final = 256
"""Bytes before the read position compared at each poll: a file cut short and written again
past that position between two polls is a new file (its bytes there differ)."""
GRACE_S: Final = 30.0
"""Seconds of silence after a failure line before the run counts as crashed, when nothing in
the log says that the process ended: a trainer that catches an OOM goes on training."""
SETTLE_S: Final = 5.0
"""Seconds of silence after a job's own end line (AI Toolkit's ``Error running job``) with its
traceback not yet printed whole, before the run counts as crashed: the toolkit prints the
traceback, PyTorch's full message with the card's figures in it, after that line (stderr
reaches the log up to a second or two later), and the fix is sized from those figures."""
SKIP_TOLD_S: Final = 5.0
"""Seconds between two warnings that the reading fell behind (the skips in between are added)."""
RATES_KEPT: Final = 120
"""s/it figures kept for the sparkline."""
STABLE_AFTER: Final = 5
"""Steps left out of the stable stretch (the first steps are slow: compile, warm-up)."""
STALL_S: Final = 600.0
SLOW_FACTOR: Final = 3.0
BAR_TAIL: Final = 4096
"""Bytes at the end of new data searched for the last training-bar redraw."""
FEED_BYTES: Final = 64 * 1024
"""Bytes given to the scanner at a time (as ``diagnose`` reads a file)."""

Restart = Literal["opened", "rotated", "truncated"]


def looks_binary(sample: bytes) -> bool:
    """Whether ``sample`` is not text a trainer prints: a NUL byte, or many bytes that are
    neither UTF-8 text nor the controls a terminal log holds."""
    if not sample:
        return False
    if b"\x00" in sample:
        return True
    text = sample.decode("utf-8", "replace")
    odd = text.count("\ufffd") + sum(
        1 for char in text if char < " " and char not in "\t\n\r\x1b\x08\x0c"
    )
    return odd * 10 > len(text)


class Follower:
    """``tail -F`` of one path, polled: the new bytes, and whether the file started over.

    Only a regular file is read: the path is looked at (``stat``) before it is opened, and
    opened without waiting (``O_NONBLOCK``, then ``fstat``), so that a pipe, a device or a
    socket put in the log's place never blocks the reading (``refused`` says what it is).
    """

    def __init__(
        self,
        path: Path,
        *,
        read_limit: int = READ_LIMIT,
        behind_bytes: int = BEHIND_BYTES,
        tail_bytes: int = TAIL_BYTES,
    ) -> None:
        self.path = path
        self.read_limit = read_limit
        self.behind_bytes = behind_bytes
        self.tail_bytes = tail_bytes
        self._fd: int | None = None
        self._inode: tuple[int, int] | None = None
        self.offset = 0
        self._tail = b""
        """The last bytes read (up to ``FINGERPRINT``), to tell a file cut and written again."""
        self.refused: str | None = None
        """Why the path is not read (not a regular file), while it is not."""
        self.skipped = 0
        """Bytes of the last poll's backlog skipped to read the tail (0: none)."""
        self.old_path: Path | None = None
        """Where the file being drained after a rotation is now, when it can be told."""
        self.rotated_from: Path | None = None
        """Where the file read before the last rotation is now, when it could be told."""
        self._let_go = False
        """A file read before was moved or deleted and let go: the next one is a rotation."""

    def close(self) -> None:
        """Let go of the file."""
        if self._fd is not None:
            os.close(self._fd)
        self._fd = None

    def poll(self) -> tuple[bytes, Restart | None]:
        """What was written since the last poll; ``restart`` when a new file is read from 0.

        When the file was rotated or replaced, what is returned is the old file's rest (to
        its end) followed on a later poll by the new file (the restart is reported with it).
        """
        self.skipped = 0
        try:
            status = os.stat(self.path)
        except FileNotFoundError:
            return self._drain_old(), None
        except OSError:
            return self._drain_old(), None
        if not stat.S_ISREG(status.st_mode):
            rest = self._drain_old()
            self.refused = f"this is {file_kind(status.st_mode)}, not a log file: it is not read"
            return rest, None
        self.refused = None
        identity = (status.st_dev, status.st_ino)
        if self._fd is None:
            # A new file after one that was let go (the UI moved log.txt away, and a poll came
            # before the new one was there) is a rotation, as when both are seen in one poll.
            return self._open(identity, "rotated" if self._let_go else "opened")
        if identity != self._inode:
            rest = self._drain_old()
            if rest:
                return rest, None
            return self._open(identity, "rotated")
        if status.st_size < self.offset or not self._same_start():
            self._restart_at(0)
            return self._read(), "truncated"
        if status.st_size == self.offset:
            return b"", None
        self._catch_up(status.st_size)
        return self._read(), None

    def _same_start(self) -> bool:
        """Whether the bytes before the read position are still the ones read there."""
        assert self._fd is not None
        if not self._tail:
            return True
        return os.pread(self._fd, len(self._tail), self.offset - len(self._tail)) == self._tail

    def _catch_up(self, size: int) -> None:
        """Skip to the tail when the backlog has grown past ``behind_bytes``."""
        if size - self.offset > self.behind_bytes:
            start = size - self.tail_bytes
            self.skipped = start - self.offset
            self._restart_at(start)

    def _restart_at(self, offset: int) -> None:
        self.offset = offset
        self._tail = b""

    def _open(self, identity: tuple[int, int], why: Restart) -> tuple[bytes, Restart | None]:
        self.close()
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            return b"", None
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):  # replaced between the stat and the open
            os.close(fd)
            self.refused = f"this is {file_kind(status.st_mode)}, not a log file: it is not read"
            return b"", None
        self._fd = fd
        self._inode = (status.st_dev, status.st_ino)
        self._let_go = False
        self._restart_at(0)
        self.old_path = None
        if status.st_size > self.behind_bytes:
            self._catch_up(status.st_size)
        return self._read(), why

    def _drain_old(self) -> bytes:
        """The rest of a file that was moved or deleted, to its end; then it is let go."""
        if self._fd is None:
            return b""
        if self.old_path is None:
            self.old_path = _now_at(self._fd)
        data = self._read()
        if not data:
            self.close()
            self._inode = None
            self._let_go = True
            self.rotated_from = self.old_path
        return data

    def _read(self) -> bytes:
        assert self._fd is not None
        data = os.pread(self._fd, self.read_limit, self.offset)
        self.offset += len(data)
        self._tail = (self._tail + data)[-FINGERPRINT:]
        return data


def _now_at(fd: int) -> Path | None:
    """Where the open file ``fd`` is now (Linux), when it is still there."""
    try:
        where = Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return None
    return where if where.is_file() else None


@dataclass(frozen=True)
class LiveStatus:
    """What the live screen shows about the run being followed."""

    phase: str
    step: int | None
    total: int | None
    seconds_per_step: float | None
    left: str | None
    rates: tuple[float, ...]
    """The s/it of the last training steps, oldest first (at most :data:`RATES_KEPT`)."""
    rate_step: int | None
    """The step of the newest of ``rates`` (None: no reading yet)."""
    skip_count: int
    skip_steps: tuple[int | None, ...]
    ended: bool
    crashed: bool
    stopped: bool
    waiting: bool
    bytes_read: int
    failing: bool = False
    """The log shows a failure the job may still go on from (see :meth:`LiveJob.crashed`)."""
    crash_log: Path | None = None
    """The file of the run that crashed (the followed path, or where a rotation moved it)."""
    refused: str | None = None
    """Why the log is not read (not a regular file, or not text)."""
    crash_step: int | None = None
    """The step the crash was in (:func:`~oom_wizard.logs.result.crash_step`; None: no
    crash, or no step placed): ``step`` is the bar's count of the steps done."""


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
        grace_s: float = GRACE_S,
        settle_s: float = SETTLE_S,
        clock: Callable[[], float] = time.monotonic,
        follower: Follower | None = None,
        between: Callable[[], None] | None = None,
    ) -> None:
        self.path = path
        self.between = between
        """Called between two pieces fed to the scanner (a thread that reads lets others run)."""
        self.follower = follower or Follower(path)
        self.stall_s = stall_s
        self.slow_factor = slow_factor
        self.grace_s = grace_s
        self.settle_s = settle_s
        self.clock = clock
        self._refused: str | None = None
        self.busy = False
        self._skipped = 0
        self._skip_told_at = -SKIP_TOLD_S
        """The last poll read a full share: there is more to read at once."""
        self._crash_log: Path | None = None
        """The log of a run that crashed before a restart or a rotation (it stays crashed)."""
        self._reset()

    def _reset(self) -> None:
        self.scan = LiveScan()
        self.rates: deque[float] = deque(maxlen=RATES_KEPT)
        self.rate_step: int | None = None
        self._stable: list[float] = []
        self._last_step: int | None = None
        self._last_step_at = self.clock()
        self._last_data_at = self.clock()
        self._left: str | None = None
        self._skips_seen = 0
        self._stall_warned = False
        self._slow_warned = False
        self._failure_told = False
        self._bytes = 0
        self._seen_any = False
        self._latest: LogScan | None = None
        self._looked = 0
        self._binary = False
        self._source = self.path

    def poll(self) -> LiveUpdate:
        """Read what is new and say what it means."""
        pending = self._latest is not None and self._latest.crashed and not self._binary
        data, restart = (b"", None) if self._binary else self.follower.poll()
        self.busy = len(data) >= self.follower.read_limit
        warnings: list[str] = []
        if self.follower.refused != self._refused:
            self._refused = self.follower.refused
            if self._refused is not None:
                warnings.append(f"{self.path}: {self._refused}")
        if restart in ("rotated", "truncated"):
            if restart == "rotated" and pending and self._crash_log is None:
                # The run that failed has ended (the job was started again): it crashed.
                self._crash_log = self.follower.rotated_from or self._source
            self._reset()
            warnings.append(
                "The log started over (the job was restarted)"
                if restart == "truncated"
                else "A new log was started (the old one was rotated away): a new run"
            )
        elif self.follower.old_path is not None:
            self._source = self.follower.old_path
        if self.follower.skipped:
            self._skipped += self.follower.skipped
            if self.clock() - self._skip_told_at >= SKIP_TOLD_S:
                self._skip_told_at = self.clock()
                warnings.append(
                    f"Fell behind the log: skipped {self._skipped / 1e6:,.0f} MB to read its end"
                )
                self._skipped = 0
        if data and self._looked < BINARY_LOOK:
            sample = data[: BINARY_LOOK - self._looked]
            self._looked += len(sample)
            if looks_binary(sample):
                self._binary = True
                warnings.append(f"{self.path}: this is not a text log (binary bytes): not read")
                data = b""
        if data:
            self._seen_any = True
            self._bytes += len(data)
            self._last_data_at = self.clock()
            for start in range(0, len(data), FEED_BYTES):
                self.scan.feed(data[start : start + FEED_BYTES])
                if self.between is not None:
                    self.between()
            self._rate(data[-BAR_TAIL:])
            self._latest = self.scan.snapshot(str(self._source))
        scan = self._latest
        if scan is not None:
            warnings.extend(self._news(scan))
        return LiveUpdate(self.status(), tuple(warnings), restart, scan)

    def crashed(self, scan: LogScan) -> bool:
        """Whether the run crashed for good, its crash printed whole: it shows a failure and
        the process ended (an exit line, a kill), or the job's own end line (AI Toolkit's
        ``Error running job``) came and then the traceback's error line (or ``settle_s``
        seconds of silence: no traceback is coming), or nothing was written for ``grace_s``
        seconds since the failure. A trainer that catches an OOM and goes on prints the error
        too; one that ends prints its traceback after its end line."""
        if not scan.crashed:
            return False
        if scan.exit_code is not None:
            return True
        if "host_oom_kill" in scan.signals:  # SIGKILL cannot be caught: nothing goes on
            return True
        if scan.job_ended:
            return scan.failure_whole or self.clock() - self._last_data_at >= self.settle_s
        # A message quoted in printed text (a prompt that names an OOM), then a slow sample,
        # is no crash: only a failure shaped as one ends the run by silence.
        return scan.failure_shaped and self.clock() - self._last_data_at >= self.grace_s

    def _rate(self, tail: bytes) -> None:
        """The s/it of the last training-bar redraw in ``tail``, once per new step."""
        found = _last_training_rate(tail)
        if found is None:
            return
        step = int(found["n"])
        if step == self._last_step or step == 0:
            return
        value = float(found["rate"])
        seconds = value if found["unit"] == b"s/it" else (1 / value if value else 0.0)
        self.rates.append(seconds)
        self.rate_step = step
        if step > STABLE_AFTER and len(self._stable) < 50:
            self._stable.append(seconds)
        self._left = found["left"].decode("ascii", "replace").strip() or None

    def _news(self, scan: LogScan) -> list[str]:
        news: list[str] = []
        new_skips = scan.skip_count - self._skips_seen
        if new_skips > 0:
            for banner in list(scan.skips)[-min(new_skips, len(scan.skips)) :]:
                step = crash_step_of(banner.step, "training")
                at = f"step {step}" if step is not None else "a training step"
                news.append(
                    f"OOM at {at}: the toolkit skipped the batch ({banner.attempt}/3 in a row)"
                )
            self._skips_seen = scan.skip_count
        if (
            scan.crashed
            and not scan.job_ended
            and not self._failure_told
            and not self.crashed(scan)
        ):
            self._failure_told = True
            error = scan.exception.text if scan.exception is not None else "an error"
            news.append(
                f"{error[:120]} (the job may go on: it counts as a crash when it ends, "
                f"or after {self.grace_s:.0f} s without a new line)"
            )
        elif not scan.crashed:
            self._failure_told = False
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
        crashed = self._crash_log is not None or (scan is not None and self.crashed(scan))
        # A failure printed is watched for grace_s of silence; then the wait is over, a crash
        # or not (a quoted message is not one), and the "waiting" line with it.
        quiet_s = self.clock() - self._last_data_at
        failing = scan is not None and scan.crashed and not crashed and quiet_s < self.grace_s
        ended = crashed or (scan is not None and (scan.stopped or _finished(scan)))
        return LiveStatus(
            phase=scan.phase if scan is not None else "unknown",
            step=scan.last_step if scan is not None else None,
            total=scan.total_steps if scan is not None else None,
            seconds_per_step=self.rates[-1] if self.rates else None,
            left=self._left,
            rates=tuple(self.rates),
            rate_step=self.rate_step,
            skip_count=scan.skip_count if scan is not None else 0,
            skip_steps=tuple(s.step for s in scan.skips) if scan is not None else (),
            ended=ended,
            crashed=crashed,
            stopped=scan is not None and scan.stopped,
            waiting=not self._seen_any,
            bytes_read=self._bytes,
            failing=failing,
            crash_log=self._crash_log or (self._source if crashed else None),
            refused=self._refused
            or ("this is not a text log (binary bytes): not read" if self._binary else None),
            crash_step=crash_step(scan) if crashed and scan is not None else None,
        )


def _last_training_rate(tail: bytes) -> re.Match[bytes] | None:
    """The last redraw of the training bar in ``tail`` (its rate and the time left; its
    postfix reports a learning rate or a loss), or None."""
    last = None
    for found in RATE.finditer(tail):
        close = tail.find(b"]", found.end())
        if TRAINING_POSTFIX.search(tail, found.end(), close if close >= 0 else len(tail)):
            last = found
    return last


def _finished(scan: LogScan) -> bool:
    """The training bar reached its total and the run did not fail."""
    return (
        scan.total_steps is not None
        and scan.last_step is not None
        and scan.last_step >= scan.total_steps
        and scan.exit_code in (None, 0)
    )
