"""Tests of how the log is read: the cheap test (trigger), chunks, progress and cancel.

The main property: for any log, and every marker of the shipped table (whatever markers are
added to it later), scanning with the trigger gives exactly the scan that sends every segment
through every rule.
"""

from __future__ import annotations

import io
import re
import threading
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, seed, settings, strategies as st

import oom_wizard.logs.scan as scan_module
from oom_wizard.logs import bars as logs_bars, read as logread, run as logs_run, scan as logscan
from oom_wizard.logs.lines import clean
from oom_wizard.logs.markers import LogMarkers, _unnamed, load_log_markers
from oom_wizard.logs.read import (
    NON_ASCII_FOLDS,
    ScanCancelled,
    Watch,
    build_gate,
    build_trigger,
    current_watch,
    gate_expression,
    required_strings,
    watching,
    window_pattern,
)
from oom_wizard.logs.result import LogScan
from oom_wizard.logs.scan import scan_log, scan_stream

REPORTS = Path(__file__).resolve().parents[2] / "fixtures" / "reports"
MARKERS = load_log_markers()
COMPILED = MARKERS.compiled()


def marker_sources(markers: LogMarkers) -> list[str]:
    """Every pattern the joined prefilter holds, one by one (its top-level alternatives)."""
    return [_unnamed(source) for source in _split_top_level(markers.compiled().prefilter.pattern)]


def _split_top_level(joined: str) -> list[str]:
    """``(?:a)|(?:b)`` → ``[a, b]`` (the joined prefilter's own parts, whatever they are)."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(joined):
        char = joined[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":  # a class may hold ( ) |
            i = _class_end(joined, i)
            continue
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            parts.append(joined[start:i])
            start = i + 1
        i += 1
    parts.append(joined[start:])
    return [part[3:-1] if part.startswith("(?:") else part for part in parts]


def _class_end(text: str, i: int) -> int:
    i += 1
    if i < len(text) and text[i] == "^":
        i += 1
    if i < len(text) and text[i] == "]":
        i += 1
    while text[i] != "]":
        i += 2 if text[i] == "\\" else 1
    return i + 1


SOURCES = marker_sources(MARKERS)


def scan_both(data: bytes, chunk_bytes: int = 1 << 20) -> tuple[LogScan, LogScan]:
    """The scan with the trigger, and the scan with every segment read by every rule."""
    fast = scan_stream(io.BytesIO(data), chunk_bytes=chunk_bytes)
    full = scan_stream(io.BytesIO(data), chunk_bytes=chunk_bytes, prefilter=False)
    return fast, full


# --- the required strings ------------------------------------------------------------------------


def test_the_split_finds_every_marker_pattern() -> None:
    assert len(SOURCES) > 60
    joined = "|".join(f"(?:{source})" for source in SOURCES)
    assert joined == COMPILED.prefilter.pattern
    assert all(re.compile(source) for source in SOURCES)


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        (r"^Loading\b", {("Loading", False)}),
        (r"\b(?:CUDA|HIP) out of memory", {(" out of memory", False)}),
        (r"^Saved (?:checkpoint|optimizer) to ", {("Saved ", False)}),
        # The parser moves the shared "E" out of the alternatives: it is joined back.
        (r"\w+(?:Error|Exception)", {("Error", False), ("Exception", False)}),
        (r"(?:ab)+c", {("ab", False)}),
    ],
)
def test_required_strings(pattern: str, expected: set[tuple[str, bool]]) -> None:
    assert required_strings(pattern) == frozenset(expected)


def test_a_string_ignoring_case_is_kept_whole_and_cut_at_non_ascii() -> None:
    assert required_strings(r"(?i:^Caching latents)") == frozenset({("Caching latents", True)})
    assert required_strings(r"(?i:^Caf\u00e9 au lait)") == frozenset({(" au lait", True)})


@pytest.mark.parametrize("pattern", [r"\d+", r"^\s*$", r"(?:abc)?", r"a|\d"])
def test_a_pattern_with_no_fixed_text_needs_nothing(pattern: str) -> None:
    assert required_strings(pattern) is None


def test_python_folds_only_these_ascii_letters_to_other_characters() -> None:
    everything = "".join(chr(c) for c in range(0x80, 0x110000) if not 0xD800 <= c < 0xE000)
    folded: dict[str, set[str]] = {}
    for char in re.findall("(?i)[a-z]", everything):
        for letter in "abcdefghijklmnopqrstuvwxyz":
            if re.fullmatch(f"(?i){letter}", char):
                folded.setdefault(letter, set()).add(char)
    assert folded == {letter: set(forms) for letter, forms in NON_ASCII_FOLDS.items()}


def test_a_window_ignoring_case_finds_the_non_ascii_forms_too() -> None:
    pattern = re.compile(window_pattern("Caching", ignore_case=True))
    for text in ("caching", "CACHING", "CACH\u0130NG", "cach\u0131ng"):
        assert re.fullmatch("(?i)caching", text)
        assert pattern.fullmatch(text.encode()), text
    assert not pattern.search(b"cashing")


def contains(text: str, required: frozenset[tuple[str, bool]]) -> bool:
    """Whether the UTF-8 bytes of ``text`` hold one of ``required`` (as the trigger looks)."""
    return holds(text, windows(required))


def windows(required: frozenset[tuple[str, bool]]) -> list[re.Pattern[bytes]]:
    """The trigger's byte pattern for each required string."""
    return [re.compile(window_pattern(needle, ignore_case=icase)) for needle, icase in required]


