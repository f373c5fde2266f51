"""Choosing: the default set of steps, the user's choices per step, the fixes and what
they weigh, and the edits they make in memory.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from oom_wizard.application.labels import arch_of
from oom_wizard.application.settling import (
    VALIDATION_STEP,
    Dropped,
    WizardState,
    card_of,
    given,
    memory_calibration,
    settle,
)
from oom_wizard.errors import EditError, WizardError
from oom_wizard.formats.document import JobDocument, same_value
from oom_wizard.formats.fields import parse_value
from oom_wizard.paths import MISSING, format_path, parse_path
from oom_wizard.rules.catalog import load_presets
from oom_wizard.rules.diagnosis import Answers
from oom_wizard.rules.estimate import PEAK_WORDS
from oom_wizard.rules.memory import MOMENT_PHASE, PHASE_WORDS
from oom_wizard.rules.plan import (
    FieldProposal,
    MemoryEstimate,
    Plan,
    StepChoice as StepChoice,  # the choice a caller makes
    StepProposal,
    changes_for,
    estimate as plan_estimate,
    validation_choice as plan_validation_choice,
)
from oom_wizard.rules.sizing import (
    FIX_NAMES,
    MARGIN_SHARE,
    FixName,
    MemoryPeak,
    Weigher,
    fix_label,
    peak_of,
)
from oom_wizard.rules.values import ValueCheck, validate_value
from oom_wizard.spelling import counted, editable, field_changes, gib, value as spelling_value
from oom_wizard.storage.changes import Change, Prepared, prepare
from oom_wizard.storage.resume import resume_point

if TYPE_CHECKING:
    from oom_wizard.formats.view import ProcessView
    from oom_wizard.paths import FieldPath
    from oom_wizard.storage.resume import ResumePoint


def choose(state: WizardState, choice: StepChoice) -> WizardState:
    """The state with one step's choice recorded (replacing an earlier one); what its
    screen said was dropped by new answers is said."""
    choices = dict(state.choices)
    choices[choice.step_id] = choice
    dropped = tuple(item for item in state.dropped if item.shown_on != choice.step_id)
    return replace(state, choices=MappingProxyType(choices), dropped=dropped)


def default_choices(state: WizardState, fix: FixName | None = None) -> dict[str, StepChoice]:
    """The one rule of the default set, for the command line, the app, ``run`` and ``fit``:
    every step of ``fix`` (None: the plan's default fix, "just enough" where the crash's own
    figures size it, else "safe"; see :mod:`oom_wizard.rules.sizing`) on with its default toggles,
    at the rung the fix takes it to (its values), every other step off."""
    return state.plan.default_choices(fix)


def default_choice(
    state: WizardState, step: StepProposal, fix: FixName | None = None
) -> StepChoice:
    """What accepting one step's defaults means (:func:`default_choices`)."""

    return default_choices(state, fix).get(step.id) or StepChoice(step.id, enabled=False)


def fix_names(state: WizardState) -> tuple[FixName, ...]:
    """The fixes the plan offers, the default first ("safe" alone without a card to size
    "just enough" against); one only when both are the same set of steps."""

    fixes = state.plan.fixes
    default = state.plan.default_fix
    offered = [name for name in FIX_NAMES if name in fixes]
    ordered = sorted(offered, key=lambda name: name != default)
    if len(ordered) == 2:
        first, second = ordered
        same_values = state.plan.fix_values(first) == state.plan.fix_values(second)
        if set(fixes[first]) == set(fixes[second]) and same_values:
            return (first,)
    return tuple(ordered)


def fix_name_words(state: WizardState, fix: FixName) -> str:
    """How a fix is named where the user reads it (:func:`~oom_wizard.rules.sizing.fix_label`
    with the plan's sizing): ``least loss``, ``more margin``, ``usual changes``..."""

    return fix_label(fix, state.plan.sizing)


def fix_words(state: WizardState, fix: FixName, *, short: bool = False) -> str:
    """One line about a fix: its name, its steps and, where it was sized, its predicted peak
    against the card (``least loss: 1 step (gradient_checkpointing), training peak ≈
    12.3 of 23.5 GiB``); ``short`` leaves the step ids out (the app lists them apart)."""
    plan = state.plan
    steps = [step for step in plan.fix_steps(fix) if step != VALIDATION_STEP]
    text = f"{fix_label(fix, plan.sizing)}: {counted(len(steps), 'step')}"
    if steps and not short:
        beyond = set_arguments(plan, plan.fix_values(fix))[1::2]  # past a default rung
        text += f" ({', '.join(steps)}{'; ' if beyond else ''}{', '.join(beyond)})"
    sizing = plan.sizing
    if sizing is not None and fix in sizing.savings:
        band = sizing.predicted(fix)
        peak = f"{sizing.phase} peak"
        text += f", {peak} ≈ {band.mid:.1f} of {sizing.card_gib:.1f} GiB"
        if band.high > sizing.card_gib:
            text += " (predicted not to fit)"
        elif fix == "just_enough" and not sizing.covered:
            text += (
                " (not enough room left)"
                if short
                else " (no set of rungs is predicted to leave the margin)"
            )
    if fix == plan.default_fix:
        text += " (default)"
    return text


