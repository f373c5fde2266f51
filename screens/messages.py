"""Past-tense messages that workers post to the screens."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from wizard.save import SaveResult
    from wizard.session import WizardState


@dataclass
class JobLoaded(Message):
    """The config, its log and change log were read and diagnosed."""

    state: WizardState


@dataclass
class LoadFailed(Message):
    """Loading failed; ``error`` is the one line the command line would print."""

    error: str


@dataclass
class ConfigSaved(Message):
    """The new config and its change log were written."""

    result: SaveResult


@dataclass
class SaveFailed(Message):
    """Saving was refused or failed; nothing was written."""

    error: str
