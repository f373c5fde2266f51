"""tqdm's progress bars, on raw bytes: what a bar line says, and runs of its redraws.

A bar (``desc:  42%|████      | 420/1000 [05:41<07:51,  2.16s/it, loss=0.12]``) gives the step,
the total, the elapsed time and the rate. A log may hold millions of redraws of one bar joined
by ``\\r``; the helpers here find bar lines and keep only the redraws that change what the
run shows, without decoding the rest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

BAR = re.compile(
    r"^(?P<desc>.*?):?\s*(?P<pct>\d+)%\|[^|]*\|\s*(?P<n>\d+)/(?P<total>\d+)\s*(?:\[.*)?$"
)
PCT_DIGITS: Final = b"0123456789 "
BYTE_RATE = re.compile(rb"\d\s*[kKMGT]?i?B/s\]")
"""A bar counting bytes per second (``1.54MB/s]``) is a download, whatever its counts."""
RATE = re.compile(
    rb"\|\s*(?P<n>\d+)/\d+\s*\[(?P<elapsed>\d+(?::\d{1,2}){1,2})<(?P<left>[^,\]]*),\s*"
    rb"(?P<rate>\d+(?:\.\d+)?)(?P<unit>s/it|it/s)"
)
"""tqdm's ``| n/total [elapsed<remaining, rate``: ``| 299/3000 [5:41:20<1:02:11,  2.16s/it``
or ``12.5it/s`` (one search on the raw bytes, no decoding)."""
ZERO_BAR = re.compile(rb"\|\s*0/\d+\s*(?:\[|$)")
"""A bar at ``0/total``."""
TRAINING_POSTFIX = re.compile(rb"\b(?:lr|loss|avr_loss)[:=]\s*[-+.\d]")
"""A bar whose postfix reports a learning rate or a loss is the training bar."""


@dataclass(frozen=True)
class BarReading:
    """What a tqdm bar segment shows: its description and ``n`` of ``total``.

    With a bar-step rule that applies (``bar_steps`` of the marker table), ``n`` is the step
    the bar shows and ``total`` is None: its own count is of something else (epochs, an
    epoch's batches).
    """

    desc: str
    n: int
    total: int | None


BarSteps = tuple[tuple[re.Pattern[str], bool], ...]
"""Compiled ``bar_steps``: (pattern, whether it reads the description, not the postfix)."""


def parse_bar(text: str, steps: BarSteps = ()) -> BarReading | None:
    """The description, ``n`` and ``total`` of a tqdm bar segment, or None.

    ``steps``: where a bar shows its step when ``n`` counts something else.
    """
    match = BAR.match(text)
    if match is None:
        return None
    desc, n, total = match["desc"].strip(), int(match["n"]), int(match["total"])
    for pattern, on_desc in steps:
        if found := pattern.search(desc if on_desc else text[match.end("total") :]):
            groups = found.groupdict()
            if groups.get("step") is not None:
                return BarReading(desc=desc, n=int(groups["step"]), total=None)
            if groups.get("epoch") is not None:
                return BarReading(desc=desc, n=int(groups["epoch"]) * total + n, total=None)
    return BarReading(desc=desc, n=n, total=total)


def count_bytes(data: bytes, byte: bytes, start: int = 0, end: int | None = None) -> int:
    """How many times the single ``byte`` is in ``data[start:end]``.

    ``bytes.count`` tests every byte in turn; ``bytes.replace`` finds a single byte with
    ``memchr``, two to three times faster on a log's sparse line ends (and the line ends of
    every byte of the log are counted).
    """
    piece = data if start == 0 and end is None else data[start:end]
    return len(piece) - len(piece.replace(byte, b""))


def few_redraws(block: bytes) -> bool:
    """Whether ``block`` holds few bar redraws for its lines (at most ``4`` per line end): then
    the gate is shown the whole block, and its bar lines are found as the cold stretches are
    read (:meth:`_Scanner._feed_cold_lines`). A block of long lines of redraws (a log of
    bars) is shown to the gate without them (:meth:`_Scanner._hot_pieces`)."""
    return count_bytes(block, b"\r") <= 4 * count_bytes(block, b"\n")


def bar_lines(block: bytes) -> list[tuple[int, int]]:
    """(start, end) of each line of ``block`` that holds a bar's ``%|``, in order (its end is
    past its ``\\n``, or the end of the block)."""
    lines: list[tuple[int, int]] = []
    pos, size = 0, len(block)
    while (found := find_bar(block, pos, size)) >= 0:
        start = block.rfind(b"\n", pos, found) + 1 or pos
        pos = block.find(b"\n", found) + 1 or size
        lines.append((start, pos))
    return lines


def find_bar(block: bytes, start: int, end: int) -> int:
    """Where the next ``%|`` between ``start`` and ``end`` is (-1: none). A search for one
    byte runs at memory speed, one for two bytes at a fraction of it: ``%`` is found first."""
    while (found := block.find(b"%", start, end)) >= 0:
        if block.startswith(b"|", found + 1):
            return found if found + 1 < end else -1
        start = found + 1
    return -1


def without_repeats(line: bytes, redraws: int) -> list[bytes]:
    """The ``\\r`` segments of ``line`` (which holds ``redraws`` of them) that the rules would
    act on, when it ends in a run of redraws of one bar (each starts with the same description
    and percentage ``…%|`` and ends with ``]``): the segments before the run, its first redraw
    and its last one.

    The redraws in between change nothing: each repeats the previous one's head, so it would
    only replace it as the redraw to remember (see ``_Scanner._feed_lines``). Found with a few
    searches over the line, at C speed; any other line is simply split.
    """
    cut = line.rfind(b"\r")
    last = line[cut + 1 :]
    mark = last.find(b"%|")
    if mark < 0 or not last.endswith(b"]"):
        return line.split(b"\r")
    head = b"\r" + last[: mark + 2]
    # Each "]" + head holds one \r: as many as there are \r in the run means that every \r
    # of the run ends a redraw of this bar and starts the next one.
    if line.startswith(head[1:]):  # the whole line is the run
        if line.count(b"]" + head) != redraws:
            return line.split(b"\r")
        return [line[: line.find(b"\r")], last]
    first = line.find(head)
    runs = redraws - count_bytes(line, b"\r", 0, first)
    if line.count(b"]" + head, first) != runs - 1:
        return line.split(b"\r")
    before = line[:first].split(b"\r")
    if runs == 1:
        return [*before, last]
    return [*before, line[first + 1 : line.find(b"\r", first + 1)], last]


def elapsed_seconds(text: bytes) -> float:
    """``5:41:20`` or ``10:44`` as seconds."""
    seconds = 0.0
    for part in text.split(b":"):
        seconds = seconds * 60 + int(part)
    return seconds