def holds(text: str, patterns: list[re.Pattern[bytes]]) -> bool:
    data = text.encode("utf-8", "surrogatepass")
    return any(pattern.search(data) for pattern in patterns)


#: Each marker pattern's required strings (None: no fixed text) and their byte patterns,
#: worked out once: they depend on the pattern alone, not on what is drawn from it.
REQUIRED = {source: required_strings(source) for source in SOURCES}
WINDOWS = {source: windows(required) for source, required in REQUIRED.items() if required}


# That every match of every marker holds a required string is checked below, in the one
# property that draws a match of every pattern for the trigger and the gate too.


# --- the trigger ---------------------------------------------------------------------------------


def test_the_shipped_markers_have_a_trigger() -> None:
    assert COMPILED.trigger is not None


def test_markers_with_no_fixed_text_read_every_line() -> None:
    assert build_trigger([r"^Loading\b", r"\d+ files"], re.compile("x")) is not None
    assert build_trigger([r"^Loading\b", r"^\d+$"], re.compile("x")) is None


PREFIXES = ["", "[rank0]: ", "2025-03-14T10:48:02.511Z ", "[2024-09-09 17:43:57] [INFO] "]


def test_a_coloured_oom_line_is_read() -> None:
    line = "\x1b[31mtorch.OutOfMemory\x1b[0mError: CUDA out of\x1b[1m memory. Tried to allocate"
    fast, full = scan_both(f"Running 1 job\nLoading model\n{line}\n".encode())
    assert fast == full
    assert "cuda_oom" in fast.signals


# --- the main property: same scan with and without the trigger -----------------------------------

ORDINARY = [
    "/venv/lib/python3.10/site-packages/torch/utils/checkpoint.py:91: UserWarning: None of the "
    "inputs have requires_grad=True. Gradients will be None",
    "  warnings.warn(",
    "Token indices sequence length is longer than the specified maximum sequence length for "
    "this model (93 > 77). Running this sequence through the model will result in errors",
    "{'loss/lr': 0.0001, 'step': 120}",
    "{",
    '    "type": "ui_trainer",',
    "}",
    "",
    "   ",
    "Process 4242 has 2.00 GiB memory in use. Of the allocated memory 20.84 GiB is allocated",
    "GPU 0 has a total capacity of 23.55 GiB of which 412.31 MiB is free.",
]
BARS = [
    "my_lora:  12%|#2        | 360/3000 [05:41:20<41:12,  1.73s/it, lr: 1e-04 loss: 4.1e-01]",
    "my_lora:  12%|#2        | 361/3000 [05:41:22<41:10,  1.73s/it, lr: 1e-04 loss: 4.0e-01]",
    " 40%|####      | 10/25 [00:10<00:15,  1.00it/s]",
    "Generating Images:  50%|#####     | 1/2 [00:30<00:30, 30.0s/it]",
    "Caching latents to disk:  10%|#         | 4/40 [00:01<00:09,  4.00it/s]",
    "model.safetensors:  45%|####5     | 4.50G/9.99G [01:00<01:13, 75.0MB/s]",
]


def _lines_of_reports() -> list[str]:
    lines: list[str] = []
    for log in sorted(REPORTS.glob("*/log.txt")):
        text = log.read_bytes().decode("utf-8", "replace")
        lines.extend(re.split(r"\r\n|\r|\n", text)[:60])
    return lines


REPORT_LINES = _lines_of_reports()


def log_lines() -> st.SearchStrategy[str]:
    """A line of a log: a marker's match, a real report's line, a bar, ordinary or any text."""
    marker_lines = st.one_of(*(st.from_regex(source, fullmatch=True) for source in SOURCES))
    return st.tuples(
        st.sampled_from([*PREFIXES, "\x1b[33m"]),
        st.one_of(
            marker_lines,
            marker_lines,
            st.sampled_from(REPORT_LINES),
            st.sampled_from(BARS),
            st.sampled_from(ORDINARY),
            st.text(max_size=40),
        ),
    ).map("".join)


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(st.tuples(log_lines(), st.sampled_from(["\n", "\r", "\r\n", "\n\n"])), max_size=60),
    st.sampled_from([7, 64, 300, 1 << 20]),
    st.sampled_from([(40, 8), (500, 64)]),
)
def test_the_trigger_and_the_gate_never_change_the_scan_whatever_the_regions(
    lines: list[tuple[str, str]], chunk_bytes: int, sizes: tuple[int, int]
) -> None:
    """The trigger and the gate give the scan of every segment read: with the shipped
    region sizes, and with small regions and pieces (the gate halves them down to lines).

    One log per example for both (they were two tests of 150 and 120 examples, each
    drawing its own logs, which is where nearly all of their CPU went)."""
    data = "".join(line + end for line, end in lines).encode("utf-8", "surrogatepass")
    fast, full = scan_both(data, chunk_bytes)
    assert fast == full
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(logread, "REGION", sizes[0])
        patch.setattr(logread, "PIECE", sizes[1])
        fast, full = scan_both(data, chunk_bytes)
    assert fast == full


