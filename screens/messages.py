"""Past-tense messages that workers and the load screen post."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from oom_wizard.request import JobRequest
    from oom_wizard.service import DbJob, Saved, ScaleUp, WizardState


@dataclass
class JobLoaded(Message):
    """The config, its log and change log were read and diagnosed."""

    state: WizardState


@dataclass
class JobChosen(Message):
    """The user went on from the load screen with this job (the app takes it from here)."""

    state: WizardState


@dataclass
class JobsListed(Message):
    """The jobs of AI Toolkit's jobs database were read (newest first)."""

    db_path: Path
    jobs: tuple[DbJob, ...]


@dataclass
class LoadFailed(Message):
    """Loading failed; ``error`` is the one line the command line would print."""

    error: str


@dataclass
class EditedAsked(Message):
    """The config was edited after oom-wizard saved it: ask before going on from it."""

    question: str
    refusal: str
    what: str
    request: JobRequest


@dataclass
class ConfigSaved(Message):
    """The new config and its change log were written (to files or the jobs database).

    Attributes:
        result: What was written.
        later: The scale-ups ahead of the saved config.
    """

    result: Saved
    later: tuple[ScaleUp, ...]


@dataclass
class SaveFailed(Message):
    """Saving was refused or failed; nothing was written."""

    error: str
