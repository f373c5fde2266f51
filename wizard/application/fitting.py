"""``fit``: will the job fit on the card, and the roll-back that would make it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from oom_wizard.application.choosing import set_arguments
from oom_wizard.application.settling import (
    VALIDATION_STEP,
    JobCard,
    WizardState,
    given,
    host_of,
    job_card,
    memory_calibration,
)
from oom_wizard.formats.change import Change
from oom_wizard.paths import MISSING, format_path, parse_path
from oom_wizard.rules.host import HostMemory
from oom_wizard.rules.limits import card_problem
from oom_wizard.rules.memory import (
    PHASE_MOMENT,
    Band,
    JobMemory,
    Phase,
    Verdict,
    job_memory as memory_of,
    verdict,
)
from oom_wizard.rules.options import OptionFinding, option_findings
from oom_wizard.rules.plan import (
    Plan,
    StepChoice,
    StepChoice as Choice,
    StepProposal,
    build_plan,
    changes_for,
)
from oom_wizard.rules.scaleup import pending_scale_ups
from oom_wizard.rules.solver import (
    MARGIN_SHARE,
    GivenBack,
    fits_card,
    give_back,
    loss_of,
    loss_words,
)
from oom_wizard.vocabulary import Moment, json_schema

JSON_SCHEMA: Final = json_schema("fit", 1)
"""The ``"schema"`` of ``fit --json``."""

#: The room a fix leaves on the card, as a share of it (the roll-back's margin).
FIT_MARGIN: Final = MARGIN_SHARE

#: ``fit``'s and ``apply``'s exit status by verdict, for a launcher to test: 0 fits, 3 tight,
#: 4 won't fit, 5 not estimated (1 is an internal error, 2 a bad input).
VERDICT_STATUS: Final[Mapping[str, int]] = {
    "fits": 0,
    "tight": 3,
    "wont_fit": 4,
    "not_estimated": 5,
}


def card_gib_problem(gib: float) -> str | None:
    """Why a card's memory typed by the user is not one a card has (None: it is), by the one
    set of limits (:func:`oom_wizard.rules.limits.card_problem`)."""

    return card_problem(gib)


def probed_card(state: WizardState) -> JobCard | None:
    """The job's card without an answer (:func:`~oom_wizard.application.settling.job_card`:
    the card AI Toolkit trains on as ``nvidia-smi`` shows it, with its other tenants, else the
    one PyTorch's OOM message names); None when neither says."""
    card = job_card(state.job, state.diagnosis)
    return card if card is not None and card.source in ("nvidia-smi", "oom-message") else None


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
    """What to change so the job fits: the solver's answer (:mod:`oom_wizard.rules.solver`).

    Attributes:
        moment: The plan's moment the steps come from (the log's, else the peak's).
        plan: That plan.
        steps: The steps taken, in the plan's order, each as it is at the rung taken (its
            fields' ``after`` values are the fix's).
        memory: The job's memory with them.
        reaches: Whether every phase then fits the card with the margin (False: ``steps``
            is the closest config, and ``lacks_gib`` says how far it still is).
        lacks_gib: How far the closest config's peak is still over the card (0 when it fits).
    """

    moment: Moment
    plan: Plan
    steps: tuple[StepProposal, ...]
    memory: JobMemory
    reaches: bool
    lacks_gib: float = 0.0
    margin: bool = True
    """The fix leaves :data:`FIT_MARGIN` of the card free (False: it fits with less)."""
    values: Mapping[str, object] = field(default_factory=dict)
    """The values the fix sets beyond its steps' default rungs (field key → value)."""

    def apply_args(self, target: Sequence[str]) -> list[str] | None:
        """The ``apply`` command that saves the fix to the default output name (a web-UI
        job: as a new job), as an argument list, the program name first, with a ``--set``
        for each value beyond a step's default rung; None when the fix does not fit."""

        if not self.reaches or not self.steps:
            return None
        steps = ",".join(step.id for step in self.steps)
        line = ["oom-wizard", "apply", *target, "--moment", self.moment, "--steps", steps]
        return [*line, *set_arguments(self.plan, self.values)]