def chosen_fix(state: WizardState, fix: FixName) -> tuple[str, ...]:
    """The steps a fix saves as the user left the walk (:func:`effective_choices`: a step the
    user skipped or switched off stays off, one switched on stays on), in the plan's order."""

    choices = effective_choices(state, fix=fix)
    return tuple(
        step.id
        for step in state.plan.steps
        if step.id != VALIDATION_STEP and step.id in choices and choices[step.id].enabled
    )


def chosen_fix_words(state: WizardState, fix: FixName) -> str:
    """The review's line for a fix as the user's choices leave it: its name, how many steps it
    saves and the saved config's peak against the card (:func:`memory_peak` of exactly those
    choices), "predicted not to fit" when it is above the card."""

    steps = chosen_fix(state, fix)
    text = f"{fix_label(fix, state.plan.sizing)}: {counted(len(steps), 'step')}"
    peak = memory_peak(state, effective_choices(state, fix=fix))
    if peak is not None and peak.not_estimated is None:
        text += f", peak ≈ {peak.words()}"
        if peak.card_gib and peak.band.high > peak.card_gib:
            text += " (predicted not to fit)"
    if fix == state.plan.default_fix:
        text += " (default)"
    return text


def chosen_steps_words(state: WizardState, fix: FixName) -> str:
    """The steps a fix saves as the user left the walk, by title (``no step``)."""
    titles = {step.id: step.title for step in state.plan.steps}
    steps = [titles[step] for step in chosen_fix(state, fix)]
    return ", ".join(steps) if steps else "no step"


def chosen_fix_names(state: WizardState) -> tuple[FixName, ...]:
    """The fixes the review offers: :func:`fix_names`, one only when, as the user's choices
    leave them, both save the same steps."""

    names = fix_names(state)
    if len(names) == 2 and set(chosen_fix(state, names[0])) == set(chosen_fix(state, names[1])):
        return names[:1]
    return names


def fix_steps_words(state: WizardState, fix: FixName) -> str:
    """The steps of a fix by title, in the plan's order (``Gradient checkpointing on``)."""
    titles = {step.id: step.title for step in state.plan.steps}
    steps = [titles[step] for step in state.plan.fix_steps(fix) if step != VALIDATION_STEP]
    return ", ".join(steps) if steps else "no step"


def _unsized_because(plan: Plan) -> str:
    """Why the plan offers the safe set alone, without weighing a smaller fix."""
    if plan.estimate is not None and plan.estimate.not_estimated is not None:
        return f"no GiB to weigh a smaller one against; {plan.estimate.not_estimated}"
    if plan.exhausted:
        return "nothing left on the ladder lowers the peak it ran into"
    return (
        "no card size is known to weigh a smaller one against: no OOM message with the card's "
        "capacity, no nvidia-smi"
    )


def fix_summary(state: WizardState) -> tuple[str, ...]:
    """The fixes in a few lines, for ``plan``, ``apply`` and the app: how they were sized
    (the deficit, where it comes from, the margin), then one line per fix, the default first."""

    plan = state.plan
    if not plan.fixes:
        return ()
    lines: list[str] = []
    sizing = plan.sizing
    if sizing is None:
        lines.append(f"Fixes: only the moment's usual changes ({_unsized_because(plan)}).")
    else:
        phase = PHASE_WORDS[sizing.phase]
        if sizing.calibrated:
            need = f"the {phase}, where it crashed, needed more than the card ({sizing.source})"
        elif sizing.deficit_gib >= 0:
            need = f"the {phase} is {sizing.deficit_gib:.2f} GiB beyond the card ({sizing.source})"
        else:
            need = f"the {phase} is within the card ({sizing.source})"
        card, origin = card_of(state.job, state.diagnosis)
        named = f" (from {origin})" if origin and card == sizing.card_gib else ""
        lines.append(
            f"Fixes sized against the {sizing.card_gib:.1f} GiB card{named}: {need}; with a fix, "
            f"every phase must fit with {sizing.margin_gib:.2f} GiB ({MARGIN_SHARE:.0%} of "
            "the card) to spare."
        )
        if not sizing.calibrated:
            lines.append(
                "No OOM message of this crash sizes the deficit, so the moment's usual "
                "changes stay the default; the least loss rests on the estimate "
                "alone."
            )
    lines.extend(f"  {fix_words(state, name)}" for name in fix_names(state))
    return tuple(lines)


def _as_default(step: StepProposal, choice: StepChoice, default: StepChoice) -> bool:
    """Whether a recorded choice is the step's defaults as they were (nothing toggled or typed
    beyond the rung the default fix takes it to, and not left out: a skipped step is
    decided)."""
    if choice.skipped or choice.enabled != default.enabled:
        return False
    if dict(choice.values) != dict(default.values):
        return False
    return all(
        choice.fields.get(proposal.key, proposal.default_on)
        == default.fields.get(proposal.key, proposal.default_on)
        for proposal in step.fields
    )


