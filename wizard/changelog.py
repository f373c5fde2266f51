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

from wizard.errors import WizardError
from wizard.frozen import FrozenModel

FORMAT: Final = "oom-wizard-changelog/1"
CHANGELOG_SUFFIX: Final = ".changelog.json"

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

    @model_serializer(mode="wrap")
    def _written(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The run as the file holds it: ``database`` only for a web-UI job, without the
        fields its kind of save does not have."""
        data: dict[str, Any] = handler(self)
        if self.database is None:
            data.pop("database", None)
        else:
            data["database"] = self.database.model_dump(mode="json", exclude_none=True)
        return data


class ChangeLog(_Frozen):
    """The whole change log of one line of configs (a source and its descendants)."""

    format: str = FORMAT
    source: FileRef
    output: FileRef
    runs: tuple[RunRecord, ...] = ()
    changes: tuple[ChangeEntry, ...] = Field(default=())

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

    def to_json(self) -> str:
        """The file's text: stable key order, two-space indent, a final newline."""
        return json.dumps(self.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"


def now_iso() -> str:
    """The current time as ISO-8601 with a UTC offset, to the second."""
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


def sha256_of(data: bytes) -> str:
    """Hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def changelog_path_for(output: Path) -> Path:
    """``my_job.oomfix.yaml`` → ``my_job.oomfix.changelog.json``, beside it."""
    return output.with_name(output.stem + CHANGELOG_SUFFIX)


def find_changelog(config: Path) -> Path | None:
    """The change log that describes ``config``, when there is one beside it."""
    candidate = changelog_path_for(config)
    return candidate if candidate.is_file() else None


def read_changelog(path: Path) -> ChangeLog:
    """Read and validate a change log.

    Raises:
        WizardError: the file is missing, not JSON, or not an oom-wizard change log.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise WizardError("no such change log", file=path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise WizardError(f"cannot read this change log: {exc}", file=path) from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise WizardError(
            f"not JSON: {exc.msg}", file=path, line=exc.lineno, column=exc.colno
        ) from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise WizardError(f"not an oom-wizard change log (expected format {FORMAT})", file=path)
    try:
        return ChangeLog.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise WizardError(f"damaged change log: {where}: {first['msg']}", file=path) from None