def step_loss(step: StepProposal) -> str:
    """What a step of a fix, at the rung it is taken to, takes from the user, in words
    (``costs time``...; no preview samples at all where it switches sampling off)."""

    off = any(
        f.default_on and f.path[-2:] == ("train", "disable_sampling") and f.after is True
        for f in step.fields
    )
    if off:
        return "costs every preview sample: the run makes none until sampling is switched on"
    return loss_words(step.id)


def fix_moment(state: WizardState, memory: JobMemory) -> Moment:
    """The moment whose plan holds the fix: the log's (or the user's) when it says when it
    crashed; else a training step's when that phase is over the card too (its plan has every
    lever), else the peak phase's."""

    if state.settled.moment_source != "assumed" and state.moment != "environment":
        return state.moment
    return PHASE_MOMENT[memory.peak_phase]  # type: ignore[return-value]


def fit_fix(state: WizardState, memory: JobMemory, card_gib: float) -> FitFix | None:
    """What to change so the job fits ``card_gib`` (None when every phase fits already).

    The plan of :func:`fix_moment` names the levers AI Toolkit honours for the arch (one
    that it ignores is ``not for this model``, never a candidate); the one solver
    (:func:`oom_wizard.rules.solver.solve`) takes them by what the user loses and stops at the
    least loss that fits with the margin, weighed with the job's calibration. A training
    moment's plan is used when the training step is over the card as well, so that its
    levers (the rank, the optimizer, EMA) are among the candidates.
    """

    if fits_card(memory, card_gib):
        return None
    moment = fix_moment(state, memory)
    training = memory.phases.get("training")
    if (
        state.settled.moment_source == "assumed"
        and moment not in ("early_steps", "intermittent")
        and training is not None
        and not fits_card_band(training, card_gib)
    ):
        moment = "early_steps"
    settled = state.plan
    if (
        settled.moment == moment
        and settled.sizing is not None
        and abs(settled.sizing.card_gib - card_gib) < 1e-9
    ):
        return solved_fix(state, settled, moment, card_gib)  # the plan asked once
    calibration = memory_calibration(state)
    gpus = len(state.job.probe.gpus) if state.job.probe is not None else 1
    plan = build_plan(
        state.document,
        moment,
        state.model_kind,
        changelog=state.changelog,
        diagnosis=state.diagnosis,
        calibration=calibration,
        card_gib=card_gib,
        gpus=max(gpus, 1),
    )
    return solved_fix(state, plan, moment, card_gib)


def solved_fix(state: WizardState, plan: Plan, moment: Moment, card_gib: float) -> FitFix:
    """The plan's own answer to "what to change so it fits" (its ``just_enough`` fix, which
    the one solver sized against ``card_gib``), as a :class:`FitFix`."""

    calibration = memory_calibration(state)
    wanted = set(plan.fix_steps("just_enough")) - {VALIDATION_STEP}
    rungs = plan.fix_rungs.get("just_enough", {})
    taken = tuple(plan.as_fixed(step, "just_enough") for step in plan.steps if step.id in wanted)
    trial = {
        s.id: s.rung_choice(rungs.get(s.id, 0))
        if s.id in wanted
        else Choice(step_id=s.id, enabled=False)
        for s in plan.steps
    }
    memory = memory_of(
        state.document,
        changes_for(plan, trial),
        state.model_kind,
        calibration=calibration,
        calibrated_on=state.document if wanted else None,
        gpus=plan.gpus,
    )
    sizing = plan.sizing
    reaches = sizing.covered if sizing is not None else fits_card(memory, card_gib)
    margin = sizing.margin_kept if sizing is not None else reaches
    lacks = 0.0 if reaches else max(0.0, memory.peak().high - card_gib)
    values = plan.fix_values("just_enough")
    return FitFix(moment, plan, taken, memory, reaches, lacks, margin, values)


