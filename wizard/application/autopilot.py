"""The autopilot: run the trainer, and on an out-of-memory crash roll back one step and retry.

Plain logic. The trainer is behind :class:`Runner` (``oom_wizard.application.running`` runs a real
child; a test can pass a function), the user behind :class:`Asker`. After a crash the job is
opened on that attempt's log through the application layer (``oom_wizard.application``), as the
wizard opens it: one diagnosis, one plan, the next fix preselected
(:func:`~oom_wizard.application.choosing.preselect_fix`: every step at its default, the short
validation run).
With ``--auto`` the loop saves that fix through the application layer's save, as a new config
beside the
last one with its change log; an asker may instead let the user change and save it (the wizard),
and the config the user saved is what runs next (:class:`UserSave`).

The first retry after a fix is a short validation run: the plan's ``validation_run`` step
sets ``train.steps`` to ``validation_steps``, raised to one past the config's first periodic
save and sample (:func:`oom_wizard.rules.plan.validation_run_steps`), so a validation run that exits
cleanly got past its first steps and through a save and a sample where the config makes them
(AI Toolkit saves and samples once more after its last step as well). Then the scale-up's
first re-add puts the original step count back, and the full run starts.

It never relaunches an unchanged config. It stops, and says why, when the verdict is
``environment``, when the crash is not an out-of-memory one, when the plan has nothing left to
change (the ladder is exhausted, or the same crash came back with no step left), when
``max_retries`` roll-backs were tried, or when the user stops it.

A job of AI Toolkit's web UI (:class:`DbJobRef`) runs the same way: its config is its row of the
jobs database, written for each attempt to a file of its own beside the job's change log (the
trainer gets that path), and each fix is saved into the row in place, with its change log, as
``apply --db --in-place`` saves it (the database refuses while the UI runs the job).

``scale_up=True`` is the same loop upward after a finished run (of a config file): one
setting back per run in the scale-up order; when a run with a re-added setting crashes, that
setting is rolled back and that config is the stable one.

Every attempt (config, how it ended, duration) goes into the change log's ``attempts``: the
change log beside the config it ran when that config is our output (rewritten atomically), and
in any case the next saved change log carries the attempts before it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal, Protocol

from oom_wizard.application.attempts import describe_outcome
from oom_wizard.application.choosing import (
    effective_choices,
    prepared,
    preselect_fix,
    validation_note,
)
from oom_wizard.application.fitting import job_memory
from oom_wizard.application.learned import learned
from oom_wizard.application.opening import open_job, settle_database
from oom_wizard.application.running import TrainerEnd, processes_note
from oom_wizard.application.saving import InPlace, SaveResult, ToFile, memory_json, save
from oom_wizard.application.scale_up import (
    next_scale_up,
    open_for_scale_up,
    prepare_scale_up,
    save_scale_up,
    save_undo_scale_up,
    scale_up_notes,
)
from oom_wizard.application.settling import job_card, start
from oom_wizard.errors import WizardError
from oom_wizard.logs.result import crash_phase
from oom_wizard.logs.scan import scan_log
from oom_wizard.logs.signals import GPU_SIGNALS, HOST_SIGNALS
from oom_wizard.request import JobRequest
from oom_wizard.rules.memory import JobMemory, measured_phase
from oom_wizard.rules.oneoff import one_off_oom, with_expandable_segments
from oom_wizard.rules.scaleup import pending_scale_ups
from oom_wizard.spelling import counted
from oom_wizard.storage.atomic import atomic_write
from oom_wizard.storage.changelog import (
    AttemptRecord,
    ChangeLog,
    FileRef,
    changelog_path_for,
    now_iso,
    read_changelog,
    sha256_of,
)
from oom_wizard.storage.changes import changelog_of
from oom_wizard.storage.jobdb import (
    DbSaveResult,
    find_db,
    job_document,
    job_source,
    load_job,
    read_job_changelog,
)
from oom_wizard.storage.jobdir import load_config
from oom_wizard.storage.resume import resume_point
from oom_wizard.vocabulary import VALIDATION_RUN

if TYPE_CHECKING:
    from oom_wizard.application.saving import Destination
    from oom_wizard.application.settling import WizardState
    from oom_wizard.formats.document import JobDocument
    from oom_wizard.host.probe import ProbeResult
    from oom_wizard.logs.result import LogScan
    from oom_wizard.rules.diagnosis import Diagnosis
    from oom_wizard.storage.changes import Prepared

Status = Literal["finished", "stopped", "interrupted", "terminated"]
EXIT_STATUS: Final[dict[Status, int]] = {
    "finished": 0,
    "stopped": 2,
    "interrupted": 130,
    "terminated": 143,
}
"""DESIGN.md's exit statuses of ``run``: 130 for SIGINT (Ctrl-C), 143 for SIGTERM."""
LOG_TAIL_LINES: Final = 12
"""Lines of the log shown when the trainer failed for a reason that is not memory."""
NEXT_STEPS: Final = (
    "a card with more memory (or one with nothing else on it)",
    "a smaller model, or a quantized one (model.quantize, a lower qtype)",
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True in the trainer's environment, "
    "against fragmentation",
)
"""What is left when no roll-back is: said when the ladder or ``--max-retries`` runs out."""

DEFAULT_MAX_RETRIES: Final = 5
DEFAULT_VALIDATION_STEPS: Final = 100


