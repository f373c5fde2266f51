"""Stage 4, Review and save: the whole diff, where it goes, and the save (in a worker)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from functools import partial

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Header, RadioSet, Static

from oom_wizard.errors import WizardError
from oom_wizard.screens.base import BACK
from oom_wizard.screens.changes import DiffView
from oom_wizard.screens.destination import DestinationPicker
from oom_wizard.screens.saving import SavingStage
from oom_wizard.screens.toggles import Choice, Tick
from oom_wizard.screens.widgets import KeyBar
from oom_wizard.service import (
    FIX_WORDS,
    FixName,
    Prepared,
    StepChoice,
    effective_choices,
    fix_names,
    fix_steps_words,
    fix_summary,
    fix_words,
    optional_line,
    prepared,
    save,
    validation_choice,
    validation_note,
)
from oom_wizard.spelling import field_changes


class ReviewScreen(SavingStage):
    """Everything that will change, where it is saved, and the save."""

    BINDINGS = [  # noqa: RUF012
        Binding("enter", "save", "Save", priority=True, id="review.save"),
        Binding("escape", "back", "Back", id="review.back"),
    ]

    def __init__(self, upto: int | None) -> None:
        super().__init__()
        self.upto = upto
        #: The fix whose defaults the steps accepted as they were take (None: the plan's).
        self.fix: FixName | None = None

    def compose(self) -> ComposeResult:
        state = self.state
        yield Header()
        with VerticalScroll(id="body"):
            yield Static("Review and save", classes="title")
            yield Static("", id="summary")
            yield DestinationPicker(state, id="destination")
            fixes = fix_names(state)
            if len(fixes) > 1:
                with Vertical(classes="field-row", id="fixes"):
                    yield Static(
                        "\n".join(line.strip() for line in fix_summary(state)[:1]),
                        classes="field-hint",
                    )
                    with RadioSet(id="fix", compact=True):
                        for name in fixes:
                            yield Choice(
                                fix_words(state, name, short=True),
                                value=name == state.plan.default_fix,
                                id=f"fix-{name}",
                            )
                    yield Static(
                        "\n".join(
                            f"{FIX_WORDS[name]}: {fix_steps_words(state, name)}" for name in fixes
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
                    note = validation_note(state)  # the job resumes: where the steps count from
                    if note is not None:
                        yield Static(f"⚠ {note}", id="validation-note", classes="field-hint")
            yield Static("", id="error", classes="error")
            yield DiffView(id="diff")
        yield KeyBar()

    def on_mount(self) -> None:
        """Show what the choices change."""
        self.refresh_diff()

    def choices(self) -> Mapping[str, StepChoice]:
        """The choices saved: the steps decided, the validation run as toggled (counted, with
        ``run``'s step count when it asks, on the config these choices leave)."""
        decided = effective_choices(self.state, upto=self.upto, fix=self.fix)
        validation = self.state.validation_step()
        if validation is not None and validation.id in decided:
            on = self.query_one("#validation", Tick).value
            decided[validation.id] = replace(decided[validation.id], enabled=on)
        return decided

    @on(RadioSet.Changed, "#fix")
    def _fix_chosen(self, event: RadioSet.Changed) -> None:
        """The steps accepted as they were follow the fix picked; the diff follows."""
        name = (event.pressed.id or "").removeprefix("fix-")
        self.fix = next((fix for fix in fix_names(self.state) if fix == name), None)
        self.refresh_diff()

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
