"""What every stage screen shares: the header, the footer, typed access to the app."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from textual.screen import Screen
from textual.widgets import Static
from textual.worker import Worker, WorkerState

if TYPE_CHECKING:
    from screens.app import OomWizardApp
    from wizard.session import WizardState


class StageScreen(Screen[None]):
    """A wizard stage: it reads the app's state and hands the user's choices back to it."""

    @property
    def wizard(self) -> OomWizardApp:
        """The app, typed."""
        from screens.app import OomWizardApp

        return cast(OomWizardApp, self.app)

    @property
    def state(self) -> WizardState:
        """The loaded job and the choices so far."""
        return self.wizard.require_state()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """``Worker.StateChanged`` does not bubble: every stage hands its failed workers to
        the app, which shows them all the same way (:meth:`OomWizardApp.report_failure`)."""
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            self.wizard.report_failure(event.worker.error)

    def show_failure(self, line: str) -> None:
        """Put the line where this stage shows errors, and end any "Reading …" status."""
        for status in self.query("#status").results(Static):
            status.update("")
        for error in self.query("#error").results(Static):
            error.update(line)