class Runner(Protocol):
    """Runs the trainer on ``config`` to its end, its output appended to ``log``; ``env``: what
    the trainer's environment gains for this run only (the allocator setting of the one retry
    of a one-off crash), never the user's config."""

    def __call__(
        self, config: Path, log: Path, env: Mapping[str, str] | None = None
    ) -> TrainerEnd: ...


@dataclass(frozen=True)
class DbJobRef:
    """A job of AI Toolkit's web UI: its row in the jobs database is the config."""

    db: Path
    name: str

    def __str__(self) -> str:
        return f"job '{self.name}' of {self.db}"


#: What the loop runs: a config file, or a web-UI job.
Where = Path | DbJobRef


def db_job_to_run(db: Path, name: str) -> DbJobRef:
    """The web-UI job ``run --db PATH --job NAME`` names, refused while the UI runs it (or is
    about to): not a second trainer on the same job.

    Raises:
        JobDatabaseError: no database or no such job; WizardError: the job is busy.
    """

    found = settle_database(find_db(db))
    busy = load_job(found, name).busy_reason()
    if busy is not None:
        raise WizardError(busy, file=found)
    return DbJobRef(found, name)


def check_readable(where: Where, *, edited_ok: bool = False) -> None:
    """Load the config as the loop will: the one-line error of a broken one, of a value
    outside the limits, or (without ``edited_ok``) of one edited after our save, before
    anything starts."""

    open_job(dataclasses.replace(_request(where, None), edited_ok=edited_ok))


@dataclass(frozen=True)
class UserSave:
    """The user saved a fix themselves (in the wizard): the config the next attempt runs.

    Attributes:
        saved: What the save wrote (a config file, or the job's row or a new job).
        changed: What the save changed, one line per field (``path: before → after``).
    """

    saved: SaveResult | DbSaveResult
    changed: tuple[str, ...]


class NoTerminal:
    """The asker's answer when there is no terminal to ask in (it stops, and says so)."""

    def __repr__(self) -> str:
        return "NO_TERMINAL"


NO_TERMINAL: Final = NoTerminal()


class Asker(Protocol):
    """Asks the user about the next fix (``--auto`` answers yes).

    ``state`` is the job opened on the crash with the fix preselected, ``fix`` that fix in
    lines. True: save it as it is; False: stop; a :class:`UserSave`: the user saved a fix;
    :data:`NO_TERMINAL`: nobody to ask (stop, and say how to go on).
    """

    def __call__(self, state: WizardState, fix: Sequence[str]) -> bool | UserSave | NoTerminal: ...


@dataclass(frozen=True)
class Settings:
    """How the loop runs.

    Attributes:
        max_retries: Roll-backs (or, with ``scale_up``, re-adds) tried at most.
        validation_steps: ``train.steps`` of the short run after each fix (0: none).
        scale_up: Go upward from a finished run instead of down from a crash.
        edited_ok: Go on from a config edited after our save (else it is refused).
    """

    max_retries: int = DEFAULT_MAX_RETRIES
    validation_steps: int = DEFAULT_VALIDATION_STEPS
    scale_up: bool = False
    edited_ok: bool = False
    """The user's word (``--edited-ok``) to go on from a starting config edited after
    oom-wizard saved it, with its change log."""


@dataclass(frozen=True)
class Attempt:
    """One run of the trainer and how it ended."""

    number: int
    config: Path
    kind: Literal["full", "validation"]
    log: Path
    outcome: str
    step: int | None
    total: int | None
    phase: str | None
    moment: str | None
    exit_code: int
    duration_s: float
    at: str
    changed: tuple[str, ...] = ()
    """What this attempt's config changed from the config of the attempt before."""
    resumed_from: int | None = None
    """The step the trainer resumed from (its log's bar started there), if not 0."""
    trained: int = 0
    """Training steps the log's step counter advanced in this attempt."""
    peak_gib: float | None = None
    """The GPU memory the card showed in use at most while it ran (nvidia-smi), if read."""
    card_gib: float | None = None
    """The card's memory (nvidia-smi), if read."""
    hung_after_error: float | None = None
    """It printed its fatal error, then nothing for this many seconds, and was ended."""
    processes: str = ""
    """What became of its processes (:func:`~oom_wizard.application.running.processes_note`)."""
    environment: tuple[str, ...] = ()
    """What its trainer's environment was given beyond the user's (``NAME=value``): the
    allocator setting of the one retry of a one-off crash."""
    estimate: dict[str, object] | None = None
    """What the model said of its config before it ran (the lineage's calibration): the
    change log's ``memory`` shape."""
    peak_phase: str | None = None
    """The phase ``peak_gib`` is a point of (:func:`~oom_wizard.rules.memory.measured_phase`)."""
    learned: str = ""
    """After a clean end: what its saved adapter and its loss show
    (:func:`~oom_wizard.application.learned.learned`); ``trained_nothing`` says it did not
    change, with these words."""

    def describe(self) -> str:
        """``crashed at step 3 in training (early_steps)`` and the like."""
        ended = describe_outcome(self.outcome, self.step, self.phase, self.moment, self.exit_code)
        if self.outcome == "untrained" and self.resumed_from:
            ended += f" (it resumed at step {self.resumed_from} of {self.total})"
        elif self.resumed_from and self.outcome in ("passed_validation", "finished"):
            ended += f", {self.trained} of them trained after resuming at step {self.resumed_from}"
        if self.hung_after_error is not None:
            ended += (
                f"; it printed the error and then nothing for {self.hung_after_error:g} s "
                "without exiting, so its processes were ended"
            )
        return ended

    def record(self) -> AttemptRecord:
        """The change log's entry."""
        return AttemptRecord(
            at=self.at,
            config=str(self.config),
            kind=self.kind,
            outcome=self.outcome,
            step=self.step,
            phase=self.phase,
            moment=self.moment,
            exit_code=self.exit_code,
            duration_s=round(self.duration_s, 3),
            log=str(self.log),
            peak_gib=self.peak_gib,
            card_gib=self.card_gib,
            environment=self.environment,
            learned=self.learned or None,
            estimate=self.estimate,
            peak_phase=self.peak_phase,
        )


