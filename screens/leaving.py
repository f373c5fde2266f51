"""Leaving the wizard with choices not saved: a modal that asks "leave or stay"."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class LeaveScreen(ModalScreen[bool]):
    """Asks before Ctrl+Q drops choices that are not saved: True leaves, False stays.

    Stay is focused, so Enter keeps the work; Ctrl+Q a second time leaves.
    """

    BINDINGS = [  # noqa: RUF012
        Binding("escape", "stay", "Stay"),
        Binding("l", "leave", "Leave"),
        Binding("s", "stay", "Stay", show=False),
    ]

    def __init__(self, source: str) -> None:
        super().__init__()
        self.source = source

    def compose(self) -> ComposeResult:
        with Vertical(id="leave-box"):
            yield Static("Leave without saving?", classes="title")
            yield Static(
                f"The choices made so far are not saved; {self.source} stays as it was.",
                id="leave-why",
                markup=False,
            )
            with Horizontal(id="leave-buttons"):
                yield Button("Stay (Esc)", id="stay", variant="primary", compact=True)
                yield Button("Leave (l)", id="leave", variant="error", compact=True)

    def on_mount(self) -> None:
        """Stay is the safe answer: it has the focus."""
        self.query_one("#stay", Button).focus()

    @on(Button.Pressed, "#leave")
    def action_leave(self) -> None:
        """Leave the wizard; nothing is saved."""
        self.dismiss(True)

    @on(Button.Pressed, "#stay")
    def action_stay(self) -> None:
        """Back to the wizard, as it was."""
        self.dismiss(False)
