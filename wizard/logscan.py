"""Read a training log in bounded memory and say what it shows.

A log is AI Toolkit's ``log.txt`` (stdout and stderr of the job in one file), a CLI ``-l`` log,
or terminal output pasted into a file. It may be gigabytes of progress-bar redraws, so it is
never read whole: :func:`scan_log` streams it in fixed-size binary chunks and cuts them into
*segments* on both ``\\r`` (tqdm redraws) and ``\\n``. Line numbers count ``\\n`` only, as an
editor shows them, so every redraw of a bar shares its line's number.

Two paths keep this fast. A progress-bar segment (it holds ``%|``) costs a few byte
comparisons: a redraw of the same bar as the previous segment is only remembered, and only the
last training-bar redraw is ever parsed. Every other segment is decoded (``errors="replace"``),
freed of ANSI codes, and tried against one joined expression of all the patterns; only a
segment that matches is looked at rule by rule.

What the lines mean lives in ``presets/log_markers.yaml`` (:class:`LogMarkers`): it is a
description of AI Toolkit's output, like every other fact about the toolkit. The formats of
PyTorch's allocator message stay here, as constants, because reading their numbers is code.

The state kept while reading is bounded: the current run's phase, its last training-bar
redraw, counters, the last few skip banners and a ring of the last evidence lines. A new run
(``Running 1 job``, the job banner, or the config printed as JSON) starts fresh state, so a file
holding several runs is diagnosed on its last one.
"""

from __future__ import annotations

import codecs
import functools
import io
import re
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import IO, Any, Final, Literal, get_args

import yaml
from pydantic import ConfigDict, Field, PrivateAttr, ValidationError

from wizard.errors import LogError, PresetError
from wizard.fastyaml import SafeLoader
from wizard.frozen import FrozenModel

Phase = Literal[
    "model_load",
    "quantize",
    "cache_latents",
    "cache_text",
    "baseline_sample",
    "training",
    "periodic_sample",
    "save",
    "unknown",
]

LOADING_PHASES: Final[frozenset[Phase]] = frozenset(
    {"model_load", "quantize", "cache_latents", "cache_text", "baseline_sample"}
)
"""Phases before the first training step (the ``loading`` moment)."""

GpuSignal = Literal[
    "cuda_oom",
    "cuda_error_oom",
    "cublas_alloc",
    "zero_free",
    "oom_skip",
    "oom_abort",
    "loss_dict_followon",
]
"""Signals that the GPU ran out of memory, directly or through a known follow-on error."""

LineSignal = Literal[GpuSignal, "host_oom_kill"]
"""The signals a single line shows (``silent_exit`` is concluded from the whole run)."""

Signal = Literal[LineSignal, "silent_exit"]
SIGNALS: Final[tuple[Signal, ...]] = get_args(Signal)
"""Every signal, in the order they are reported."""

GPU_SIGNALS: Final[frozenset[Signal]] = frozenset(get_args(GpuSignal))

FATAL_SIGNALS: Final[frozenset[Signal]] = frozenset(
    {"cuda_oom", "cuda_error_oom", "cublas_alloc", "oom_abort", "loss_dict_followon"}
)
"""Signals that mean the job is failing (a skip banner does not: training goes on)."""

MarkerPhase = Literal[
    "model_load",
    "quantize",
    "cache_latents",
    "cache_text",
    "baseline_sample",
    "sample",
    "training_start",
    "save",
]
BarPhase = Literal["model_load", "quantize", "cache_latents", "cache_text", "sample", "ignore"]
FramePhase = Literal[
    "model_load", "quantize", "cache_latents", "cache_text", "training", "sample", "save"
]

BarKind = Literal[
    "training",
    "unnamed",
    "model_load",
    "quantize",
    "cache_latents",
    "cache_text",
    "sample",
    "ignore",
]
"""How a progress bar moves the phase (``unnamed``: a bar without a description)."""