@dataclass(frozen=True)
class Outcome:
    """Where the loop ended."""

    status: Status
    reason: str
    attempts: tuple[Attempt, ...]
    config: Path
    """The config it ended with (a web-UI job's pseudo path, ``aitk_db.db#job=NAME.json``)."""
    saved: tuple[Path, ...] = ()

    @property
    def exit_status(self) -> int:
        """0 finished, 2 stopped without a finished run, 130 interrupted, 143 terminated."""
        return EXIT_STATUS[self.status]

    def summary(self) -> tuple[str, ...]:
        """One line per attempt: its config, how it ended, and what was changed before it."""
        lines = []
        for attempt in self.attempts:
            before = f" after changing {', '.join(attempt.changed)}:" if attempt.changed else ":"
            if attempt.environment:
                before = f" with {' '.join(attempt.environment)}, the config unchanged:"
            peak = (
                f", {attempt.peak_gib:.1f} of {attempt.card_gib:.1f} GiB at most"
                if attempt.peak_gib is not None and attempt.card_gib is not None
                else ""
            )
            lines.append(
                f"{attempt.number}. {attempt.config.name} ({attempt.kind}){before} "
                f"{attempt.describe()}, {attempt.duration_s:.1f} s{peak}"
            )
        return tuple(lines)


def always_yes(state: WizardState, fix: Sequence[str]) -> bool:
    """The ``--auto`` asker."""
    return True


def fresh_log_path(config: Path) -> Path:
    """``job.oomfix.yaml`` → ``job.oomfix.run.log`` beside it, never an existing file."""
    candidate = config.with_name(f"{config.stem}.run.log")
    n = 2
    while candidate.exists():
        candidate = config.with_name(f"{config.stem}.run-{n}.log")
        n += 1
    return candidate


