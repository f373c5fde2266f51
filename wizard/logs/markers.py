"""The marker table: what AI Toolkit's lines mean, read from ``presets/log_markers.yaml``.

It is a description of the toolkit's output, like every other fact about it: phase markers,
progress-bar descriptions, signal lines, traceback frames and the printed process config.
Every pattern is checked on load (it compiles, alone and joined with the others) and compiled
once (:class:`CompiledMarkers`) into the few alternations the scanner tries.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Final, Literal

from pydantic import AfterValidator, ConfigDict, Field, PrivateAttr

from oom_wizard.errors import PresetError
from oom_wizard.formats.preset import parse_preset
from oom_wizard.frozen import FrozenModel
from oom_wizard.logs.bars import BarSteps
from oom_wizard.logs.read import build_gate, build_trigger
from oom_wizard.logs.signals import BarPhase, DataFrame, FramePhase, LineSignal, MarkerPhase

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

MARKERS_FILE: Final = "log_markers.yaml"
_NAMED_GROUP = re.compile(r"\(\?P<\w+>")


def _regex(pattern: str) -> str:
    """A pattern of the table: it must compile (the error then points at its line and column)."""
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression: {exc.msg}") from None
    return pattern


Regex = Annotated[str, Field(min_length=1), AfterValidator(_regex)]
"""A regular expression of the marker table, checked when the table is loaded."""


class _Frozen(FrozenModel):
    """Base of the marker-table models: immutable, unknown keys refused."""

    model_config = ConfigDict(extra="forbid")


class _Rule(_Frozen):
    """One pattern of the marker table, with its own flags."""

    pattern: Regex
    ignore_case: bool = False

    def source(self) -> str:
        """The pattern as a group that carries its flags (for the joined expression)."""
        return f"(?i:{self.pattern})" if self.ignore_case else f"(?:{self.pattern})"


class PhaseRule(_Rule):
    """A line that announces a phase (and maybe the step it is about)."""

    phase: MarkerPhase


class BarRule(_Rule):
    """A progress-bar description that names what the bar is doing.

    ``over_loss``: the trainer's own name for the bar, which no job is called. It names the bar
    even when the postfix reports a loss (a relative draws its preview bar with the training
    loss on it); any other description yields to such a postfix, which only training shows.
    """

    phase: BarPhase
    over_loss: bool = False


class SignalRule(_Rule):
    """A line that shows one signal."""

    signal: LineSignal


class FrameRule(_Rule):
    """A traceback function name (or the call under a frame) that places the failure in a
    phase; ``file``, when given, must match the frame's file as well."""

    phase: FramePhase
    file: Regex | None = None
    hint: bool = False
    """Only a hint: the frame says what kind of work failed (attention), not its phase; it
    places the failure only where no other frame and no phase line does."""


class DataFrameRule(_Rule):
    """A traceback function name of data loading (``kind``), in a file matching ``file``."""

    kind: DataFrame
    file: Regex


def _step_group(pattern: str) -> str:
    if not re.search(r"\(\?P<(?:step|epoch)>", pattern):
        raise ValueError("a bar-step pattern needs a `step` or an `epoch` group")
    return pattern


class BarStep(_Frozen):
    """Where a bar shows its step when ``n/total`` counts something else: a ``step`` group in
    its postfix (``reads: postfix``), or an ``epoch`` group in its description (``reads: desc``: the
    bar counts that epoch's batches, the step is ``epoch × total + n``)."""

    reads: Literal["postfix", "desc"]
    pattern: Annotated[Regex, AfterValidator(_step_group)]


class ConfigDump(_Frozen):
    """The process config printed as JSON: its opening line, and the line that confirms it."""

    open: Regex
    key: Regex


