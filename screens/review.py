"""Stage 4, Review and save: the whole diff, where it goes, and the save (in a worker)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from functools import partial

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Header, Static

from oom_wizard.errors import WizardError
from oom_wizard.screens.base import BACK
from oom_wizard.screens.destination import DestinationPicker
from oom_wizard.screens.saving import SavingStage
from oom_wizard.screens.widgets import DiffView, KeyBar, Tick
from oom_wizard.service import (
    Prepared,
    StepChoice,
    effective_choices,
    prepared,
    save,
    validation_choice,
)
from oom_wizard.spelling import field_changes


class ReviewScreen(SavingStage):
    """Everything that will change, where it is saved, and the save."""

    BINDINGS = [  # noqa: RUF012
        Binding("enter", "save", "Save", priority=True),
        Binding("escape", "back", "Back"),
    ]

    def __init__(self, upto: int | None) -> None:
        super().__init__()
        self.upto = upto

    def compose(self) -> ComposeResult:
        state = self.state
        yield Header()
        with VerticalScroll(id="body"):
            yield Static("Review and save", classes="title")
            yield Static("", id="summary")
            yield DestinationPicker(state, id="destination")
            validation = state.validation_step()
            chosen = validation_choice(state)  # the user's, run's, or the default
            if validation is not None and chosen is not None:
                with Vertical(classes="field-row"):
                    yield Tick(validation.title, value=chosen.enabled, id="validation")
                    yield Static(validation.why, classes="field-hint")
            yield Static("", id="error", classes="error")
            yield DiffView(id="diff")
        yield KeyBar()

    def on_mount(self) -> None:
        """Show what the choices change."""
        self.refresh_diff()

    def choices(self) -> Mapping[str, StepChoice]:
        """The choices saved: the steps decided, the validation run as toggled."""
        extra = None
        chosen = validation_choice(self.state)  # with ``run``'s step count, when it asks
        if chosen is not None:
            extra = replace(chosen, enabled=self.query_one("#validation", Tick).value)
        return effective_choices(self.state, upto=self.upto, extra=extra)

    @on(Tick.Changed, "#validation")
    def refresh_diff(self) -> None:
        """Recompute the whole diff."""
        try:
            self.ready = prepared(self.state, self.choices())
        except WizardError as exc:
            self.ready = None
            self.show_error(exc.one_line("app"))
            return
        self.query_one("#summary", Static).update(self._summary(self.ready))
        self.query_one("#diff", DiffView).show(self.ready)

    def _summary(self, ready: Prepared) -> str:
        count = len(ready.entries)
        steps = sorted({entry.step for entry in ready.entries if entry.step})
        text = field_changes(count)
        if steps:
            text += f" ({', '.join(steps)})"
        job = self.state.db_job
        if job is None:
            return text + f". The source, {self.state.source.name}, is never written."
        return text + f". Job '{job.name}' of AI Toolkit's UI. Save to:"

    def action_save(self) -> None:
        """Save in a worker (refused when nothing changes or the destination is refused)."""
        if self.saving:
            return
        if self.ready is None or not self.ready.changed:
            self.show_error("nothing to save: no field changes with these choices")
            return
        self.start_save(partial(save, self.state, dict(self.choices())))

    def action_back(self) -> None:
        """Back to the last step."""
        self.dismiss(BACK)