@dataclass
class _Loop:
    """The loop's state (private; :func:`autopilot` is the entry point)."""

    runner: Runner
    ask: Asker
    settings: Settings
    say: Callable[[str], None]
    attempts: list[Attempt] = field(default_factory=list)
    pending: list[AttemptRecord] = field(default_factory=list)
    records: list[AttemptRecord] = field(default_factory=list)
    """Every attempt of this loop as recorded, in order: each save's change log carries them."""
    saved: list[Path] = field(default_factory=list)
    changed: tuple[str, ...] = ()
    """The changes the last save made: they belong to the next attempt."""
    tried: list[str] = field(default_factory=list)
    """The roll-backs' field changes so far (the validation run's step count left out)."""
    allocator_retried: bool = False
    """The one retry of a one-off crash with the allocator setting was made."""
    card_read: Callable[[], ProbeResult | None] = lambda: None
    """The card as read before the first attempt (``run``'s :class:`CardWait`; None: not
    read): each roll-back is sized against it, its other tenants included."""

    def run_once(
        self,
        where: Where,
        kind: Literal["full", "validation"],
        env: Mapping[str, str] | None = None,
    ) -> tuple[Attempt, LogScan]:

        config = _runnable(where)
        log = fresh_log_path(config)
        extra = tuple(f"{name}={value}" for name, value in (env or {}).items())
        given = f" with {' '.join(extra)} in the trainer's environment" if extra else ""
        self.say(f"Attempt {len(self.attempts) + 1}: {kind} run of {where}{given} (log {log})")
        document = _document(where)
        warning = resume_warning(document)
        if warning is not None:
            self.say(f"⚠ {warning}")
        resume = resume_point(document)
        estimate = estimate_before_run(where)
        at, since = now_iso(), time.time() - 1.0  # a file's time may round down
        end = self.runner(config, log, env) if env else self.runner(config, log)
        if not log.exists():
            log.touch()
        scan = scan_log(log)
        start, trained = steps_trained(scan, resumable=resume is not None)
        outcome, read = _outcome(end, scan, kind, trained), ""
        if outcome in ("finished", "passed_validation"):
            found = learned(document, log, since)
            read = found.verdict() if found.nothing else found.words
            if found.nothing:
                outcome = "trained_nothing"
                self.say(f"⚠ {found.verdict()}")
        attempt = Attempt(
            number=len(self.attempts) + 1,
            config=config,
            kind=kind,
            log=log,
            outcome=outcome,
            step=scan.last_step,
            total=scan.total_steps,
            phase=crash_phase(scan),
            moment=None,
            exit_code=end.returncode,
            duration_s=end.duration_s,
            at=at,
            changed=self.changed,
            resumed_from=start or None,
            trained=trained,
            peak_gib=end.peak_gib,
            card_gib=card_of(end, scan),
            estimate=memory_json(estimate) if estimate is not None else None,
            peak_phase=(
                measured_phase(crash_phase(scan), outcome in TRAINED_THROUGH, estimate)
                if estimate is not None and end.peak_gib is not None
                else None
            ),
            hung_after_error=end.hung_after_error,
            processes=processes_note(end),
            environment=extra,
            learned=read,
        )
        self.changed = ()
        return attempt, scan

    def remember(self, attempt: Attempt, where: Where) -> None:
        """Keep the attempt, and write it into the change log of its config when it is ours."""
        self.attempts.append(attempt)
        self.say(f"Attempt {attempt.number}: {attempt.describe()} after {attempt.duration_s:.1f} s")
        record = attempt.record()
        self.records.append(record)
        if keep_attempt(where, record) is None:
            self.pending.append(record)

    def attach_pending(self, changelog: Path) -> None:
        """Give ``changelog`` (just saved) every attempt of this loop, in order, after the
        attempts of earlier runs it has (atomically; untouched when it has them all).

        The save wrote the change log of the config it started from, as that config was
        opened: an attempt recorded into it after that (a crash is diagnosed before it is
        recorded) is missing there, and so is an attempt of a config that was not ours.
        """
        self.pending.clear()
        if not self.records:
            return

        log = read_changelog(changelog)
        ours = {_attempt_key(record) for record in self.records}
        earlier = [a for a in log.attempts if _attempt_key(a) not in ours]
        attempts = (*earlier, *self.records)
        if attempts == log.attempts:
            return
        whole = log.model_copy(update={"attempts": attempts})
        atomic_write(changelog, whole.to_json().encode(), replace=True)

    def prior(self, document: JobDocument) -> ChangeLog:
        """The change log the next save appends to, with the attempts not yet written."""
        base = _own_changelog(document.source)
        if base is None:
            base = ChangeLog(
                source=FileRef(path=str(document.source), sha256=sha256_of(document.to_bytes())),
                output=FileRef(path=str(document.source)),
            )
        base = base.with_attempts(self.pending)
        self.pending.clear()
        return base

    def interrupted(self, attempt: Attempt, where: Where, stable: Where | None = None) -> Outcome:
        """Keep the interrupted attempt and stop: 130 for Ctrl-C, 143 for SIGTERM."""
        self.remember(attempt, where)
        if attempt.outcome == "terminated":
            return self.stop(
                "terminated", f"Terminated (SIGTERM); {attempt.processes}.", stable or where
            )
        return self.stop(
            "interrupted", f"Interrupted (Ctrl-C); {attempt.processes}.", stable or where
        )

    def stop(self, status: Status, reason: str, where: Where) -> Outcome:
        self.say(reason)
        return Outcome(status, reason, tuple(self.attempts), _path_of(where), tuple(self.saved))


def autopilot(
    config: Where,
    runner: Runner,
    *,
    settings: Settings | None = None,
    ask: Asker = always_yes,
    say: Callable[[str], None] = lambda text: None,
    card_read: Callable[[], ProbeResult | None] = lambda: None,
) -> Outcome:
    """Run ``config`` and retry until a run finishes or a reason to stop comes (module doc).

    ``card_read`` gives the card as read before the first attempt (``run``'s
    :class:`~oom_wizard.application.card_wait.CardWait`): each roll-back is sized against it,
    what its other tenants hold included, as ``fit`` and ``plan`` weigh a job.

    Raises:
        WizardError: the config cannot be read, or a save is refused.
    """
    loop = _Loop(
        runner=runner, ask=ask, settings=settings or Settings(), say=say, card_read=card_read
    )
    if loop.settings.scale_up:
        if not isinstance(config, Path):
            raise WizardError(
                "run --scale-up works on a config file that oom-wizard saved, not on a web-UI "
                "job (give the scale-up with 'oom-wizard scale-up' or in the wizard)"
            )
        return _upward(loop, config)
    return _downward(loop, config, "full")


