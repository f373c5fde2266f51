"""Read a training log in bounded memory and say what it shows.

A log is AI Toolkit's ``log.txt`` (stdout and stderr of the job in one file), a CLI ``-l`` log,
or terminal output pasted into a file. It may be gigabytes of progress-bar redraws, so it is
never read whole: :func:`scan_log` streams it in fixed-size binary chunks and cuts them into
*segments* on both ``\\r`` (tqdm redraws) and ``\\n``. Line numbers count ``\\n`` only, as an
editor shows them, so every redraw of a bar shares its line's number.

Three things keep this fast. Each chunk is first searched with one byte expression, the
*trigger* (:mod:`oom_wizard.logs.read`), built from the marker patterns themselves: it finds every
line where some pattern could match, every progress bar and every line with an ANSI code; the
other lines are only counted. A progress-bar segment (it holds ``%|``) costs a few byte
comparisons: a redraw of the same bar as the previous segment is only remembered, and only the
last training-bar redraw is ever parsed. Every other segment the trigger found is decoded
(``errors="replace"``), freed of ANSI codes and line prefixes, and tried against the few
patterns whose fixed text it holds; only a segment that matches one is looked at rule by rule.
``scan_stream(..., prefilter=False)`` skips both tests (every segment through every rule):
the tests compare the two.

Reading reports its progress and can be cancelled between two chunks (``progress`` and
``cancelled`` of :func:`scan_log`, or a :func:`oom_wizard.logs.read.watching` block around a
caller).

What the lines mean lives in ``presets/log_markers.yaml`` (:mod:`oom_wizard.logs.markers`): it
is a description of AI Toolkit's output, like every other fact about the toolkit. The formats of
PyTorch's allocator message are code (:mod:`oom_wizard.logs.allocator`), and so are tqdm's bars
(:mod:`oom_wizard.logs.bars`). This module is the reading loop: the chunks, the segments, the
gate, and :class:`_Scanner`, which feeds each run's state (:mod:`oom_wizard.logs.run`) and
returns the :class:`~oom_wizard.logs.result.LogScan`.

The state kept while reading is bounded: the current run's phase, its last training-bar
redraw, counters, the last few skip banners and a ring of the last evidence lines. A new run
(``Running 1 job``, the job banner, or the config printed as JSON) starts fresh state, so a file
holding several runs is diagnosed on its last one.

Beyond single lines, the run as a whole says: whether it finished (a result line, the bar at its
total) or just stops inside a phase (``ends_open``, and ``stall`` when it stops on a bar with no
progress); whether the training bar's s/it grew several-fold after a stable stretch
(``sysmem_spill``: the driver spilling VRAM into system memory); whether a bar first seen past
step 0 is a resume or an excerpt of a longer run (tqdm's elapsed time against its rate); which
phase a traceback's frames, or the calls under them, point to; and the memory fields of the
process config AI Toolkit prints at the start (``config_dump``), to tell whether the log is
from the config given. Every pattern involved is data in the marker table.
"""

from __future__ import annotations

import bisect
import codecs
import dataclasses
import io
import json
import os
import re
import stat
from collections import deque
from collections.abc import Iterator, Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any, Final

from oom_wizard.errors import LogError
from oom_wizard.logs.allocator import oom_figures, parse_allocator_message
from oom_wizard.logs.bars import (
    BAR,
    BYTE_RATE,
    PCT_DIGITS,
    RATE,
    TRAINING_POSTFIX,
    ZERO_BAR,
    bar_lines,
    count_bytes,
    elapsed_seconds,
    few_redraws,
    find_bar,
    parse_bar,
    without_repeats,
)
from oom_wizard.logs.lines import clean, shorten
from oom_wizard.logs.markers import CompiledMarkers, LogMarkers, load_log_markers
from oom_wizard.logs.read import (
    Cancelled,
    Progress,
    Readable,
    Watch,
    WatchedReader,
    current_watch,
)
from oom_wizard.logs.result import EvidenceLine, LogScan, SkipBanner
from oom_wizard.logs.run import RunState
from oom_wizard.logs.signals import (
    FATAL_SIGNALS,
    HOST_SIGNALS,
    SIGNALS,
    STOP_SIGNALS,
    BarKind,
    FramePhase,
    Phase,
)

CHUNK_BYTES: Final = 64 * 1024
"""Bytes read at a time. Every chunk is copied a few times (joined to the last one's unfinished
line, cut at its last line end, read by the gate): under the C library's threshold for a
mapping of its own (128 KB), those copies reuse warm memory; chunks of 1 MB each fault in
fresh pages (~90,000 page faults on a 300 MB log, a sixth of the time)."""
MAX_SEGMENT_BYTES: Final = 64 * 1024
"""A segment longer than this (a binary file, a line with no end) is cut; the rest is skipped."""
OOM_MESSAGE_TAIL: Final = 3
"""Segments after an OOM line that may still hold its numbers (a message wrapped when pasted)."""
OOM_TEXT_MAX: Final = 4000
"""An allocator message and the lines it was wrapped onto are read together up to this length."""
_BAR_CACHE_LIMIT: Final = 1024
RATE_WINDOW: Final = 32 * 1024
"""Bytes of a stretch of training-bar lines between text lines of which one redraw's rate is
read (``_Scanner._skip_redraws``): a log that warns at every step draws a bar line every few
lines, and only the first, the last, and one per window change what the run shows."""
_NO_BAR: Final = b"\n"
"""What a segment starts with when it repeats the previous bar: never, after a text segment."""
RESUME_ELAPSED_SHARE: Final = 0.25
"""A training bar first seen past step 0 whose elapsed time is below this share of
``n × s/it`` cannot have made those steps: it was created there, a resume. More, and the run
started before the log does (an excerpt): not a resume."""
RESUME_MAX_ELAPSED_S: Final = 60.0
"""Without a rate on the bar, a resume is one whose first redraw shows at most this elapsed."""
MAX_DUMP_LINES: Final = 4000
"""The printed process config longer than this is not read (it is not the toolkit's dump)."""
_NOT_SEPARATOR = re.compile(rb"[^\r\n]")