def effective_choices(
    state: WizardState,
    upto: int | None = None,
    extra: StepChoice | None = None,
    fix: FixName | None = None,
) -> dict[str, StepChoice]:
    """The choice for every step: made, or the default for steps not decided yet.

    Args:
        state: The wizard state.
        upto: Only the first ``upto`` roll-back steps count (the rest are left off);
            None counts every step, with its default where undecided.
        extra: A choice that overrides the recorded one (the step being edited).
        fix: The fix whose defaults the undecided steps take (None: the plan's default);
            a step accepted as the default fix had it follows the fix named here too.
    """
    steps = state.rollback_steps()
    defaults = default_choices(state, fix)
    plan_defaults = default_choices(state) if fix is not None else defaults
    decided: dict[str, StepChoice] = {}
    for index, step in enumerate(steps):
        recorded = state.choices.get(step.id)
        if upto is not None and index >= upto:
            decided[step.id] = step_off(step.id)
        elif recorded is not None and not _as_default(step, recorded, plan_defaults[step.id]):
            decided[step.id] = recorded
        else:
            decided[step.id] = defaults[step.id]
    if extra is not None:  # the step being edited counts for the validation run too
        decided[extra.step_id] = extra
    validation = validation_choice(state, decided)
    if validation is not None:
        decided[validation.step_id] = validation
    if extra is not None:  # and wins over it when it is the validation run
        decided[extra.step_id] = extra
    return decided


def validation_choice(
    state: WizardState, rollback: Mapping[str, StepChoice] | None = None
) -> StepChoice | None:
    """The short validation run's choice in effect (None: the plan offers none).

    One rule for the app's toggle, ``apply --steps validation_run`` and ``run``: the step count
    asked for (``run``'s, :attr:`WizardState.validation_run`, else the plan's figure), counted
    from the step AI Toolkit resumes the job from (:func:`resume_of`), and raised to get through
    the config's first periodic save and sample after it
    (:func:`oom_wizard.rules.plan.validation_choice`), as the roll-back choices leave the config
    (lighter samples that sample half as often move the first sample). The user's own choice
    wins where it says more than on/off (a typed count), or switches the run off.

    Args:
        state: The wizard state.
        rollback: The roll-back steps' choices (None: :func:`effective_choices`).
    """

    validation = state.validation_step()
    if validation is None:
        return None
    chosen = state.choices.get(validation.id)
    if chosen is not None and (chosen.values or not chosen.enabled):
        return chosen
    wanted = _validation_wanted(state, validation)
    if wanted <= 0:
        return step_off(validation.id)
    resume = resume_of(state)
    start = resume.step if resume is not None else 0
    found = plan_validation_choice(_left_by(state, rollback), state.plan, wanted, start)
    if found is None:
        return step_off(validation.id)
    if (
        chosen is None
        and state.validation_run is None
        and not default_choice(state, validation).enabled
    ):
        return replace(found, enabled=False)
    return found


def _validation_wanted(state: WizardState, validation: StepProposal) -> int:
    """The validation run's steps asked for: ``run``'s count, else the presets' (the plan's
    figure is already raised past the first save and sample of a fresh run); 0 when the plan
    proposes no count."""

    if state.validation_run is not None:
        return state.validation_run
    if not any(isinstance(f.after, int) for f in validation.fields):
        return 0
    return load_presets().limits.validation_steps


def resume_of(state: WizardState) -> ResumePoint | None:
    """The step AI Toolkit's next run of this job starts from (:mod:`oom_wizard.storage.resume`)."""

    return resume_point(state.document, state.job.scan)


def validation_note(
    state: WizardState, choices: Mapping[str, StepChoice], ready: Prepared
) -> str | None:
    """The words about the short validation run, read off what the save writes: the one
    wording for the app's review (:attr:`Review.validation_note`) and ``run``'s roll-back.

    The run is the validation step's entries in ``ready``, never the switch alone: a switch
    on that cannot make a run shorter than the full one is told so, and a job that resumes
    says where the steps count from, whichever way the switch is. None: nothing to add to
    the switch and the diff (a fresh start, and a switch that is what is saved).

    Args:
        state: The wizard state.
        choices: Every step's choice, the validation run's included (what the save is given).
        ready: The edit those choices make (what the save writes).
    """
    step = state.validation_step()
    if step is None:
        return None
    saved = [e.after for e in ready.entries if e.step == step.id and isinstance(e.after, int)]
    asked = choices.get(step.id)
    counted = validation_choice(replace(state, choices=MappingProxyType({})), choices)
    could = [v for v in (counted.values if counted else {}).values() if isinstance(v, int)]
    resume = resume_of(state)
    if resume is not None:
        where = f"AI Toolkit resumes this job from step {resume.step} ({resume.source})"
        if saved:
            return (
                f"{where} and trains up to train.steps: the validation run's train.steps is "
                f"{min(saved)}, so it trains {min(saved) - resume.step} steps past the resume."
            )
        if could:
            return (
                f"{where}: no validation run is saved (it is switched off); switched on, its "
                f"train.steps would be {min(could)}, {min(could) - resume.step} steps past "
                "the resume."
            )
        return (
            f"{where}: a validation run counted from there would not be shorter than the full "
            "run, so there is none."
        )
    if saved or could or asked is None or not asked.enabled:
        return None
    if state.validation_run is not None and state.validation_run <= 0:
        return "No validation run is saved: run asked for none (--validation-steps 0)."
    return (
        "No validation run is saved: one through the config's first save and sample would "
        "not be shorter than the full run."
    )


