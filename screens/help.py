"""The help screen: the keys in force on the stage under it, and the procedure in a few lines.

The key table is made from the bindings (:func:`~oom_wizard.screens.keys.key_table`): the
stage's and the app's, after the user's keymap, so it says what the keys do now.
"""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Markdown

from oom_wizard.application.preferences import settings_place
from oom_wizard.screens.keys import key_table, keys_phrase
from oom_wizard.screens.widgets import ladder_legend

HELP = """\
# oom-wizard

{close} closes this help.

Your AI Toolkit job died with **CUDA out of memory**. The wizard finds *when* it crashed,
then rolls the config back **one step at a time**, so that each retry tells you something.

The keys here, and what they do on this stage (**Space** toggles the switch or checkbox
under the cursor):

{keys}

Your own keys go in the settings file ({settings}) as
`"keymap": {{"step.skip": "ctrl+k"}}`: a keymap id of the table, then one key or several,
comma-separated.

**The progress line** on a step: {legend}. A step done already, or not for this model,
is passed over; a click on a step in that line, or the palette ({palette}, "Step N"),
opens any step, done ones included.

The source config is never written: the new one is saved beside it, with a change log
that lets the wizard give the settings back one by one once a retry trains through.
A job of the web UI (`--db`) is changed in its database only when you pick "Update job"
(`oom-wizard restore` undoes it) or "Save as a new job".
"""


class HelpScreen(ModalScreen[None]):
    """Keys and the procedure, over the current stage."""

    BINDINGS = [  # noqa: RUF012
        Binding("escape,enter,f1,question_mark", "close", "Close", priority=True, id="help.close"),
    ]

    def __init__(self, stage: Screen[Any]) -> None:
        super().__init__()
        self.stage = stage
        """The stage under the help, whose keys it shows."""

    def compose(self) -> ComposeResult:

        close = [
            key for key, active in self.active_bindings.items() if active.binding.id == "help.close"
        ]
        text = HELP.format(
            close=keys_phrase(close),
            keys=key_table(self.stage),
            legend=ladder_legend(),
            palette=keys_phrase([self.app.COMMAND_PALETTE_BINDING]),
            settings=settings_place(),
        )
        with VerticalScroll():
            yield Markdown(text)

    def action_close(self) -> None:
        """Back to the stage."""
        self.dismiss()
