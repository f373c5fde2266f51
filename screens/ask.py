"""A yes-or-no question over any stage: leave with choices not saved, keep a heavier value.

The safe answer (stay, do not keep) has the focus and Escape; the other has its own key.
Each button names its key as bound (after the user's keymap).
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from oom_wizard.screens.keys import key_words


class AskScreen(ModalScreen[bool]):
    """A question with two answers: True for ``yes``, False for the safe ``no`` (focused).

    A subclass binds a key to ``yes`` in its ``BINDINGS``.
    """

    BINDINGS = [  # noqa: RUF012
        Binding("escape", "no", "No", id="ask.no"),
    ]

    def __init__(self, title: str, text: str, *, yes: str, no: str) -> None:
        super().__init__()
        self.title_text, self.text = title, text
        self.yes_label, self.no_label = yes, no

    def compose(self) -> ComposeResult:
        with Vertical(id="ask-box"):
            yield Static(self.title_text, classes="title", id="ask-title", markup=False)
            yield Static(self.text, id="ask-text", markup=False)
            with Horizontal(id="ask-buttons"):
                no, yes = self._label(self.no_label, "no"), self._label(self.yes_label, "yes")
                yield Button(no, id="no", variant="primary", compact=True)
                yield Button(yes, id="yes", variant="error", compact=True)

    def _label(self, words: str, action: str) -> str:
        """``words`` with the keys bound to ``action`` on this screen: "Leave (l)"."""

        keys = [
            key_words(key)
            for key, active in self.active_bindings.items()
            if active.node is self and active.binding.action == action
        ]
        return f"{words} ({', '.join(keys)})" if keys else words

    def on_mount(self) -> None:
        """The safe answer has the focus."""
        self.query_one("#no", Button).focus()

    @on(Button.Pressed, "#yes")
    def action_yes(self) -> None:
        """The answer that is not the safe one."""
        self.dismiss(True)

    @on(Button.Pressed, "#no")
    def action_no(self) -> None:
        """The safe answer: back as it was."""
        self.dismiss(False)


class LeaveScreen(AskScreen):
    """Asks before Ctrl+Q drops choices that are not saved (a second Ctrl+Q leaves)."""

    BINDINGS = [Binding("l", "yes", "Leave", id="leave.yes")]  # noqa: RUF012

    def __init__(self, source: str) -> None:
        super().__init__(
            "Leave without saving?",
            f"The choices made so far are not saved; {source} stays as it was.",
            yes="Leave",
            no="Stay",
        )


class ConfirmIncreaseScreen(AskScreen):
    """Asks before a roll-back keeps a typed value that costs more memory than today's."""

    BINDINGS = [Binding("k", "yes", "Keep it", id="keep_increase.yes")]  # noqa: RUF012

    def __init__(self, reasons: list[str]) -> None:
        super().__init__(
            "Raise a value in a roll-back?",
            "\n".join(reasons) + "\nKept, the change log records it as an increase.",
            yes="Keep it",
            no="Edit it",
        )


class GoOnEditedScreen(AskScreen):
    """Asks before the wizard plans from the change log of a config edited since our save."""

    BINDINGS = [Binding("g", "yes", "Go on", id="go_on_edited.yes")]  # noqa: RUF012

    def __init__(self, question: str) -> None:
        super().__init__(
            "Edited after oom-wizard saved it",
            question,
            yes="Go on from it",
            no="Do not",
        )


class SaveNowScreen(AskScreen):
    """Asks before ``watch`` sets ``save_now`` on a running web-UI job's row."""

    BINDINGS = [Binding("y", "yes", "Save now", id="save_now.yes")]  # noqa: RUF012

    def __init__(self, question: str) -> None:
        super().__init__("Save a checkpoint now?", question, yes="Save now", no="Not now")