def _settle_validation(
    state: WizardState, choices: Mapping[str, StepChoice] | None
) -> Mapping[str, StepChoice] | None:
    """The choices with the validation run counted by :func:`validation_choice` (a bare
    "on" from ``apply --steps validation_run`` or the plan's defaults gets its step count)."""

    validation = state.validation_step()
    if validation is None:
        return choices
    base = default_choices(state) if choices is None else dict(choices)
    asked = base.get(validation.id)
    if asked is None or not asked.enabled or asked.values:
        return choices
    counted = validation_choice(replace(state, choices=MappingProxyType({})), base)
    if counted is None or not counted.values:
        base[validation.id] = step_off(validation.id) if counted is not None else asked
    else:
        base[validation.id] = replace(counted, enabled=True)
    return base


def preselect_fix(state: WizardState, validation_steps: int) -> WizardState:
    """The state with the next fix chosen: every step at its default, and the short
    validation run at ``validation_steps`` (0: none), raised where it must be to get through
    the config's first periodic save and sample
    (:func:`oom_wizard.rules.plan.validation_choice`).

    This is what ``run`` saves with ``--auto``, and what the wizard it opens without
    ``--auto`` shows preselected.
    """
    defaults = default_choices(state)
    choices = {step.id: defaults[step.id] for step in state.rollback_steps()}
    return replace(state, choices=MappingProxyType(choices), validation_run=validation_steps)


#: Where a roll-back step stands: the config has it already (``done``), it does not apply
#: to this model (``unavailable``), its rung comes after another step's, for a later retry
#: (``later``), the user took it (``accepted``) or left it out (``skipped``), or it is
#: still ahead (``ahead``).
StepStatus: TypeAlias = Literal["done", "unavailable", "later", "accepted", "skipped", "ahead"]


def step_status(state: WizardState, step: StepProposal) -> StepStatus:
    """Where ``step`` stands: decided by the user (accepted, skipped), else done, not for
    this model, or ahead.

    A satisfied step the user opened and accepted with nothing switched on is still done.
    """
    choice = state.choices.get(step.id)
    if choice is not None and choice.enabled:
        return "accepted"
    if not step.available:
        return "unavailable"
    if step.satisfied:
        return "later" if step.later else "done"
    return "skipped" if choice is not None else "ahead"


@dataclass(frozen=True)
class Jumped:
    """Steps the wizard went past without showing them, because nothing was left to do.

    Attributes:
        first: The first of them, counted from 1.
        last: The last of them, counted from 1.
        unavailable: Some of them do not apply to this model (rather than being done).
        later: Some of them are for a later retry (rather than being done).
        optional: Some of them are deeper levers the walk leaves out (:func:`in_walk`).
        done: Some of them have nothing left to change (not only optional ones).
    """

    first: int
    last: int
    unavailable: bool
    later: bool = False
    optional: bool = False
    done: bool = True

    def words(self) -> str:
        """``steps 5-9 already done in the config`` (or not for this model, or later)."""
        which = (
            f"step {self.first}" if self.first == self.last else f"steps {self.first}-{self.last}"
        )
        reasons = ["already done in the config"] if self.done else []
        if self.unavailable:
            reasons.append("not for this model")
        if self.later:
            reasons.append("for a later retry")
        if self.optional:
            reasons.append("optional")
        return f"{which} {', or '.join(reasons)}"


def done_before(state: WizardState, index: int) -> Jumped | None:
    """The steps the walk left out right before step ``index`` (done, not for this model,
    for a later retry, or optional): the progress line says why it jumped over them (None:
    no jump)."""
    steps = state.rollback_steps()
    first = index
    while first > 0 and not in_walk(state, steps[first - 1]):
        first -= 1
    if first == index:
        return None
    jumped = steps[first:index]
    unavailable = any(not step.available for step in jumped)
    later = any(step.available and step.later for step in jumped)
    optional = any(not step.satisfied for step in jumped)
    done = any(step.satisfied for step in jumped)
    return Jumped(first + 1, index, unavailable, later, optional, done)


def changes(state: WizardState, choices: Mapping[str, StepChoice]) -> list[Change]:
    """The field changes the choices make."""

    return changes_for(given(state, choices), choices)


def prepared(state: WizardState, choices: Mapping[str, StepChoice] | None) -> Prepared:
    """The choices applied in memory (None: the plan's defaults).

    Raises:
        EditError: an edit cannot be made safely.
    """

    settled = _settle_validation(state, choices)
    return prepare(state.document, changes_for(given(state, settled), settled))


@dataclass(frozen=True)
class Review:
    """The roll-back the review shows and the save writes: one value, so that what is on
    screen is what is saved.

    Attributes:
        fix: The fix the steps not decided (and those accepted as they were) follow.
        choices: Every step's choice, the validation run's included: what the save writes.
        ready: The edit the choices make (the review's diff).
        peak: The peak of the config the choices leave, against the card (None: no figures).
        headline: ``2 fields change (Gradient checkpointing on, Batch size to 1)``: the steps
            by title (the app shows no raw ids).
        validation_note: The words about the validation run as saved
            (:func:`validation_note`; None: the switch and the diff say it all).
    """

    fix: FixName
    choices: Mapping[str, StepChoice]
    ready: Prepared
    peak: MemoryPeak | None
    headline: str
    validation_note: str | None

    @property
    def changed(self) -> bool:
        """Whether the save would change a field (else there is nothing to save)."""
        return self.ready.changed


