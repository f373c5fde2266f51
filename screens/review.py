"""Stage 4, Review and save: the whole diff, where it goes, and the save (in a worker)."""

from __future__ import annotations

from functools import partial

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Header, RadioSet, Static

from oom_wizard.application.choosing import (
    Review,
    chosen_fix_names,
    chosen_fix_words,
    chosen_steps_words,
    fix_name_words,
    fix_summary,
    optional_line,
    review,
    validation_choice,
)
from oom_wizard.application.saving import save
from oom_wizard.errors import WizardError
from oom_wizard.rules.sizing import FixName
from oom_wizard.screens.base import BACK
from oom_wizard.screens.changes import DiffView
from oom_wizard.screens.destination import DestinationPicker
from oom_wizard.screens.memory_bar import MemoryBar
from oom_wizard.screens.saving import SavingStage
from oom_wizard.screens.toggles import Choice, Tick
from oom_wizard.screens.widgets import KeyBar


class ReviewScreen(SavingStage):
    """Everything that will change, where it is saved, and the save: the screen renders
    :func:`oom_wizard.application.choosing.review` for the fix and the validation run picked, and
    saves
    exactly its choices."""

    BINDINGS = [  # noqa: RUF012
        Binding("enter", "save", "Save", priority=True, id="review.save"),
        Binding("escape", "back", "Back", id="review.back"),
    ]

    def __init__(self) -> None:
        super().__init__()
        #: The fix whose defaults the steps not decided, or accepted as they were, take
        #: (None: the plan's).
        self.fix: FixName | None = None
        #: What is on screen, and what Save writes (None: an edit was refused).
        self.shown: Review | None = None

    def compose(self) -> ComposeResult:
        state = self.state
        yield Header()
        with VerticalScroll(id="body"):
            yield Static("Review and save", classes="title")
            yield Static("", id="summary")
            yield MemoryBar(id="memory")
            yield DestinationPicker(state, id="destination")
            fixes = chosen_fix_names(state)
            if len(fixes) > 1:
                with Vertical(classes="field-row", id="fixes"):
                    yield Static(
                        "\n".join(line.strip() for line in fix_summary(state)[:1]),
                        classes="field-hint",
                    )
                    with RadioSet(id="fix", compact=True):
                        for name in fixes:
                            yield Choice(
                                chosen_fix_words(state, name),
                                value=name == state.plan.default_fix,
                                id=f"fix-{name}",
                            )
                    yield Static(
                        "\n".join(
                            f"{fix_name_words(state, name)}: {chosen_steps_words(state, name)}"
                            for name in fixes
                        ),
                        classes="field-hint",
                    )
            optional = optional_line(state)  # the deeper levers the walk left out
            if optional is not None:
                yield Static(optional, id="optional", classes="field-hint", markup=False)
            validation = state.validation_step()
            chosen = validation_choice(state)  # the user's, run's, or the default
            if validation is not None and chosen is not None:
                with Vertical(classes="field-row"):
                    yield Tick(validation.title, value=chosen.enabled, id="validation")
                    yield Static(validation.why, classes="field-hint")
                    # What the save does with the run, as the switch and the fix leave it.
                    yield Static("", id="validation-note", classes="field-hint", markup=False)
            yield Static("", id="error", classes="error")
            yield DiffView(id="diff")
        yield KeyBar()

    def on_mount(self) -> None:
        """Show what the choices change."""
        self.refresh_diff()

    @on(RadioSet.Changed, "#fix")
    def _fix_chosen(self, event: RadioSet.Changed) -> None:
        """The steps accepted as they were follow the fix picked; the diff follows."""
        name = (event.pressed.id or "").removeprefix("fix-")
        self.fix = next((fix for fix in chosen_fix_names(self.state) if fix == name), None)
        self.refresh_diff()

    @on(Tick.Changed, "#validation")
    def refresh_diff(self) -> None:
        """Show the review of the fix and the validation run picked: its headline, its
        peak and its diff."""
        ticks = self.query("#validation").results(Tick)
        validation = next((tick.value for tick in ticks), None)
        try:
            shown = review(self.state, self.fix, validation=validation)
        except WizardError as exc:
            self.shown = self.ready = None
            self.show_error(exc.one_line("app"))
            return
        self.shown, self.ready = shown, shown.ready
        self.query_one("#summary", Static).update(self._summary(shown))
        self.query_one("#memory", MemoryBar).show(shown.peak)
        self.query_one("#diff", DiffView).show(shown.ready)
        for note in self.query("#validation-note").results(Static):
            note.update(f"⚠ {shown.validation_note}" if shown.validation_note else "")
            note.display = shown.validation_note is not None

    def _summary(self, shown: Review) -> str:
        job = self.state.db_job
        if job is None:
            return f"{shown.headline}. The source, {self.state.source.name}, is never written."
        return f"{shown.headline}. Job '{job.name}' of AI Toolkit's UI. Save to:"

    def action_save(self) -> None:
        """Save in a worker (refused when nothing changes or the destination is refused)."""
        if self.saving:
            return
        shown = self.shown
        if shown is None or not shown.changed:
            self.show_error("nothing to save: no field changes with these choices")
            return
        self.start_save(partial(save, self.state, shown.choices, ready=shown.ready))

    def action_back(self) -> None:
        """Back to the last step."""
        self.dismiss(BACK)