@pytest.mark.parametrize("report", sorted(REPORTS.glob("*/log.txt")), ids=lambda p: p.parent.name)
def test_every_report_scans_the_same_with_and_without_the_trigger(report: Path) -> None:
    data = report.read_bytes()
    for chunk_bytes in (97, 1 << 20):
        fast, full = scan_both(data, chunk_bytes)
        assert fast == full


def test_lines_after_an_allocator_message_are_read_whatever_they_hold() -> None:
    log = (
        "Running 1 job\nLoading model\n"
        "my_lora:  1%|1| 30/3000 [00:10<10:00,  1.00it/s, loss: 0.1]\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
        "GPU 0 has a total capacity of 23.55 GiB of which 12.00 MiB is free.\n"
        "Of all that, this process has 23.50 GiB memory in use.\n"
    )
    trigger = COMPILED.trigger
    assert trigger is not None
    assert trigger.search.search(log.splitlines()[-1].encode()) is None  # read for the OOM only
    fast, full = scan_both(log.encode())
    assert fast == full
    assert fast.oom is not None
    assert (fast.oom.total, fast.oom.this_process) == (23.55, 23.5)


def test_text_after_the_first_segment_of_a_bar_line_is_read_in_a_cold_stretch() -> None:
    """The gate sees only a bar line's first segment: a message printed over the bar (after a
    ``\\r``) among lines of chatter is still read, and so is the line after it."""
    chatter = "".join(f"epoch {i}/1000, average loss 0.1432\n" for i in range(3000))
    bar = "".join(
        f"\rmy_lora:  1%|1| {n}/3000 [00:10<10:00,  1.00it/s, loss: 0.1]" for n in (30, 31)
    )
    log = (
        f"Running 1 job\n{chatter}skipping a bad image{bar}"
        "\rtorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
        "GPU 0 has a total capacity of 23.55 GiB of which 12.00 MiB is free.\n"
        f"{chatter}"
    )
    gate = COMPILED.gate
    assert gate is not None and not gate.hot(chatter.encode() + b"skipping a bad image\n")
    fast, full = scan_both(log.encode(), chunk_bytes=16 * 1024)
    assert fast == full
    assert fast.oom is not None and fast.oom.total == 23.55
    assert fast.last_step == 31


# --- chunks, long lines, memory ------------------------------------------------------------------


class Generated:
    """A stream of ``size`` bytes of ordinary lines made on the fly (never held whole)."""

    def __init__(self, size: int, line: bytes) -> None:
        self._left = size
        self._line = line

    def read(self, size: int, /) -> bytes:
        count = min(size, self._left) // len(self._line)
        if count == 0:
            return b""
        self._left -= count * len(self._line)
        return self._line * count


def test_memory_stays_bounded_on_a_long_log() -> None:
    line = ORDINARY[0].encode() + b"\n"
    tracemalloc.start()
    try:
        scan = scan_stream(Generated(40 << 20, line))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert scan.line_count == (40 << 20) // len(line)
    assert peak < 12 << 20


