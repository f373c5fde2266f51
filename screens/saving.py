"""What the review and the scale-up stages share: the save in a worker, and its outcome."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from textual import on, work
from textual.content import Content
from textual.widgets import Input, OptionList, Static

from oom_wizard.application.scale_up import offered_after_save
from oom_wizard.errors import WizardError
from oom_wizard.screens.base import Back, Finished, StageScreen
from oom_wizard.screens.destination import DestinationPicker
from oom_wizard.screens.messages import ConfigSaved, SaveFailed

if TYPE_CHECKING:
    from oom_wizard.application.saving import Destination, Saved
    from oom_wizard.storage.changes import Prepared

#: Writes the fix where the destination says (a function of the application layer, bound to
#: the state and the choices on screen).
Writer = Callable[["Destination"], "Saved"]

#: The worker group of the save (a screen has at most one save under way).
SAVE_GROUP = "save"


class SavingStage(StageScreen[Finished | Back]):
    """A stage that ends in a save: where to (a :class:`DestinationPicker`), the save in a
    worker, then the result (the screen returns it) or the refusal in one line.

    A subclass composes the picker and an ``#error`` line, keeps :attr:`ready` (the changes
    it shows) current, and calls :meth:`start_save` with the function that writes.

    A refusal stays on screen until the destination it refused is changed: an edit that
    leaves the destination as it was (the change-log field following the output field, a
    message that arrives after the worker's answer) does not wipe it.
    """

    #: Whether the save gives a setting back (the result screen words it so).
    SCALE_UP: ClassVar[bool] = False

    def __init__(self) -> None:
        super().__init__()
        self.ready: Prepared | None = None
        self.refused: Destination | None = None
        self._attempt: Destination | None = None
        self._blocked: tuple[str, str] | None = None
        """The file fields a Save was blocked on (its line goes once they change)."""

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
        if self.saving or self.ready is None:
            return
        picker = self.query_one(DestinationPicker)
        destination = picker.destination()
        if destination is None:  # a refused file name: its row says why; Save is blocked
            refusal = picker.show_reasons().first_refusal()
            self.show_error(refusal.one_line("app") if refusal else "a file name is refused")
            self._blocked = picker.typed()
            return
        self.query_one("#error", Static).update(Content.styled("Saving …", "$text-muted"))
        self._attempt = destination
        self._save(write, self._attempt, self.ready)

    @work(thread=True, exclusive=True, exit_on_error=False, group=SAVE_GROUP)
    def _save(self, write: Writer, destination: Destination, ready: Prepared) -> None:

        try:
            result = write(destination)
        except WizardError as exc:
            self.post_message(SaveFailed(exc.one_line("app")))
            return
        self.post_message(ConfigSaved(result, offered_after_save(result, ready)))

    @on(ConfigSaved)
    def _saved(self, event: ConfigSaved) -> None:
        self.query_one("#error", Static).update("")
        assert self.ready is not None
        self.dismiss(Finished(event.result, self.ready, event.later, scale_up=self.SCALE_UP))

    @on(SaveFailed)
    def _failed(self, event: SaveFailed) -> None:
        self.refused = self._attempt
        self.show_error(event.error)

    @on(Input.Changed)
    @on(OptionList.OptionHighlighted, "#where")
    def _destination_edited(self) -> None:
        """A refusal goes once the destination it refused is no longer the one shown."""
        if self._blocked is not None and self._blocked != self.query_one(DestinationPicker).typed():
            self._blocked = None
            self.query_one("#error", Static).update("")
        if self.refused is None or self.saving:
            return
        if self.query_one(DestinationPicker).destination() != self.refused:
            self.refused = None
            self.query_one("#error", Static).update("")

    def show_error(self, line: str) -> None:
        """The refusal as the command line prints it, and as a notification."""
        self.query_one("#error", Static).update(line)
        self.notify(line, title="Not saved", severity="error")
