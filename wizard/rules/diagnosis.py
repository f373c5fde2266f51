"""When and why the job ran out of memory, from the log, the config, the user and the GPU.

:func:`diagnose` weighs what is known — a :class:`~oom_wizard.logs.result.LogScan`, the config's
:class:`~oom_wizard.formats.view.JobView`, the user's :class:`Answers`, a GPU probe, the change
log — and
returns a frozen :class:`Diagnosis`: the crash *moment* (DESIGN.md's five), the model kind,
whether the environment rather than the config is to blame and why, the evidence lines, the
allocator's numbers, and advice that goes beyond the config, each piece only when its evidence
is there. It must never tell someone to shrink a config that is not the problem.

The rules are two tables, each rule a function from what the log and the host show
(:class:`Seen`: the scan, the config's process, the GPU now, the user's answers, what says the
job is running) to a finding, or None where it finds nothing. A test checks that the two lists
below and the tables name the same rules in the same order.

Moment rules (:data:`MOMENT_RULES`): the first that finds a moment (a ``_Moment``: the moment,
why, the confidence, notes and its basis) gives it; a training bar slow from its first step then
makes it ``early_steps`` (:func:`_crawl_from_start`).

1. :func:`_no_log`: no log, so the moment is only the user's.
2. :func:`_open_end`: the run just stops with no error, at its phase's moment, low.
3. :func:`_no_crash`: the last run shows no crash.
4. :func:`_library_fault`: a CUDA library or driver fault, not memory.
5. :func:`_not_out_of_memory`: an error line that is not an out-of-memory one.
6. :func:`_cut_unplaced`: a traceback cut before its error line that nothing places.
7. :func:`_cut_placed`: a cut traceback in a phase that points to memory.
8. :func:`_in_phase`: the crash in the phase the log places it (always finds one).

Environment rules (:data:`ENVIRONMENT_RULES`): each is asked; its :class:`Finding` has a
weight (``strong`` makes the moment ``environment``, ``suspected``, ``against``, a ``note`` or
only ``advice``), reasons, advice, and a strong finding's level and basis
(:func:`_environment` joins them).

1. :func:`_own_process_note`: which listed process was taken as the job's (note).
2. :func:`_outside_note`: a little memory held outside the job (note).
3. :func:`_capped_note`: a capped process's allowance is its card (note).
4. :func:`_library_fault_advice`: a library or driver fault, what to try (suspected).
5. :func:`_card_held_by_job`: the job alone held nearly the whole card (against).
6. :func:`_others_in_message`: PyTorch's figures show other processes or memory outside.
7. :func:`_room_left`: the card had room when the allocation failed.
8. :func:`_others_now`: nvidia-smi shows the card held now.
9. :func:`_pinned_copy`: a copy to pinned host memory failed.
10. :func:`_host_kill`: the host's own kill or MemoryError.
11. :func:`_save_cut_off`: a save died with no GPU error.
12. :func:`_host_ram_end`: the log ends where host RAM peaks.
13. :func:`_data_loading_cut`: a traceback cut in data loading.
14. :func:`_driver_signal_at_once`: a small config failed at once at the driver's level.
15. :func:`_silent_exit`: the process ended with no Python error (suspected).
16. :func:`_fragmentation`: reserved but unallocated memory, or a one-off (advice).
17. :func:`_worked_before`: the user says it worked before (suspected).

Every judgement that is a heuristic rather than a fact of the toolkit is a named constant or a
named function below, with its reasoning in its docstring:

- the moment from the phase and the step (:func:`_moment_from_phase`, ``EARLY_STEP_LIMIT``);
  a training crash at an unknown step with several buckets is ``intermittent``
  (:func:`_unknown_step_moment`); a crash with no phase line and no training bar happened
  before step 1 (:func:`_moment_without_phase`);
- the environment rules: other processes on the card, memory held
  outside this process, a card with room to spare when the allocation failed
  (:func:`_room_left`, ``FREE_ROOM_FACTOR``), a conservative config dying at once with a
  driver-level signal, a
  pinned-memory copy (also a traceback cut off in a copy to the CPU,
  :func:`_cut_off_in_cpu_copy`), a host-RAM kill, a checkpoint save that dies with no GPU
  error (:func:`_save_cut_off`), a run that ends with no error of its own where the log shows
  the host's RAM as the limit, on a save, a model load or the host's warnings
  (:func:`_host_ram_end`); and the counter-rule that a process holding nearly the
  whole card alone is the job itself (``JOB_HOLDS_CARD_SHARE``; in PyTorch's legacy message,
  :func:`_legacy_job_holds_card`; without the process line, :func:`_pytorch_holds_card`);
- the model kind: the one rule of :mod:`oom_wizard.rules.modelkind`, shared with the plan and
  the app;
- a log that just stops, with no error, gives its phase's moment with low confidence
  (:func:`_open_end_moment`; it may still be running only where something alive says so: the
  web UI's status, or a process nvidia-smi lists on the card; a log's age alone never does); a
  slowdown or a stall is the driver's system-memory fallback, with its advice
  (:func:`_slowdown`, ``SPILL_CARD_MAX_GIB``); a training bar slow from its first steps on a
  full card is a first-steps memory problem, not a stall after many steps
  (:func:`_crawl_from_start`, ``SLOW_FROM_START_S``, ``CARD_FULL_SHARE``); a cut-off
  traceback is assumed to be an OOM only when the phase it stops in points there;
- a log that stops in the launcher's or the dataset's lines was killed before the model loaded
  (the ``launch`` phase, said with low confidence); a traceback cut off in data loading is the
  host's side (:func:`_data_loading_cut`: a Windows DataLoader worker starting is the page
  file); a CUDA library or driver fault is its own verdict, never a roll-back
  (:func:`_library_fault`, :func:`_library_fault_advice`); a capped process ran out of its
  allowance, which is its card (:func:`_capped_note`; the allocator's figures already use it);
- how sure (:func:`_how_sure`, :func:`_phase_certainty`, :func:`_cut_certainty`): ``high``
  only where the evidence pins the moment (the failing frames in a phase, with or without their
  error line, PyTorch's message in a phase the trainer's lines announced or right after a step,
  the host's own kill or error, PyTorch's figures of other processes), ``medium`` where one line
  points one way (or the frames pin a training step whose number the log does not show),
  ``low`` otherwise; the reason goes with it (:attr:`Diagnosis.certainty`);
  ``bench/bench_confidence.py`` measures it on every report held;
- the right run (:func:`_log_match`): the config the log printed against the config given, and
  the log's age against the change log's last run; when they differ the verdict says the log
  is from the run before the change.

The user's answers win over all of this; where they disagree with the log, the disagreement
is kept and shown.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, Literal

from oom_wizard.errors import WizardError
from oom_wizard.logs.result import (
    EvidenceLine,
    LogScan,
    OomFigures,
    crash_phase,
    crash_step,
    crash_step_of,
)
from oom_wizard.logs.signals import (
    GPU_SIGNALS,
    HOST_SIGNALS,
    LOADING_PHASES,
    SIGNALS,
    STEP_SIGNALS,
    Phase,
    Signal,
)
from oom_wizard.rules.catalog import MODEL_KINDS, MOMENTS, ModelKind, Moment, load_presets
from oom_wizard.rules.modelkind import KindFinding as _Kind, find_model_kind as _model_kind
from oom_wizard.rules.oneoff import (
    ALLOCATOR_SETTING,
    FRAGMENTED_MIN_GIB,
    RETRY_WORDS,
    one_off_oom,
)
from oom_wizard.spelling import change, counted, gib
from oom_wizard.vocabulary import json_schema

if TYPE_CHECKING:
    # Types only: a log read alone loads neither the config's models nor the change log's.
    from oom_wizard.formats.view import JobView, ProcessView
    from oom_wizard.host.probe import ProbeResult
    from oom_wizard.storage.changelog import ChangeLog

Confidence = Literal["high", "medium", "low"]
AdviceId = Literal[
    "undo_scale_up",
    "other_processes",
    "pinned_memory",
    "host_ram",
    "fresh_worker",
    "expandable_segments",
    "pin_version",
    "check_system_log",
    "not_oom",
    "sysmem_fallback",
    "stalled",
    "library_fault",
    "data_loading",
]

JSON_SCHEMA: Final = json_schema("diagnose", 1)
"""The ``"schema"`` of ``diagnose --json`` (and of the diagnosis a change log records)."""

EARLY_STEP_LIMIT: Final = 10
"""A training crash in steps 1-10 is ``early_steps`` (DESIGN.md); later, after healthy progress,
the config fits most steps and one heavy batch tips it over: ``intermittent``."""
OTHER_PROCESS_SHARE: Final = 0.15
OTHER_PROCESS_MIN_GIB: Final = 2.5
"""Other processes (or memory held outside the job) make the GPU "not clean" when they hold at
least this share of the card and at least this many GiB: a desktop session's one or two GiB
on a 24 GB card is a note, a second job or a stuck worker is the verdict."""
FREE_ROOM_FACTOR: Final = 10.0
"""An allocation that failed while the card had this many times its size free (and a real share
of the card, as above) did not fail for want of VRAM: the card was not full."""
OUTSIDE_NOTE_MIN_GIB: Final = 0.75
"""Memory held outside the job worth a note (not a verdict) when it is below the share above."""
JOB_HOLDS_CARD_SHARE: Final = 0.85
"""When the job's own process holds at least this share of the card and no other process
holds a real share, the job filled the card: the config, not the environment."""
SLOW_FROM_START_S: Final = 15.0
"""An image model's training step that never once ran faster than this many seconds, on a card
nearly full (``CARD_FULL_SHARE``), is crawling on spilled memory from its first steps: the
fastest image training steps on such a card take one to a few seconds."""
CARD_FULL_SHARE: Final = 0.95
"""The share of the card in use that makes it full, for a crawl from the first steps."""
SPILL_CARD_MAX_GIB: Final = 24.5
"""NVIDIA's system-memory fallback turns an OOM into a crawl on consumer cards: a bar stuck at
no progress on a card below this size is read as the spill, not only as a stall."""
FRAGMENTATION_MIN_GIB: Final = FRAGMENTED_MIN_GIB
"""Reserved-but-unallocated memory at least this large (or as large as the failed allocation)
is worth ``expandable_segments:True``, as PyTorch's own message suggests."""
CONSERVATIVE_MAX_BUCKET: Final = 768
CONSERVATIVE_MAX_FRAMES: Final = 33
CONSERVATIVE_MAX_SAMPLE_SIDE: Final = 768
"""A conservative config: batch 1, gradient checkpointing on, biggest bucket <= 768, at most
33 frames, and sampling off or no larger than 768x768 and 33 frames. If such a config dies at
once with a driver-level signal, shrinking it further is not the answer."""
MAX_EVIDENCE: Final = 8
"""Evidence lines in a diagnosis (the scan keeps more)."""
DRIVER_SIGNALS: Final[frozenset[Signal]] = frozenset(
    {"zero_free", "cublas_alloc", "cuda_error_oom"}
)
"""Signals below PyTorch's allocator: the card itself had nothing left to give."""

