"""What one segment of a log says, read into the run it belongs to.

The scanner (:mod:`oom_wizard.logs.scan`) cuts the log into segments and decides which of them
can matter at all; :class:`SegmentReader` reads those against the marker table: a progress-bar
redraw (:meth:`SegmentReader.bar`, and :meth:`SegmentReader.remember` for the last redraw of a
line) or a segment of text (:meth:`SegmentReader.text`). It keeps the state the reading needs
between segments: the current :class:`~oom_wizard.logs.run.RunState` (a new one where the log
starts a new run), the bar being redrawn, what each bar's head was found to be, the process
config being printed, and whether the next line must be read whatever it holds.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from oom_wizard.logs.bars import (
    BAR,
    BYTE_RATE,
    PCT_DIGITS,
    RATE,
    TRAINING_POSTFIX,
    ZERO_BAR,
    elapsed_seconds,
    parse_bar,
)
from oom_wizard.logs.linerules import LineRules
from oom_wizard.logs.lines import clean
from oom_wizard.logs.markers import CompiledMarkers
from oom_wizard.logs.run import RunState
from oom_wizard.logs.signals import BarKind, Phase

_BAR_CACHE_LIMIT: Final = 1024
"""Bar heads whose kind is remembered; the cache starts again empty when it is full."""
NO_BAR: Final = b"\n"
"""What a segment starts with when it repeats the previous bar: never, after a text segment."""
RESUME_ELAPSED_SHARE: Final = 0.25
"""A training bar first seen past step 0 whose elapsed time is below this share of
``n × s/it`` cannot have made those steps: it was created there, a resume. More, and the run
started before the log does (an excerpt): not a resume."""
RESUME_MAX_ELAPSED_S: Final = 60.0
"""Without a rate on the bar, a resume is one whose first redraw shows at most this elapsed."""
MAX_DUMP_LINES: Final = 4000
"""The printed process config longer than this is not read (it is not the toolkit's dump)."""


class SegmentReader:
    """Reads the segments the scanner hands it into the current run (see the module docstring).

    Attributes:
        run: The run being read (the log's last one, once it is all read).
        runs: How many runs the log has shown so far.
        repeat: The head a redraw of the last bar starts with (:data:`NO_BAR` after text): a
            segment that starts with it and ends its bar only needs :meth:`remember`.
        head_training: Whether that bar is the training bar.
        train_prefix: ``\\r`` and the training bar's head, once the training bar is known.
        kinds: What each bar head seen is (a bounded cache).
        cold: Whether the line being read lies outside the gate's hot pieces (its text can
            match no pattern; only its bars are read).
    """

    def __init__(self, patterns: CompiledMarkers, *, prefilter: bool = True) -> None:
        self._p = patterns
        self._prefilter = prefilter
        self._trigger = patterns.trigger if prefilter else None
        self._rules = LineRules(patterns)
        self.runs = 0
        self.run = self._new_run(1, header=False)
        self.repeat = NO_BAR
        self.head_training = False
        self.train_prefix = b""
        self.kinds: dict[bytes, BarKind] = {}
        self.cold = False
        self._dump_line: int | None = None
        self._dump: list[str] | None = None

    def end_redraws(self) -> None:
        """Text came between two bar segments: the next bar is drawn anew."""
        self.repeat, self.head_training = NO_BAR, False

    def redrawing_training_bar(self, head: bytes) -> None:
        """The last segment (read or skipped) redrew the training bar, whose redraws start
        with ``head``."""
        self.repeat, self.head_training = head, True

    def _new_run(self, line: int, *, header: bool) -> RunState:
        self.runs += 1
        return RunState(start_line=line, header=header, bar_steps=self._p.bar_steps)

    def steady_training(self) -> bool:
        """Whether a training-bar redraw would only be remembered and its rate read: training
        runs, nothing is failing or pending, and the next line is not asked for."""
        run = self.run
        return bool(
            self.train_prefix
            and run.training_started
            and run.phase == "training"
            and run.progressed
            and not run.failing
            and not run.frames_seen
            and not run.expect_call
            and not self.cold
            and not self.reads_next_line()
        )

    def reads_next_line(self) -> bool:
        """Whether the next line goes to the rules whatever it holds: the rest of an allocator
        message, the config dump (its opening brace, then every line to its closing one), or
        the source line under a traceback frame (the call it makes may name the phase)."""
        return bool(
            self._dump_line is not None
            or self._dump is not None
            or self.run.oom_tail
            or self.run.expect_call
        )

    def remember(self, seg: bytes, line: int) -> None:
        """The last redraw of a bar on its line: a redraw is progress (a stuck bar is not
        redrawn); the training bar's rate is read here, once per line."""
        run = self.run
        run.zero_bar_line = None
        if self.head_training:
            if run.oom_pending:
                run.bar_after_oom(seg)
            run.train_bar, run.train_bar_line = seg, line
            run.rate_reading(seg, line)

    def bar(self, seg: bytes, pos: int, line: int) -> None:
        """A progress-bar segment whose head differs from the previous segment's."""
        end = seg.find(b"]", pos)  # tqdm's bracket closes first; the text after may hold more
        if 0 <= end < len(seg) - 1 and seg[end + 1 :].strip():
            self.bar(seg[: end + 1], pos, line)
            self.text(seg[end + 1 :], line)
            return
        head = seg[:pos]
        kind = self.kinds.get(head)
        if kind is None:
            kind = self._classify(head, seg)
        self.repeat, self.head_training = head + b"%|", kind == "training"
        if kind == "ignore":
            return
        run = self.run
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
        if not seg.endswith(b"]") and not self.cold:
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
            self._rules.signals(self.run, text, line)

    def _classify(self, head: bytes, seg: bytes) -> BarKind:
        """What a bar with this head (description and percentage) is; cached per head."""
        if len(self.kinds) >= _BAR_CACHE_LIMIT:
            self.kinds.clear()
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
            self.train_prefix = b"\r" + head.rstrip(PCT_DIGITS)
        self.kinds[head] = kind
        return kind

    def _unprefixed(self, text: str) -> str:
        """``text`` without the line prefixes of the marker table (rank tags, timestamps)."""
        if self._p.prefix is not None and (match := self._p.prefix.match(text)):
            return text[match.end() :]
        return text

    def _training_bar(self, seg: bytes, line: int) -> None:
        run = self.run
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

    def text(self, raw: bytes, line: int) -> None:
        """Any other segment: decoded, cleaned, prefiltered, then read rule by rule."""
        self.end_redraws()
        if self.cold:
            return
        text = self._unprefixed(clean(raw))
        if not text.strip():
            return
        run = self.run
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
                self._rules.call(run, text, line)
        if run.oom_tail:
            run.oom_tail -= 1
            self._rules.oom_numbers(run, text, line, continuation=True)
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
            self.bar(f"{body[:cut]}||{body[cut:]}".encode(), len(body[:cut].encode()) - 1, line)
            return
        if self._p.run_start.search(body):
            self._start_run(line)
            self._rules.job(self.run, body)  # the job banner starts a run and names its job
            return
        if self._p.dump_open.match(body):
            self._dump_line = line
            return
        rules = None
        if self._trigger is not None and (found := self._trigger.patterns_in(raw)) is not None:
            rules = {self._p.rule_of[index] for index in found}
        self._rules.read(run, body, text, line, rules)

    def _dump_text(self, text: str) -> None:
        """A line of the process config printed as JSON: kept until its closing brace."""
        dump = self._dump
        assert dump is not None
        dump.append(text)
        if text == "}":
            self._dump = None
            self.run.config_dump = _dump_fields("\n".join(dump), self._p.config_fields)
        elif len(dump) > MAX_DUMP_LINES:
            self._dump = None

    def _start_run(self, line: int) -> None:
        if self.run.progressed:
            self.run = self._new_run(line, header=True)
        else:
            self.run.header = True


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