# --- reading ------------------------------------------------------------------------------------


def scan_log(
    path: str | Path,
    *,
    markers: LogMarkers | None = None,
    progress: Progress | None = None,
    cancelled: Cancelled | None = None,
) -> LogScan:
    """Read the log at ``path`` and describe its last run.

    Args:
        path: The log file.
        markers: The marker table (default: the shipped one).
        progress: Called after each chunk with (bytes read, file size).
        cancelled: Called after each chunk; when it returns True the reading stops.
            Without either, those of an enclosing :func:`oom_wizard.logs.read.watching` block.

    Raises:
        LogError: the file is missing, a folder, or cannot be read.
        ScanCancelled: ``cancelled`` returned True.
    """
    path = Path(path)
    if path.is_dir():
        raise LogError("this is a folder, not a log; pass the log file (log.txt)", file=path)
    watch = Watch(progress, cancelled) if progress or cancelled else current_watch()
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            os.close(fd)
            kind = "a pipe (FIFO)" if stat.S_ISFIFO(status.st_mode) else "a device or socket"
            raise LogError(
                f"this is {kind}, not a log file: reading it could wait or go on forever; "
                "pass the log file (log.txt)",
                file=path,
            )
        with os.fdopen(fd, "rb") as stream:
            scan = scan_stream(
                stream, source=str(path), markers=markers, total=status.st_size, watch=watch
            )
            return dataclasses.replace(scan, modified=status.st_mtime)
    except FileNotFoundError:
        raise LogError("no such log file", file=path) from None
    except OSError as exc:
        raise LogError(f"cannot read this log: {exc.strerror or exc}", file=path) from None


