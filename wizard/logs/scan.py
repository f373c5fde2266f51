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
patterns whose fixed text it holds; only a segment that matches one is looked at, by the rules
that read those patterns (``CompiledMarkers.rule_of``). ``scan_stream(..., prefilter=False)``
skips both tests (every segment through every rule): the tests compare the two.

The trigger only searches the pieces the *gate* says yes to (one reading of a region by a
DFA); elsewhere only the bars are read, and while the training bar runs, its redraws are
skipped a window at a time (:meth:`_Scanner._skip_redraws`). Once that bar is known, the same
reading of a region also says whether every bar there is one of its redraws
(:meth:`~oom_wizard.logs.read.Gate.with_redraws`); a window inside such a stretch is skipped
without counting its redraws.

Reading reports its progress and can be cancelled between two chunks (``progress`` and
``cancelled`` of :func:`scan_log`, or a :func:`oom_wizard.logs.read.watching` block around a
caller).

What the lines mean lives in ``presets/log_markers.yaml`` (:mod:`oom_wizard.logs.markers`): it
is a description of AI Toolkit's output, like every other fact about the toolkit. The formats of
PyTorch's allocator message are code (:mod:`oom_wizard.logs.allocator`), and so are tqdm's bars
(:mod:`oom_wizard.logs.bars`). This module is the reading loop: the chunks, and
:class:`_Scanner`, which cuts them into segments, counts the lines and skips what cannot
matter (the gate, the trigger, the redraws a later one replaces). What a segment says is read
by :class:`~oom_wizard.logs.segments.SegmentReader` into the run's state
(:mod:`oom_wizard.logs.run`), which gives the :class:`~oom_wizard.logs.result.LogScan`.

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
import os
import re
import stat
from collections.abc import Iterator, Sequence
from operator import itemgetter
from pathlib import Path
from typing import Final

from oom_wizard.errors import LogError
from oom_wizard.files import file_kind
from oom_wizard.logs.bars import (
    bar_lines,
    count_bytes,
    few_redraws,
    find_bar,
    without_repeats,
)
from oom_wizard.logs.markers import CompiledMarkers, LogMarkers, load_log_markers
from oom_wizard.logs.read import (
    Cancelled,
    Gate,
    Progress,
    Readable,
    Watch,
    WatchedReader,
    current_watch,
)
from oom_wizard.logs.result import LogScan
from oom_wizard.logs.segments import NO_BAR, SegmentReader

CHUNK_BYTES: Final = 64 * 1024
"""Bytes read at a time. Every chunk is copied a few times (joined to the last one's unfinished
line, cut at its last line end, read by the gate): under the C library's threshold for a
mapping of its own (128 KB), those copies reuse warm memory; chunks of 1 MB each fault in
fresh pages (~90,000 page faults on a 300 MB log, a sixth of the time)."""
MAX_SEGMENT_BYTES: Final = 64 * 1024
"""A segment longer than this (a binary file, a line with no end) is cut; the rest is skipped."""

RATE_WINDOW: Final = 32 * 1024
"""Bytes of a stretch of training-bar lines between text lines of which one redraw's rate is
read (``_Scanner._skip_redraws``): a log that warns at every step draws a bar line every few
lines, and only the first, the last, and one per window change what the run shows."""

REDRAW_GATE_AFTER: Final = 4
"""Windows of a training bar counted (:meth:`_Scanner._skip_drawn_bars`) before the gate is
also asked about its redraws (:meth:`~oom_wizard.logs.read.Gate.with_redraws`): building that
gate takes a few milliseconds, which a short log does not win back."""
REDRAW_GATE_PAUSE: Final = 16
"""Blocks read with the plain gate after one where asking about the redraws vouched for less
than half of it (other bars, or text with a ``%``): there, each region the gate finds no
pattern in costs a second reading."""

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
            kind = file_kind(status.st_mode)
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


def _redrawn_later(block: bytes, needle: bytes, mark: int, end: int) -> bool:
    """Whether the first line after the one of the redraw ``needle`` that ends at ``mark`` and
    holds a ``\\r`` redraws ``needle`` again before ``end``; short searches, where
    ``_Scanner._skip_redraws`` would search the whole window. When it does not, that window is
    not one of repeats of this head: redrawn on a later line, it would hold that line's other
    ``\\r`` before it; on none, no line before its last one redraws it."""
    eol = block.find(b"\n", mark, end)
    later = block.find(b"\r", eol, end) if eol >= 0 else -1
    if later < 0:
        return False
    line_end = block.find(b"\n", later, end)
    return block.find(needle, later, line_end if line_end >= 0 else end) >= 0


