"""A crash, diagnosed: one rule for ``diagnose``, ``watch`` and ``run``."""

from __future__ import annotations

from dataclasses import dataclass

from oom_wizard.application.choosing import default_choices
from oom_wizard.application.fitting import job_memory
from oom_wizard.application.follow import (
    WatchTarget,
)
from oom_wizard.application.labels import log_claim
from oom_wizard.application.log_alone import diagnose_log_alone
from oom_wizard.application.settling import WizardState, memory_calibration, start
from oom_wizard.errors import WizardError
from oom_wizard.host.probe import probe_gpu, read_host_memory
from oom_wizard.logs.markers import load_log_markers
from oom_wizard.request import JobRequest
from oom_wizard.rules.catalog import load_presets
from oom_wizard.rules.diagnosis import Diagnosis
from oom_wizard.rules.memory import phase_of
from oom_wizard.rules.plan import StepChoice
from oom_wizard.rules.sizing import phases_of_moment
from oom_wizard.spelling import change
from oom_wizard.storage.jobdb import find_db, request_save_now as ask


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


def machine_line() -> str:
    """The GPUs, the processes on them and the host's RAM, in one line (``watch``'s panel)."""
    probe = probe_gpu()
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