def review(
    state: WizardState, fix: FixName | None = None, *, validation: bool | None = None
) -> Review:
    """The review of the roll-back: every step's choice as made, the steps not decided yet
    (or accepted as they were) at the defaults of ``fix`` (None: the plan's default fix),
    and the short validation run switched as ``validation`` says (None: as
    :func:`validation_choice` has it). The app's review renders it and saves
    :attr:`Review.choices` with :attr:`Review.ready`.

    Raises:
        EditError: an edit cannot be made safely.
    """

    name = fix if fix is not None else state.plan.default_fix
    decided = effective_choices(state, fix=name)
    step = state.validation_step()
    if validation is not None and step is not None and step.id in decided:
        decided[step.id] = replace(decided[step.id], enabled=validation)
    ready = prepared(state, decided)
    titles = {step.id: step.title for step in state.plan.steps}
    steps = [titles[step] for step in recorded_steps(state.plan, ready)]
    headline = field_changes(len(ready.entries))
    if steps:
        headline += f" ({', '.join(steps)})"
    return Review(
        fix=name,
        choices=MappingProxyType(decided),
        ready=ready,
        peak=memory_peak(state, decided),
        headline=headline,
        validation_note=validation_note(state, decided, ready),
    )


def estimate(state: WizardState, choices: Mapping[str, StepChoice] | None) -> MemoryEstimate:
    """The memory of the choices against today's, from the one model with the job's own
    calibration (:func:`oom_wizard.application.settling.memory_calibration`)."""

    settled = _settle_validation(state, choices)
    changes = changes_for(given(state, settled), settled)
    return plan_estimate(
        state.document,
        changes,
        state.model_kind,
        calibration=memory_calibration(state),
        gpus=state.plan.gpus,
    )


def check_value(state: WizardState, proposal: FieldProposal, typed: str) -> ValueCheck:
    """A value typed on a step's row, checked as the domain checks it
    (:mod:`oom_wizard.rules.values`).

    The rules of ``presets/levers.yaml`` apply with the arch of the field's process (width and
    height on its size step, frames on its grid); a value heavier than today's needs a
    confirmation, and the change log then records it as an increase. A number field without
    a rule must still be a number of the proposed value's kind.
    """

    check = validate_value(
        proposal.path, typed, arch_of(state.document, proposal.path), before=proposal.config_before
    )
    if not check.ok or not isinstance(check.value, str) or proposal.control != "number":
        return check
    return _plain_number(typed, proposal.after)


def set_values(
    state: WizardState, choices: Mapping[str, StepChoice], settings: Sequence[str]
) -> dict[str, StepChoice]:
    """The choices with ``apply --set FIELD=VALUE`` values: each FIELD a field of a step the
    choices switch on (its key as ``plan`` prints it: ``model.layer_offloading_transformer_percent``
    inside the job's one process, or in full, ``config.process[0]...``), each VALUE a YAML
    scalar checked as the app checks a value typed on the field's row (:func:`check_value`;
    a switch takes ``true`` or ``false``). A field that is off by default is switched on.

    Raises:
        WizardError: a setting that is not FIELD=VALUE, a field of no chosen step, or a
            value the app would refuse.
    """

    chosen = dict(choices)
    on = [step for step in state.plan.steps if step.id in chosen and chosen[step.id].enabled]
    for text in settings:
        field_text, sep, value_text = text.partition("=")
        field_text = field_text.strip()
        if not sep or not field_text:
            raise WizardError(
                f"--set '{text}' is not FIELD=VALUE "
                "(for example model.layer_offloading_transformer_percent=1.0)"
            )
        found = [
            (step, proposal)
            for step in on
            for proposal in step.fields
            if field_text in (proposal.key, _process_key(proposal))
        ]
        if not found:
            fields = sorted({set_key(state.plan, f) for s in on for f in s.fields})
            raise WizardError(
                f"--set {field_text}: not a field of the chosen steps "
                f"({', '.join(s.id for s in on) or 'none'}); their fields are "
                f"{', '.join(fields) or 'none'}"
            )
        if len(found) > 1:
            raise WizardError(
                f"--set {field_text}: more than one chosen field is named so; name it in full "
                f"({', '.join(proposal.key for _, proposal in found)})"
            )
        step, proposal = found[0]
        try:
            value = parse_value(value_text, proposal.path)
        except EditError as exc:
            raise WizardError(f"--set {exc.message}") from None
        if proposal.control == "bucket":
            raise WizardError(
                f"--set {field_text}: a bucket is dropped or kept, not set; choose the step "
                "and its buckets in the app, or use 'oom-wizard set'"
            )
        if proposal.control == "switch":
            if not isinstance(value, bool):
                raise WizardError(f"--set {field_text}: a switch takes true or false")
        else:
            check = check_value(state, proposal, editable(value))
            if not check.ok:
                raise WizardError(f"--set {field_text}={value_text.strip()}: {check.reason}")
            value = check.value
        choice = chosen[step.id]
        chosen[step.id] = replace(
            choice,
            fields=MappingProxyType({**choice.fields, proposal.key: True}),
            values=MappingProxyType({**choice.values, proposal.key: value}),
        )
    return chosen


