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
from oom_wizard.frozen import FrozenModel

FORMAT: Final = "oom-wizard-changelog/1"
CHANGELOG_SUFFIX: Final = ".changelog.json"
#: A change log holds a few entries per run; anything past this is not one.
MAX_CHANGELOG_BYTES: Final = 16 * 1024 * 1024

Direction = Literal["rollback", "scale_up", "edit", "restore"]


class _Frozen(FrozenModel):
    """Base of the change log's models: immutable; unknown keys are kept (a newer writer's)."""

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
    """

    job_id: str
    job_name: str
    saved: SavedAs | None = None
    job_config_before: str | None = None
    new_job_id: str | None = None
    new_job_name: str | None = None
    undoes: int | None = None


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
    "calibrated_by": {...} | null}`` (absent in logs written before it existed)."""

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


class AttemptRecord(_Frozen):
    """One run of the trainer under ``oom-wizard run``.

    Attributes:
        config: The config it ran.
        kind: ``full``, or ``validation`` (the short run after a fix).
        outcome: ``crashed``, ``passed_validation``, ``finished``, ``failed`` (not out of
            memory), ``stopped`` (the trainer's log says so), or ``interrupted``.
        step: The last training step the log showed.
        phase: Where it was when it ended (the log scan's phase).
        moment: The diagnosed moment of a crash.
        exit_code: The trainer's exit status (negative: the signal that ended it).
        duration_s: Seconds it ran.
        log: The log it wrote.
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


def check_belongs(log: ChangeLog, log_path: Path, config: Path, data: bytes) -> str | None:
    """Refuse a change log that describes another config; a note when it is ours but edited.

    The log names its latest output and that file's SHA-256. A config with neither that
    name nor those bytes is another job's; one with the name but other bytes was edited
    after the save (a note, the caller goes on from the file as it is).

    Raises:
        WizardError: the change log describes another config.
    """
    same_bytes = log.output.sha256 is not None and log.output.sha256 == sha256_of(data)
    recorded = resolve_recorded(log_path, log.output.path)
    same_name = recorded.name == config.name
    if same_bytes:
        return None
    if not same_name:
        raise WizardError(
            f"this change log describes {log.output.path}, not {config.name} (neither its "
            "name nor its SHA-256 match): pass the change log that oom-wizard wrote for "
            "this config",
            file=log_path,
        )
    return (
        f"{config}: edited after oom-wizard saved it (its SHA-256 is not the one in "
        f"{log_path}); the scale-up goes on from the file as it is now"
    )


def find_changelog(config: Path) -> Path | None:
    """The change log that describes ``config``, when there is one beside it."""
    candidate = changelog_path_for(config)
    return candidate if candidate.is_file() else None


def read_changelog(path: Path) -> ChangeLog:
    """Read and validate a change log.

    Raises:
        WizardError: the file is missing, not JSON, or not an oom-wizard change log.
    """
    from oom_wizard.document import NotRegularFile, read_regular_file
    from oom_wizard.yamlload import check_limits

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