def fits_card_band(band: Band, card_gib: float) -> bool:
    """A phase's band within the card with the solver's margin."""

    return band.high <= card_gib and band.mid + MARGIN_SHARE * card_gib <= card_gib


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

    card: JobCard
    memory: JobMemory
    verdict: Verdict | Literal["not_estimated"]
    fix: FitFix | None
    host: HostMemory | None = None
    """The job's host RAM per phase against the machine's (:mod:`oom_wizard.rules.host`)."""
    options: tuple[OptionFinding, ...] = ()
    """The newer options that change memory (:mod:`oom_wizard.rules.options`)."""
    target: tuple[str, ...] = ()
    """What ``apply`` is given to open the same job (the config, or ``--db PATH --job NAME
    --as-new``)."""
    room: Room | None = None
    """When the job fits with room: what it could get back (:func:`room_to_give_back`)."""

    @property
    def apply_args(self) -> list[str] | None:
        """The ``apply`` line of the fix (None: no fix, or it does not fit)."""
        return self.fix.apply_args(self.target) if self.fix is not None else None

    def phase_verdict(self, phase: Phase) -> Verdict | None:
        """The verdict of one phase's band against the card (None: the phase does not
        happen)."""

        band = self.memory.phases.get(phase)
        if band is None:
            return None
        if crashed_here(self.memory, phase, self.card.room_gib):
            return "wont_fit"
        return verdict(band, self.card.room_gib)

    def to_json(self) -> dict[str, object]:
        """DESIGN.md's ``fit --json`` shape (``fix_moment`` and ``fix_fits`` beside ``fix``),
        named by :data:`JSON_SCHEMA`."""
        memory = self.memory
        fix = self.fix
        estimated = memory.not_estimated is None
        tenants = self.card.tenants
        return {
            "schema": JSON_SCHEMA,
            "card_gib": round(self.card.gib, 2),
            "card_source": self.card.source,
            "weighed_against_gib": round(self.card.room_gib, 2),
            "tenants": None
            if tenants is None
            else {
                "processes": [
                    {"pid": p.pid, "name": p.name, "gib": p.used_gib} for p in tenants.tenants
                ],
                "in_use_gib": round(tenants.used_gib, 2),
                "free_gib": round(tenants.free_gib, 2),
                "words": self.card.tenants_words(),
            },
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
            "fix_apply": self.apply_args,
            "fix_lacks_gib": round(fix.lacks_gib, 2) if fix is not None else None,
            "fix_margin": fix.margin if fix is not None else None,
            "fix_peak_gib": fix.memory.peak().rounded() if fix is not None else None,
            "fix_phases": fix.memory.phases_json() if fix is not None else None,
            "host": self.host.to_json() if self.host is not None else None,
            "options": [finding.to_json() for finding in self.options],
            "give_back": self.room.to_json() if self.room is not None else None,
        }


def fit(state: WizardState, card: JobCard, ram_gib: float | None = None) -> FitReport:
    """Will the job fit on ``card``: its phases' bands, the verdict and, when it does not
    fit, the roll-back that would make it; and the host's RAM per phase against ``ram_gib``
    (default: the machine's, :func:`~oom_wizard.application.settling.machine_ram`)."""

    memory, _after = job_memory(state, {})
    host = host_of(state, ram_gib=ram_gib)
    options = option_findings(state.document)
    target = apply_target(state)
    if memory.not_estimated is not None:
        return FitReport(card, memory, "not_estimated", None, host, options, target)
    found = verdict(memory.peak(), card.room_gib)
    if any(crashed_here(memory, phase, card.room_gib) for phase in memory.phases):
        found = "wont_fit"  # it crashed there, on this card or a bigger one: a fact
    fix = fit_fix(state, memory, card.room_gib) if found != "fits" else None
    room = room_to_give_back(state, card.room_gib) if fix is None and found == "fits" else None
    return FitReport(card, memory, found, fix, host, options, target, room)


def crashed_here(memory: JobMemory, phase: Phase, card_gib: float) -> bool:
    """Whether today's config crashed in ``phase`` on a card no smaller than ``card_gib`` (its
    OOM message is the calibration): then that phase does not fit this card, whatever the
    band's low edge says, and is never called "tight". An intermittent crash's phase also ran
    on that card (``also_ran``): "tight" is then what it is."""

    calibration = memory.calibrated_by
    if calibration is None or calibration.phase != phase or calibration.floor_gib is None:
        return False
    if calibration.also_ran:
        return False
    crash_card = calibration.card_gib
    return crash_card is None or card_gib <= crash_card + 0.05


