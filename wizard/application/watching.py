"""A crash, diagnosed: one rule for ``diagnose``, ``watch`` and ``run``; and what ``watch``
reads of the card while it follows a job, kept in the job's change log as ``run`` keeps its
readings (:func:`keep_readings`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from types import MappingProxyType

from oom_wizard.application.autopilot import DbJobRef, Where, estimate_before_run, keep_attempt
from oom_wizard.application.choosing import default_choices
from oom_wizard.application.fitting import job_memory
from oom_wizard.application.follow import (
    WatchTarget,
)
from oom_wizard.application.labels import log_claim
from oom_wizard.application.log_alone import diagnose_log_alone
from oom_wizard.application.saving import memory_json
from oom_wizard.application.settling import WizardState, memory_calibration, start
from oom_wizard.errors import WizardError
from oom_wizard.host.probe import ProbeResult, probe_gpu, read_host_memory
from oom_wizard.logs.markers import load_log_markers
from oom_wizard.logs.tail import LiveStatus
from oom_wizard.request import JobRequest
from oom_wizard.rules.catalog import load_presets
from oom_wizard.rules.diagnosis import Diagnosis
from oom_wizard.rules.limits import probe_problem
from oom_wizard.rules.memory import CRASH_PHASE, PHASE_WORDS, PHASES, Phase, phase_of
from oom_wizard.rules.plan import StepChoice
from oom_wizard.rules.sizing import phases_of_moment
from oom_wizard.spelling import change
from oom_wizard.storage.changelog import AttemptRecord, changelog_path_for, now_iso, record_path
from oom_wizard.storage.jobdb import find_db, job_source, request_save_now as ask
from oom_wizard.storage.jobdir import load_config


def first_step(state: WizardState) -> str | None:
    """The first roll-back step the default set switches on (:func:`default_choices`), with
    its fields.

    Advice that comes first (an environment problem, a scale-up to undo) stays first; so does
    the diagnosis's own first change when nothing says when it crashed.
    """
    diagnosis = state.diagnosis
    moment = diagnosis.moment
    if moment is None or moment == "environment" or _advice_first(diagnosis):
        first: str | None = diagnosis.first_change
        return first
    defaults = default_choices(state)  # the one default set (the default fix's steps)
    taken = [s for s in state.rollback_steps() if defaults[s.id].enabled and s.fields]
    # The first step offered lowers what crashed: the first of the default set whose
    # change alone lowers the crashed phase, else the first of the set.
    step = next((s for s in taken if lowers_the_crash(state, s.id)), taken[0] if taken else None)
    if step is None:
        return (
            state.plan.exhausted_advice
            or "Every default step of this roll-back is already in the config."
        )

    fixed = state.plan.as_fixed(step)  # at the rung the default fix takes it to
    changes = [change(f.label, f.before, f.after) for f in fixed.fields if f.default_on]
    return f"{step.title}: {', '.join(changes)}" if changes else step.title


def lowers_the_crash(state: WizardState, step_id: str) -> bool:
    """Whether one step alone, with its default toggles, lowers the phase the crash ran into
    (the crash's own phase when its figures say it, else the log's finer phase, else the
    moment's), by the one memory model with the job's calibration."""

    calibration = memory_calibration(state)
    finer = phase_of(state.diagnosis) if state.diagnosis.moment == state.moment else None
    if calibration is not None and calibration.at_least_gib is not None:
        phases: frozenset[str] = frozenset({calibration.phase})
    elif finer is not None and finer in phases_of_moment(state.moment):
        phases = frozenset({finer})  # the log's finer phase: the load, not its first sample
    else:
        phases = phases_of_moment(state.moment)
    today, after = job_memory(state, {step_id: StepChoice(step_id=step_id, enabled=True)})
    for phase in phases:
        before, now = today.phases.get(phase), after.phases.get(phase)  # type: ignore[call-overload]
        if before is not None and (now is None or now.high < before.high - 1e-6):
            return True
    return False


def _advice_first(diagnosis: Diagnosis) -> bool:
    return bool(diagnosis.advice) and diagnosis.advice[0].id == "undo_scale_up"


@dataclass(frozen=True)
class CrashReport:
    """A followed run's crash, diagnosed.

    Attributes:
        verdict: The diagnosis's verdict.
        moment: The crash moment (None: not an out-of-memory crash, as far as the log says).
        first_change: What to change first (:func:`first_step`).
        state: The wizard's state on the crash, settled (None for a log without its config:
            there is nothing to open the wizard on).
    """

    verdict: str
    moment: str | None
    first_change: str | None
    state: WizardState | None = None
    certainty: str = ""
    """How sure the verdict is, and why, in one line (the moment's claim when it is not sure:
    :func:`~oom_wizard.application.labels.log_claim`)."""


def diagnose_crash(target: WatchTarget) -> CrashReport:
    """Open the followed job on its log's last run and settle it, as the wizard would.

    The GPU is not probed (the job that held it is gone; the live screen polls it itself).

    Raises:
        WizardError: the config, the database job or the log cannot be read.
    """
    if not target.can_open_wizard:
        alone = diagnose_log_alone(target.log, probe=False)
        return CrashReport(
            alone.verdict, alone.moment, alone.first_change, certainty=_how_sure(alone)
        )
    request = JobRequest(
        target=target.config, log=target.log, db=target.db, job=target.job, probe=False
    )
    state = start(request)
    diagnosis = state.diagnosis
    return CrashReport(
        diagnosis.verdict, diagnosis.moment, first_step(state), state, _how_sure(diagnosis)
    )


def _how_sure(diagnosis: Diagnosis) -> str:
    """The line under a crash's verdict: the moment's claim when the log does not settle it,
    else how sure the verdict is and why."""

    claim = log_claim(diagnosis)
    return diagnosis.certainty if claim.sure or diagnosis.moment is None else claim.headline


def warm_up() -> None:
    """Read what the first diagnosis reads first: the presets, and the log markers compiled.

    ``watch`` calls it in a thread while it follows the job, so that the crash, when it comes,
    is diagnosed without that wait. Both are read once per process.
    """

    load_presets()
    load_log_markers()


def offers_save_now(target: WatchTarget, *, troubled: bool) -> bool:
    """Whether ``watch`` offers to ask a web-UI job for a checkpoint now: the job is in the
    UI's database and the log showed trouble (a spill into system memory, a stall, skipped
    OOM batches), so that a retry can resume from a checkpoint saved just before a crash."""
    return target.db is not None and target.job is not None and troubled


def save_now_question(target: WatchTarget) -> str:
    """What ``watch`` asks before it sets ``save_now`` on the job's row."""
    return (
        f"Ask job '{target.job}' to save a checkpoint at its next step? oom-wizard sets only "
        "save_now on its row in AI Toolkit's jobs database, as the UI's Save button does."
    )


