"""``fit``: will the job fit on the card, and the roll-back that would make it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

from oom_wizard.application.settling import VALIDATION_STEP, WizardState, given, memory_calibration
from oom_wizard.rules.accounts import Phase
from oom_wizard.rules.limits import card_problem
from oom_wizard.rules.memory import (
    PHASE_MOMENT,
    JobMemory,
    Verdict,
    job_memory as memory_of,
    verdict,
)
from oom_wizard.rules.plan import (
    Plan,
    StepChoice,
    StepChoice as Choice,
    StepProposal,
    build_plan,
    changes_for,
)
from oom_wizard.vocabulary import Moment, json_schema

JSON_SCHEMA: Final = json_schema("fit", 1)
"""The ``"schema"`` of ``fit --json``."""

CardSource: TypeAlias = Literal["nvidia-smi", "--gpu", "oom-message", "asked"]


@dataclass(frozen=True)
class Card:
    """The card the job is measured against: its memory in GiB and where that comes from."""

    gib: float
    source: CardSource


def card_gib_problem(gib: float) -> str | None:
    """Why a card's memory typed by the user is not one a card has (None: it is), by the one
    set of limits (:func:`oom_wizard.rules.limits.card_problem`)."""

    return card_problem(gib)


def probed_card(state: WizardState) -> Card | None:
    """The first GPU ``nvidia-smi`` showed at the open (the job's ``cuda:0``), else the card
    PyTorch's OOM message in the log names; None when neither says."""
    probe = state.job.probe
    if probe is not None and probe.gpus:
        return Card(probe.gpus[0].total_gib, "nvidia-smi")
    oom = state.diagnosis.oom
    if oom is not None and oom.total:
        return Card(oom.total, "oom-message")
    return None


def job_memory(
    state: WizardState, choices: Mapping[str, StepChoice] | None = None
) -> tuple[JobMemory, JobMemory]:
    """Each phase's band in GiB for today's config and with the choices (None: the plan's
    defaults), calibrated by the job's own figures when it has them."""

    calibration = memory_calibration(state)
    kind = state.model_kind
    gpus = state.plan.gpus
    return (
        memory_of(state.document, [], kind, calibration=calibration, gpus=gpus),
        memory_of(
            state.document,
            changes_for(given(state, choices), choices),
            kind,
            calibration=calibration,
            gpus=gpus,
        ),
    )


@dataclass(frozen=True)
class FitFix:
    """The roll-back steps that bring a job to ``fits``, as the plan offers them.

    Attributes:
        moment: The plan's moment the steps come from (chosen from the peak phase).
        plan: That plan.
        steps: The steps taken, in the plan's order.
        memory: The job's memory with them.
        reaches: Whether the peak's high edge is then within the card.
    """

    moment: Moment
    plan: Plan
    steps: tuple[StepProposal, ...]
    memory: JobMemory
    reaches: bool

    def choices(self) -> dict[str, StepChoice]:
        """The steps as choices, each with its default field toggles."""

        return {step.id: StepChoice(step_id=step.id, enabled=True) for step in self.steps}


def fit_fix(state: WizardState, memory: JobMemory, card_gib: float) -> FitFix | None:
    """The plan's default fix against the card (:mod:`oom_wizard.rules.sizing`: what costs no
    quality, then the fewest rungs that fit with a margin), in the plan's order; None when
    the peak's high edge is within the card already.

    The plan is the one for the log's moment when the log (or the user) says when it
    crashed, else for the moment of the peak phase (a training peak: ``early_steps``, a
    sample: ``sampling``, loading or the first sample: ``loading``), sized against the card
    with the job's calibration; ``apply --moment M --steps ...`` takes the steps as they are.
    """

    if memory.peak().high <= card_gib:
        return None
    moment: Moment
    if state.settled.moment_source != "assumed" and state.moment != "environment":
        moment = state.moment
    else:
        moment = PHASE_MOMENT[memory.peak_phase]  # type: ignore[assignment]
    calibration = memory_calibration(state)
    plan = build_plan(
        state.document,
        moment,
        state.model_kind,
        changelog=state.changelog,
        diagnosis=state.diagnosis,
        calibration=calibration,
        card_gib=card_gib,
        gpus=len(state.job.probe.gpus) if state.job.probe is not None else 1,
    )
    wanted = set(plan.fix_steps(plan.default_fix))
    taken = [step for step in plan.steps if step.id in wanted and step.id != VALIDATION_STEP]
    trial = {s.id: Choice(step_id=s.id, enabled=s.id in wanted) for s in plan.steps}
    current = memory_of(
        state.document,
        changes_for(plan, trial),
        state.model_kind,
        calibration=calibration,
        calibrated_on=state.document,
        gpus=plan.gpus,
    )
    return FitFix(moment, plan, tuple(taken), current, current.peak().high <= card_gib)


@dataclass(frozen=True)
class FitReport:
    """``oom-wizard fit``: the job's phases against the card, the verdict and the fix.

    Attributes:
        card: The card measured against.
        memory: The job's memory (calibrated when its runs say something).
        verdict: ``fits``, ``tight`` or ``wont_fit`` of the peak phase; ``not_estimated``
            for a job the model does not cover (``memory.not_estimated`` says why).
        fix: The roll-back steps that would make it fit (None when it fits).
    """

    card: Card
    memory: JobMemory
    verdict: Verdict | Literal["not_estimated"]
    fix: FitFix | None

    def phase_verdict(self, phase: Phase) -> Verdict | None:
        """The verdict of one phase's band against the card (None: the phase does not
        happen)."""

        band = self.memory.phases.get(phase)
        return verdict(band, self.card.gib) if band is not None else None

    def to_json(self) -> dict[str, object]:
        """DESIGN.md's ``fit --json`` shape (``fix_moment`` and ``fix_fits`` beside ``fix``),
        named by :data:`JSON_SCHEMA`."""
        memory = self.memory
        fix = self.fix
        estimated = memory.not_estimated is None
        return {
            "schema": JSON_SCHEMA,
            "card_gib": round(self.card.gib, 2),
            "card_source": self.card.source,
            "phases": memory.phases_json(),
            "peak_phase": memory.peak_phase if estimated else None,
            "verdict": self.verdict,
            "not_estimated": memory.not_estimated,
            "certainty": memory.certainty,
            "parts_gib": memory.parts[memory.peak_phase].as_dict() if estimated else None,
            "calibrated_by": memory.calibrated_by.as_json() if memory.calibrated_by else None,
            "calibration_scale": round(memory.scale, 3),
            "known": memory.known,
            "notes": list(memory.notes),
            "fix": [step.to_json() for step in fix.steps] if fix is not None else [],
            "fix_moment": fix.moment if fix is not None else None,
            "fix_fits": fix.reaches if fix is not None else None,
            "fix_peak_gib": fix.memory.peak().rounded() if fix is not None else None,
            "fix_phases": fix.memory.phases_json() if fix is not None else None,
        }


def fit(state: WizardState, card: Card) -> FitReport:
    """Will the job fit on ``card``: its phases' bands, the verdict and, when it does not
    fit, the roll-back that would make it."""

    memory, _after = job_memory(state, {})
    if memory.not_estimated is not None:
        return FitReport(card, memory, "not_estimated", None)
    found = verdict(memory.peak(), card.gib)
    fix = fit_fix(state, memory, card.gib) if found != "fits" else None
    return FitReport(card, memory, found, fix)
