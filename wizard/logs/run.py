"""The state of one run while its log is read, and what it concludes when the run ends.

The reader (:mod:`oom_wizard.logs.segments`) starts a fresh :class:`RunState` at every new
run in the file and feeds it the lines that matter; at the end, :meth:`RunState.result` gives
the run's phase, signals, evidence and the training bar's history (resume, spill into system
memory) as one :class:`~oom_wizard.logs.result.LogScan`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Final

from oom_wizard.logs.allocator import oom_figures
from oom_wizard.logs.bars import RATE, BarSteps, parse_bar
from oom_wizard.logs.lines import clean, shorten
from oom_wizard.logs.result import EvidenceLine, LogScan, SkipBanner
from oom_wizard.logs.signals import (
    FATAL_SIGNALS,
    HOST_SIGNALS,
    SIGNALS,
    DataFrame,
    FramePhase,
    Phase,
    Signal,
)

EVIDENCE_RING: Final = 32
"""Evidence lines kept per run (the last ones)."""
SKIPS_KEPT: Final = 64
"""Skip banners kept per run (the last ones; all are counted)."""
SPILL_FACTOR: Final = 4.0
"""A training bar whose s/it grows to this many times its best so far has slowed down by the
driver's system-memory fallback (VRAM spilled into shared system memory), not by chance."""
SPILL_MIN_READINGS: Final = 2
"""Readings of the bar's rate (after its first step) that make the stable stretch."""


