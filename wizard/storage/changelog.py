"""The change log: what every run of the tool changed in a config, and why.

It is a JSON file beside the saved config (``my_job.oomfix.yaml`` →
``my_job.oomfix.changelog.json``). Entries accumulate across runs: a roll-back,
then scale-ups, each run appending to what came before, so that the net effect per
field is the first ``before`` against the last ``after``, measured from the
original ``source``. That is what lets ``scale-up`` re-add one heavier setting at a
time and ``history`` tell the whole story.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import (
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
)

from oom_wizard.errors import WizardError
from oom_wizard.formats.document import NotRegularFile, read_regular_file
from oom_wizard.formats.yamlload import check_limits
from oom_wizard.frozen import FrozenModel

FORMAT: Final = "oom-wizard-changelog/1"
CHANGELOG_SUFFIX: Final = ".changelog.json"
#: A change log holds a few entries per run; anything past this is not one.
MAX_CHANGELOG_BYTES: Final = 16 * 1024 * 1024

Direction = Literal["rollback", "scale_up", "edit", "restore"]


class _Frozen(FrozenModel):
    """Base of the change log's models: immutable; unknown keys are kept (a newer writer's).
    Like every frozen model, their schemas are built when they first validate, so a job
    without a change log does not pay for them (:mod:`oom_wizard.frozen`)."""

    model_config = ConfigDict(extra="allow")


class FileRef(_Frozen):
    """A file and the SHA-256 of its bytes when the change log was written."""

    path: str
    sha256: str | None = None


class ChangeEntry(_Frozen):
    """One field changed in one run.

    Attributes:
        run: Index of the run in ``ChangeLog.runs``.
        step: The roll-back or scale-up step that made it (None for ``set``).
        path: The field, in AI Toolkit's notation.
        before: The value before (None when the key was added).
        after: The value after (None when the key was removed).
        reason: Why, in a sentence.
    """

    run: int
    step: str | None = None
    path: str
    before: Any = None
    after: Any = None
    reason: str = ""


SavedAs = Literal["in_place", "as_new"]


class DatabaseRecord(_Frozen):
    """The web-UI job a run read and wrote (a run on a job of AI Toolkit's jobs database).

    Attributes:
        job_id: The job the run read.
        job_name: Its name then.
        saved: How the fix went back: the job itself, or a new job like the UI's Clone.
        job_config_before: The job's config before an in-place save (what restore puts back).
        new_job_id: The new job's id, for a save as new.
        new_job_name: The new job's name, for a save as new.
        undoes: For a restore: the run whose in-place save it undid.
        warning: What the save costs, as it was said (a new job starts a new output folder:
            the old job's checkpoints are not resumed).
    """

    job_id: str
    job_name: str
    saved: SavedAs | None = None
    job_config_before: str | None = None
    new_job_id: str | None = None
    new_job_name: str | None = None
    undoes: int | None = None
    warning: str | None = None


class RunRecord(_Frozen):
    """One run of the tool that saved a config (``database`` for a web-UI job's runs)."""

    at: str
    direction: Direction
    moment: str | None = None
    model_kind: str | None = None
    diagnosis: dict[str, Any] | None = None
    steps: tuple[str, ...] = ()
    database: DatabaseRecord | None = None
    memory: dict[str, Any] | None = None
    """The saved config's estimated peak: ``{"phase", "estimated_gib": {"low", "high"},
    "calibrated_by": {...} | null, "host": {...}}``, or ``{"not_estimated": why}`` for a job
    the memory model does not estimate (absent in logs written before it existed). ``host``
    is the saved config's host RAM as ``fit --json`` gives it on the machine that saved it
    (``phases``: each phase's ``{"low", "high"}``, ``ram_gib``, ``verdict``, ``peak_phase``;
    absent in logs written before it)."""

    @model_serializer(mode="wrap")
    def _written(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The run as the file holds it: ``database`` only for a web-UI job, without the
        fields its kind of save does not have."""
        data: dict[str, Any] = handler(self)
        if self.memory is None:
            data.pop("memory", None)
        if self.database is None:
            data.pop("database", None)
        else:
            data["database"] = self.database.model_dump(mode="json", exclude_none=True)
        return data


@dataclass(frozen=True)
class RunFacts:
    """What a save records of the run that made it: a :class:`RunRecord` less the time of the
    save and, for a web-UI job, what the save did to the database (both the saver's)."""

    direction: Direction
    moment: str | None = None
    model_kind: str | None = None
    diagnosis: dict[str, Any] | None = None
    steps: tuple[str, ...] = ()
    memory: dict[str, Any] | None = None

    def record(self, database: DatabaseRecord | None = None) -> RunRecord:
        """The run as the change log keeps it, saved now."""
        return RunRecord(
            at=now_iso(),
            direction=self.direction,
            moment=self.moment,
            model_kind=self.model_kind,
            diagnosis=self.diagnosis,
            steps=self.steps,
            database=database,
            memory=self.memory,
        )


class AttemptRecord(_Frozen):
    """One run of the trainer under ``oom-wizard run``.

    Attributes:
        config: The config it ran.
        kind: ``full``, or ``validation`` (the short run after a fix).
        outcome: ``crashed``, ``passed_validation``, ``finished``, ``failed`` (not out of
            memory), ``stopped`` (the trainer's log says so), ``trained_nothing`` (it ended
            cleanly but its adapter did not move), or ``interrupted``.
        step: The training bar's last count (the steps done); the step it crashed in is
            :func:`~oom_wizard.logs.result.crash_step_of` of it and ``phase``.
        phase: Where it was when it ended (the log scan's phase).
        moment: The diagnosed moment of a crash.
        exit_code: The trainer's exit status (negative: the signal that ended it).
        duration_s: Seconds it ran.
        log: The log it wrote.
        environment: What the trainer's environment was given beyond the user's
            (``NAME=value``): the allocator setting of the one retry of a one-off crash.
        learned: After a clean end, what the adapter it saved and its loss showed; an
            attempt whose adapter did not move is ``trained_nothing``.
        estimate: What the model said of the config before it ran, with the lineage's
            calibration (the ``memory`` shape of a run: ``phase``, ``estimated_gib``,
            ``phases``, ``certainty``, ``calibrated_by``); for a run ``watch`` followed, what
            it said as ``watch`` left, before its readings were kept.
        peak_phase: The phase ``peak_gib`` is a point of: of the phases the attempt went
            through, the one estimated highest (nvidia-smi's highest reading is theirs).
        watched: A run oom-wizard did not start, followed by ``watch``: its readings were
            taken while the log was in each phase.
        peaks_gib: Per phase, the most memory ``nvidia-smi`` showed in use on the card while
            ``watch`` saw the log in it (``load``, ``baseline_sample``, ``training``,
            ``sample``: the phases its readings cover); ``peak_gib`` is the highest of those
            the run went through.
    """

    at: str
    config: str
    kind: Literal["full", "validation"] = "full"
    outcome: str
    step: int | None = None
    phase: str | None = None
    moment: str | None = None
    exit_code: int | None = None
    duration_s: float = 0.0
    log: str | None = None
    peak_gib: float | None = None
    card_gib: float | None = None
    environment: tuple[str, ...] = ()
    learned: str | None = None
    estimate: dict[str, Any] | None = None
    peak_phase: str | None = None
    watched: bool = False
    peaks_gib: dict[str, float] | None = None


class ChangeLog(_Frozen):
    """The whole change log of one line of configs (a source and its descendants)."""

    format: str = FORMAT
    source: FileRef
    output: FileRef
    runs: tuple[RunRecord, ...] = ()
    changes: tuple[ChangeEntry, ...] = Field(default=())
    attempts: tuple[AttemptRecord, ...] = ()

    def last_run(self) -> RunRecord | None:
        """The most recent run, if any."""
        return self.runs[-1] if self.runs else None

    def changes_of_run(self, run: int) -> tuple[ChangeEntry, ...]:
        """The entries that run number ``run`` made."""
        return tuple(entry for entry in self.changes if entry.run == run)

    def net(self) -> dict[str, tuple[Any, Any]]:
        """Per path: (first before, last after) across every run."""
        result: dict[str, tuple[Any, Any]] = {}
        for entry in self.changes:
            first = result[entry.path][0] if entry.path in result else entry.before
            result[entry.path] = (first, entry.after)
        return result

    def with_run(
        self,
        run: RunRecord,
        changes: Sequence[ChangeEntry],
        *,
        output: FileRef,
    ) -> ChangeLog:
        """This log with one more run appended (entries renumbered to that run)."""
        index = len(self.runs)
        numbered = tuple(entry.model_copy(update={"run": index}) for entry in changes)
        return self.model_copy(
            update={
                "runs": (*self.runs, run),
                "changes": (*self.changes, *numbered),
                "output": output,
            }
        )

    def with_attempts(self, attempts: Sequence[AttemptRecord]) -> ChangeLog:
        """This log with trainer attempts appended (an old log without any reads as none)."""
        return self.model_copy(update={"attempts": (*self.attempts, *attempts)})

    def to_json(self) -> str:
        """The file's text: stable key order, two-space indent, a final newline."""
        data = self.model_dump(mode="json")
        if not data["attempts"]:
            del data["attempts"]  # logs without trainer runs keep their old shape
        for attempt in data.get("attempts", ()):
            for key in ("estimate", "peak_phase", "peaks_gib"):  # without them: its old shape
                if attempt.get(key) is None:
                    attempt.pop(key, None)
            if not attempt.get("watched"):
                attempt.pop("watched", None)
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def now_iso() -> str:
    """The current time as ISO-8601 with a UTC offset, to the second."""
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


def sha256_of(data: bytes) -> str:
    """Hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def changelog_path_for(output: Path) -> Path:
    """``my_job.oomfix.yaml`` → ``my_job.oomfix.changelog.json``, beside it."""
    return output.with_name(output.stem + CHANGELOG_SUFFIX)


def resolve_recorded(log_path: Path, recorded: str) -> Path:
    """A path the change log records, as a path to open: a relative one is relative to the
    change log's own folder (never to the current folder)."""
    path = Path(recorded)
    return path if path.is_absolute() else log_path.parent / path


def record_path(path: Path, log_path: Path) -> str:
    """How the change log at ``log_path`` records ``path``: as given when absolute, else
    relative to the change log's folder (so that it means the same from any folder)."""
    if path.is_absolute():
        return str(path)
    return os.path.relpath(path.absolute(), log_path.parent.absolute())


@dataclass(frozen=True)
class Belonging:
    """The change log that describes a config, as read once (:func:`changelog_for`).

    Attributes:
        log: The change log.
        path: Where it was read.
        edited: The config's bytes are not the ones the log recorded for it (its name is):
            it was edited after oom-wizard saved it, so the log's story may not describe it.
            Nothing plans from such a log without the user's word (:class:`EditedSinceSave`).
    """

    log: ChangeLog
    path: Path
    edited: bool = False

    def note(self, config: Path | str) -> str | None:
        """What to say about an edited config (None when the log describes its bytes)."""
        if not self.edited:
            return None
        return (
            f"{config}: edited after oom-wizard saved it (its SHA-256 is not the one in "
            f"{self.path}); going on from the file as it is now"
        )


class EditedSinceSave(WizardError):
    """The config was edited after oom-wizard saved it: its change log may not describe it.

    Attributes:
        belonging: The change log as read (planned from once the user says so).
    """

    def __init__(self, message: str, *, file: str | Path, belonging: Belonging) -> None:
        super().__init__(message, file=file)
        self.belonging = belonging


def changelog_for(
    config: Path | str, data: bytes, log_path: Path | None, *, given: bool = False
) -> Belonging | None:
    """The one rule for "which change log belongs to this config": read once, judged once.

    The log at ``log_path`` (None, or no file there: no log) describes ``config`` when it
    recorded ``data``'s SHA-256 as its latest output (the bytes are the ones saved), or,
    failing that, the config's name (it was edited after the save: ``edited``, a note).
    A log with neither is another config's: refused when the user named it (``given``),
    and otherwise not this config's (None).

    Args:
        config: The config file (a database job's pseudo path).
        data: Its bytes now (a database job's ``job_config``, encoded).
        log_path: Where its change log is, or would be.
        given: The user named this change log (``--changelog``).

    Raises:
        WizardError: a named change log describes another config, or it cannot be read.
    """
    if log_path is None or (not given and not log_path.is_file()):
        return None
    log = read_changelog(log_path)
    name = Path(config).name
    if log.output.sha256 is not None and log.output.sha256 == sha256_of(data):
        return Belonging(log, log_path)
    if resolve_recorded(log_path, log.output.path).name == name:
        return Belonging(log, log_path, edited=True)
    if not given:
        return None
    raise WizardError(
        f"this change log describes {log.output.path}, not {name} (neither its "
        "name nor its SHA-256 match): pass the change log that oom-wizard wrote for "
        "this config",
        file=log_path,
    )


def refuse_edited(belonging: Belonging, config: Path | str) -> EditedSinceSave:
    """The one line that stops a plan from an edited config's change log (exit 2)."""
    return EditedSinceSave(
        f"edited after oom-wizard saved it (its SHA-256 is not the one its change log "
        f"{belonging.path} recorded), so that log may not describe it; to go on from the file "
        "as it is now with that log, pass --edited-ok",
        file=config,
        belonging=belonging,
    )


def find_changelog(config: Path) -> Path | None:
    """The change log that describes ``config``, when there is one beside it."""
    candidate = changelog_path_for(config)
    return candidate if candidate.is_file() else None


def read_changelog(path: Path) -> ChangeLog:
    """Read and validate a change log (a read only: whoever opens a job first finishes or
    undoes a save killed in its folders, :func:`oom_wizard.storage.save.recover_beside`).

    Raises:
        WizardError: the file is missing, not JSON, or not an oom-wizard change log.
    """

    try:
        data = read_regular_file(path, MAX_CHANGELOG_BYTES + 1)
    except FileNotFoundError:
        raise WizardError("no such change log", file=path) from None
    except NotRegularFile as exc:
        raise WizardError(f"this is {exc.kind}, not a change log", file=path) from None
    except OSError as exc:
        raise WizardError(
            f"cannot read this change log: {exc.strerror or exc}", file=path
        ) from None
    if len(data) > MAX_CHANGELOG_BYTES:
        raise WizardError(
            f"larger than {MAX_CHANGELOG_BYTES // (1024 * 1024)} MiB, which no change log of "
            "oom-wizard is; is this the right file?",
            file=path,
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WizardError(
            f"not UTF-8 text (byte {exc.start}): not a change log", file=path
        ) from None
    check_limits(text, path, what="this change log")
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise WizardError(
            f"not JSON: {exc.msg}", file=path, line=exc.lineno, column=exc.colno
        ) from None
    except (ValueError, RecursionError) as exc:
        raise WizardError(f"not a change log: {exc}", file=path) from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise WizardError(f"not an oom-wizard change log (expected format {FORMAT})", file=path)
    try:
        return ChangeLog.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise WizardError(f"damaged change log: {where}: {first['msg']}", file=path) from None