MARKERS_FILE: Final = "log_markers.yaml"
CHUNK_BYTES: Final = 1 << 20
"""Bytes read at a time."""
MAX_SEGMENT_BYTES: Final = 64 * 1024
"""A segment longer than this (a binary file, a line with no end) is cut; the rest is skipped."""
EVIDENCE_RING: Final = 32
"""Evidence lines kept per run (the last ones)."""
SKIPS_KEPT: Final = 64
"""Skip banners kept per run (the last ones; all are counted)."""
EVIDENCE_CHARS: Final = 400
"""Evidence text longer than this is shortened (an allocator message fits)."""
OOM_MESSAGE_TAIL: Final = 3
"""Segments after an OOM line that may still hold its numbers (a message wrapped when pasted)."""
_BAR_CACHE_LIMIT: Final = 1024
_NO_BAR: Final = b"\n"
"""What a segment starts with when it repeats the previous bar: never, after a text segment."""
STOP_SIGNALS: Final = frozenset({"SIGTERM", "SIGINT", "SIGHUP"})
"""A job ended by one of these was stopped (by the user, the UI or a shutdown), not crashed."""

_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_BAR = re.compile(
    r"^(?P<desc>.*?):?\s*(?P<pct>\d+)%\|[^|]*\|\s*(?P<n>\d+)/(?P<total>\d+)\s*(?:\[.*)?$"
)
_PCT_DIGITS: Final = b"0123456789 "
_TRAINING_POSTFIX = re.compile(rb"\b(?:lr|loss|avr_loss)[:=]\s*[-+.\d]")
"""A bar whose postfix reports a learning rate or a loss is the training bar."""
_NAMED_GROUP = re.compile(r"\(\?P<\w+>")


# --- the marker table ---------------------------------------------------------------------------


class _Frozen(FrozenModel):
    """Base of the marker-table models: immutable, unknown keys refused."""

    model_config = ConfigDict(extra="forbid")


class _Rule(_Frozen):
    """One pattern of the marker table, with its own flags."""

    pattern: str = Field(min_length=1)
    ignore_case: bool = False

    def source(self) -> str:
        """The pattern as a group that carries its flags (for the joined expression)."""
        return f"(?i:{self.pattern})" if self.ignore_case else f"(?:{self.pattern})"


class PhaseRule(_Rule):
    """A line that announces a phase (and maybe the step it is about)."""

    phase: MarkerPhase


class BarRule(_Rule):
    """A progress-bar description that names what the bar is doing."""

    phase: BarPhase


class SignalRule(_Rule):
    """A line that shows one signal."""

    signal: LineSignal


class FrameRule(_Rule):
    """A traceback function name that places the failure in a phase."""

    phase: FramePhase


class ConfigDump(_Frozen):
    """The process config printed as JSON: its opening line, and the line that confirms it."""

    open: str
    key: str


class LogMarkers(_Frozen):
    """The schema of ``presets/log_markers.yaml`` (see the comments in that file)."""

    run_start: tuple[str, ...]
    config_dump: ConfigDump
    resume: tuple[str, ...]
    phases: tuple[PhaseRule, ...]
    bars: tuple[BarRule, ...]
    signals: tuple[SignalRule, ...]
    python_errors: tuple[str, ...]
    exception: str
    exits: tuple[str, ...]
    stopped: tuple[str, ...]
    frame: str
    frame_phases: tuple[FrameRule, ...]
    host_copy: tuple[str, ...]
    line_prefixes: tuple[str, ...] = ()

    _compiled: _Compiled | None = PrivateAttr(default=None)

    def compiled(self) -> _Compiled:
        """The patterns compiled (once)."""
        if self._compiled is None:
            self._compiled = _Compiled(self)
        return self._compiled


def _any(patterns: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns) or r"(?!)")


def _unnamed(source: str) -> str:
    """A pattern with its named groups made plain, so that several can be joined."""
    return _NAMED_GROUP.sub("(?:", source)


