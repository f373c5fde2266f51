"""The autopilot: run the trainer, and on an out-of-memory crash roll back one step and retry.

Plain logic. The trainer is behind :class:`Runner` (``oom_wizard.trainer`` runs a real child; a
test can pass a function), the user behind :class:`Asker`. Each attempt's log is scanned
and diagnosed with the same domain calls ``oom-wizard diagnose`` makes; a roll-back is
planned and saved with the same calls ``oom-wizard apply`` makes (the plan's default steps,
each with its default toggles), as a new config beside the last one with its change log.

The first retry after a fix is a short validation run: the plan's ``validation_run`` step
sets ``train.steps`` to ``validation_steps``. AI Toolkit saves and samples once more after its
last step, so a validation run that exits cleanly got past its first steps and through a save
and a sample (where the config samples at all). Then the scale-up's first re-add puts the
original step count back, and the full run starts.

It never relaunches an unchanged config. It stops, and says why, when the verdict is
``environment``, when the crash is not an out-of-memory one, when the plan has nothing left to
change (the ladder is exhausted, or the same crash came back with no step left), when
``max_retries`` roll-backs were tried, or when the user stops it.

``scale_up=True`` is the same loop upward after a finished run: one setting back per run in
the scale-up order; when a run with a re-added setting crashes, that setting is rolled back
and that config is the stable one.

Every attempt (config, how it ended, duration) goes into the change log's ``attempts``: the
change log beside the config it ran when that config is our output (rewritten atomically), and
in any case the next saved change log carries the attempts before it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal, Protocol

from oom_wizard.changelog import (
    AttemptRecord,
    ChangeLog,
    FileRef,
    changelog_path_for,
    now_iso,
    sha256_of,
)
from oom_wizard.errors import WizardError
from oom_wizard.trainer import TrainerEnd
from oom_wizard.vocabulary import VALIDATION_RUN

if TYPE_CHECKING:
    from oom_wizard.changes import Prepared
    from oom_wizard.diagnosis import Diagnosis
    from oom_wizard.document import JobDocument
    from oom_wizard.logscan import LogScan
    from oom_wizard.plan import Plan, StepChoice

Status = Literal["finished", "stopped", "interrupted"]
EXIT_STATUS: Final[dict[Status, int]] = {"finished": 0, "stopped": 2, "interrupted": 130}
"""DESIGN.md's exit statuses of ``run``."""

DEFAULT_MAX_RETRIES: Final = 5
DEFAULT_VALIDATION_STEPS: Final = 100


class Runner(Protocol):
    """Runs the trainer on ``config`` to its end, its output appended to ``log``."""

    def __call__(self, config: Path, log: Path) -> TrainerEnd: ...


class Asker(Protocol):
    """Asks the user whether to save ``fix`` and retry (``--auto`` answers yes)."""

    def __call__(self, diagnosis: Diagnosis, fix: Sequence[str]) -> bool: ...


@dataclass(frozen=True)
class Settings:
    """How the loop runs.

    Attributes:
        max_retries: Roll-backs (or, with ``scale_up``, re-adds) tried at most.
        validation_steps: ``train.steps`` of the short run after each fix (0: none).
        scale_up: Go upward from a finished run instead of down from a crash.
    """

    max_retries: int = DEFAULT_MAX_RETRIES
    validation_steps: int = DEFAULT_VALIDATION_STEPS
    scale_up: bool = False


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

    def describe(self) -> str:
        """``crashed at step 3 in training (early_steps)`` and the like."""
        return describe_outcome(self.outcome, self.step, self.phase, self.moment, self.exit_code)

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
        )


@dataclass(frozen=True)
class Outcome:
    """Where the loop ended."""

    status: Status
    reason: str
    attempts: tuple[Attempt, ...]
    config: Path
    saved: tuple[Path, ...] = ()

    @property
    def exit_status(self) -> int:
        """0 finished, 2 stopped without a finished run, 130 interrupted."""
        return EXIT_STATUS[self.status]


def describe_outcome(
    outcome: str, step: int | None, phase: str | None, moment: str | None, exit_code: int | None
) -> str:
    """How an attempt ended, in words (``history`` shows recorded attempts with it too)."""
    if outcome == "crashed":
        where = f" at step {step}" if step is not None else ""
        inside = f" in {phase}" if phase and phase != "unknown" else ""
        about = f" ({moment})" if moment else ""
        return f"crashed{where}{inside}{about}"
    if outcome == "passed_validation":
        return f"passed validation ({step} steps)"
    if outcome == "finished":
        return f"finished ({step} steps)" if step is not None else "finished"
    if outcome == "interrupted":
        return "interrupted (Ctrl-C)"
    if outcome == "stopped":
        return "stopped (the trainer says so)"
    return f"failed (exit status {exit_code}), not out of memory"


