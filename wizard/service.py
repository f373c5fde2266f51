"""The application service: the one path from a request to a saved config, for both front ends.

The command line (``oom_wizard.commands``) and the app (``screens``) call only this module for a
job: they parse or render, it decides. It composes the domain (``jobdir``, ``jobdb``,
``document``, ``logscan``, ``diagnosis``, ``plan``, ``changes``) and holds the rules that must
exist once:

- **Opening** (:func:`open_job`): a config file, an AI Toolkit job folder or a job of the web
  UI's database becomes one :class:`OpenedJob`. The GPU is probed when the request says so
  (:attr:`JobRequest.probe <wizard.request.JobRequest.probe>`, on unless ``--no-probe``), the
  same for every command and the app.
- **The change log beside the config**: read when it is there; a change log that cannot be
  read stops the open with its one-line error (exit status 2 on the command line, the same
  line on the app's load screen). Why refuse rather than note it and go on: the change log
  decides which steps are already done, how far a crash-again goes and what the scale-up gives
  back, and a save appends to it. Going on without it would plan from a wrong history and then
  fail (or fork the history) at the save; the user's file is left as it is, to fix or move.
- **Settling** (:func:`settle`): the user's :class:`Answers` (any field may be unsaid) with the
  log, the config and the probe give one diagnosis, one moment (answer, else the log, else
  :data:`~wizard.vocabulary.DEFAULT_MOMENT`), one model kind (answer, else
  :func:`oom_wizard.modelkind.find_model_kind`, else image), and one plan.
- **Recording** (:func:`save`, :func:`save_scale_up`): one run of the change log whose
  ``steps`` are the steps that changed a field (:func:`recorded_steps`); a step that was
  switched on but changed nothing is not recorded as applied.

The app owns one :class:`WizardState`; every function returns a new one. The functions that
read or write files or the database run in the app's worker threads.
"""

from __future__ import annotations

import importlib
import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

from oom_wizard.errors import SaveRefused, WizardError
from oom_wizard.paths import MISSING, format_path
from oom_wizard.request import JobRequest
from oom_wizard.vocabulary import DEFAULT_MOMENT, VALIDATION_RUN, ModelKind, Moment

if TYPE_CHECKING:
    from oom_wizard.catalog import ArchFacts, MomentInfo
    from oom_wizard.changelog import (
        ChangeEntry,
        ChangeLog,
        Direction,
        EditedSinceSave,
        changelog_path_for,
    )
    from oom_wizard.changes import Change, Prepared
    from oom_wizard.diagnosis import Answers, Diagnosis
    from oom_wizard.document import JobDocument
    from oom_wizard.errors import Front
    from oom_wizard.follow import JobRow, LiveJob, LiveStatus, LiveUpdate, WatchTarget, read_job_row
    from oom_wizard.jobdb import AsNew, DbJob, DbSaveResult, InPlace
    from oom_wizard.jobdir import JobLocation
    from oom_wizard.logread import ScanCancelled, Watch, watching
    from oom_wizard.logscan import LogScan
    from oom_wizard.memory import Band, Calibration, JobMemory, Parts, Prediction, Verdict
    from oom_wizard.paths import FieldPath
    from oom_wizard.plan import (
        FieldProposal,
        MemoryEstimate,
        Plan,
        ScaleUp,
        StepChoice,
        StepProposal,
    )
    from oom_wizard.probe import ProbeResult, probe_gpu, read_host_memory
    from oom_wizard.resume import ResumePoint
    from oom_wizard.save import SaveResult
    from oom_wizard.settings import SettingProblem, UserKeymap
    from oom_wizard.sizing import FIX_WORDS, FixName, MemoryPeak
    from oom_wizard.values import ValueCheck
    from oom_wizard.view import ProcessView


__all__ = [
    "FIX_WORDS",
    "LOG_SUFFIXES",
    "MISSING",
    "RUN_LOG_SUFFIX",
    "VALIDATION_STEP",
    "Answers",
    "AsNew",
    "Band",
    "Calibration",
    "ChangeEntry",
    "CrashReport",
    "DbJob",
    "DbSaveResult",
    "Destination",
    "EditedSinceSave",
    "EnvironmentVerdict",
    "FieldProposal",
    "FileTarget",
    "FixName",
    "InPlace",
    "JobMemory",
    "JobRequest",
    "JobRow",
    "Jumped",
    "LastRun",
    "LeavingSummary",
    "LiveJob",
    "LiveStatus",
    "LiveUpdate",
    "MemoryEstimate",
    "MemoryPeak",
    "MomentInfo",
    "OpenedJob",
    "Parts",
    "Plan",
    "Prediction",
    "Prepared",
    "RetryAnswer",
    "SaveResult",
    "Saved",
    "ScaleUp",
    "ScanCancelled",
    "SettingProblem",
    "Settled",
    "StepChoice",
    "StepProposal",
    "StepStatus",
    "ToFile",
    "UserKeymap",
    "ValueCheck",
    "Verdict",
    "Watch",
    "WatchTarget",
    "WizardState",
    "advice_for",
    "answer",
    "arch_label",
    "change_why",
    "changelog_path_for",
    "changes",
    "check_value",
    "choose",
    "crashed_job_note",
    "db_job_arguments",
    "default_choice",
    "default_choices",
    "default_file_output",
    "diagnose_crash",
    "done_before",
    "edited_words",
    "effective_batch_note",
    "effective_choices",
    "environment_verdict",
    "estimate",
    "file_target",
    "first_step",
    "fix_names",
    "fix_steps_words",
    "fix_summary",
    "fix_words",
    "followed_values",
    "format_path",
    "keymap_problems_line",
    "last_run",
    "later_lines",
    "leaving_summary",
    "list_jobs",
    "memory_peak",
    "moment_info",
    "new_job_name_problem",
    "new_job_warning",
    "next_scale_up",
    "nothing_left",
    "offers_save_now",
    "open_job",
    "pending_scale_ups",
    "picker_folder",
    "prepare_edit",
    "prepare_scale_up",
    "prepared",
    "preselect_fix",
    "probe_gpu",
    "read_host_memory",
    "read_job_row",
    "recorded_steps",
    "remember_theme",
    "reopen_command",
    "request_save_now",
    "resume_of",
    "retry_answer",
    "retry_crashed",
    "run_command",
    "run_command_for",
    "run_log_for",
    "save",
    "save_now_question",
    "save_scale_up",
    "saved_keymap",
    "saved_theme",
    "scale_up_notes",
    "scale_ups_ahead",
    "settle",
    "source_words",
    "start",
    "step_status",
    "ui_hint",
    "ui_job_instructions",
    "ui_job_note",
    "validation_choice",
    "validation_note",
    "warm_up",
    "watching",
]

#: What the service re-exports of the domain, by module. Each is imported when first asked for
#: (``from oom_wizard.service import Plan``), and each function below imports what it runs: so
#: importing the service costs nothing of the domain, and a command or the app's first frame
#: loads only the modules it uses (``fit`` never loads the jobs database or the save pipeline).
_REEXPORTED: Final[Mapping[str, tuple[str, ...]]] = {
    "oom_wizard.catalog": ("MomentInfo",),
    "oom_wizard.changelog": ("ChangeEntry", "EditedSinceSave", "changelog_path_for"),
    "oom_wizard.changes": ("Prepared",),
    "oom_wizard.diagnosis": ("Answers",),
    "oom_wizard.follow": (
        "JobRow",
        "LiveJob",
        "LiveStatus",
        "LiveUpdate",
        "WatchTarget",
        "read_job_row",
    ),
    "oom_wizard.jobdb": ("AsNew", "DbJob", "DbSaveResult", "InPlace"),
    "oom_wizard.logread": ("ScanCancelled", "Watch", "watching"),
    "oom_wizard.memory": ("Band", "Calibration", "JobMemory", "Parts", "Prediction", "Verdict"),
    "oom_wizard.plan": (
        "FieldProposal",
        "MemoryEstimate",
        "Plan",
        "ScaleUp",
        "StepChoice",
        "StepProposal",
    ),
    "oom_wizard.probe": ("probe_gpu", "read_host_memory"),
    "oom_wizard.save": ("SaveResult",),
    "oom_wizard.settings": ("SettingProblem", "UserKeymap"),
    "oom_wizard.sizing": ("FIX_WORDS", "FixName", "MemoryPeak"),
    "oom_wizard.values": ("ValueCheck",),
}
_SOURCE_OF: Final = {name: module for module, names in _REEXPORTED.items() for name in names}


def __getattr__(name: str) -> object:
    """A re-exported name of the domain, imported from its module on first use (PEP 562)."""
    module = _SOURCE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value: object = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


#: The optional validation run is offered on the review screen, not as a step screen.
VALIDATION_STEP = VALIDATION_RUN

#: Where a settled moment or kind came from: the user, the log (or config), or a default.
Source = Literal["answer", "found", "assumed"]


@dataclass(frozen=True)
class ToFile:
    """Save the fix as a new config file and its change log (never over an existing file).

    Attributes:
        output: The new config; None derives it from the source (``my_job.oomfix.yaml``).
        changelog: The change log; None puts it beside the output.
        force: Replace ``output`` if it exists (never the source; ``apply --force``).
    """

    output: Path | None = None
    changelog: Path | None = None
    force: bool = False


#: Where a save goes: a new file, or (for a job of the web UI's database) the job's own
#: row (:class:`~wizard.jobdb.InPlace`) or a new job (:class:`~wizard.jobdb.AsNew`).
Destination: TypeAlias = "ToFile | InPlace | AsNew"

#: What a save wrote: files (:class:`~wizard.save.SaveResult`) or a database row.
Saved: TypeAlias = "SaveResult | DbSaveResult"


