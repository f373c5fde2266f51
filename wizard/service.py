"""The wizard's state between screens: what was loaded, what the user answered and chose.

The app owns exactly one :class:`WizardState`. Every function here is pure except the few
that read or write files or the jobs database (:func:`open_job`, :func:`open_db_job`,
:func:`save`, :func:`save_scale_up`), which the app runs in worker threads. Each returns a new
state; nothing is changed in place. This module only composes the domain (``document``,
``logscan``, ``diagnosis``, ``plan``, ``changes``, ``jobdb``): it decides nothing about AI
Toolkit by itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeAlias

from wizard.changelog import ChangeLog, Direction, find_changelog, read_changelog
from wizard.changes import Change, Prepared, commit, prepare
from wizard.document import JobDocument, load_document
from wizard.presets import MODEL_KINDS, MOMENTS, load_presets
from wizard.vocabulary import DEFAULT_MOMENT

if TYPE_CHECKING:
    from wizard.diagnosis import Diagnosis
    from wizard.jobdb import AsNew, DbJob, DbSaveResult, InPlace
    from wizard.jobdir import JobLocation
    from wizard.logscan import LogScan
    from wizard.plan import MemoryEstimate, Plan, ScaleUp, StepChoice, StepProposal
    from wizard.probe import ProbeResult
    from wizard.save import SaveResult


#: The optional validation run is offered on the review screen, not as a step screen.
VALIDATION_STEP = "validation_run"


@dataclass(frozen=True)
class ToFile:
    """Save the fix as a new config file and its change log (never over an existing file).

    Attributes:
        output: The new config; None derives it from the source (``my_job.oomfix.yaml``).
        changelog: The change log; None puts it beside the output.
    """

    output: Path | None = None
    changelog: Path | None = None


#: Where a save goes: a new file, or (for a job of the web UI's database) the job's own
#: row (:class:`~wizard.jobdb.InPlace`) or a new job (:class:`~wizard.jobdb.AsNew`).
Destination: TypeAlias = "ToFile | InPlace | AsNew"

#: What a save wrote: files (:class:`~wizard.save.SaveResult`) or a database row.
Saved: TypeAlias = "SaveResult | DbSaveResult"


@dataclass(frozen=True)
class Answers:
    """What the user says about the crash (preselected from the diagnosis)."""

    moment: str
    model_kind: str
    worked_before: bool = False


@dataclass(frozen=True)
class WizardState:
    """Everything the wizard knows about one job, and every choice made so far.

    Attributes:
        document: The config as loaded (never written).
        log_path: The training log used for the diagnosis, if any.
        diagnosis: What the log and config say, knowing the user's answers (None without a
            log).
        changelog: The change log that describes this config, when it is our own output.
        changelog_path: Where that change log is.
        answers: The moment, model kind and "worked before" answer in effect.
        plan: The roll-back plan for those answers.
        choices: The user's choice per step id; a step without one takes its defaults.
        log_note: Which log was taken and why (or why there is none), from the job folder.
        ui_job: The config is the web UI's ``.job_config.json``: the fix goes back into the UI.
        scan: What the log shows (read once, when the job is opened).
        probe: The GPU as ``nvidia-smi`` showed it when the job was opened (None without one).
        crashed_again: The user says the retry of this (our own) config crashed too: steps
            that go down one rung per retry go one rung further.
        db_job: The row of AI Toolkit's jobs database the config was read from, when it was
            (``document.source`` is then the job's pseudo path, not a file).
        log_diagnosis: The log's own verdict, before any answer of the user (None without a
            log): what "the log points to" shows, whatever the user picks.
    """

    document: JobDocument
    log_path: Path | None
    diagnosis: Diagnosis | None
    changelog: ChangeLog | None
    changelog_path: Path | None
    answers: Answers
    plan: Plan
    choices: Mapping[str, StepChoice] = field(default_factory=lambda: MappingProxyType({}))
    log_note: str | None = None
    ui_job: bool = False
    scan: LogScan | None = None
    probe: ProbeResult | None = None
    crashed_again: bool = False
    db_job: DbJob | None = None
    log_diagnosis: Diagnosis | None = None

    @property
    def source(self) -> Path:
        """The config file the wizard was opened on (a database job's pseudo path)."""
        return self.document.source

    @property
    def coming_back(self) -> bool:
        """Whether this config is the output of an earlier run of the wizard."""
        return self.changelog is not None and self.changelog.last_run() is not None

    def rollback_steps(self) -> tuple[StepProposal, ...]:
        """The steps shown one screen each (the validation run is offered on the review)."""
        return tuple(step for step in self.plan.steps if step.id != VALIDATION_STEP)

    def validation_step(self) -> StepProposal | None:
        """The optional short validation run, when the plan offers one."""
        return next((s for s in self.plan.steps if s.id == VALIDATION_STEP), None)


def open_job(target: Path, log: Path | None = None) -> WizardState:
    """Load a config (or the config of a job folder), its log and change log, and diagnose.

    This reads files: run it in a worker thread.

    Args:
        target: A config file or an AI Toolkit job folder.
        log: The training log, when it is not the job folder's own.

    Raises:
        WizardError: the config, the log or the change log cannot be read.
    """
    from wizard.jobdir import locate_job

    located = locate_job(target)
    document = load_document(located.config)
    changelog_path = find_changelog(located.config)
    changelog = read_changelog(changelog_path) if changelog_path is not None else None
    return _opened(document, located, log, changelog, changelog_path)


def open_db_job(db: Path, name: str, log: Path | None = None) -> WizardState:
    """Load a job of AI Toolkit's jobs database, its log (through its folder) and change log.

    This reads the database and files: run it in a worker thread.

    Args:
        db: ``aitk_db.db``, or the toolkit's folder that holds it.
        name: The job's name, as the UI lists it.
        log: The training log, when the job's folder is not reachable from here.

    Raises:
        WizardError: no such job, a database or stored config that cannot be read, or a log
            or change log that cannot be read.
    """
    from wizard.jobdb import find_db, job_document, load_job, locate_job_log, read_job_changelog

    job = load_job(find_db(db), name)
    document = job_document(job)
    located = locate_job_log(job, document.tree)
    changelog = read_job_changelog(job)
    changelog_path = job.changelog_path if changelog is not None else None
    state = _opened(document, located, log, changelog, changelog_path)
    return replace(state, db_job=job)


def _opened(
    document: JobDocument,
    located: JobLocation,
    log: Path | None,
    changelog: ChangeLog | None,
    changelog_path: Path | None,
) -> WizardState:
    """The first state of a loaded job: its log scanned and diagnosed, the plan built.

    Args:
        document: The config.
        located: Where the job's own log is (and whether it is a web-UI job).
        log: A log given by the user; it wins over the located one.
        changelog: The change log that describes this config, if any.
        changelog_path: Where that change log is.
    """
    from wizard.probe import probe_gpu

    log_path = log if log is not None else located.log
    note = None if log is not None else located.log_note
    own_scan = located.log_scan if log is None else None
    scan = own_scan or _scan(log_path)
    probe = probe_gpu()
    diagnosis = _diagnose(document, scan, changelog, None, probe)
    answers = Answers(
        moment=_detected_moment(diagnosis),
        model_kind=_detected_kind(document, diagnosis),
    )
    plan = _plan(document, answers, changelog, diagnosis, new_crash=False)
    return WizardState(
        document,
        log_path,
        diagnosis,
        changelog,
        changelog_path,
        answers,
        plan,
        log_note=note,
        ui_job=located.ui_job,
        scan=scan,
        probe=probe,
        log_diagnosis=diagnosis,
    )


def answer(state: WizardState, answers: Answers) -> WizardState:
    """The state after the user's answers: a fresh diagnosis and plan, choices reset."""
    if answers == state.answers:
        return state
    diagnosis = _diagnose(state.document, state.scan, state.changelog, answers, state.probe)
    plan = _plan(state.document, answers, state.changelog, diagnosis, state.crashed_again)
    return replace(
        state, answers=answers, diagnosis=diagnosis, plan=plan, choices=MappingProxyType({})
    )


def retry_crashed(state: WizardState) -> WizardState:
    """The state after "the retry ran out of memory again": the plan goes one rung further."""
    plan = _plan(state.document, state.answers, state.changelog, state.diagnosis, new_crash=True)
    return replace(state, crashed_again=True, plan=plan, choices=MappingProxyType({}))


def choose(state: WizardState, choice: StepChoice) -> WizardState:
    """The state with one step's choice recorded (replacing an earlier one)."""
    choices = dict(state.choices)
    choices[choice.step_id] = choice
    return replace(state, choices=MappingProxyType(choices))


def default_choice(step: StepProposal) -> StepChoice:
    """What accepting a step's defaults means."""
    from wizard.plan import StepChoice

    return StepChoice(step_id=step.id, enabled=step.default_on and not step.satisfied)


def effective_choices(
    state: WizardState, upto: int | None = None, extra: StepChoice | None = None
) -> dict[str, StepChoice]:
    """The choice for every step: made, or the default for steps not decided yet.

    Args:
        state: The wizard state.
        upto: Only the first ``upto`` roll-back steps count (the rest are left off);
            None counts every step, with its default where undecided.
        extra: A choice that overrides the recorded one (the step being edited).
    """
    steps = state.rollback_steps()
    decided: dict[str, StepChoice] = {}
    for index, step in enumerate(steps):
        if upto is not None and index >= upto:
            decided[step.id] = _off(step.id)
        else:
            decided[step.id] = state.choices.get(step.id) or default_choice(step)
    validation = state.validation_step()
    if validation is not None:
        decided[validation.id] = state.choices.get(validation.id) or default_choice(validation)
    if extra is not None:
        decided[extra.step_id] = extra
    return decided


def changes(state: WizardState, choices: Mapping[str, StepChoice]) -> list[Change]:
    """The field changes the choices make."""
    from wizard.plan import changes_for

    return changes_for(state.plan, choices)


def prepared(state: WizardState, choices: Mapping[str, StepChoice]) -> Prepared:
    """The choices applied in memory (raises EditError if an edit cannot be made)."""
    return prepare(state.document, changes(state, choices))


def estimate(state: WizardState, choices: Mapping[str, StepChoice]) -> MemoryEstimate:
    """The relative memory estimate of the choices (today's config = 100)."""
    from wizard.plan import estimate as plan_estimate

    return plan_estimate(state.document, changes(state, choices), state.answers.model_kind)


def applied_steps(choices: Mapping[str, StepChoice]) -> list[str]:
    """The ids of the steps that are switched on, in plan order."""
    return [step_id for step_id, choice in choices.items() if choice.enabled]


def save(state: WizardState, choices: Mapping[str, StepChoice], destination: Destination) -> Saved:
    """Write the roll-back: a new config file, or into the jobs database.

    Raises:
        SaveRefused: the output or change log is refused; nothing is written.
        JobDatabaseError: the database refuses (a running job, a taken name, a lock).
        EditError: an edit cannot be made safely.
    """
    ready = prepared(state, choices)
    diagnosis = state.diagnosis.to_json() if state.diagnosis is not None else None
    return _write(
        state,
        ready,
        destination,
        direction="rollback",
        moment=state.answers.moment,
        diagnosis=diagnosis,
        steps=applied_steps(choices),
    )


def default_file_output(state: WizardState) -> Path:
    """The first free file name for the fix saved as a file.

    Beside the source for a config file; in the working folder, after the job's name, for
    a database job (whose config has no file of its own).
    """
    from wizard.save import default_output_path

    if state.db_job is None:
        return default_output_path(state.source)
    name = state.db_job.changelog_path.name.removesuffix(".changelog.json")
    return default_output_path(Path(f"{name}.json"))


def next_scale_up(state: WizardState) -> ScaleUp | None:
    """The one setting the next retry gets back, or None when everything is restored."""
    from wizard.plan import next_scale_up as plan_next_scale_up

    if state.changelog is None:
        return None
    return plan_next_scale_up(state.document, state.changelog)


def save_scale_up(state: WizardState, scale_up: ScaleUp, destination: Destination) -> Saved:
    """Write the scaled-up config and append a ``scale_up`` run to its change log.

    Raises:
        SaveRefused: the output or change log is refused; nothing is written.
        JobDatabaseError: the database refuses (a running job, a taken name, a lock).
    """
    ready = prepare(state.document, list(scale_up.changes))
    return _write(state, ready, destination, direction="scale_up", steps=[scale_up.step])


def _write(
    state: WizardState,
    ready: Prepared,
    destination: Destination,
    *,
    direction: Direction,
    steps: list[str],
    moment: str | None = None,
    diagnosis: dict[str, Any] | None = None,
) -> Saved:
    """Save ``ready`` where ``destination`` says, with one run of the change log."""
    if isinstance(destination, ToFile):
        return commit(
            ready,
            direction=direction,
            moment=moment,
            model_kind=state.answers.model_kind,
            diagnosis=diagnosis,
            steps=steps,
            output=destination.output,
            changelog_path=destination.changelog,
        )
    if state.db_job is None:
        raise ValueError("only a job of the jobs database can be saved into it")
    from wizard.jobdb import save_to_db

    return save_to_db(
        ready,
        state.db_job,
        destination,
        direction=direction,
        moment=moment,
        model_kind=state.answers.model_kind,
        diagnosis=diagnosis,
        steps=steps,
    )


def _off(step_id: str) -> StepChoice:
    from wizard.plan import StepChoice

    return StepChoice(step_id=step_id, enabled=False)


def _scan(log_path: Path | None) -> LogScan | None:
    """The log's scan (streamed, bounded memory), None without a log."""
    if log_path is None:
        return None
    from wizard.logscan import scan_log

    return scan_log(log_path)


def _diagnose(
    document: JobDocument,
    scan: LogScan | None,
    changelog: ChangeLog | None,
    answers: Answers | None,
    probe: ProbeResult | None,
) -> Diagnosis | None:
    """The diagnosis of the log (None without a log), knowing the answers and last change."""
    if scan is None:
        return None
    from wizard.diagnosis import diagnose

    given: dict[str, Any] = {}
    if answers is not None:
        given = {
            "moment": answers.moment,
            "model_kind": answers.model_kind,
            "worked_before": answers.worked_before,
        }
    return diagnose(scan, document.view(), answers=given, probe=probe, changelog=changelog)


def _detected_moment(diagnosis: Diagnosis | None) -> str:
    moment = getattr(diagnosis, "moment", None)
    return moment if moment in MOMENTS else DEFAULT_MOMENT


def _detected_kind(document: JobDocument, diagnosis: Diagnosis | None) -> str:
    kind = getattr(diagnosis, "model_kind", None)
    if kind in MODEL_KINDS:
        return str(kind)
    primary = document.view().primary
    if primary is not None:
        facts = load_presets().arch_from_model(document.get(primary.path("model"), {}))
        if facts is not None:
            return facts.ladder_kind
        if any(dataset.is_video for dataset in primary.datasets):
            return "video"
    return "image"


def _plan(
    document: JobDocument,
    answers: Answers,
    changelog: ChangeLog | None,
    diagnosis: Diagnosis | None,
    new_crash: bool,
) -> Plan:
    from wizard.plan import build_plan

    return build_plan(
        document,
        answers.moment,
        answers.model_kind,
        changelog=changelog,
        diagnosis=diagnosis,
        new_crash=new_crash,
    )
