"""What a line of text says about its run, by the marker table.

The reader (:mod:`oom_wizard.logs.segments`) hands :class:`LineRules` each segment of text worth
reading, and the rules apply it to the run: a resume; the signals (an OOM and its numbers, a
skipped step, a killed process); a failure (a Python error, an exception line, an exit); a
traceback's frames, and the phase their functions or the calls under them point to; the phase
markers; a step given outside a bar, the host's RAM as the limit, a launch that samples first;
and the end of the run. Each rule reads and changes the
:class:`~oom_wizard.logs.run.RunState` it is given, and keeps no state of its own.
"""

from __future__ import annotations

from collections.abc import Set
from typing import Final

from oom_wizard.logs.allocator import parse_allocator_message
from oom_wizard.logs.lines import shorten
from oom_wizard.logs.markers import CompiledMarkers
from oom_wizard.logs.result import EvidenceLine, SkipBanner
from oom_wizard.logs.run import RunState
from oom_wizard.logs.signals import FATAL_SIGNALS, HOST_SIGNALS, STOP_SIGNALS

OOM_MESSAGE_TAIL: Final = 3
"""Segments after an OOM line that may still hold its numbers (a message wrapped when pasted)."""
OOM_TEXT_MAX: Final = 4000
"""An allocator message and the lines it was wrapped onto are read together up to this length."""