# --- opening ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OpenedJob:
    """A job as read: its config, its log and change log, the GPU now, and the log's verdict.

    Attributes:
        document: The config as loaded (never written).
        log_path: The training log used for the diagnosis, if any.
        log_note: Which log was taken and why (or why there is none), from the job folder.
        scan: What the log shows (read once, here).
        changelog: The change log that describes this config, when it is our own output.
        changelog_path: Where that change log is.
        ui_job: The config is the web UI's ``.job_config.json``: the fix goes back into the UI.
        db_job: The row of AI Toolkit's jobs database the config was read from, when it was
            (``document.source`` is then the job's pseudo path, not a file).
        probe: The GPU as ``nvidia-smi`` showed it at the open (None: not probed, or none).
        log_diagnosis: The diagnosis before any answer of the user: what "the log points to"
            shows, whatever the user picks.
        crashed_since_rollback: The log is newer than the change log's last roll-back and
            shows a crash: the retry of our own fix crashed too (the plan goes a rung further).
    """

    document: JobDocument
    log_path: Path | None
    log_note: str | None
    scan: LogScan | None
    changelog: ChangeLog | None
    changelog_path: Path | None
    ui_job: bool
    db_job: DbJob | None
    probe: ProbeResult | None
    log_diagnosis: Diagnosis
    crashed_since_rollback: bool

    @property
    def source(self) -> Path:
        """The config file the job was opened from (a database job's pseudo path)."""
        return self.document.source


def open_job(request: JobRequest) -> OpenedJob:
    """Read what the request names: the config, its log, its change log, and the GPU.

    This reads files (and the database): the app runs it in a worker thread.

    Raises:
        WizardError: nothing to open, no such job, or a config, log or change log that
            cannot be read (the change log too: see the module's policy).
    """
    from oom_wizard.changelog import changelog_for, changelog_path_for, refuse_edited
    from oom_wizard.diagnosis import diagnose
    from oom_wizard.document import load_document

    if request.db is not None:
        if request.job is None:
            raise WizardError("pick a job with --job NAME (without it, --db lists the jobs)")
        from oom_wizard.jobdb import find_db, job_document, load_job, locate_job_log

        job = load_job(find_db(request.db), request.job)
        document = job_document(job)
        located = locate_job_log(job, document.tree)
        belonging = changelog_for(job.source, job.job_config.encode("utf-8"), job.changelog_to_read)
        db_job: DbJob | None = job
    elif request.target is not None:
        from oom_wizard.jobdir import locate_job

        located = locate_job(request.target)
        document = load_document(located.config)
        belonging = changelog_for(
            located.config, _bytes_of(located.config), changelog_path_for(located.config)
        )
        db_job = None
    else:
        raise WizardError("give the job's config file (or its folder), or --db PATH --job NAME")
    if belonging is not None and belonging.edited and not request.edited_ok:
        raise refuse_edited(belonging, document.source)
    changelog = belonging.log if belonging is not None else None
    changelog_path = belonging.path if belonging is not None else None
    log_path, note, scan = _chosen_log(located, request.log)
    probe = _probe() if request.probe else None
    log_diagnosis = diagnose(scan, document.view(), answers=None, probe=probe, changelog=changelog)
    return OpenedJob(
        document=document,
        log_path=log_path,
        log_note=note,
        scan=scan,
        changelog=changelog,
        changelog_path=changelog_path if changelog is not None else None,
        ui_job=located.ui_job,
        db_job=db_job,
        probe=probe,
        log_diagnosis=log_diagnosis,
        crashed_since_rollback=_crashed_since(log_path, changelog, log_diagnosis),
    )


def edited_words(refusal: Exception) -> str:
    """The app's question for a config edited after our save (the command line's refusal
    asks for ``--edited-ok``; the app asks yes or no instead)."""
    from oom_wizard.changelog import EditedSinceSave

    if not isinstance(refusal, EditedSinceSave):
        return str(refusal)
    belonging = refusal.belonging
    return (
        f"{refusal.file}: edited after oom-wizard saved it: its SHA-256 is not the one its "
        f"change log {belonging.path} recorded, so that log's story may not describe it. "
        "Go on from the file as it is now, with that change log?"
    )


def _bytes_of(path: Path) -> bytes:
    """The config's bytes as read (for the change log's SHA-256), empty when unreadable."""
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _chosen_log(
    located: JobLocation, log: Path | None
) -> tuple[Path | None, str | None, LogScan | None]:
    """The log given by the user (it wins), else the job folder's; its note and its scan."""
    if log is not None:
        from oom_wizard.logscan import scan_log

        return log, None, scan_log(log)
    scan = located.log_scan
    if scan is None and located.log is not None:
        from oom_wizard.logscan import scan_log

        scan = scan_log(located.log)
    return located.log, located.log_note, scan


def _probe() -> ProbeResult | None:
    from oom_wizard.probe import probe_gpu

    return probe_gpu()


def _crashed_since(log: Path | None, changelog: ChangeLog | None, diagnosis: Diagnosis) -> bool:
    """Whether the log crashed after the change log's last roll-back was saved."""
    if log is None or changelog is None or not diagnosis.crashed:
        return False
    rollbacks = [run for run in changelog.runs if run.direction == "rollback"]
    if not rollbacks:
        return False
    try:
        saved = datetime.fromisoformat(rollbacks[-1].at)
        written = datetime.fromtimestamp(log.stat().st_mtime, tz=timezone.utc)
    except (ValueError, OSError):
        return False
    return written > saved


# --- settling -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Settled:
    """The answers settled against the job: one diagnosis, one moment and kind, one plan.

    Attributes:
        moment: The crash moment in effect.
        moment_source: ``answer`` (the user's), ``found`` (the log's) or ``assumed``.
        model_kind: The model kind in effect.
        kind_source: ``answer``, ``found`` (the config's) or ``assumed`` (nothing says).
        kind_reason: Where a found or assumed kind comes from, in words.
        diagnosis: The diagnosis, knowing the answers.
        plan: The roll-back plan for the moment and kind.
        new_crash: The plan goes one rung further (the retry of our fix crashed too).
    """

    moment: Moment
    moment_source: Source
    model_kind: ModelKind
    kind_source: Source
    kind_reason: str
    diagnosis: Diagnosis
    plan: Plan
    new_crash: bool


def settle(job: OpenedJob, answers: Answers, *, new_crash: bool = False) -> Settled:
    """The diagnosis, moment, kind and plan for the user's answers.

    Args:
        job: The opened job.
        answers: What the user says; an unsaid moment or kind comes from the log and config.
        new_crash: The user says the retry of this (our own) config crashed too; a log newer
            than the last roll-back that shows a crash says so as well.
    """
    from oom_wizard.diagnosis import Answers
    from oom_wizard.modelkind import find_model_kind
    from oom_wizard.plan import build_plan

    found = find_model_kind(job.document.view().primary)
    answers = _disagreeing(answers, job.log_diagnosis.moment, found.kind)
    # Nothing said beyond the log and the config: the open's own diagnosis is this one (the
    # same inputs), so opening a job diagnoses it once.
    diagnosis = job.log_diagnosis if answers == Answers() else _diagnosis(job, answers)
    moment: Moment
    moment_source: Source
    if answers.moment is not None:
        moment, moment_source = answers.moment, "answer"
    elif diagnosis.moment is not None:
        moment, moment_source = diagnosis.moment, "found"
    else:
        moment, moment_source = DEFAULT_MOMENT, "assumed"
    kind_source: Source
    if answers.model_kind is not None:
        kind, kind_source = answers.model_kind, "answer"
    else:
        kind, kind_source = found.settled, "found" if found.kind is not None else "assumed"
    crashed = new_crash or job.crashed_since_rollback
    calibration, card = crash_figures(job, diagnosis, moment)
    plan = build_plan(
        job.document,
        moment,
        kind,
        changelog=job.changelog,
        diagnosis=diagnosis,
        new_crash=crashed,
        calibration=calibration,
        card_gib=card,
        gpus=len(job.probe.gpus) if job.probe is not None else 1,
    )
    return Settled(moment, moment_source, kind, kind_source, found.source, diagnosis, plan, crashed)


def crash_figures(
    job: OpenedJob, diagnosis: Diagnosis, moment: str
) -> tuple[Calibration | None, float | None]:
    """The crash's own figures for the phase a crash at ``moment`` ran into (PyTorch's OOM
    message, when the log holds one and its phase is that one), and the card's capacity: the
    message's, else the probe's (None: unknown)."""
    from oom_wizard.memory import calibration_from, phase_of
    from oom_wizard.sizing import phase_of_moment, phases_of_moment

    phases = phases_of_moment(moment)
    logged = phase_of(diagnosis)
    calibration = None
    if phases and (logged is None or logged in phases):
        calibration = calibration_from(diagnosis, logged or phase_of_moment(moment))
    card = calibration.card_gib if calibration is not None else None
    return calibration, card if card is not None else card_of(job, diagnosis)[0]


def card_of(job: OpenedJob, diagnosis: Diagnosis) -> tuple[float | None, str | None]:
    """The card's capacity in GiB and where it comes from: PyTorch's OOM message in the log,
    else ``nvidia-smi`` (the largest card); ``(None, None)`` when neither says."""
    if diagnosis.oom is not None and diagnosis.oom.total:
        return diagnosis.oom.total, "PyTorch's OOM message"
    if job.probe is not None and job.probe.gpus:
        return max(gpu.total_gib for gpu in job.probe.gpus), "nvidia-smi"
    return None, None


