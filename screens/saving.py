"""What the review and the scale-up stages share: the save in a worker, and its outcome."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from textual import on, work
from textual.content import Content
from textual.widgets import Static

from screens.base import StageScreen
from screens.destination import DestinationPicker
from screens.messages import ConfigSaved, SaveFailed
from wizard.errors import WizardError

if TYPE_CHECKING:
    from wizard.changes import Prepared
    from wizard.session import Destination, Saved

#: Writes the fix where the destination says (a function of ``wizard.session``, bound to
#: the state and the choices on screen).
Writer = Callable[["Destination"], "Saved"]

#: The worker group of the save (a screen has at most one save under way).
SAVE_GROUP = "save"


class SavingStage(StageScreen):
    """A stage that ends in a save: where to (a :class:`DestinationPicker`), the save in a
    worker, then the result screen or the refusal in one line.

    A subclass composes the picker and an ``#error`` line, keeps :attr:`ready` (the changes
    it shows) current, and calls :meth:`start_save` with the function that writes.
    """

    #: Whether the save gives a setting back (the result screen words it so).
    SCALE_UP: ClassVar[bool] = False

    def __init__(self) -> None:
        super().__init__()
        self.ready: Prepared | None = None

    @property
    def saving(self) -> bool:
        """Whether a save of this screen is under way (its worker has not finished)."""
        return any(
            worker.node is self and not worker.is_finished
            for worker in self.workers
            if worker.group == SAVE_GROUP
        )

    def start_save(self, write: Writer) -> None:
        """Save in a worker to the destination shown (once: a save under way is not repeated)."""
        if self.saving:
            return
        self.query_one("#error", Static).update(Content.styled("Saving …", "$text-muted"))
        self._save(write, self.query_one(DestinationPicker).destination())

    @work(thread=True, exclusive=True, exit_on_error=False, group=SAVE_GROUP)
    def _save(self, write: Writer, destination: Destination) -> None:
        try:
            result = write(destination)
        except WizardError as exc:
            self.post_message(SaveFailed(exc.one_line()))
        else:
            self.post_message(ConfigSaved(result))

    @on(ConfigSaved)
    def _saved(self, event: ConfigSaved) -> None:
        self.query_one("#error", Static).update("")
        assert self.ready is not None
        self.wizard.show_result(event.result, self.ready, scale_up=self.SCALE_UP)

    @on(SaveFailed)
    def _failed(self, event: SaveFailed) -> None:
        self.show_error(event.error)

    def show_error(self, line: str) -> None:
        """The refusal as the command line prints it, and as a notification."""
        self.query_one("#error", Static).update(f"oom-wizard: error: {line}")
        self.notify(line, title="Not saved", severity="error")