_EVIDENCE_PRIORITY: Final[tuple[str, ...]] = (
    "cuda_oom",
    "library_fault",
    "cuda_error_oom",
    "cublas_alloc",
    "zero_free",
    "oom_abort",
    "loss_dict_followon",
    "cache_followon",
    "host_oom_kill",
    "exception",
    "host_copy",
    "oom_skip",
    "bar",
    "phase",
    "frame",
    "exit",
    "error",
    "resume",
    "stopped",
)

_PHASE_WORDS: Final[Mapping[Phase, str]] = {
    "launch": "while the trainer was starting (the launcher's or the dataset's lines), before "
    "the model loaded",
    "model_load": "while loading the model",
    "quantize": "while quantizing the model",
    "cache_latents": "while caching latents (the VAE encoding the dataset)",
    "cache_text": "while caching text embeddings",
    "baseline_sample": "during the baseline sample, before step 1",
    "training": "in a training step",
    "periodic_sample": "while generating samples",
    "save": "while saving a checkpoint",
    "unknown": "",
}


# --- inputs and output --------------------------------------------------------------------------


@dataclass(frozen=True)
class Answers:
    """What the user says: when it crashed, which kind of model, whether it worked before.

    Attributes:
        moment: The crash moment, if the user gave one.
        model_kind: ``image`` or ``video``, if the user gave one.
        worked_before: "This exact config worked before."
    """

    moment: Moment | None = None
    model_kind: ModelKind | None = None
    worked_before: bool = False

    @classmethod
    def coerce(cls, value: Answers | Mapping[str, Any] | None) -> Answers:
        """Answers from themselves, from a mapping with the same keys, or none.

        Raises:
            WizardError: an unknown moment or model kind.
        """
        if value is None:
            return cls()
        if isinstance(value, Answers):
            return value
        moment, kind = value.get("moment"), value.get("model_kind")
        if moment is not None and moment not in MOMENTS:
            raise WizardError(f"unknown moment '{moment}'; use one of {', '.join(MOMENTS)}")
        if kind is not None and kind not in MODEL_KINDS:
            raise WizardError(f"unknown kind '{kind}'; use one of {', '.join(MODEL_KINDS)}")
        return cls(
            moment=next((m for m in MOMENTS if m == moment), None),
            model_kind=next((k for k in MODEL_KINDS if k == kind), None),
            worked_before=bool(value.get("worked_before", False)),
        )


@dataclass(frozen=True)
class Advice:
    """One piece of advice beyond the config, given only with its evidence."""

    id: AdviceId
    text: str


@dataclass(frozen=True)
class LogMismatch:
    """A memory field whose value in the log's printed config differs from the config given."""

    path: str
    in_log: Any
    in_config: Any


@dataclass(frozen=True)
class Diagnosis:
    """The verdict on one crash; :meth:`to_json` is what ``diagnose --json`` prints.

    Attributes:
        moment: The crash moment (the user's answer when given), None when nothing says.
        phase: The finer phase from the log.
        model_kind: ``image`` or ``video``; None when unknown.
        arch: The config's arch (or the one its legacy flags select).
        signals: What the log shows (see :data:`oom_wizard.logs.signals.SIGNALS`).
        environment_suspected: The GPU, the worker or the host is suspect, not the config.
        reasons: Why the environment is or is not suspected.
        evidence: The lines that support the verdict, in file order.
        oom: PyTorch's allocator figures.
        last_step: The last training step the log shows (the bar's count: steps completed).
        total_steps: The training bar's total.
        crash_step: The step the run ended in (:func:`crash_step`): the one every front end
            names, never ``last_step`` for it.
        advice: Advice beyond the config, each with its evidence present.
        verdict: The finding in one sentence.
        first_change: The first thing to change (or to do).
        confidence: How sure the verdict is: ``high`` where the evidence pins the moment (a
            traceback inside a known phase, PyTorch's message in a known phase or right after a
            step), ``medium`` where one line of evidence points one way, ``low`` otherwise.
        basis: Why that confidence, in a few words (:attr:`certainty` says it in a line).
        log: The log read.
        crashed: Whether the log's last run crashed (None without a log).
        disagreements: Where the user's answers and the log disagree.
        notes: Other things worth saying (an audio model, a log without a crash...).
        run_count: Runs in the log.
        resumed: The last run continued an earlier one.
        skip_count: OOM-skipped batches in the last run.
        probe: The GPU probe, if one was made.
        log_matches_config: Whether the log is from this config: True when the config it
            printed matches, False when it differs or the log is older than the config's last
            change, None when it cannot tell.
        log_mismatch: The memory fields that differ between the log's config and this one.
        log_note: When the log is not this config's, that in one sentence (else empty).
    """

    moment: Moment | None
    phase: Phase
    model_kind: ModelKind | None
    arch: str | None
    signals: tuple[Signal, ...]
    environment_suspected: bool
    reasons: tuple[str, ...]
    evidence: tuple[EvidenceLine, ...]
    oom: OomFigures | None
    last_step: int | None
    total_steps: int | None
    advice: tuple[Advice, ...]
    verdict: str
    first_change: str | None
    confidence: Confidence
    log: str | None
    crashed: bool | None
    disagreements: tuple[str, ...]
    notes: tuple[str, ...]
    run_count: int
    resumed: bool
    skip_count: int
    probe: ProbeResult | None
    log_matches_config: bool | None = None
    log_mismatch: tuple[LogMismatch, ...] = ()
    log_note: str = ""
    basis: str = ""
    crash_step: int | None = None

    @property
    def certainty(self) -> str:
        """How sure the verdict is and why, in one line (:func:`certainty_line`)."""
        return certainty_line(self.confidence, self.basis)

    def to_json(self) -> dict[str, Any]:
        """The diagnosis as JSON-ready data (DESIGN.md's keys, and a few more), named by
        :data:`JSON_SCHEMA`."""
        return {
            "schema": JSON_SCHEMA,
            "moment": self.moment,
            "phase": self.phase,
            "model_kind": self.model_kind,
            "arch": self.arch,
            "signals": list(self.signals),
            "environment_suspected": self.environment_suspected,
            "reasons": list(self.reasons),
            "evidence": [{"line": e.line, "text": e.text} for e in self.evidence],
            "oom": _oom_json(self.oom),
            "last_step": self.last_step,
            "total_steps": self.total_steps,
            "crash_step": self.crash_step,
            "advice": [{"id": a.id, "text": a.text} for a in self.advice],
            "verdict": self.verdict,
            "first_change": self.first_change,
            "confidence": self.confidence,
            "certainty": self.certainty,
            "log": self.log,
            "crashed": self.crashed,
            "disagreements": list(self.disagreements),
            "notes": list(self.notes),
            "run_count": self.run_count,
            "resumed": self.resumed,
            "skip_count": self.skip_count,
            "gpu_now": _probe_json(self.probe),
            "log_matches_config": self.log_matches_config,
            "log_mismatch": [
                {"path": m.path, "in_log": m.in_log, "in_config": m.in_config}
                for m in self.log_mismatch
            ],
        }


def _round(value: float) -> float:
    return round(value, 3)


def _oom_json(oom: OomFigures | None) -> dict[str, Any]:
    """The allocator figures that the message gave (GiB), and nothing else."""
    if oom is None:
        return {}
    figures = {
        "tried_gib": oom.tried,
        "total_gib": oom.total,
        "capacity_gib": oom.capacity,
        "free_gib": oom.free,
        "this_process_gib": oom.this_process,
        "allocated_gib": oom.allocated,
        "reserved_gib": oom.reserved,
        "reserved_unallocated_gib": oom.reserved_unallocated,
    }
    found: dict[str, Any] = {k: _round(v) for k, v in figures.items() if v is not None}
    if oom.this_process_inferred:
        found["this_process_inferred"] = True
    if oom.other_processes:
        found["other_processes"] = [
            {"pid": p.pid, "gib": _round(p.gib)} for p in oom.other_processes
        ]
    return found


def _probe_json(probe: ProbeResult | None) -> dict[str, Any] | None:
    if probe is None:
        return None
    return {
        "gpus": [
            {
                "index": g.index,
                "name": g.name,
                "total_gib": _round(g.total_gib),
                "used_gib": _round(g.used_gib),
            }
            for g in probe.gpus
        ],
        "processes": [
            {
                "pid": p.pid,
                "name": p.name,
                "gib": None if p.used_gib is None else _round(p.used_gib),
            }
            for p in probe.processes
        ],
        "host_total_gib": None if probe.host_total_gib is None else _round(probe.host_total_gib),
        "host_available_gib": (
            None if probe.host_available_gib is None else _round(probe.host_available_gib)
        ),
    }


# --- the diagnosis ------------------------------------------------------------------------------