def memory_peak(
    state: WizardState, choices: Mapping[str, StepChoice] | None = None
) -> MemoryPeak | None:
    """The peak of the config with ``choices`` applied (an empty mapping: today's config;
    None: the default fix), in GiB against the card, with the phase that sets it: what the
    load screen and every step screen show as a bar. None when the plan has no steps."""
    from oom_wizard.catalog import load_presets
    from oom_wizard.plan import changes_for
    from oom_wizard.sizing import Weigher, peak_of

    calibration, _ = crash_figures(state.job, state.diagnosis, state.moment)
    card, source = card_of(state.job, state.diagnosis)
    weigher = Weigher(state.document, state.model_kind, load_presets(), calibration)
    changes = changes_for(given(state, choices), choices) if state.plan.steps else []
    return peak_of(weigher, changes, card, source)


def _diagnosis(job: OpenedJob, answers: Answers) -> Diagnosis:
    """The job's diagnosis for answers that already differ from the job (see :func:`settle`)."""
    from oom_wizard.diagnosis import diagnose

    return diagnose(
        job.scan, job.document.view(), answers=answers, probe=job.probe, changelog=job.changelog
    )


def _disagreeing(answers: Answers, moment: Moment | None, kind: ModelKind | None) -> Answers:
    """The answers without those that only repeat what the log and config say.

    An answer that agrees with the job is no different from no answer: the app, whose moment
    list and kind buttons are preselected from the job, and the command line, with or
    without ``--moment`` / ``--kind``, then settle the same diagnosis.
    """
    return replace(
        answers,
        moment=None if answers.moment == moment else answers.moment,
        model_kind=None if answers.model_kind == kind else answers.model_kind,
    )


# --- the wizard's state ---------------------------------------------------------------------------


@dataclass(frozen=True)
class WizardState:
    """Everything the wizard knows about one job, and every choice made so far.

    Attributes:
        job: The job as opened.
        answers: What the user said (an unsaid field is None).
        settled: The diagnosis, moment, kind and plan for those answers.
        choices: The user's choice per step id; a step without one takes its defaults.
        validation_run: The step count ``run`` asks of the short validation run (0: none);
            None: the plan's own. It outlives new answers (a new plan), as ``run``'s
            option does: see :func:`validation_choice`.
        dropped: Values typed before new answers that the new plan has no row for
            (:func:`answer`); each step's screen says so until the step is decided again.
    """

    job: OpenedJob
    answers: Answers
    settled: Settled
    choices: Mapping[str, StepChoice] = field(default_factory=lambda: MappingProxyType({}))
    validation_run: int | None = None
    dropped: tuple[Dropped, ...] = ()

    @property
    def document(self) -> JobDocument:
        """The config as loaded (never written)."""
        return self.job.document

    @property
    def source(self) -> Path:
        """The config file the wizard was opened on (a database job's pseudo path)."""
        return self.job.source

    @property
    def log_path(self) -> Path | None:
        """The training log the diagnosis read, if any."""
        return self.job.log_path

    @property
    def log_note(self) -> str | None:
        """Which log of the job folder was taken and why."""
        return self.job.log_note

    @property
    def changelog_path(self) -> Path | None:
        """Where the change log that describes this config is."""
        return self.job.changelog_path

    @property
    def plan(self) -> Plan:
        """The roll-back plan in effect."""
        return self.settled.plan

    @property
    def diagnosis(self) -> Diagnosis:
        """The diagnosis, knowing the user's answers."""
        return self.settled.diagnosis

    @property
    def moment(self) -> Moment:
        """The crash moment in effect."""
        return self.settled.moment

    @property
    def model_kind(self) -> ModelKind:
        """The model kind in effect."""
        return self.settled.model_kind

    @property
    def changelog(self) -> ChangeLog | None:
        """The change log that describes this config, when it is our own output."""
        return self.job.changelog

    @property
    def db_job(self) -> DbJob | None:
        """The web UI's job the config was read from, if it was."""
        return self.job.db_job

    @property
    def ui_job(self) -> bool:
        """Whether the config is the web UI's ``.job_config.json`` (or a database job)."""
        return self.job.ui_job

    @property
    def log_diagnosis(self) -> Diagnosis | None:
        """The log's own verdict before any answer (None without a log)."""
        return self.job.log_diagnosis if self.job.scan is not None else None

    @property
    def crashed_again(self) -> bool:
        """Whether the plan goes one rung further (the retry of our fix crashed too)."""
        return self.settled.new_crash

    @property
    def coming_back(self) -> bool:
        """Whether this config is the output of an earlier run of the wizard."""
        return self.changelog is not None and self.changelog.last_run() is not None

    def rollback_steps(self) -> tuple[StepProposal, ...]:
        """The steps shown one screen each (the validation run is offered on the review)."""
        return tuple(step for step in self.plan.steps if step.id != VALIDATION_STEP)

    def step(self, step_id: str) -> StepProposal:
        """The roll-back step with this id (KeyError: not in this plan)."""
        for proposal in self.rollback_steps():
            if proposal.id == step_id:
                return proposal
        raise KeyError(step_id)

    def step_index(self, step_id: str) -> int:
        """Where the step with this id is among the roll-back steps (ValueError: absent)."""
        return [proposal.id for proposal in self.rollback_steps()].index(step_id)

    def validation_step(self) -> StepProposal | None:
        """The optional short validation run, when the plan offers one."""
        return next((s for s in self.plan.steps if s.id == VALIDATION_STEP), None)


def start(request: JobRequest, *, new_crash: bool = False) -> WizardState:
    """Open the job and settle it with no answer given yet (the app's first state).

    Args:
        request: What to open.
        new_crash: The config is our own fix and its run crashed too (``run`` knows it).

    Raises:
        WizardError: see :func:`open_job`.
    """
    from oom_wizard.diagnosis import Answers

    job = open_job(request)
    return WizardState(job, Answers(), settle(job, Answers(), new_crash=new_crash))


@dataclass(frozen=True)
class Dropped:
    """A value typed on a step before new answers, which the new plan has no row for.

    Attributes:
        shown_on: The step whose screen says so: the step it was typed on, or the first
            step of the walk when the new plan has no such step (None: no step to show).
        label: The row's label (``sample.width``).
        value: The value typed.
        step: The title of the step it was typed on.
        gone: The new plan has no such step at all.
    """

    shown_on: str | None
    label: str
    value: Any
    step: str
    gone: bool

    def words(self) -> str:
        """``sample.width 448 (this step no longer changes it)``."""
        from oom_wizard.spelling import value as show_value

        why = f"{self.step} is not in this plan" if self.gone else "this step no longer changes it"
        return f"{self.label} {show_value(self.value)} ({why})"


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


def _typed_kept(
    old: WizardState, new: WizardState
) -> tuple[dict[str, StepChoice], tuple[Dropped, ...]]:
    """The choices of ``old`` with typed values that ``new``'s plan keeps, and what it drops."""
    from oom_wizard.spelling import editable

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


def advice_for(state: WizardState, answers: Answers) -> tuple[str, ...]:
    """The advice beyond the config that these answers get: ``diagnose``'s "first change"
    and "also" lines (with ``--worked-before``, a toolkit or driver update to suspect).

    The diagnosis :func:`settle` makes, without the plan (the advice does not depend on it):
    the moment screen asks at every tick.
    """
    from oom_wizard.modelkind import find_model_kind

    job = state.job
    found = find_model_kind(job.document.view().primary)
    diagnosis = _diagnosis(job, _disagreeing(answers, job.log_diagnosis.moment, found.kind))
    return tuple(item.text for item in diagnosis.advice)


def retry_crashed(state: WizardState) -> WizardState:
    """The state after "the retry ran out of memory again": the plan goes one rung further."""
    settled = settle(state.job, state.answers, new_crash=True)
    return replace(state, settled=settled, choices=MappingProxyType({}))


# --- how the log's last run ended -----------------------------------------------------------

#: How the log's last run ended: in a failure, finished, still training (or cut off while it
#: trained), stopped by the user, or none of these as far as the log says.
RunEnding: TypeAlias = Literal["crashed", "finished", "training", "stopped", "unknown"]

#: The load screen's label for each ending.
_ENDING_LABELS: Mapping[RunEnding, str] = MappingProxyType(
    {
        "crashed": "Crash",
        "finished": "Finished",
        "training": "Training",
        "stopped": "Stopped",
        "unknown": "Last run",
    }
)


@dataclass(frozen=True)
class LastRun:
    """How the log's last run ended: the load screen's row and the coming-back question's
    evidence, from the one diagnosis ``diagnose`` prints.

    Attributes:
        ending: How it ended (see :data:`RunEnding`).
        label: The ending in one word ("Crash", "Finished", ...).
        where: The phase and the step it ended at (``phase sampling · step 4/3000``).
        evidence: The line that shows the ending, ``LOG:LINE: text`` (None: none).
        after_save: The log was written after the change log's last save (None: no change
            log, or it cannot tell).
    """

    ending: RunEnding
    label: str
    where: str
    evidence: str | None
    after_save: bool | None


def last_run(state: WizardState) -> LastRun | None:
    """How the log's last run ended (None without a log)."""
    scan = state.job.scan
    if scan is None:
        return None
    diagnosis = state.log_diagnosis or state.diagnosis
    ending: RunEnding
    if diagnosis.crashed:
        ending = "crashed"
    elif scan.finished:
        ending = "finished"
    elif scan.stopped:
        ending = "stopped"
    elif scan.training_started:
        ending = "training"
    else:
        ending = "unknown"
    where = f"phase {scan.phase}" if scan.phase else "phase unknown"
    if scan.last_step is not None and scan.total_steps:
        where += f" · step {scan.last_step}/{scan.total_steps}"
    return LastRun(
        ending,
        _ENDING_LABELS[ending],
        where,
        _ending_line(state, ending),
        _written_after_save(state.log_path, state.changelog),
    )