class _Scanner:
    """Cuts blocks of the log into segments and hands the reader those that can matter; see the
    module docstring. It counts the lines, and skips what no rule would read: the lines the
    trigger finds nothing in, and the redraws of a bar that the next one replaces."""

    def __init__(self, patterns: CompiledMarkers, *, prefilter: bool = True) -> None:
        self._reader = SegmentReader(patterns, prefilter=prefilter)
        trigger = patterns.trigger if prefilter else None
        self._search = trigger.search if trigger is not None else None
        self._gate = patterns.gate if trigger is not None else None
        self._clean: list[tuple[int, int]] = []
        """Stretches of the current block (whole lines) where every bar is a redraw of the
        training bar whose description is ``_clean_desc`` and no pattern matches."""
        self._clean_desc = b""
        self._counted = 0  # windows of the training bar counted (_skip_drawn_bars)
        self._plain_blocks = 0  # blocks left to read with the plain gate (REDRAW_GATE_PAUSE)
        self._line = 1
        self._ends_with_newline = True  # an empty log has no lines

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
        :meth:`SegmentReader.reads_next_line` says when the next line is read whatever it holds.
        With the gate, the trigger only searches the gate's hot pieces; elsewhere only the bar
        lines are read (:meth:`_feed_cold`).
        """
        pos, size = 0, len(block)
        search = trigger.search
        bars: list[tuple[int, int]] | None
        self._clean = []
        if self._gate is not None and few_redraws(block):
            bars = None
            redraws = self._redraw_gate(self._gate)
            hot, self._clean = self._gate.regions(block, redraws)
            if redraws is not None and 2 * sum(end - start for start, end in self._clean) < size:
                self._plain_blocks = REDRAW_GATE_PAUSE
        elif self._gate is not None:
            bars = bar_lines(block)
            hot = self._hot_pieces(block, bars)
        else:
            bars, hot = [], [(0, size)]
        index, pieces = 0, len(hot)
        while pos < size:
            if self._reader.reads_next_line():
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
            if self._gate is not None and not self._worth_reading(block, start, end):
                self._skip(block, pos, end)
                pos = end
                continue
            self._skip(block, pos, start)
            self._feed_lines(block[start:end])
            pos = end

    def _worth_reading(self, block: bytes, start: int, end: int) -> bool:
        """Whether a line the trigger found in a hot piece can change the run: it holds a bar,
        or the gate says some pattern could match it (a few per cent of the cost of reading
        it). A line of text no pattern matches only ends the bar's redraws, as a line skipped
        does (and when the line after an OOM or a frame is read whatever it holds, the caller
        reads it without asking)."""
        assert self._gate is not None
        return find_bar(block, start, end) >= 0 or self._gate.matches(block[start:end])

    def _redraw_gate(self, gate: Gate) -> Gate | None:
        """The gate that also vouches for the training bar's redraws (see ``_clean``), once
        its windows have been counted a few times; None until then, or while paused."""
        if self._plain_blocks:
            self._plain_blocks -= 1
            return None
        desc = self._reader.train_prefix[1:]
        if self._counted < REDRAW_GATE_AFTER or not desc:
            return None
        self._clean_desc = desc
        return gate.with_redraws(desc)

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
        whatever it holds (:meth:`SegmentReader.reads_next_line`: text after its first segment
        matched).
        """
        at = bisect.bisect_left(bars, pos, key=itemgetter(0))
        while at < len(bars) and (start := bars[at][0]) < limit:
            end = bars[at][1]
            self._skip(block, pos, start)
            self._feed_bar_line(block, start, end)
            pos = end
            at += 1
            if self._reader.reads_next_line():
                return pos
        self._skip(block, pos, limit)
        return limit

    def _feed_cold_lines(self, block: bytes, pos: int, limit: int) -> int:
        """:meth:`_feed_cold` for a block whose bar lines hold one redraw or two (the gate saw
        all of it): its bar lines are found here. While the training bar runs, most of them are
        not read at all (:meth:`_skip_redraws`)."""
        run = self._reader.run
        rates: tuple[float | None, int, tuple[bytes, bytes] | None] = (None, 0, None)
        while True:
            window: tuple[int, int, int] | None = None
            if self._reader.steady_training():
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
            if window is not None and run.spill_step is not None and self._reader.head_training:
                # The window's reading found the slowdown: its first redraw is in the window.
                run.best_rate, run.rate_readings, run.steady_rate = rates
                self._read_window(block, window)
            pos = end
            if self._reader.reads_next_line():
                return pos

    def _read_window(self, block: bytes, window: tuple[int, int, int]) -> None:
        """Read again the rate of every redraw of a window :meth:`_skip_redraws` skipped, then
        the redraw after it, as if none had been skipped: the step of a slowdown first seen
        at the end of a window is that of its first redraw."""
        run = self._reader.run
        if run.evidence and run.evidence[-1].tag == "sysmem_spill":
            run.evidence.pop()
        run.spill_step = None
        start, stop, line = window
        counted = start
        # Every redraw in the window: each "%|" is one, from the separator before it.
        while run.spill_step is None and (mark := block.find(b"%|", start, stop)) >= 0:
            cut = max(block.rfind(b"\r", start, mark), block.rfind(b"\n", start, mark))
            cut = cut if cut >= 0 else start - 1
            ends = [block.find(b"\r", mark, stop), block.find(b"\n", mark, stop)]
            end = min((i for i in ends if i >= 0), default=stop)
            line += count_bytes(block, b"\n", counted, cut + 1)
            counted = cut + 1
            run.rate_reading(block[cut + 1 : end], line)
            start = end
        if run.spill_step is None and run.train_bar is not None:
            run.rate_reading(run.train_bar, run.train_bar_line)

    def _skip_redraws(self, block: bytes, pos: int, limit: int) -> int:
        """Skip the training-bar lines of the next ``RATE_WINDOW`` bytes from ``pos`` but the
        last, while :meth:`SegmentReader.steady_training`: return where that last one's line
        starts (``pos`` when nothing was skipped). The caller reads that line as any other bar
        line.

        A stretch is skipped when it holds only cold text lines (no ``%|``) and lines of text
        and one or more redraws of the training bar with the head of its first redraw (every
        ``\\r`` starts one, every ``%|`` is theirs; counted at C speed). Such a redraw only
        replaces the last one (which the next one read replaces again) and gives a reading
        of the rate: one is read per window, the last one's (:meth:`RunState.rate_reading`).
        """
        cut = block.find(b"\r", pos, limit)
        mark = block.find(b"%|", cut, limit) if cut >= 0 else -1
        if mark < 0 or block.find(b"\n", cut, mark) >= 0:
            return self._skip_drawn_bars(block, pos, limit)
        needle = block[cut:mark] + b"%|"
        if self._reader.kinds.get(needle[1:-2]) != "training":
            return pos
        end = block.find(b"\n", min(pos + RATE_WINDOW, limit - 1), limit) + 1 or limit
        if mark + 2 <= end and not _redrawn_later(block, needle, mark, end):
            return self._skip_drawn_bars(block, pos, limit)
        last = block.rfind(needle, pos, end)
        stop = block.rfind(b"\n", pos, last) + 1 or pos
        redraws = block.count(needle, pos, stop)
        if not redraws or count_bytes(block, b"\r", pos, stop) != redraws:
            return self._skip_drawn_bars(block, pos, limit)
        if (
            count_bytes(block, b"%", pos, stop) != redraws
            and block.count(b"%|", pos, stop) != redraws
        ):
            return pos
        self._line += count_bytes(block, b"\n", pos, stop)
        # The state of the last redraw skipped, and the text after it.
        after = block.find(b"\n", block.rfind(needle, pos, stop)) + 1
        text = after < stop and _NOT_SEPARATOR.search(block, after, stop) is not None
        if text:
            self._reader.end_redraws()
        else:
            self._reader.redrawing_training_bar(needle[1:])
        return stop

    def _skip_drawn_bars(self, block: bytes, pos: int, limit: int) -> int:
        """:meth:`_skip_redraws` for a training bar whose head changes from line to line (its
        percentage moves at every step) or that a line draws afresh (no ``\\r`` before its
        first redraw): skip its lines but the last in the next ``RATE_WINDOW`` bytes when every
        bar there is the training bar's. Return where that last one's line starts (``pos``:
        nothing skipped).

        The stretch is cold text (no pattern matches it) and bar segments; it is skipped when
        each of its ``%|`` starts a segment with the training bar's description (after a
        ``\\r``, or at the start of a line) and each ``\\r`` starts such a segment: every
        segment is then that bar's redraw, which the next one read replaces, and one rate is
        read per window (the caller reads every redraw of it again when that one shows a
        slowdown: :meth:`_read_window`).
        """
        reader = self._reader
        prefix = reader.train_prefix
        desc = prefix[1:]
        if not desc:
            return pos
        end = block.find(b"\n", min(pos + RATE_WINDOW, limit - 1), limit) + 1 or limit
        last = block.rfind(b"%|", pos, end)
        stop = block.rfind(b"\n", pos, last) + 1 if last >= 0 else 0
        if stop <= pos or not (block.startswith(desc, stop) or block.startswith(prefix, stop)):
            return pos  # the line read next must redraw the training bar: it replaces these
        if not self._only_redraws(block, pos, stop, prefix):
            return pos
        self._line += count_bytes(block, b"\n", pos, stop)
        mark = block.rfind(b"%|", pos, stop)
        after = block.find(b"\n", mark, stop) + 1
        if after < stop and _NOT_SEPARATOR.search(block, after, stop) is not None:
            reader.end_redraws()
        else:
            head = max(block.rfind(b"\r", pos, mark), block.rfind(b"\n", pos, mark)) + 1
            reader.redrawing_training_bar(block[head : mark + 2])
        return stop

    def _only_redraws(self, block: bytes, pos: int, stop: int, prefix: bytes) -> bool:
        """Whether every segment of ``block[pos:stop]`` (whole lines) that holds a ``%|`` is
        a redraw of the training bar (its segments start with ``prefix``), as
        :meth:`_skip_drawn_bars` asks: each ``\\r`` starts one, and there are as many ``%``
        (or ``%|``) as segments that start with its description, and some.

        Where the gate vouched for the stretch (``_clean``: no ``\\r`` but the bar's, one
        ``%`` in each of its segments and none elsewhere) the counts agree: only whether it
        holds a bar at all is asked. Elsewhere they are counted."""
        desc = prefix[1:]
        if desc == self._clean_desc and (pos == 0 or block[pos - 1] in b"\r\n"):
            at = bisect.bisect_right(self._clean, pos, key=itemgetter(0)) - 1
            if at >= 0 and stop <= self._clean[at][1]:
                return block.find(b"%", pos, stop) >= 0
        self._counted += 1
        # Single bytes are counted at memory speed (count_bytes); a needle of several once.
        returns = count_bytes(block, b"\r", pos, stop)
        redrawn = block.count(prefix, pos, stop) if returns else 0
        if returns != redrawn:
            return False
        bars = redrawn + block.count(b"\n" + desc, pos, stop) + block.startswith(desc, pos)
        return bool(bars) and (
            count_bytes(block, b"%", pos, stop) == bars or block.count(b"%|", pos, stop) == bars
        )

    def _feed_bar_line(self, block: bytes, start: int, end: int) -> None:
        """A bar line of a cold stretch. The gate saw its first segment (no pattern matches it:
        as :meth:`SegmentReader.text` would after its prefilter said no, a text segment there
        only ends the redraws); its other segments are read as on any line."""
        cut = block.find(b"\r", start, end)
        if cut < 0:  # a bar on its own line: the gate saw all of it
            self._reader.cold = True
            try:
                self._feed_lines(block[start:end])
            finally:
                self._reader.cold = False
        elif cut > start and find_bar(block, start, cut) < 0:
            self._reader.end_redraws()
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
        self._reader.bar(block[start:first], mark - start, line_no)
        self._reader.remember(block[block.rfind(b"\r", start, stop) + 1 : stop], line_no)
        if stop != end:
            self._line = line_no + 1
        return True

    def _skip(self, block: bytes, start: int, end: int) -> None:
        """Lines no rule reads: counted; and like any other text between two bar redraws,
        they end the redraws (the next bar is drawn anew, as when every line is read)."""
        self._line += count_bytes(block, b"\n", start, end)
        if self._reader.repeat is not NO_BAR and _NOT_SEPARATOR.search(block, start, end):
            self._reader.end_redraws()

    # The hot loop: keep it small. A bar redraw that repeats the previous segment's head is
    # only remembered; everything else goes to the reader's bar or text.
    def _feed_lines(self, block: bytes) -> None:
        """Every segment of ``block`` (whole lines, or the log's last one) through the rules."""
        lines = block.split(b"\n") if block.find(b"\n") != len(block) - 1 else (block[:-1], b"")
        last_index = len(lines) - 1
        line_no = self._line
        reader = self._reader
        remember, bar, text = reader.remember, reader.bar, reader.text
        repeat = reader.repeat
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
                        remember(pending, pending_line)
                        pending = None
                    pos = seg.find(b"%|")
                    if pos >= 0:
                        bar(seg, pos, line_no)
                    else:
                        text(seg, line_no)
                    repeat = reader.repeat
                # A line's last redraw is read at its end, as when its line is fed alone.
                if pending is not None:
                    remember(pending, pending_line)
                    pending = None
            if index != last_index:
                line_no += 1
        self._line = line_no

    def _only_training_redraws(self, line: bytes, redraws: int) -> bool:
        """Whether every ``\\r`` segment of ``line`` is a clean redraw of the training bar.

        Then only the last one matters: the line is not split at all. Not before the run's
        first training bar, whose first value tells a resume.
        """
        prefix = self._reader.train_prefix
        if not prefix or not line.startswith(prefix) or not self._reader.run.training_started:
            return False
        # Every \r but the first must close a bar ("]") and open the training bar again.
        return line.endswith(b"]") and line.count(b"]" + prefix) == redraws - 1

    def result(self, source: str | None) -> LogScan:
        """The last run as a frozen :class:`LogScan`."""
        line_count = self._line - 1 if self._ends_with_newline else self._line
        return self._reader.run.result(source, run_count=self._reader.runs, line_count=line_count)


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
        return self._scanner.result(source)