def _downward(loop: _Loop, config: Where, kind: Literal["full", "validation"]) -> Outcome:
    retries = 0
    env: Mapping[str, str] | None = None
    while True:
        attempt, scan = loop.run_once(config, kind, env)
        env = None
        if attempt.outcome in ("interrupted", "terminated"):
            return loop.interrupted(attempt, config)
        if attempt.outcome == "untrained":
            loop.remember(attempt, config)
            return loop.stop("stopped", _untrained_reason(attempt, scan), config)
        if attempt.outcome == "trained_nothing":
            loop.remember(attempt, config)
            return loop.stop("stopped", _trained_nothing_reason(attempt), config)
        if attempt.outcome == "passed_validation":
            loop.remember(attempt, config)
            full = _restore_steps(loop, config, attempt.log)
            if full is None:
                return loop.stop("finished", f"The run finished: {config} fits.", config)
            config, kind = full, "full"
            continue
        if attempt.outcome == "finished":
            loop.remember(attempt, config)
            return loop.stop("finished", f"The run finished: {config} fits.", config)
        if attempt.outcome == "stopped":
            loop.remember(attempt, config)
            return loop.stop(
                "stopped", "Stopped: the trainer was stopped (its log says so).", config
            )
        state = _crash_state(
            config, attempt.log, edited_ok=loop.settings.edited_ok, card_read=loop.card_read()
        )
        diagnosis = state.diagnosis
        attempt = dataclasses.replace(attempt, moment=diagnosis.moment)
        if attempt.outcome == "failed" and (diagnosis.moment is None or not _memory_evidence(scan)):
            loop.remember(attempt, config)
            return loop.stop("stopped", _unexplained_reason(attempt, scan, diagnosis), config)
        attempt = dataclasses.replace(attempt, outcome="crashed")
        loop.remember(attempt, config)
        env = _allocator_retry(loop, scan)
        if env is not None:
            continue
        if diagnosis.moment == "environment":
            why = "; ".join(diagnosis.reasons) or diagnosis.verdict
            instead = f" What to do: {diagnosis.first_change}" if diagnosis.first_change else ""
            return loop.stop(
                "stopped",
                f"Stopped: the verdict is environment, not the config: {why}. "
                f"Retrying the same job would not help.{instead}",
                config,
            )
        if retries >= loop.settings.max_retries:
            return loop.stop(
                "stopped",
                f"Stopped: {counted(retries, 'roll-back')} tried (--max-retries "
                f"{loop.settings.max_retries}) and it still runs out of memory. "
                + _what_next(loop, state.document, more_retries=True),
                config,
            )
        saved = _roll_back(loop, state, attempt, config)
        if isinstance(saved, str):
            return loop.stop("stopped", saved, config)
        config, kind = saved
        retries += 1


def _allocator_retry(loop: _Loop, scan: LogScan) -> Mapping[str, str] | None:
    """The environment of the one retry of a crash that is the allocator's, not the config's
    (:func:`~oom_wizard.rules.oneoff.one_off_oom`), said; None when the crash is not one, the
    retry was made already, or expandable segments were on already."""
    if loop.allocator_retried:
        return None
    reason = one_off_oom(scan)
    if reason is None:
        return None
    env = with_expandable_segments(os.environ)
    if env is None:
        return None
    loop.allocator_retried = True
    setting = " ".join(f"{name}={value}" for name, value in env.items())
    loop.say(
        f"A one-off, not the config: {reason}. Retrying the same config once with {setting} "
        "in the trainer's environment (the config is not changed); a roll-back follows only "
        "if it crashes again."
    )
    return env


def _upward(loop: _Loop, config: Path) -> Outcome:
    """Scale up one re-add per finished run, as ``scale-up`` and the app save one
    (:mod:`oom_wizard.application.scale_up`); a re-add that crashes is rolled back."""

    stable = config
    for _ in range(loop.settings.max_retries + 1):
        request = dataclasses.replace(_request(config, None), edited_ok=loop.settings.edited_ok)
        state = open_for_scale_up(request)
        scale = next_scale_up(state)
        if scale is None:
            return loop.stop(
                "finished", f"Nothing left to scale up: {stable} has every setting back.", stable
            )
        prepared = prepare_scale_up(state, scale)
        for note in scale_up_notes(state, prepared, scale):  # said before it is given back
            loop.say(f"⚠ {scale.title}: {note}")
        result = save_scale_up(state, scale, ToFile(), ready=prepared)
        assert isinstance(result, SaveResult)  # a file destination writes a file
        loop.attach_pending(result.changelog)
        loop.saved.append(result.config)
        loop.say(f"Scale-up: {scale.title} → {result.config}")
        loop.changed = entry_lines(prepared)
        attempt, scan = loop.run_once(result.config, "full")
        if attempt.outcome in ("interrupted", "terminated"):
            return loop.interrupted(attempt, result.config, stable)
        if attempt.outcome in ("untrained", "trained_nothing"):
            loop.remember(attempt, result.config)
            why = (
                _untrained_reason(attempt, scan)
                if attempt.outcome == "untrained"
                else _trained_nothing_reason(attempt)
            )
            return loop.stop("stopped", why + f" The stable config is {stable}.", stable)
        if attempt.outcome == "finished":
            loop.remember(attempt, result.config)
            stable = config = result.config
            continue
        diagnosis = _crash_state(result.config, attempt.log).diagnosis
        attempt = dataclasses.replace(
            attempt,
            outcome="crashed" if diagnosis.moment else attempt.outcome,
            moment=diagnosis.moment,
        )
        loop.remember(attempt, result.config)
        if diagnosis.moment == "environment" or diagnosis.moment is None:
            return loop.stop(
                "stopped",
                f"Stopped: the scale-up run did not finish ({attempt.describe()}); "
                f"the stable config is {stable}.",
                stable,
            )
        back = _undo_last(loop, result.config, scale.step)
        return loop.stop(
            "finished",
            f"The scale-up '{scale.title}' crashed ({attempt.describe()}); it is rolled back "
            f"in {back}, and that is the stable config.",
            back,
        )
    return loop.stop(
        "stopped",
        f"Stopped after {counted(loop.settings.max_retries, 'scale-up')} (--max-retries); "
        f"the stable config is {stable}.",
        stable,
    )