def diagnose(
    scan: LogScan | None,
    view: JobView | None,
    *,
    answers: Answers | Mapping[str, Any] | None = None,
    probe: ProbeResult | None = None,
    changelog: ChangeLog | None = None,
    running: str | None = None,
) -> Diagnosis:
    """Say when and why the job ran out of memory, from whatever is known.

    Args:
        scan: The log's scan (None without a log).
        view: The config's typed view (None without a config).
        answers: The user's answers (an :class:`Answers` or a mapping with its keys); they win
            over the log, and a disagreement is shown.
        probe: The GPU as it is now (None when it could not be looked at).
        changelog: The config's change log, when it is the wizard's own output.
        running: What says the job is running now, in words (the web UI's status); None when
            nothing does. A log's age is no such thing: a pasted log is new and its job dead.

    Raises:
        WizardError: an answer names an unknown moment or kind.
    """
    given = Answers.coerce(answers)
    process = view.primary if view is not None else None
    kind = _model_kind(process)
    seen = Seen(scan, process, probe, given, running)
    found = _moment_from_log(seen)
    crawl = _crawl_from_start(scan, probe, kind.kind)
    if crawl is not None:
        found = _Moment(
            "early_steps", crawl, "medium", found.notes, "a training bar slow from its first step"
        )
    env = _environment(seen)
    scaled = _scale_up_advice(changelog)
    signals, slow_advice = _slowdown(scan, probe, found, crawl=crawl is not None)
    match = _log_match(scan, process, changelog)

    log_moment: Moment | None = "environment" if env.strong else found.moment
    moment = given.moment or log_moment
    model_kind = given.model_kind or kind.kind
    disagreements = _disagreements(given, log_moment, found, env, kind)
    # The environment's own advice comes first when it is to blame; else a scale-up to undo.
    advice = (*env.advice, *scaled) if env.strong else (*scaled, *env.advice)
    advice = (*advice, *slow_advice)
    notes = [*kind.notes, *(found.notes if log_moment == found.moment else ())]
    notes += env.notes
    if scan is None:
        notes.append("No log: the moment comes only from your answers.")
    confidence, basis = _how_sure(found, env, given, match)
    verdict = _verdict(scan, moment, found, env, kind, model_kind, given, sure=confidence != "low")
    if match.words:
        verdict = f"{match.words} {verdict}"
    return Diagnosis(
        moment=moment,
        phase=scan.phase if scan is not None else "unknown",
        model_kind=model_kind,
        arch=kind.arch,
        signals=signals,
        environment_suspected=env.strong or (env.suspected and not env.against),
        reasons=env.reasons,
        evidence=_evidence(scan),
        oom=scan.oom if scan is not None else None,
        last_step=scan.last_step if scan is not None else None,
        total_steps=scan.total_steps if scan is not None else None,
        crash_step=crash_step(scan) if scan is not None else None,
        advice=advice,
        verdict=verdict,
        first_change=_first_change(moment, model_kind, advice),
        confidence=confidence,
        basis=basis,
        log=scan.source if scan is not None else None,
        crashed=scan.crashed if scan is not None else None,
        disagreements=disagreements,
        notes=tuple(notes),
        run_count=scan.run_count if scan is not None else 0,
        resumed=scan.resumed if scan is not None else False,
        skip_count=scan.skip_count if scan is not None else 0,
        probe=probe,
        log_matches_config=match.matches,
        log_mismatch=match.mismatch,
        log_note=match.words,
    )


# --- how sure -----------------------------------------------------------------------------------

_SURE_WORDS: Final[Mapping[Confidence, str]] = {
    "high": "Sure",
    "medium": "Fairly sure",
    "low": "Not sure",
}


def certainty_line(confidence: Confidence, basis: str) -> str:
    """How sure a verdict is and why, in one line: the one wording of ``diagnose``, the moment
    screen, ``run`` and ``watch``."""
    return f"{_SURE_WORDS[confidence]} ({confidence}): {basis}." if basis else ""


def _how_sure(
    found: _Moment, env: _Environment, given: Answers, match: _LogMatch
) -> tuple[Confidence, str]:
    """The verdict's confidence and its reason: the user's answer, a log from another run, the
    environment's strongest reason, else what the log showed of the moment."""
    if given.moment:
        return "high", "you said when it crashed"
    if match.stale:
        return "low", "the log is from the run before the config's last change"
    if env.strong:
        return env.confidence, env.basis
    return found.confidence, found.basis


# --- the moment from the log --------------------------------------------------------------------


@dataclass(frozen=True)
class _Moment:
    """The moment the log points to, in words, and how sure that is."""

    moment: Moment | None
    why: str
    confidence: Confidence
    notes: tuple[str, ...] = ()
    basis: str = ""
    """Why that confidence, in a few words (:func:`certainty_line`)."""


def _alive(running: str | None, probe: ProbeResult | None) -> str | None:
    """What says the job may still be running, in words: the caller's (the web UI's status),
    else the processes nvidia-smi lists on the card now. None: nothing alive says so."""
    if running:
        return running
    if probe is not None and (listed := [p for p in probe.processes if p.pid]):
        names = ", ".join(f"{p.name} (pid {p.pid})" for p in listed[:3])
        return f"nvidia-smi lists {names} on the card now"
    return None


@dataclass(frozen=True)
class Seen:
    """What the rules read: the log's scan, the config's process, the GPU now, the user's
    answers and what says the job is still running (the web UI's status)."""

    scan: LogScan | None
    process: ProcessView | None
    probe: ProbeResult | None
    given: Answers
    running: str | None = None

    @property
    def oom(self) -> OomFigures | None:
        """PyTorch's out-of-memory figures, when the log has them."""
        return self.scan.oom if self.scan is not None else None

    @property
    def job_alone(self) -> str | None:
        """The counter-rule's words when the job alone held nearly the whole card."""
        return _job_holds_card(self.oom)


MomentRule = Callable[[Seen], "_Moment | None"]
"""A moment rule: what the log and the host show, to the moment found, or None where the rule
does not apply (the next one in :data:`MOMENT_RULES` is asked)."""


def _moment_from_log(seen: Seen) -> _Moment:
    """The moment the log points to: the first rule of :data:`MOMENT_RULES` that finds one (the
    last, :func:`_in_phase`, always does)."""
    for rule in MOMENT_RULES:
        found = rule(seen)
        if found is not None:
            return found
    raise AssertionError("the last moment rule always finds a moment")  # pragma: no cover


def _no_log(seen: Seen) -> _Moment | None:
    """No log: the moment comes only from the user."""
    if seen.scan is not None:
        return None
    return _Moment(None, "no log", "low", (), "there is no log")


def _open_end(seen: Seen) -> _Moment | None:
    """A run that just stops with no error (:func:`_open_end_moment`)."""
    scan = seen.scan
    if scan is None or scan.crashed or not scan.ends_open or scan.has("oom_skip"):
        return None
    return _open_end_moment(scan, seen.process, _alive(seen.running, seen.probe))


def _no_crash(seen: Seen) -> _Moment | None:
    """The log's last run ended with no crash and no skipped batch."""
    scan = seen.scan
    if scan is None or scan.crashed or scan.has("oom_skip"):
        return None
    note = "The log's last run shows no crash"
    if scan.stopped:
        note += " (it was stopped)"
    elif scan.run_count > 1:
        note += f" (the file holds {scan.run_count} runs; only the last is read)"
    return _Moment(None, "the log shows no crash", "low", (note + ".",), "the log shows no crash")


def _crashed_without_oom_sign(scan: LogScan | None) -> LogScan | None:
    """The scan of a crash with no GPU out-of-memory signal, no host kill and no silent exit;
    None otherwise."""
    if scan is None or not scan.crashed:
        return None
    if set(scan.signals) & (GPU_SIGNALS | {"host_oom_kill", "silent_exit"}):
        return None
    return scan


def _library_fault(seen: Seen) -> _Moment | None:
    """A CUDA library or the driver failed for a reason that is not memory (cuDNN's fused
    attention, a cuBLAS kernel, an illegal address): no roll-back of the config changes it."""
    scan = _crashed_without_oom_sign(seen.scan)
    if scan is None or not scan.has("library_fault"):
        return None
    shown = scan.evidence_for("library_fault")
    where = f" (line {shown[0].line})" if shown else ""
    note = (
        f"A CUDA library or the driver failed{where}, not for lack of memory: rolling the memory "
        "settings back will not fix it."
    )
    return _Moment(
        None,
        "a CUDA library or driver fault, not out of memory",
        "high",
        (note,),
        "the log's own error line is a CUDA library or driver fault",
    )


def _not_out_of_memory(seen: Seen) -> _Moment | None:
    """The crash's error line is there and it is not an out-of-memory one."""
    scan = _crashed_without_oom_sign(seen.scan)
    if scan is None or scan.exception is None:
        return None
    text = scan.exception.text
    note = (
        f"The job failed with '{text}' (line {scan.exception.line}), not with an "
        "out-of-memory error: rolling the memory settings back will not fix that."
    )
    return _Moment(
        None,
        "the crash is not an out-of-memory error",
        "low",
        (note,),
        "its error line is not an out-of-memory one, but the log cannot say more",
    )


def _cut_unplaced(seen: Seen) -> _Moment | None:
    """A traceback cut before its error line, with nothing in the log that points to a
    memory-hungry phase: no out-of-memory is assumed."""
    scan = _crashed_without_oom_sign(seen.scan)
    if scan is None or (
        scan.exception is not None
        or scan.frame_phase is not None
        or scan.frame_hint is not None
        or scan.marker_phase != "unknown"
        or scan.training_started
    ):
        return None
    note = (
        "The traceback is cut off before its error line and nothing in the log points to "
        "a memory-hungry phase: the wizard does not assume an out-of-memory. Paste the "
        "whole error, or say when it crashed."
    )
    return _Moment(
        None,
        "the error itself is not in the log",
        "low",
        (note,),
        "the error line is cut off and nothing in the log places it",
    )


def _cut_placed(seen: Seen) -> _Moment | None:
    """A traceback cut before its error line in a phase that points to memory: out of memory
    is assumed, said so, as sure as :func:`_cut_certainty` makes it."""
    scan = _crashed_without_oom_sign(seen.scan)
    if scan is None or scan.exception is not None:
        return None
    found = _moment_from_phase(scan, seen.process)
    note = (
        "The log does not show the error itself (it is cut off); the phase it stops in "
        "points to memory, so out of memory is assumed."
    )
    sure, basis = _cut_certainty(scan, found)
    return _Moment(found.moment, found.why, sure, (*found.notes, note), basis)


def _in_phase(seen: Seen) -> _Moment | None:
    """An out-of-memory (or a skip) in the phase the log places it (:func:`_moment_from_phase`)."""
    if seen.scan is None:  # pragma: no cover - _no_log comes first
        return None
    return _moment_from_phase(seen.scan, seen.process)


