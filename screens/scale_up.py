"""Scale up: after a retry trained through, give back exactly one heavier setting."""

from __future__ import annotations

from functools import partial

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Header, Static

from oom_wizard.application.scale_up import (
    next_scale_up,
    nothing_left,
    prepare_scale_up,
    save_scale_up,
    scale_up_notes,
    scale_up_prediction,
)
from oom_wizard.errors import WizardError
from oom_wizard.rules.plan import ScaleUp
from oom_wizard.screens.base import BACK
from oom_wizard.screens.changes import DiffView
from oom_wizard.screens.destination import DestinationPicker
from oom_wizard.screens.saving import SavingStage
from oom_wizard.screens.widgets import KeyBar


class ScaleUpScreen(SavingStage):
    """The next re-add in the scale-up order, its diff, and the save."""

    BINDINGS = [  # noqa: RUF012
        Binding("enter", "save", "Save", priority=True, id="scale_up.save"),
        Binding("enter", "close", "Close", priority=True, id="scale_up.close"),
        Binding("escape", "back", "Back", id="scale_up.back"),
    ]
    SCALE_UP = True

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Enter saves the re-add, or, with nothing left to re-add, closes (the footer says
        which)."""
        if action == "save":
            return self.next_up is not None
        if action == "close":
            return self.next_up is None
        return True

    def __init__(self) -> None:
        super().__init__()
        self.next_up: ScaleUp | None = next_scale_up(self.state)

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="body"):
            if self.next_up is None:
                first, *standing = nothing_left(self.state)
                title = "Everything is back" if not standing else "Nothing left to re-add"
                yield Static(title, classes="title")
                yield Static(f"{first[:1].upper()}{first[1:]}", classes="why")
                for line in standing:
                    yield Static(line.strip(), classes="standing")
                yield Static("Enter closes the wizard.", classes="why")
            else:
                yield Static(f"Scale up · {self.next_up.title}", classes="title")
                yield Static(self.next_up.why, classes="why")
                prediction = scale_up_prediction(self.state, self.next_up)  # as scale-up says
                if prediction is not None:
                    yield Static(prediction.words, id="prediction", classes="why", markup=False)
                yield Static("", id="crashed-note", classes="error", markup=False).set_styles(
                    "display: none;"
                )
                yield DestinationPicker(self.state, id="destination")
                yield Static("", id="error", classes="error")
                yield DiffView(id="diff")
        yield KeyBar()

    def on_mount(self) -> None:
        """Show the diff of the re-add."""
        if self.next_up is None:
            return
        try:
            self.ready = prepare_scale_up(self.state, self.next_up)
        except WizardError as exc:
            self.show_error(exc.one_line("app"))
            return
        self.query_one("#diff", DiffView).show(self.ready)
        notes = scale_up_notes(self.state, self.ready, self.next_up)
        shown = self.query_one("#crashed-note", Static)
        shown.update("\n".join(f"⚠ {note}" for note in notes))
        shown.display = bool(notes)

    def action_close(self) -> None:
        """Nothing is left to re-add: close the wizard."""
        self.app.exit(0)

    def action_save(self) -> None:
        """Save the scaled-up config in a worker (or quit when nothing is left)."""
        if self.next_up is None:
            self.action_close()
            return
        if self.ready is not None:
            self.start_save(partial(save_scale_up, self.state, self.next_up, ready=self.ready))

    def action_back(self) -> None:
        """Back to the question."""
        self.dismiss(BACK)