def set_key(plan: Plan, proposal: FieldProposal) -> str:
    """How ``apply --set`` names a field: inside its process where no other field of the
    plan has that name, else in full."""

    short = _process_key(proposal)
    if short == proposal.key:
        return short
    same = {f.key for step in plan.steps for f in step.fields if _process_key(f) == short}
    return short if len(same) == 1 else proposal.key


def set_arguments(plan: Plan, values: Mapping[str, Any]) -> list[str]:
    """``--set FIELD=VALUE`` for each value (field key → value), as ``apply`` reads them."""

    fields = {f.key: f for step in plan.steps for f in step.fields}
    arguments: list[str] = []
    for key, value in values.items():
        name = set_key(plan, fields[key]) if key in fields else key
        arguments += ["--set", f"{name}={spelling_value(value)}"]
    return arguments


def _process_key(proposal: FieldProposal) -> str:
    """The field's key inside its process (``model.low_vram``), or its whole key outside one."""

    path = proposal.path
    if len(path) > 3 and path[:2] == ("config", "process") and isinstance(path[2], int):
        return format_path(path[3:])
    return proposal.key


#: The fields that keep the effective batch (``batch × accumulation``) of a lowered batch.
_ACCUMULATION = frozenset({"gradient_accumulation", "gradient_accumulation_steps"})