MOMENT_RULES: Final[tuple[MomentRule, ...]] = (
    _no_log,
    _open_end,
    _no_crash,
    _library_fault,
    _not_out_of_memory,
    _cut_unplaced,
    _cut_placed,
    _in_phase,
)
"""The moment rules, in the order they are asked; the module's docstring names each in this
order (a test checks that the two agree)."""


def _cut_certainty(scan: LogScan, found: _Moment) -> tuple[Confidence, str]:
    """How sure a traceback cut before its error line makes the moment.

    The moment is when it crashed, and the failing frames say that whether or not the error
    line is there: frames that place the phase (``frame_phase``, not a hint) pin it, ``high``,
    as with the error line, unless the phase is a training step whose number the log does not
    show (``medium``: the phase is pinned, early or intermittent is not). A phase from the
    trainer's lines alone, or an attention frame's hint, stays ``low``: the crash may have come
    after the line that announced it. On the real reports the frames placed, the moment was
    right every time (``bench/bench_confidence.py``); that the error was out of memory is
    assumed, and the note says so.
    """
    if scan.frame_phase is None:
        return "low", "the error line is cut off; the phase it stops in is only a hint"
    where = _PHASE_WORDS[scan.frame_phase]
    if found.confidence != "high":  # a training step whose number the log does not show
        return "medium", (
            f"the failing traceback's frames are {where} (its error line is cut off); "
            "which step, the log does not show"
        )
    return "high", (
        f"the failing traceback's frames are {where}; its error line is cut off, so out of "
        "memory is assumed"
    )


def _open_end_moment(scan: LogScan, process: ProcessView | None, alive: str | None) -> _Moment:
    """The run just stops inside a phase, with no error and no sign that it finished: the job
    stalled there (the driver's system-memory fallback crawls for hours), was killed from
    outside, or the log was pasted up to there. That phase's moment, said with low confidence."""
    found = _moment_from_phase(scan, process)
    where = _PHASE_WORDS[scan.phase] or "where it was"
    if scan.spill_step is not None and scan.phase in ("periodic_sample", "baseline_sample"):
        why = (
            f"{where}, its steps crawling many times slower than training's, with no error: "
            "the driver spilling VRAM into system memory"
        )
    elif scan.spill_step is not None:
        why = (
            f"from training step {scan.spill_step}, after a stable stretch (its s/it grew "
            "several-fold), with no error: the driver spilling VRAM into system memory"
        )
    elif scan.has("stall"):
        why = f"{where}, on a bar with no progress at all and no error: the job stalled there"
    else:
        why = f"{where}, with no error: the job stalled or was killed there"
    notes = list(found.notes)
    if alive is not None:
        notes.append(
            f"The job may still be running, or stalled: {alive}. "
            "Check that its process is alive before you change anything."
        )
    else:
        notes.append(
            "The log has no error and no sign that the run finished: assuming it stalled or was "
            "killed there (if you only pasted part of it, say when it crashed)."
        )
    basis = (
        "the log stops with no error: a stall, a kill from outside and a paste cut there look alike"
    )
    return _Moment(found.moment, why, "low", tuple(notes), basis)


def _moment_from_phase(scan: LogScan, process: ProcessView | None) -> _Moment:
    """Loading phases (the baseline sample included) are ``loading``; a periodic sample is
    ``sampling``; a training step (or a save) depends on the step: within the first
    ``EARLY_STEP_LIMIT`` steps ``early_steps``, after healthy progress ``intermittent``."""
    phase = crash_phase(scan)
    sure, basis = _phase_certainty(scan, phase)
    if phase in LOADING_PHASES:
        return _Moment("loading", _PHASE_WORDS[phase], sure, (), basis)
    if phase == "periodic_sample":
        return _Moment("sampling", _phase_words(scan, phase), sure, (), basis)
    if phase in ("training", "save"):
        return _training_moment(scan, process, phase, sure, basis)
    return _moment_without_phase(scan)


def _phase_certainty(scan: LogScan, phase: Phase) -> tuple[Confidence, str]:
    """How sure a phase makes the moment: ``high`` when the failing traceback's frames are in
    it, or PyTorch's own error (or the trainer's OOM banner) comes inside a phase the trainer's
    lines announced; ``medium`` when one line points there (a phase line or a bar, and the
    failure is not PyTorch's message); ``low`` when the only lines are the launcher's or the
    dataset's, which no OOM comes from."""
    if phase == "launch":
        return "low", "the only lines before it are the launcher's or the dataset settings"
    if scan.has("cache_followon"):
        return "medium", (
            "the trainer's own check failed on images it could not cache: an out-of-memory it "
            "caught while caching latents, not the error line itself"
        )
    if scan.frame_hint is not None:
        return "medium", "the failing traceback is in attention, which a training step runs"
    if scan.frame_phase is not None:
        return "high", f"the failing traceback's frames are {_PHASE_WORDS[phase]}"
    if scan.marker_phase == phase and scan.has(*GPU_SIGNALS):
        error = (
            "PyTorch's out-of-memory error"
            if scan.has(*(GPU_SIGNALS - STEP_SIGNALS))
            else "the trainer's out-of-memory banner"
        )
        if phase == "training" and scan.last_step is not None:
            return "high", f"{error} comes right after a training step line"
        return "high", f"{error} comes {_PHASE_WORDS[phase]}"
    return "medium", "one line of the log points there"


def _training_moment(
    scan: LogScan, process: ProcessView | None, phase: Phase, sure: Confidence, basis: str
) -> _Moment:
    trouble = _trouble_step(scan)
    where = _phase_words(scan, phase)
    if trouble is None:
        return _unknown_step_moment(process, where, pinned=scan.frame_phase is not None)
    if trouble <= EARLY_STEP_LIMIT:
        first = " after resuming" if scan.resumed else ""
        return _Moment("early_steps", f"{where}, within the first steps{first}", sure, (), basis)
    skipped = (
        f" and {counted(scan.skip_count, 'skipped batch', 'skipped batches')}"
        if scan.skip_count
        else ""
    )
    why = f"{where}, after {counted(trouble - 1, 'step')} that fit{skipped}"
    return _Moment("intermittent", why, sure, (), basis)


def _trouble_step(scan: LogScan) -> int | None:
    """The step of this run that ran out of memory, counted from the run's start (1 = the
    first step it made): the one it ended in (:func:`crash_step_of`), or without a crash
    (skips only) the one of the last skip banner.

    A resumed run counts from where it resumed: a config that dies at once after a resume
    (the optimizer state loaded back adds memory) did not survive its first steps.
    """
    if not scan.crashed and scan.spill_step is not None:
        done: int | None = scan.spill_step
    elif not scan.crashed and scan.skips:
        done = scan.skips[-1].step
    else:
        done = scan.last_step
    step = crash_step_of(done, "training")
    if step is None:
        return None
    return step - (scan.first_step or 0)


def _unknown_step_moment(
    process: ProcessView | None, where: str, *, pinned: bool = False
) -> _Moment:
    """A training-step crash whose step the log does not show (a pasted traceback).

    With several resolution buckets (or clip lengths taken from each clip) the step that fails
    is the one that draws the biggest bucket: a borderline config, ``intermittent``, said with
    low confidence. Otherwise every step weighs the same, so the first one is the likeliest:
    ``early_steps``, said with medium confidence where the failing frames pin a training step
    (``pinned``), else low.
    """
    basis = "the log does not show which step it was"
    if process is not None and _several_buckets(process):
        why = f"{where} whose number the log does not show, with several buckets"
        return _Moment("intermittent", why, "low", (), basis)
    why = f"{where} whose number the log does not show"
    if pinned:
        basis = (
            "the failing traceback's frames are in a training step and every step weighs the "
            "same; which step, the log does not show"
        )
        return _Moment("early_steps", why, "medium", (), basis)
    return _Moment("early_steps", why, "low", (), basis)


def _several_buckets(process: ProcessView) -> bool:
    sizes = {size for dataset in process.datasets for size in dataset.resolution or ()}
    clips = any(dataset.auto_frame_count for dataset in process.datasets)
    return len(sizes) > 1 or clips


def _moment_without_phase(scan: LogScan) -> _Moment:
    """No phase line and no training bar: if this is the whole log, the job never reached
    step 1, so it died while loading. Said with low confidence: a pasted excerpt looks the
    same."""
    if scan.training_started or scan.last_step is not None:
        return _Moment(
            None, "the log does not show where it was", "low", (), "no phase line places it"
        )
    why = "before step 1 as far as the log shows: it has no training progress bar the wizard reads"
    note = (
        "The log has no phase line and no step line the wizard reads: if it is only an excerpt, "
        "or the trainer draws its progress in a way the wizard does not know, it may have been "
        "training; say when it crashed (--moment)."
    )
    basis = "the log has no phase line and no step line the wizard reads"
    return _Moment("loading", why, "low", (note,), basis)


def _phase_words(scan: LogScan, phase: Phase) -> str:
    words = _PHASE_WORDS[phase]
    step, total = crash_step_of(scan.last_step, phase), scan.total_steps
    if phase == "training" and step is not None:
        words = f"in training step {step}" + (f" of {total}" if total else "")
    elif phase in ("periodic_sample", "save") and step is not None:
        words += f" at step {step}"
    return words


# --- the step a run ended in ---------------------------------------------------------------------


# --- the environment ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Environment:
    """The environment verdict: strong reasons make the moment ``environment``."""

    strong: bool
    suspected: bool
    reasons: tuple[str, ...]
    advice: tuple[Advice, ...]
    notes: tuple[str, ...] = ()
    against: bool = False
    """A reason says the job filled the card itself: then nothing short of a strong reason may
    make the GPU "suspect" beside it."""
    confidence: Confidence = "low"
    """How sure the first of the surest strong findings is."""
    basis: str = ""


Weight = Literal["strong", "suspected", "against", "note", "advice"]
"""What a finding weighs: ``strong`` makes the moment ``environment``; ``suspected`` makes the
GPU suspect unless a finding is ``against`` (the job filled the card itself); a ``note`` is only
said; ``advice`` is only advice."""