class LogMarkers(_Frozen):
    """The schema of ``presets/log_markers.yaml`` (see the comments in that file)."""

    run_start: tuple[Regex, ...]
    config_dump: ConfigDump
    job: tuple[Regex, ...] = ()
    resume: tuple[Regex, ...]
    phases: tuple[PhaseRule, ...]
    bars: tuple[BarRule, ...]
    signals: tuple[SignalRule, ...]
    python_errors: tuple[Regex, ...]
    job_ends: tuple[Regex, ...] = ()
    exception: Regex
    exits: tuple[Regex, ...]
    stopped: tuple[Regex, ...]
    frame: Regex
    frame_phases: tuple[FrameRule, ...]
    host_copy: tuple[Regex, ...]
    cpu_target: tuple[Regex, ...] = ()
    line_prefixes: tuple[Regex, ...] = ()
    finished: tuple[Regex, ...] = ()
    call_phases: tuple[FrameRule, ...] = ()
    config_fields: tuple[str, ...] = ()
    plain_bars: tuple[Regex, ...] = ()
    bar_steps: tuple[BarStep, ...] = ()
    training_bars: tuple[_Rule, ...] = ()
    steps: tuple[Regex, ...] = ()
    host_pressure: tuple[Regex, ...] = ()
    sample_first: tuple[Regex, ...] = ()
    launcher_errors: tuple[Regex, ...] = ()
    launcher_children: tuple[PhaseRule, ...] = ()
    data_frames: tuple[DataFrameRule, ...] = ()

    _compiled: CompiledMarkers | None = PrivateAttr(default=None)

    def compiled(self) -> CompiledMarkers:
        """The patterns compiled (once)."""
        if self._compiled is None:
            self._compiled = CompiledMarkers(self)
        return self._compiled


def _any(patterns: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns) or r"(?!)")


def _unnamed(source: str) -> str:
    """A pattern with its named groups made plain, so that several can be joined."""
    return _NAMED_GROUP.sub("(?:", source)