def _undo_last(loop: _Loop, config: Path, step: str) -> Path:
    """Roll back what the last scale-up of ``config`` re-added (a new config)."""

    state = open_for_scale_up(_request(config, None))
    result = save_undo_scale_up(state, step, ToFile())
    assert isinstance(result, SaveResult)  # a file destination writes a file
    loop.attach_pending(result.changelog)
    loop.saved.append(result.config)
    return result.config


def _exception(scan: LogScan) -> str:
    return scan.exception.text if scan.exception is not None else f"exit status {scan.exit_code}"


def steps_trained(scan: LogScan, *, resumable: bool) -> tuple[int, int]:
    """The step this attempt resumed from (0: from the start) and the steps it trained.

    A resume is claimed only where one could happen (a checkpoint or ``train.start_step``
    before the run, ``resumable``) or the log says so (AI Toolkit's ``Found step N`` line): a
    bar first drawn past step 0 is otherwise a run whose first redraws came late.
    """
    said = bool(scan.evidence_for("resume"))
    start = (scan.first_step or 0) if scan.resumed and (resumable or said) else 0
    trained = max((scan.last_step or 0) - start, 0) if scan.last_step is not None else 0
    return start, trained


def card_of(end: TrainerEnd, scan: LogScan) -> float | None:
    """The card's memory: ``nvidia-smi``'s while it ran, else the one PyTorch's out-of-memory
    message names (its total capacity), else unknown."""
    if end.card_gib is not None:
        return end.card_gib
    return round(scan.oom.total, 2) if scan.oom is not None and scan.oom.total else None


def resume_warning(document: JobDocument) -> str | None:
    """What AI Toolkit's resume does to this run when it matters: a step count at or below the
    step it resumes from trains nothing (None: a fresh start, or steps left to train)."""

    resume = resume_point(document)
    steps = document.get(("config", "process", 0, "train", "steps"))
    if resume is None or not isinstance(steps, int) or isinstance(steps, bool):
        return None
    if steps > resume.step:
        return (
            f"AI Toolkit resumes this job from step {resume.step} ({resume.source}): this run "
            f"trains steps {resume.step} to {steps}, {steps - resume.step} in all."
        )
    return (
        f"AI Toolkit resumes this job from step {resume.step} ({resume.source}) and train.steps "
        f"is {steps}: this run has nothing left to train (remove or move the checkpoints, or "
        "raise train.steps, to train again)."
    )


def _memory_evidence(scan: LogScan) -> bool:
    """Whether the log shows the GPU or the host running out of memory (a kill included)."""

    return bool(set(scan.signals) & (GPU_SIGNALS | HOST_SIGNALS))


def log_tail(log: Path, lines: int = LOG_TAIL_LINES) -> tuple[str, ...]:
    """The log's last lines as a terminal shows them (a ``\r`` redraw: its last state)."""
    try:
        text = log.read_bytes().decode("utf-8", "replace")
    except OSError:
        return ()
    shown = [line.rstrip("\r").rsplit("\r", 1)[-1].rstrip() for line in text.split("\n")]
    shown = [line for line in shown if line.strip()]
    return tuple(shown[-lines:])


def _unexplained_reason(attempt: Attempt, scan: LogScan, diagnosis: Diagnosis) -> str:
    """Why the loop stops on a failure that shows no lack of memory: the verdict, the tail."""
    tail = "\n".join(f"    {line}" for line in log_tail(attempt.log))
    instead = f"\nWhat to try: {diagnosis.first_change}" if diagnosis.first_change else ""
    return (
        f"Stopped: the trainer failed ({_exception(scan)}), and its log shows no sign of "
        "running out of memory, so a memory roll-back is not the fix and nothing was "
        f"changed. The verdict: {diagnosis.verdict}{instead}\nThe end of its log "
        f"({attempt.log}):\n{tail}"
    )


def _untrained_reason(attempt: Attempt, scan: LogScan) -> str:
    """Why an exit without a training step is not a finished run, with what was seen."""
    if not scan.training_started and scan.last_step is None:
        seen = "its log shows no training step at all"
    elif attempt.resumed_from:
        seen = (
            f"it resumed at step {attempt.resumed_from} and train.steps is {attempt.total}, "
            "so AI Toolkit had nothing left to train"
        )
    else:
        seen = f"its step counter never went past {attempt.step}"
    return (
        f"Stopped: the trainer exited with status {attempt.exit_code} but trained no step "
        f"({seen}); a run that trained nothing is not a pass, and it does not show the "
        "config fits."
    )


def _trained_nothing_reason(attempt: Attempt) -> str:
    """Why a clean run whose adapter did not move is not a fit."""
    return (
        f"Stopped: {attempt.learned}. The trainer exited cleanly after {attempt.step} steps, "
        "but a config that trains nothing is not a fit, and it is not called one. Check what "
        "the roll-back or the config takes away from training: layer offloading of every "
        "layer with a quantized model (ai-toolkit#1057), a learning rate of 0, a network "
        "that targets no layer."
    )


def what_is_left(document: JobDocument) -> tuple[str, ...]:
    """What is left when no roll-back is (:data:`NEXT_STEPS`), as this config stands: a
    config whose every model is quantized already is not told to quantize."""
    processes = document.view().processes
    if not processes or not all(process.model.quantize for process in processes):
        return NEXT_STEPS
    return tuple(
        "a smaller model, or a lower qtype (model.qtype: model.quantize is on already)"
        if option.startswith("a smaller model")
        else option
        for option in NEXT_STEPS
    )