def apply_target(state: WizardState) -> tuple[str, ...]:
    """How ``apply`` names this job: its config, or its web-UI row (saved as a new job)."""

    db = state.job.db_job
    if db is not None:
        return ("--db", str(db.db_path), "--job", db.name, "--as-new")
    return (str(state.source),)


@dataclass(frozen=True)
class SavedVerdict:
    """What ``apply`` says of the config it saves: its predicted peak against the job's card.

    Attributes:
        verdict: ``fits``, ``tight`` or ``wont_fit`` (None: no card known, or no figure).
        card: The card (None: unknown).
        peak: The saved config's peak band (None: not estimated).
        phase: The phase of that peak.
    """

    verdict: Verdict | None
    card: JobCard | None
    peak: Band | None
    phase: Phase | None

    @property
    def status(self) -> int:
        """The exit status (:data:`VERDICT_STATUS`; 0 when nothing is known)."""
        return VERDICT_STATUS[self.verdict] if self.verdict is not None else 0

    def warning(self) -> str | None:
        """The line ``apply`` prints when the saved config is predicted not to fit."""
        if self.verdict in (None, "fits") or self.peak is None or self.card is None:
            return None
        words = "predicted not to fit" if self.verdict == "wont_fit" else "tight"
        return (
            f"warning: {words}: the saved config peaks at {self.peak.low:.1f}–"
            f"{self.peak.high:.1f} GiB ({self.phase}) on the {self.card.gib:.1f} GiB card; "
            "'oom-wizard fit' on it says what else would make it fit"
        )


def saved_verdict(state: WizardState, after: JobMemory) -> SavedVerdict:
    """The verdict of a config ``apply`` saves (``after``: its memory) against the job's card
    (:func:`~oom_wizard.application.settling.job_card`)."""

    card = probed_card(state)
    if card is None or after.not_estimated is not None:
        return SavedVerdict(None, card, None, None)
    peak = after.peak()
    return SavedVerdict(verdict(peak, card.room_gib), card, peak, after.peak_phase)


@dataclass(frozen=True)
class GiveBack:
    """One thing a job that fits with room could get back.

    Attributes:
        id: The step it undoes (a re-add of the change log) or the switch it turns off.
        title: How it is named (``Re-add the biggest resolution``, ``Full-precision
            transformer (quantize off)``).
        loss: What it gives back: ``quality``, ``samples`` or ``time``.
        changes: Its fields.
    """

    id: str
    title: str
    loss: str
    changes: tuple[Change, ...]


@dataclass(frozen=True)
class Room:
    """What a job that fits with room could get back, the most quality first, while it still
    fits the card with the solver's margin (:func:`oom_wizard.rules.solver.give_back`).

    Attributes:
        taken: What it can get back.
        memory: The job's memory with all of it.
        held: The first one it cannot (it would not fit), with the memory it would have.
        command: The command that makes it: ``scale-up`` (one re-add per run, in this order)
            for a config its change log rolled back, else ``set`` with the fields; None when
            nothing is taken or the job is a web-UI row (``set`` takes a config).
        scale_up: ``taken`` are the change log's re-adds (``command`` is run once for each).
    """

    taken: tuple[GiveBack, ...]
    memory: JobMemory
    held: tuple[GiveBack, JobMemory] | None
    command: tuple[str, ...] | None
    scale_up: bool

    def to_json(self) -> dict[str, object]:
        """``fit --json``'s ``give_back``."""
        held = self.held
        return {
            "steps": [
                {
                    "id": item.id,
                    "title": item.title,
                    "gives_back": item.loss,
                    "fields": [
                        {
                            "path": format_path(c.path),
                            "after": None if c.after is MISSING else c.after,
                        }
                        for c in item.changes
                    ],
                }
                for item in self.taken
            ],
            "peak_gib": self.memory.peak().rounded() if self.taken else None,
            "phases": self.memory.phases_json() if self.taken else None,
            "held": None
            if held is None
            else {"id": held[0].id, "title": held[0].title, "peak_gib": held[1].peak().rounded()},
            "command": list(self.command) if self.command is not None else None,
            "runs": len(self.taken) if self.scale_up and self.command is not None else 1,
        }