class CompiledMarkers:
    """The marker table as compiled expressions, plus one joined prefilter."""

    def __init__(self, markers: LogMarkers) -> None:
        self.run_start = _any(markers.run_start)
        self.dump_open = re.compile(markers.config_dump.open)
        self.dump_key = re.compile(markers.config_dump.key)
        self.resume = [re.compile(p) for p in markers.resume]
        self.job = [re.compile(p) for p in markers.job]
        self.phases = [(_rule_pattern(r), r.phase) for r in markers.phases]
        self.bars = [(_rule_pattern(r), r.phase) for r in markers.bars]
        self.named_bars = [(_rule_pattern(r), r.phase) for r in markers.bars if r.over_loss]
        self.signals = [(_rule_pattern(r), r.signal) for r in markers.signals]
        self.python_errors = _any(markers.python_errors)
        self.job_ends = _any(markers.job_ends)
        self.exception = re.compile(markers.exception)
        self.exits = [re.compile(p) for p in markers.exits]
        self.stopped = _any(markers.stopped)
        self.frame = re.compile(markers.frame)
        self.frame_phases = [
            (_rule_pattern(r), re.compile(r.file) if r.file else None, r.phase)
            for r in markers.frame_phases
            if not r.hint
        ]
        self.frame_hints = [
            (_rule_pattern(r), re.compile(r.file) if r.file else None, r.phase)
            for r in markers.frame_phases
            if r.hint
        ]
        self.call_phases = [(_rule_pattern(r), r.phase) for r in markers.call_phases]
        self.finished = _any(markers.finished)
        self.config_fields = markers.config_fields
        self.host_copy = _any(markers.host_copy)
        self.cpu_target = _any(markers.cpu_target)
        self.plain_bar = _any(markers.plain_bars) if markers.plain_bars else None
        self.bar_steps: BarSteps = tuple(
            (re.compile(r.pattern), r.reads == "desc") for r in markers.bar_steps
        )
        self.bar_step_postfix = _any(
            tuple(_unnamed(r.pattern) for r in markers.bar_steps if r.reads == "postfix")
        )
        self.training_bars = [_rule_pattern(r) for r in markers.training_bars]
        self.steps = [re.compile(p) for p in markers.steps]
        self.host_pressure = _any(markers.host_pressure)
        self.sample_first = _any(markers.sample_first)
        self.launcher_errors = _any(markers.launcher_errors)
        self.launcher_children = [(_rule_pattern(r), r.phase) for r in markers.launcher_children]
        self.data_frames = [
            (_rule_pattern(r), re.compile(r.file), r.kind) for r in markers.data_frames
        ]
        joined = "|".join(f"(?:{p})" for p in markers.line_prefixes)
        self.prefix = re.compile(f"(?:{joined})+") if joined else None
        # Each pattern the trigger and the gate look for, by the rule that reads it (``text``:
        # the reader's own, before the rules), in the order they are tried.
        plain: list[tuple[str, Sequence[str]]] = [
            ("text", (*markers.run_start, markers.config_dump.open)),
            ("resume", markers.resume),
            ("job", markers.job),
        ]
        rules: list[tuple[str, Sequence[_Rule]]] = [
            ("phase", markers.phases),
            ("signals", markers.signals),
        ]
        tail: list[tuple[str, Sequence[str]]] = [
            (
                "failure",
                (
                    *markers.python_errors,
                    *markers.job_ends,
                    markers.exception,
                    *markers.exits,
                    *markers.stopped,
                ),
            ),
            ("finished", markers.finished),
            ("frames", (markers.frame, *markers.host_copy, *markers.cpu_target)),
            ("text", markers.plain_bars),
            ("notes", (*markers.steps, *markers.host_pressure, *markers.sample_first)),
            ("failure", markers.launcher_errors),
        ]
        sources = [
            *(p for _, group in plain for p in group),
            *(r.source() for _, rule_group in rules for r in rule_group),
            *(p for _, group in tail for p in group),
        ]
        patterns = [
            *(re.compile(p) for _, group in plain for p in group),
            *(_rule_pattern(r) for _, rule_group in rules for r in rule_group),
            *(re.compile(p) for _, group in tail for p in group),
        ]
        self.rule_of: tuple[str, ...] = tuple(
            name for name, group in [*plain, *rules, *tail] for _ in group
        )
        """Which of :class:`~oom_wizard.logs.linerules.LineRules`' rules reads each pattern of
        the trigger, by its index (``text``: the reader's own, before the rules)."""
        self.prefilter = re.compile("|".join(f"(?:{_unnamed(s)})" for s in sources))
        self.trigger = build_trigger(sources, self.prefilter, patterns=patterns)
        """The prefilter's cheap form: over chunks of bytes, then segment by segment."""
        self.gate = build_gate(sources)
        """The trigger's question for whole regions at once (where it can be asked)."""


def _rule_pattern(rule: _Rule) -> re.Pattern[str]:
    """The rule's pattern compiled with its flag: the expression of :meth:`_Rule.source`, and
    already in ``re``'s cache (its check when the table was loaded) unless it ignores case."""
    return re.compile(rule.pattern, re.IGNORECASE if rule.ignore_case else 0)


def load_log_markers(path: Path | None = None) -> LogMarkers:
    """Load and check the marker table (default: the shipped ``presets/log_markers.yaml``).

    It is read like every other preset (:func:`oom_wizard.formats.preset.parse_preset`): an
    error names the file, the line and the column of the value that is wrong.

    Raises:
        PresetError: the file is missing, not YAML, does not match the schema, or holds a
            pattern that is not a valid regular expression.
    """
    if path is None:
        return _shipped_markers()
    return _read_markers(path)


@functools.cache
def _shipped_markers() -> LogMarkers:
    return _read_markers(resources.files("oom_wizard.presets") / MARKERS_FILE)


def _read_markers(file: Traversable) -> LogMarkers:
    markers = parse_preset(file, LogMarkers)
    try:
        markers.compiled()
    except re.error as exc:  # each pattern compiles; their join can still clash
        raise PresetError(f"patterns do not join: {exc.msg}", file=str(file)) from None
    return markers