def test_a_very_long_line_without_an_end_is_read_in_bounded_memory() -> None:
    data = b"Running 1 job\nLoading model\n" + b"x" * (8 << 20) + b"\nCUDA out of memory.\n"
    tracemalloc.start()
    try:
        fast = scan_stream(io.BytesIO(data), chunk_bytes=1 << 16)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "cuda_oom" in fast.signals
    assert fast.line_count == 4
    assert peak < (len(data) // 2)


# --- progress and cancel -------------------------------------------------------------------------


def write_log(path: Path, lines: int) -> Path:
    body = "\n".join(ORDINARY[i % 3] for i in range(lines))
    path.write_text(f"Running 1 job\nLoading model\n{body}\nCUDA out of memory.\n", "utf-8")
    return path


def test_progress_is_reported_after_every_chunk_up_to_the_size(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.txt", 2000)
    seen: list[tuple[int, int]] = []
    scan = scan_log(log, progress=lambda done, total: seen.append((done, total)))
    size = log.stat().st_size
    assert "cuda_oom" in scan.signals
    assert seen[-1] == (size, size)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)
    assert {total for _, total in seen} == {size}


def test_a_cancelled_scan_stops_at_the_next_chunk(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.txt", 2000)
    stop = threading.Event()
    reads: list[int] = []

    def progress(done: int, total: int) -> None:
        reads.append(done)
        if len(reads) == 3:
            stop.set()

    with pytest.raises(ScanCancelled):
        scan_stream(
            io.BytesIO(log.read_bytes()),
            chunk_bytes=4096,
            total=log.stat().st_size,
            watch=Watch(progress, stop.is_set),
        )
    assert len(reads) == 3
    assert reads[-1] < log.stat().st_size


def test_watching_reaches_scans_started_far_below_and_only_in_its_thread(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.txt", 100)
    seen: list[int] = []
    other: list[Watch | None] = []
    with watching(Watch(progress=lambda done, total: seen.append(done))):
        thread = threading.Thread(target=lambda: other.append(current_watch()))
        thread.start()
        thread.join()
        scan_log(log)
    assert seen and seen[-1] == log.stat().st_size
    assert other == [None]
    assert current_watch() is None


def test_an_explicit_callback_wins_over_the_watch(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.txt", 100)
    outer: list[int] = []
    inner: list[int] = []
    with watching(Watch(progress=lambda done, total: outer.append(done))):
        scan_log(log, progress=lambda done, total: inner.append(done))
    assert inner and not outer


def test_cancel_from_another_thread(tmp_path: Path) -> None:
    stop = threading.Event()
    results: list[BaseException | LogScan] = []
    started = threading.Event()

    def progress(done: int, total: int) -> None:
        started.set()

    def read() -> None:
        try:
            results.append(
                scan_stream(Generated(1 << 40, b"plain line\n"), watch=Watch(progress, stop.is_set))
            )
        except ScanCancelled as exc:
            results.append(exc)

    thread = threading.Thread(target=read)
    thread.start()
    assert started.wait(60)
    stop.set()
    thread.join(60)
    assert not thread.is_alive()
    assert len(results) == 1 and isinstance(results[0], ScanCancelled)


@pytest.mark.parametrize("between", ["\x00", "some other output"])
@pytest.mark.parametrize("chunk_bytes", [1, 5, 61, 300])
def test_a_line_no_rule_reads_still_ends_the_bar_redraws(between: str, chunk_bytes: int) -> None:
    """Found by the chunk-size property: a skipped line between two draws of a bar stuck at 0
    must count as other output, as it does when every line is read (then it is a stall)."""
    bar = "my_lora:   0%|#         | 0/3000 [00:10<1:19:20,  1.73s/it]"
    data = f"{bar}\n{between}\r{bar}\n".encode()
    whole = scan_stream(io.BytesIO(data), prefilter=False)
    assert "stall" in whole.signals
    assert scan_stream(io.BytesIO(data), chunk_bytes=chunk_bytes) == whole


@pytest.mark.parametrize("chunk_bytes", [7, 300, 1 << 20])
def test_a_bar_drawn_without_its_bar_is_read_far_into_a_long_log(chunk_bytes: int) -> None:
    """The trigger and the gate let a notebook's bar (no bar glyphs) through as every rule
    would read it, after a long stretch no rule reads and with its redraws joined by \\r."""
    filler = "".join(f"noise line {i} of nothing\n" for i in range(4000))
    redraws = "\r".join(
        f"steps:   {n * 100 // 2300}% {n}/2300 [00:0{n}<1:00:00,  1.5s/it]" for n in range(4)
    )
    data = f"{filler}{redraws}\nCUDA out of memory. Tried to allocate 2.00 MiB\n".encode()
    fast, full = scan_both(data, chunk_bytes)
    assert fast == full
    assert fast.training_started and (fast.last_step, fast.total_steps) == (3, 2300)


def drawn_bars_log(steps: int, *, slow_from: int | None = None, foreign_at: int = -1) -> bytes:
    """The shared yardstick's shape (``../shared/bench/make_mixed_log.py``): per step a training
    bar drawn three times on one line, its percentage moving at every step and no ``\\r``
    before the first draw, then three ordinary lines; optionally a slowdown from a step, and
    another bar's line (a sample pass drawn without a phase line) at one step; the error far
    after the last bar (a stretch no rule reads between them)."""
    out = ["Running 1 job\n# Running job: big\nLoading transformer\n"]
    for step in range(1, steps + 1):
        rate = 9.0 if slow_from is not None and step >= slow_from else 1.5
        bar = (
            f"big:  {step % 100:2d}%|#####     | {step}/90000 [1:02:03<3:04:05, "
            f"{rate:.2f}s/it, lr: 1.0e-04 loss: 4.512e-01]"
        )
        out.append("\r".join([bar] * 3) + "\n")
        if step == foreign_at:
            out.append(" 40%|####      | 8/20 [00:04<00:06,  2.00it/s]\n")
        out += [f"INFO:toolkit.data_loader:loaded 1 image(s) from /data/{step}.jpg\n"] * 3
    out += [f"INFO:toolkit.data_loader:loaded 1 image(s) from /data/x{n}.jpg\n" for n in range(200)]
    out.append("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    return "".join(out).encode()


@pytest.mark.parametrize(
    "shape", [{}, {"slow_from": 900}, {"foreign_at": 1500}, {"foreign_at": 500, "chunk": 4096}]
)
def test_a_training_bar_whose_head_moves_at_every_step_is_skipped_as_every_rule_reads_it(
    shape: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 40's yardstick: redraws of a bar whose percentage changes at every step, drawn
    afresh on each line, are skipped in bulk (``_Scanner._skip_drawn_bars``): the scan is the
    one every rule gives, the slowdown's step and another bar's line included."""
    skipped: list[int] = []
    original = scan_module._Scanner._skip_drawn_bars

    def spy(self: scan_module._Scanner, block: bytes, pos: int, limit: int) -> int:
        stop = original(self, block, pos, limit)
        skipped.append(stop - pos)
        return stop

    monkeypatch.setattr(scan_module._Scanner, "_skip_drawn_bars", spy)
    chunk = shape.pop("chunk", 1 << 16)
    fast, full = scan_both(drawn_bars_log(1500, **shape), chunk)
    assert fast == full
    assert fast.last_step == 1500 and fast.crashed
    assert (fast.spill_step is not None) == ("slow_from" in shape)
    assert sum(skipped) > 100_000  # most of the log was skipped in bulk


def redraws_log(
    steps: int,
    *,
    desc: str = "big",
    text: str = "INFO:toolkit.data_loader:loaded 1 image(s) from /data/{step}.jpg",
    repeat: int = 1,
    line_end: str = "\n",
    foreign_every: int = 0,
) -> bytes:
    """:func:`drawn_bars_log`'s shape with what can keep the gate from vouching for a stretch:
    text lines that hold a ``%`` or characters of several bytes (cut between two chunks), a
    bar description that is not ASCII, a head kept for ``repeat`` steps (a window of repeats of
    one head), ``\\r`` for some line ends, another bar now and then."""
    out = ["Running 1 job\n# Running job: big\nLoading transformer\n"]
    for step in range(1, steps + 1):
        pct = step // repeat % 100
        bar = (
            f"{desc}:  {pct:2d}%|#####     | {step}/90000 [1:02:03<3:04:05, "
            f"1.50s/it, lr: 1.0e-04 loss: 4.512e-01]"
        )
        out.append("\r".join([bar] * 3) + ("\n" if step % 7 else line_end))
        if foreign_every and step % foreign_every == 0:
            out.append(" 40%|####      | 8/20 [00:04<00:06,  2.00it/s]\n")
        out += [text.format(step=step) + "\n"] * 3
    out.append("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    return "".join(out).encode()


@pytest.mark.parametrize(
    ("shape", "vouched"),
    [
        ({}, True),
        ({"text": "caption {step}: caf\u00e9 \u2588\u2588 \U0001f600 done"}, True),
        ({"repeat": 40}, True),
        ({"line_end": "\r"}, True),
        ({"text": "cached {step} of 90000 (12%)"}, False),
        ({"foreign_every": 50}, True),
        ({"desc": "\u8bad\u7ec3"}, False),
    ],
)
@pytest.mark.parametrize("chunk", [997, 1 << 16])
def test_the_gate_vouches_for_training_bar_redraws_as_every_rule_reads_them(
    shape: dict[str, Any], vouched: bool, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the gate says no to a stretch with the training bar's redraws in question
    (``Gate.with_redraws``), its windows are skipped without counting them: the scan is the
    one every rule gives, at a chunk's edge, with a character of several bytes cut there, a
    line of ``\\r`` redraws, repeats of one head, another bar; with a ``%`` in the text, or a
    description that is not ASCII, the windows are counted as before."""
    monkeypatch.setattr(scan_module, "RATE_WINDOW", 1500)
    monkeypatch.setattr(scan_module, "REDRAW_GATE_AFTER", 1)
    vouched_windows: list[bool] = []
    original = scan_module._Scanner._only_redraws

    def spy(self: scan_module._Scanner, block: bytes, pos: int, stop: int, prefix: bytes) -> bool:
        counted = self._counted
        answer = original(self, block, pos, stop, prefix)
        vouched_windows.append(self._counted == counted)
        return answer

    monkeypatch.setattr(scan_module._Scanner, "_only_redraws", spy)
    fast, full = scan_both(redraws_log(300, **shape), chunk)
    assert fast == full
    assert fast.last_step == 300 and fast.crashed
    assert any(vouched_windows) is vouched


SEGMENTS = st.sampled_from(
    ["big: 5%|#", "big:\u00e9 5%|", "big: 5%|#%", "big:", "bi", "x", "x 5%", "\u00e9\x7f", "", "%|"]
)


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(
        st.tuples(SEGMENTS, st.sampled_from("\r\n")),
        max_size=8,
    ),
    st.sampled_from(["big:", "b"]),
)
def test_a_stretch_the_gate_vouches_for_holds_only_the_training_bar_redraws(
    segments: list[tuple[str, str]], desc: str
) -> None:
    """What ``Gate.with_redraws`` says no to: no pattern could match, every ``\\r`` starts
    a segment with the description, each such segment holds one ``%`` and no other segment
    holds one (the counts ``_Scanner._skip_drawn_bars`` would make agree)."""
    assert GATE is not None
    redraws = GATE.with_redraws(desc.encode())
    assert redraws is not None
    data = "".join(segment + end for segment, end in segments).encode()
    if redraws.matches(data):
        return
    assert not GATE.matches(data)
    lead = b"\n"
    for segment, end in segments:
        raw = segment.encode()
        assert not (lead == b"\r" and not raw.startswith(desc.encode())), data
        assert raw.count(b"%") == (1 if raw.startswith(desc.encode()) else 0), data
        lead = end.encode()


def test_the_gate_does_not_vouch_for_a_description_it_cannot_read() -> None:
    assert GATE is not None
    assert GATE.with_redraws("\u8bad\u7ec3:".encode()) is None
    assert GATE.with_redraws(b"50% done") is None
    assert GATE.with_redraws(b"") is None


# --- the gate: the trigger's question for whole regions ------------------------------------------

GATE = COMPILED.gate


def test_the_shipped_markers_have_a_gate() -> None:
    assert GATE is not None


def _cleaned(raw: bytes) -> str:
    text = clean(raw)
    if COMPILED.prefix is not None and (match := COMPILED.prefix.match(text)):
        text = text[match.end() :]
    return text


AROUND = ["", " ", "x", "\u00e9", "\u2502 ", "\ufffd", "\t"]
MATCHES = {source: st.from_regex(source) for source in SOURCES}
"""One strategy per pattern, built once: parsing a pattern into a strategy is most of a draw."""


def _line(text: str) -> bytes:
    return text.replace("\r", " ").replace("\n", " ").encode("utf-8", "replace")


SHARDS = 4
"""The patterns are drawn in this many tests, each a quarter of them, so that the workers of a
parallel run share the draws instead of one worker drawing them all at its end."""


@pytest.mark.parametrize("shard", range(SHARDS))
@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@seed(20261207)
@given(st.data())
def test_every_match_of_every_marker_gets_past_the_required_strings_the_trigger_and_the_gate(
    shard: int, data: st.DataObject
) -> None:
    """For every marker pattern, one match drawn per example and given to the three cheap
    tests that must never miss a line a pattern matches:

    - the match holds one of the pattern's required strings (what the trigger looks for);
    - the trigger lets its line through, as a log prints it (a prefix, then the match) and
      with other text right around the match;
    - the gate finds the line with text around the match, alone and inside a block.

    Each shard draws a quarter of the patterns, three matches of each, from a fixed seed: the
    same ones on every run and in every checkout (the derandomized profile drew other matches
    in a fresh clone of the same commit, and they cost five minutes). One example drawing every
    pattern overran Hypothesis's buffer: it ran about 38 examples to keep 3 (13 s); a quarter
    fits, and the four take about a second. ``HYPOTHESIS_PROFILE=explore`` does not change the
    draws: drop the seed to draw new ones.
    """
    trigger = COMPILED.trigger
    assert trigger is not None
    assert GATE is not None
    for source in SOURCES[shard::SHARDS]:
        assert REQUIRED[source] is not None, f"no fixed text in {source!r}: every line is read"
        prefix = data.draw(st.sampled_from(PREFIXES))
        before = data.draw(st.sampled_from(AROUND))
        match = data.draw(MATCHES[source], label=source)
        after = data.draw(st.sampled_from(AROUND))

        assert holds(match, WINDOWS[source]), (source, match)

        for line in (prefix + match, prefix + before + match + after):
            raw = _line(line)
            text = _cleaned(raw)
            if COMPILED.prefilter.search(text):
                assert trigger.search.search(raw) is not None, (source, line)
                assert trigger.passes(raw, text), (source, line)
            if re.search(source, text) or re.search(source, text.lstrip(" ")):
                found = trigger.patterns_in(raw)  # the rules it is read by: this one's too
                assert found is None or SOURCES.index(source) in found, (source, line)

        line = prefix + before + match + after
        raw = _line(line)
        text = _cleaned(raw)
        if COMPILED.prefilter.search(text) or COMPILED.prefilter.search(text.lstrip(" ")):
            assert GATE.matches(raw), (source, line)
            block = b"plain words\r" + raw + data.draw(st.sampled_from([b"\n", b"\r", b""]))
            assert GATE.matches(block), (source, line)


def test_the_gate_says_no_to_ordinary_lines() -> None:
    assert GATE is not None
    lines = [line for line in ORDINARY if line.strip() not in ("{", "}")] + BARS[:3]
    block = ("\n".join(lines) + "\n").encode()
    assert not GATE.matches(block)
    assert GATE.hot(block * 500) == []
    assert GATE.matches(block + b"torch.OutOfMemoryError: CUDA out of memory.\n")
    assert GATE.matches(block + b"\x1b[0m\n")  # a line with an escape code is always read


@pytest.mark.parametrize(
    ("line", "hot"),
    [
        ("{", True),
        ("{   \u3000", True),  # what rstrip removes, even non-ASCII space
        ("{'loss/lr': 0.0001}", False),
        ("Killed", True),
        ("Killed  python train.py", True),
        ("Killed process 4242 (python)", False),
        ("Killed it", False),
        ("Running 1 job", True),
        ("Running this sequence through the model", False),
        ("LOAD\u0130NG model", True),  # Python's ignore-case folds İ to i
        ("[process exited with code 1 (0x00000001)]", True),
        ("\u5df2\u9000\u51fa\u8fdb\u7a0b\uff0c\u4ee3\u7801\u4e3a 1 (0x00000001)]", True),
    ],
)
def test_the_gate_keeps_the_end_of_a_segment_and_non_ascii_text(line: str, hot: bool) -> None:
    assert GATE is not None
    raw = line.encode()
    assert GATE.matches(raw + b"\n") is hot
    assert bool(COMPILED.prefilter.search(_cleaned(raw))) is hot


def test_a_pattern_the_gate_cannot_translate_leaves_the_trigger_alone() -> None:
    assert gate_expression(r"(a)?(?(1)b|c)") is None
    assert build_gate([r"^Loading\b", r"(a)?(?(1)b|c)"]) is None
    assert build_gate([r"^Loading\b", r"\bKilled\s*$"]) is not None


@pytest.mark.parametrize("region", [64, 300, 4096])
def test_the_gate_cuts_regions_down_to_whole_lines(
    region: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert GATE is not None
    monkeypatch.setattr(logread, "REGION", region)
    monkeypatch.setattr(logread, "PIECE", 16)
    lines = [f"ordinary line {i}\n".encode() for i in range(400)]
    lines[17] = b"Traceback (most recent call last):\n"
    lines[230] = b"Saving at step 500\n"
    block = b"".join(lines)
    hot = GATE.hot(block)
    assert hot and all(start < end for start, end in hot)
    assert all(
        block[end - 1 : end] == b"\n" and (not start or block[start - 1] == 10)
        for start, end in hot
    )
    assert sum(end - start for start, end in hot) < len(block) // 4
    for marker in (lines[17], lines[230]):
        at = block.index(marker)
        assert any(start <= at and at + len(marker) <= end for start, end in hot)


# The gate with small regions is checked on whole logs in
# test_the_trigger_and_the_gate_never_change_the_scan_whatever_the_regions, above.


# --- a line that ends in a run of redraws: only its first and last redraws are read -------------


def _redraw(desc: str, n: int, total: int, seconds: float, tail: str) -> str:
    pct = n * 100 // total
    label = f"{desc}: " if desc else ""
    return (
        f"{label}{pct:3d}%|{'#' * (pct // 10):<10}| {n}/{total} "
        f"[{n // 60:02d}:{n % 60:02d}<10:00, {seconds:5.2f}s/it{tail}]"
    )


@st.composite
def bar_runs(draw: st.DrawFn) -> str:
    """A line of one bar's redraws joined by ``\\r`` as tqdm writes them, with what real logs
    put around them: text before the first redraw, a change of percentage, a redraw with text
    after its ``]`` or without one, another bar, a slowdown or a bar stuck at 0."""
    desc = draw(st.sampled_from(["my_lora", "Generating Images", "", "Caching latents to disk"]))
    total = draw(st.sampled_from([25, 40, 3000]))
    n = draw(st.integers(0, total))
    seconds = draw(st.sampled_from([0.5, 1.73, 9.0]))
    tail = draw(st.sampled_from([", lr: 1e-04 loss: 4.1e-01", ""]))
    redraws = []
    for _ in range(draw(st.integers(1, 30))):
        kind = draw(st.sampled_from(["next"] * 6 + ["same", "slow", "odd"]))
        if kind == "next":
            n = min(n + draw(st.integers(1, 3)), total)
        elif kind == "slow":
            seconds *= draw(st.sampled_from([2.0, 5.0]))
        redraw = _redraw(desc, n, total, seconds, tail)
        if kind == "odd":
            redraw = draw(
                st.sampled_from(
                    [redraw[:-1], redraw + " Saving at step 7", " 40%|####| 2/5 [00:01<00:01]"]
                )
            )
        redraws.append(redraw)
    before = draw(st.sampled_from(["", "", "warnings.warn(", "Loading model\r", "x\r\r"]))
    return before + ("\r" if before and not before.endswith("\r") else "") + "\r".join(redraws)


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(
        st.one_of(bar_runs(), bar_runs(), st.sampled_from([*ORDINARY, *BARS, "Running 1 job"])),
        max_size=12,
    ),
    st.sampled_from([64, 1 << 20]),
)
def test_reading_a_run_of_redraws_by_its_ends_gives_the_scan_of_every_redraw(
    lines: list[str], chunk_bytes: int
) -> None:
    data = ("Running 1 job\nLoading model\n" + "\n".join(lines) + "\n").encode()
    shortcut = scan_stream(io.BytesIO(data), chunk_bytes=chunk_bytes)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(logscan, "without_repeats", lambda line, _redraws: line.split(b"\r"))
        every = scan_stream(io.BytesIO(data), chunk_bytes=chunk_bytes)
        every_full = scan_stream(io.BytesIO(data), chunk_bytes=chunk_bytes, prefilter=False)
    assert shortcut == every == every_full


def _ends(line: bytes) -> list[bytes]:
    return logs_bars.without_repeats(line, line.count(b"\r"))


def test_the_ends_of_a_run_of_redraws() -> None:
    run = [_redraw("my_lora", n, 3000, 1.73, "").encode() for n in range(5)]
    assert _ends(b"warn\r" + b"\r".join(run)) == [b"warn", run[0], run[4]]
    assert _ends(b"a\rb\r\r" + b"\r".join(run)) == [b"a", b"b", b"", run[0], run[4]]
    assert _ends(b"\r".join(run)) == [run[0], run[4]]
    assert _ends(b"\r" + b"\r".join(run)) == [b"", run[0], run[4]]
    broken = b"\r".join([*run[:2], run[2] + b" Saving at step 7", *run[3:]])
    assert _ends(broken) == broken.split(b"\r")
    other = b"\r".join([*run[:2], b" 40%|####| 2/5 [00:01<00:01]", *run[2:]])
    assert _ends(other) == other.split(b"\r")


@pytest.mark.parametrize(
    ("data", "start", "end"),
    [
        (b"50% done | 12%| 3/25", 0, 20),
        (b"no bar here, 100%", 0, 17),
        (b"x%|", 0, 2),  # the bar mark is cut by the end
        (b"%%|%|", 0, 5),
        (b"%|ab%|", 1, 6),
        (b"", 0, 0),
    ],
)
def test_a_bar_mark_is_found_where_bytes_find_finds_it(data: bytes, start: int, end: int) -> None:
    assert logs_bars.find_bar(data, start, end) == data.find(b"%|", start, end)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(
        st.tuples(
            st.integers(0, 40),
            st.sampled_from(
                ["1.73s/it", "1.70s/it", "7.00s/it", "9.90s/it", "2.50it/s", "0.0s/it"]
            ),
        ),
        max_size=40,
    ),
    st.sampled_from([None, 0, 5]),
)
def test_a_rate_shown_again_in_the_stable_stretch_is_not_read_again(
    readings: list[tuple[int, str]], first_step: int | None
) -> None:
    """The shortcut of ``rate_reading`` gives what reading every rate gives."""
    remembered = logs_run.RunState(start_line=1, header=True, first_step=first_step)
    every = logs_run.RunState(start_line=1, header=True, first_step=first_step)
    for line, (n, rate) in enumerate(readings, start=2):
        seg = f"my_lora:  1%|1| {n}/3000 [01:00<10:00:00, {rate}, loss: 0.1]".encode()
        remembered.rate_reading(seg, line)
        every.steady_rate = None
        every.rate_reading(seg, line)
        assert (remembered.best_rate, remembered.spill_step) == (every.best_rate, every.spill_step)
        stable = logs_run.SPILL_MIN_READINGS
        assert (remembered.rate_readings >= stable) == (every.rate_readings >= stable)
        assert list(remembered.evidence) == list(every.evidence)


def test_redraws_on_lines_of_their_own_are_read_line_by_line_with_or_without_the_trigger() -> None:
    """A terminal capture puts every redraw on its own line: each line's redraw is read (a
    slowdown between two of them is seen), whether the line is fed alone or with others."""

    def redraw(n: int, seconds: float) -> str:
        return f"my_lora:  1%|1| {n}/3000 [01:00<10:00:00, {seconds}s/it, loss: 0.1]"

    lines = ["Running 1 job", "Loading model"]
    lines += [redraw(n, 1.7) for n in range(2, 12)] + [redraw(12, 9.0)]
    lines += [redraw(n, 1.7) for n in range(13, 20)]
    fast, full = scan_both(("\n".join(lines) + "\n").encode())
    assert fast == full
    assert "sysmem_spill" in fast.signals


def _dense_log(spill_at: int | None) -> bytes:
    """A log that warns at every step: one training-bar redraw between every few text lines,
    a skip banner and a sample pass midway, and the OOM at the end."""
    warnings = [
        "/venv/lib/python3.10/site-packages/torch/utils/checkpoint.py:91: UserWarning: None of "
        "the inputs have requires_grad=True. Gradients will be None",
        "  warnings.warn(",
        "INFO:root:bucket 768x1024 has 37 images, 2 repeats",
    ]
    parts = ["Running 1 job\nLoading model\n"]
    for n in range(1, 3000):
        seconds = 9.0 if spill_at is not None and n >= spill_at else 1.7
        parts.append(f"\rmy_lora:  {n * 100 // 3000:2d}%|#| {n}/3000 [01:00<10:00, ")
        parts.append(f"{seconds:.2f}s/it, lr: 1e-04 loss: 0.1]\n" + "\n".join(warnings[: n % 4]))
        if n == 1500:
            parts.append("\n# OOM during training step, skipping batch 1/3 #\n")
            parts.append("\rGenerating Images:  50%|#| 1/2 [00:01<00:01,  1.00s/it]\n")
    parts.append("\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB\n")
    return "".join(parts).encode()


@pytest.mark.parametrize("chunk_bytes", [4096, 1 << 16])
def test_a_dense_log_reads_as_every_line_read_by_every_rule(chunk_bytes: int) -> None:
    """Most training-bar lines between text lines are skipped (one rate per window is read):
    the scan is the one every rule gives on every line."""
    fast, full = scan_both(_dense_log(None), chunk_bytes)
    assert fast == full
    assert (fast.last_step, fast.skip_count, fast.crashed) == (2999, 1, True)


@pytest.mark.parametrize("spill_at", [700, 2000, 2950])
def test_a_slowdown_in_a_dense_log_is_seen_at_its_step(spill_at: int) -> None:
    """The window whose reading shows the slowdown is read again redraw by redraw."""
    fast, full = scan_both(_dense_log(spill_at), 1 << 16)
    assert "sysmem_spill" in fast.signals and full.spill_step == spill_at
    assert fast == full
