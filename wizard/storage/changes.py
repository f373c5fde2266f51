"""From a list of field changes to a new document in memory, with its change entries.

Every command that writes (``apply``, ``set``, ``scale-up``) and the app's save button come
through :func:`prepare`: the edits are made on the document's text and recorded with their
step and reason; :func:`oom_wizard.storage.save.commit` then saves the result beside its
change log. The planner prepares too (a later step counts from what earlier ones leave), so
this module writes nothing.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from oom_wizard import spelling
from oom_wizard.errors import ConfigError, EditError
from oom_wizard.formats.change import Change
from oom_wizard.formats.document import MISSING, JobDocument, same_value
from oom_wizard.paths import FieldPath, format_path
from oom_wizard.storage.changelog import (
    ChangeEntry,
    ChangeLog,
    changelog_for,
    find_changelog,
)

__all__ = ["Change", "Prepared", "changelog_of", "prepare", "unified_diff"]


@dataclass(frozen=True)
class Prepared:
    """Changes applied in memory: the new document, its log entries and its diff."""

    before: JobDocument
    after: JobDocument
    entries: tuple[ChangeEntry, ...]

    @property
    def changed(self) -> bool:
        """Did any field actually change?"""
        return bool(self.entries)

    def diff(self) -> str:
        """A unified diff of the lines that change."""
        return unified_diff(self.before, self.after)

    def shown_diff(self) -> str:
        """The diff as the user reads it, on the command line and in the app: the unified
        diff, or, where a line is too long to read as one (a config stored as one line of
        JSON, as the web UI stores it), the fields that change, ``-``/``+`` a line each."""

        diff = self.diff()
        if not any(len(line) > LONG_DIFF_LINE for line in diff.splitlines()):
            return diff
        lines = [ONE_LONG_LINE]
        for entry in self.entries:
            before, after = spelling.before_after(entry.before, entry.after)
            lines += [f"- {entry.path}: {before}", f"+ {entry.path}: {after}"]
        return "\n".join(lines)


#: A diff line longer than this is unreadable as a line: such a change is shown field by field.
LONG_DIFF_LINE: Final = 160
#: The heading of a diff shown field by field.
ONE_LONG_LINE: Final = "The config is one long line; the fields that change:"


def prepare(document: JobDocument, changes: Sequence[Change]) -> Prepared:
    """Apply ``changes`` in memory (skipping those that change nothing).

    Raises:
        EditError: a change cannot be made safely.
    """
    kept: list[Change] = []
    entries: list[ChangeEntry] = []
    for change in changes:
        _check_change(document, change)
        before = document.get(change.path)
        if change.after is MISSING and before is MISSING:
            continue
        if (
            before is not MISSING
            and change.after is not MISSING
            and same_value(before, change.after)
        ):
            continue
        kept.append(change)
        entries.append(
            ChangeEntry(
                run=0,
                step=change.step,
                path=format_path(change.path),
                before=None if before is MISSING else before,
                after=None if change.after is MISSING else change.after,
                reason=change.reason,
            )
        )
    after = document.with_edits([change.edit() for change in kept])
    try:
        after.view()
    except ConfigError as exc:
        raise EditError(f"refused: {exc.message}", file=document.source) from None
    return Prepared(document, after, tuple(entries))


#: Keys AI Toolkit cannot start without: removing one is refused.
REQUIRED: Final[dict[FieldPath, str]] = {
    ("job",): "AI Toolkit reads the job type from it",
    ("config",): "it holds the whole job",
    ("config", "name"): "AI Toolkit names the job, its output folder and its files after it",
    ("config", "process"): "it holds the training processes",
}


def _check_change(document: JobDocument, change: Change) -> None:
    """Refuse a change AI Toolkit could not use, or the change log could not record.

    Raises:
        EditError: a required key removed, a list item removed, a value that is not a
            finite number (``1e400`` reads as infinity, ``.nan`` as not-a-number).
    """
    where = format_path(change.path)
    if change.after is MISSING:
        if change.path in REQUIRED:
            raise EditError(
                f"{where} cannot be removed: {REQUIRED[change.path]}; set another value instead",
                file=document.source,
            )
        if change.path and isinstance(change.path[-1], int):
            raise EditError(
                f"{where} is a list item; oom-wizard removes keys, not list items: set the "
                "whole list instead, or remove the item in an editor",
                file=document.source,
            )
        return
    bad = _non_finite(change.after)
    if bad is not None:
        raise EditError(
            f"{where}: {bad} is not a finite number, which AI Toolkit cannot train with "
            "(and JSON cannot record); give a finite value",
            file=document.source,
        )


def _non_finite(value: Any) -> str | None:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, list):
        return next((found for item in value if (found := _non_finite(item))), None)
    if isinstance(value, dict):
        return next((found for item in value.values() if (found := _non_finite(item))), None)
    return None


def changelog_of(config: Path) -> ChangeLog | None:
    """The change log beside ``config`` when it describes it (``config`` is our output), by
    the one rule of :func:`oom_wizard.storage.changelog.changelog_for`."""
    path = find_changelog(config)
    if path is None:
        return None
    belonging = changelog_for(config, config.read_bytes(), path)
    return belonging.log if belonging is not None else None


def unified_diff(before: JobDocument, after: JobDocument, context: int = 1) -> str:
    """The lines that differ between two documents, as a unified diff."""
    lines = difflib.unified_diff(
        before.text.splitlines(),
        after.text.splitlines(),
        fromfile=str(before.source),
        tofile="(new)",
        n=context,
        lineterm="",
    )
    return "\n".join(lines)