def _what_next(loop: _Loop, document: JobDocument, *, more_retries: bool = False) -> str:
    """The next step when no roll-back is left: what was tried, and what else there is."""
    tried = loop.tried
    done = f"Tried: {'; '.join(tried)}. " if tried else "No roll-back was tried. "
    options = list(what_is_left(document))
    if more_retries:
        options.insert(0, "more roll-backs (a higher --max-retries)")
    return done + "What is left: " + "; or ".join(options) + "."


#: The outcomes of an attempt that went through every phase.
TRAINED_THROUGH: Final = frozenset({"finished", "passed_validation", "trained_nothing"})


def estimate_before_run(where: Where) -> JobMemory | None:
    """The config's memory before it runs, as ``fit`` weighs it (the lineage's one
    calibration); None when it cannot be weighed (the run goes on without it)."""
    try:
        memory, _after = job_memory(start(_request(where, None)), {})
    except WizardError:
        return None
    return memory if memory.not_estimated is None else None


def _crash_state(
    where: Where, log: Path, *, edited_ok: bool = False, card_read: ProbeResult | None = None
) -> WizardState:
    """The job opened on the attempt's log through the application layer, as the wizard opens it.

    A config that is our own fix crashed again: its plan goes one rung further. The card is
    ``card_read`` (the reading before the first attempt) where there is one: the card is not
    probed again here, where the crashed trainer's memory may not be back yet and would be
    counted as another tenant beside the crash's own figures.
    """

    request = dataclasses.replace(_request(where, log), edited_ok=edited_ok)
    return start(request, new_crash=_own_log(where) is not None, card_read=card_read)


def _request(where: Where, log: Path | None) -> JobRequest:

    if isinstance(where, DbJobRef):
        return JobRequest(log=log, db=where.db, job=where.name, probe=False)
    return JobRequest(target=where, log=log, probe=False)


def _destination(where: Where) -> Destination:
    """Where a fix of ``where`` is saved: a new config file, or the web-UI job in place."""

    return InPlace() if isinstance(where, DbJobRef) else ToFile()


def _saved_where(saved: SaveResult | DbSaveResult) -> tuple[Where, Path]:
    """The config a save wrote (the file, or the job's row) and its change log."""
    if isinstance(saved, DbSaveResult):
        return DbJobRef(saved.db_path, saved.job_name), saved.changelog
    return saved.config, saved.changelog


def _path_of(where: Where) -> Path:
    """The config's path in the outcome (a web-UI job's pseudo path)."""
    if isinstance(where, DbJobRef):
        return job_source(where.db, where.name)
    return where


def _runnable(where: Where) -> Path:
    """The config file the trainer gets: the file itself, or the web-UI job's config written
    (as stored, byte for byte) to a new file of its own beside the job's change log."""
    if isinstance(where, Path):
        return where

    job = load_job(where.db, where.name)
    folder = job.changelog_path.parent
    folder.mkdir(parents=True, exist_ok=True)
    candidate, n = folder / f"{job.file_stem}.attempt.json", 2
    while candidate.exists():
        candidate, n = folder / f"{job.file_stem}.attempt-{n}.json", n + 1
    atomic_write(candidate, job.job_config.encode("utf-8"))
    return candidate


def _roll_back(
    loop: _Loop, state: WizardState, attempt: Attempt, where: Where
) -> tuple[Where, Literal["full", "validation"]] | str:
    """Save the next roll-back; the new config and its run kind, or why nothing is left."""

    validate = attempt.kind == "full" and loop.settings.validation_steps > 0
    state = preselect_fix(state, loop.settings.validation_steps if validate else 0)
    choices = effective_choices(state)
    ready = prepared(state, choices)
    fix = [e for e in ready.entries if e.step != VALIDATION_RUN]
    if not fix:
        return _nothing_left(loop, attempt, state)
    lines = entry_lines(ready)
    tenants = _tenants_said(state)
    if tenants is not None:
        loop.say(tenants)
    if validate:
        note = validation_note(state, choices, ready)
        if note is not None:
            loop.say(f"⚠ {note}")
    answer = loop.ask(state, lines)
    if answer is NO_TERMINAL:
        return (
            "Stopped: there is no terminal to ask in (stdin is not one), so no fix was saved "
            "and the config is not relaunched unchanged. To go on without being asked, run "
            "it again with --auto."
        )
    if answer is False:
        return (
            "Stopped: you chose not to retry (no fix was saved); "
            "the config is not relaunched unchanged."
        )
    if isinstance(answer, UserSave):
        saved, lines = answer.saved, answer.changed
        if not lines:
            return "Stopped: the saved config changes nothing; it is not relaunched unchanged."
    else:
        saved = save(state, choices, _destination(where), ready=ready)
    config, changelog = _saved_where(saved)
    loop.attach_pending(changelog)
    loop.saved.append(_path_of(config))
    loop.changed = tuple(lines)
    short = {
        line for entry, line in zip(ready.entries, entry_lines(ready), strict=True)
        if entry.step == VALIDATION_RUN
    }  # fmt: skip
    loop.tried.extend(line for line in lines if line not in short and line not in loop.tried)
    loop.say(f"Roll-back ({state.moment}): " + "; ".join(lines) + f" → {config}")
    return config, "validation" if _still_short(config) else "full"