def followed_values(step: StepProposal, typed: Mapping[str, Any]) -> dict[str, Any]:
    """The values that follow a value typed on the same step (None of the user's own).

    The accumulation row of the batch step keeps the effective batch of today's config
    (``batch × accumulation``) for the batch typed: today's 2 × 1 with a typed batch of 2
    is an accumulation of 1, not the 2 proposed for a batch of 1. When the typed batch does
    not divide the effective batch, the accumulation rounds down (never below 1) and the
    step's note says what the effective batch becomes (:func:`effective_batch_note`).

    Args:
        step: The step on screen.
        typed: The values typed on its rows, by field key (only valid ones).
    """
    followed: dict[str, Any] = {}
    fields = {proposal.key: proposal for proposal in step.fields}
    for proposal in step.fields:
        batch_key = proposal.requires
        if batch_key is None or proposal.key in typed or batch_key not in typed:
            continue
        if proposal.path[-1] not in _ACCUMULATION or batch_key not in fields:
            continue
        batch = typed[batch_key]
        if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
            continue
        followed[proposal.key] = max(1, _effective_batch(fields[batch_key], proposal) // batch)
    return followed


def effective_batch_note(step: StepProposal, values: Mapping[str, Any]) -> str | None:
    """What the effective batch becomes with ``values`` when it is not today's (None: it
    is kept, or the step has no batch and accumulation rows)."""
    fields = {proposal.key: proposal for proposal in step.fields}
    for proposal in step.fields:
        batch_key = proposal.requires
        if batch_key is None or proposal.path[-1] not in _ACCUMULATION or batch_key not in fields:
            continue
        batch_row = fields[batch_key]
        today = _effective_batch(batch_row, proposal)
        batch = values.get(batch_key, batch_row.after)
        accumulation = values.get(proposal.key, proposal.after)
        if not isinstance(batch, int) or not isinstance(accumulation, int):
            continue
        if batch * accumulation != today:
            return (
                f"The effective batch becomes {batch} × {accumulation} = "
                f"{batch * accumulation} (today {today}): type the accumulation to choose."
            )
    return None


def _effective_batch(batch: FieldProposal, accumulation: FieldProposal) -> int:
    """Today's effective batch: the batch times the accumulation in use (1 when unset)."""
    today = batch.config_before
    before_batch = today if isinstance(today, int) and today > 0 else 1
    before = accumulation.config_before
    return before_batch * (before if isinstance(before, int) and before > 0 else 1)


def _plain_number(typed: str, like: object) -> ValueCheck:
    """``typed`` as a number of the kind of ``like`` (a field the presets have no rule for)."""
    text = typed.strip()
    whole = isinstance(like, int) and not isinstance(like, bool)
    try:
        number: float = int(text) if whole else float(text)
    except ValueError:
        return ValueCheck(
            False, None, f"'{text}' is not {'a whole number' if whole else 'a number'}"
        )
    if number < 0 or number != number:
        return ValueCheck(False, None, "a number of at least 0 is needed")
    return ValueCheck(True, number)


def recorded_steps(plan: Plan, ready: Prepared) -> list[str]:
    """The steps a run records as applied: those that changed a field, in plan order.

    A step that was switched on but found nothing to change is not applied (the next plan
    would otherwise mark it done).
    """
    changed = {entry.step for entry in ready.entries}
    return [step.id for step in plan.steps if step.id in changed]


def step_off(step_id: str) -> StepChoice:

    return StepChoice(step_id=step_id, enabled=False)


def estimate_words(figures: MemoryEstimate, moment: str | None = None) -> str:
    """``training step ≈ 18.8 GiB (17.2–20.4; today 109.8–138.4 GiB; it crashed needing more than
    23.88 GiB; figures checked on a GPU); activations ≈ 7 % of today's in a training step, 100 %
    in a sample; weights on the GPU ≈ 14.0 GiB → 14.0 GiB``: the crashed phase's band first,
    with what it rests on, and for a crash ``moment``, whether the peak it ran into goes down
    (``plan`` and ``apply`` print it). Every figure is the one model's; a job it does not
    estimate gets why, and no figure."""

    if figures.not_estimated is not None:
        return f"memory {figures.not_estimated}"
    today, changed = figures.gib
    text = ""
    phase = MOMENT_PHASE.get(moment or "", changed.peak_phase)
    now, then = changed.phases.get(phase), today.phases.get(phase)
    if now is not None and then is not None:
        calibration = today.calibrated_by
        basis = ""
        if calibration is not None and calibration.phase == phase:
            if calibration.at_least_gib is not None:
                basis = f"; it crashed needing more than {calibration.at_least_gib:.2f} GiB"
            elif calibration.measured_gib is not None:
                day = f" on {calibration.measured_at[:10]}" if calibration.measured_at else ""
                basis = (
                    f"; measured on your card{day}: {calibration.measured_gib:.1f} GiB in the "
                    f"{PHASE_WORDS[phase]}"
                )
        text = (
            f"{PHASE_WORDS[phase]} ≈ {now.mid:.1f} GiB ({now.low:.1f}–{now.high:.1f}; "
            f"today {then.low:.1f}–{then.high:.1f} GiB{basis}; {today.basis()}); "
        )
    text += f"activations ≈ {figures.train_pct:g} % of today's in a training step"
    if figures.sample_pct is not None:
        text += f", {figures.sample_pct:g} % in a sample"
    if moment is not None:
        before, after = figures.weights_gib(moment)
        if before is not None and after is not None:
            text += f"; weights on the GPU ≈ {gib(before)} → {gib(after)}"
    if moment is not None and moment in MOMENT_PHASE and not figures.lowers(moment):
        text += f"; this leaves {PEAK_WORDS[MOMENT_PHASE[moment]]} unchanged"
    return text


def proposed_step(state: WizardState, step_id: str) -> StepProposal:
    """A roll-back step as its screen shows it: its rows start from the values the steps
    before it leave (their choices, their defaults where undecided), so a value typed on an
    earlier step is where a later step on the same field starts.

    Raises:
        KeyError: the plan has no such roll-back step.
        EditError: an earlier change cannot be made safely.
    """
    try:
        index = state.step_index(step_id)
    except ValueError:
        raise KeyError(step_id) from None
    return given(state, effective_choices(state, upto=index)).steps[
        state.plan.steps.index(state.step(step_id))
    ]


#: The fields the validation run's count depends on (its first save and sample).
_VALIDATION_INPUTS = frozenset(
    {"save_every", "sample_every", "sample_start_step", "disable_sampling"}
)


def _left_by(state: WizardState, rollback: Mapping[str, StepChoice] | None) -> JobDocument:
    """The config as the roll-back choices leave it, where they change what the validation
    run's count depends on (else the config as loaded: no edit is made)."""

    if rollback is None:
        rollback = effective_choices(state)
    validation = state.validation_step()
    steps = {k: v for k, v in rollback.items() if validation is None or k != validation.id}
    found = changes_for(given(state, steps), steps)
    if not any(change.path[-1] in _VALIDATION_INPUTS for change in found):
        return state.document
    return prepare(state.document, found).after


def in_walk(state: WizardState, step: StepProposal) -> bool:
    """Whether Enter walks through ``step``'s screen: it has something left to change, and
    the plan puts it forward for this crash (the moment's first steps and the kind's
    ladder, the seed's procedure), or a fix the review offers takes it, or the user switched
    it on. A deeper lever that is off in every fix is not a screen of its own on the way:
    the progress line, the command palette and the review still open it."""
    if step.satisfied:
        return False
    if not step.deeper:
        return True
    if any(step.id in state.plan.fix_steps(fix) for fix in fix_names(state)):
        return True
    choice = state.choices.get(step.id)
    return choice is not None and choice.enabled


def walk_steps(state: WizardState) -> tuple[StepProposal, ...]:
    """The roll-back steps Enter walks through, in order (:func:`in_walk`)."""
    return tuple(step for step in state.rollback_steps() if in_walk(state, step))


def optional_steps(state: WizardState) -> tuple[tuple[int, StepProposal], ...]:
    """The deeper levers with something to change that the walk leaves out, with their
    numbers among the roll-back steps (counted from 1): the review names them."""
    return tuple(
        (number, step)
        for number, step in enumerate(state.rollback_steps(), start=1)
        if not step.satisfied and not in_walk(state, step)
    )


def optional_line(state: WizardState) -> str | None:
    """The review's line naming the deeper levers the walk left out (None: there are none)."""
    left = optional_steps(state)
    if not left:
        return None
    named = ", ".join(f"step {number} {step.title}" for number, step in left)
    return (
        f"Optional, off by default and not opened on the way: {named} "
        "(the command palette opens them)."
    )


def step_prepared(state: WizardState, choices: Mapping[str, StepChoice], step_id: str) -> Prepared:
    """What one step's choice changes on top of the steps before it: the config as their
    choices leave it, and with this step's changes too (its screen's diff).

    Raises:
        EditError: an edit cannot be made safely.
    """

    plan = given(state, choices)
    this = choices.get(step_id)
    if plan.step(step_id) is state.plan.step(step_id):  # no earlier change on its fields
        alone = {step_id: this} if this is not None else {}
        return prepare(state.document, changes_for(plan, alone))
    index = [step.id for step in plan.steps].index(step_id)
    earlier = {
        step.id: choice
        for position, step in enumerate(plan.steps)
        if position < index and (choice := choices.get(step.id)) is not None
    }
    upto = dict(earlier)
    if this is not None:
        upto[step_id] = this
    # A field an earlier step changes: the diff is counted from the config the steps before
    # leave. Both from the config as loaded (its parsed form is at hand: an edit of an
    # edited document parses it again); the entries are this step's, counted from the base.
    base = prepare(state.document, changes_for(plan, earlier)).after
    full = prepare(state.document, changes_for(plan, upto))
    entries = []
    for entry in full.entries:
        if entry.step != step_id:
            continue
        before = base.get(parse_path(entry.path))
        if before is not MISSING and entry.after is not None and same_value(before, entry.after):
            continue
        entries.append(entry.model_copy(update={"before": None if before is MISSING else before}))
    return Prepared(base, full.after, tuple(entries))


def _process_of(state: WizardState | JobDocument, path: FieldPath) -> ProcessView | None:
    """The process a field belongs to (the first process for a bare path)."""

    document = state if isinstance(state, JobDocument) else state.document
    view = document.view()
    index = path[2] if len(path) > 2 and path[:2] == ("config", "process") else None
    return next((p for p in view.processes if p.index == index), view.primary)


def answer(state: WizardState, answers: Answers) -> WizardState:
    """The state after the user's answers: a fresh diagnosis and plan.

    The same answers keep the state as it is. New ones settle a new plan; the choices made
    before are reset, except that a value typed on a step stays with that step's choice
    where the new plan still has the step and the row (and the value is still valid
    there); the others are :attr:`WizardState.dropped`, and the screens say so."""
    if answers == state.answers:
        return state
    settled = settle(state.job, answers, new_crash=state.crashed_again)
    fresh = replace(
        state, answers=answers, settled=settled, choices=MappingProxyType({}), dropped=()
    )
    kept, dropped = _typed_kept(state, fresh)
    return replace(fresh, choices=MappingProxyType(kept), dropped=dropped)


def memory_peak(
    state: WizardState, choices: Mapping[str, StepChoice] | None = None
) -> MemoryPeak | None:
    """The peak of the config with ``choices`` applied (an empty mapping: today's config;
    None: the default fix), in GiB against the card, with the phase that sets it: what the
    load screen and every step screen show as a bar. None when the plan has no steps."""

    card, source = card_of(state.job, state.diagnosis)
    weigher = Weigher(
        state.document, state.model_kind, load_presets(), memory_calibration(state), state.plan.gpus
    )
    changes = changes_for(given(state, choices), choices) if state.plan.steps else []
    return peak_of(weigher, changes, card, source)


def _typed_kept(
    old: WizardState, new: WizardState
) -> tuple[dict[str, StepChoice], tuple[Dropped, ...]]:
    """The choices of ``old`` with typed values that ``new``'s plan keeps, and what it drops."""

    walk = walk_steps(new)
    first = walk[0].id if walk else None
    kept: dict[str, StepChoice] = {}
    dropped: list[Dropped] = []
    for step_id, choice in old.choices.items():
        if not choice.values:
            continue
        before = proposed_step(old, step_id) if step_id in _ids(old) else old.plan.step(step_id)
        labels = {f.key: f.label for f in before.fields} if before is not None else {}
        title = before.title if before is not None else step_id
        step = proposed_step(new, step_id) if step_id in _ids(new) else new.plan.step(step_id)
        rows = {f.key: f for f in step.fields} if step is not None else {}
        values: dict[str, Any] = {}
        for key, value in choice.values.items():
            row = rows.get(key)
            if row is not None and check_value(new, row, editable(value)).ok:
                values[key] = value
            else:
                shown_on = step_id if step is not None else first
                label = labels.get(key, key)
                dropped.append(Dropped(shown_on, label, value, title, gone=step is None))
        if values:
            fields = {key: on for key, on in choice.fields.items() if key in rows}
            kept[step_id] = StepChoice(step_id, choice.enabled, fields, values)
    return kept, tuple(dropped)


def _ids(state: WizardState) -> set[str]:
    return {step.id for step in state.rollback_steps()}


def dropped_line(state: WizardState, step_id: str) -> str | None:
    """The one line a step's screen shows about values typed before new answers that the
    new plan dropped (None: nothing was dropped there)."""
    here = [item.words() for item in state.dropped if item.shown_on == step_id]
    if not here:
        return None
    return f"Typed before, dropped with the new answers: {'; '.join(here)}."