def request_save_now(target: WatchTarget) -> str:
    """Set ``save_now`` on the web-UI job's row (only when it runs); the line to show.

    Raises:
        JobDatabaseError: not a running job of the database; nothing written.
    """

    if target.db is None or target.job is None:
        raise WizardError("only a job of AI Toolkit's jobs database can be asked to save now")

    return ask(find_db(target.db), target.job)


@dataclass(frozen=True)
class MachineLook:
    """One look at the machine: the line ``watch``'s panel shows, the reading it came from
    (None: no ``nvidia-smi``), and when it was taken (ISO-8601)."""

    line: str
    probe: ProbeResult | None
    at: str


def look_at_machine() -> MachineLook:
    """Ask ``nvidia-smi`` and ``/proc/meminfo`` once (``watch`` does it in a thread)."""
    probe = probe_gpu()
    return MachineLook(machine_line(probe), probe, now_iso())


def machine_line(probe: ProbeResult | None) -> str:
    """The GPUs, the processes on them (``probe``: one reading of ``nvidia-smi``, None where
    there is none) and the host's RAM, in one line (``watch``'s panel)."""
    parts: list[str] = []
    if probe is None:
        parts.append("GPU: nvidia-smi is not here")
    else:
        parts += [
            f"GPU {g.index} {g.name}: {g.used_gib:.1f}/{g.total_gib:.1f} GiB" for g in probe.gpus
        ]
        parts += [
            f"pid {p.pid} {p.name}" + (f" {p.used_gib:.1f} GiB" if p.used_gib else "")
            for p in probe.processes
        ]
    total, free = read_host_memory()
    if total is not None and free is not None:
        parts.append(f"host RAM {total - free:.1f}/{total:.1f} GiB used")
    return " · ".join(parts)


