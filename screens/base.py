"""What every stage screen shares: typed access to the app and its state, and the values a
stage returns when it is done.

A stage screen never pushes the next one and never changes the app's state: it
``dismiss``es with one of the values below, and the app's callback (given to
``push_screen``) decides what comes next, as in Textual's screens guide. Every stage is built
fresh from the state in effect, so nothing on screen is left over from an older plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Generic, Protocol, TypeVar, cast

from textual.screen import Screen
from textual.widgets import Static
from textual.worker import Worker, WorkerState

if TYPE_CHECKING:
    from oom_wizard.application.history import NextScaleUps
    from oom_wizard.application.saving import Saved
    from oom_wizard.application.settling import WizardState
    from oom_wizard.rules.plan import StepChoice
    from oom_wizard.storage.changes import Prepared

ResultT = TypeVar("ResultT")


class Back:
    """The user went back one stage (Escape)."""

    def __repr__(self) -> str:
        return "BACK"


#: The one :class:`Back` value.
BACK: Final = Back()

#: The coming-back screen's answers: the retry trained through, or it crashed again.
RAN: Final = "ran"
CRASHED: Final = "crashed"


@dataclass(frozen=True)
class Accepted:
    """A step was decided (its toggles as shown, or skipped): go on to the next one."""

    choice: StepChoice


@dataclass(frozen=True)
class SaveNow:
    """A step was decided and the user wants to review and save now (the steps not decided
    yet at their defaults)."""

    choice: StepChoice


@dataclass(frozen=True)
class Finished:
    """A save went through: what was written, the changes, and the re-adds ahead.

    Attributes:
        saved: The files or the database row written.
        ready: The changes that were saved.
        later: The settings offered back after the saved config, in order, and where the
            scale-up stops (``history``'s list).
        scale_up: The save gave a setting back (rather than rolling back).
    """

    saved: Saved
    ready: Prepared
    later: NextScaleUps
    scale_up: bool


class StateOwner(Protocol):
    """What a stage needs of the app: the state in effect (the app is the one owner), and
    the one place that shows a failed worker."""

    def require_state(self) -> WizardState:
        """The loaded state."""
        ...

    def report_failure(self, error: BaseException) -> None:
        """Show a failed worker's error as the one line the command line prints."""
        ...


class StageScreen(Screen[ResultT], Generic[ResultT]):
    """A wizard stage: it renders the app's state and returns the user's decision.

    It knows the app only as the :class:`StateOwner` (``oom_wizard.screens.app`` imports the stages;
    no stage imports ``oom_wizard.screens.app``).
    """

    @property
    def state(self) -> WizardState:
        """The loaded job and the choices so far."""
        return cast(StateOwner, self.app).require_state()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """``Worker.StateChanged`` does not bubble: every stage hands its failed workers to
        the app, which shows them all the same way (``OomWizardApp.report_failure``)."""
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            cast(StateOwner, self.app).report_failure(event.worker.error)

    def show_failure(self, line: str) -> None:
        """Put the line where this stage shows errors, and end any "Reading …" status."""
        for status in self.query("#status").results(Static):
            status.update("")
        for error in self.query("#error").results(Static):
            error.update(line)
