"""Settling: the user's answers against the opened job give one diagnosis, one moment, one
model kind and one plan, held in the immutable :class:`WizardState`.
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

from oom_wizard.application.labels import moment_info
from oom_wizard.application.opening import OpenedJob, open_job
from oom_wizard.errors import WizardError
from oom_wizard.formats.document import Edit, JobDocument, RemoveKey, SetValue, load_document
from oom_wizard.host.media import MediaCount, count_media
from oom_wizard.host.probe import ProbeResult
from oom_wizard.host.tenants import CardTenants, card_tenants
from oom_wizard.logs.read import Watch, watching
from oom_wizard.paths import parse_path
from oom_wizard.request import JobRequest
from oom_wizard.rules.diagnosis import (
    Answers as Answers,  # the answers a caller passes
    Diagnosis,
    diagnose,
)
from oom_wizard.rules.host import DatasetKey, HostMemory, host_memory, lowering_steps
from oom_wizard.rules.memory import (
    Calibration,
    calibration_from,
    calibration_from_attempts,
    calibration_from_json,
    calibration_from_record,
)
from oom_wizard.rules.modelkind import find_model_kind
from oom_wizard.rules.options import option_findings
from oom_wizard.rules.plan import (
    Plan,
    StepChoice,
    StepProposal,
    build_plan,
    changes_for,
    given_choices,
)
from oom_wizard.rules.tenants import room_gib, tenants_words
from oom_wizard.spelling import value as show_value
from oom_wizard.storage.changelog import ChangeLog, resolve_recorded
from oom_wizard.vocabulary import DEFAULT_MOMENT, VALIDATION_RUN, ModelKind, Moment

if TYPE_CHECKING:
    from oom_wizard.storage.jobdb import DbJob

#: The optional validation run is offered on the review screen, not as a step screen.
VALIDATION_STEP = VALIDATION_RUN


#: Where a settled moment or kind came from: the user, the log (or config), or a default.
Source = Literal["answer", "found", "assumed"]


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

    found = find_model_kind(job.document.view().primary)
    answers = disagreeing(answers, job.log_diagnosis.moment, found.kind)
    diagnosis = diagnosis_of(job, answers)
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
        gpus=len(job.card_probe.gpus) if job.card_probe is not None else 1,
    )
    return Settled(moment, moment_source, kind, kind_source, found.source, diagnosis, plan, crashed)


def crash_figures(
    job: OpenedJob, diagnosis: Diagnosis, moment: str
) -> tuple[Calibration | None, float | None]:
    """The job's own figures (:func:`job_calibration`) and the card's capacity
    (:func:`job_card`; a run's record without a probe or a message: the card it ran on; None:
    unknown). ``moment`` is kept for the callers that settle a moment: the figures are about
    the phase that crashed, whatever the moment."""
    del moment
    calibration = job_calibration(job, diagnosis)
    card = job_card(job, diagnosis)
    if card is not None:
        return calibration, card.room_gib
    return calibration, calibration.card_gib if calibration is not None else None


def job_calibration(job: OpenedJob, diagnosis: Diagnosis) -> Calibration | None:
    """THE calibration of a job's lineage (:mod:`oom_wizard.rules.memory`'s rule), asked by
    every figure of the job (``fit``, ``plan``, ``apply``, the app, ``scale-up``, ``run``,
    ``history``).

    First found first: PyTorch's OOM message in this config's own log (a floor of the phase
    that crashed; a log that is not this config's, ``log_matches_config`` false, says nothing
    about it); else the newest point of its lineage in its change log: a ``run`` attempt's
    measured peak (``attempts[].peak_gib``, of this config or of an ancestor on the same
    card; what ``watch`` read of a run it followed is such an attempt too) or the crash a
    roll-back was saved from (``runs[].memory.calibrated_by``, else ``runs[].diagnosis``).
    A point about another config carries it (:attr:`Calibration.on`), so that the figure of
    every config saved from a crash rests on that crash's factor.
    Last, the phases this config's log shows passing (no figure, only a ceiling).
    """

    for seen_job, seen_diagnosis, seen in _CALIBRATIONS:
        if seen_job is job and seen_diagnosis is diagnosis:
            return seen
    found = _job_calibration(job, diagnosis)
    _CALIBRATIONS.append((job, diagnosis, found))
    return found


_CALIBRATIONS: deque[tuple[OpenedJob, Diagnosis, Calibration | None]] = deque(maxlen=4)
"""The last few answers of :func:`job_calibration` (a job and a diagnosis are immutable; a
surface asks several times per figure, and rebuilding an ancestor costs tens of ms)."""


def _job_calibration(job: OpenedJob, diagnosis: Diagnosis) -> Calibration | None:
    found = None
    if job.scan is not None and diagnosis.log_matches_config is not False:
        found = calibration_from(diagnosis, None)
        if found is not None and found.at_least_gib is not None:
            return found
    lineage = None
    if job.changelog is not None:
        lineage = lineage_calibration(job.document, job.changelog, job.changelog_path, _probed(job))
    return lineage or found  # a log that only shows phases passing says the least


def _probed(job: OpenedJob) -> float | None:
    probe = job.card_probe
    return probe.gpus[0].total_gib if probe is not None and probe.gpus else None


#: The outcomes of a run that went through its phases: its measured peak is a point of them.
WENT_THROUGH: Final = frozenset({"finished", "passed_validation", "trained_nothing"})

#: A measured peak is about "the same card" when the capacities differ by less than this.
SAME_CARD_GIB: Final = 1.0


def lineage_calibration(
    document: JobDocument,
    changelog: ChangeLog,
    changelog_path: Path | None,
    card_gib: float | None = None,
) -> Calibration | None:
    """The newest calibration point of ``document``'s lineage in ``changelog`` (see
    :func:`job_calibration`); ``card_gib``: today's card, when known (a peak measured on
    another card says nothing about this one). None when the change log holds none."""

    points: list[tuple[str, Calibration]] = []
    attempts = [attempt.model_dump() for attempt in changelog.attempts]
    for index, attempt in enumerate(changelog.attempts):
        if attempt.peak_gib is None or attempt.peak_gib <= 0:
            continue
        if attempt.outcome not in WENT_THROUGH and not attempt.watched:
            continue  # a crashed run's reading is below what its phase needed: no point
        # (``watch`` keeps as the peak only a phase the run went through: its readings were
        # taken phase by phase)
        if (
            card_gib is not None
            and attempt.card_gib is not None
            and abs(attempt.card_gib - card_gib) >= SAME_CARD_GIB
        ):
            continue
        own = Path(attempt.config).name == document.source.name
        point = calibration_from_attempts(attempts[: index + 1], config=Path(attempt.config).name)
        if point is None:
            continue
        if attempt.watched:
            point = replace(point, source=f"attempt {index + 1}, read by watch from nvidia-smi")
        if not own:
            ran = _recorded_document(changelog_path, attempt.config)
            if ran is None:
                continue
            point = replace(point, on=ran, source=f"{point.source} of {Path(attempt.config).name}")
        points.append((attempt.at, point))
    for index, run in enumerate(changelog.runs):
        if run.direction != "rollback":
            continue
        if not isinstance((run.diagnosis or {}).get("oom"), Mapping):
            continue  # no message in this run's log: what it recorded is an ancestor's point
        recorded = (run.memory or {}).get("calibrated_by")
        point = calibration_from_json(recorded) if isinstance(recorded, Mapping) else None
        point = point or calibration_from_record(run.diagnosis)
        if point is None or point.at_least_gib is None:
            continue
        crashed = _before_run(document, changelog, index)
        if crashed is None:
            continue
        where = recorded_crash_words(changelog, index)
        points.append((run.at, replace(point, on=crashed, source=where)))
    if not points:
        return None
    return max(points, key=lambda item: item[0])[1]


def recorded_crash_words(changelog: ChangeLog, run: int) -> str:
    """Where the OOM message of the crash that roll-back ``run`` was saved from is, in words:
    ``PyTorch's OOM message in the log of the crash this config was saved from, log.txt,
    2026-12-07``: the log's name as the change log records it and the day of the save (``this
    config descends from`` when later saves followed). The figures it gives and the card it
    names both say this."""

    record = changelog.runs[run]
    log = (record.diagnosis or {}).get("log")
    day = record.at[:10]
    where = f"{Path(log).name}, {day}" if isinstance(log, str) and log else day
    whose = "was saved from" if run == len(changelog.runs) - 1 else "descends from"
    return f"PyTorch's OOM message in the log of the crash this config {whose}, {where}"


def _before_run(document: JobDocument, changelog: ChangeLog, run: int) -> JobDocument | None:
    """``document`` (the change log's latest config) as it was before run ``run`` changed
    it: the config that crashed, rebuilt from the entries of that run and of every later
    one, undone newest first. None when a recorded field cannot be undone."""
    edits: list[Edit] = []
    for entry in reversed(changelog.changes):
        if entry.run < run:
            continue
        try:
            path = parse_path(entry.path)
        except WizardError:
            return None
        edits.append(RemoveKey(path) if entry.before is None else SetValue(path, entry.before))
    try:
        crashed = document.with_edits(edits)
    except (WizardError, KeyError, IndexError, TypeError, ValueError):
        return None
    return crashed


def _recorded_document(changelog_path: Path | None, recorded: str) -> JobDocument | None:
    """The config a change log records (an attempt's), loaded; None when it is gone."""
    if changelog_path is None:
        return None
    try:
        return load_document(resolve_recorded(changelog_path, recorded))
    except (WizardError, OSError):
        return None


CardOrigin: TypeAlias = Literal["--gpu", "asked", "nvidia-smi", "oom-message"]

#: Where a card's size comes from, in words (:attr:`JobCard.words`, which ``fit``, ``plan``
#: and the app say as "card from …"). An OOM message that is not in the log read now is
#: named by :attr:`JobCard.message`.
CARD_ORIGIN_WORDS: Final[Mapping[CardOrigin, str]] = {
    "--gpu": "--gpu",
    "asked": "your answer",
    "nvidia-smi": "nvidia-smi",
    "oom-message": "PyTorch's OOM message in the log",
}


@dataclass(frozen=True)
class JobCard:
    """The card a job is weighed against, settled once by :func:`job_card`.

    Attributes:
        gib: Its memory in GiB.
        source: Where that comes from.
        device: The device AI Toolkit trains on (``cuda:0`` unless the process says).
        count: How many GPUs ``nvidia-smi`` saw (0: not probed, or none).
        tenants: What else holds memory on it now (``nvidia-smi``; None: not probed).
        message: For a card from an OOM message that is not in the log read now, where it is
            in words: the crash its config was saved from (:func:`recorded_crash_words`).
    """

    gib: float
    source: CardOrigin
    device: str = "cuda:0"
    count: int = 0
    tenants: CardTenants | None = None
    message: str | None = None

    @property
    def room_gib(self) -> float:
        """What the job is weighed against: the card, or what is free beside its other tenants
        when they hold a real share of it (:mod:`oom_wizard.rules.tenants`)."""
        return room_gib(self.tenants) if self.tenants is not None else self.gib

    @property
    def words(self) -> str:
        """Where its size comes from, in words: the one wording ``fit``, ``plan``, the app and
        the change log give (``PyTorch's OOM message in the log``, ``nvidia-smi``...)."""
        if self.source == "oom-message" and self.message is not None:
            return self.message
        return CARD_ORIGIN_WORDS[self.source]

    def tenants_words(self) -> str | None:
        """Its other tenants in a sentence (None: not probed, or nothing worth a word)."""
        return tenants_words(self.tenants) if self.tenants is not None else None


def job_card(
    job: OpenedJob,
    diagnosis: Diagnosis,
    given: float | None = None,
    given_source: CardOrigin = "--gpu",
) -> JobCard | None:
    """THE card of a job, by one written rule: the size the user gave (``--gpu``, an
    answer); else the card AI Toolkit will train on as ``nvidia-smi`` shows it (the first
    process's ``device``, ``cuda:0`` by default), with its other tenants: at the open, or as
    ``run`` read it before its first attempt (:attr:`OpenedJob.card_read`); else the card in
    the crash's OOM message (that card stays with the calibration too, which says when it
    differs). None when nothing says.

    The tenants count once, here, in :attr:`JobCard.room_gib`: the crash's calibration is
    the job's own (PyTorch's allocated plus the allocation that failed), never the card's
    memory in use, which holds the other processes the message names."""

    index = _trained_gpu_index(job)
    device = f"cuda:{index}"
    probe = job.card_probe  # nvidia-smi at the open, or run's reading before its first attempt
    count = len(probe.gpus) if probe is not None else 0
    if given is not None:
        return JobCard(given, given_source, device, count)
    if probe is not None and probe.gpus:
        gpu = next((g for g in probe.gpus if g.index == index), probe.gpus[0])
        tenants = card_tenants(probe, gpu.index)
        return JobCard(gpu.total_gib, "nvidia-smi", device, count, tenants)
    if diagnosis.oom is not None and diagnosis.oom.total:
        return JobCard(diagnosis.oom.total, "oom-message", device, count)
    calibration = job_calibration(job, diagnosis)  # the lineage's crash names its card
    if calibration is not None and calibration.at_least_gib is not None and calibration.card_gib:
        message = calibration.source if calibration.on is not None else None
        return JobCard(calibration.card_gib, "oom-message", device, count, message=message)
    return None


def _trained_gpu_index(job: OpenedJob) -> int:
    """The index of the GPU AI Toolkit trains the job on: the first process's ``device``
    (``cuda:0`` when it names none)."""
    processes = job.document.view().processes
    return processes[0].gpu_index if processes else 0


def card_of(job: OpenedJob, diagnosis: Diagnosis) -> tuple[float | None, str | None]:
    """What the job is weighed against (:func:`job_card`'s :attr:`JobCard.room_gib`: the card,
    or what is free beside its other tenants) in GiB, and where it comes from, in words;
    ``(None, None)`` when nothing says."""
    card = job_card(job, diagnosis)
    if card is None:
        return None, None
    if card.room_gib < card.gib:
        return card.room_gib, f"{card.words}: what is free beside the card's other tenants"
    return card.gib, card.words


def option_notes(state: WizardState) -> tuple[str, ...]:
    """The newer options of the config that change memory, each with its source, effect and
    lever (:mod:`oom_wizard.rules.options`): ``fit``, ``plan`` and ``apply`` say them."""
    return tuple(finding.words() for finding in option_findings(state.document))


def machine_ram(state: WizardState) -> float | None:
    """The machine's RAM in GiB as the probe read it (None: no probe, or not Linux)."""
    probe = state.job.probe
    return probe.host_total_gib if probe is not None else None


def host_of(
    state: WizardState, document: JobDocument | None = None, ram_gib: float | None = None
) -> HostMemory:
    """The host's RAM per phase for ``document`` (default: the job's config) against
    ``ram_gib`` (default: :func:`machine_ram`), on this platform: the one host account that
    ``fit``, ``plan``, the app and the change log's ``runs[].memory.host`` state
    (:mod:`oom_wizard.rules.host`)."""
    ram = ram_gib if ram_gib is not None else machine_ram(state)
    document = document if document is not None else state.document
    return host_memory(
        document, ram, windows=sys.platform == "win32", media=dataset_media(document)
    )


def dataset_media(document: JobDocument) -> dict[DatasetKey, MediaCount | None]:
    """The folders of the datasets that keep their latents in RAM (``cache_latents``, with or
    without ``cache_latents_to_disk``), counted on this machine as AI Toolkit lists them
    (:func:`~oom_wizard.host.media.count_media`); None for one that is not here. A relative
    ``folder_path`` is taken from the config's folder."""
    found: dict[DatasetKey, MediaCount | None] = {}
    for process in document.view().processes:
        for dataset in process.datasets:
            if dataset.cache_latents is not True:
                continue
            folder = Path(dataset.folder_path) if dataset.folder_path else None
            if folder is not None and not folder.is_absolute():
                folder = document.source.parent / folder
            found[process.index, dataset.index] = count_media(folder) if folder else None
    return found


def host_note(state: WizardState) -> str | None:
    """The host's RAM in a sentence when it is the limit or close to it, against the RAM the
    probe read (:mod:`oom_wizard.rules.host`); None otherwise. ``plan`` and the app say it,
    ``fit`` gives it whole."""
    if machine_ram(state) is None:
        return None
    host = host_of(state)
    words = host.words()
    if words is None:
        return None
    steps = host_steps(state, host)
    if steps:
        return f"{words}; the plan's steps that lower it: {', '.join(steps)}"
    return words


def host_steps(state: WizardState, host: HostMemory) -> tuple[str, ...]:
    """The plan's steps, each taken alone with its default fields, that lower the host's peak
    by the one host account (:func:`~oom_wizard.rules.host.lowering_steps`): none that raises
    host RAM (layer offloading, the low-memory path) is ever named."""
    plan = state.plan
    candidates = {
        step.id: changes_for(plan, {step.id: StepChoice(step.id, True)})
        for step in plan.steps
        if step.available and not step.satisfied and step.id != VALIDATION_RUN
    }
    return lowering_steps(
        state.document,
        host.ram_gib,
        candidates,
        windows=sys.platform == "win32",
        media=dataset_media(state.document),
    )


def card_note(job: OpenedJob) -> str | None:
    """The job's card's other tenants in a sentence (``nvidia-smi``: pid, name, GiB), and what
    the job is weighed against; None without a probe or with nothing worth a word. ``fit``,
    ``plan`` and the app say it."""
    if job.probe is None or not job.probe.gpus:
        return None
    tenants = card_tenants(job.probe, _trained_gpu_index(job))
    return tenants_words(tenants) if tenants is not None else None


def diagnosis_of(job: OpenedJob, answers: Answers) -> Diagnosis:
    """The job's diagnosis for answers that already differ from the job (see :func:`settle`);
    with none, the log's own, made once at the open (:attr:`OpenedJob.log_diagnosis`)."""
    if answers == Answers():
        return job.log_diagnosis
    return diagnose(
        job.scan,
        job.document.view(),
        answers=answers,
        probe=job.probe,
        changelog=job.changelog,
        running=job.db_job.running_words if job.db_job is not None else None,
    )


def disagreeing(answers: Answers, moment: Moment | None, kind: ModelKind | None) -> Answers:
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


def start(
    request: JobRequest,
    answers: Answers | None = None,
    *,
    new_crash: bool = False,
    card_read: ProbeResult | None = None,
) -> WizardState:
    """Open the job and settle it: the one way a :class:`WizardState` comes to be, for the
    app's first state (no answer given yet), ``plan``, ``apply``, ``diagnose`` and ``run``.

    Args:
        request: What to open.
        answers: What the user said on the command line (None: nothing yet).
        new_crash: The config is our own fix and its run crashed too (``run`` knows it, and
            ``--new-crash`` says it).
        card_read: ``run``'s reading of the card before its first attempt: the job's card,
            its other tenants included, where no probe is made at the open
            (:attr:`~oom_wizard.application.opening.OpenedJob.card_read`).

    Raises:
        WizardError: see :func:`open_job`.
    """
    job = open_job(request, card_read=card_read)
    given = answers if answers is not None else Answers()
    return WizardState(job, given, settle(job, given, new_crash=new_crash))


def start_watched(request: JobRequest, watch: Watch) -> WizardState:
    """:func:`start`, its log scans reporting their progress to ``watch`` and stopping when it
    says so (the app's load screen: a large log shows how far it is read, and Esc stops it).

    Raises:
        ScanCancelled: ``watch`` cancelled the read.
        WizardError: see :func:`open_job`.
    """
    with watching(watch):
        return start(request)


def advice_for(state: WizardState, answers: Answers) -> tuple[str, ...]:
    """The advice beyond the config that these answers get: ``diagnose``'s "first change"
    and "also" lines (with ``--worked-before``, a toolkit or driver update to suspect).

    The diagnosis :func:`settle` makes, without the plan (the advice does not depend on it):
    the moment screen asks at every tick.
    """
    job = state.job
    found = find_model_kind(job.document.view().primary)
    diagnosis = diagnosis_of(job, disagreeing(answers, job.log_diagnosis.moment, found.kind))
    return tuple(item.text for item in diagnosis.advice)


def retry_crashed(state: WizardState) -> WizardState:
    """The state after "the retry ran out of memory again": the plan goes one rung further."""
    settled = settle(state.job, state.answers, new_crash=True)
    return replace(state, settled=settled, choices=MappingProxyType({}))


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
    if diagnosis.crash_step is not None:  # the step it ended in, not the bar's count of those done
        total = f" of {scan.total_steps}" if scan.total_steps else ""
        where += f" · in step {diagnosis.crash_step}{total}"
    elif scan.last_step is not None and scan.total_steps:
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
    :func:`oom_wizard.rules.diagnosis.diagnose`) exactly when the settled moment was *found*, not
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


def memory_calibration(state: WizardState) -> Calibration | None:
    """What this config's own runs say about its peak (:func:`job_calibration`): every figure
    of the job's memory, in every front end, is calibrated by this one."""
    return job_calibration(state.job, state.diagnosis)


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

        why = f"{self.step} is not in this plan" if self.gone else "this step no longer changes it"
        return f"{self.label} {show_value(self.value)} ({why})"


def given(state: WizardState, choices: Mapping[str, StepChoice] | None) -> Plan:
    """The plan with every step's proposals as the choices of the steps before it leave
    them (:func:`oom_wizard.rules.plan.given_choices`; None: the defaults)."""

    return given_choices(state.plan, state.document, choices)