class LineRules:
    """The marker table's rules for one line of text (see the module docstring)."""

    def __init__(self, patterns: CompiledMarkers) -> None:
        self._p = patterns

    def read(
        self, run: RunState, body: str, text: str, line: int, rules: Set[str] | None = None
    ) -> None:
        """Apply every rule to the line ``text`` (``body``: without a paste's indent) of
        ``run``, at line number ``line``. ``rules``: the only ones whose patterns could match
        it (``CompiledMarkers.rule_of``; None: any); each of the others would find nothing,
        and a rule that finds nothing changes nothing."""
        if rules is None or "resume" in rules:
            self.resume(run, body, line)
        if rules is None or "job" in rules:
            self.job(run, body)
        if rules is None or "signals" in rules:
            self.signals(run, text, line)
        if rules is None or "failure" in rules:
            self.failure(run, body, line)
        if rules is None or "frames" in rules:
            self.frames(run, text, line)
        if rules is None or "phase" in rules:
            self.phase(run, body, line)
        if rules is None or "notes" in rules:
            self.notes(run, body, line)
        if (rules is None or "finished" in rules) and self._p.finished.search(body):
            run.finished = True
            run.progress()
            run.note(line, body, "finished")

    def notes(self, run: RunState, text: str, line: int) -> None:
        """A step given outside a bar (``steps``), a sign of the host's RAM as the limit
        (``host_pressure``), a launch command that samples first (``sample_first``)."""
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

    def call(self, run: RunState, text: str, line: int) -> None:
        """The source line under a frame: the call it made may name the phase."""
        if run.traceback_hint is not None:
            return
        for pattern, phase in self._p.call_phases:
            if pattern.search(text):
                run.traceback_hint = run.frame_phase = phase
                run.note(line, text, "frame")
                return

    def job(self, run: RunState, text: str) -> None:
        """Which job the run is (``job``): the name its banner gives, the web-UI id it prints."""
        for pattern in self._p.job:
            if match := pattern.search(text):
                found = match.groupdict()
                run.job_name = found.get("name") or run.job_name
                run.job_id = found.get("id") or run.job_id
                return

    def resume(self, run: RunState, text: str, line: int) -> None:
        """A resume from a checkpoint (``resume``), and the step it resumes at."""
        for pattern in self._p.resume:
            if match := pattern.search(text):
                run.resumed = True
                step = match.groupdict().get("step")
                if step is not None:
                    run.start_step = int(step)
                run.note(line, text, "resume")
                return

    def signals(self, run: RunState, text: str, line: int) -> None:
        """The signal lines (``signals``): noted, counted (a skipped step), an OOM's numbers
        read; a fatal one fails the run."""
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
                self.oom_numbers(run, text, line, continuation=False)
            if signal in FATAL_SIGNALS or signal == "host_oom_kill":
                run.fail(oom=signal in ("cuda_oom", "cuda_error_oom"))

    def oom_numbers(self, run: RunState, text: str, line: int, *, continuation: bool) -> None:
        """The numbers of an allocator message. A message wrapped onto the next lines (a
        terminal or a GUI breaks it between words: "5.24 GiB already" / "allocated; 0 bytes
        free; ...") is read again as one text, so a figure cut by the wrap is read whole."""
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

    def failure(self, run: RunState, text: str, line: int) -> None:
        """A stop asked for (``stopped``), a Python error or exception line, a launcher's own
        traceback, and an exit with its code or signal (``exits``)."""
        p = self._p
        if p.stopped.search(text):
            run.stopped, run.failing = True, False
            run.note(line, text, "stopped")
            return
        if p.job_ends.search(text):
            run.job_ended = True
        if p.python_errors.search(text):
            run.python_error = True
            run.fail()
            run.note(line, text, "error")
            if text.startswith("Traceback"):
                run.traceback_hint = None
            if "Traceback" in text:  # Python's header, or rich's boxed one
                run.traceback_open = True
        if p.exception.match(text):
            run.fail()
            run.traceback_open, run.error_line = False, True
            explained = run.signals & (FATAL_SIGNALS | HOST_SIGNALS)
            if run.exception is None and not explained and p.launcher_errors.match(text):
                # Only the launcher's traceback: the trainer it started printed no error. Its
                # code, and the child it names, are read below.
                run.python_error, run.exit_seen = False, True
                run.note(line, text, "exit")
            else:
                run.python_error = True
                run.exception = EvidenceLine(line, shorten(text), "exception")
                return
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
                self.child(run, text, line)
                return

    def child(self, run: RunState, text: str, line: int) -> None:
        """The child a launcher's error or exit line names (``launcher_children``): a caching
        script places the failure in caching. Entered without progress: the run still fails."""
        for pattern, phase in self._p.launcher_children:
            if pattern.search(text):
                if phase in ("cache_latents", "cache_text"):
                    run.enter(phase, line, text)
                return

    def frames(self, run: RunState, text: str, line: int) -> None:
        """A traceback frame (``frame``): the phase its function names (``frame_phases``), a frame
        of data loading (``data_frames``), and under a traceback, a copy to the host or a CPU
        target (``host_copy``, ``cpu_target``)."""
        if match := self._p.frame.match(text):
            if not run.failing:  # frames with no header before them: a traceback all the same
                run.opened_in_frames = not run.progressed and not run.header
                run.fail()
            run.frames_seen = run.python_error = run.traceback_open = True
            func = match["func"] or match.groupdict().get("rfunc") or ""
            file = match["file"] or match.groupdict().get("rfile") or ""
            if run.data_frame is None:
                for pattern, data_file, kind in self._p.data_frames:
                    if pattern.search(func) and data_file.search(file):
                        run.data_frame = kind
                        run.note(line, text, "frame")
                        break
            if run.traceback_hint is None:
                run.expect_call = True
                for pattern, in_file, phase in self._p.frame_phases:
                    if pattern.search(func) and (in_file is None or in_file.search(file)):
                        run.traceback_hint = run.frame_phase = phase
                        run.note(line, text, "frame")
                        break
            if run.frame_hint is None and run.frame_phase is None:
                for pattern, in_file, phase in self._p.frame_hints:
                    if pattern.search(func) and (in_file is None or in_file.search(file)):
                        run.frame_hint = phase
                        run.note(line, text, "frame")
                        break
            return
        if run.frames_seen and self._p.host_copy.search(text):
            run.host_copy = True
            run.note(line, text, "host_copy")
        if run.frames_seen and self._p.cpu_target.search(text):
            run.cpu_copy = True
            run.note(line, text, "host_copy")

    def phase(self, run: RunState, text: str, line: int) -> None:
        """A phase marker (``phases``): the phase it enters, and the step it names."""
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
            elif kind == "launch" and run.training_started:
                return  # start-up output (TensorBoard started beside a job) is not a new start
            elif kind == "training_start":
                if not run.training_started and run.marker_step is None:
                    run.marker_step, run.marker_step_line = run.start_step, line
                run.enter("training", line, text)
            else:
                run.enter(kind, line, text)
            return