def _tenants_said(state: WizardState) -> str | None:
    """What the roll-back is sized against when the card's other tenants hold a real share
    of it (the job's one card, :func:`~oom_wizard.application.settling.job_card`); None
    otherwise."""
    card = job_card(state.job, state.diagnosis)
    if card is None or card.room_gib >= card.gib:
        return None
    return (
        f"The roll-back is sized against the card as read before the first attempt: "
        f"{card.tenants_words()}."
    )


def _nothing_left(loop: _Loop, attempt: Attempt, state: WizardState) -> str:
    earlier = [a for a in loop.attempts[:-1] if a.outcome == "crashed"]
    left = _what_next(loop, state.document)
    if earlier and earlier[-1].moment == attempt.moment and earlier[-1].phase == attempt.phase:
        return (
            f"Stopped: the same crash came back ({attempt.describe()}) and the roll-back has no "
            "step left to take; the config is not relaunched unchanged. " + left
        )
    return (
        f"Stopped: the roll-back ladder for {state.diagnosis.moment} is exhausted: every step "
        "is already in the config, and the config is not relaunched unchanged. " + left
    )


def _restore_steps(loop: _Loop, where: Where, log: Path) -> Where | None:
    """After a passed validation run: the config with the original step count, saved."""

    state = start(_request(where, log))
    if state.changelog is None:
        return None
    pending = pending_scale_ups(state.document, state.changelog)
    scale = next((s for s in pending if s.step == VALIDATION_RUN), None)
    if scale is None:
        return None
    ready = prepare_scale_up(state, scale)
    saved = save_scale_up(state, scale, _destination(where), ready=ready)
    config, changelog = _saved_where(saved)
    loop.attach_pending(changelog)
    loop.saved.append(_path_of(config))
    loop.changed = entry_lines(ready)
    loop.say(f"Validation passed: {scale.title} → {config}")
    off = samples_off(_document(config))
    if off is not None:
        loop.say(off)
    return config


def samples_off(document: JobDocument) -> str | None:
    """What to say before a full run whose config makes no samples (the roll-back switched
    them off with the short validation run): the run keeps them off, and how to get them
    back. None when it samples."""

    if not any(p.train.disable_sampling is True for p in document.view().processes):
        return None
    return (
        "Note: samples stay off for the full run (train.disable_sampling: true, from the "
        "roll-back); it makes no preview images. 'oom-wizard scale-up' on the config gives "
        "them back once it has trained."
    )


def _still_short(where: Where) -> bool:
    """Whether the config still runs the short validation step count (a scale-up restores it)."""

    own = _own_log(where)
    if own is None:
        return False
    pending = pending_scale_ups(_document(where), own[0])
    return any(scale.step == VALIDATION_RUN for scale in pending)


def _document(where: Where) -> JobDocument:

    if isinstance(where, DbJobRef):
        return job_document(load_job(where.db, where.name))
    return load_config(where)


def entry_lines(prepared: Prepared) -> tuple[str, ...]:
    """The changes in lines, ``path: before → after`` (what the loop says and asks)."""

    def shown(value: object) -> str:
        return "(absent)" if value is None else json.dumps(value, default=str)

    return tuple(f"{e.path}: {shown(e.before)} → {shown(e.after)}" for e in prepared.entries)


def _outcome(end: TrainerEnd, scan: LogScan, kind: str, trained: int) -> str:
    """How the run ended, before the diagnosis says more about a crash.

    A clean exit is a finish (or a passed validation) only when training steps ran: the
    log's step counter advanced. An exit without one is ``untrained``.
    """
    if end.interrupted:
        return "terminated" if end.terminated else "interrupted"
    if end.hung_after_error is not None:
        return "failed"
    if scan.stopped and not scan.crashed:
        return "stopped"
    if end.returncode == 0 and not scan.crashed:
        if trained <= 0:
            return "untrained"
        return "passed_validation" if kind == "validation" else "finished"
    return "failed"


def _attempt_key(record: AttemptRecord) -> tuple[str, str | None, str]:
    """What tells one recorded attempt from another: its config, its own log, its start."""
    return record.config, record.log, record.at


def _own_changelog(config: Path) -> ChangeLog | None:
    """The change log beside ``config`` when it describes it; a broken one is not used."""

    try:
        return changelog_of(config)
    except WizardError:
        return None


def keep_attempt(where: Where, record: AttemptRecord) -> Path | None:
    """Append ``record`` to the change log of ``where`` when that config is our own save (the
    one writer of a trainer attempt, ``run``'s and ``watch``'s: the whole file rewritten
    atomically); the change log's path, or None when the config has none (nothing written)."""
    own = _own_log(where)
    if own is None:
        return None
    log, path = own
    atomic_write(path, log.with_attempts([record]).to_json().encode(), replace=True)
    return path


def _own_log(where: Where) -> tuple[ChangeLog, Path] | None:
    """The change log that describes the config, and its path, when the config is our own
    save (a file's beside it, a web-UI job's beside the database); a broken one is not used."""
    if isinstance(where, Path):
        log = _own_changelog(where)
        return (log, changelog_path_for(where)) if log is not None else None

    try:
        job = load_job(where.db, where.name)
        found = read_job_changelog(job)
    except WizardError:
        return None
    return (found, job.changelog_path) if found is not None else None
