"""The help screen: the keys, and the procedure in a few lines."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

HELP = """\
# oom-wizard

**Escape**, **Enter**, **F1** or **?** closes this help.

Your AI Toolkit job died with **CUDA out of memory**. The wizard finds *when* it crashed,
then rolls the config back **one step at a time**, so that each retry tells you something.

| Key | What it does |
|---|---|
| **Enter** | accept what is highlighted and go on |
| **Space** | toggle the switch or checkbox under the cursor |
| **Tab** / **Shift+Tab** | move between fields |
| **Escape** | go back one stage |
| **Ctrl+N** | skip this step |
| **Ctrl+S** | save now with the steps so far, and retry |
| **Ctrl+T** | image ↔ video (when did it crash) |
| **Ctrl+P** | command palette: stages, themes |
| **F1** or **?** | this help |
| **Ctrl+Q** | quit (asks first when choices are not saved) |

**The progress line** on a step: {legend}. A step done already, or not for this model,
is passed over; a click on a step in that line, or the palette (**Ctrl+P**, "Step N"),
opens any step, done ones included.

The source config is never written: the new one is saved beside it, with a change log
that lets the wizard give the settings back one by one once a retry trains through.
A job of the web UI (`--db`) is changed in its database only when you pick "Update job"
(`oom-wizard restore` undoes it) or "Save as a new job".
"""


class HelpScreen(ModalScreen[None]):
    """Keys and the procedure, over the current stage."""

    BINDINGS = [  # noqa: RUF012
        Binding("escape,f1,question_mark,enter", "close", "Close", priority=True),
    ]

    def compose(self) -> ComposeResult:
        from oom_wizard.screens.widgets import ladder_legend

        with VerticalScroll():
            yield Markdown(HELP.replace("{legend}", ladder_legend()))

    def action_close(self) -> None:
        """Back to the stage."""
        self.dismiss()