class _Compiled:
    """The marker table as compiled expressions, plus one joined prefilter."""

    def __init__(self, markers: LogMarkers) -> None:
        self.run_start = _any(markers.run_start)
        self.dump_open = re.compile(markers.config_dump.open)
        self.dump_key = re.compile(markers.config_dump.key)
        self.resume = [re.compile(p) for p in markers.resume]
        self.phases = [(re.compile(r.source()), r.phase) for r in markers.phases]
        self.bars = [(re.compile(r.source()), r.phase) for r in markers.bars]
        self.signals = [(re.compile(r.source()), r.signal) for r in markers.signals]
        self.python_errors = _any(markers.python_errors)
        self.exception = re.compile(markers.exception)
        self.exits = [re.compile(p) for p in markers.exits]
        self.stopped = _any(markers.stopped)
        self.frame = re.compile(markers.frame)
        self.frame_phases = [(re.compile(r.source()), r.phase) for r in markers.frame_phases]
        self.host_copy = _any(markers.host_copy)
        joined = "|".join(f"(?:{p})" for p in markers.line_prefixes)
        self.prefix = re.compile(f"(?:{joined})+") if joined else None
        sources = [
            *markers.run_start,
            markers.config_dump.open,
            *markers.resume,
            *(r.source() for r in markers.phases),
            *(r.source() for r in markers.signals),
            *markers.python_errors,
            markers.exception,
            *markers.exits,
            *markers.stopped,
            markers.frame,
            *markers.host_copy,
        ]
        self.prefilter = re.compile("|".join(f"(?:{_unnamed(s)})" for s in sources))


def load_log_markers(path: Path | None = None) -> LogMarkers:
    """Load and check the marker table (default: the shipped ``presets/log_markers.yaml``).

    Raises:
        PresetError: the file is missing, not YAML, does not match the schema, or holds a
            pattern that is not a valid regular expression.
    """
    if path is None:
        return _shipped_markers()
    return _read_markers(path.read_text(encoding="utf-8"), str(path))


@functools.cache
def _shipped_markers() -> LogMarkers:
    file = resources.files("presets") / MARKERS_FILE
    return _read_markers(file.read_text(encoding="utf-8"), str(file))


def _read_markers(text: str, where: str) -> LogMarkers:
    try:
        data = yaml.load(text, Loader=SafeLoader)
        markers = LogMarkers.model_validate(data)
        markers.compiled()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        raise PresetError(
            f"not valid YAML: {exc.problem}",
            file=where,
            line=mark.line + 1 if mark else None,
            column=mark.column + 1 if mark else None,
        ) from None
    except ValidationError as exc:
        error = exc.errors()[0]
        place = ".".join(str(part) for part in error["loc"])
        raise PresetError(f"{place}: {error['msg']}", file=where) from None
    except re.error as exc:
        raise PresetError(f"bad pattern {exc.pattern!r}: {exc.msg}", file=where) from None
    return markers


# --- the result ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class EvidenceLine:
    """One line of the log that supports a finding.

    Attributes:
        line: 1-based line number, counted on ``\\n`` as an editor shows it.
        text: The segment's text (ANSI codes removed, shortened past ``EVIDENCE_CHARS``).
        tag: What it shows: a signal name, or ``phase``, ``bar``, ``error``, ``exception``,
            ``exit``, ``frame``, ``host_copy``, ``resume``, ``stopped``.
    """

    line: int
    text: str
    tag: str


@dataclass(frozen=True)
class OtherProcess:
    """Another process on the GPU, as PyTorch's message lists it."""

    pid: int | None
    gib: float


@dataclass(frozen=True)
class OomFigures:
    """The numbers of PyTorch's out-of-memory message, in GiB (None when not given).

    Attributes:
        form: ``current`` (``GPU 0 has a total capacity of …``) or ``legacy``
            (``(GPU 0; X total capacity; Y already allocated; Z free; W reserved …)``).
        gpu: The device index.
        tried: The allocation that failed.
        total: The card's capacity as PyTorch sees it.
        free: Free on the card at that moment.
        this_process: Everything this process held, PyTorch's and CUDA's own.
        allocated: Memory in live tensors.
        reserved: Reserved by PyTorch's caching allocator (legacy form).
        reserved_unallocated: Reserved by PyTorch but holding no tensor (fragmentation);
            in the legacy form, reserved minus allocated.
        other_processes: Other processes on the card and what each held.
        line: Where the message is.
    """

    form: Literal["current", "legacy"]
    gpu: int | None = None
    tried: float | None = None
    total: float | None = None
    free: float | None = None
    this_process: float | None = None
    allocated: float | None = None
    reserved: float | None = None
    reserved_unallocated: float | None = None
    other_processes: tuple[OtherProcess, ...] = ()
    line: int = 0

    @property
    def others_total(self) -> float:
        """GiB held by the other processes the message lists."""
        return sum(p.gib for p in self.other_processes)