@dataclass
class RunState:
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
    oom_text: str = ""
    """The allocator message so far: its first line and the lines it was wrapped onto."""
    oom_tail: int = 0
    skips: deque[SkipBanner] = field(default_factory=lambda: deque(maxlen=SKIPS_KEPT))
    skip_count: int = 0
    evidence: deque[EvidenceLine] = field(default_factory=lambda: deque(maxlen=EVIDENCE_RING))
    failing: bool = False
    python_error: bool = False
    exception: EvidenceLine | None = None
    exit_code: int | None = None
    exit_seen: bool = False
    job_ended: bool = False
    stopped: bool = False
    resumed: bool = False
    frames_seen: bool = False
    traceback_open: bool = False
    """A traceback's header or frames were read and its error line not yet: the failure is
    still being printed."""
    error_line: bool = False
    """An exception line was read since the run began failing (the traceback's last line)."""
    traceback_hint: FramePhase | None = None
    frame_phase: FramePhase | None = None
    frame_hint: FramePhase | None = None
    """The phase a ``hint`` frame of the failing traceback suggests (attention: a training
    step), used only where nothing else places the failure."""
    data_frame: DataFrame | None = None
    """The outermost frame of data loading in the failing traceback (``data_frames``)."""
    host_copy: bool = False
    cpu_copy: bool = False
    expect_call: bool = False
    finished: bool = False
    excerpt: bool = False
    best_rate: float | None = None
    rate_readings: int = 0
    steady_rate: tuple[bytes, bytes] | None = None
    """The rate (number, unit) of the last reading, when it was taken in the stable stretch
    (see :meth:`rate_reading`)."""
    spill_step: int | None = None
    oom_failure: bool = False
    """The pending failure is PyTorch's out-of-memory error itself (not another error)."""
    fail_step: int | None = None
    """The training step the bar showed when the pending failure was printed."""
    zero_bar_line: int | None = None
    config_dump: tuple[tuple[str, Any], ...] | None = None
    job_name: str | None = None
    """The job the run's banner names (``job``: ``# Running job: NAME``)."""
    job_id: str | None = None
    """The web-UI job's id the run printed (``job``: ``Job ID: "…"``)."""
    bar_steps: BarSteps = ()
    host_pressure_line: int | None = None
    """The last line that shows the host's RAM as the limit (``host_pressure``)."""
    sample_first: bool = False
    """The launch command makes a sample come first (``sample_first``)."""
    opened_in_frames: bool = False
    """The run's first lines are a traceback's frames, with no header: an excerpt of a longer
    log (as a sample pass the log opens with is, in
    :meth:`oom_wizard.logs.linerules.LineRules.phase`)."""

    def note(self, line: int, text: str, tag: str) -> None:
        """Keep an evidence line (once per text and tag)."""
        _keep(self.evidence, line, text, tag)

    def progress(self) -> None:
        """Training (or loading) moved on: what failed before did not end the run."""
        self.progressed = True
        self.expect_call = False
        if self.failing or self.frames_seen:
            self.failing = self.oom_failure = False
            self.frames_seen = self.traceback_open = self.error_line = False
            self.traceback_hint = None
            self.frame_phase = self.frame_hint = None
            self.data_frame = None
            self.host_copy = self.cpu_copy = False

    def fail(self, *, oom: bool = False) -> None:
        """A failure line: the run ends here unless progress follows."""
        if not self.failing:
            self.fail_step = self.current_step()
            self.oom_failure = self.error_line = False
        self.oom_failure = self.oom_failure or oom
        self.progressed = True
        self.failing = True
        self.stopped = False

    @property
    def oom_pending(self) -> bool:
        """The run is failing, and the failure is PyTorch's out-of-memory error."""
        return self.failing and self.oom_failure

    def bar_after_oom(self, seg: bytes) -> None:
        """A training-bar redraw after the out-of-memory error: tqdm closing its bar draws it
        once more at the step it stopped on (or, when the log showed no bar before, at the
        step it died in). Only a later step is training that went on."""
        bar = parse_bar(clean(seg), self.bar_steps)
        if bar is None:
            return
        if self.fail_step is None:
            self.fail_step = bar.n
        elif bar.n > self.fail_step:
            self.progress()

    def enter(self, phase: Phase, line: int, text: str) -> None:
        """Move to ``phase``; the line that did it is kept as evidence."""
        if phase != self.phase or self.phase_evidence is None:
            self.phase = phase
            self.phase_evidence = EvidenceLine(line, shorten(text), "phase")

    def train_step(self) -> tuple[int | None, int | None]:
        """(n, total) of the last training-bar redraw."""
        if self.train_bar is None:
            return None, None
        bar = parse_bar(clean(self.train_bar), self.bar_steps)
        return (bar.n, bar.total) if bar else (None, None)

    def rate_reading(self, seg: bytes, line: int) -> None:
        """One reading of the training bar's rate: the stable stretch, or the spill from it."""
        match = RATE.search(seg)
        if match is None:
            return
        shown = (match["rate"], match["unit"])
        if shown == self.steady_rate:
            # The rate of the last reading accepted (in the stable stretch), and none has been
            # accepted since: the best is the same, so it is no spill (that one was none) and
            # it cannot lower the best. Reading it again would change nothing.
            return
        n = int(match["n"])
        if n <= (self.first_step or 0) + 1:
            return  # the first step's rate includes compiling and warm-up
        rate = float(shown[0])
        seconds = rate if shown[1] == b"s/it" else (1.0 / rate if rate else 0.0)
        if seconds <= 0:
            return
        best = self.best_rate
        stable = best is not None and self.rate_readings >= SPILL_MIN_READINGS
        if stable and best is not None and seconds >= SPILL_FACTOR * best:
            if self.spill_step is None:
                self.spill_step = n
                self.note(line, clean(seg), "sysmem_spill")
            return
        self.rate_readings += 1
        self.best_rate = seconds if best is None else min(best, seconds)
        self.steady_rate = shown if stable else None

    def sample_rate_reading(self, seg: bytes, line: int) -> None:
        """A sample pass's step rate against training's: a denoising step does less work than a
        training step (no backward pass), so one that takes ``SPILL_FACTOR`` times longer than
        the best training step is crawling on spilled memory."""
        match = RATE.search(seg)
        best = self.best_rate
        if match is None or best is None or self.spill_step is not None:
            return
        rate = float(match["rate"])
        seconds = rate if match["unit"] == b"s/it" else (1.0 / rate if rate else 0.0)
        if seconds >= SPILL_FACTOR * best:
            self.spill_step = self.current_step() or 0
            self.note(line, clean(seg), "sysmem_spill")

    def current_step(self) -> int | None:
        """The latest step the log has shown, from the bar or a save/sample line."""
        if self.marker_step is not None and self.marker_step_line > self.train_bar_line:
            return self.marker_step
        step, _ = self.train_step()
        return step if step is not None else self.marker_step

    def result(self, source: str | None, *, run_count: int, line_count: int) -> LogScan:
        """The run as a frozen :class:`~oom_wizard.logs.result.LogScan` of the log ``source``
        (its ``run_count`` runs and ``line_count`` lines). The run is left as it was: reading
        can go on after it (a log that grows)."""
        _, total = self.train_step()
        ring = deque(self.evidence, maxlen=self.evidence.maxlen)
        if self.train_bar is not None:
            _keep(ring, self.train_bar_line, clean(self.train_bar), "bar")
        crashed = self.failing and not self.stopped
        signals = set(self.signals)
        explained = signals & FATAL_SIGNALS or signals & HOST_SIGNALS
        if crashed and self.exit_seen and not self.python_error and not explained:
            signals.add("silent_exit")
        step_now = self.current_step()
        finished = self.finished or (
            total is not None and step_now is not None and step_now >= total
        )
        ends_open = (
            not crashed
            and not self.stopped
            and not finished
            and self.progressed
            and self.phase != "unknown"
        )
        stall_line = self.zero_bar_line if ends_open else None
        if stall_line is not None:
            signals.add("stall")
        if self.spill_step is not None:
            signals.add("sysmem_spill")
        phase = self.phase
        frame_phase: Phase | None = None
        frame_hint: Phase | None = None
        if crashed and "cache_followon" in signals:
            # The error surfaces where the trainer checks its cache; the OOM it stands for
            # happened while the latents were cached.
            phase = "cache_latents"
        elif crashed and self.frame_phase is not None:
            during = self.training_started or self.opened_in_frames
            frame_phase = _resolve_frame_phase(self.frame_phase, during)
            phase = frame_phase
        elif crashed and self.frame_hint is not None and phase in ("unknown", "launch", "training"):
            frame_hint = _resolve_frame_phase(self.frame_hint, self.training_started)
            phase = frame_hint
        elif (
            crashed
            and phase in ("unknown", "launch")
            and self.sample_first
            and not self.training_started
        ):
            phase = "baseline_sample"  # nothing but the command, which samples first
        oom = oom_figures(self.oom_found, self.oom_line) if self.oom_found else None
        evidence = list(ring)
        if self.phase_evidence is not None:
            evidence.append(self.phase_evidence)
        if self.exception is not None:
            evidence.append(self.exception)
        evidence.sort(key=lambda e: e.line)
        return LogScan(
            source=source,
            phase=phase,
            marker_phase=self.phase,
            frame_phase=frame_phase,
            phase_line=self.phase_evidence.line if self.phase_evidence else None,
            signals=tuple(s for s in SIGNALS if s in signals),
            oom=oom,
            skips=tuple(self.skips),
            skip_count=self.skip_count,
            last_step=self.current_step(),
            total_steps=total,
            first_step=self.first_step,
            training_started=self.training_started,
            crashed=crashed,
            stopped=self.stopped,
            resumed=self.resumed,
            run_count=run_count,
            run_start_line=self.start_line,
            header_seen=self.header,
            line_count=line_count,
            exception=self.exception,
            exit_code=self.exit_code,
            job_ended=self.job_ended,
            host_copy=self.host_copy,
            cpu_copy=self.cpu_copy,
            data_frame=self.data_frame if crashed else None,
            evidence=tuple(evidence),
            finished=finished,
            ends_open=ends_open,
            excerpt=self.excerpt,
            spill_step=self.spill_step,
            stall_line=stall_line,
            config_dump=self.config_dump,
            job_name=self.job_name,
            job_id=self.job_id,
            host_pressure_line=self.host_pressure_line,
            sample_first=self.sample_first,
            best_rate=self.best_rate,
            frame_hint=frame_hint,
            failure_whole=crashed and self.error_line and not self.traceback_open,
        )


def _keep(ring: deque[EvidenceLine], line: int, text: str, tag: str) -> None:
    """Add an evidence line to ``ring``, unless one with the same text and tag is there."""
    text = shorten(text)
    if not any(e.text == text and e.tag == tag for e in ring):
        ring.append(EvidenceLine(line, text, tag))


def _resolve_frame_phase(phase: FramePhase, training_started: bool) -> Phase:
    """A frame's phase as the scan's: a sample pass is the baseline one until training has
    started, unless the call said which one it was."""
    if phase == "sample":
        return "periodic_sample" if training_started else "baseline_sample"
    return phase
