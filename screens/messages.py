"""Past-tense messages that workers and the load screen post.

Each declares its ``__init__``, as Textual's own widgets declare theirs: a dataclass would
generate the same method at import time, which the first screen would wait for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from pathlib import Path

    from oom_wizard.application.history import NextScaleUps
    from oom_wizard.application.saving import Saved
    from oom_wizard.application.settling import WizardState
    from oom_wizard.request import JobRequest
    from oom_wizard.storage.jobdb import DbJob


class JobLoaded(Message):
    """The config, its log and change log were read and diagnosed."""

    def __init__(self, state: WizardState) -> None:
        super().__init__()
        self.state = state


class JobChosen(Message):
    """The user went on from the load screen with this job (the app takes it from here)."""

    def __init__(self, state: WizardState) -> None:
        super().__init__()
        self.state = state


class JobsListed(Message):
    """The jobs of AI Toolkit's jobs database were read (newest first)."""

    def __init__(self, db_path: Path, jobs: tuple[DbJob, ...]) -> None:
        super().__init__()
        self.db_path = db_path
        self.jobs = jobs


class LoadFailed(Message):
    """Loading failed; ``error`` is the one line the command line would print."""

    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


class EditedAsked(Message):
    """The config was edited after oom-wizard saved it: ask before going on from it.

    Attributes:
        question: What to ask the user.
        refusal: The one line to show when the user does not go on.
        what: How the job is named in the status line.
        request: The request to read again when the user goes on.
    """

    def __init__(self, question: str, refusal: str, what: str, request: JobRequest) -> None:
        super().__init__()
        self.question = question
        self.refusal = refusal
        self.what = what
        self.request = request


class ConfigSaved(Message):
    """The new config and its change log were written (to files or the jobs database).

    Attributes:
        result: What was written.
        later: The settings offered back after the saved config (``history``'s list).
    """

    def __init__(self, result: Saved, later: NextScaleUps) -> None:
        super().__init__()
        self.result = result
        self.later = later


class SaveFailed(Message):
    """Saving was refused or failed; nothing was written."""

    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error