@dataclass(frozen=True)
class SkipBanner:
    """``# OOM during training step, skipping batch k/3 #``, and the bar's step at that moment."""

    line: int
    attempt: int
    step: int | None


@dataclass(frozen=True)
class LogScan:
    """What one log shows about its last run.

    Attributes:
        source: The file read, if any.
        phase: Where the run was when it ended: the traceback's frames when they say, else
            the last phase line or bar.
        marker_phase: The phase from the toolkit's own lines and bars only.
        frame_phase: The phase the failing traceback's frames point to, if they do.
        phase_line: The line that set ``phase``.
        signals: What the run shows, in :data:`SIGNALS` order.
        oom: The last allocator message's numbers.
        skips: The last skip banners (``skip_count`` counts them all).
        last_step: The last training step the log shows (bar, save or sample line): the bar's
            ``n``, i.e. steps completed.
        total_steps: ``total`` of the training bar.
        first_step: The training bar's first value in this run (> 0 after a resume).
        training_started: Whether a training bar appeared in this run.
        crashed: The run ends in a failure (an error, an OOM, a kill), not in progress.
        stopped: The user stopped the job.
        resumed: The run continued an earlier one.
        run_count: Runs in the file; the fields describe the last.
        run_start_line: Where the last run starts.
        header_seen: The last run starts with a run header (not a truncated or pasted log).
        line_count: Lines in the file.
        exception: The last ``SomeError: message`` line of the run.
        exit_code: The exit status the log reports, if any.
        host_copy: The failing traceback copies between GPU and pinned host memory.
        evidence: Lines that support the findings, in file order.
    """

    source: str | None
    phase: Phase
    marker_phase: Phase
    frame_phase: Phase | None
    phase_line: int | None
    signals: tuple[Signal, ...]
    oom: OomFigures | None
    skips: tuple[SkipBanner, ...]
    skip_count: int
    last_step: int | None
    total_steps: int | None
    first_step: int | None
    training_started: bool
    crashed: bool
    stopped: bool
    resumed: bool
    run_count: int
    run_start_line: int
    header_seen: bool
    line_count: int
    exception: EvidenceLine | None
    exit_code: int | None
    host_copy: bool
    evidence: tuple[EvidenceLine, ...]

    def has(self, *signals: Signal) -> bool:
        """Whether the run shows any of ``signals``."""
        return any(s in self.signals for s in signals)

    def evidence_for(self, *tags: str) -> tuple[EvidenceLine, ...]:
        """The evidence lines with one of ``tags``."""
        return tuple(e for e in self.evidence if e.tag in tags)


# --- PyTorch's allocator message ----------------------------------------------------------------

_SIZE = r"(?P<{0}>\d+(?:\.\d+)?)\s*(?P<{0}_unit>bytes|[KMGT]i?B|B)\b"
_UNIT_GIB: Final[Mapping[str, float]] = {
    "bytes": 2.0**-30,
    "B": 2.0**-30,
    "KiB": 2.0**-20,
    "KB": 2.0**-20,
    "MiB": 2.0**-10,
    "MB": 2.0**-10,
    "GiB": 1.0,
    "GB": 1.0,
    "TiB": 1024.0,
    "TB": 1024.0,
}