@dataclass(frozen=True)
class Readings:
    """What ``nvidia-smi`` showed while ``watch`` followed a job, by the phase its log was in
    at each reading: what ``watch`` keeps in the job's change log (:func:`keep_readings`).

    A reading is what is in use on a card (as ``run`` reads it when ``nvidia-smi`` does not
    list the trainer's own processes): a point of the phase the log is in, and below that
    phase's true peak by whatever the readings, a few seconds apart, missed.

    Attributes:
        peaks: Per card (its index), per phase, the highest reading in GiB.
        cards: Per card, its memory in GiB.
        through: The phases the run went through while it was watched: the log moved on from
            them, or (the training step) its step counter moved while the log was in it.
        phase: The phase the log is in now (None: none yet, or a stretch that is no memory
            phase: a save).
        first_at: When the first reading was taken (ISO-8601).
        last_at: When the last one was.
        steps_from: The training step the log showed when it entered the training phase.
    """

    peaks: Mapping[int, Mapping[Phase, float]] = field(default_factory=lambda: MappingProxyType({}))
    cards: Mapping[int, float] = field(default_factory=lambda: MappingProxyType({}))
    through: frozenset[Phase] = frozenset()
    phase: Phase | None = None
    first_at: str | None = None
    last_at: str | None = None
    steps_from: int | None = None

    def saw(self, status: LiveStatus) -> Readings:
        """These readings after one poll of the log (its phase and step, as ``watch`` shows
        them)."""
        now = CRASH_PHASE.get(status.phase)
        if now is None:
            return self if self.phase is None else replace(self, phase=None)
        through = self.through
        if self.phase is not None and self.phase != now:
            through |= {self.phase}
        steps_from = self.steps_from
        if now == "training":
            if steps_from is None:
                steps_from = status.step if status.step is not None else 0
            elif status.step is not None and status.step > steps_from:
                through |= {"training"}
        return replace(self, through=through, phase=now, steps_from=steps_from)

    def read(self, look: MachineLook) -> Readings:
        """These readings with one more look at the cards, while the log is in :attr:`phase`
        (nothing is kept outside a phase, nor from a reading no card could give:
        :func:`~oom_wizard.rules.limits.probe_problem`)."""
        probe, at = look.probe, look.at
        if probe is None or self.phase is None or probe_problem(probe) is not None:
            return self
        peaks = {index: dict(phases) for index, phases in self.peaks.items()}
        cards = dict(self.cards)
        for gpu in probe.gpus:
            phases = peaks.setdefault(gpu.index, {})
            phases[self.phase] = max(phases.get(self.phase, 0.0), gpu.used_gib)
            cards[gpu.index] = gpu.total_gib
        return replace(
            self,
            peaks=MappingProxyType({i: MappingProxyType(p) for i, p in peaks.items()}),
            cards=MappingProxyType(cards),
            first_at=self.first_at or at,
            last_at=at,
        )

    @property
    def taken(self) -> bool:
        """Whether any reading was kept."""
        return bool(self.peaks)


@dataclass(frozen=True)
class WatchedPeak:
    """The readings of the card the job trains on, as the change log keeps them.

    Attributes:
        card: The card's index.
        card_gib: Its memory.
        phases: Per phase, the highest reading, in the order of the phases.
        point: The phase the run's measured peak is a point of: the highest reading of the
            phases it went through (None: it went through none while watched).
    """

    card: int
    card_gib: float | None
    phases: Mapping[Phase, float]
    point: Phase | None

    def words(self) -> str:
        """``17.8 GiB in the training step, 9.1 GiB in the loading``: the point first."""
        order = sorted(self.phases, key=lambda p: (p != self.point, PHASES.index(p)))
        return ", ".join(f"{self.phases[p]:.1f} GiB in the {PHASE_WORDS[p]}" for p in order)


def watched_peak(readings: Readings, status: LiveStatus | None, card: int) -> WatchedPeak | None:
    """The readings of card ``card`` (the card AI Toolkit trains the job on; when none was
    read, the busiest), and the phase of the measured peak; None when nothing was read.

    A run that finished went through the phase it ended in; a crashed one did not, even
    where steps of it ran before (its readings there are below what that phase needed:
    PyTorch's message is that phase's figure), nor did one still in it when ``watch`` left,
    unless it is the training step and steps went by while it was read.
    """
    if not readings.taken:
        return None
    if card not in readings.peaks:
        card = max(readings.peaks, key=lambda i: max(readings.peaks[i].values()))
    phases = readings.peaks[card]
    through = set(readings.through)
    finished = status is not None and status.ended and not (status.crashed or status.stopped)
    if finished and readings.phase is not None:
        through.add(readings.phase)
    if status is not None and status.crashed:  # its steps before the crash needed less
        through.discard(CRASH_PHASE.get(status.phase, "training"))
    gone = [p for p in PHASES if p in phases and p in through]
    point: Phase | None = None
    for phase in gone:  # the highest; on a tie, the earlier phase (its memory stayed reserved)
        if point is None or phases[phase] > phases[point]:
            point = phase
    ordered = MappingProxyType({p: round(phases[p], 2) for p in PHASES if p in phases})
    return WatchedPeak(card, readings.cards.get(card), ordered, point)


