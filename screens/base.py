"""What every stage screen shares: the header, the footer, typed access to the app."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from textual.screen import Screen

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