def _ending_line(state: WizardState, ending: RunEnding) -> str | None:
    """The log line that shows ``ending``, as ``NAME:LINE: text``."""
    scan = state.job.scan
    if scan is None:
        return None
    tags = {
        "crashed": ("exception", "error", "exit"),
        "finished": ("finished", "bar"),
        "training": ("bar",),
        "stopped": ("stopped",),
        "unknown": (),
    }[ending]
    found = None
    for tag in tags:  # the first tag that has a line, its last line
        lines = scan.evidence_for(tag)
        if lines:
            found = lines[-1]
            break
    if found is None and ending == "crashed" and scan.evidence:
        found = scan.evidence[-1]
    if found is None:
        return None
    name = state.log_path.name if state.log_path is not None else "log"
    return f"{name}:{found.line}: {found.text}"


def _written_after_save(log: Path | None, changelog: ChangeLog | None) -> bool | None:
    """Whether the log was written after the change log's last run (None: cannot tell)."""
    last = changelog.last_run() if changelog is not None else None
    if log is None or last is None:
        return None
    try:
        saved = datetime.fromisoformat(last.at)
        written = datetime.fromtimestamp(log.stat().st_mtime, tz=timezone.utc)
    except (ValueError, OSError):
        return None
    return written > saved


@dataclass(frozen=True)
class RetryAnswer:
    """The coming-back question's answer, as the log gives it.

    Attributes:
        ran: True: the retry finished or is training; False: it crashed after the save;
            None: the log does not say (no log, or none written since the save).
        evidence: Why, in one line (the log line, or what is missing).
    """

    ran: bool | None
    evidence: str


def retry_answer(state: WizardState) -> RetryAnswer:
    """Did the retry of the saved config run? From the log: a crash written after the save
    means No; a finished run, or one still training, means Yes; anything else is the
    user's to say."""
    run = last_run(state)
    if run is None:
        return RetryAnswer(None, "No log of the retry was read: say how it went.")
    if run.after_save is False:
        return RetryAnswer(
            None, "The log is older than the last save: it is not the retry's. Say how it went."
        )
    line = f": {run.evidence}" if run.evidence else ""
    if run.ending == "crashed":
        return RetryAnswer(False, f"The log crashed after the save ({run.where}){line}")
    if run.ending in ("finished", "training"):
        how = "finished" if run.ending == "finished" else "is training"
        return RetryAnswer(True, f"The log shows the retry {how} ({run.where}){line}")
    return RetryAnswer(None, f"The log does not say how the retry went ({run.where}){line}")


# --- choices --------------------------------------------------------------------------------------


def choose(state: WizardState, choice: StepChoice) -> WizardState:
    """The state with one step's choice recorded (replacing an earlier one); what its
    screen said was dropped by new answers is said."""
    choices = dict(state.choices)
    choices[choice.step_id] = choice
    dropped = tuple(item for item in state.dropped if item.shown_on != choice.step_id)
    return replace(state, choices=MappingProxyType(choices), dropped=dropped)


def given(state: WizardState, choices: Mapping[str, StepChoice] | None) -> Plan:
    """The plan with every step's proposals as the choices of the steps before it leave
    them (:func:`oom_wizard.plan.given_choices`; None: the defaults)."""
    from oom_wizard.plan import given_choices

    return given_choices(state.plan, state.document, choices)


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


def default_choices(state: WizardState, fix: FixName | None = None) -> dict[str, StepChoice]:
    """The one rule of the default set, for the command line, the app, ``run`` and ``fit``:
    every step of ``fix`` (None: the plan's default fix, "just enough" where the crash's own
    figures size it, else "safe"; see :mod:`oom_wizard.sizing`) on with its default toggles,
    every other step off."""
    return state.plan.default_choices(fix)


def default_choice(
    state: WizardState, step: StepProposal, fix: FixName | None = None
) -> StepChoice:
    """What accepting one step's defaults means (:func:`default_choices`)."""
    from oom_wizard.plan import StepChoice

    return default_choices(state, fix).get(step.id) or StepChoice(step.id, enabled=False)


def fix_names(state: WizardState) -> tuple[FixName, ...]:
    """The fixes the plan offers, the default first ("safe" alone without a card to size
    "just enough" against)."""
    from oom_wizard.sizing import FIX_NAMES

    offered = [name for name in FIX_NAMES if name in state.plan.fixes]
    default = state.plan.default_fix
    return tuple(sorted(offered, key=lambda name: name != default))


def fix_words(state: WizardState, fix: FixName, *, short: bool = False) -> str:
    """One line about a fix: its name, its steps and, where it was sized, its predicted peak
    against the card (``just enough: 1 step (gradient_checkpointing), training peak ≈ 12.3 of
    23.5 GiB``); ``short`` leaves the step ids out (the app lists them apart)."""
    from oom_wizard.sizing import FIX_WORDS

    plan = state.plan
    steps = [step for step in plan.fix_steps(fix) if step != VALIDATION_STEP]
    text = f"{FIX_WORDS[fix]}: {len(steps)} step{'s' if len(steps) != 1 else ''}"
    if steps and not short:
        text += f" ({', '.join(steps)})"
    sizing = plan.sizing
    if sizing is not None and fix in sizing.savings:
        band = sizing.predicted(fix)
        peak = "peak" if short else f"{sizing.phase} peak"
        text += f", {peak} ≈ {band.mid:.1f} of {sizing.card_gib:.1f} GiB"
        if fix == "just_enough" and not sizing.covered:
            text += (
                " (not enough room left)"
                if short
                else " (no set of rungs is predicted to leave the margin)"
            )
    if fix == plan.default_fix:
        text += " (default)"
    return text


def fix_steps_words(state: WizardState, fix: FixName) -> str:
    """The steps of a fix by title, in the plan's order (``Gradient checkpointing on``)."""
    titles = {step.id: step.title for step in state.plan.steps}
    steps = [titles[step] for step in state.plan.fix_steps(fix) if step != VALIDATION_STEP]
    return ", ".join(steps) if steps else "no step"


def fix_summary(state: WizardState) -> tuple[str, ...]:
    """The fixes in a few lines, for ``plan``, ``apply`` and the app: how they were sized
    (the deficit, where it comes from, the margin), then one line per fix, the default first."""
    from oom_wizard.sizing import MARGIN_SHARE

    plan = state.plan
    if not plan.fixes:
        return ()
    lines: list[str] = []
    sizing = plan.sizing
    if sizing is None:
        lines.append(
            "Fixes: only the safe set (no card size is known to weigh a smaller one against: "
            "no OOM message with the card's capacity, no nvidia-smi)."
        )
    else:
        verb = "needed" if sizing.deficit_gib >= 0 else "left"
        lines.append(
            f"Fixes sized against the {sizing.card_gib:.1f} GiB card at the {sizing.phase} "
            f"peak: {abs(sizing.deficit_gib):.2f} GiB {verb} beyond the card ({sizing.source}), "
            f"plus a margin of {sizing.margin_gib:.2f} GiB ({MARGIN_SHARE:.0%} of the card)."
        )
        if not sizing.calibrated:
            lines.append(
                "No OOM message of this crash sizes the deficit, so the safe set stays the "
                "default; 'just enough' rests on the estimate alone."
            )
    lines.extend(f"  {fix_words(state, name)}" for name in fix_names(state))
    return tuple(lines)