def scan_text(text: str | bytes, *, markers: LogMarkers | None = None) -> LogScan:
    """Describe a log held in memory (pasted text, a test)."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    return scan_stream(io.BytesIO(data), source=None, markers=markers)


def scan_stream(
    stream: Readable,
    *,
    source: str | None = None,
    markers: LogMarkers | None = None,
    chunk_bytes: int = CHUNK_BYTES,
    total: int = 0,
    watch: Watch | None = None,
    prefilter: bool = True,
) -> LogScan:
    """Describe the last run of the log read from the binary ``stream``.

    Args:
        stream: The log, opened in binary mode; it is read once, in chunks.
        source: The file name to report.
        markers: The marker table (default: the shipped one).
        chunk_bytes: Bytes per read.
        total: The stream's size, for ``watch`` (0: unknown).
        watch: Told of each chunk read, and asked whether to stop (:class:`Watch`).
        prefilter: Read only the lines the cheap test lets through (the default). False
            sends every segment through every rule: slow, and only there to check the test.

    Raises:
        ScanCancelled: ``watch`` asked to stop.
    """
    if watch is not None:
        stream = WatchedReader(stream, total, watch)
    scanner = _Scanner((markers or load_log_markers()).compiled(), prefilter=prefilter)
    for block in iter_blocks(stream, chunk_bytes):
        scanner.feed(block)
    return scanner.result(source)


def iter_blocks(stream: Readable, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
    """The log as UTF-8 blocks that each end on a ``\\r`` or ``\\n`` (the last may not).

    A UTF-16 log (Windows PowerShell redirection writes one) is transcoded. A segment longer
    than ``MAX_SEGMENT_BYTES`` is cut there and ended with ``\\r`` (which keeps the line
    number); the rest of it is skipped.
    """
    head = stream.read(2)
    if head in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        chunks: Iterator[bytes] = _utf16_chunks(stream, head, chunk_bytes)
    else:
        chunks = _plain_chunks(stream, head, chunk_bytes)
    carry = b""
    skipping = False
    first = True
    for data in chunks:
        if first:
            data = data.removeprefix(codecs.BOM_UTF8)
            first = False
        if skipping:
            cut = _first_separator(data)
            if cut < 0:
                continue
            data, skipping = data[cut:], False
        if carry:
            data = carry + data
        cut = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
        carry = data[cut:]
        if cut:
            yield data[:cut]
        if len(carry) > MAX_SEGMENT_BYTES:
            yield carry[:MAX_SEGMENT_BYTES] + b"\r"
            carry, skipping = b"", True
    if carry:
        yield carry


def _plain_chunks(stream: Readable, head: bytes, size: int) -> Iterator[bytes]:
    data = head + stream.read(size)
    while data:
        yield data
        data = stream.read(size)


def _utf16_chunks(stream: Readable, head: bytes, size: int) -> Iterator[bytes]:
    decoder = codecs.getincrementaldecoder("utf-16")(errors="replace")
    data = head + stream.read(size)
    while data:
        yield decoder.decode(data).encode("utf-8")
        data = stream.read(size)
    yield decoder.decode(b"", final=True).encode("utf-8")


def _first_separator(data: bytes) -> int:
    found = [i for i in (data.find(b"\n"), data.find(b"\r")) if i >= 0]
    return min(found) if found else -1


class _Scanner:
    """Feeds blocks of the log through the runs' state; see the module docstring."""

    def __init__(self, patterns: CompiledMarkers, *, prefilter: bool = True) -> None:
        self._p = patterns
        self._prefilter = prefilter
        trigger = patterns.trigger if prefilter else None
        self._trigger = trigger
        self._search = trigger.search if trigger is not None else None
        self._gate = patterns.gate if trigger is not None else None
        self._cold = False
        """Whether the line being fed lies outside the gate's hot pieces."""
        self._line = 1
        self._runs = 0
        self._run = self._new_run(1, header=False)
        self._repeat = _NO_BAR
        self._head_training = False
        self._train_prefix = b""
        self._kinds: dict[bytes, BarKind] = {}
        self._dump_line: int | None = None
        self._dump: list[str] | None = None
        self._ends_with_newline = True  # an empty log has no lines

    def _new_run(self, line: int, *, header: bool) -> RunState:
        self._runs += 1
        return RunState(start_line=line, header=header, bar_steps=self._p.bar_steps)

    def feed(self, block: bytes) -> None:
        """Read one block (it ends on a separator) and carry the line count over."""
        if self._search is None:
            self._feed_lines(block)
        else:
            self._feed_triggered(block, self._search)
        self._ends_with_newline = block.endswith(b"\n")

    def _feed_triggered(self, block: bytes, trigger: re.Pattern[bytes]) -> None:
        """Only the lines where the trigger finds something go through the rules.

        The others cannot match any pattern (see :mod:`oom_wizard.logs.read`): they are counted.
        :meth:`_reads_next_line` says when the next line is read whatever it holds. With the
        gate, the trigger only searches the gate's hot pieces; elsewhere only the bar lines are
        read (:meth:`_feed_cold`).
        """
        pos, size = 0, len(block)
        search = trigger.search
        bars: list[tuple[int, int]] | None
        if self._gate is not None and few_redraws(block):
            bars, hot = None, self._gate.hot(block)
        elif self._gate is not None:
            bars = bar_lines(block)
            hot = self._hot_pieces(block, bars)
        else:
            bars, hot = [], [(0, size)]
        index, pieces = 0, len(hot)
        while pos < size:
            if self._reads_next_line():
                end = block.find(b"\n", pos) + 1 or size
                self._feed_lines(block[pos:end])
                pos = end
                continue
            while index < pieces and hot[index][1] <= pos:
                index += 1
            if not (index < pieces and hot[index][0] <= pos):
                limit = hot[index][0] if index < pieces else size
                if bars is None:
                    pos = self._feed_cold_lines(block, pos, limit)
                else:
                    pos = self._feed_cold(block, pos, limit, bars)
                continue
            limit = hot[index][1]
            match = search(block, pos, limit)
            if match is None:
                self._skip(block, pos, limit)
                pos = limit
                continue
            start = block.rfind(b"\n", pos, match.start()) + 1 or pos
            end = block.find(b"\n", match.end()) + 1 or size
            self._skip(block, pos, start)
            self._feed_lines(block[start:end])
            pos = end

    def _hot_pieces(self, block: bytes, bars: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """The pieces of ``block`` (whole lines, in order) where some pattern could match.

        The gate is shown the lines without a bar, and of each bar line (``bars``) only its
        first segment, the text before its first ``\\r``: the rest is bar redraws, which the
        rules read anyway (a bar line of 275 KB of redraws in the bar benchmark, 40 % of the
        mixed one's bytes), and whatever text it holds goes through the trigger when the line
        is read (:meth:`_feed_bar_line`). A bar line whose first segment is hot is hot whole.
        """
        assert self._gate is not None
        size = len(block)
        parts: list[bytes] = []
        spans: list[tuple[int, int, int, bool]] = []
        """(where a part starts in the gate's text, its start and end in ``block``, whether it
        stands for a whole bar line)."""
        shown = pos = 0
        for start, end in bars:
            if pos < start:
                parts.append(block[pos:start])
                spans.append((shown, pos, start, False))
                shown += start - pos
            cut = block.find(b"\r", start, end)
            part = block[start:end] if cut < 0 else block[start:cut] + b"\n"
            parts.append(part)
            spans.append((shown, start, end, True))
            shown += len(part)
            pos = end
        if pos < size:
            parts.append(block if not pos else block[pos:])
            spans.append((shown, pos, size, False))
        text = parts[0] if len(parts) == 1 else b"".join(parts)
        pieces: list[tuple[int, int]] = []
        for low, high in self._gate.hot(text):
            at = bisect.bisect_right(spans, low, key=itemgetter(0)) - 1
            while at < len(spans) and spans[at][0] < high:
                offset, start, end, whole = spans[at]
                if not whole:
                    start, end = (
                        start + max(low - offset, 0),
                        start + min(high - offset, end - start),
                    )
                if pieces and pieces[-1][1] >= start:
                    pieces[-1] = (pieces[-1][0], max(pieces[-1][1], end))
                else:
                    pieces.append((start, end))
                at += 1
        return pieces

    def _feed_cold(self, block: bytes, pos: int, limit: int, bars: list[tuple[int, int]]) -> int:
        """The lines from ``pos`` to ``limit``, outside the gate's hot pieces: only the bar lines
        among them (``bars``) are read (:meth:`_feed_bar_line`), the others only counted.

        Return where it stopped: at ``limit``, or after a bar line that asks for the next line
        whatever it holds (:meth:`_reads_next_line`: text after its first segment matched).
        """
        at = bisect.bisect_left(bars, pos, key=itemgetter(0))
        while at < len(bars) and (start := bars[at][0]) < limit:
            end = bars[at][1]
            self._skip(block, pos, start)
            self._feed_bar_line(block, start, end)
            pos = end
            at += 1
            if self._reads_next_line():
                return pos
        self._skip(block, pos, limit)
        return limit

    def _feed_cold_lines(self, block: bytes, pos: int, limit: int) -> int:
        """:meth:`_feed_cold` for a block whose bar lines hold one redraw or two (the gate saw
        all of it): its bar lines are found here. While the training bar runs, most of them are
        not read at all (:meth:`_skip_redraws`)."""
        run = self._run
        rates: tuple[float | None, int, tuple[bytes, bytes] | None] = (None, 0, None)
        while True:
            window: tuple[int, int, int] | None = None
            if self._steady_training():
                line, skipped = self._line, self._skip_redraws(block, pos, limit)
                if skipped != pos and run.spill_step is None:
                    window = (pos, skipped, line)
                    rates = (run.best_rate, run.rate_readings, run.steady_rate)
                pos = skipped
            found = find_bar(block, pos, limit)
            if found < 0:
                self._skip(block, pos, limit)
                return limit
            start = block.rfind(b"\n", pos, found) + 1 or pos
            end = block.find(b"\n", found) + 1 or len(block)
            self._skip(block, pos, start)
            self._feed_bar_line(block, start, end)
            if window is not None and run.spill_step is not None and self._head_training:
                # The window's reading found the slowdown: its first redraw is in the window.
                run.best_rate, run.rate_readings, run.steady_rate = rates
                self._read_window(block, window)
            pos = end
            if self._reads_next_line():
                return pos

    def _read_window(self, block: bytes, window: tuple[int, int, int]) -> None:
        """Read again the rate of every redraw of a window :meth:`_skip_redraws` skipped, then
        the redraw after it, as if none had been skipped: the step of a slowdown first seen
        at the end of a window is that of its first redraw."""
        run = self._run
        if run.evidence and run.evidence[-1].tag == "sysmem_spill":
            run.evidence.pop()
        run.spill_step = None
        start, stop, line = window
        counted = start
        while run.spill_step is None and (cut := block.find(b"\r", start, stop)) >= 0:
            ends = [block.find(b"\r", cut + 1, stop), block.find(b"\n", cut, stop)]
            end = min((i for i in ends if i >= 0), default=stop)
            line += count_bytes(block, b"\n", counted, cut)
            counted = cut
            run.rate_reading(block[cut + 1 : end], line)
            start = cut + 1
        if run.spill_step is None and run.train_bar is not None:
            run.rate_reading(run.train_bar, run.train_bar_line)

    def _steady_training(self) -> bool:
        """Whether a training-bar redraw would only be remembered and its rate read: training
        runs, nothing is failing or pending, and the next line is not asked for."""
        run = self._run
        return bool(
            self._train_prefix
            and run.training_started
            and run.phase == "training"
            and run.progressed
            and not run.failing
            and not run.frames_seen
            and not run.expect_call
            and not self._cold
            and not self._reads_next_line()
        )

    def _skip_redraws(self, block: bytes, pos: int, limit: int) -> int:
        """Skip the training-bar lines of the next ``RATE_WINDOW`` bytes from ``pos`` but the
        last, while :meth:`_steady_training`: return where that last one's line starts (``pos``
        when nothing was skipped). The caller reads that line as any other bar line.

        A stretch is skipped when it holds only cold text lines (no ``%|``) and lines of text
        and one or more redraws of the training bar with the head of its first redraw (every
        ``\\r`` starts one, every ``%|`` is theirs; counted at C speed). Such a redraw only
        replaces the last one (which the next one read replaces again) and gives a reading
        of the rate: one is read per window, the last one's (:meth:`RunState.rate_reading`).
        """
        cut = block.find(b"\r", pos, limit)
        mark = block.find(b"%|", cut, limit) if cut >= 0 else -1
        if mark < 0 or block.find(b"\n", cut, mark) >= 0:
            return pos
        needle = block[cut:mark] + b"%|"
        if self._kinds.get(needle[1:-2]) != "training":
            return pos
        end = block.find(b"\n", min(pos + RATE_WINDOW, limit - 1), limit) + 1 or limit
        last = block.rfind(needle, pos, end)
        stop = block.rfind(b"\n", pos, last) + 1 or pos
        redraws = block.count(needle, pos, stop)
        if not redraws or count_bytes(block, b"\r", pos, stop) != redraws:
            return pos
        if (
            count_bytes(block, b"%", pos, stop) != redraws
            and block.count(b"%|", pos, stop) != redraws
        ):
            return pos
        self._line += count_bytes(block, b"\n", pos, stop)
        # The state of the last redraw skipped, and the text after it.
        after = block.find(b"\n", block.rfind(needle, pos, stop)) + 1
        text = after < stop and _NOT_SEPARATOR.search(block, after, stop) is not None
        self._repeat, self._head_training = (_NO_BAR, False) if text else (needle[1:], True)
        return stop

    def _feed_bar_line(self, block: bytes, start: int, end: int) -> None:
        """A bar line of a cold stretch. The gate saw its first segment (no pattern matches it:
        as :meth:`_text` would after its prefilter said no, a text segment there only ends the
        redraws); its other segments are read as on any line."""
        cut = block.find(b"\r", start, end)
        if cut < 0:  # a bar on its own line: the gate saw all of it
            self._cold = True
            try:
                self._feed_lines(block[start:end])
            finally:
                self._cold = False
        elif cut > start and find_bar(block, start, cut) < 0:
            self._repeat, self._head_training = _NO_BAR, False
            if not self._one_run(block, cut + 1, end):
                self._feed_lines(block[cut + 1 : end])
        else:
            self._feed_lines(block[start:end])

    def _one_run(self, block: bytes, start: int, end: int) -> bool:
        """Read the rest of a line (``block[start:end]``, after its text segment) as
        :meth:`_feed_lines` would when it is the common case, and say so: a run of redraws of one
        bar (each ends with ``]``, every ``\\r`` starts the same head). Only its first redraw (a
        head the previous segment did not show) and its last (the one to remember) are read;
        the ones between change nothing that the last does not change again (see
        :func:`without_repeats`)."""
        stop = end - 1 if block.endswith(b"\n", start, end) else end
        first = block.find(b"\r", start, stop)
        if first < 0 or not block.endswith(b"]", start, stop):
            return False
        mark = block.find(b"%|", start, first)
        if mark < 0:
            return False
        head = b"]\r" + block[start : mark + 2]
        if block.count(head, start, stop) != count_bytes(block, b"\r", start, stop):
            return False
        line_no = self._line
        self._bar(block[start:first], mark - start, line_no)
        self._remember(block[block.rfind(b"\r", start, stop) + 1 : stop], line_no)
        if stop != end:
            self._line = line_no + 1
        return True

    def _skip(self, block: bytes, start: int, end: int) -> None:
        """Lines no rule reads: counted; and like any other text between two bar redraws,
        they end the redraws (the next bar is drawn anew, as when every line is read)."""
        self._line += count_bytes(block, b"\n", start, end)
        if self._repeat is not _NO_BAR and _NOT_SEPARATOR.search(block, start, end):
            self._repeat, self._head_training = _NO_BAR, False

    def _reads_next_line(self) -> bool:
        """Whether the next line goes to the rules whatever it holds: the rest of an allocator
        message, the config dump (its opening brace, then every line to its closing one), or
        the source line under a traceback frame (the call it makes may name the phase)."""
        return bool(
            self._dump_line is not None
            or self._dump is not None
            or self._run.oom_tail
            or self._run.expect_call
        )

    # The hot loop: keep it small. A bar redraw that repeats the previous segment's head is
    # only remembered; everything else goes through _bar or _text.
    def _feed_lines(self, block: bytes) -> None:
        """Every segment of ``block`` (whole lines, or the log's last one) through the rules."""
        lines = block.split(b"\n") if block.find(b"\n") != len(block) - 1 else (block[:-1], b"")
        last_index = len(lines) - 1
        line_no = self._line
        repeat = self._repeat
        pending: bytes | None = None
        pending_line = 0
        for index, line in enumerate(lines):
            if line.endswith(b"\r"):  # a block cut inside a line of redraws
                line = line.rstrip(b"\r")  # the empty segments after it do nothing
            if line:
                redraws = count_bytes(line, b"\r")
                if not redraws:
                    segs: Sequence[bytes] = (line,)
                elif redraws > 2 and self._only_training_redraws(line, redraws):
                    segs = (line[line.rfind(b"\r") + 1 :],)
                elif redraws > 2:
                    segs = without_repeats(line, redraws)
                else:
                    segs = line.split(b"\r")
                for seg in segs:
                    if seg.startswith(repeat) and seg.endswith(b"]"):
                        pending, pending_line = seg, line_no
                        continue
                    if not seg:
                        continue
                    if pending is not None:
                        self._remember(pending, pending_line)
                        pending = None
                    pos = seg.find(b"%|")
                    if pos >= 0:
                        self._bar(seg, pos, line_no)
                    else:
                        self._text(seg, line_no)
                    repeat = self._repeat
                # A line's last redraw is read at its end, as when its line is fed alone.
                if pending is not None:
                    self._remember(pending, pending_line)
                    pending = None
            if index != last_index:
                line_no += 1
        self._line = line_no

    def _only_training_redraws(self, line: bytes, redraws: int) -> bool:
        """Whether every ``\\r`` segment of ``line`` is a clean redraw of the training bar.

        Then only the last one matters: the line is not split at all. Not before the run's
        first training bar, whose first value tells a resume.
        """
        prefix = self._train_prefix
        if not prefix or not line.startswith(prefix) or not self._run.training_started:
            return False
        # Every \r but the first must close a bar ("]") and open the training bar again.
        return line.endswith(b"]") and line.count(b"]" + prefix) == redraws - 1

    def _remember(self, seg: bytes, line: int) -> None:
        """The last redraw of a bar on its line: a redraw is progress (a stuck bar is not
        redrawn); the training bar's rate is read here, once per line."""
        run = self._run
        run.zero_bar_line = None
        if self._head_training:
            if run.oom_pending:
                run.bar_after_oom(seg)
            run.train_bar, run.train_bar_line = seg, line
            run.rate_reading(seg, line)

    def _bar(self, seg: bytes, pos: int, line: int) -> None:
        """A progress-bar segment whose head differs from the previous segment's."""
        end = seg.find(b"]", pos)  # tqdm's bracket closes first; the text after may hold more
        if 0 <= end < len(seg) - 1 and seg[end + 1 :].strip():
            self._bar(seg[: end + 1], pos, line)
            self._text(seg[end + 1 :], line)
            return
        head = seg[:pos]
        kind = self._kinds.get(head)
        if kind is None:
            kind = self._classify(head, seg)
        self._repeat, self._head_training = head + b"%|", kind == "training"
        if kind == "ignore":
            return
        run = self._run
        if kind == "training" and run.oom_pending:
            run.bar_after_oom(seg)
        else:
            run.progress()
        run.zero_bar_line = line if b"0/" in seg and ZERO_BAR.search(seg) else None
        if kind == "training":
            self._training_bar(seg, line)
        elif kind == "unnamed":
            if run.training_started:
                run.enter("periodic_sample", line, clean(seg))
                run.sample_rate_reading(seg, line)
        elif kind == "sample":
            # A sample bar that carries the training loss is drawn during training.
            during = run.training_started or TRAINING_POSTFIX.search(seg) is not None
            phase: Phase = "periodic_sample" if during else "baseline_sample"
            run.enter(phase, line, clean(seg))
            run.sample_rate_reading(seg, line)
        else:
            run.enter(kind, line, clean(seg))
        if not seg.endswith(b"]") and not self._cold:
            self._open_postfix(seg, pos, line)

    def _open_postfix(self, seg: bytes, pos: int, line: int) -> None:
        """A bar segment left open (no closing ``]``, which tqdm always draws after its
        postfix): the trainer printed a message into it (``Exception saving sample: CUDA out of
        memory ...``), or the paste stops there. Its bracket part is read for signals."""
        start = seg.find(b"[", pos)
        if start < 0:
            return
        text = clean(seg[start + 1 :])
        if self._p.prefilter.search(text):
            self._signals(text, line)

    def _classify(self, head: bytes, seg: bytes) -> BarKind:
        """What a bar with this head (description and percentage) is; cached per head."""
        if len(self._kinds) >= _BAR_CACHE_LIMIT:
            self._kinds.clear()
        desc = self._unprefixed(clean(head.rstrip(PCT_DIGITS))).strip().removesuffix(":")
        kind: BarKind
        if not desc.strip():
            kind = "unnamed"
        elif any(pattern.search(desc.strip()) for pattern in self._p.training_bars):
            kind = "training"  # a trainer's own name for its training bar, counts shown or not
        elif parse_bar(clean(seg)) is None or BYTE_RATE.search(seg):
            kind = "ignore"  # sizes such as 4.50G/9.99G, or a rate in bytes: a download
        elif named := next((k for pattern, k in self._p.named_bars if pattern.search(desc)), None):
            kind = named
        elif TRAINING_POSTFIX.search(seg) or self._p.bar_step_postfix.search(clean(seg)):
            kind = "training"  # whatever the job is called, only training reports a loss
        else:
            desc = desc.strip()
            kind = next((k for pattern, k in self._p.bars if pattern.search(desc)), "training")
        if kind == "training":
            self._train_prefix = b"\r" + head.rstrip(PCT_DIGITS)
        self._kinds[head] = kind
        return kind

    def _unprefixed(self, text: str) -> str:
        """``text`` without the line prefixes of the marker table (rank tags, timestamps)."""
        if self._p.prefix is not None and (match := self._p.prefix.match(text)):
            return text[match.end() :]
        return text

    def _training_bar(self, seg: bytes, line: int) -> None:
        run = self._run
        if run.train_bar is not None and not seg.endswith(b"]") and BAR.match(clean(seg)) is None:
            return  # drawn without its count (a cut paste): the last one that had it stands
        run.train_bar, run.train_bar_line = seg, line
        if not run.training_started:
            run.training_started = True
            step, _ = run.train_step()
            run.first_step = step
            if step and not run.resumed and _long_before(seg, step):
                run.excerpt, run.first_step = True, 0  # the start of this run is not in the log
            elif step:
                run.resumed = True
        else:
            run.rate_reading(seg, line)
        if run.phase != "training":
            run.enter("training", line, clean(seg))

    def _text(self, raw: bytes, line: int) -> None:
        """Any other segment: decoded, cleaned, prefiltered, then read rule by rule."""
        self._repeat, self._head_training = _NO_BAR, False
        if self._cold:
            return
        text = self._unprefixed(clean(raw))
        if not text.strip():
            return
        run = self._run
        if self._dump is not None:
            self._dump_text(text)
            return
        if self._dump_line is not None:
            dump_line, self._dump_line = self._dump_line, None
            if self._p.dump_key.match(text):
                self._start_run(dump_line)
                self._dump = ["{", text]
                return
        if run.expect_call and not _rich_context(text):
            run.expect_call = False
            if not self._p.frame.match(text):
                self._call(text, line)
        if run.oom_tail:
            run.oom_tail -= 1
            self._oom_numbers(text, line, continuation=True)
        # A pasted log is often indented by the paste (a code block, a quote); the toolkit's
        # own lines are read without that indent. In a traceback the indent means source code.
        body = text.lstrip(" ") if not run.frames_seen else text
        if self._trigger is not None:
            passes = self._trigger.passes
            if not (passes(raw, body) or (body is not text and passes(raw, text))):
                return
        elif self._prefilter and not (
            self._p.prefilter.search(body) or self._p.prefilter.search(text)
        ):
            return
        if self._p.plain_bar is not None and (bar := self._p.plain_bar.match(body)):
            # A bar drawn without its bar: read as the same bar with an empty one.
            cut = body.index("% ", bar.start()) + 1
            self._bar(f"{body[:cut]}||{body[cut:]}".encode(), len(body[:cut].encode()) - 1, line)
            return
        if self._p.run_start.search(body):
            self._start_run(line)
            return
        if self._p.dump_open.match(body):
            self._dump_line = line
            return
        self._resume(body, line)
        self._signals(text, line)
        self._failure(body, line)
        self._frames(text, line)
        self._phase(body, line)
        self._run_notes(body, line)
        if self._p.finished.search(body):
            run.finished = True
            run.progress()
            run.note(line, body, "finished")

    def _run_notes(self, text: str, line: int) -> None:
        """A step given outside a bar (``steps``), a sign of the host's RAM as the limit
        (``host_pressure``), a launch command that samples first (``sample_first``)."""
        run = self._run
        for pattern in self._p.steps:
            if match := pattern.search(text):
                run.marker_step, run.marker_step_line = int(match["step"]), line
                break
        if self._p.host_pressure.search(text):
            if run.host_pressure_line is None:
                run.note(line, text, "host_pressure")
            run.host_pressure_line = line
        if not run.sample_first and self._p.sample_first.search(text):
            run.sample_first = True
            run.note(line, text, "sample_first")

    def _dump_text(self, text: str) -> None:
        """A line of the process config printed as JSON: kept until its closing brace."""
        dump = self._dump
        assert dump is not None
        dump.append(text)
        if text == "}":
            self._dump = None
            self._run.config_dump = _dump_fields("\n".join(dump), self._p.config_fields)
        elif len(dump) > MAX_DUMP_LINES:
            self._dump = None

    def _call(self, text: str, line: int) -> None:
        """The source line under a frame: the call it made may name the phase."""
        run = self._run
        if run.traceback_hint is not None:
            return
        for pattern, phase in self._p.call_phases:
            if pattern.search(text):
                run.traceback_hint = run.frame_phase = phase
                run.note(line, text, "frame")
                return

    def _start_run(self, line: int) -> None:
        if self._run.progressed:
            self._run = self._new_run(line, header=True)
        else:
            self._run.header = True

    def _resume(self, text: str, line: int) -> None:
        for pattern in self._p.resume:
            if match := pattern.search(text):
                run = self._run
                run.resumed = True
                step = match.groupdict().get("step")
                if step is not None:
                    run.start_step = int(step)
                run.note(line, text, "resume")
                return

    def _signals(self, text: str, line: int) -> None:
        run = self._run
        for pattern, signal in self._p.signals:
            match = pattern.search(text)
            if match is None:
                continue
            if not (run.frames_seen and text[:1].isspace()):  # not a traceback's source line
                run.note(line, text, signal)
            run.signals.add(signal)
            if signal == "oom_skip":
                run.progress()
                run.skip_count += 1
                run.skips.append(SkipBanner(line, int(match["attempt"]), run.current_step()))
                run.enter("training", line, text)
            elif signal == "cuda_oom":
                self._oom_numbers(text, line, continuation=False)
            if signal in FATAL_SIGNALS or signal == "host_oom_kill":
                run.fail(oom=signal in ("cuda_oom", "cuda_error_oom"))

    def _oom_numbers(self, text: str, line: int, *, continuation: bool) -> None:
        """The numbers of an allocator message. A message wrapped onto the next lines (a
        terminal or a GUI breaks it between words: "5.24 GiB already" / "allocated; 0 bytes
        free; ...") is read again as one text, so a figure cut by the wrap is read whole."""
        run = self._run
        if continuation:
            if run.oom_found is None:
                return
            run.oom_text = f"{run.oom_text} {text.strip()}"[:OOM_TEXT_MAX]
            run.oom_found.update(parse_allocator_message(run.oom_text))
            return
        found = parse_allocator_message(text)
        run.oom_tail, run.oom_text = OOM_MESSAGE_TAIL, text.strip()[:OOM_TEXT_MAX]
        if found:
            run.oom_found, run.oom_line = found, line

    def _failure(self, text: str, line: int) -> None:
        run = self._run
        p = self._p
        if p.stopped.search(text):
            run.stopped, run.failing = True, False
            run.note(line, text, "stopped")
            return
        if p.python_errors.search(text):
            run.python_error = True
            run.fail()
            run.note(line, text, "error")
            if text.startswith("Traceback"):
                run.traceback_hint = None
        if p.exception.match(text):
            run.fail()
            explained = run.signals & (FATAL_SIGNALS | HOST_SIGNALS)
            if run.exception is None and not explained and p.launcher_errors.match(text):
                # Only the launcher's traceback: the trainer it started printed no error.
                run.python_error, run.exit_seen = False, True
                run.note(line, text, "exit")
                return
            run.python_error = True
            run.exception = EvidenceLine(line, shorten(text), "exception")
        for pattern in p.exits:
            if match := pattern.search(text):
                groups = match.groupdict()
                code = int(groups["code"]) if groups.get("code") else None
                if groups.get("signal") in STOP_SIGNALS:
                    run.stopped, run.failing = True, False
                    run.note(line, text, "stopped")
                    return
                if code == 0:
                    return
                run.exit_code, run.exit_seen = code, True
                run.fail()
                run.note(line, text, "exit")
                return

    def _frames(self, text: str, line: int) -> None:
        run = self._run
        if match := self._p.frame.match(text):
            if not run.failing:  # frames with no header before them: a traceback all the same
                run.opened_in_frames = not run.progressed and not run.header
                run.fail()
            run.frames_seen = run.python_error = True
            func = match["func"] or match.groupdict().get("rfunc") or ""
            file = match["file"] or match.groupdict().get("rfile") or ""
            if run.traceback_hint is None:
                run.expect_call = True
                for pattern, in_file, phase in self._p.frame_phases:
                    if pattern.search(func) and (in_file is None or in_file.search(file)):
                        run.traceback_hint = run.frame_phase = phase
                        run.note(line, text, "frame")
                        break
            return
        if run.frames_seen and self._p.host_copy.search(text):
            run.host_copy = True
            run.note(line, text, "host_copy")
        if run.frames_seen and self._p.cpu_target.search(text):
            run.cpu_copy = True
            run.note(line, text, "host_copy")

    def _phase(self, text: str, line: int) -> None:
        run = self._run
        for pattern, kind in self._p.phases:
            match = pattern.search(text)
            if match is None:
                continue
            run.progress()
            step = match.groupdict().get("step")
            if step is not None:
                run.marker_step, run.marker_step_line = int(step), line
            if kind == "sample":
                # A sample pass the log opens with, with no run header before it, is one of
                # the many periodic passes of a pasted excerpt, not the one baseline pass.
                excerpt = not run.header and run.phase in ("unknown", "periodic_sample")
                sampled_later = run.training_started or bool(step and int(step) > 0) or excerpt
                run.enter("periodic_sample" if sampled_later else "baseline_sample", line, text)
            elif kind == "training_start":
                if not run.training_started and run.marker_step is None:
                    run.marker_step, run.marker_step_line = run.start_step, line
                run.enter("training", line, text)
            else:
                run.enter(kind, line, text)
            return

    def result(self, source: str | None) -> LogScan:
        """The last run as a frozen :class:`LogScan`."""
        run = self._run
        line_count = self._line - 1 if self._ends_with_newline else self._line
        _, total = run.train_step()
        if run.train_bar is not None:
            bar_text = clean(run.train_bar)
            run.note(run.train_bar_line, bar_text, "bar")
        crashed = run.failing and not run.stopped
        signals = set(run.signals)
        explained = signals & FATAL_SIGNALS or signals & HOST_SIGNALS
        if crashed and run.exit_seen and not run.python_error and not explained:
            signals.add("silent_exit")
        step_now = run.current_step()
        finished = run.finished or (
            total is not None and step_now is not None and step_now >= total
        )
        ends_open = (
            not crashed
            and not run.stopped
            and not finished
            and run.progressed
            and run.phase != "unknown"
        )
        stall_line = run.zero_bar_line if ends_open else None
        if stall_line is not None:
            signals.add("stall")
        if run.spill_step is not None:
            signals.add("sysmem_spill")
        phase = run.phase
        frame_phase: Phase | None = None
        if crashed and run.frame_phase is not None:
            during = run.training_started or run.opened_in_frames
            frame_phase = _resolve_frame_phase(run.frame_phase, during)
            phase = frame_phase
        elif crashed and phase == "unknown" and run.sample_first and not run.training_started:
            phase = "baseline_sample"  # nothing but the command, which samples first
        oom = oom_figures(run.oom_found, run.oom_line) if run.oom_found else None
        evidence = list(run.evidence)
        if run.phase_evidence is not None:
            evidence.append(run.phase_evidence)
        if run.exception is not None:
            evidence.append(run.exception)
        evidence.sort(key=lambda e: e.line)
        return LogScan(
            source=source,
            phase=phase,
            marker_phase=run.phase,
            frame_phase=frame_phase,
            phase_line=run.phase_evidence.line if run.phase_evidence else None,
            signals=tuple(s for s in SIGNALS if s in signals),
            oom=oom,
            skips=tuple(run.skips),
            skip_count=run.skip_count,
            last_step=run.current_step(),
            total_steps=total,
            first_step=run.first_step,
            training_started=run.training_started,
            crashed=crashed,
            stopped=run.stopped,
            resumed=run.resumed,
            run_count=self._runs,
            run_start_line=run.start_line,
            header_seen=run.header,
            line_count=line_count,
            exception=run.exception,
            exit_code=run.exit_code,
            host_copy=run.host_copy,
            cpu_copy=run.cpu_copy,
            evidence=tuple(evidence),
            finished=finished,
            ends_open=ends_open,
            excerpt=run.excerpt,
            spill_step=run.spill_step,
            stall_line=stall_line,
            config_dump=run.config_dump,
            host_pressure_line=run.host_pressure_line,
            sample_first=run.sample_first,
            best_rate=run.best_rate,
        )


def _rich_context(text: str) -> bool:
    """A line of a rich traceback's box that is not the frame's current line (marked ``❱``):
    the call under a frame is read from the marked line, not from the context around it."""
    return text.lstrip().startswith("│") and "❱" not in text


def _long_before(seg: bytes, step: int) -> bool:
    """Whether a training bar first seen at ``step`` had been running since step 0 before the
    log shows it (an excerpt, or its first redraws lost in a paste), rather than starting
    there (a resume). tqdm counts the elapsed time from the bar's creation: a resumed bar shows
    far less time than ``step`` steps take at its own rate; without a rate, almost none."""
    match = RATE.search(seg)
    if match is None:
        return False
    elapsed = elapsed_seconds(match["elapsed"])
    rate = float(match["rate"])
    per_step = rate if match["unit"] == b"s/it" else (1.0 / rate if rate else 0.0)
    if per_step <= 0:
        return elapsed > RESUME_MAX_ELAPSED_S
    return elapsed >= RESUME_ELAPSED_SHARE * step * per_step


def _dump_fields(text: str, fields: Sequence[str]) -> tuple[tuple[str, Any], ...] | None:
    """The memory fields of a printed process config (None when it is not JSON)."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    found: list[tuple[str, Any]] = []
    for path in fields:
        section, _, key = path.rpartition(".")
        if section.endswith("[]"):
            items = data.get(section[:-2])
            if isinstance(items, list):
                for index, item in enumerate(items):
                    if isinstance(item, dict) and key in item:
                        found.append((f"{section[:-2]}[{index}].{key}", item[key]))
            continue
        holder = data.get(section) if section else data
        if isinstance(holder, dict) and key in holder:
            found.append((path, holder[key]))
    return tuple(found)


def _resolve_frame_phase(phase: FramePhase, training_started: bool) -> Phase:
    """A frame's phase as the scan's: a sample pass is the baseline one until training has
    started, unless the call said which one it was."""
    if phase == "sample":
        return "periodic_sample" if training_started else "baseline_sample"
    return phase


class LiveScan:
    """A log read as it grows: :meth:`feed` the new bytes, :meth:`snapshot` the scan so far.

    The same scanner as :func:`scan_log`, fed piece by piece: a piece may end in the middle of
    a segment (the rest comes later), and a snapshot leaves the state as it was, so the
    following never reads a byte twice. UTF-16 logs are not followed (a live trainer writes
    UTF-8).
    """

    def __init__(self, markers: LogMarkers | None = None) -> None:
        self._scanner = _Scanner((markers or load_log_markers()).compiled())
        self._carry = b""
        self._first = True

    def feed(self, data: bytes) -> None:
        """Read more of the log (any size, cut anywhere)."""
        if self._first and data:
            data = data.removeprefix(codecs.BOM_UTF8)
            self._first = False
        data = self._carry + data
        cut = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
        self._carry = data[cut:]
        if len(self._carry) > MAX_SEGMENT_BYTES:
            self._carry = self._carry[:MAX_SEGMENT_BYTES]
        if cut:
            self._scanner.feed(data[:cut])

    def snapshot(self, source: str | None = None) -> LogScan:
        """The scan of what was fed so far (an unfinished last segment not included)."""
        run = self._scanner._run
        evidence = deque(run.evidence, maxlen=run.evidence.maxlen)
        try:
            return self._scanner.result(source)
        finally:
            run.evidence = evidence