def describe_record(record: AttemptRecord) -> str:
    """A recorded attempt in one line: its config, the kind of run, how it ended, how long."""
    ended = describe_outcome(
        record.outcome, record.step, record.phase, record.moment, record.exit_code
    )
    return f"{record.config} · {record.kind} run · {ended} · {record.duration_s:.1f} s"


def always_yes(diagnosis: Diagnosis, fix: Sequence[str]) -> bool:
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
    saved: list[Path] = field(default_factory=list)
    changed: tuple[str, ...] = ()
    """The changes the last save made: they belong to the next attempt."""

    def run_once(
        self, config: Path, kind: Literal["full", "validation"]
    ) -> tuple[Attempt, LogScan]:
        from oom_wizard.logscan import scan_log

        log = fresh_log_path(config)
        self.say(f"Attempt {len(self.attempts) + 1}: {kind} run of {config} (log {log})")
        at = now_iso()
        end = self.runner(config, log)
        if not log.exists():
            log.touch()
        scan = scan_log(log)
        attempt = Attempt(
            number=len(self.attempts) + 1,
            config=config,
            kind=kind,
            log=log,
            outcome=_outcome(end, scan, kind),
            step=scan.last_step,
            total=scan.total_steps,
            phase=scan.phase,
            moment=None,
            exit_code=end.returncode,
            duration_s=end.duration_s,
            at=at,
            changed=self.changed,
        )
        self.changed = ()
        return attempt, scan

    def remember(self, attempt: Attempt) -> None:
        """Keep the attempt, and write it into the change log of its config when it is ours."""
        self.attempts.append(attempt)
        self.say(f"Attempt {attempt.number}: {attempt.describe()} after {attempt.duration_s:.1f} s")
        record = attempt.record()
        log = _own_changelog(attempt.config)
        if log is None:
            self.pending.append(record)
            return
        from oom_wizard.save import atomic_write

        path = changelog_path_for(attempt.config)
        atomic_write(path, log.with_attempts([record]).to_json().encode(), replace=True)

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

    def stop(self, status: Status, reason: str, config: Path) -> Outcome:
        self.say(reason)
        return Outcome(status, reason, tuple(self.attempts), config, tuple(self.saved))


def autopilot(
    config: Path,
    runner: Runner,
    *,
    settings: Settings | None = None,
    ask: Asker = always_yes,
    say: Callable[[str], None] = lambda text: None,
) -> Outcome:
    """Run ``config`` and retry until a run finishes or a reason to stop comes (module doc).

    Raises:
        WizardError: the config cannot be read, or a save is refused.
    """
    loop = _Loop(runner=runner, ask=ask, settings=settings or Settings(), say=say)
    if loop.settings.scale_up:
        return _upward(loop, config)
    return _downward(loop, config, "full")


def _downward(loop: _Loop, config: Path, kind: Literal["full", "validation"]) -> Outcome:
    from oom_wizard.document import load_document

    retries = 0
    while True:
        attempt, scan = loop.run_once(config, kind)
        document = load_document(config)
        if attempt.outcome == "interrupted":
            loop.remember(attempt)
            return loop.stop(
                "interrupted",
                "Stopped by you (Ctrl-C); the trainer's processes were stopped.",
                config,
            )
        if attempt.outcome == "passed_validation":
            loop.remember(attempt)
            full = _restore_steps(loop, document)
            if full is None:
                return loop.stop("finished", f"The run finished: {config} fits.", config)
            config, kind = full, "full"
            continue
        if attempt.outcome == "finished":
            loop.remember(attempt)
            return loop.stop("finished", f"The run finished: {config} fits.", config)
        if attempt.outcome == "stopped":
            loop.remember(attempt)
            return loop.stop(
                "stopped", "Stopped: the trainer was stopped (its log says so).", config
            )
        diagnosis = _diagnose(scan, document, config)
        attempt = dataclasses.replace(attempt, moment=diagnosis.moment)
        if attempt.outcome == "failed" and diagnosis.moment is None:
            loop.remember(attempt)
            return loop.stop(
                "stopped",
                f"Stopped: the trainer failed, but not for lack of memory ({_exception(scan)}); "
                "a memory roll-back will not fix that.",
                config,
            )
        attempt = dataclasses.replace(attempt, outcome="crashed")
        loop.remember(attempt)
        if diagnosis.moment == "environment":
            why = "; ".join(diagnosis.reasons) or diagnosis.verdict
            return loop.stop(
                "stopped",
                f"Stopped: the verdict is environment, not the config: {why}. "
                "Retrying the same job would not help.",
                config,
            )
        if retries >= loop.settings.max_retries:
            return loop.stop(
                "stopped",
                f"Stopped: {retries} roll-back(s) tried (--max-retries "
                f"{loop.settings.max_retries}) and it still runs out of memory.",
                config,
            )
        saved = _roll_back(loop, document, diagnosis, attempt)
        if isinstance(saved, str):
            return loop.stop("stopped", saved, config)
        config, kind = saved
        retries += 1