def _as_default(step: StepProposal, choice: StepChoice, default: StepChoice) -> bool:
    """Whether a recorded choice is the step's defaults as they were (nothing toggled or typed)."""
    if choice.enabled != default.enabled or choice.values:
        return False
    return all(
        choice.fields.get(proposal.key, proposal.default_on) == proposal.default_on
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
            decided[step.id] = _off(step.id)
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
    (:func:`oom_wizard.plan.validation_choice`), as the roll-back choices leave the config
    (lighter samples that sample half as often move the first sample). The user's own choice
    wins where it says more than on/off (a typed count), or switches the run off.

    Args:
        state: The wizard state.
        rollback: The roll-back steps' choices (None: :func:`effective_choices`).
    """
    from oom_wizard.plan import validation_choice as plan_validation_choice

    validation = state.validation_step()
    if validation is None:
        return None
    chosen = state.choices.get(validation.id)
    if chosen is not None and (chosen.values or not chosen.enabled):
        return chosen
    wanted = _validation_wanted(state, validation)
    if wanted <= 0:
        return _off(validation.id)
    resume = resume_of(state)
    start = resume.step if resume is not None else 0
    found = plan_validation_choice(_left_by(state, rollback), state.plan, wanted, start)
    if found is None:
        return _off(validation.id)
    if (
        chosen is None
        and state.validation_run is None
        and not default_choice(state, validation).enabled
    ):
        return replace(found, enabled=False)
    return found


#: The fields the validation run's count depends on (its first save and sample).
_VALIDATION_INPUTS = frozenset(
    {"save_every", "sample_every", "sample_start_step", "disable_sampling"}
)


def _left_by(state: WizardState, rollback: Mapping[str, StepChoice] | None) -> JobDocument:
    """The config as the roll-back choices leave it, where they change what the validation
    run's count depends on (else the config as loaded: no edit is made)."""
    from oom_wizard.changes import prepare
    from oom_wizard.plan import changes_for

    if rollback is None:
        rollback = effective_choices(state)
    validation = state.validation_step()
    steps = {k: v for k, v in rollback.items() if validation is None or k != validation.id}
    found = changes_for(given(state, steps), steps)
    if not any(change.path[-1] in _VALIDATION_INPUTS for change in found):
        return state.document
    return prepare(state.document, found).after


def _validation_wanted(state: WizardState, validation: StepProposal) -> int:
    """The validation run's steps asked for: ``run``'s count, else the plan's figure."""
    if state.validation_run is not None:
        return state.validation_run
    figures = [f.after for f in validation.fields if isinstance(f.after, int)]
    return min(figures) if figures else 0


def resume_of(state: WizardState) -> ResumePoint | None:
    """The step AI Toolkit's next run of this job starts from (:mod:`oom_wizard.resume`)."""
    from oom_wizard.resume import resume_point

    return resume_point(state.document, state.job.scan)


def validation_note(state: WizardState) -> str | None:
    """What the resume does to the validation run, in words (None: a fresh start)."""
    resume = resume_of(state)
    validation = validation_choice(state)
    if resume is None or validation is None:
        return None
    counted = [v for v in validation.values.values() if isinstance(v, int)]
    if validation.enabled and counted:
        steps = min(counted)
        return (
            f"AI Toolkit resumes this job from step {resume.step} ({resume.source}) and trains "
            f"up to train.steps: the validation run's train.steps is {steps}, so it trains "
            f"{steps - resume.step} steps past the resume."
        )
    return (
        f"AI Toolkit resumes this job from step {resume.step} ({resume.source}): a validation "
        "run counted from there would not be shorter than the full run, so there is none."
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
        base[validation.id] = _off(validation.id) if counted is not None else asked
    else:
        base[validation.id] = replace(counted, enabled=True)
    return base


def preselect_fix(state: WizardState, validation_steps: int) -> WizardState:
    """The state with the next fix chosen: every step at its default, and the short
    validation run at ``validation_steps`` (0: none), raised where it must be to get through
    the config's first periodic save and sample
    (:func:`oom_wizard.plan.validation_choice`).

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
    from oom_wizard.plan import changes_for

    return changes_for(given(state, choices), choices)


def prepared(state: WizardState, choices: Mapping[str, StepChoice] | None) -> Prepared:
    """The choices applied in memory (None: the plan's defaults).

    Raises:
        EditError: an edit cannot be made safely.
    """
    from oom_wizard.changes import prepare
    from oom_wizard.plan import changes_for

    settled = _settle_validation(state, choices)
    return prepare(state.document, changes_for(given(state, settled), settled))


def step_prepared(state: WizardState, choices: Mapping[str, StepChoice], step_id: str) -> Prepared:
    """What one step's choice changes on top of the steps before it: the config as their
    choices leave it, and with this step's changes too (its screen's diff).

    Raises:
        EditError: an edit cannot be made safely.
    """
    from oom_wizard.changes import prepare
    from oom_wizard.document import same_value
    from oom_wizard.paths import parse_path
    from oom_wizard.plan import changes_for

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


def estimate(state: WizardState, choices: Mapping[str, StepChoice] | None) -> MemoryEstimate:
    """The memory estimate of the choices: its GiB bands (calibrated by the job's own figures
    when it has them) and the relative figures (today's config = 100)."""
    from oom_wizard.catalog import load_presets
    from oom_wizard.plan import changes_for
    from oom_wizard.plan import estimate as plan_estimate
    from oom_wizard.sizing import Weigher

    settled = _settle_validation(state, choices)
    changes = changes_for(given(state, settled), settled)
    calibration = memory_calibration(state)
    figures = plan_estimate(state.document, changes, state.model_kind, calibration=calibration)
    sizing = state.plan.sizing
    crash, _ = crash_figures(state.job, state.diagnosis, state.moment)
    if sizing is None or not sizing.calibrated or crash is None:
        return figures
    # The fixes were sized in the crash's GiB (sizing.Weigher): the estimate says the same
    # GiB, so that the fix's predicted peak and the estimate's band are one figure.
    weigher = Weigher(state.document, state.model_kind, load_presets(), crash)
    return replace(figures, gib=(weigher.scaled(()), weigher.scaled(changes)))


def check_value(state: WizardState, proposal: FieldProposal, typed: str) -> ValueCheck:
    """A value typed on a step's row, checked as the domain checks it (:mod:`oom_wizard.values`).

    The rules of ``presets/levers.yaml`` apply with the arch of the field's process (width and
    height on its size step, frames on its grid); a value heavier than today's needs a
    confirmation, and the change log then records it as an increase. A number field without
    a rule must still be a number of the proposed value's kind.
    """
    from oom_wizard.values import validate_value

    check = validate_value(
        proposal.path, typed, _arch_of(state, proposal.path), before=proposal.config_before
    )
    if not check.ok or not isinstance(check.value, str) or proposal.control != "number":
        return check
    return _plain_number(typed, proposal.after)


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


def _arch_of(state: WizardState | JobDocument, path: FieldPath) -> ArchFacts | None:
    """The arch of the process a field belongs to (the first process's for a bare path)."""
    from oom_wizard.catalog import load_presets
    from oom_wizard.estimate import arch_facts

    process = _process_of(state, path)
    return arch_facts(process, load_presets()) if process is not None else None


def _process_of(state: WizardState | JobDocument, path: FieldPath) -> ProcessView | None:
    """The process a field belongs to (the first process for a bare path)."""
    from oom_wizard.document import JobDocument

    document = state if isinstance(state, JobDocument) else state.document
    view = document.view()
    index = path[2] if len(path) > 2 and path[:2] == ("config", "process") else None
    return next((p for p in view.processes if p.index == index), view.primary)


def _plain_number(typed: str, like: object) -> ValueCheck:
    """``typed`` as a number of the kind of ``like`` (a field the presets have no rule for)."""
    from oom_wizard.values import ValueCheck

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


def prepare_edit(document: JobDocument, changes: Sequence[Change], *, force: bool) -> Prepared:
    """``set``'s edits, checked as the app checks a typed value, then made in memory.

    Each value goes through the same rules as a value typed on a step's row
    (:func:`check_value`: ``presets/levers.yaml`` with the field's arch), and removing a
    whole section (a mapping or a list, such as ``config.process[0].train``) needs
    ``force``: it takes every field in it along.

    Raises:
        EditError: a value the app would refuse, or a section removed without ``force``.
    """
    from oom_wizard.changes import REQUIRED, prepare
    from oom_wizard.errors import EditError
    from oom_wizard.values import validate_value

    for change in changes:
        where = format_path(change.path)
        before = document.get(change.path)
        if change.after is MISSING:
            refused_anyway = change.path in REQUIRED or isinstance(change.path[-1], int)
            if isinstance(before, (dict, list)) and not force and not refused_anyway:
                count = len(before)
                raise EditError(
                    f"{where} is a whole section ({count} "
                    f"{'entry' if count == 1 else 'entries'}); removing it removes everything "
                    "in it: pass --force to remove it anyway, or --unset the fields you mean",
                    file=document.source,
                )
            continue
        arch = _arch_of(document, change.path)
        items = (
            [((*change.path, index), item) for index, item in enumerate(change.after)]
            if isinstance(change.after, list)
            else [(change.path, change.after)]
        )
        for path, value in items:
            check = validate_value(path, value, arch, before=document.get(path))
            if not check.ok:
                raise EditError(f"{where}: {check.reason}", file=document.source)
    return prepare(document, changes)


def recorded_steps(plan: Plan, ready: Prepared) -> list[str]:
    """The steps a run records as applied: those that changed a field, in plan order.

    A step that was switched on but found nothing to change is not applied (the next plan
    would otherwise mark it done).
    """
    changed = {entry.step for entry in ready.entries}
    return [step.id for step in plan.steps if step.id in changed]


# --- saving ---------------------------------------------------------------------------------------


def save(
    state: WizardState,
    choices: Mapping[str, StepChoice] | None,
    destination: Destination,
    *,
    ready: Prepared | None = None,
) -> Saved:
    """Write the roll-back: a new config file, or into the jobs database.

    Args:
        state: The wizard state.
        choices: The step choices (None: the plan's defaults).
        destination: Where it goes.
        ready: ``prepared(state, choices)`` when the caller has it already (shown to the
            user), so that the edits are not made and checked a second time.

    Raises:
        SaveRefused: the output or change log is refused; nothing is written.
        JobDatabaseError: the database refuses (a running job, a taken name, a lock).
        EditError: an edit cannot be made safely.
    """
    if ready is None:
        ready = prepared(state, choices)
    return _write(
        state,
        ready,
        destination,
        direction="rollback",
        moment=state.moment,
        steps=recorded_steps(state.plan, ready),
        diagnosis=state.diagnosis if state.job.scan is not None else None,
        memory=_memory_record(state, ready),
    )


def default_file_output(state: WizardState) -> Path:
    """The first free file name for the fix saved as a file.

    Beside the source for a config file; in the working folder, after the job's name, for
    a database job (whose config has no file of its own).
    """
    from oom_wizard.save import default_output_path

    if state.db_job is None:
        return default_output_path(state.source)
    return default_output_path(Path(f"{state.db_job.file_stem}.json"))


@dataclass(frozen=True)
class FileTarget:
    """A config file to save to, as typed (the app's "Save as" and "Change log" fields):
    the destination, or the refusal of each field.

    Attributes:
        destination: Where the save goes (None: a field is refused).
        output_refused: Why the output name is refused (None: it is not).
        changelog_refused: Why the change-log name is refused (None: it is not).
    """

    destination: ToFile | None
    output_refused: SaveRefused | None = None
    changelog_refused: SaveRefused | None = None

    def reasons(self, front: Front = "app") -> tuple[str | None, str | None]:
        """The output's and the change log's reasons, worded for ``front`` (None: fine)."""
        return (
            self.output_refused.reason(front) if self.output_refused else None,
            self.changelog_refused.reason(front) if self.changelog_refused else None,
        )

    def first_refusal(self) -> SaveRefused | None:
        """The refusal to show as the save's error line."""
        return self.output_refused or self.changelog_refused


def file_target(state: WizardState, output: str, changelog: str | None) -> FileTarget:
    """The file destination typed in the app, checked as the save checks it, before it.

    Args:
        state: The wizard state (its source is never a target).
        output: The new config's path as typed (``~`` is expanded).
        changelog: The change log's path as typed; None puts it beside the output.
    """
    from oom_wizard.changelog import changelog_path_for
    from oom_wizard.save import check_output

    output_path, output_refused = _file_name(output, "the new config", "file_name")
    if output_path is not None:
        try:
            check_output(output_path, source=state.source)
        except SaveRefused as exc:
            output_refused = exc
    changelog_path: Path | None
    changelog_refused: SaveRefused | None = None
    if changelog is None:
        changelog_path = changelog_path_for(output_path) if output_path is not None else None
    else:
        changelog_path, changelog_refused = _file_name(
            changelog, "the change log", "changelog_name"
        )
    if output_refused is not None or changelog_refused is not None or changelog_path is None:
        return FileTarget(None, output_refused, changelog_refused)
    assert output_path is not None
    return FileTarget(ToFile(output_path, changelog_path))


def _file_name(typed: str, what: str, remedy: str) -> tuple[Path | None, SaveRefused | None]:
    """``typed`` as a file's path, or why it cannot be one (empty, or a folder)."""
    text = typed.strip()
    if not text:
        return None, SaveRefused(f"a file name is needed for {what}", remedy=remedy)
    path = Path(text).expanduser()
    if text.endswith("/") or path.name in ("", ".", ".."):
        return None, SaveRefused("this is a folder", file=text, remedy=remedy)
    return path, None


def next_scale_up(state: WizardState) -> ScaleUp | None:
    """The one setting the next retry gets back, or None when everything is restored.

    ``history`` and the result screen name the same one: both come through
    :func:`oom_wizard.plan.next_scale_up`.
    """
    from oom_wizard.plan import next_scale_up as plan_next_scale_up

    if state.changelog is None:
        return None
    return plan_next_scale_up(state.document, state.changelog)


def prepare_scale_up(state: WizardState, scale_up: ScaleUp) -> Prepared:
    """The re-add applied in memory (raises EditError if an edit cannot be made)."""
    from oom_wizard.changes import prepare

    return prepare(state.document, list(scale_up.changes))


def save_scale_up(
    state: WizardState,
    scale_up: ScaleUp,
    destination: Destination,
    *,
    ready: Prepared | None = None,
) -> Saved:
    """Write the scaled-up config and append a ``scale_up`` run to its change log.

    ``ready`` is ``prepare_scale_up(state, scale_up)`` when the caller has it already (shown
    to the user), so that the edits are not made and checked a second time.

    Raises:
        SaveRefused: the output or change log is refused; nothing is written.
        JobDatabaseError: the database refuses (a running job, a taken name, a lock).
    """
    if ready is None:
        ready = prepare_scale_up(state, scale_up)
    steps = [scale_up.step] if ready.changed else []
    return _write(
        state,
        ready,
        destination,
        direction="scale_up",
        steps=steps,
        memory=_memory_record(state, ready),
    )


def _write(
    state: WizardState,
    ready: Prepared,
    destination: Destination,
    *,
    direction: Direction,
    steps: Sequence[str],
    moment: str | None = None,
    diagnosis: Diagnosis | None = None,
    memory: dict[str, object] | None = None,
) -> Saved:
    """Save ``ready`` where ``destination`` says, with one run of the change log."""
    from oom_wizard.changes import commit

    recorded = diagnosis.to_json() if diagnosis is not None else None
    if isinstance(destination, ToFile):
        return commit(
            ready,
            direction=direction,
            moment=moment,
            model_kind=state.model_kind,
            diagnosis=recorded,
            steps=steps,
            memory=memory,
            output=destination.output,
            changelog_path=destination.changelog,
            force=destination.force,
            prior=state.changelog,
        )
    if state.db_job is None:
        raise WizardError("only a job of the web UI's database can be saved into it")
    from oom_wizard.jobdb import save_to_db

    return save_to_db(
        ready,
        state.db_job,
        destination,
        direction=direction,
        moment=moment,
        model_kind=state.model_kind,
        diagnosis=recorded,
        steps=steps,
        memory=memory,
        prior=state.changelog,
    )


def _memory_record(state: WizardState, ready: Prepared) -> dict[str, object] | None:
    """The change log run's ``memory`` for the saved config (see :func:`memory_record`)."""
    from oom_wizard.memory import job_memory as memory_of

    try:
        after = memory_of(
            ready.after,
            [],
            state.model_kind,
            calibration=memory_calibration(state),
            calibrated_on=state.document,
        )
    except WizardError:
        return None
    return {
        "phase": after.peak_phase,
        "estimated_gib": after.peak().rounded(),
        "calibrated_by": after.calibrated_by.as_json() if after.calibrated_by else None,
    }


def _off(step_id: str) -> StepChoice:
    from oom_wizard.plan import StepChoice

    return StepChoice(step_id=step_id, enabled=False)


def nothing_left(state: WizardState) -> tuple[str, ...]:
    """What the scale-up says when no re-add is left: that everything is back, or which
    changes made with ``set`` still stand (the words ``scale-up`` and ``history`` print)."""
    from oom_wizard.scaleup import nothing_left_text

    if state.changelog is None:
        return ("this config has no change log, so nothing of a roll-back is left to re-add.",)
    return nothing_left_text(state.document, state.changelog)


def pending_scale_ups(saved: Saved, ready: Prepared) -> tuple[ScaleUp, ...]:
    """The re-adds ahead of a config just saved, in order: the list ``history`` prints.

    Reads the change log the save wrote (run it in the save's worker).
    """
    from oom_wizard.changelog import read_changelog

    return scale_ups_ahead(ready.after, read_changelog(saved.changelog))


def scale_ups_ahead(document: JobDocument, changelog: ChangeLog) -> tuple[ScaleUp, ...]:
    """Every re-add still ahead of ``document``, in the order the scale-up makes them.

    The one list behind the result screen's "later" section and ``history``'s: the first is
    :func:`next_scale_up`'s.
    """
    from oom_wizard.scaleup import pending_scale_ups as pending

    return pending(document, changelog)


def scale_up_notes(
    changelog: ChangeLog | None, ready: Prepared, scale_up: ScaleUp
) -> tuple[str, ...]:
    """What to say before a re-add is saved: that it gives back the exact config that
    crashed, or that it crashed every time it was tried (the command line and the app)."""
    from oom_wizard.scaleup import crashed_config_note, stop_text

    if changelog is None:
        return ()
    notes = [stop_text(changelog, scale_up), crashed_config_note(ready.after, changelog)]
    return tuple(note for note in notes if note is not None)


def change_why(entry: ChangeEntry) -> str:
    """Why a logged change was made (``history``'s "why" line): the step's title and its
    reason from the presets, then what the recorded reason adds beyond the field's name (a
    confirmed increase, the effective batch kept, the buckets dropped).

    A change without a known step (``set``) keeps the reason it was recorded with.
    """
    from oom_wizard.catalog import load_presets

    presets = load_presets()
    if entry.step is None or entry.step not in presets.steps:
        return entry.reason
    info = next(step for key, step in presets.steps.items() if key == entry.step)
    title, _, detail = entry.reason.partition(": ")
    short = _process_relative(entry.path)
    if detail.startswith(short):  # the field's name, perhaps with a note: keep the note
        detail = detail[len(short) :].strip()
    why = f"{title or info.title}: {' '.join(info.why.split())}"
    return f"{why} ({detail})" if detail else why


def _process_relative(path: str) -> str:
    """``config.process[0].train.lr`` → ``train.lr`` (the label a step's row shows)."""
    prefix, found, rest = path.partition("].")
    return rest if found and prefix.startswith("config.process[") else path


def later_lines(ahead: Sequence[ScaleUp]) -> tuple[str, ...]:
    """The re-adds ahead, numbered, one line each (``  1. Re-add the biggest resolution``):
    the result screen and ``history`` print these same lines."""
    return tuple(f"  {number}. {scale_up.title}" for number, scale_up in enumerate(ahead, 1))


# --- a crash, diagnosed: one rule for diagnose, watch and run ------------------------------------


def first_step(state: WizardState) -> str | None:
    """The first roll-back step that changes something by default, with its fields.

    Advice that comes first (an environment problem, a scale-up to undo) stays first; so does
    the diagnosis's own first change when nothing says when it crashed.
    """
    diagnosis = state.diagnosis
    moment = diagnosis.moment
    if moment is None or moment == "environment" or _advice_first(diagnosis):
        first: str | None = diagnosis.first_change
        return first
    step = next((s for s in state.plan.steps if s.default_on and not s.satisfied), None)
    if step is None:
        return (
            state.plan.exhausted_advice
            or "Every default step of this roll-back is already in the config."
        )
    from oom_wizard.spelling import change

    changes = [change(f.label, f.before, f.after) for f in step.fields if f.default_on]
    return f"{step.title}: {', '.join(changes)}" if changes else step.title


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


def diagnose_crash(target: WatchTarget) -> CrashReport:
    """Open the followed job on its log's last run and settle it, as the wizard would.

    The GPU is not probed (the job that held it is gone; the live screen polls it itself).

    Raises:
        WizardError: the config, the database job or the log cannot be read.
    """
    from oom_wizard.diagnosis import diagnose

    if not target.can_open_wizard:
        from oom_wizard.logscan import scan_log

        alone = diagnose(scan_log(target.log), None)
        return CrashReport(alone.verdict, alone.moment, alone.first_change)
    request = JobRequest(
        target=target.config, log=target.log, db=target.db, job=target.job, probe=False
    )
    state = start(request)
    return CrashReport(state.diagnosis.verdict, state.diagnosis.moment, first_step(state), state)


def warm_up() -> None:
    """Read what the first diagnosis reads first: the presets, and the log markers compiled.

    ``watch`` calls it in a thread while it follows the job, so that the crash, when it comes,
    is diagnosed without that wait. Both are read once per process.
    """
    from oom_wizard.catalog import load_presets
    from oom_wizard.logscan import load_log_markers

    load_presets()
    load_log_markers()


# --- what the screens show that comes from the presets ------------------------------------------


def list_jobs(db: Path) -> tuple[Path, tuple[DbJob, ...]]:
    """The jobs database ``db`` points to, and its jobs (newest first).

    Raises:
        JobDatabaseError: no database there, or one that cannot be read.
    """
    from oom_wizard.jobdb import find_db
    from oom_wizard.jobdb import list_jobs as db_jobs

    path = find_db(db)
    return path, db_jobs(path)


def picker_folder(target: Path | None) -> Path:
    """Where the app's file picker opens after a target that could not be opened: that
    folder, or the named file's folder, when it is there; else the working folder."""
    if target is not None:
        folder = target.expanduser()
        if not folder.is_dir():
            folder = folder.parent
        if folder.is_dir() and str(folder) not in ("", "."):
            return folder
    return Path.cwd()


#: A training log the picker offers beside the configs: AI Toolkit's ``log.txt`` (and the
#: UI's ``logs/N_log.txt``), ``run.py -l FILE``'s file, a log saved with another name.
LOG_SUFFIXES = (".txt", ".log")


def moment_info(moment: Moment) -> MomentInfo:
    """A moment as the presets describe it: its label, the user's words, its cause."""
    from oom_wizard.catalog import load_presets

    return load_presets().moment(moment)


def ui_hint(path: str, state: WizardState | None = None) -> str | None:
    """Where a field is in AI Toolkit's web UI (None when the UI does not show it).

    With the state, the hint is the plan's rows' own (:func:`oom_wizard.plan.field_hint`): for
    the arch of the field's process, and a dataset's field names the dataset (its folder's
    name) instead of the presets' "Dataset N".
    """
    from oom_wizard.catalog import load_presets
    from oom_wizard.estimate import arch_facts
    from oom_wizard.paths import parse_path
    from oom_wizard.plan import field_hint

    presets = load_presets()
    if state is None:
        return presets.ui_hint(path)
    parsed = parse_path(path)
    process = _process_of(state, parsed)
    if process is None:
        return presets.ui_hint(parsed)
    return field_hint(presets, process, arch_facts(process, presets), parsed)


def arch_label(process_model: object) -> str | None:
    """The arch a process's ``model`` section names, as "label (kind)" (None: unknown)."""
    from oom_wizard.catalog import load_presets

    model = process_model if isinstance(process_model, dict) else {}
    facts = load_presets().arch_from_model(model)
    return f"{facts.label} ({facts.kind})" if facts else None


# --- the environment verdict, as one title and its reasons ---------------------------------------


@dataclass(frozen=True)
class EnvironmentVerdict:
    """What the environment screen says: a title, the moment's cause and the reasons, from
    one verdict.

    Attributes:
        blamed: ``found`` (the log or the GPU now gives a strong reason), ``suspected`` (only
            weak reasons, none against), or ``answer`` (the user picked the moment; nothing
            found makes it certain).
        title: The screen's title, worded for ``blamed`` (never "it is the environment"
            beside a reason that says the job filled the card).
        why: The environment moment's cause, as a finding (``found``) or as a possibility.
        reasons: The diagnosis's reasons, for and against, as they are.
    """

    blamed: Literal["found", "suspected", "answer"]
    title: str
    why: str
    reasons: tuple[str, ...]


def environment_verdict(state: WizardState) -> EnvironmentVerdict:
    """The environment screen's title and reasons, both from the settled diagnosis.

    The moment is ``environment`` by the diagnosis's own rule (a strong reason: see
    :func:`oom_wizard.diagnosis.diagnose`) exactly when the settled moment was *found*, not
    answered; only then may the title say it is the environment. Weak reasons with nothing
    against them (:attr:`Diagnosis.environment_suspected`) make it a suspicion; otherwise the
    title says it is the user's call and the reasons (even one against) are shown as they are.
    """
    diagnosis = state.diagnosis
    reasons = diagnosis.reasons
    cause = moment_info("environment").cause
    if state.settled.moment_source == "found" and state.moment == "environment":
        return EnvironmentVerdict("found", "It is the environment, not the config", cause, reasons)
    if diagnosis.environment_suspected:
        title = "The environment looks suspect"
        return EnvironmentVerdict("suspected", title, f"Possibly: {cause}", reasons)
    if not reasons:
        reasons = ("nothing in the log or on the GPU points to the environment: it is your call",)
    title = "You say it is the environment; the log does not show it"
    return EnvironmentVerdict("answer", title, f"Your answer means: {cause}", reasons)


# --- leaving the wizard ---------------------------------------------------------------------------

#: The log ``python run.py -l`` writes for a saved config goes beside it, with this suffix.
RUN_LOG_SUFFIX = ".log.txt"


def run_log_for(config: Path) -> Path:
    """Where the retry of a saved config should log: beside it, ``NAME.log.txt``, absolute.

    AI Toolkit writes no log file from the command line unless ``-l FILE`` is given, and a
    bare file name there crashes it (``os.makedirs('')``): the path is always absolute.
    """
    absolute = Path(os.path.abspath(config))
    return absolute.with_name(f"{absolute.stem}{RUN_LOG_SUFFIX}")


def run_command(state: WizardState, saved: Saved) -> str | None:
    """``python run.py CONFIG -l LOG`` for a saved config file (None for a web-UI job).

    The paths are absolute: run.py looks for a relative path in its own ``config/`` folder
    first, and it runs from the toolkit's folder, not from where the wizard saved.
    """
    from oom_wizard.jobdb import DbSaveResult

    if isinstance(saved, DbSaveResult) or state.ui_job:
        return None
    return run_command_for(saved.config)


def run_command_for(config: Path) -> str:
    """``python run.py CONFIG -l LOG`` for a saved config file, both paths absolute: the
    one command the app's result, its leaving summary, ``apply`` and ``scale-up`` print."""
    quoted = shlex.quote(os.path.abspath(config))
    return f"python run.py {quoted} -l {shlex.quote(str(run_log_for(config)))}"


def reopen_command(saved: SaveResult) -> str:
    """``oom-wizard CONFIG --log LOG``: the wizard on the saved config and its retry's log."""
    config = shlex.quote(os.path.abspath(saved.config))
    return f"oom-wizard {config} --log {shlex.quote(str(run_log_for(saved.config)))}"


def ui_job_instructions() -> str:
    """What to do with a config saved from the web UI's ``.job_config.json``."""
    return (
        "This job comes from AI Toolkit's web UI, which rewrites .job_config.json on every "
        "start. Open the job in the UI, change the fields below (each says where), or paste "
        "the new config under Show Advanced; then start the job."
    )


def db_job_arguments(saved: DbSaveResult) -> str:
    """``--db PATH --job NAME`` for a saved database job, quoted for a shell."""
    return f"--db {shlex.quote(str(saved.db_path))} --job {shlex.quote(saved.job_name)}"


@dataclass(frozen=True)
class LeavingSummary:
    """What the terminal keeps when the wizard closes: what was saved and how to go on.

    Attributes:
        saved: Whether a fix was saved in this session.
        lines: The summary, line by line (the command line prints them after the app).
    """

    saved: bool
    lines: tuple[str, ...]

    def text(self) -> str:
        """The summary as one text."""
        return "\n".join(self.lines)


def source_words(state: WizardState) -> str:
    """The config the wizard was opened on, as the user knows it: its file, or the UI job."""
    if state.db_job is not None:
        return f"UI job '{state.db_job.name}'"
    return str(state.source)


def leaving_summary(state: WizardState | None, saved: Saved | None) -> LeavingSummary:
    """The summary for the terminal: the saved files (or UI job), and the command to run it.

    A config file gets ``python run.py CONFIG -l LOG`` (see :func:`run_command`) and the
    wizard's command for the next crash; a database job gets the UI's next step; a session
    that saved nothing says that the source is as it was.
    """
    from oom_wizard.jobdb import DbSaveResult

    if saved is None or state is None:
        where = f"; {source_words(state)} is as it was" if state is not None else ""
        return LeavingSummary(False, (f"oom-wizard: nothing saved{where}.",))
    if isinstance(saved, DbSaveResult):
        how = (
            "updated in place"
            if saved.in_place
            else f"a new job, copied from '{saved.origin_name}'"
        )
        lines = [
            f"oom-wizard saved UI job '{saved.job_name}' ({how})",
            f"  database:   {saved.db_path}",
            f"  change log: {saved.changelog}",
            saved.next_step(),
        ]
        if saved.in_place:
            lines.append(f"To undo it: oom-wizard restore {db_job_arguments(saved)}")
        return LeavingSummary(True, tuple(lines))
    lines = [
        "oom-wizard saved a new config (the original is unchanged)",
        f"  config:     {saved.config}",
        f"  change log: {saved.changelog}",
    ]
    command = run_command(state, saved)
    if command is None:
        lines.append(ui_job_instructions())
        note = ui_job_note(state)
        if note is not None:
            lines.append(note)
    else:
        lines += [
            "Run it from AI Toolkit's folder (-l keeps a log for the next crash):",
            f"  {command}",
            "If it runs out of memory again, or once it trains through:",
            f"  {reopen_command(saved)}",
        ]
    return LeavingSummary(True, tuple(lines))


# --- web-UI jobs ------------------------------------------------------------------------------


def ui_job_note(state: WizardState) -> str | None:
    """For a web-UI job opened from its folder (its ``.job_config.json``), without ``--db``:
    the UI rewrites that file from its database at every start, so point to ``--db`` and
    the database found for it (None for any other job). The command line and the app show
    this same line."""
    if not state.job.ui_job or state.db_job is not None:
        return None
    from oom_wizard.jobdb import DB_FILE_NAME

    config = state.source
    name = config.parent.name
    candidates = []
    primary = state.document.view().primary
    recorded = state.document.get(primary.path("sqlite_db_path")) if primary is not None else None
    if isinstance(recorded, str) and recorded:
        candidates.append(Path(recorded))
    candidates.append(config.parent.parent.parent / DB_FILE_NAME)
    found = next((path for path in candidates if path.is_file()), None)
    where = f"--db {found} --job {name}" if found else f"--db PATH/{DB_FILE_NAME} --job {name}"
    return (
        f"{config.name} is written anew from AI Toolkit's jobs database at every start, so a "
        f"fixed copy of it changes nothing in the UI; to fix the job itself use {where}"
        + ("" if found else " (the database is aitk_db.db in the toolkit's folder)")
    )


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
    from oom_wizard.jobdb import request_save_now as ask

    if target.db is None or target.job is None:
        raise WizardError("only a job of AI Toolkit's jobs database can be asked to save now")
    from oom_wizard.jobdb import find_db

    return ask(find_db(target.db), target.job)


def new_job_name_problem(name: str) -> str | None:
    """Why a typed name cannot name a new web-UI job (None: it can; empty picks one)."""
    from oom_wizard.jobdb import new_job_name_problem as problem

    return problem(name.strip()) if name.strip() else None


def crashed_job_note(state: WizardState) -> str | None:
    """For a web-UI job whose row says ``running`` but whose process is gone: that it
    crashed, and that oom-wizard goes on (the command line and the app show this line)."""
    return state.db_job.crashed_note() if state.db_job is not None else None


def new_job_warning(state: WizardState) -> str | None:
    """What "save as a new job" costs, for a job of the web UI's database (None otherwise):
    :meth:`~wizard.jobdb.DbJob.new_job_warning`, the one rule the command line, the app and
    the change log word alike."""
    job = state.db_job
    if job is None:
        return None
    return (
        f"{job.new_job_warning()} To keep them, pick \"Update job '{job.name}'\" instead "
        "(oom-wizard restore undoes it)."
    )


# --- the user's settings --------------------------------------------------------------------------


def saved_theme() -> str | None:
    """The app's theme as the user chose it last (:mod:`oom_wizard.settings`)."""
    from oom_wizard.settings import saved_theme as read

    return read()


def remember_theme(theme: str) -> bool:
    """Remember the app's theme for the next start (atomically; False when it could not be)."""
    from oom_wizard.settings import save_theme

    return save_theme(theme)


# --- will it fit (the memory model in GiB) ------------------------------------------------------

CardSource: TypeAlias = Literal["nvidia-smi", "--gpu", "asked"]


@dataclass(frozen=True)
class Card:
    """The card the job is measured against: its memory in GiB and where that comes from."""

    gib: float
    source: CardSource


def probed_card(state: WizardState) -> Card | None:
    """The first GPU ``nvidia-smi`` showed at the open (the job's ``cuda:0``), if any."""
    probe = state.job.probe
    if probe is None or not probe.gpus:
        return None
    return Card(probe.gpus[0].total_gib, "nvidia-smi")


def memory_calibration(state: WizardState) -> Calibration | None:
    """What this config's own runs say about its peak: PyTorch's OOM message in its log (a
    floor of the phase that crashed), else the measured peak of its last ``run`` attempt
    (``attempts[].peak_gib`` of an attempt that ran this config).

    A log that is not this config's (``log_matches_config`` false) says nothing about it.
    """
    from oom_wizard.memory import calibration_from, calibration_from_attempts

    diagnosis = state.diagnosis
    if state.job.scan is not None and diagnosis.log_matches_config is not False:
        found = calibration_from(diagnosis, None)
        if found is not None:
            return found
    if state.changelog is not None and state.changelog.attempts:
        attempts = [attempt.model_dump() for attempt in state.changelog.attempts]
        return calibration_from_attempts(attempts, config=state.source.name)
    return None


def job_memory(
    state: WizardState, choices: Mapping[str, StepChoice] | None = None
) -> tuple[JobMemory, JobMemory]:
    """Each phase's band in GiB for today's config and with the choices (None: the plan's
    defaults), calibrated by the job's own figures when it has them."""
    from oom_wizard.memory import job_memory as memory_of
    from oom_wizard.plan import changes_for

    calibration = memory_calibration(state)
    kind = state.model_kind
    return (
        memory_of(state.document, [], kind, calibration=calibration),
        memory_of(
            state.document,
            changes_for(given(state, choices), choices),
            kind,
            calibration=calibration,
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
        from oom_wizard.plan import StepChoice

        return {step.id: StepChoice(step_id=step.id, enabled=True) for step in self.steps}


def fit_fix(state: WizardState, memory: JobMemory, card_gib: float) -> FitFix | None:
    """The plan's "just enough" fix against the card (:mod:`oom_wizard.sizing`: what costs no
    quality, then the fewest rungs whose saving leaves a margin on the card), in the plan's
    order; None when the peak's high edge is within the card already.

    The plan is the one for the moment of the peak phase (a training peak: ``early_steps``,
    a sample: ``sampling``, loading or the first sample: ``loading``), sized against the card
    with the job's calibration; ``apply --moment M --steps ...`` takes the steps as they are.
    """
    from oom_wizard.memory import PHASE_MOMENT
    from oom_wizard.memory import job_memory as memory_of
    from oom_wizard.plan import StepChoice as Choice
    from oom_wizard.plan import build_plan, changes_for

    if memory.peak().high <= card_gib:
        return None
    moment: Moment = PHASE_MOMENT[memory.peak_phase]  # type: ignore[assignment]
    calibration = memory.calibrated_by
    plan = build_plan(
        state.document,
        moment,
        state.model_kind,
        changelog=state.changelog,
        calibration=calibration,
        card_gib=card_gib,
        gpus=len(state.job.probe.gpus) if state.job.probe is not None else 1,
    )
    # The fix's own sizing (:mod:`oom_wizard.sizing`): what costs no quality, then the fewest
    # rungs that leave the margin; the safe set where no card sizes it.
    wanted = set(plan.fix_steps("just_enough" if "just_enough" in plan.fixes else "safe"))
    taken = [step for step in plan.steps if step.id in wanted and step.id != VALIDATION_STEP]
    trial = {s.id: Choice(step_id=s.id, enabled=s.id in wanted) for s in plan.steps}
    current = memory_of(
        state.document, changes_for(plan, trial), state.model_kind, calibration=calibration
    )
    return FitFix(moment, plan, tuple(taken), current, current.peak().high <= card_gib)


@dataclass(frozen=True)
class FitReport:
    """``oom-wizard fit``: the job's phases against the card, the verdict and the fix.

    Attributes:
        card: The card measured against.
        memory: The job's memory (calibrated when its runs say something).
        verdict: ``fits``, ``tight`` or ``wont_fit`` of the peak phase.
        fix: The roll-back steps that would make it fit (None when it fits).
    """

    card: Card
    memory: JobMemory
    verdict: Verdict
    fix: FitFix | None

    def to_json(self) -> dict[str, object]:
        """DESIGN.md's ``fit --json`` shape (``fix_moment`` and ``fix_fits`` beside ``fix``)."""
        memory = self.memory
        fix = self.fix
        return {
            "card_gib": round(self.card.gib, 2),
            "card_source": self.card.source,
            "phases": memory.phases_json(),
            "peak_phase": memory.peak_phase,
            "verdict": self.verdict,
            "parts_gib": memory.parts[memory.peak_phase].as_dict(),
            "calibrated_by": memory.calibrated_by.as_json() if memory.calibrated_by else None,
            "calibration_scale": round(memory.scale, 3),
            "known": memory.known,
            "notes": list(memory.notes),
            "fix": [step.to_json() for step in fix.steps] if fix is not None else [],
            "fix_moment": fix.moment if fix is not None else None,
            "fix_fits": fix.reaches if fix is not None else None,
            "fix_peak_gib": fix.memory.peak().rounded() if fix is not None else None,
        }


def fit(state: WizardState, card: Card) -> FitReport:
    """Will the job fit on ``card``: its phases' bands, the verdict and, when it does not
    fit, the roll-back that would make it."""
    from oom_wizard.memory import verdict

    memory, _after = job_memory(state, {})
    found = verdict(memory.peak(), card.gib)
    fix = fit_fix(state, memory, card.gib) if found != "fits" else None
    return FitReport(card, memory, found, fix)


def scale_up_prediction(state: WizardState, scale_up: ScaleUp) -> Prediction | None:
    """Whether the re-add is predicted to fit on the card (the probe's, else the one the
    job's figures name), from the headroom its crash or its runs showed; None when no card is
    known. The re-add stays allowed whatever it says."""
    from oom_wizard.scaleup import predict

    if state.changelog is None:
        return None
    card = probed_card(state)
    return predict(
        state.document,
        state.changelog,
        state.changelog_path,
        scale_up,
        state.model_kind,
        card_gib=card.gib if card is not None else None,
    )


def saved_keymap() -> UserKeymap:
    """The user's keymap in the settings file, as written (:mod:`oom_wizard.settings`)."""
    from oom_wizard.settings import read_keymap

    return read_keymap()


def keymap_problems_line(keymap: UserKeymap, problems: Sequence[SettingProblem]) -> str | None:
    """The one line that reports what of ``keymap`` cannot be used (None: all of it can)."""
    from oom_wizard.settings import keymap_problems_line as line

    return line(keymap.path, problems)