#: The switches a config may hold that a job with room could turn off, the most quality first:
#: (id, the field in the process, title, what it gives back).
SWITCHES: Final = (
    ("quantize", "model.quantize", "Full-precision transformer (quantize off)", "quality"),
    (
        "quantize_te",
        "model.quantize_te",
        "Full-precision text encoder (quantize_te off)",
        "quality",
    ),
    (
        "sampling",
        "train.disable_sampling",
        "Preview samples back (disable_sampling off)",
        "samples",
    ),
    ("low_vram", "model.low_vram", "Faster loading (low_vram off)", "time"),
)


def _switches(state: WizardState) -> list[GiveBack]:
    """The switches of :data:`SWITCHES` that the config has on."""

    process = state.document.view().primary
    if process is None:
        return []
    model, train = process.model, process.train
    on = {
        "quantize": model.quantize is True,
        "quantize_te": model.quantize_te is True,
        "sampling": train.disable_sampling is True,
        "low_vram": model.low_vram is True,
    }
    te_path = parse_path(process.path_text("model.quantize_te"))
    te_written = state.document.get(te_path) is not MISSING
    found: list[GiveBack] = []
    for switch, relative, title, loss in SWITCHES:
        if not on[switch]:
            continue
        changes = [Change(parse_path(process.path_text(relative)), False, reason=title)]
        if switch == "quantize" and on["quantize_te"] and not te_written:
            # quantize_te follows quantize when absent: keep the text encoder as it is
            changes.append(Change(te_path, True, reason=title))
        found.append(GiveBack(switch, title, loss, tuple(changes)))
    return found


def _merged(changes: Sequence[Change]) -> tuple[Change, ...]:
    """The changes with one per field, the last one winning."""

    by_path: dict[object, Change] = {}
    for change in changes:
        by_path.pop(change.path, None)
        by_path[change.path] = change
    return tuple(by_path.values())


def room_to_give_back(state: WizardState, card_gib: float) -> Room | None:
    """What a job that fits ``card_gib`` with room could get back (None: it has no room, or
    nothing to get back).

    A config that a roll-back saved gets back its change log's re-adds, in the scale-up's
    order, as many as still fit (``scale-up`` makes them one per run, so the walk stops at the
    first that would not); any other config, the switches it holds on that cost quality,
    samples or time (:data:`SWITCHES`), each taken that still fits. Both are weighed by the
    one memory model with the job's calibration, as the change log records a save.
    """

    calibration, calibrated_on = memory_calibration(state), state.document

    def weigh(changes: Sequence[Change]) -> JobMemory:
        return memory_of(
            state.document,
            list(_merged(changes)),
            state.model_kind,
            calibration=calibration,
            calibrated_on=calibrated_on,
            gpus=state.plan.gpus,
        )

    readds = (
        pending_scale_ups(state.document, state.changelog) if state.changelog is not None else ()
    )
    candidates = (
        [GiveBack(s.step, s.title, step_gives(s.step), s.changes) for s in readds]
        if readds
        else _switches(state)
    )
    if not candidates:
        return None
    base = weigh(())
    if base.not_estimated is not None or not fits_card(base, card_gib):
        return None
    by_id = {item.id: item for item in candidates}
    found: GivenBack = give_back(
        weigh, [(item.id, item.changes) for item in candidates], card_gib, in_order=bool(readds)
    )
    taken = tuple(by_id[name] for name in found.steps)
    held = (
        (by_id[found.held], found.held_memory)
        if found.held is not None and found.held_memory is not None
        else None
    )
    return Room(
        taken, found.memory, held, _give_back_command(state, taken, bool(readds)), bool(readds)
    )


def step_gives(step_id: str) -> str:
    """What re-adding a step gives back: what rolling it back lost (``quality``...)."""

    return loss_of(step_id)


def _give_back_command(
    state: WizardState, taken: Sequence[GiveBack], scale_up: bool
) -> tuple[str, ...] | None:
    if not taken:
        return None
    if scale_up:
        write = () if state.job.db_job is not None else ("--yes",)
        return ("oom-wizard", "scale-up", *apply_target(state), *write)
    if state.job.db_job is not None:
        return None
    fields = _merged([c for item in taken for c in item.changes])
    return (
        "oom-wizard",
        "set",
        str(state.source),
        *(f"{format_path(c.path)}={str(c.after).lower()}" for c in fields),
    )
