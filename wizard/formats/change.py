"""One field change, the value the planner, the scale-up and the commands hand to the writer.

It lives beside the document (it is a document edit with its step and reason) and apart
from the save pipeline (:mod:`oom_wizard.storage.changes`, :mod:`oom_wizard.storage.save`),
so that planning a roll-back imports no file writer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from oom_wizard.formats.document import MISSING, Edit, RemoveKey, SetValue
from oom_wizard.paths import FieldPath


@dataclass(frozen=True)
class Change:
    """One field to change: set it to ``after``, or remove it when ``after`` is MISSING.

    Attributes:
        path: The field.
        after: The new value, or ``MISSING`` to remove the key.
        step: The step this change belongs to (None for a plain ``set``).
        reason: Why, in one sentence, for the change log.
    """

    path: FieldPath
    after: Any
    step: str | None = None
    reason: str = ""

    def edit(self) -> Edit:
        """The document edit that makes this change."""
        return RemoveKey(self.path) if self.after is MISSING else SetValue(self.path, self.after)