@dataclass(frozen=True)
class Finding:
    """What one environment rule found: its weight, its reasons (a note's words, for a
    ``note``), its advice, and how sure a strong finding is, with why (its basis)."""

    weight: Weight
    reasons: tuple[str, ...] = ()
    advice: tuple[Advice, ...] = ()
    level: Confidence = "low"
    basis: str = ""


EnvironmentRule = Callable[[Seen], "Finding | None"]
"""An environment rule: what the log and the host show, to a finding, or None where it finds
nothing."""


def _environment(seen: Seen) -> _Environment:
    """Whether the GPU, the worker or the host is to blame: every rule of
    :data:`ENVIRONMENT_RULES` is asked, in order, and their findings are joined.

    Strong reasons come before suspected ones and the counter-rule's last; advice and notes
    keep the table's order. The confidence is the surest strong finding's (the first, among
    equals), with its basis.
    """
    found = [finding for rule in ENVIRONMENT_RULES if (finding := rule(seen)) is not None]

    def said(weight: Weight) -> list[str]:
        return [reason for f in found if f.weight == weight for reason in f.reasons]

    strong, suspected, against = said("strong"), said("suspected"), said("against")
    levels = [(f.level, f.basis) for f in found if f.weight == "strong" and f.reasons]
    order: tuple[Confidence, ...] = ("high", "medium", "low")
    level, basis = min(levels, key=lambda item: order.index(item[0]), default=("low", ""))
    return _Environment(
        bool(strong),
        bool(suspected),
        (*strong, *suspected, *against),
        tuple(advice for f in found for advice in f.advice),
        tuple(said("note")),
        bool(against),
        level,
        basis,
    )


_HOST_RAM_END: Final = "the log ends where host RAM peaks, with no GPU error"


def _strong(level: Confidence, basis: str, reason: str, advice: Advice) -> Finding:
    return Finding("strong", (reason,), (advice,), level, basis)


def _suspect(reason: str, advice: Advice) -> Finding:
    return Finding("suspected", (reason,), (advice,))


def _note(words: str) -> Finding:
    return Finding("note", (words,))


def _advise(advice: Advice) -> Finding:
    return Finding("advice", (), (advice,))


def _card_held_by_job(seen: Seen) -> Finding | None:
    """The counter-rule (:func:`_job_holds_card`): the job alone held nearly the whole card,
    so it is the config, not the environment."""
    words = seen.job_alone
    return Finding("against", (words,)) if words is not None else None


def _share(gib: float, total: float | None) -> bool:
    """Whether ``gib`` is a real share of a card of ``total`` GiB."""
    floor = OTHER_PROCESS_SHARE * total if total else 0.0
    return gib >= max(OTHER_PROCESS_MIN_GIB, floor)


def _job_holds_card(oom: OomFigures | None) -> str | None:
    """The counter-rule: this process alone held nearly the whole card."""
    if oom is None or not oom.total:
        return None
    if oom.this_process is None:
        return _legacy_job_holds_card(oom) or _pytorch_holds_card(oom)
    if _share(oom.others_total, oom.total):
        return None
    if oom.this_process < JOB_HOLDS_CARD_SHARE * oom.total:
        return None
    return (
        f"this process held {gib(oom.this_process)} of {gib(oom.total)} and no other process "
        "holds a real share: the job itself filled the card, it is the config, not the "
        "environment"
    )


def _legacy_job_holds_card(oom: OomFigures) -> str | None:
    """The counter-rule for PyTorch's legacy message, which names no process.

    ``(GPU 0; 4.00 GiB total capacity; 3.43 GiB already allocated; 0 bytes free; 3.50 GiB
    reserved in total by PyTorch)``: what is neither free nor reserved by this PyTorch is the
    CUDA context plus anything else on the card. When that rest is not a real share of the card
    (:func:`_share`), nothing else held the card: its "0 bytes free" is the job's own doing, so a
    driver-level look is no reason to blame the environment.
    """
    if oom.form != "legacy" or oom.reserved is None or oom.free is None or not oom.total:
        return None
    outside = oom.total - oom.reserved - oom.free
    if _share(outside, oom.total):
        return None
    return (
        f"PyTorch in this process had reserved {gib(oom.reserved)} of {gib(oom.total)} and only "
        f"{gib(max(outside, 0.0))} was held outside it: the job itself filled the card, it is "
        "the config, not the environment"
    )


def _pytorch_holds_card(oom: OomFigures) -> str | None:
    """The counter-rule for the current message without its process line.

    Where PyTorch cannot read the process's use (some Windows and WSL drivers) it prints ``GPU 0
    has a total capacity of 31.84 GiB of which 0 bytes is free. Of the allocated memory 29.69
    GiB is allocated by PyTorch``: what PyTorch itself allocated is a floor of the job's use, so
    when that alone is nearly the whole card, the job filled it.
    """
    if oom.form != "current" or oom.allocated is None or not oom.total:
        return None
    held = oom.allocated + (oom.reserved_unallocated or 0.0)
    if held < JOB_HOLDS_CARD_SHARE * oom.total:
        return None
    return (
        f"PyTorch in this process held {gib(held)} of {gib(oom.total)}: the job itself filled "
        "the card, it is the config, not the environment"
    )


def _own_process_note(seen: Seen) -> Finding | None:
    """Say which listed process was taken as the job when PyTorch named none its own."""
    oom = seen.oom
    if oom is None or not oom.this_process_inferred or oom.this_process is None:
        return None
    held = (oom.allocated or 0.0) + (oom.reserved_unallocated or 0.0)
    return _note(
        f"PyTorch's message names no process as its own (the job runs in a container): the "
        f"one holding {gib(oom.this_process)}, which covers the {gib(held)} PyTorch held, is "
        "taken as the job itself."
    )


def _library_fault_advice(seen: Seen) -> Finding | None:
    """A CUDA library or driver fault with no out-of-memory sign: what to try instead of a
    roll-back. cuDNN's fused attention is the usual culprit on new torch builds (PyTorch falls
    back to its other attention kernels when it is switched off); a cuBLAS kernel that failed or
    an illegal address points at the driver, torch's build or the card itself."""
    scan = seen.scan
    if scan is None or not scan.crashed or not scan.has("library_fault"):
        return None
    if scan.has(*GPU_SIGNALS):
        return None
    return _suspect(
        "a CUDA library or the driver failed (not an out-of-memory error): the software stack "
        "or the card, not the config's memory",
        Advice(
            "library_fault",
            "Not memory: switch off cuDNN's attention (torch.backends.cuda.enable_cudnn_sdp(False) "
            "before training starts) and retry the same config; if it persists, update the "
            "NVIDIA driver or move to another torch build (or back to the one that worked), and "
            "run with CUDA_LAUNCH_BLOCKING=1 to see which call fails. Do not roll the config back.",
        ),
    )


def _capped_note(seen: Seen) -> Finding | None:
    """A capped process (PyTorch's ``N GiB allowed``): its allowance is the card it has, and
    the verdict and the sizes use it as the card."""
    oom = seen.oom
    if oom is None or oom.capacity is None or not oom.total:
        return None
    return _note(
        f"This process was capped at {gib(oom.total)} of the {gib(oom.capacity)} card "
        "(a memory fraction set for it): it ran out of its allowance, so the allowance is the "
        "card it has, and the roll-back is sized for it."
    )


def _data_loading_cut(seen: Seen) -> Finding | None:
    """A traceback cut off before its error line whose frames are data loading, not the model:
    a DataLoader worker starting (on Windows it imports the training script again, and that
    fails for want of commit charge: the page file), or a batch fetched in the training loop
    (the host's side: a worker killed for RAM). Neither touches the card's memory."""
    scan = seen.scan
    if scan is None or not (
        scan.crashed
        and scan.data_frame is not None
        and scan.exception is None
        and scan.frame_phase is None
        and not scan.has(*GPU_SIGNALS, *HOST_SIGNALS)
    ):
        return None
    basis = "the traceback, cut before its error line, stops in data loading"
    if scan.data_frame == "worker_start":
        return _strong(
            "medium",
            basis,
            "the traceback (its error line cut off) is a DataLoader worker starting: on Windows "
            "each worker imports the training script and torch again, and that fails when the "
            "page file has no room left, not the card",
            Advice(
                "data_loading",
                "Host memory, not VRAM: let Windows manage the page file (or enlarge it) and "
                "close other programs, or use fewer data-loader workers (0 loads in the main "
                "process); rolling VRAM settings back will not help.",
            ),
        )
    return _strong(
        "low",
        basis,
        "the traceback (its error line cut off) stops while a batch was fetched from the data "
        "loader: that runs on the host (a worker killed for RAM, or a file it could not read), "
        "not on the card",
        Advice(
            "data_loading",
            "Look at the error line the paste cut off: a worker killed (RAM) wants fewer "
            "data-loader workers or more RAM; a file error wants that image or caption fixed. "
            "Rolling VRAM settings back will not help.",
        ),
    )


def _outside_note(seen: Seen) -> Finding | None:
    """Memory held outside the job that is too little to blame is still worth a line."""
    oom = seen.oom
    if oom is None or not oom.total or oom.this_process is None or oom.free is None:
        return None
    outside = oom.total - oom.free - oom.this_process - oom.others_total
    if outside < OUTSIDE_NOTE_MIN_GIB or _share(outside, oom.total):
        return None
    return _note(
        f"{outside:.2f} of {oom.total:.2f} GiB was in use outside this process (a desktop "
        "session, a browser): too little to blame, but closing it gives the job that much."
    )


def _others_in_message(seen: Seen) -> Finding | None:
    """Other processes listed by PyTorch, or memory in use outside this process (unless the
    job alone held nearly the whole card: :func:`_job_holds_card`)."""
    oom = seen.oom
    if oom is None or not oom.total or seen.job_alone is not None:
        return None
    basis = "PyTorch's own figures show the card held or free outside the job"
    if oom.other_processes and _share(oom.others_total, oom.total):
        listed = ", ".join(
            f"pid {p.pid} {gib(p.gib)}" if p.pid else f"{gib(p.gib)}" for p in oom.other_processes
        )
        return _strong(
            "high",
            basis,
            f"other processes held {gib(oom.others_total)} of {gib(oom.total)} when it "
            f"failed ({listed})",
            Advice(
                "other_processes",
                f"Other processes held the card ({listed}): stop them (nvidia-smi lists them) "
                "or start from a fresh worker, then retry the same config unchanged.",
            ),
        )
    if oom.this_process is None or oom.free is None:
        return None
    outside = oom.total - oom.free - oom.this_process - oom.others_total
    if not _share(outside, oom.total):
        return None
    return _strong(
        "high",
        basis,
        f"{gib(outside)} of {gib(oom.total)} was in use outside this process and no "
        "process is listed for it (another container or a process this one cannot see)",
        Advice(
            "other_processes",
            f"{gib(outside)} of the card was held by something else: check nvidia-smi "
            "on the host, stop it or move to a fresh worker, then retry unchanged.",
        ),
    )