TRIED = re.compile(r"Tried to allocate " + _SIZE.format("v"))
"""Both forms: the allocation that failed."""
CURRENT_CAPACITY = re.compile(
    r"GPU (?P<gpu>\d+) has a total capac(?:ity|ty) of "
    + _SIZE.format("total")
    + r" of which "
    + _SIZE.format("free")
    + r" is free"
)
"""Current form: ``GPU 0 has a total capacity of 31.36 GiB of which 336.62 MiB is free``."""
OTHER_PROCESS = re.compile(
    r"(?<![Tt]his )\bProcess (?:(?P<pid>\d+) )?has " + _SIZE.format("v") + r" memory in use"
)
"""Current form, once per other process: ``Process 4242 has 2.00 GiB memory in use``."""
THIS_PROCESS = re.compile(r"this process has " + _SIZE.format("v") + r" memory in use")
ALLOCATED = re.compile(
    r"Of the allocated memory " + _SIZE.format("v") + r" is allocated by PyTorch"
)
RESERVED_UNALLOCATED = re.compile(_SIZE.format("v") + r" is reserved by PyTorch but unallocated")
LEGACY_GPU = re.compile(r"\(GPU (?P<gpu>\d+);")
LEGACY_TOTAL = re.compile(_SIZE.format("v") + r" total capac(?:ity|ty)")
"""Legacy form, with the ``capacty`` misspelling of some torch versions."""
LEGACY_ALLOCATED = re.compile(_SIZE.format("v") + r" already allocated")
LEGACY_FREE = re.compile(_SIZE.format("v") + r" free\b")
LEGACY_RESERVED = re.compile(_SIZE.format("v") + r" reserved in total by PyTorch")


def _gib(match: re.Match[str], name: str) -> float:
    return float(match[name]) * _UNIT_GIB[match[f"{name}_unit"]]


def parse_allocator_message(text: str) -> dict[str, Any]:
    """The numbers found in one line of PyTorch's out-of-memory message (GiB).

    Keys (only those found): ``form``, ``gpu``, ``tried``, ``total``, ``free``,
    ``this_process``, ``allocated``, ``reserved``, ``reserved_unallocated``,
    ``other_processes`` (a list of ``(pid, gib)``).
    """
    found: dict[str, Any] = {}
    if match := TRIED.search(text):
        found["tried"] = _gib(match, "v")
    if match := CURRENT_CAPACITY.search(text):
        found.update(form="current", gpu=int(match["gpu"]))
        found.update(total=_gib(match, "total"), free=_gib(match, "free"))
    others = [
        (int(m["pid"]) if m["pid"] else None, _gib(m, "v")) for m in OTHER_PROCESS.finditer(text)
    ]
    if others:
        found["other_processes"] = others
    for key, pattern in (
        ("this_process", THIS_PROCESS),
        ("allocated", ALLOCATED),
        ("reserved_unallocated", RESERVED_UNALLOCATED),
    ):
        if match := pattern.search(text):
            found[key] = _gib(match, "v")
    if match := LEGACY_TOTAL.search(text):
        found.update(form="legacy", total=_gib(match, "v"))
        if gpu := LEGACY_GPU.search(text):
            found["gpu"] = int(gpu["gpu"])
        for key, pattern in (
            ("allocated", LEGACY_ALLOCATED),
            ("free", LEGACY_FREE),
            ("reserved", LEGACY_RESERVED),
        ):
            if match := pattern.search(text):
                found[key] = _gib(match, "v")
    return found


def _figures(found: Mapping[str, Any], line: int) -> OomFigures:
    """Assemble the figures; the legacy form's fragmentation is reserved minus allocated."""
    unallocated = found.get("reserved_unallocated")
    reserved, allocated = found.get("reserved"), found.get("allocated")
    if unallocated is None and reserved is not None and allocated is not None:
        unallocated = max(reserved - allocated, 0.0)
    return OomFigures(
        form=found.get("form", "current"),
        gpu=found.get("gpu"),
        tried=found.get("tried"),
        total=found.get("total"),
        free=found.get("free"),
        this_process=found.get("this_process"),
        allocated=allocated,
        reserved=reserved,
        reserved_unallocated=unallocated,
        other_processes=tuple(
            OtherProcess(pid, gib) for pid, gib in found.get("other_processes", [])
        ),
        line=line,
    )


# --- reading ------------------------------------------------------------------------------------