def _outcome(status: LiveStatus | None) -> str:
    """How the watched run stood when ``watch`` left: as ``run`` names an ending, or
    ``running`` (it was still going)."""
    if status is None:
        return "running"
    if status.crashed:
        return "crashed"
    if status.stopped:
        return "stopped"
    if status.ended:
        return "finished"
    return "running"


def _where(target: WatchTarget) -> Where | None:
    if target.db is not None and target.job is not None:
        return DbJobRef(target.db, target.job)
    return target.config


def _trained_card(target: WatchTarget) -> int:
    """The index of the card AI Toolkit trains a config file's job on (``cuda:0`` when the
    config names none, or for a web-UI job: the readings' busiest card stands in)."""
    if target.config is None:
        return -1
    try:
        processes = load_config(target.config).view().processes
    except (WizardError, OSError):
        return -1
    return processes[0].gpu_index if processes else 0


def keep_readings(target: WatchTarget, readings: Readings, status: LiveStatus | None) -> str | None:
    """Keep what ``watch`` read of the card in the change log of the job's config, when
    oom-wizard saved that config (the attempt record and the writer ``run`` uses: its peak is
    a point of the lineage's one calibration, which ``fit`` and ``plan`` of the job and of
    the configs saved from it use); the line that says what became of the readings (None:
    nothing was read).

    A config oom-wizard did not save has no change log, and ``watch`` makes none (the change
    log is a save's record): the line says the readings are not kept.
    """
    peak = watched_peak(readings, status, _trained_card(target))
    if peak is None:
        return None
    where = _where(target)
    read = f"nvidia-smi read {peak.words()}"
    if where is None:
        return f"{read}; not kept: there is no config beside this log to keep them for."
    estimate = estimate_before_run(where)
    point = peak.phases[peak.point] if peak.point is not None else None
    record = AttemptRecord(
        at=readings.first_at or now_iso(),
        config=_recorded_config(where),
        outcome=_outcome(status),
        step=status.step if status is not None else None,
        phase=status.phase if status is not None else None,
        duration_s=_seconds(readings.first_at, readings.last_at),
        log=str(target.log),
        peak_gib=point,
        card_gib=peak.card_gib,
        estimate=memory_json(estimate) if estimate is not None else None,
        peak_phase=peak.point,
        watched=True,
        peaks_gib=dict(peak.phases),
    )
    try:
        kept = keep_attempt(where, record)
    except OSError as exc:  # the session went well: its end is no error
        return f"{read}; not kept: the change log could not be written ({exc.strerror or exc})."
    if kept is None:
        return (
            f"{read}; not kept: {where} has no change log of oom-wizard's (only a config "
            "oom-wizard saved has one; 'oom-wizard run' keeps its readings with the next fix "
            "it saves)."
        )
    if peak.point is None:
        return (
            f"{read}; kept in {kept}, but not as a measured peak: the run went through no "
            "phase while it was watched."
        )
    day = record.at[:10]
    return (
        f"{read}; kept in {kept}: fit and plan of this job, and of the configs saved from "
        f"it on this card, are weighed by {point:.1f} GiB measured on your card on {day}."
    )


def _recorded_config(where: Where) -> str:
    """The config as the change log records the attempt's: a file relative to the change
    log's folder, a web-UI job by its pseudo path (the name its documents carry)."""
    if isinstance(where, DbJobRef):
        return str(job_source(where.db, where.name))
    return record_path(where, changelog_path_for(where))


def _seconds(first: str | None, last: str | None) -> float:
    """Seconds between two readings' times (0: fewer than two)."""
    if first is None or last is None:
        return 0.0
    span = datetime.fromisoformat(last) - datetime.fromisoformat(first)
    return max(0.0, span.total_seconds())
