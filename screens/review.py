"""Stage 4, Review and save: the whole diff, where it goes, and the save (in a worker)."""

from __future__ import annotations

from collections.abc import Mapping

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import Footer, Header, Input, OptionList, Static

from screens.base import StageScreen
from screens.destination import DestinationPicker
from screens.messages import ConfigSaved, SaveFailed
from screens.widgets import DiffView, Tick
from wizard.changes import Prepared
from wizard.errors import WizardError
from wizard.plan import StepChoice
from wizard.session import Destination, effective_choices, prepared, save


class ReviewScreen(StageScreen):
    """Everything that will change, where it is saved, and the save."""

    BINDINGS = [  # noqa: RUF012
        Binding("enter", "save", "Save", priority=True),
        Binding("escape", "back", "Back"),
    ]

    def __init__(self, upto: int | None) -> None:
        super().__init__()
        self.upto = upto
        self.ready: Prepared | None = None
        self.saving = False

    def compose(self) -> ComposeResult:
        state = self.state
        yield Header()
        with VerticalScroll(id="body"):
            yield Static("Review and save", classes="title")
            yield Static("", id="summary")
            yield DestinationPicker(state, id="destination")
            validation = state.validation_step()
            if validation is not None:
                with Vertical(classes="field-row"):
                    yield Tick(validation.title, value=validation.default_on, id="validation")
                    yield Static(validation.why, classes="field-hint")
            yield Static("", id="error", classes="error")
            yield DiffView(id="diff")
        yield Footer()

    def on_mount(self) -> None:
        """Show what the choices change."""
        self.refresh_diff()

    def choices(self) -> Mapping[str, StepChoice]:
        """The choices saved: the steps decided, the validation run as toggled."""
        extra = None
        validation = self.state.validation_step()
        if validation is not None:
            extra = StepChoice(validation.id, enabled=self.query_one("#validation", Tick).value)
        return effective_choices(self.state, upto=self.upto, extra=extra)

    @on(Tick.Changed, "#validation")
    def refresh_diff(self) -> None:
        """Recompute the whole diff."""
        try:
            self.ready = prepared(self.state, self.choices())
        except WizardError as exc:
            self.ready = None
            self._show_error(exc.one_line())
            return
        self.query_one("#summary", Static).update(self._summary(self.ready))
        self.query_one("#diff", DiffView).show(self.ready)

    def _summary(self, ready: Prepared) -> str:
        count = len(ready.entries)
        steps = sorted({entry.step for entry in ready.entries if entry.step})
        text = f"{count} field{'s' if count != 1 else ''} change"
        if steps:
            text += f" ({', '.join(steps)})"
        job = self.state.db_job
        if job is None:
            return text + f". The source, {self.state.source.name}, is never written."
        return text + f". Job '{job.name}' of AI Toolkit's UI. Save to:"

    @on(Input.Changed)
    @on(OptionList.OptionHighlighted, "#where")
    def _clear_error(self) -> None:
        """An edited destination may well be saved: the last refusal no longer applies."""
        if not self.saving:
            self.query_one("#error", Static).update("")

    def action_save(self) -> None:
        """Save in a worker (refused when nothing changes or the destination is refused)."""
        if self.saving:
            return
        if self.ready is None or not self.ready.changed:
            self._show_error("nothing to save: no field changes with these choices")
            return
        destination = self.query_one(DestinationPicker).destination()
        self.saving = True
        self.query_one("#error", Static).update(Content.styled("Saving …", "$text-muted"))
        self._save(dict(self.choices()), destination)

    @work(thread=True, exclusive=True, exit_on_error=False)
    def _save(self, choices: Mapping[str, StepChoice], destination: Destination) -> None:
        try:
            result = save(self.state, choices, destination)
        except WizardError as exc:
            self.post_message(SaveFailed(exc.one_line()))
        else:
            self.post_message(ConfigSaved(result))

    @on(ConfigSaved)
    def _saved(self, event: ConfigSaved) -> None:
        self.saving = False
        self.query_one("#error", Static).update("")
        assert self.ready is not None
        self.wizard.show_result(event.result, self.ready, scale_up=False)

    @on(SaveFailed)
    def _failed(self, event: SaveFailed) -> None:
        self.saving = False
        self._show_error(event.error)

    def _show_error(self, line: str) -> None:
        self.query_one("#error", Static).update(f"oom-wizard: error: {line}")
        self.notify(line, title="Not saved", severity="error")

    def action_back(self) -> None:
        """Back to the last step."""
        self.dismiss()