def _upward(loop: _Loop, config: Path) -> Outcome:
    from oom_wizard.changes import changelog_of, commit, prepare
    from oom_wizard.document import load_document
    from oom_wizard.scaleup import next_scale_up

    stable = config
    for _ in range(loop.settings.max_retries + 1):
        document = load_document(config)
        changelog = changelog_of(config)
        if changelog is None:
            raise WizardError(
                "scale-up needs a config that oom-wizard saved (its change log is beside it)",
                file=config,
            )
        scale = next_scale_up(document, changelog)
        if scale is None:
            return loop.stop(
                "finished", f"Nothing left to scale up: {stable} has every setting back.", stable
            )
        prepared = prepare(document, list(scale.changes))
        result = commit(
            prepared, direction="scale_up", steps=[scale.step], prior=loop.prior(document)
        )
        loop.saved.append(result.config)
        loop.say(f"Scale-up: {scale.title} → {result.config}")
        loop.changed = _entry_lines(prepared)
        attempt, scan = loop.run_once(result.config, "full")
        if attempt.outcome == "interrupted":
            loop.remember(attempt)
            return loop.stop(
                "interrupted",
                "Stopped by you (Ctrl-C); the trainer's processes were stopped.",
                stable,
            )
        if attempt.outcome == "finished":
            loop.remember(attempt)
            stable = config = result.config
            continue
        diagnosis = _diagnose(scan, prepared.after, result.config)
        attempt = dataclasses.replace(
            attempt,
            outcome="crashed" if diagnosis.moment else attempt.outcome,
            moment=diagnosis.moment,
        )
        loop.remember(attempt)
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
        f"Stopped after {loop.settings.max_retries} scale-up(s) (--max-retries); "
        f"the stable config is {stable}.",
        stable,
    )


def _undo_last(loop: _Loop, config: Path, step: str) -> Path:
    """Roll back what the last scale-up of ``config`` re-added (a new config)."""
    from oom_wizard.changes import Change, changelog_of, commit, prepare
    from oom_wizard.document import MISSING, load_document
    from oom_wizard.paths import parse_path

    document = load_document(config)
    changelog = changelog_of(config)
    assert changelog is not None
    last = len(changelog.runs) - 1
    changes = [
        Change(
            path=parse_path(entry.path),
            after=MISSING if entry.before is None else entry.before,
            step=entry.step,
            reason="The scale-up that re-added this crashed: back to the stable value",
        )
        for entry in changelog.changes_of_run(last)
    ]
    prepared = prepare(document, changes)
    result = commit(prepared, direction="rollback", steps=[step], prior=loop.prior(document))
    loop.saved.append(result.config)
    return result.config


def _diagnose(scan: LogScan, document: JobDocument, config: Path) -> Diagnosis:
    from oom_wizard.changes import changelog_of
    from oom_wizard.diagnosis import diagnose

    return diagnose(scan, document.view(), changelog=changelog_of(config))


def _exception(scan: LogScan) -> str:
    return scan.exception.text if scan.exception is not None else f"exit status {scan.exit_code}"