def scan_log(path: str | Path, *, markers: LogMarkers | None = None) -> LogScan:
    """Read the log at ``path`` and describe its last run.

    Raises:
        LogError: the file is missing, a folder, or cannot be read.
    """
    path = Path(path)
    if path.is_dir():
        raise LogError("this is a folder, not a log; pass the log file (log.txt)", file=path)
    try:
        with path.open("rb") as stream:
            return scan_stream(stream, source=str(path), markers=markers)
    except FileNotFoundError:
        raise LogError("no such log file", file=path) from None
    except OSError as exc:
        raise LogError(f"cannot read this log: {exc.strerror or exc}", file=path) from None


def scan_text(text: str | bytes, *, markers: LogMarkers | None = None) -> LogScan:
    """Describe a log held in memory (pasted text, a test)."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    return scan_stream(io.BytesIO(data), source=None, markers=markers)


def scan_stream(
    stream: IO[bytes],
    *,
    source: str | None = None,
    markers: LogMarkers | None = None,
    chunk_bytes: int = CHUNK_BYTES,
) -> LogScan:
    """Describe the last run of the log read from the binary ``stream``.

    Args:
        stream: The log, opened in binary mode; it is read once, in chunks.
        source: The file name to report.
        markers: The marker table (default: the shipped one).
        chunk_bytes: Bytes per read.
    """
    scanner = _Scanner((markers or load_log_markers()).compiled())
    for block in iter_blocks(stream, chunk_bytes):
        scanner.feed(block)
    return scanner.result(source)


def iter_blocks(stream: IO[bytes], chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
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


def _plain_chunks(stream: IO[bytes], head: bytes, size: int) -> Iterator[bytes]:
    data = head + stream.read(size)
    while data:
        yield data
        data = stream.read(size)


def _utf16_chunks(stream: IO[bytes], head: bytes, size: int) -> Iterator[bytes]:
    decoder = codecs.getincrementaldecoder("utf-16")(errors="replace")
    data = head + stream.read(size)
    while data:
        yield decoder.decode(data).encode("utf-8")
        data = stream.read(size)
    yield decoder.decode(b"", final=True).encode("utf-8")


def _first_separator(data: bytes) -> int:
    found = [i for i in (data.find(b"\n"), data.find(b"\r")) if i >= 0]
    return min(found) if found else -1


def clean(raw: bytes) -> str:
    """A segment as text: UTF-8 with bad bytes replaced, ANSI codes removed, trailing space cut."""
    text = raw.decode("utf-8", "replace")
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    return text.rstrip()


def _shorten(text: str) -> str:
    text = text.strip()
    return text if len(text) <= EVIDENCE_CHARS else text[: EVIDENCE_CHARS - 1] + "…"


@dataclass(frozen=True)
class BarReading:
    """What a tqdm bar segment shows: its description and ``n`` of ``total``."""

    desc: str
    n: int
    total: int


def parse_bar(text: str) -> BarReading | None:
    """The description, ``n`` and ``total`` of a tqdm bar segment, or None."""
    match = _BAR.match(text)
    if match is None:
        return None
    return BarReading(desc=match["desc"].strip(), n=int(match["n"]), total=int(match["total"]))


@dataclass
class _Run:
    """The mutable state of one run while it is read (bounded)."""

    start_line: int
    header: bool
    progressed: bool = False
    phase: Phase = "unknown"
    phase_evidence: EvidenceLine | None = None
    training_started: bool = False
    first_step: int | None = None
    start_step: int = 0
    train_bar: bytes | None = None
    train_bar_line: int = 0
    marker_step: int | None = None
    marker_step_line: int = 0
    signals: set[Signal] = field(default_factory=set)
    oom_found: dict[str, Any] | None = None
    oom_line: int = 0
    oom_tail: int = 0
    skips: deque[SkipBanner] = field(default_factory=lambda: deque(maxlen=SKIPS_KEPT))
    skip_count: int = 0
    evidence: deque[EvidenceLine] = field(default_factory=lambda: deque(maxlen=EVIDENCE_RING))
    failing: bool = False
    python_error: bool = False
    exception: EvidenceLine | None = None
    exit_code: int | None = None
    exit_seen: bool = False
    stopped: bool = False
    resumed: bool = False
    frames_seen: bool = False
    traceback_hint: FramePhase | None = None
    frame_phase: FramePhase | None = None
    host_copy: bool = False

    def note(self, line: int, text: str, tag: str) -> None:
        """Keep an evidence line (once per text and tag)."""
        text = _shorten(text)
        if not any(e.text == text and e.tag == tag for e in self.evidence):
            self.evidence.append(EvidenceLine(line, text, tag))

    def progress(self) -> None:
        """Training (or loading) moved on: what failed before did not end the run."""
        self.progressed = True
        if self.failing or self.frames_seen:
            self.failing = False
            self.frames_seen = False
            self.traceback_hint = None
            self.frame_phase = None
            self.host_copy = False

    def fail(self) -> None:
        """A failure line: the run ends here unless progress follows."""
        self.progressed = True
        self.failing = True
        self.stopped = False

    def enter(self, phase: Phase, line: int, text: str) -> None:
        """Move to ``phase``; the line that did it is kept as evidence."""
        if phase != self.phase or self.phase_evidence is None:
            self.phase = phase
            self.phase_evidence = EvidenceLine(line, _shorten(text), "phase")

    def train_step(self) -> tuple[int | None, int | None]:
        """(n, total) of the last training-bar redraw."""
        if self.train_bar is None:
            return None, None
        bar = parse_bar(clean(self.train_bar))
        return (bar.n, bar.total) if bar else (None, None)

    def current_step(self) -> int | None:
        """The latest step the log has shown, from the bar or a save/sample line."""
        if self.marker_step is not None and self.marker_step_line > self.train_bar_line:
            return self.marker_step
        step, _ = self.train_step()
        return step if step is not None else self.marker_step


class _Scanner:
    """Feeds blocks of the log through the runs' state; see the module docstring."""

    def __init__(self, patterns: _Compiled) -> None:
        self._p = patterns
        self._line = 1
        self._runs = 0
        self._run = self._new_run(1, header=False)
        self._repeat = _NO_BAR
        self._head_training = False
        self._train_prefix = b""
        self._kinds: dict[bytes, BarKind] = {}
        self._dump_line: int | None = None
        self._ends_with_newline = True  # an empty log has no lines

    def _new_run(self, line: int, *, header: bool) -> _Run:
        self._runs += 1
        return _Run(start_line=line, header=header)

    # The hot loop: keep it small. A bar redraw that repeats the previous segment's head is
    # only remembered; everything else goes through _bar or _text.
    def feed(self, block: bytes) -> None:
        """Read one block (it ends on a separator) and carry the line count over."""
        lines = block.split(b"\n")
        last_index = len(lines) - 1
        line_no = self._line
        repeat = self._repeat
        pending: bytes | None = None
        pending_line = 0
        for index, line in enumerate(lines):
            if line:
                redraws = line.count(b"\r")
                if not redraws:
                    segs: Sequence[bytes] = (line,)
                elif redraws > 2 and self._only_training_redraws(line, redraws):
                    segs = (line[line.rfind(b"\r") + 1 :],)
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
            if index != last_index:
                line_no += 1
        if pending is not None:
            self._remember(pending, pending_line)
        self._line = line_no
        self._ends_with_newline = block.endswith(b"\n")

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
        if self._head_training:
            self._run.train_bar, self._run.train_bar_line = seg, line

    def _bar(self, seg: bytes, pos: int, line: int) -> None:
        """A progress-bar segment whose head differs from the previous segment's."""
        end = seg.rfind(b"]")
        if end >= 0 and seg[end + 1 :].strip():
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
        run.progress()
        if kind == "training":
            self._training_bar(seg, line)
        elif kind == "unnamed":
            if run.training_started:
                run.enter("periodic_sample", line, clean(seg))
        elif kind == "sample":
            phase: Phase = "periodic_sample" if run.training_started else "baseline_sample"
            run.enter(phase, line, clean(seg))
        else:
            run.enter(kind, line, clean(seg))

    def _classify(self, head: bytes, seg: bytes) -> BarKind:
        """What a bar with this head (description and percentage) is; cached per head."""
        if len(self._kinds) >= _BAR_CACHE_LIMIT:
            self._kinds.clear()
        desc = self._unprefixed(clean(head.rstrip(_PCT_DIGITS))).strip().removesuffix(":")
        kind: BarKind
        if not desc.strip():
            kind = "unnamed"
        elif parse_bar(clean(seg)) is None:
            kind = "ignore"  # sizes such as 4.50G/9.99G: a download, not steps
        elif _TRAINING_POSTFIX.search(seg):
            kind = "training"  # whatever the job is called, only training reports a loss
        else:
            desc = desc.strip()
            kind = next((k for pattern, k in self._p.bars if pattern.search(desc)), "training")
        if kind == "training":
            self._train_prefix = b"\r" + head.rstrip(_PCT_DIGITS)
        self._kinds[head] = kind
        return kind

    def _unprefixed(self, text: str) -> str:
        """``text`` without the line prefixes of the marker table (rank tags, timestamps)."""
        if self._p.prefix is not None and (match := self._p.prefix.match(text)):
            return text[match.end() :]
        return text

    def _training_bar(self, seg: bytes, line: int) -> None:
        run = self._run
        run.train_bar, run.train_bar_line = seg, line
        if not run.training_started:
            run.training_started = True
            step, _ = run.train_step()
            run.first_step = step
            if step:
                run.resumed = True
        if run.phase != "training":
            run.enter("training", line, clean(seg))

    def _text(self, raw: bytes, line: int) -> None:
        """Any other segment: decoded, cleaned, prefiltered, then read rule by rule."""
        self._repeat, self._head_training = _NO_BAR, False
        text = self._unprefixed(clean(raw))
        if not text.strip():
            return
        run = self._run
        if self._dump_line is not None:
            dump_line, self._dump_line = self._dump_line, None
            if self._p.dump_key.match(text):
                self._start_run(dump_line)
                return
        if run.oom_tail:
            run.oom_tail -= 1
            self._oom_numbers(text, line, continuation=True)
        if not self._p.prefilter.search(text):
            return
        if self._p.run_start.search(text):
            self._start_run(line)
            return
        if self._p.dump_open.match(text):
            self._dump_line = line
            return
        self._resume(text, line)
        self._signals(text, line)
        self._failure(text, line)
        self._frames(text, line)
        self._phase(text, line)

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
                run.fail()

    def _oom_numbers(self, text: str, line: int, *, continuation: bool) -> None:
        run = self._run
        found = parse_allocator_message(text)
        if continuation:
            if found and run.oom_found is not None:
                for key, value in found.items():
                    run.oom_found.setdefault(key, value)
            return
        run.oom_tail = OOM_MESSAGE_TAIL
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
            run.python_error = True
            run.fail()
            run.exception = EvidenceLine(line, _shorten(text), "exception")
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
            run.frames_seen = True
            func = match["func"]
            if run.traceback_hint is None:
                for pattern, phase in self._p.frame_phases:
                    if pattern.search(func):
                        run.traceback_hint = run.frame_phase = phase
                        run.note(line, text, "frame")
                        break
            return
        if run.frames_seen and self._p.host_copy.search(text):
            run.host_copy = True
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
                sampled_later = run.training_started or bool(step and int(step) > 0)
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
        explained = signals & FATAL_SIGNALS or "host_oom_kill" in signals
        if crashed and run.exit_seen and not run.python_error and not explained:
            signals.add("silent_exit")
        phase = run.phase
        frame_phase: Phase | None = None
        if crashed and run.frame_phase is not None:
            frame_phase = _resolve_frame_phase(run.frame_phase, run.training_started)
            phase = frame_phase
        oom = _figures(run.oom_found, run.oom_line) if run.oom_found else None
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
            evidence=tuple(evidence),
        )


def _resolve_frame_phase(phase: FramePhase, training_started: bool) -> Phase:
    if phase == "sample":
        return "periodic_sample" if training_started else "baseline_sample"
    return phase
