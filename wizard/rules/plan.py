"""The roll-back plan: the procedure of DESIGN.md made exact for one config.

:func:`build_plan` turns a config, the crash moment and the model kind into ordered
steps (the moment's first changes, then the rest of the ladder from ``presets/``, then the
deeper levers, then an optional short validation run). Every step carries its exact field
proposals, each with ``before`` → ``after`` and a default toggle; a step with nothing left
to change by default is *satisfied* and shown as done. :func:`changes_for` turns the user's
choices (or the defaults) into :class:`~oom_wizard.formats.change.Change` values, which are the only
way anything is written.

The steps. Each key of ``presets/ladders.yaml``'s ``steps`` has one builder here, the
function that proposes its edits on one process, registered by ``@_builds("step_id")`` above
it; :func:`check_steps` refuses presets whose steps and builders differ, either way.

The default fix. The moment's first steps that have work left are on; when they leave the
estimate of the peak the crash ran into unchanged (see
:meth:`~oom_wizard.rules.estimate.MemoryEstimate.lowers`), the next step down the ladder that lowers
it is switched on too: the rest of the ladder, then the deeper levers in order of cost (the
next bucket down, quantization, cached text embeddings, layer offloading by percent, and
for training-step crashes a lower LoRA rank and an 8-bit optimizer). When no step lowers
it, the plan is *exhausted*: nothing is on, and :attr:`Plan.exhausted_advice` says what
remains. A fix that switches sampling off brings the short validation run with it.

Idempotence. Steps with an absolute target (checkpointing on, batch 1, the low-memory
path, quantization, cached embeddings, the 8-bit optimizer, sampling disabled for a
``loading`` crash, the validation run) are satisfied by the config's values. Steps that go
down one rung per roll-back (``rungs: true`` in ``presets/ladders.yaml``: the buckets, the
frames, the samples, the offloaded share, the rank) would always find a next rung, so they
count as done when the latest roll-back run in the change log applied them; only a
new crash after that retry (``new_crash=True``) moves them one rung further, and the step's
note says so.

The estimate and the scale-up live in :mod:`oom_wizard.rules.estimate` and
:mod:`oom_wizard.rules.scaleup`
and are re-exported here, so that callers need one import.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal, Protocol, TypeAlias

from oom_wizard import spelling
from oom_wizard.errors import ConfigError, PresetError, WizardError
from oom_wizard.formats.change import Change
from oom_wizard.formats.document import MISSING, JobDocument, same_value
from oom_wizard.formats.view import ProcessView, SampleView
from oom_wizard.paths import FieldPath, format_path
from oom_wizard.rules.catalog import (
    LADDERS_FILE,
    MODEL_KINDS,
    MOMENTS,
    VALIDATION_RUN,
    ArchFacts,
    FrameGrid,
    Limits,
    ModelKind,
    Moment,
    Presets,
    RecipeField,
    StepId,
    load_presets,
)
from oom_wizard.rules.estimate import PEAK_WORDS, MemoryEstimate, estimate
from oom_wizard.rules.memory import MOMENT_PHASE, Calibration
from oom_wizard.rules.modelkind import find_model_kind
from oom_wizard.rules.scaleup import ScaleUp, next_scale_up, pending_scale_ups
from oom_wizard.rules.shape import arch_facts, frame_floor
from oom_wizard.rules.sizing import FixName, FixSizing, SizedFixes, size_fixes
from oom_wizard.rules.values import validate_value
from oom_wizard.storage.changelog import ChangeLog
from oom_wizard.storage.changes import prepare
from oom_wizard.vocabulary import DEFAULT_MOMENT, json_schema

__all__ = [
    "DEFAULT_MOMENT",
    "Control",
    "DiagnosisLike",
    "FieldProposal",
    "MemoryEstimate",
    "Plan",
    "ScaleUp",
    "StepChoice",
    "StepProposal",
    "build_plan",
    "changes_for",
    "default_model_kind",
    "estimate",
    "fewer_frames",
    "fewer_sample_steps",
    "given_choices",
    "next_scale_up",
    "pending_scale_ups",
    "rewrite_prompt_flags",
    "smaller_size",
]

Control: TypeAlias = Literal["switch", "bucket", "number", "text"]

"""The moment assumed when neither the user nor a log says: the first training steps are
where most OOM reports land, and their first changes (checkpointing, batch 1, the biggest
bucket) are the procedure's main activation levers. Callers must say it was assumed."""

JSON_SCHEMA: Final = json_schema("plan", 1)
"""The ``"schema"`` of ``plan --json``."""


class DiagnosisLike(Protocol):
    """What the plan and its commands read from a diagnosis
    (``oom_wizard.rules.diagnosis.Diagnosis``)."""

    @property
    def moment(self) -> str | None:
        """The crash moment the log points to (None when nothing says)."""

    @property
    def model_kind(self) -> str | None:
        """The model kind the config and log point to."""

    @property
    def crashed(self) -> bool | None:
        """Whether the log's last run crashed (None without a log)."""

    @property
    def environment_suspected(self) -> bool:
        """Whether the GPU, worker or host is suspect rather than the config."""

    @property
    def reasons(self) -> tuple[str, ...]:
        """Why the environment is or is not suspected."""

    def to_json(self) -> dict[str, Any]:
        """The diagnosis as ``diagnose --json`` prints it (recorded in the change log)."""


# --------------------------------------------------------------------------- values


@dataclass(frozen=True)
class FieldProposal:
    """One field a step would change, with its toggle.

    Attributes:
        path: The field (for a bucket: the item's path inside the resolution list).
        before: The value today; ``MISSING`` when the key is absent.
        after: The proposed value; ``MISSING`` removes the key (or drops the bucket).
        default_on: Whether the toggle starts on.
        label: A short row label (``train.batch_size``, ``bucket 1024 (dataset 0)``).
        ui_hint: Where the field is in AI Toolkit's web UI, if it has a control.
        control: How the app shows it: a switch, a bucket chip, a number or a text input.
        group: Fields with the same group edit one value together (the buckets of one
            resolution list); the group is that value's path.
        group_items: For a grouped field, the whole list as it is today.
        requires: The key of another field of the step that this one only makes sense with
            (the accumulation that keeps the effective batch needs the smaller batch).
        set_by: The title of an earlier step whose choice left ``before`` (None: ``before``
            is today's value); see :func:`given_choices`.
        today: The value in today's config when ``set_by`` says ``before`` is not it.
        moots: The keys of the step's other fields that this one, on, makes moot: they are
            left as they are (no preview samples leaves the samples' size as it is).
    """

    path: FieldPath
    before: Any
    after: Any
    default_on: bool
    label: str
    ui_hint: str | None
    control: Control
    group: str | None = None
    group_items: tuple[Any, ...] = ()
    requires: str | None = None
    set_by: str | None = None
    today: Any = None
    moots: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """The field's key in :class:`StepChoice` mappings: its formatted path."""
        return format_path(self.path)

    @property
    def config_before(self) -> Any:
        """The value in today's config (what an increase is weighed against)."""
        return self.today if self.set_by is not None else self.before

    @property
    def changes(self) -> FieldPath:
        """The path the field's change writes: a bucket's whole list, else the field."""
        return self.path[:-1] if self.group is not None else self.path

    def to_json(self) -> dict[str, Any]:
        """The field as ``plan --json`` prints it."""
        return {
            "path": self.key,
            "before": _json_value(self.before),
            "after": _json_value(self.after),
            "default_on": self.default_on,
        }


#: Where a step of the plan stands for this config: nothing is left for it to change
#: (``done``), its rung comes after another step's, for a later retry (``later``), it is put
#: forward, on by default (``offered``), it has something to change but is off by default
#: (``not_needed``: the user may switch it on), or its lever does not exist for this model
#: (``not_for_this_model``).
StepState: TypeAlias = Literal["done", "not_needed", "later", "offered", "not_for_this_model"]

#: Each state in words, as ``plan`` and ``fit`` print it.
STEP_STATE_WORDS: Final[Mapping[StepState, str]] = {
    "done": "done",
    "not_needed": "not needed",
    "later": "later",
    "offered": "offered",
    "not_for_this_model": "not for this model",
}


@dataclass(frozen=True)
class StepProposal:
    """One step of the plan.

    Attributes:
        id: The step id (``batch_size``...).
        title: A short title from the presets.
        why: Why it helps, from the presets.
        satisfied: Nothing is left to change by default (the step is shown as done).
        default_on: Whether the step is switched on when the user accepts the defaults.
        ui_hint: Where its main field is in AI Toolkit's web UI.
        fields: The proposals (optional ones may remain on a satisfied step).
        note: What else the user should know (placeholders, rungs, host RAM...).
        costs: What the step costs besides memory (speed, system RAM, quality).
    """

    id: str
    title: str
    why: str
    satisfied: bool
    default_on: bool
    ui_hint: str | None
    fields: tuple[FieldProposal, ...]
    note: str | None = None
    costs: str | None = None
    available: bool = True
    """False when the lever does not exist for this job (its arch has no such control):
    the step is shown as not available rather than as done."""
    later: str | None = None
    """Why a step with nothing to change now is not done either: its rung is still ahead,
    after another step (the next bucket down, once the biggest is dropped)."""
    deeper: bool = False
    """A deeper lever (``presets/ladders.yaml``'s ``deeper``), neither among the moment's first
    steps nor on the kind's ladder: the walk shows it only when a fix puts it forward."""
    unsized: str | None = None
    """Why no default fix takes the step (AI Toolkit is reported to fail with it on this job):
    it stays offered, its note says why, and the user may switch it on."""
    rungs: tuple[Mapping[str, Any], ...] = ()
    """The lever's stronger rungs beyond its default one, weakest first: each maps field keys
    to their values there (the fields named are on, the others keep their toggles). Layer
    offloading's next percents, a lower rank, no preview samples after lighter ones: the
    solver goes up them before it moves on to a lever of more loss."""

    def rung_choice(self, rung: int = 0) -> StepChoice:
        """The step on at ``rung`` (0: its default fields and values; ``n``: ``rungs[n-1]``'s
        values over them)."""
        if rung <= 0 or not self.rungs:
            return StepChoice(step_id=self.id, enabled=True)
        values = self.rungs[min(rung, len(self.rungs)) - 1]
        return StepChoice(
            step_id=self.id,
            enabled=True,
            fields=MappingProxyType(dict.fromkeys(values, True)),
            values=MappingProxyType(dict(values)),
        )

    def at_rung(self, rung: int) -> StepProposal:
        """The step as it is at ``rung``: the rung's fields on with their values (what a fix
        that takes it there lists)."""
        if rung <= 0 or not self.rungs:
            return self
        values = self.rungs[min(rung, len(self.rungs)) - 1]
        moot = {key for f in self.fields if f.key in values for key in f.moots}
        fields = tuple(
            dataclasses.replace(f, after=values[f.key], default_on=True)
            if f.key in values
            else dataclasses.replace(f, default_on=False)
            if f.key in moot
            else f
            for f in self.fields
        )
        return dataclasses.replace(self, fields=fields, default_on=True, satisfied=False)

    @property
    def state(self) -> StepState:
        """Where the step stands (:data:`StepState`): a step with nothing to change now whose
        rung is still ahead is ``later``, not done."""
        if not self.available:
            return "not_for_this_model"
        if self.satisfied:
            return "later" if self.later else "done"
        return "offered" if self.default_on else "not_needed"

    def state_words(self) -> str:
        """The state as ``plan`` and ``fit`` print it: ``offered, on by default``, ``later:
        after the biggest resolution goes, for a later retry``, ``done``..."""
        words = STEP_STATE_WORDS[self.state]
        if self.state == "offered":
            return f"{words}, on by default"
        if self.state == "not_needed":
            return f"{words} now, off by default (yours to switch on)"
        if self.state == "later" and self.later:
            return f"{words}: {self.later}"
        return words

    def to_json(self) -> dict[str, Any]:
        """The step as ``plan --json`` prints it: ``state`` says where it stands;
        ``satisfied`` is true only for a step with nothing left to do (done, not needed)."""
        return {
            "id": self.id,
            "title": self.title,
            "why": self.why,
            "state": self.state,
            "satisfied": self.state == "done",
            "default_on": self.default_on,
            "ui_hint": self.ui_hint,
            "costs": self.costs,
            "available": self.available,
            "fields": [proposal.to_json() for proposal in self.fields],
            "rungs": [{key: _json_value(value) for key, value in r.items()} for r in self.rungs],
        }