def _roll_back(
    loop: _Loop, document: JobDocument, diagnosis: Diagnosis, attempt: Attempt
) -> tuple[Path, Literal["full", "validation"]] | str:
    """Save the next roll-back; the new config and its run kind, or why nothing is left."""
    from oom_wizard.changes import changelog_of, commit, prepare
    from oom_wizard.plan import build_plan, changes_for, default_model_kind

    assert diagnosis.moment is not None
    changelog = changelog_of(document.source)
    kind = diagnosis.model_kind or default_model_kind(document)[0]
    plan = build_plan(
        document,
        diagnosis.moment,
        kind,
        changelog=changelog,
        diagnosis=diagnosis,
        new_crash=changelog is not None,
    )
    validate = attempt.kind == "full" and loop.settings.validation_steps > 0
    changes = changes_for(plan, _choices(plan, validate, loop.settings.validation_steps))
    prepared = prepare(document, changes)
    fix = [e for e in prepared.entries if e.step != VALIDATION_RUN]
    if not fix:
        return _nothing_left(loop, attempt, diagnosis)
    lines = _entry_lines(prepared)
    if not loop.ask(diagnosis, lines):
        return "Stopped: you chose not to retry with this change."
    steps = [s.id for s in plan.steps if s.id in {e.step for e in prepared.entries}]
    result = commit(
        prepared,
        direction="rollback",
        moment=plan.moment,
        model_kind=plan.model_kind,
        diagnosis=diagnosis.to_json(),
        steps=steps,
        prior=loop.prior(document),
    )
    loop.saved.append(result.config)
    loop.changed = tuple(lines)
    loop.say(f"Roll-back ({plan.moment}): " + "; ".join(lines) + f" → {result.config}")
    return result.config, "validation" if _still_short(result.config) else "full"


def _choices(plan: Plan, validate: bool, steps: int) -> dict[str, StepChoice] | None:
    """The plan's defaults, with the short validation run on (at ``steps``) or off."""
    from oom_wizard.plan import StepChoice

    choices = {step.id: StepChoice(step_id=step.id, enabled=step.default_on) for step in plan.steps}
    run = plan.step(VALIDATION_RUN)
    if run is not None:
        values = {f.key: steps for f in run.fields}
        choices[VALIDATION_RUN] = StepChoice(
            step_id=VALIDATION_RUN, enabled=validate and bool(run.fields), values=values
        )
    return choices


def _nothing_left(loop: _Loop, attempt: Attempt, diagnosis: Diagnosis) -> str:
    earlier = [a for a in loop.attempts[:-1] if a.outcome == "crashed"]
    if earlier and earlier[-1].moment == attempt.moment and earlier[-1].phase == attempt.phase:
        return (
            f"Stopped: the same crash came back ({attempt.describe()}) and the roll-back has no "
            "step left to take; the config is not relaunched unchanged."
        )
    return (
        f"Stopped: the roll-back ladder for {diagnosis.moment} is exhausted: every step is "
        "already in the config, and the config is not relaunched unchanged."
    )


def _restore_steps(loop: _Loop, document: JobDocument) -> Path | None:
    """After a passed validation run: the config with the original step count, saved."""
    from oom_wizard.changes import changelog_of, commit, prepare
    from oom_wizard.scaleup import pending_scale_ups

    changelog = changelog_of(document.source)
    if changelog is None:
        return None
    scale = next(
        (s for s in pending_scale_ups(document, changelog) if s.step == VALIDATION_RUN), None
    )
    if scale is None:
        return None
    prepared = prepare(document, list(scale.changes))
    result = commit(prepared, direction="scale_up", steps=[scale.step], prior=loop.prior(document))
    loop.saved.append(result.config)
    loop.changed = _entry_lines(prepared)
    loop.say(f"Validation passed: {scale.title} → {result.config}")
    return result.config


def _still_short(config: Path) -> bool:
    """Whether ``config`` still runs the short validation step count (a scale-up restores it)."""
    from oom_wizard.changes import changelog_of
    from oom_wizard.document import load_document
    from oom_wizard.scaleup import pending_scale_ups

    changelog = changelog_of(config)
    if changelog is None:
        return False
    pending = pending_scale_ups(load_document(config), changelog)
    return any(scale.step == VALIDATION_RUN for scale in pending)


def _entry_lines(prepared: Prepared) -> tuple[str, ...]:
    import json

    def shown(value: object) -> str:
        return "(absent)" if value is None else json.dumps(value, default=str)

    return tuple(f"{e.path}: {shown(e.before)} → {shown(e.after)}" for e in prepared.entries)


def _outcome(end: TrainerEnd, scan: LogScan, kind: str) -> str:
    """How the run ended, before the diagnosis says more about a crash."""
    if end.interrupted:
        return "interrupted"
    if scan.stopped and not scan.crashed:
        return "stopped"
    if end.returncode == 0 and not scan.crashed:
        return "passed_validation" if kind == "validation" else "finished"
    return "failed"


def _own_changelog(config: Path) -> ChangeLog | None:
    """The change log beside ``config`` when it describes it; a broken one is not used."""
    from oom_wizard.changes import changelog_of

    try:
        return changelog_of(config)
    except WizardError:
        return None