def _room_left(seen: Seen) -> Finding | None:
    """The message says the card had room: free is a real share of it and many times the
    allocation that failed. Then VRAM was not what ran out; on Windows it is most often the
    host's commit limit (the page file), which CUDA's allocations also draw on. Asked only
    where :func:`_others_in_message` found nothing."""
    oom = seen.oom
    if oom is None or oom.free is None or oom.tried is None or not oom.total:
        return None
    if seen.job_alone is not None or _others_in_message(seen) is not None:
        return None
    if not (_share(oom.free, oom.total) and oom.free >= FREE_ROOM_FACTOR * oom.tried):
        return None
    return _strong(
        "high",
        "PyTorch's own figures show the card held or free outside the job",
        f"{gib(oom.free)} of {gib(oom.total)} was free when an allocation of {gib(oom.tried)} "
        "failed: the card was not full, so it is not the config's memory that ran out",
        Advice(
            "host_ram",
            "The card had room, so the failure came from outside VRAM: on Windows most often "
            "the system's commit limit (enlarge the page file or let Windows manage it, close "
            "memory-hungry programs), else the driver's state (restart the machine or the "
            "worker). Then retry the same config unchanged.",
        ),
    )


def _others_now(seen: Seen) -> Finding | None:
    """The probe, after the crash (or without a log): whatever still holds the card is
    competition."""
    probe = seen.probe
    if probe is None or not probe.gpus or (seen.scan is not None and not seen.scan.crashed):
        return None
    listed = [p for p in probe.processes if p.used_gib]
    held = probe.processes_gib if listed else probe.used_gib
    if not _share(held, probe.total_gib):
        return None
    if listed:
        names = ", ".join(f"pid {p.pid} {p.name} {gib(p.used_gib or 0.0)}" for p in listed)
        reason = f"right now {gib(held)} of {gib(probe.total_gib)} is held by {names}"
    else:
        reason = (
            f"right now {gib(held)} of {gib(probe.total_gib)} of the GPU is in use and "
            "nvidia-smi lists no process for it"
        )
    return _strong(
        "high",
        "nvidia-smi shows the card held by something else now",
        reason,
        Advice(
            "other_processes",
            f"The GPU is not free now ({gib(held)} in use): stop what holds it or start from a "
            "fresh worker before the retry.",
        ),
    )


def _pinned_copy(seen: Seen) -> Finding | None:
    """``CUDA error: out of memory`` raised while copying weights with ``non_blocking=True``
    (or pinning memory): the failed allocation is page-locked host RAM, not VRAM. Likewise a
    traceback cut off inside such a copy to the CPU (:func:`_cut_off_in_cpu_copy`)."""
    scan, process = seen.scan, seen.process
    if scan is None:
        return None
    if scan.has("cuda_error_oom") and scan.host_copy:
        reason = (
            "'CUDA error: out of memory' was raised while copying weights between the GPU and "
            "pinned (page-locked) host memory: that allocation is host RAM, which is scarce "
            "under WSL2 and Windows; it is not the GPU that is full"
        )
    elif _cut_off_in_cpu_copy(scan):
        reason = (
            "the traceback stops inside a non_blocking copy of weights to the CPU (its error "
            "line is not in the log): that copy lands in pinned (page-locked) host memory, which "
            "is scarce under WSL2 and Windows; a copy off the card does not need VRAM"
        )
    else:
        return None
    offloading = process is not None and process.model.layer_offloading is True
    where = (
        " (model.layer_offloading is on: lower layer_offloading_transformer_percent or turn it off)"
        if offloading
        else ""
    )
    return _strong(
        "high" if scan.has("cuda_error_oom") else "medium",
        "the failing traceback copies weights to pinned host memory",
        reason,
        Advice(
            "pinned_memory",
            "Do not add more offloading: it needs more pinned host memory, which is what ran "
            f"out. Use less offloading{where}; under WSL2 give WSL more memory, or run natively.",
        ),
    )


def _cut_off_in_cpu_copy(scan: LogScan) -> bool:
    """The run crashed in a traceback that copies weights to the CPU with ``non_blocking=True``
    and shows no error line and no other out-of-memory sign: what failed is that pinned copy."""
    return (
        scan.crashed
        and scan.host_copy
        and scan.cpu_copy
        and scan.exception is None
        and not scan.has(*GPU_SIGNALS, *HOST_SIGNALS)
    )


def _save_cut_off(seen: Seen) -> Finding | None:
    """A crash while a checkpoint is written, with no GPU out-of-memory sign and no error
    line: the state dict is copied to and serialized in host RAM, so the save ran out of system
    memory (a MemoryError at save is :func:`_host_kill`'s)."""
    scan = seen.scan
    if scan is None or not (
        scan.crashed
        and scan.phase == "save"
        and scan.exception is None
        and not scan.has(*GPU_SIGNALS, *HOST_SIGNALS)
    ):
        return None
    return _strong(
        "medium",
        _HOST_RAM_END,
        "the job died while writing a checkpoint, with no GPU out-of-memory error in the log: "
        "a checkpoint is gathered and serialized in host RAM, so the save ran out of system "
        "memory, not the card (the error line itself is not in the log)",
        Advice(
            "host_ram",
            "Host RAM at save: close other programs, enlarge the swap file or Windows pagefile, "
            "or add RAM; rolling VRAM settings back will not help the save.",
        ),
    )


def _host_ram_end(seen: Seen) -> Finding | None:
    """A run that ends with no error of the trainer's own, where the log shows the host's RAM
    as the limit (a Colab runtime, the allocator's warnings of huge host allocations): it ends
    on a checkpoint save or while the model is loaded (the two peaks of host RAM) and then
    nothing, or on those warnings, or its trainer died with no Python error. The process was
    killed for host RAM; no marker says so."""
    scan = seen.scan
    if scan is None:
        return None
    line = scan.host_pressure_line
    if line is None or scan.has(*GPU_SIGNALS, *HOST_SIGNALS):
        return None
    ended_in = crash_step(scan)
    step = f" at step {ended_in}" if ended_in is not None else ""
    if scan.ends_open and scan.phase == "save":
        what = f"the log ends on a checkpoint save{step} and then nothing"
    elif scan.ends_open and scan.phase == "model_load":
        # Loading a checkpoint goes through host RAM, the other peak beside a save.
        what = "the log ends while the model is loaded and then nothing"
    elif scan.ends_open and scan.phase_line is not None and line >= scan.phase_line:
        what = f"the log ends{step} on the host's own warnings and then nothing"
    elif scan.has("silent_exit"):
        what = "the trainer died with no Python error of its own"
    else:
        return None
    shown = scan.evidence_for("host_pressure")
    sign = f" (line {shown[0].line}: {shown[0].text})" if shown else ""
    return _strong(
        "medium",
        _HOST_RAM_END,
        f"{what}, where the log shows the host's RAM as the limit{sign}: the process was killed "
        "for host RAM (a Colab runtime has 12-13 GB on its free tier), not the card",
        Advice(
            "host_ram",
            "Host RAM, not VRAM: use a runtime with more RAM (Colab's high-RAM shape), load the "
            "model in fp16/bf16 or from safetensors, save less often, or add swap; rolling VRAM "
            "settings back will not help.",
        ),
    )


def _host_kill(seen: Seen) -> Finding | None:
    """Killed from outside Python (SIGKILL, ``Killed``, exit 137, the kernel's OOM killer)
    with no GPU out-of-memory: the host ran out of RAM."""
    scan, process, probe = seen.scan, seen.process, seen.probe
    if scan is None or not scan.has(*HOST_SIGNALS) or scan.has(*GPU_SIGNALS):
        return None
    if scan.has("host_oom_kill"):
        reason = (
            "the trainer was killed from outside Python (SIGKILL / Killed / exit 137) with no GPU "
            "out-of-memory error: on Linux that is the kernel's OOM killer, the host ran out of RAM"
        )
    else:
        reason = (
            "Python raised MemoryError with no GPU out-of-memory error: the host ran out of RAM "
            "(or of address space), not the card"
        )
    heavy = []
    if process is not None:
        if process.model.layer_offloading is True:
            heavy.append("model.layer_offloading")
        if any(
            d.cache_latents is True and d.cache_latents_to_disk is not True
            for d in process.datasets
        ):
            heavy.append("datasets[].cache_latents (in RAM)")
    ram = ""
    if probe is not None and probe.host_total_gib is not None:
        ram = f" This machine has {gib(probe.host_total_gib)} of RAM"
        if probe.host_available_gib is not None:
            ram += f", {gib(probe.host_available_gib)} available now"
        ram += "."
    using = f" This config uses {', '.join(heavy)}." if heavy else ""
    return _strong(
        "high",
        "the log shows the host's own out-of-memory kill or error",
        reason,
        Advice(
            "host_ram",
            "Host RAM, not VRAM: offloading moves weights into RAM and makes this worse, so "
            "lower or turn off layer offloading, cache latents to disk instead of in memory, "
            f"close other programs, or add RAM or swap.{using}{ram}",
        ),
    )