EXHAUSTED_ADVICE: Final = (
    "Nothing left on the ladder lowers {peak}: this model does not fit this card at these "
    "settings. What remains: a bigger card (or a cloud GPU with more VRAM), a smaller variant "
    "of the model, or more offloading to system RAM at the cost of speed and host RAM."
)


@dataclass(frozen=True)
class Plan:
    """The roll-back plan for one config, moment and model kind.

    Attributes:
        moment: The crash moment the plan is for.
        model_kind: ``image`` or ``video``.
        steps: The steps in the order they are offered (none for ``environment``).
        environment_checks: What to check instead, for the ``environment`` moment.
        exhausted: No step left lowers the peak the crash ran into: the default fix is
            empty, and nothing should be saved as a fix.
        estimate: The estimate of the default fix (None for ``environment``).
    """

    moment: str
    model_kind: str
    steps: tuple[StepProposal, ...]
    environment_checks: tuple[str, ...] = ()
    exhausted: bool = False
    estimate: MemoryEstimate | None = None
    fixes: Mapping[FixName, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))
    fix_rungs: Mapping[FixName, Mapping[str, int]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    """Each fix's steps taken beyond their default rung: step id → rung (1: the first of
    :attr:`StepProposal.rungs`)."""
    default_fix: FixName = "safe"
    sizing: FixSizing | None = None
    gpus: int = 1
    """How many GPUs the plan was built for (splitting the model needs more than one)."""

    def fix_steps(self, fix: FixName | None = None) -> tuple[str, ...]:
        """The steps a fix switches on (None: the default fix); the safe set when the plan
        has no such fix (no card to size it against)."""
        name = fix or self.default_fix
        if name in self.fixes:
            return self.fixes[name]
        return self.fixes.get("safe", tuple(s.id for s in self.steps if s.default_on))

    def default_choices(self, fix: FixName | None = None) -> dict[str, StepChoice]:
        """The one rule of what accepting the defaults means: every step of ``fix`` (None:
        the default fix) on with its default field toggles, every other step off."""
        on = set(self.fix_steps(fix))
        rungs = self.fix_rungs.get(fix or self.default_fix, {})
        return {
            step.id: step.rung_choice(rungs.get(step.id, 0))
            if step.id in on and not step.satisfied
            else StepChoice(step_id=step.id, enabled=False)
            for step in self.steps
        }

    def as_fixed(self, step: StepProposal, fix: FixName | None = None) -> StepProposal:
        """``step`` as ``fix`` (None: the default fix) takes it: at the fix's rung."""
        return step.at_rung(self.fix_rungs.get(fix or self.default_fix, {}).get(step.id, 0))

    def fix_values(self, fix: FixName | None = None) -> dict[str, Any]:
        """The field values a fix sets beyond its steps' defaults (field key → value): the
        rungs it takes them to, as ``apply --set`` carries them."""
        rungs = self.fix_rungs.get(fix or self.default_fix, {})
        values: dict[str, Any] = {}
        for step in self.steps:
            if step.id in rungs:
                values.update(step.rung_choice(rungs[step.id]).values)
        return values

    def step(self, step_id: str) -> StepProposal | None:
        """The step with id ``step_id``, if the plan has it."""
        return next((step for step in self.steps if step.id == step_id), None)

    @property
    def peak(self) -> str | None:
        """The peak the crash ran into (``load``, ``training``, ``sample``), if any."""
        return MOMENT_PHASE.get(self.moment)

    @property
    def exhausted_advice(self) -> str | None:
        """What remains when the ladder is exhausted (None when it is not)."""
        if not self.exhausted:
            return None
        advice = EXHAUSTED_ADVICE.format(peak=PEAK_WORDS.get(self.peak or "", "the peak"))
        offered = [step for step in self.steps if step.unsized and not step.satisfied]
        return " ".join(
            [advice, *(f"{s.title} is offered, but no fix takes it: {s.unsized}." for s in offered)]
        )

    def to_json(self) -> dict[str, Any]:
        """The plan in DESIGN.md's ``plan --json`` shape, plus the environment checks, named
        by :data:`JSON_SCHEMA`."""
        result: dict[str, Any] = {
            "schema": JSON_SCHEMA,
            "moment": self.moment,
            "model_kind": self.model_kind,
            "steps": [step.to_json() for step in self.steps],
            "environment_checks": list(self.environment_checks),
            "exhausted": self.exhausted,
            "estimate": None,
        }
        if self.estimate is not None and self.estimate.not_estimated is not None:
            result["estimate"] = {
                "not_estimated": self.estimate.not_estimated,
                "peak": self.peak,
                "lowers_peak": self.estimate.lowers(self.moment),
            }
        elif self.estimate is not None:
            before, after = self.estimate.weights_gib(self.moment)
            result["estimate"] = {
                "training": self.estimate.train_pct,
                "sample": self.estimate.sample_pct,
                "weights_gib": {"before": before, "after": after},
                "peak": self.peak,
                "lowers_peak": self.estimate.lowers(self.moment),
                "gib": self.estimate.gib_json(),
            }
        if self.fixes:
            result["fixes"] = {name: list(ids) for name, ids in self.fixes.items()}
            result["fix_values"] = {
                name: {key: _json_value(v) for key, v in self.fix_values(name).items()}
                for name in self.fixes
            }
            result["default_fix"] = self.default_fix
            result["sizing"] = self.sizing.to_json() if self.sizing is not None else None
        if self.exhausted:
            result["remaining"] = self.exhausted_advice
        return result


@dataclass(frozen=True)
class StepChoice:
    """The user's decision about one step.

    Attributes:
        step_id: The step.
        enabled: Whether the step is applied at all.
        fields: Field key → on/off; a field not listed keeps its ``default_on``.
        values: Field key → an edited value (number and text inputs).
        skipped: The user left the step out (the app's Ctrl+N): it stays off whichever fix is
            picked, even where the preselected fix had it off too (a step accepted as shown
            follows the fix picked).
    """

    step_id: str
    enabled: bool
    fields: Mapping[str, bool] = field(default_factory=lambda: MappingProxyType({}))
    values: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    skipped: bool = False


def _json_value(value: Any) -> Any:
    """``MISSING`` as null, tuples as lists: a value ready for ``json.dumps``."""
    if value is MISSING:
        return None
    if isinstance(value, tuple):
        return list(value)
    return value


# --------------------------------------------------------------------------- building


def build_plan(
    document: JobDocument,
    moment: str,
    model_kind: str,
    *,
    changelog: ChangeLog | None = None,
    diagnosis: DiagnosisLike | None = None,
    new_crash: bool = False,
    presets: Presets | None = None,
    calibration: Calibration | None = None,
    card_gib: float | None = None,
    gpus: int = 1,
) -> Plan:
    """The roll-back plan for ``document`` after a crash at ``moment``.

    Args:
        document: The config as loaded.
        moment: One of ``presets.MOMENTS``.
        model_kind: ``image`` or ``video``.
        changelog: The change log that describes this config, when it is our output:
            one-rung steps that its latest roll-back applied count as done.
        diagnosis: The log's diagnosis; for ``environment`` its reasons head the checks.
        new_crash: The config crashed again after the last roll-back: one-rung steps go
            one rung further instead of counting as done.
        presets: The preset data (default: the shipped presets).
        calibration: The crash's own figures (PyTorch's OOM message): they size the
            just-enough fix, which is then the default (:mod:`oom_wizard.rules.sizing`).
        card_gib: The card's capacity, when known (the message's, else the probe's).
        gpus: How many GPUs the probe sees: splitting the model is offered only with more
            than one.

    Raises:
        WizardError: an unknown moment or kind, or a job without a training process.
    """
    presets = presets or load_presets()
    checked_moment, kind = _checked(moment, model_kind)
    processes = _processes(document, presets, kind, gpus)
    if checked_moment == "environment":
        return Plan(
            moment=checked_moment,
            model_kind=kind,
            steps=(),
            environment_checks=_environment_checks(diagnosis, presets),
        )
    order: tuple[StepId, ...] = (*presets.rollback_order(checked_moment, kind), VALIDATION_RUN)
    last_rollback = _done_by_last_rollback(changelog, presets)
    done = {} if new_crash else last_rollback
    applied_before = set(last_rollback) if new_crash else set()
    first: tuple[str, ...] = presets.moment(checked_moment).first(kind)
    forward = {*first, *presets.ladder(kind), VALIDATION_RUN}
    readded = _readded_by_last_run(changelog, order)
    if readded:  # what the scale-up that crashed gave back goes first: the config before it
        order = (*readded, *(step for step in order if step not in readded))  # trained
        first = readded
    steps = [
        dataclasses.replace(
            _step(step_id, checked_moment, processes, presets, done, applied_before),
            deeper=step_id not in forward and step_id not in readded,
        )
        for step_id in order
    ]
    steps = [_as_undo(step) if step.id in readded else step for step in steps]
    chosen, exhausted, figures, sized = _with_defaults(
        steps, first, document, checked_moment, kind, presets, calibration, card_gib, gpus
    )
    return Plan(
        moment=checked_moment,
        model_kind=kind,
        steps=tuple(chosen),
        exhausted=exhausted,
        estimate=figures,
        fixes=sized.fixes,
        fix_rungs=sized.rungs,
        default_fix=sized.default,
        sizing=sized.sizing,
        gpus=gpus,
    )


def _readded_by_last_run(
    changelog: ChangeLog | None, order: Sequence[StepId]
) -> tuple[StepId, ...]:
    """The steps the change log's last run gave back, when that run is a scale-up (the config
    crashed after it: what it gave back is the first thing to take back), in plan order."""

    if changelog is None or not changelog.runs or changelog.runs[-1].direction != "scale_up":
        return ()
    readded = set(changelog.runs[-1].steps)
    return tuple(step for step in order if step in readded)


def _as_undo(step: StepProposal) -> StepProposal:
    """A step that takes back what the scale-up that crashed gave back, named so."""

    if step.satisfied:
        return step
    title = spelling.mid_sentence(step.title)
    note = "The last scale-up gave this back and the job crashed after it: it is undone first."
    return dataclasses.replace(
        step,
        title=f"Undo the scale-up that crashed: {title}",
        note=f"{note} {step.note}" if step.note else note,
    )


def _checked(moment: str, model_kind: str) -> tuple[Moment, ModelKind]:
    """The moment and kind as vocabulary values, or a one-line error."""
    for value, known, what in ((moment, MOMENTS, "moment"), (model_kind, MODEL_KINDS, "kind")):
        if value not in known:
            raise WizardError(f"unknown {what} '{value}'; use one of {', '.join(known)}")
    checked_moment = next(m for m in MOMENTS if m == moment)
    kind = next(k for k in MODEL_KINDS if k == model_kind)
    return checked_moment, kind


def _environment_checks(diagnosis: DiagnosisLike | None, presets: Presets) -> tuple[str, ...]:
    """The checks for a GPU or worker problem, the diagnosis's own reasons first."""
    checks = presets.environment_checks
    if diagnosis is None or not diagnosis.environment_suspected:
        return checks
    return (*(f"The log shows: {reason}" for reason in diagnosis.reasons), *checks)


def _done_by_last_rollback(changelog: ChangeLog | None, presets: Presets) -> dict[str, str]:
    """One-rung steps the latest roll-back applied (and no later scale-up undid), with when.

    A rung step whose main field is another applied rung step's counts as applied too: the
    next bucket down and the biggest bucket are rungs of one list.
    """
    if changelog is None:
        return {}
    runs = list(enumerate(changelog.runs))
    rollbacks = [index for index, run in runs if run.direction == "rollback"]
    if not rollbacks:
        return {}
    last = rollbacks[-1]
    undone = {step for index, run in runs[last + 1 :] for step in run.steps}
    applied = {entry.step for entry in changelog.changes_of_run(last)} | set(
        changelog.runs[last].steps
    )
    when = changelog.runs[last].at
    rungs = {step for step, info in presets.steps.items() if info.rungs}
    done = {step for step in rungs if step in applied and step not in undone}
    main = {step: presets.steps[step].fields[0] for step in rungs}
    done |= {step for step in rungs if main[step] in {main[d] for d in done}}
    return {step: when for step in done}


def _with_defaults(
    steps: list[StepProposal],
    first: Sequence[str],
    document: JobDocument,
    moment: Moment,
    kind: ModelKind,
    presets: Presets,
    calibration: Calibration | None = None,
    card_gib: float | None = None,
    gpus: int = 1,
) -> tuple[list[StepProposal], bool, MemoryEstimate, SizedFixes]:
    """Switch on the default fix (see :mod:`oom_wizard.rules.sizing`).

    The safe set: the moment's first steps that have work left, and when they leave the
    crashed peak where it was, the next step down that lowers it (the seed's procedure), with
    the steps that cost no quality for the moment. Each of them must lower the crashed peak,
    on its own or beside the others: one that does neither (the low-memory path of a model
    that is not quantized on the card, for a crash while loading) is left off, whatever it
    costs, and its note says why. The just-enough set: the solver's least loss that fits the
    card (when a card is known), from the same free steps and the rungs that cost quality.

    Returns the steps (``default_on`` as the default fix has it), whether the ladder is
    exhausted (nothing lowers the peak: then no step is on), the estimate of the default fix,
    and both fixes. The validation run goes with a fix that switches sampling off.
    """
    actionable = [s for s in steps if not s.satisfied and s.id != VALIDATION_RUN]
    takeable = [s for s in actionable if s.unsized is None]

    def figures(ids: Collection[str]) -> MemoryEstimate:
        trial = Plan(moment, kind, tuple(_switched(steps, ids)))
        return estimate(document, changes_for(trial), kind, presets=presets, gpus=gpus)

    def changes_of(levels: Mapping[str, int]) -> list[Change]:
        """The changes of the steps of ``levels``, each at its rung (0: its default)."""
        return changes_for(Plan(moment, kind, tuple(steps)), _rung_choices(steps, levels))

    no_cost = presets.free_steps(moment)
    chosen = [s.id for s in takeable if s.id in first]
    current = figures(chosen)
    promoted = None
    if not current.lowers(moment):
        for step in takeable:
            if step.id not in chosen and figures([step.id]).lowers(moment):
                promoted = step
                chosen.append(step.id)
                current = figures(chosen)
                break
    chosen += [s.id for s in actionable if s.id in no_cost and s.id not in chosen]
    idle = _idle(chosen, figures, moment)
    chosen = [step for step in chosen if step not in idle]
    free = [s.id for s in actionable if s.id in no_cost and s.id not in idle]
    exhausted = not figures(chosen).lowers(moment)
    order = [s.id for s in steps]
    if exhausted:
        sized = SizedFixes({"safe": ()}, "safe", None)
    else:
        candidates = [s.id for s in takeable if s.id not in free]
        sized = size_fixes(
            document,
            order,
            free,
            chosen,
            candidates,
            changes_of,
            moment,
            kind,
            presets=presets,
            calibration=calibration,
            card_gib=card_gib,
            gpus=gpus,
            rungs={s.id: len(s.rungs) for s in takeable if s.rungs},
        )
        sized = _with_validation(steps, sized)
    on = sized.fixes[sized.default]
    current = estimate(
        document,
        changes_of(dict.fromkeys(on, 0) | dict(sized.rungs.get(sized.default, {}))),
        kind,
        presets=presets,
        calibration=calibration,
        gpus=gpus,
    )
    peak = PEAK_WORDS.get(MOMENT_PHASE.get(moment, ""), "the peak")
    titles = {s.id: s.title for s in steps}
    result: list[StepProposal] = []
    for step in _switched(steps, on):
        notes = [step.note] if step.note else []
        if promoted is not None and step.id == promoted.id and step.id in on:
            notes.append(
                "The moment's usual first changes leave the crash's peak where it was; this "
                f"is the next step down the ladder that lowers {peak}."
            )
        if step.id in free:
            notes.append("It costs no quality, so the default fix takes it first.")
        if step.id in on and step.id != VALIDATION_RUN and not figures([step.id]).lowers(moment):
            notes.append(_why_on_without_lowering(step.id, on, titles, peak, figures, moment))
        elif step.id in idle and step.id not in on:
            notes.append(
                f"It does not lower {peak} for this job, on its own or beside the other "
                "steps, so the default fix leaves it off; it is yours to switch on."
            )
        if notes != ([step.note] if step.note else []):
            step = dataclasses.replace(step, note=" ".join(notes))
        result.append(step)
    return result, exhausted, current, sized


def _idle(
    chosen: Sequence[str], figures: Callable[[Collection[str]], MemoryEstimate], moment: Moment
) -> set[str]:
    """The steps of ``chosen`` that do not lower the peak a crash at ``moment`` ran into, on
    their own or beside the rest of ``chosen`` (the low-memory path of a model that is not
    quantized on the card): no fix takes one for the crash's sake, whatever it costs."""

    whole = figures(chosen)
    return {
        step
        for step in chosen
        if step != VALIDATION_RUN
        and not figures([step]).lowers(moment)
        and not whole.lowers_beyond(figures([s for s in chosen if s != step]), moment)
    }


def _why_on_without_lowering(
    step_id: str,
    on: Sequence[str],
    titles: Mapping[str, str],
    peak: str,
    figures: Callable[[Collection[str]], MemoryEstimate],
    moment: Moment,
) -> str:
    """Why the default fix takes a step that, on its own, does not lower the peak the crash ran
    into: the plan says why (the steps beside which it does, or the other phase it makes fit)."""

    others = [step for step in on if step != step_id and step != VALIDATION_RUN]
    partners = [
        spelling.mid_sentence(titles[other])
        for other in others
        if figures([step_id, other]).lowers_beyond(figures([other]), moment)
    ]
    if partners:
        why = f"beside {', '.join(partners)} it lowers {peak}"
    elif figures(on).lowers_beyond(figures(others), moment):
        why = f"beside the fix's other steps it lowers {peak}"
    else:  # the safe fix takes only what lowers it (:func:`_idle`): this is the solver's
        why = "with it another phase fits the card too, with the margin"
    return f"On its own it does not lower {peak}; the default fix takes it because {why}."


def _with_validation(steps: Sequence[StepProposal], sized: SizedFixes) -> SizedFixes:
    """Each fix with the short validation run when it switches sampling off."""
    validation = [s.id for s in steps if s.id == VALIDATION_RUN and not s.satisfied]
    fixes = {
        name: (*ids, *validation)
        if _disables_sampling(steps, ids, sized.rungs.get(name, {}))
        else ids
        for name, ids in sized.fixes.items()
    }
    return dataclasses.replace(sized, fixes=MappingProxyType(fixes))


def _disables_sampling(
    steps: Sequence[StepProposal], ids: Collection[str], rungs: Mapping[str, int]
) -> bool:
    """Whether the chosen steps (at their rungs) switch sampling off: then the short
    validation run goes with them, so that no full run is spent without a single sample."""
    return any(
        f.default_on and f.path[-2:] == ("train", "disable_sampling") and f.after is True
        for step in steps
        if step.id in ids
        for f in step.at_rung(rungs.get(step.id, 0)).fields
    )


def _rung_choices(steps: Sequence[StepProposal], rungs: Mapping[str, int]) -> dict[str, StepChoice]:
    """Exactly the steps of ``rungs`` on, each at its rung."""
    return {step.id: step.rung_choice(rungs[step.id]) for step in steps if step.id in rungs}


def _switched(steps: Sequence[StepProposal], ids: Collection[str]) -> list[StepProposal]:
    """The steps with exactly ``ids`` switched on."""
    return [dataclasses.replace(step, default_on=step.id in ids) for step in steps]


# --------------------------------------------------------------------------- processes


def named_dataset_hint(hint: str, dataset: str | None) -> str:
    """A UI hint with the presets' "Dataset N" placeholder naming the dataset (its folder's
    name), or "each dataset" when the field is not one dataset's."""
    return hint.replace("Dataset N", f"the '{dataset}' dataset" if dataset else "each dataset")


def dataset_name(process: ProcessView, index: object) -> str:
    """The name of ``process``'s dataset at ``index`` (its folder's name)."""
    found = next((d for d in process.datasets if d.index == index), None)
    return found.name if found is not None else f"#{index}"


def field_hint(
    presets: Presets, process: ProcessView, facts: ArchFacts | None, path: FieldPath
) -> str | None:
    """Where a field of ``process`` is in the UI, for its arch (``facts``); a dataset's field
    names the dataset, not "Dataset N". The plan's rows and the result screen both show it."""
    hint = presets.ui_hint(path, facts)
    base = len(process.path())
    if hint is None or path[base : base + 1] != ("datasets",) or len(path) <= base + 1:
        return hint
    return named_dataset_hint(hint, dataset_name(process, path[base + 1]))


@dataclass(frozen=True)
class _Process:
    """One training process with the facts a step needs."""

    view: ProcessView
    document: JobDocument
    facts: ArchFacts | None
    kind: ModelKind
    presets: Presets
    prefix: str
    gpus: int = 1
    """How many GPUs the probe sees (1 without a probe)."""

    def path(self, *parts: str | int) -> FieldPath:
        return self.view.path(*parts)

    def get(self, *parts: str | int) -> Any:
        """The value as written in the file under this process, ``MISSING`` when absent."""
        return self.document.get(self.path(*parts))

    def label(self, text: str) -> str:
        return f"{self.prefix}{text}"

    def hint(self, path: FieldPath) -> str | None:
        """Where the field is in the UI (:func:`field_hint`)."""
        return field_hint(self.presets, self.view, self.facts, path)

    def dataset_name(self, index: object) -> str:
        """The name of the process's dataset at ``index`` (:func:`dataset_name`)."""
        return dataset_name(self.view, index)

    @property
    def limits(self) -> Limits:
        return self.presets.limits

    @property
    def grid(self) -> FrameGrid:
        return self.presets.frame_grid(self.facts)

    @property
    def frame_floor(self) -> int:
        """The smallest frame count above one on the grid: clips never become stills."""
        return frame_floor(self.grid)


def _processes(
    document: JobDocument, presets: Presets, kind: ModelKind, gpus: int = 1
) -> list[_Process]:
    view = document.view()
    if not view.processes:
        raise ConfigError(
            "this job has no training process (sd_trainer, diffusion_trainer...); "
            "there is nothing for a memory roll-back to change",
            file=document.source,
        )
    several = len(view.processes) > 1
    return [
        _Process(
            view=process,
            document=document,
            facts=arch_facts(process, presets),
            kind=kind,
            presets=presets,
            prefix=f"process {process.index}: " if several else "",
            gpus=gpus,
        )
        for process in view.processes
    ]


def default_model_kind(document: JobDocument, presets: Presets | None = None) -> tuple[str, str]:
    """The model kind of the config and where it comes from, for when nobody says.

    The one rule of :func:`oom_wizard.rules.modelkind.find_model_kind` (the diagnosis and the
    app use
    it too); ``image`` when nothing in the config says.

    Returns:
        ``(kind, reason)``.
    """

    found = find_model_kind(document.view().primary)
    if found.kind is None:
        return found.settled, f"{found.source}; {found.settled} assumed"
    return found.kind, found.source


# --------------------------------------------------------------------------- steps


@dataclass
class _Found:
    """What a step builder found: its proposals and notes."""

    fields: list[FieldProposal] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unavailable: int = 0
    """How many processes the step does not apply to (the arch lacks the lever)."""
    later: str | None = None
    """Why the step's rung is still ahead (see :attr:`StepProposal.later`)."""
    unsized: str | None = None
    """Why no default fix takes the step (see :attr:`StepProposal.unsized`)."""
    rungs: list[dict[str, Any]] = field(default_factory=list)
    """The stronger rungs (see :attr:`StepProposal.rungs`), merged over the processes."""

    def add_rungs(self, rungs: Sequence[Mapping[str, Any]]) -> None:
        """One process's stronger rungs, each cumulative; a process with fewer rungs than
        another stays at its last one in the rungs after it."""
        for index, rung in enumerate(rungs):
            if index < len(self.rungs):
                self.rungs[index].update(rung)
            else:
                self.rungs.append({**(self.rungs[-1] if self.rungs else {}), **rung})
        for index in range(len(rungs), len(self.rungs)):
            self.rungs[index].update(rungs[-1] if rungs else {})

    def note_placeholder(self, process: _Process, *parts: str | int) -> None:
        path = format_path(process.path(*parts))
        self.notes.append(
            f"{path} is a ${{...}} placeholder, so its value is unknown here; "
            "set it where the variable is defined."
        )


_Builder: TypeAlias = Callable[[_Process, Moment, _Found], None]

_BUILDERS: Final[dict[StepId, _Builder]] = {}
"""Step id → the function that proposes its edits on one process, each registered by
:func:`_builds` above its definition; :func:`check_steps` holds them to ladders.yaml."""


def _builds(step_id: str) -> Callable[[_Builder], _Builder]:
    """Register the decorated function as the builder of step ``step_id`` (a key of
    ``presets/ladders.yaml``'s ``steps``)."""

    def register(builder: _Builder) -> _Builder:
        if step_id in _BUILDERS:
            raise ValueError(f"step {step_id} has two builders")
        _BUILDERS[StepId(step_id)] = builder
        return builder

    return register


def check_steps(presets: Presets) -> None:
    """Refuse presets whose steps and this module's builders are not the same ids.

    Raises:
        PresetError: a step of ``ladders.yaml`` has no builder, or a builder no step.
    """
    if presets.steps.keys() == _BUILDERS.keys():
        return
    unbuilt = [step for step in presets.steps if step not in _BUILDERS]
    if unbuilt:
        raise PresetError(
            f"steps.{unbuilt[0]} has no builder: write the function that proposes its edits "
            f'in wizard/rules/plan.py and register it with @_builds("{unbuilt[0]}")',
            file=LADDERS_FILE,
        )
    stray = next(step for step in _BUILDERS if step not in presets.steps)
    raise PresetError(
        f"steps lacks {stray}, which wizard/rules/plan.py builds: add its entry (title, "
        "loses, why, fields) and its place in a ladder, or drop the builder",
        file=LADDERS_FILE,
    )


_AS_WRITTEN: Final = object()
"""The default ``before`` of :func:`_propose`: the value as the file writes it."""


def _step(
    step_id: StepId,
    moment: Moment,
    processes: Sequence[_Process],
    presets: Presets,
    done: Mapping[str, str],
    applied_before: set[str],
) -> StepProposal:
    check_steps(presets)
    info = presets.step(step_id)
    found = _Found()
    if step_id in done:
        found.notes.append(
            f"Applied in the last roll-back ({done[step_id]}). It goes one rung further only "
            "after a new crash with that config (plan --new-crash, or a newer log)."
        )
    else:
        for process in processes:
            _BUILDERS[step_id](process, moment, found)
        if step_id in applied_before and found.fields:
            rungs = ", ".join(_rung_text(f) for f in found.fields if f.default_on)
            found.notes.insert(
                0, f"It crashed again after the last roll-back: one rung further ({rungs})."
            )
    satisfied = not any(proposal.default_on for proposal in found.fields)
    hint = found.fields[0].ui_hint if found.fields else presets.ui_hint(info.fields[0])
    if hint is not None and not found.fields:  # no field to name its dataset: every one
        hint = named_dataset_hint(hint, None)
    return StepProposal(
        id=step_id,
        title=info.title,
        why=info.why,
        satisfied=satisfied,
        default_on=False,
        ui_hint=hint,
        fields=tuple(found.fields),
        note=" ".join(dict.fromkeys(found.notes)) or None,
        costs=info.costs,
        available=bool(found.fields) or found.unavailable < len(processes),
        later=found.later if satisfied else None,
        unsized=found.unsized,
        rungs=tuple(MappingProxyType(rung) for rung in found.rungs) if not satisfied else (),
    )


def _rung_text(proposal: FieldProposal) -> str:
    if proposal.control == "bucket":
        return f"{proposal.label} dropped"
    before, after = spelling.before_after(proposal.before, proposal.after)
    return f"{proposal.label} {before} {spelling.ARROW} {after}"


def _propose(
    found: _Found,
    process: _Process,
    parts: tuple[str | int, ...],
    after: Any,
    *,
    before: Any = _AS_WRITTEN,
    default_on: bool = True,
    control: Control = "switch",
    label: str | None = None,
    requires: str | None = None,
) -> FieldProposal:
    """Add a proposal for the field at ``parts`` under the process, and return it.

    Args:
        found: Where the step collects its proposals.
        process: The process the field belongs to.
        parts: The field's path inside the process (``("train", "batch_size")``).
        after: The proposed value.
        before: The value today (default: as the file writes it, ``MISSING`` when absent).
        default_on: Whether the toggle starts on.
        control: How the app shows the field.
        label: The row label (default: the path inside the process).
        requires: The key of the field this one only makes sense with.
    """
    path = process.path(*parts)
    proposal = FieldProposal(
        path=path,
        before=process.get(*parts) if before is _AS_WRITTEN else before,
        after=after,
        default_on=default_on,
        label=process.label(label or format_path(parts)),
        ui_hint=process.hint(path),
        control=control,
        requires=requires,
    )
    found.fields.append(proposal)
    return proposal


# --- gradient checkpointing ------------------------------------------------------------------


@_builds("gradient_checkpointing")
def _gradient_checkpointing(process: _Process, moment: Moment, found: _Found) -> None:
    train = process.view.train
    if not train.is_known("gradient_checkpointing"):
        found.note_placeholder(process, "train", "gradient_checkpointing")
    elif train.gradient_checkpointing is False:
        _propose(found, process, ("train", "gradient_checkpointing"), True, before=False)


# --- batch size ------------------------------------------------------------------------------


@_builds("batch_size")
def _batch_size(process: _Process, moment: Moment, found: _Found) -> None:
    train = process.view.train
    if not train.is_known("batch_size"):
        found.note_placeholder(process, "train", "batch_size")
        return
    train_batch = train.batch_size or 1
    lowered: list[tuple[FieldProposal, int]] = []
    if train_batch > 1:
        proposal = _propose(
            found, process, ("train", "batch_size"), 1, before=train_batch, control="number"
        )
        lowered.append((proposal, train_batch))
    for dataset in process.view.datasets:
        if not dataset.is_known("batch_size"):
            found.note_placeholder(process, "datasets", dataset.index, "batch_size")
        elif dataset.batch_size is not None and dataset.batch_size > 1:
            parts = ("datasets", dataset.index, "batch_size")
            proposal = _propose(
                found, process, parts, 1, before=dataset.batch_size, control="number"
            )
            lowered.append((proposal, dataset.batch_size))
    if lowered:
        _keep_effective_batch(process, found, lowered)


def _keep_effective_batch(
    process: _Process, found: _Found, lowered: Sequence[tuple[FieldProposal, int]]
) -> None:
    """Offer to multiply the accumulation in use by the old batch (on by default)."""
    train = process.view.train
    largest, old_batch = max(lowered, key=lambda pair: pair[1])
    key = _accumulation_key(process)
    if key is None:
        found.notes.append(
            "train.gradient_accumulation_steps is -1 (a whole epoch per optimizer step) or a "
            "placeholder; the effective batch is left to it."
        )
        return
    current = getattr(train, key) or 1
    batches = {dataset.batch_size or train.batch_size for dataset in process.view.datasets}
    if len(batches) > 1:
        found.notes.append(
            f"The datasets used different batch sizes; the accumulation follows the largest "
            f"({old_batch}), so the others now accumulate more than they held before."
        )
    _propose(
        found,
        process,
        ("train", key),
        current * old_batch,
        control="number",
        label=f"keep the effective batch (train.{key})",
        requires=largest.key,
    )


def _accumulation_key(process: _Process) -> str | None:
    """The accumulation key in use: ``gradient_accumulation`` unless only the legacy one is set.

    None when the legacy key accumulates over a whole epoch (-1) or a key is a placeholder:
    multiplying it would mean something else.
    """
    train = process.view.train
    if not (
        train.is_known("gradient_accumulation") and train.is_known("gradient_accumulation_steps")
    ):
        return None
    legacy = train.gradient_accumulation_steps
    if legacy == -1:
        return None
    if legacy is not None and legacy > 1 and (train.gradient_accumulation or 1) == 1:
        return "gradient_accumulation_steps"
    return "gradient_accumulation"


# --- top bucket ------------------------------------------------------------------------------


@_builds("top_bucket")
def _top_bucket(process: _Process, moment: Moment, found: _Found) -> None:
    for dataset in process.view.datasets:
        if not dataset.is_known("resolution"):
            found.note_placeholder(process, "datasets", dataset.index, "resolution")
            continue
        buckets = dataset.resolution or ()
        if len(buckets) >= 2:
            _bucket_toggles(process, found, dataset.index, buckets)
        elif buckets:
            _step_down(process, found, dataset.index, buckets[0], dataset.resolution_is_list)
    if any(f.control == "bucket" for f in found.fields):
        found.notes.append(
            "Each dataset keeps its smallest resolution, so none is left empty; buckets of "
            f"{process.limits.keep_buckets_up_to} and below stay unless you drop them."
        )


def _bucket_toggles(process: _Process, found: _Found, index: int, buckets: tuple[int, ...]) -> None:
    """One toggle per bucket but the smallest; the largest is dropped by default."""
    keep = buckets.index(min(buckets))
    largest = max(buckets)
    list_path = process.path("datasets", index, "resolution")
    for position, bucket in enumerate(buckets):
        if position == keep:
            continue
        found.fields.append(
            FieldProposal(
                path=(*list_path, position),
                before=bucket,
                after=MISSING,
                default_on=bucket == largest and bucket > process.limits.keep_buckets_up_to,
                label=process.label(f"bucket {bucket} (dataset {process.dataset_name(index)})"),
                ui_hint=process.hint(list_path),
                control="bucket",
                group=format_path(list_path),
                group_items=buckets,
            )
        )


def _step_down(
    process: _Process, found: _Found, index: int, value: int, as_list: bool, always: bool = False
) -> None:
    """A single resolution goes one rung down the ladder (by default only above the keep
    threshold, unless ``always``)."""
    limits = process.limits
    lower = next((rung for rung in limits.resolution_rungs if rung < value), None)
    if lower is None:
        return
    before: Any = [value] if as_list else value
    after: Any = [lower] if as_list else lower
    _propose(
        found,
        process,
        ("datasets", index, "resolution"),
        after,
        before=before,
        default_on=always or value > limits.keep_buckets_up_to,
        label=f"resolution {value} → {lower} (dataset {process.dataset_name(index)})",
    )


# --- sampling --------------------------------------------------------------------------------


@_builds("sampling")
def _sampling(process: _Process, moment: Moment, found: _Found) -> None:
    train, sample = process.view.train, process.view.sample
    if moment != "loading":
        _lighter_validation(process, found)
    if sample is None:
        return
    if not train.is_known("disable_sampling"):
        found.note_placeholder(process, "train", "disable_sampling")
        return
    if train.disable_sampling is True:
        return
    if process.view.first_sample is not None:
        found.notes.append(
            "The first_sample: section runs its own preview before training; "
            "skip_first_sample does not stop it, disable_sampling does."
        )
    disable = ("train", "disable_sampling")
    if moment == "loading":
        if train.skip_first_sample is not True:
            _propose(found, process, ("train", "skip_first_sample"), True)
        _propose(
            found,
            process,
            disable,
            True,
            label=(
                f"{format_path(disable)} (with the short validation run; a full run with it "
                "makes no samples at all)"
            ),
        )
        return
    lighter = len(found.fields)
    _lighter_samples(process, sample, found)
    moots = tuple(f.key for f in found.fields[lighter:])
    off = _propose(found, process, disable, True, default_on=False)
    found.fields[-1] = dataclasses.replace(off, moots=moots)
    found.add_rungs([{off.key: True}])


def _lighter_validation(process: _Process, found: _Found) -> None:
    """The validation pass (``train.validation_config``) made lighter: its resolution capped
    like a sample's long side, its sigmas (one batch item each) down to the middle one."""
    validation = process.view.train.validation_config
    if validation is None:
        return
    base = ("train", "validation_config")
    cap = process.limits.sample_long_side.of(process.kind)
    if validation.resolution is not None and validation.resolution > cap:
        _propose(found, process, (*base, "resolution"), cap, control="number")
    sigmas = validation.validation_sigmas
    if sigmas is not None and len(sigmas) > 1:
        middle = sorted(sigmas)[(len(sigmas) - 1) // 2]
        label = f"{format_path((*base, 'validation_sigmas'))} (one prediction per sigma)"
        _propose(
            found, process, (*base, "validation_sigmas"), [middle], control="text", label=label
        )
    found.notes.append(
        "Validation runs a batch of one prediction per sigma after a training step: a periodic "
        "peak like a sample's. A lighter pass gives a val/loss that is not comparable with the "
        "values logged before."
    )


def _lighter_samples(process: _Process, sample: SampleView, found: _Found) -> None:
    """Smaller size, fewer steps, rarer, shorter; per-sample overrides too."""

    def lower(key: str, value: int) -> None:
        _propose(found, process, ("sample", key), value, control="number")

    if sample.width is not None and sample.height is not None:
        width, height = smaller_size(sample.width, sample.height, process.kind, process.limits)
        if width != sample.width:
            lower("width", width)
        if height != sample.height:
            lower("height", height)
    fewer = fewer_sample_steps(sample.sample_steps, process.limits)
    if fewer is not None:
        lower("sample_steps", fewer)
    if sample.sample_every:
        lower("sample_every", sample.sample_every * 2)
    if process.kind == "video" and sample.num_frames is not None:
        frames = fewer_frames(sample.num_frames, process.grid)
        if frames is not None:
            lower("num_frames", frames)
    _overrides(process, sample, found)
    for key in sorted(sample.unknown & {"width", "height", "sample_steps", "sample_every"}):
        found.note_placeholder(process, "sample", key)


def _overrides(process: _Process, sample: SampleView, found: _Found) -> None:
    """Per-sample width/height/frames (fields and prompt flags) shrunk like the globals."""
    overrides = sample.overrides()
    if not overrides:
        return
    prompts = dict(sample.prompt_paths())
    rewritten: dict[FieldPath, dict[str, int]] = {}
    for override in overrides:
        new = _override_value(process, sample, override.sample, override.field)
        if new is None or new == override.value:
            continue
        if override.source == "field":
            parts = override.path[len(process.path()) :]
            _propose(found, process, parts, new, before=override.value, control="number")
        elif override.flag is not None:
            rewritten.setdefault(override.path, {})[override.flag] = new
    for path, flags in rewritten.items():
        before = prompts.get(path) or ""
        found.fields.append(
            FieldProposal(
                path=path,
                before=before,
                after=rewrite_prompt_flags(before, flags),
                default_on=True,
                label=process.label(
                    f"{format_path(path[len(process.path()) :])} ({', '.join(sorted(flags))})"
                ),
                ui_hint=None,
                control="text",
            )
        )
    found.notes.append(
        "Some samples set their own size or length, which wins over the section's; "
        "they are shrunk the same way."
    )


def _override_value(process: _Process, sample: SampleView, index: int, name: str) -> int | None:
    """The lighter value of one sample's ``width``/``height``/``num_frames``."""
    size = sample.rendered_size(index)
    if name == "num_frames":
        frames = size["num_frames"]
        return fewer_frames(frames, process.grid) if frames > 1 else None
    width, height = smaller_size(size["width"], size["height"], process.kind, process.limits)
    return width if name == "width" else height


def smaller_size(
    width: int, height: int, kind: ModelKind, limits: Limits | None = None
) -> tuple[int, int]:
    """One rung smaller, aspect kept: the long side to the kind's cap, or to 3/4 below it.

    Both sides are multiples of ``limits.size_multiple`` (16), never larger than before, and
    the long side never goes below ``limits.sample_side_floor`` (256; a size already at or
    under the floor stays as it is). ``limits`` defaults to the shipped presets'.
    """
    limits = limits or load_presets().limits
    multiple = limits.size_multiple
    long_side = max(width, height)
    cap = limits.sample_long_side.of(kind)
    target = cap if long_side > cap else long_side * 3 // 4 // multiple * multiple
    target = max(target, limits.sample_side_floor)
    if target >= long_side:
        return width, height
    scale = target / long_side

    def side(value: int) -> int:
        if value == long_side:
            return target
        scaled = max(multiple, round(value * scale / multiple) * multiple)
        return min(scaled, max(multiple, value // multiple * multiple))

    return side(width), side(height)


def fewer_sample_steps(steps: int | None, limits: Limits | None = None) -> int | None:
    """About half the sample steps, never below ``limits.sample_steps_floor`` (10); None when
    there is nothing to cut. ``limits`` defaults to the shipped presets'."""
    floor = (limits or load_presets().limits).sample_steps_floor
    if steps is None or steps <= floor:
        return None
    return max(floor, math.ceil(steps / 2))


def fewer_frames(frames: int, grid: FrameGrid) -> int | None:
    """About half the frames on the arch's grid, never a single frame; None at the floor."""
    if frames <= 1:
        return None
    lower = max(grid.halve(frames), frame_floor(grid))
    return lower if lower < frames else None


def rewrite_prompt_flags(prompt: str, values: Mapping[str, int]) -> str:
    """The prompt with the numbers after the given flags (``--w``...) replaced.

    The prompt is split on ``--`` exactly as AI Toolkit's sampler splits it; only the value
    text of the named flags changes, every other character stays.
    """
    pieces = prompt.split("--")
    for position in range(1, len(pieces)):
        piece = pieces[position]
        flag = piece.split(" ")[0].strip()
        if f"--{flag}" not in values:
            continue
        rest = piece[len(flag) :]
        old = rest.strip()
        pieces[position] = flag + rest.replace(old, str(values[f"--{flag}"]), 1)
    return "--".join(pieces)


# --- frames ----------------------------------------------------------------------------------


@_builds("num_frames")
def _num_frames(process: _Process, moment: Moment, found: _Found) -> None:
    if process.kind != "video":
        return
    capped = False
    further: dict[str, list[int]] = {}  # each dataset's count halved again, to the floor
    for dataset in process.view.datasets:
        frames_parts = ("datasets", dataset.index, "num_frames")
        if not (dataset.is_known("num_frames") and dataset.is_known("auto_frame_count")):
            found.note_placeholder(process, *frames_parts)
        elif dataset.auto_frame_count is True:
            _cap_auto_frames(process, found, dataset.index, dataset.num_frames or 1)
            capped = True
        elif (lower := fewer_frames(dataset.num_frames or 1, process.grid)) is not None:
            key = _propose(
                found,
                process,
                frames_parts,
                lower,
                before=dataset.num_frames or 1,
                control="number",
            ).key
            while (lower := fewer_frames(lower, process.grid)) is not None:
                further.setdefault(key, []).append(lower)
    depth = max((len(chain) for chain in further.values()), default=0)
    found.add_rungs(
        [
            {key: chain[min(i, len(chain) - 1)] for key, chain in further.items()}
            for i in range(depth)
        ]
    )
    _sample_frames(process, found)
    if capped:
        found.notes.append(
            "Auto frame count has no upper limit (a long clip trains at its full length); "
            "a fixed count caps it."
        )


def _cap_auto_frames(process: _Process, found: _Found, index: int, frames: int) -> None:
    """Auto frame count off, with a fixed count on the grid in its place."""
    fixed = _fixed_count(process, frames)
    frames_field = None
    if fixed != frames:
        parts = ("datasets", index, "num_frames")
        frames_field = _propose(found, process, parts, fixed, control="number")
    _propose(
        found,
        process,
        ("datasets", index, "auto_frame_count"),
        False,
        before=True,
        requires=frames_field.key if frames_field else None,
    )


def _fixed_count(process: _Process, frames: int) -> int:
    """The fixed frame count that replaces auto frame count, on the grid."""
    if frames > 1:
        return max(process.grid.snap_down(frames), process.frame_floor)
    default = process.facts.default_sample_frames if process.facts else None
    base = default or process.frame_floor
    return max(process.grid.halve(base), process.frame_floor)


def _sample_frames(process: _Process, found: _Found) -> None:
    """Sample length too, on its own toggle (off: samples are the sampling step's business)."""
    sample = process.view.sample
    if sample is None or not sample.is_known("num_frames"):
        return
    frames = fewer_frames(sample.num_frames or 1, process.grid)
    if frames is not None:
        _propose(
            found, process, ("sample", "num_frames"), frames, default_on=False, control="number"
        )


# --- low-memory path -------------------------------------------------------------------------


@_builds("low_vram")
def _low_vram(process: _Process, moment: Moment, found: _Found) -> None:
    facts = process.facts
    if facts is None:
        _recipe_field(process, found, "model.low_vram", True)
        found.notes.append("The arch is unknown to oom-wizard, so only model.low_vram is offered.")
    else:
        _recipe(process, found, ("low_vram",))
    if process.view.model.compile is True:
        found.notes.append(
            "model.compile is on: it moves the transformer to the GPU before compiling, which "
            "undoes low_vram's CPU parking."
        )


@_builds("quantize")
def _quantize(process: _Process, moment: Moment, found: _Found) -> None:
    """The transformer, then the text encoder, with the arch's own qtypes."""
    if process.facts is None:
        found.notes.append("The arch is unknown to oom-wizard, so no qtype is proposed for it.")
        found.unavailable += 1
        return
    _recipe(process, found, ("quantize", "qtype", "quantize_te", "qtype_te"))
    if process.facts.low_memory.quantize is None:
        found.notes.append(f"AI Toolkit does not offer quantization for {process.facts.label}.")
        found.unavailable += 1
        return
    if not found.fields:
        _four_bit(process, found)


#: The next rung down from an 8-bit transformer: AI Toolkit's own 4-bit type, which every arch
#: that quantizes takes (toolkit/util/quantize.py:42-74, uintx_quant.py:42).
FOUR_BIT: Final = "uint4"


def _four_bit(process: _Process, found: _Found) -> None:
    """An 8-bit transformer one rung down, to 4 bits (with the accuracy-recovery adapter the
    user named, which stays after ``|``)."""
    model = process.view.model
    if model.quantize is not True or not model.is_known("qtype"):
        return
    base = model.qtype_base or process.presets.levers.default_qtype
    if process.presets.levers.quantized_bytes(base) < 1.0:
        return
    adapter = model.qtype_adapter
    after = FOUR_BIT if adapter is None else f"{FOUR_BIT}|{adapter}"
    _propose(
        found,
        process,
        ("model", "qtype"),
        after,
        before=process.get("model", "qtype"),
        control="text",
        label="model.qtype (4-bit transformer weights)",
    )
    found.notes.append(
        "4-bit weights are half of 8-bit ones and lose more detail than 8-bit; the text "
        "encoder keeps its qtype."
    )


@_builds("text_encoder")
def _text_encoder(process: _Process, moment: Moment, found: _Found) -> None:
    """Cached text embeddings: the text encoder is freed for the whole run."""
    if process.facts is None:
        found.notes.append("The arch is unknown to oom-wizard, so the text encoder is left alone.")
        found.unavailable += 1
        return
    if process.facts.low_memory.cache_text_embeddings is None:
        found.unavailable += 1
        return
    _recipe(process, found, ("cache_text_embeddings",))
    if found.fields:
        found.notes.append(
            "Caching frees the text encoder; train.unload_text_encoder would only park it and "
            "train on the trigger word alone, so it is not proposed."
        )


@_builds("layer_offloading")
def _layer_offloading(process: _Process, moment: Moment, found: _Found) -> None:
    """Layer offloading on, its percents one rung up (half, then all)."""
    facts, model = process.facts, process.view.model
    if facts is None or not facts.low_memory.layer_offloading or facts.layer_offloading != "works":
        found.unavailable += 1
        if facts is not None and facts.layer_offloading != "works":
            found.notes.append(
                f"Layer offloading is not offered: for {facts.label} AI Toolkit "
                f"{'raises an error' if facts.layer_offloading == 'raises' else 'ignores it'}."
            )
        return
    keys = ("layer_offloading_transformer_percent", "layer_offloading_text_encoder_percent")
    if not all(model.is_known(name) for name in ("layer_offloading", *keys)):
        for name in ("layer_offloading", *keys):
            if not model.is_known(name):
                found.note_placeholder(process, "model", name)
        return
    on = model.layer_offloading is True
    switch = None
    if not on:
        switch = _propose(found, process, ("model", "layer_offloading"), True)
    proposed: dict[str, float] = {}
    for key in keys:
        current = float(getattr(model, key) or 0.0) if on else 0.0
        rung = next((r for r in process.limits.offload_rungs if r > current + 1e-9), None)
        if rung is not None:
            proposal = _propose(
                found,
                process,
                ("model", key),
                rung,
                control="number",
                requires=switch.key if switch else None,
            )
            proposed[proposal.key] = rung
    # The stronger rungs: the text encoder's percents first (it runs once per caption or
    # sample), then the transformer's (every step).
    rungs: list[dict[str, Any]] = []
    for key in reversed(list(proposed)):
        for rung in process.limits.offload_rungs:
            if rung > proposed[key] + 1e-9:
                proposed[key] = rung
                rungs.append(dict(proposed))
    found.add_rungs(rungs)
    if found.fields:
        found.notes.append(
            "Offloaded weights live in system RAM (it needs a lot of it) and every step gets "
            "slower; with it on, the toolkit turns a qfloat8 qtype into float8."
        )


@_builds("lora_rank")
def _lora_rank(process: _Process, moment: Moment, found: _Found) -> None:
    """About half the rank, alpha in proportion, never below the floor."""
    network = process.get("network")
    if not isinstance(network, Mapping):
        found.notes.append("No network section (a full fine-tune): there is no LoRA rank.")
        found.unavailable += 1
        return
    if str(network.get("type", "lora")).lower() == "lokr" and network.get("lokr_full_rank", True):
        found.notes.append(
            "A LoKr with lokr_full_rank (the toolkit's default) trains full-rank factors: its "
            "size follows network.lokr_factor, not the rank."
        )
        found.unavailable += 1
        return
    _conv_rank(process, network, found)
    key = "rank" if network.get("rank") is not None else "linear"
    rank = process.view.network_rank
    if rank is None:
        found.note_placeholder(process, "network", key)
        return
    floor = process.limits.rank_floor
    lower = max(floor, math.ceil(rank / 2))
    if lower >= rank:
        return
    before = network.get(key, MISSING)
    rank_key = _propose(
        found, process, ("network", key), lower, before=before, control="number"
    ).key
    alpha = network.get("linear_alpha")
    alpha_key = None
    if isinstance(alpha, (int, float)) and not isinstance(alpha, bool):
        label = "network.linear_alpha (same alpha/rank ratio)"
        alpha_key = _propose(
            found,
            process,
            ("network", "linear_alpha"),
            _scaled_alpha(alpha, lower, rank),
            control="number",
            label=label,
        ).key
    rungs: list[dict[str, Any]] = []
    while (further := max(floor, math.ceil(lower / 2))) < lower:  # half again, to the floor
        lower = further
        rung: dict[str, Any] = {rank_key: lower}
        if alpha_key is not None and isinstance(alpha, (int, float)):
            rung[alpha_key] = _scaled_alpha(alpha, lower, rank)
        rungs.append(rung)
    found.add_rungs(rungs)


def _scaled_alpha(alpha: float, lower: int, rank: int) -> float | int:
    """The LoRA alpha that keeps today's alpha/rank ratio at rank ``lower``."""
    scaled = alpha * lower / rank
    return int(scaled) if float(scaled).is_integer() else round(scaled, 4)


@_builds("attention")
def _attention(process: _Process, moment: Moment, found: _Found) -> None:
    """An eager attention backend (it keeps the attention matrix) to the efficient one."""
    facts = process.presets.levers.attention
    backend = process.get("train", "attention_backend")
    if not isinstance(backend, str) or backend.strip().lower() not in facts.eager:
        return
    _propose(found, process, ("train", "attention_backend"), facts.efficient, control="text")
    found.notes.append(
        f"train.attention_backend is {backend!r}, an eager kernel that keeps every layer's whole "
        "attention matrix: the likely cause of this crash. The estimate counts that matrix "
        "(heads × tokens² per block); the efficient kernel never holds it."
    )


#: The switches of the extra-passes step, each with what turning it off costs.
EXTRA_PASSES: Final[tuple[tuple[tuple[str, ...], str], ...]] = (
    (("train", "diff_output_preservation"), "the LoRA may bleed into prompts without the trigger"),
    (("train", "blank_prompt_preservation"), "the blank prompt is no longer held to the base"),
    (("train", "inverted_mask_prior"), "the unmasked area is no longer held to the base model"),
    (("train", "do_prior_divergence"), "the LoRA is no longer pushed away from the base model"),
    (("train", "ema_config", "use_ema"), "the saved weights are the last step's, noisier"),
    (("train", "train_text_encoder"), "the trigger word is learned by the transformer alone"),
)


@_builds("extra_passes")
def _extra_passes(process: _Process, moment: Moment, found: _Found) -> None:
    """Each extra pass or copy that is on, switched off (its quality cost in its label)."""
    for parts, cost in EXTRA_PASSES:
        if process.get(*parts) is True:
            label = f"{format_path(parts)} (off: {cost})"
            _propose(found, process, parts, False, before=True, label=label)


def _conv_rank(process: _Process, network: Mapping[str, Any], found: _Found) -> None:
    """A LoCon's conv rank halved like the linear one, its alpha in proportion."""
    conv = network.get("conv")
    if not isinstance(conv, int) or isinstance(conv, bool):
        return
    lower = max(process.limits.rank_floor, math.ceil(conv / 2))
    if lower >= conv:
        return
    _propose(found, process, ("network", "conv"), lower, control="number")
    alpha = network.get("conv_alpha")
    if isinstance(alpha, (int, float)) and not isinstance(alpha, bool):
        scaled = alpha * lower / conv
        new_alpha: float | int = int(scaled) if float(scaled).is_integer() else round(scaled, 4)
        label = "network.conv_alpha (same alpha/rank ratio)"
        _propose(
            found, process, ("network", "conv_alpha"), new_alpha, control="number", label=label
        )


@_builds("control_images")
def _control_images(process: _Process, moment: Moment, found: _Found) -> None:
    """One control image fewer per item, for each dataset with several, where the arch takes
    several (the simple form's Control Dataset 1-3); the last one listed goes first."""
    datasets = [d for d in process.view.datasets if d.control_images > 1]
    if not datasets:
        found.unavailable += 1
        return
    facts = process.facts
    if facts is not None and facts.ui_control_paths == "single":
        found.unavailable += 1
        found.notes.append(
            f"{facts.label} takes one control image per item: an edit model needs it, so it stays."
        )
        return
    cost = "off: the LoRA no longer learns from this reference"
    for dataset in datasets:
        numbered = [
            name
            for name in ("control_path_1", "control_path_2", "control_path_3")
            if getattr(dataset, name)
        ]
        if numbered:
            last = numbered[-1]
            label = f"datasets[{dataset.index}].{last} ({cost})"
            _propose(found, process, ("datasets", dataset.index, last), MISSING, label=label)
            continue
        paths = process.get("datasets", dataset.index, "control_path")
        if isinstance(paths, list):
            kept = [p for p in paths if p][:-1]
            label = f"datasets[{dataset.index}].control_path (the last one {cost})"
            _propose(
                found,
                process,
                ("datasets", dataset.index, "control_path"),
                kept,
                control="text",
                label=label,
            )
    found.notes.append(
        "Each control image adds its tokens to every step (the estimate counts it at the size "
        "the arch gives it: the target's, or its own pixel budget); one fewer per roll-back, "
        "the first stays."
    )


@_builds("placement")
def _placement(process: _Process, moment: Moment, found: _Found) -> None:
    """FLUX split over the GPUs the probe sees (with ``is_flux``, which AI Toolkit's check
    needs); parameter swapping for an Adafactor full fine-tune."""
    model = process.get("model")
    model = model if isinstance(model, Mapping) else {}
    flux = model.get("arch") == "flux" or (not model.get("arch") and model.get("is_flux") is True)
    offered = 0
    split_on = model.get("split_model_over_gpus") is True
    if process.gpus > 1 and flux:
        offered += 1
        lora = isinstance(process.get("network"), Mapping)
        split = None
        if not split_on:
            split = _propose(found, process, ("model", "split_model_over_gpus"), True)
            kept = (
                "the text encoder, the VAE and the adapter" if lora else "the text encoder and VAE"
            )
            found.notes.append(
                f"nvidia-smi sees {process.gpus} GPUs: the transformer's blocks are spread over "
                f"them as AI Toolkit places them (cuda:0 keeps {kept}); each step gets slower "
                "as activations move between the cards."
            )
        if model.get("is_flux") is not True:
            _propose(
                found,
                process,
                ("model", "is_flux"),
                True,
                label="model.is_flux (AI Toolkit splits only with it)",
                requires=split.key if split is not None else None,
            )
            found.notes.append(
                "AI Toolkit accepts split_model_over_gpus only with model.is_flux: true (its "
                "check, config_modules.py:700, runs before model.arch sets is_flux), so both "
                "are set."
            )
        if lora and found.fields:
            found.unsized = (
                "AI Toolkit keeps a LoRA's adapter on cuda:0 while the split moves the blocks, "
                "and LoRA runs split this way are reported to stop with a device error (AI "
                "Toolkit issue 1048)"
            )
            found.notes.append(
                f"No default fix takes it for a LoRA: {found.unsized}. Switch it on to try it."
            )
    elif process.gpus > 1:
        found.notes.append("AI Toolkit splits only FLUX over several GPUs.")
    elif split_on:
        found.notes.append(
            "model.split_model_over_gpus is on, but one GPU is seen (or none was probed): "
            "AI Toolkit keeps every block on cuda:0, so it saves nothing here."
        )
    if not isinstance(process.get("network"), Mapping):
        optimizer = str(process.get("train", "optimizer") or "").lower()
        if optimizer in process.presets.levers.paramiter_swapping.optimizers:
            offered += 1
            if process.get("train", "do_paramiter_swapping") is not True:
                _propose(found, process, ("train", "do_paramiter_swapping"), True)
        else:
            found.notes.append(
                "Parameter swapping needs the Adafactor (or Automagic) optimizer; this full "
                "fine-tune uses another."
            )
    if not offered:
        found.unavailable += 1


@_builds("optimizer_8bit")
def _optimizer_8bit(process: _Process, moment: Moment, found: _Found) -> None:
    """The 8-bit variant of the optimizer, where it has one."""
    train = process.view.train
    if not train.is_known("optimizer"):
        found.note_placeholder(process, "train", "optimizer")
        return
    info = process.presets.levers.optimizer(train.optimizer)
    if info is None or info.eight_bit is None:
        return
    _propose(found, process, ("train", "optimizer"), info.eight_bit, control="text")


@_builds("smaller_bucket")
def _smaller_bucket(process: _Process, moment: Moment, found: _Found) -> None:
    """The largest bucket left when it is small enough that top_bucket keeps it."""
    keep = process.limits.keep_buckets_up_to
    for dataset in process.view.datasets:
        if not dataset.is_known("resolution"):
            continue
        buckets = dataset.resolution or ()
        if not buckets or max(buckets) > keep:
            if len(buckets) > 2:  # the top goes first; two or more stay for a later rung
                found.later = "after the biggest resolution goes, for a later retry"
            continue  # the top_bucket step's business
        if len(buckets) >= 2:
            largest = max(buckets)
            list_path = process.path("datasets", dataset.index, "resolution")
            position = buckets.index(largest)
            found.fields.append(
                FieldProposal(
                    path=(*list_path, position),
                    before=largest,
                    after=MISSING,
                    default_on=True,
                    label=process.label(f"bucket {largest} (dataset {dataset.name})"),
                    ui_hint=process.hint(list_path),
                    control="bucket",
                    group=format_path(list_path),
                    group_items=buckets,
                )
            )
        else:
            _step_down(process, found, dataset.index, buckets[0], dataset.resolution_is_list, True)
    if found.fields:
        found.notes.append("Each dataset keeps at least one resolution.")


def _recipe(process: _Process, found: _Found, names: tuple[RecipeField, ...]) -> None:
    """The arch recipe's fields among ``names``, each proposed where the config differs."""
    facts = process.facts
    if facts is None:
        return
    for change in facts.low_memory.changes(names):
        _recipe_field(process, found, change.field, change.value)


def _recipe_field(process: _Process, found: _Found, key: str, value: bool | float | str) -> None:
    section, name = key.split(".", 1)
    view = process.view.train if section == "train" else process.view.model
    if not view.is_known(name):
        found.note_placeholder(process, section, name)
        return
    raw = process.get(section, name)
    current = getattr(view, name)
    if name in ("qtype", "qtype_te") and raw not in (MISSING, None, ""):
        return  # the user chose a quantization type; the recipe only fills a missing one
    if name == "cache_text_embeddings" and process.view.train.unload_text_encoder is True:
        found.notes.append(
            "Cached text embeddings are not offered: train.unload_text_encoder is on, and the "
            "two exclude each other."
        )
        return
    if same_value(current, value):
        return
    _propose(
        found,
        process,
        (section, name),
        value,
        before=raw,
        control="text" if isinstance(value, str) else "switch",
    )


# --- validation run --------------------------------------------------------------------------


#: ``save.save_every`` when the config does not say (AI Toolkit's ``SaveConfig`` default).
DEFAULT_SAVE_EVERY: Final = 1000


def validation_run_steps(process: ProcessView, save_every: Any, wanted: int, start: int = 0) -> int:
    """``train.steps`` of a short validation run of ``process`` that wants ``wanted`` steps.

    The run must get through a periodic save and a periodic sample where the config makes
    them, so the count is raised to one past the first of each. AI Toolkit's loop (0-based
    ``step`` from the resume step ``start``, which is excluded) saves when
    ``step % save_every == 0`` and samples after it when ``sample_every`` is set,
    ``step >= sample_start_step`` and sampling is not disabled: the first save is at the first
    multiple of ``save_every`` past ``start``, the first sample at the first multiple of
    ``sample_every`` from ``max(sample_start_step, start + 1)``. A resumed run trains from
    ``start`` up to ``train.steps``, so the steps are counted from there
    (:mod:`oom_wizard.storage.resume`).

    Args:
        process: The training process.
        save_every: ``save.save_every`` as written (``MISSING``: the toolkit's default).
        wanted: The steps asked for (``--validation-steps``, the presets' limit).
        start: The step the run resumes from (0: a fresh run).
    """
    reach = start + wanted
    every = DEFAULT_SAVE_EVERY if save_every is MISSING or save_every is None else save_every
    if isinstance(every, int) and not isinstance(every, bool) and every > 0:
        reach = max(reach, (start // every + 1) * every + 1)
    sample = process.sample
    sample_every = (sample.sample_every or 0) if sample is not None else 0
    if sample is not None and sample_every > 0 and not process.train.disable_sampling:
        first = max(int(sample.sample_start_step or 0), start + 1)
        reach = max(reach, math.ceil(first / sample_every) * sample_every + 1)
    return reach


def validation_choice(
    document: JobDocument, plan: Plan, wanted: int, start: int = 0
) -> StepChoice | None:
    """The validation run's choice for ``wanted`` steps from step ``start`` (None: the plan
    has none).

    Each process's count is :func:`validation_run_steps`; a process whose run would not be
    shorter than its full run keeps its step count (that field is off).
    """
    step = plan.step(VALIDATION_RUN)
    if step is None:
        return None
    by_path = {p.path("train", "steps"): p for p in document.view().processes}
    fields: dict[str, bool] = {}
    values: dict[str, Any] = {}
    for proposal in step.fields:
        process = by_path.get(proposal.path)
        if process is None:
            continue
        save_every = document.get(process.path("save", "save_every"))
        count = validation_run_steps(process, save_every, wanted, start)
        if isinstance(proposal.before, int) and count >= proposal.before:
            fields[proposal.key] = False
        else:
            values[proposal.key] = count
    return StepChoice(
        step_id=VALIDATION_RUN,
        enabled=bool(values),
        fields=MappingProxyType(fields),
        values=MappingProxyType(values),
    )


@_builds("validation_run")
def _validation_run(process: _Process, moment: Moment, found: _Found) -> None:
    train = process.view.train
    if not train.is_known("steps"):
        found.note_placeholder(process, "train", "steps")
    elif (train.steps or 0) > (
        steps := validation_run_steps(
            process.view, process.get("save", "save_every"), process.limits.validation_steps
        )
    ):
        # The count a fresh run is written with: the presets' steps raised past the first
        # save and sample. A config already at it has the step. The application layer counts it
        # again
        # from where the job resumes, on the config the other choices leave.
        _propose(found, process, ("train", "steps"), steps, control="number")


# --------------------------------------------------------------------------- choices


def changes_for(plan: Plan, choices: Mapping[str, StepChoice] | None = None) -> list[Change]:
    """The field changes the choices make, in plan order.

    Args:
        plan: The plan.
        choices: Step id → choice. None means the defaults (:meth:`Plan.default_choices`):
            every step of the default fix with its default field toggles. A step missing
            from a mapping is off.

    A field whose ``requires`` field is off is left out; the buckets of one list become one
    change of the whole list; when two steps change the same field, the later one wins (in
    the earlier one's place): its rung starts from the value the earlier one leaves, once
    :func:`given_choices` has said so.
    """
    if choices is None:
        choices = plan.default_choices()
    changes: dict[FieldPath, Change] = {}
    for step in plan.steps:
        choice = choices.get(step.id)
        if choice is None or not choice.enabled:
            continue
        for change in _step_changes(step, choice):
            changes[change.path] = change
    return list(changes.values())


def given_choices(
    plan: Plan,
    document: JobDocument,
    choices: Mapping[str, StepChoice] | None = None,
    presets: Presets | None = None,
) -> Plan:
    """The plan with each step's proposals as the choices of the steps before it leave them.

    A field that an earlier step's choice changes (a value typed there, or its proposal) is
    proposed again by the later step from that value: its ``before`` is the earlier value
    (``set_by`` names the step) and its ``after`` the later step's own rung counted from
    there, as the step's builder finds it in the config with the earlier changes made. A
    field with no rung left below the earlier value leaves the later step, whose note says
    where the value stays. Steps no earlier choice touches are returned as they are (the
    plan itself when none is touched).

    Args:
        plan: The plan, built on ``document``.
        document: The config as loaded.
        choices: Step id → choice (None: the plan's defaults); steps missing are off.
        presets: The preset data (default: the shipped presets).

    Raises:
        EditError: an earlier change cannot be made safely.
    """

    if choices is None:
        choices = plan.default_choices()
    made: dict[FieldPath, tuple[Change, str]] = {}
    steps: list[StepProposal] = []
    for step in plan.steps:
        if any(proposal.changes in made for proposal in step.fields):
            earlier = [change for change, _ in made.values()]
            current = prepare(document, earlier).after
            step = _rebased(step, plan, current, made, presets or load_presets())
        steps.append(step)
        choice = choices.get(step.id)
        if choice is not None and choice.enabled:
            for change in _step_changes(step, choice):
                made[change.path] = (change, step.title)
    if all(new is old for new, old in zip(steps, plan.steps, strict=True)):
        return plan
    return dataclasses.replace(plan, steps=tuple(steps))


def _rebased(
    step: StepProposal,
    plan: Plan,
    current: JobDocument,
    made: Mapping[FieldPath, tuple[Change, str]],
    presets: Presets,
) -> StepProposal:
    """``step`` with the fields that earlier changes touch proposed again on ``current``."""
    moment, kind = _checked(plan.moment, plan.model_kind)
    processes = _processes(current, presets, kind, plan.gpus)
    again = _step(StepId(step.id), moment, processes, presets, {}, set())
    fresh: dict[FieldPath, list[FieldProposal]] = {}
    for proposal in again.fields:
        fresh.setdefault(proposal.changes, []).append(proposal)
    toggles = {proposal.key: proposal.default_on for proposal in step.fields}
    fields: list[FieldProposal] = []
    stays: list[str] = []
    placed: set[FieldPath] = set()
    for proposal in step.fields:
        target = proposal.changes
        if target not in made:
            fields.append(proposal)
            continue
        if target in placed:
            continue
        placed.add(target)
        change, title = made[target]
        found = fresh.get(target, [])
        fields.extend(
            dataclasses.replace(
                new,
                default_on=toggles.get(new.key, new.default_on),
                set_by=title,
                today=proposal.config_before if new.group is None else new.before,
            )
            for new in found
        )
        if not found:
            stays.append(f"{proposal.label} stays at {spelling.value(change.after)} ({title})")
    note = step.note
    if stays:
        left = "; ".join(stays) + ": nothing lower to propose from there."
        note = f"{note} {left}" if note else left
    return dataclasses.replace(step, fields=tuple(fields), note=note)


def _is_increase(proposal: FieldProposal, after: Any) -> bool:
    """Whether an edited value costs more memory than today's
    (see :mod:`oom_wizard.rules.values`)."""

    return validate_value(proposal.path, after, None, before=proposal.config_before).increase


def _step_changes(step: StepProposal, choice: StepChoice) -> Iterable[Change]:
    on = {f.key: choice.fields.get(f.key, f.default_on) for f in step.fields}
    for moot in [key for f in step.fields if on[f.key] for key in f.moots]:
        on[moot] = False
    dropped: dict[str, tuple[FieldPath, tuple[Any, ...], set[int]]] = {}
    for proposal in step.fields:
        if not on[proposal.key] or (proposal.requires and not on.get(proposal.requires, False)):
            continue
        reason = f"{step.title}: {proposal.label}"
        if proposal.group is not None:
            list_path, position = proposal.path[:-1], int(proposal.path[-1])
            _, _, drops = dropped.setdefault(
                proposal.group, (list_path, proposal.group_items, set())
            )
            drops.add(position)
            continue
        after = choice.values.get(proposal.key, proposal.after)
        if proposal.key in choice.values and _is_increase(proposal, after):
            shown_before, shown_after = spelling.before_after(proposal.config_before, after)
            reason += f" (an increase: {shown_before} → {shown_after}, confirmed)"
        yield Change(path=proposal.path, after=after, step=step.id, reason=reason)
    for list_path, items, drops in dropped.values():
        kept = [item for position, item in enumerate(items) if position not in drops]
        if kept:
            gone = ", ".join(str(items[p]) for p in sorted(drops))
            yield Change(
                path=list_path,
                after=kept,
                step=step.id,
                reason=f"{step.title}: drop {gone} from {format_path(list_path)}",
            )
