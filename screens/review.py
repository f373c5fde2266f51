"""Stage 4, Review and save: the whole diff, where it goes, and the save (in a worker)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.widgets import Footer, Header, Input, Static, Switch

from screens.base import StageScreen
from screens.messages import ConfigSaved, SaveFailed
from screens.widgets import DiffView
from wizard.changelog import changelog_path_for
from wizard.changes import Prepared
from wizard.errors import WizardError
from wizard.plan import StepChoice
from wizard.save import default_output_path
from wizard.session import effective_choices, prepared, save


class ReviewScreen(StageScreen):
    """Everything that will change, the output and change-log paths, and the save."""

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
        output = default_output_path(state.source)
        yield Header()
        with VerticalScroll(id="body"):
            yield Static("Review and save", classes="title")
            yield Static("", id="summary")
            with Horizontal(classes="path-row"):
                yield Static("Save as")
                yield Input(str(output), id="output", compact=True)
            with Horizontal(classes="path-row"):
                yield Static("Change log")
                yield Input(str(changelog_path_for(output)), id="changelog", compact=True)
            validation = state.validation_step()
            if validation is not None:
                with Horizontal(classes="field-row"):
                    yield Switch(value=validation.default_on, id="validation")
                    yield Static(
                        Content.assemble((validation.title, "bold"), "  ", validation.why),
                        classes="field-text",
                    )
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
            extra = StepChoice(validation.id, enabled=self.query_one("#validation", Switch).value)
        return effective_choices(self.state, upto=self.upto, extra=extra)

    @on(Switch.Changed, "#validation")
    def refresh_diff(self) -> None:
        """Recompute the whole diff."""
        try:
            self.ready = prepared(self.state, self.choices())
        except WizardError as exc:
            self.ready = None
            self._show_error(exc.one_line())
            return
        count = len(self.ready.entries)
        steps = sorted({entry.step for entry in self.ready.entries if entry.step})
        summary = f"{count} field{'s' if count != 1 else ''} change"
        if steps:
            summary += f" ({', '.join(steps)})"
        summary += f". The source, {self.state.source.name}, is never written."
        self.query_one("#summary", Static).update(summary)
        self.query_one("#diff", DiffView).show(self.ready.diff())

    @on(Input.Changed, "#output")
    def _output_changed(self, event: Input.Changed) -> None:
        """Keep the change log beside the output unless it was edited by hand."""
        if event.value.strip():
            self.query_one("#changelog", Input).value = str(
                changelog_path_for(Path(event.value.strip()).expanduser())
            )
        self.query_one("#error", Static).update("")

    def action_save(self) -> None:
        """Save in a worker (refused when nothing changes or a path is taken)."""
        if self.saving:
            return
        if self.ready is None or not self.ready.changed:
            self._show_error("nothing to save: no field changes with these choices")
            return
        output = Path(self.query_one("#output", Input).value.strip()).expanduser()
        changelog = Path(self.query_one("#changelog", Input).value.strip()).expanduser()
        self.saving = True
        self.query_one("#error", Static).update(Content.styled("Saving …", "$text-muted"))
        self._save(dict(self.choices()), output, changelog)

    @work(thread=True, exclusive=True, exit_on_error=False)
    def _save(self, choices: Mapping[str, StepChoice], output: Path, changelog: Path) -> None:
        try:
            result = save(self.state, choices, output=output, changelog_path=changelog)
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