def conservative(process: ProcessView) -> tuple[bool, str]:
    """Whether the config is already small (see ``CONSERVATIVE_*``), and how it is.

    Unknown values (placeholders, a network rank among them) do not count as small.
    """
    train = process.train
    buckets = [size for d in process.datasets for size in d.resolution or ()]
    frames = max((d.num_frames or 0 for d in process.datasets), default=1)
    checks = {
        # A full fine-tune (no network) trains every weight: never the already-small config.
        "a LoRA-type network": process.network_rank is not None,
        "batch 1": train.batch_size == 1
        and all(d.batch_size in (None, 1) for d in process.datasets),
        "gradient checkpointing on": train.gradient_checkpointing is True,
        f"biggest bucket {max(buckets, default=0)}": bool(buckets)
        and max(buckets) <= CONSERVATIVE_MAX_BUCKET,
        counted(frames, "frame"): frames <= CONSERVATIVE_MAX_FRAMES
        and not any(d.auto_frame_count for d in process.datasets),
        _sampling_words(process): _small_sampling(process),
    }
    return all(checks.values()), ", ".join(checks)


def _sampling_words(process: ProcessView) -> str:
    sample = process.sample
    if process.train.disable_sampling is True or sample is None:
        return "sampling off"
    return f"samples {sample.width}x{sample.height}x{sample.num_frames}"


def _small_sampling(process: ProcessView) -> bool:
    if process.train.disable_sampling is True:
        return True
    sections = [s for s in (process.sample, process.first_sample) if s is not None]
    for sample in sections:
        sizes = {"width": sample.width, "height": sample.height, "num_frames": sample.num_frames}
        for override in sample.overrides():
            sizes[override.field] = max(sizes[override.field] or 0, override.value)
        side = max(sizes["width"] or 10**6, sizes["height"] or 10**6)
        if (
            side > CONSERVATIVE_MAX_SAMPLE_SIDE
            or (sizes["num_frames"] or 10**6) > CONSERVATIVE_MAX_FRAMES
        ):
            return False
    return True


def _at_once(scan: LogScan) -> bool:
    """Whether it died before this run completed a training step."""
    return scan.last_step is None or scan.last_step == (scan.first_step or 0)


def _driver_signal_at_once(seen: Seen) -> Finding | None:
    """A driver-level signal (0 bytes free, CUBLAS alloc, CUDA error) at once: with a config
    that is already conservative, the GPU or worker is in a bad state (unless the job alone
    held nearly the whole card: :func:`_job_holds_card`)."""
    scan, process = seen.scan, seen.process
    if scan is None or seen.job_alone is not None:
        return None
    signals = [s for s in scan.signals if s in DRIVER_SIGNALS]
    if not signals or not _at_once(scan) or scan.host_copy:
        return None
    said = " and ".join(_SIGNAL_WORDS[s] for s in signals)
    if process is None:
        return Finding(
            "suspected",
            (
                f"it failed at once with {said}: if the config is already small, suspect the "
                "GPU or the worker rather than the config",
            ),
        )
    small, how = conservative(process)
    if not small:
        return None
    return _strong(
        "medium",
        "a small config failed at once at the driver's level",
        f"a conservative config ({how}) failed at once with {said}",
        Advice(
            "fresh_worker",
            "Stop retrying the same job: the config is already small and the card had nothing "
            "left at once. Restart the worker (a fresh pod or container, or reboot), check that "
            "nvidia-smi shows the card empty, and if it still fails, report it with the driver, "
            "torch and toolkit versions instead of shrinking the config further.",
        ),
    )


_SIGNAL_WORDS: Final[Mapping[Signal, str]] = {
    "zero_free": "'0 bytes free'",
    "cublas_alloc": "CUBLAS_STATUS_ALLOC_FAILED",
    "cuda_error_oom": "'CUDA error: out of memory'",
}


WINDOWS_ACCESS_VIOLATION: Final = frozenset({3221225477, -1073741819})
"""0xC0000005 (as an unsigned and a signed exit status): Windows' access violation. A trainer
that dies with it and no Python error has most often run out of host memory (the page file:
an allocation that failed and was used anyway in native code), the way the kernel's OOM
killer ends one on Linux."""


def _silent_exit(seen: Seen) -> Finding | None:
    """The process ended with no Python error: the log cannot show an out-of-memory (Windows'
    access violation, :data:`WINDOWS_ACCESS_VIOLATION`, is most often the host's memory)."""
    scan = seen.scan
    if scan is None or not scan.has("silent_exit"):
        return None
    code = f" {scan.exit_code}" if scan.exit_code is not None else ""
    if scan.exit_code in WINDOWS_ACCESS_VIOLATION:
        return _suspect(
            f"the process ended with exit{code} (0xC0000005, Windows' access violation) and no "
            "Python error: on Windows that is most often host memory (the page file) running "
            "out in native code",
            Advice(
                "host_ram",
                "Host RAM (the page file) first: let Windows manage the page file or enlarge it, "
                "close other programs, and watch the commit charge in Task Manager while the "
                "step that died runs; then retry before rolling the config back.",
            ),
        )
    return _suspect(
        f"the process ended (exit{code}) with no Python error: the log cannot show an "
        "out-of-memory; it may have been killed or crashed in native code",
        Advice(
            "check_system_log",
            "Look at the system log for a kill or a driver fault (Linux: `dmesg | tail`, "
            "`journalctl -k`; Windows: Event Viewer) and at host RAM while the job runs.",
        ),
    )


def _fragmentation(seen: Seen) -> Finding | None:
    """Reserved-but-unallocated memory that is large: expandable segments, where to put it; a
    crash the allocator's figures call a one-off (:func:`~oom_wizard.rules.oneoff.one_off_oom`)
    is worth one retry of the same config with them, which ``run --auto`` makes."""
    scan, oom = seen.scan, seen.oom
    if scan is None:
        return None
    one_off = one_off_oom(scan)
    if one_off is not None:
        return _advise(
            Advice(
                "expandable_segments",
                f"A one-off, not the config: {one_off}. Retry the same config once with "
                f"{ALLOCATOR_SETTING} where the trainer starts (the shell before `python "
                "run.py`, the AI Toolkit UI server's environment, or <toolkit root>/.env); "
                f"{RETRY_WORDS}.",
            )
        )
    if oom is None or oom.reserved_unallocated is None:
        return None
    wasted = oom.reserved_unallocated
    if wasted < FRAGMENTATION_MIN_GIB and not (oom.tried and wasted >= oom.tried):
        return None
    enough = ""
    if oom.tried:
        reachable = wasted + (oom.free or 0.0)
        enough = (
            " That alone could make room for the failed allocation."
            if reachable >= oom.tried
            else f" It will not cover the {gib(oom.tried)} allocation alone."
        )
    return _advise(
        Advice(
            "expandable_segments",
            f"PyTorch held {gib(wasted)} reserved but unallocated (fragmentation): set "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True where the trainer starts: in the "
            "shell before `python run.py`, in the environment of the AI Toolkit UI server (jobs "
            f"inherit it), or in <toolkit root>/.env.{enough}",
        )
    )


def _worked_before(seen: Seen) -> Finding | None:
    """The user says this exact config worked before: something outside it changed."""
    if not seen.given.worked_before:
        return None
    return _suspect(
        "you say this exact config worked before: something outside the config changed "
        "(a toolkit, torch or driver update, another process, a dirty worker)",
        Advice(
            "pin_version",
            "Suspect an update: go back to the toolkit version that worked (git log / git "
            "checkout in the toolkit folder, or the previous torch) and retry the same config; "
            "if that works, report the regression.",
        ),
    )


ENVIRONMENT_RULES: Final[tuple[EnvironmentRule, ...]] = (
    _own_process_note,
    _outside_note,
    _capped_note,
    _library_fault_advice,
    _card_held_by_job,
    _others_in_message,
    _room_left,
    _others_now,
    _pinned_copy,
    _host_kill,
    _save_cut_off,
    _host_ram_end,
    _data_loading_cut,
    _driver_signal_at_once,
    _silent_exit,
    _fragmentation,
    _worked_before,
)
"""The environment rules, in the order they are asked (their reasons, advice and notes keep
it); the module's docstring names each in this order (a test checks that the two agree)."""


# --- slowdowns -----------------------------------------------------------------------------------


def _card_gib(scan: LogScan | None, probe: ProbeResult | None) -> float | None:
    """The card's size, from the allocator message or the probe."""
    if scan is not None and scan.oom is not None and scan.oom.total:
        return scan.oom.total
    if probe is not None and probe.gpus:
        return probe.gpus[0].total_gib
    return None


def _crawl_from_start(
    scan: LogScan | None, probe: ProbeResult | None, model_kind: ModelKind | None
) -> str | None:
    """A training bar slow from its first steps on: the first-steps memory problem, in words.

    No step ever ran faster than ``SLOW_FROM_START_S`` (an image model), the card is nearly
    full now, and the run just stops with no error: the driver spilled VRAM into system memory
    from the start. It is not a stall after many healthy steps (``intermittent``), however many
    steps the crawl made.
    """
    if scan is None or not scan.ends_open or not scan.training_started or scan.crashed:
        return None
    best = scan.best_rate
    if model_kind != "image" or scan.spill_step is not None or best is None:
        return None
    if best < SLOW_FROM_START_S or probe is None or not probe.gpus:
        return None
    card = probe.gpus[0]
    if card.total_gib <= 0 or card.used_gib < CARD_FULL_SHARE * card.total_gib:
        return None
    return (
        f"in the first steps: the training bar never ran faster than {best:g} s/it while the "
        f"card is {gib(card.used_gib)} of {gib(card.total_gib)} full, with no error: the driver "
        "spilling VRAM into system memory from step 1, not a stall after many steps"
    )


def _slowdown(
    scan: LogScan | None, probe: ProbeResult | None, found: _Moment, *, crawl: bool = False
) -> tuple[tuple[Signal, ...], tuple[Advice, ...]]:
    """The signals, with ``sysmem_spill`` added when a stall sits on a card small enough for
    the driver's fallback to be the likely cause, or the training bar crawled from its first
    steps (``crawl``), and the advice a slowdown calls for."""
    if scan is None:
        return (), ()
    signals = list(scan.signals)
    card = _card_gib(scan, probe)
    stalled_small = scan.has("stall") and card is not None and card < SPILL_CARD_MAX_GIB
    if (stalled_small or crawl) and "sysmem_spill" not in signals:
        signals.append("sysmem_spill")
    if "sysmem_spill" not in signals and "stall" not in signals:
        return tuple(signals), ()
    moment = f" for the '{found.moment}' moment" if found.moment else ""
    advice = [
        Advice(
            "sysmem_fallback",
            "A crawl with no error is an out-of-memory in disguise: the NVIDIA driver moves VRAM "
            "into shared system memory instead of failing. On Windows set NVIDIA Control Panel → "
            "Manage 3D settings → 'CUDA - Sysmem Fallback Policy: Prefer No Sysmem Fallback' (for "
            "the trainer's python.exe, or globally): it then fails fast with a clean CUDA "
            f"out-of-memory error, and the roll-back{moment} below is what makes it fit.",
        )
    ]
    if "stall" in signals:
        advice.append(
            Advice(
                "stalled",
                "The job made no progress at all where the log stops. Check that its process is "
                "still alive (nvidia-smi, Task Manager): busy GPU and no progress is the fallback "
                "above; no process at all means it was killed (look at the system log).",
            )
        )
    ordered = tuple(s for s in SIGNALS if s in signals)
    return ordered, tuple(advice)


# --- the right run ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _LogMatch:
    """Whether the log is from the config given, and the words that say it when it is not."""

    matches: bool | None
    mismatch: tuple[LogMismatch, ...] = ()
    stale: bool = False
    words: str = ""


_ABSENT: Final = object()


def _view_value(process: ProcessView, path: str) -> Any:
    """The value at ``path`` (``train.batch_size``, ``datasets[1].resolution``) in the view."""
    section_name, _, key = path.rpartition(".")
    section: Any
    if section_name.startswith("datasets["):
        index = int(section_name[len("datasets[") : -1])
        if index >= len(process.datasets):
            return _ABSENT
        section = process.datasets[index]
    else:
        section = getattr(process, section_name, None)
    if section is None:
        return _ABSENT
    return getattr(section, key, _ABSENT)


def _same(in_log: Any, in_config: Any) -> bool:
    """Equal as AI Toolkit reads them: a resolution of 512 is [512]; lists and tuples alike."""

    def norm(value: Any) -> Any:
        if isinstance(value, list | tuple):
            return tuple(norm(v) for v in value)
        return value

    left, right = norm(in_log), norm(in_config)
    if isinstance(left, tuple) != isinstance(right, tuple):
        left = left if isinstance(left, tuple) else (left,)
        right = right if isinstance(right, tuple) else (right,)
    return bool(left == right)


def _log_match(
    scan: LogScan | None, process: ProcessView | None, changelog: ChangeLog | None
) -> _LogMatch:
    """Compare the process config the log printed with the config given, and the log's age
    with the config's last change. A log written before that change is from the run before it."""
    if scan is None or process is None:
        return _LogMatch(None)
    mismatch: list[LogMismatch] = []
    for path, in_log in scan.config_dump or ():
        in_config = _view_value(process, path)
        if in_config is _ABSENT or in_config is None:
            continue
        if not _same(in_log, in_config):
            plain = in_config if not isinstance(in_config, tuple) else list(in_config)
            mismatch.append(LogMismatch(process.path_text(path), in_log, plain))
    changed_at = _last_change_time(changelog)
    stale = changed_at is not None and scan.modified is not None and scan.modified < changed_at
    if mismatch:
        differences = ", ".join(
            f"{m.path.rsplit('.', 1)[-1]} was {_plain(m.in_log)} there, {_plain(m.in_config)} now"
            for m in mismatch[:3]
        )
        more = f" (and {len(mismatch) - 3} more)" if len(mismatch) > 3 else ""
        lead = "your last change" if changelog is not None else "the config you gave"
        words = (
            f"This log is from the run before {lead}: {differences}{more}. "
            "Its crash is not the new config's; run the new config to see whether it fits."
        )
        return _LogMatch(False, tuple(mismatch), stale=True, words=words)
    if stale:
        words = (
            "This log was written before your last change to the config: it is from the run "
            "before that change, and its crash is not the new config's."
        )
        return _LogMatch(False, (), stale=True, words=words)
    if scan.config_dump:
        return _LogMatch(True)
    return _LogMatch(None)


def _last_change_time(changelog: ChangeLog | None) -> float | None:
    """When the config last became what it is now: the last run's time, except that a
    ``restore`` puts back the config from before the run it undid, so the change that made
    the config is the one before that run (a log written since is the config's own)."""
    runs = list(changelog.runs) if changelog is not None else []
    while runs and runs[-1].direction == "restore":
        database = runs[-1].database
        undone = database.undoes if database is not None else None
        if undone is None or not 0 <= undone < len(runs) - 1:
            break
        runs = runs[:undone]
    if not runs:
        return None
    try:
        return datetime.fromisoformat(runs[-1].at.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _plain(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_plain(v) for v in value) + "]"
    return str(value)


# --- change log, evidence, verdict --------------------------------------------------------------


def _scale_up_advice(changelog: ChangeLog | None) -> tuple[Advice, ...]:
    """When the last run of the wizard was a scale-up, what it re-added is the likely cause."""
    last = changelog.last_run() if changelog is not None else None
    if changelog is None or last is None or last.direction != "scale_up":
        return ()
    changes = changelog.changes_of_run(len(changelog.runs) - 1)
    if not changes:
        return ()
    presets = load_presets()
    titles: dict[str, str] = {str(step_id): info.title for step_id, info in presets.steps.items()}
    parts = []
    for entry in changes:
        title = titles.get(entry.step or "")
        step = f" ({title})" if title else ""
        parts.append(f"{change(entry.path, entry.before, entry.after)}{step}")
    return (
        Advice(
            "undo_scale_up",
            "The last oom-wizard run was a scale-up that changed "
            + "; ".join(parts)
            + ". That is the likely cause: put it back (the previous config still has it) and "
            "keep the rest.",
        ),
    )


def _evidence(scan: LogScan | None) -> tuple[EvidenceLine, ...]:
    """The most telling lines, one per line number, at most ``MAX_EVIDENCE``, in file order."""
    if scan is None:
        return ()
    rank = {tag: i for i, tag in enumerate(_EVIDENCE_PRIORITY)}
    best: dict[int, EvidenceLine] = {}
    for item in sorted(scan.evidence, key=lambda e: rank.get(e.tag, len(rank))):
        best.setdefault(item.line, item)
    chosen = sorted(best.values(), key=lambda e: rank.get(e.tag, len(rank)))[:MAX_EVIDENCE]
    return tuple(sorted(chosen, key=lambda e: e.line))


def _disagreements(
    given: Answers, log_moment: Moment | None, found: _Moment, env: _Environment, kind: _Kind
) -> tuple[str, ...]:
    out = []
    if given.moment and log_moment and given.moment != log_moment:
        why = "the environment" if env.strong else found.why
        out.append(
            f"You said '{given.moment}', but the log points to '{log_moment}' ({why}); your "
            "answer is used."
        )
    if given.model_kind and kind.kind and given.model_kind != kind.kind:
        out.append(
            f"You said {given.model_kind}, but {kind.source} says {kind.kind}; your answer is used."
        )
    return tuple(out)


def _verdict(
    scan: LogScan | None,
    moment: Moment | None,
    found: _Moment,
    env: _Environment,
    kind: _Kind,
    model_kind: ModelKind | None,
    given: Answers,
    *,
    sure: bool,
) -> str:
    """The finding in one sentence: what happened, when, and what kind of model. A moment the
    log does not settle (low confidence) is named as the likeliest, not sure."""
    what = _what_happened(scan)
    when = f" {found.why}" if found.moment is not None else ""
    if moment is None:
        label = "no crash moment"
    elif given.moment:
        label = f"moment: {moment}, as you said"
    elif sure:
        label = f"moment: {moment}"
    else:
        label = f"likeliest moment: {moment}, not sure"
    if env.strong and moment == "environment":
        label += ", not the config"
    model = kind.label or kind.arch or "the model"
    article = "an" if model_kind == "image" else "a"
    kind_words = f"{model} is {article} {model_kind} model" if model_kind else "model kind unknown"
    return f"{what}{when} ({label}); {kind_words}."


def _what_happened(scan: LogScan | None) -> str:
    if scan is None:
        return "No log was read"
    if scan.has("cache_followon"):
        return (
            "The VAE ran out of GPU memory (the trainer caught it, went on, and failed on the "
            "images it could not cache)"
        )
    if (scan.has("cuda_error_oom") and scan.host_copy) or _cut_off_in_cpu_copy(scan):
        return "CUDA ran out of pinned host memory while copying weights"
    if scan.has("host_oom_kill") and not scan.has(*GPU_SIGNALS):
        return "The trainer was killed when the host ran out of RAM"
    if scan.has("host_memory_error") and not scan.has(*GPU_SIGNALS):
        return "The trainer ran out of host RAM (or the page file)"
    if scan.has("library_fault") and not scan.has(*GPU_SIGNALS):
        return "A CUDA library or the driver failed (not an out-of-memory error)"
    if scan.crashed and scan.data_frame is not None and scan.exception is None:
        return "The job failed in data loading, on the host (its error line is cut off)"
    if scan.crashed and scan.has(*GPU_SIGNALS):
        return "The job ran out of GPU memory"
    if scan.has("silent_exit"):
        return "The trainer exited without a Python error"
    if scan.crashed and scan.exception is not None:
        return f"The job failed with {scan.exception.text.split(':', 1)[0]}"
    if scan.crashed:
        return "The job crashed (the error itself is not in the log)"
    if scan.has("oom_skip"):
        skipped = counted(scan.skip_count, "batch", "batches")
        return f"Training skipped {skipped} for lack of GPU memory and went on"
    if scan.ends_open and scan.spill_step is not None:
        return "The job slowed to a crawl"
    if scan.ends_open:
        return "The log stops"
    return "The log's last run shows no crash"


def _first_change(
    moment: Moment | None, kind: ModelKind | None, advice: Iterable[Advice]
) -> str | None:
    """The first thing to do: a scale-up to undo, the environment's first advice, or the
    moment's first roll-back step."""
    items = list(advice)
    if items and items[0].id in ("undo_scale_up", "library_fault"):
        return items[0].text
    if moment == "environment":
        return items[0].text if items else "Nothing in the config: start from a fresh worker."
    if moment is None:
        return None
    presets = load_presets()
    order = presets.rollback_order(moment, kind or "image")
    if not order:
        return None
    step = presets.step(order[0])
    return f"{step.title}: {step.why.splitlines()[0]}"
