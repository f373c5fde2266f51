"""Stage 3, one roll-back step: why, a row per field, the memory estimate and the diff."""

from __future__ import annotations

from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.validation import Integer, Number, Validator
from textual.widgets import Footer, Header, Input, Static

from oom_wizard.errors import WizardError
from oom_wizard.screens.base import BACK, Accepted, Back, SaveNow, StageScreen
from oom_wizard.screens.widgets import DiffView, Tick, ladder_content
from oom_wizard.service import (
    MISSING,
    FieldProposal,
    StepChoice,
    StepProposal,
    effective_choices,
    estimate,
    format_path,
    prepared,
)
from oom_wizard.spelling import editable
from oom_wizard.spelling import value as show_value


class FieldRow(Vertical):
    """One field of a step: its box (saying what it does), the proposed value if editable.

    ``[x] train.gradient_checkpointing: false → true``, ``[x] train.batch_size: 2 → [1]``
    (the proposed value is an input), ``[ ] drop bucket 768 (dataset 0)``; the place in AI
    Toolkit's UI below.
    """

    def __init__(self, proposal: FieldProposal, index: int, enabled: bool) -> None:
        super().__init__(classes="field-row")
        self.proposal = proposal
        self.index = index
        self.enabled = enabled

    def compose(self) -> ComposeResult:
        proposal = self.proposal
        with Horizontal(classes="field-line"):
            yield Tick(effect_label(proposal), value=self.enabled, id=f"toggle-{self.index}")
            if proposal.control in ("number", "text"):
                yield Input(
                    editable(proposal.after),
                    validators=_validators(proposal.after),
                    id=f"value-{self.index}",
                    compact=True,
                )
        if proposal.ui_hint:
            yield Static(f"UI: {proposal.ui_hint}", classes="field-hint")

    @property
    def toggled(self) -> bool:
        """Whether the field is toggled on."""
        return self.query_one(f"#toggle-{self.index}", Tick).value

    def edited(self) -> tuple[bool, Any]:
        """(valid, value) of the proposed-value input; (True, None) when not edited."""
        if self.proposal.control not in ("number", "text"):
            return True, None
        field_input = self.query_one(f"#value-{self.index}", Input)
        text = field_input.value.strip()
        if text == editable(self.proposal.after):
            return True, None
        if self.proposal.control == "text":
            return True, text
        if not field_input.is_valid:
            return False, None
        return True, _number(text, self.proposal.after)


class StepScreen(StageScreen[Accepted | SaveNow | Back]):
    """One step of the roll-back ("Step 2 of 5 · Batch size to 1")."""

    BINDINGS = [  # noqa: RUF012
        Binding("enter", "accept", "Accept", priority=True, tooltip="Apply the toggles shown"),
        Binding("ctrl+n", "skip", "Skip step", priority=True),
        Binding("escape", "back", "Back"),
        Binding("ctrl+s", "save_now", "Save now", priority=True, tooltip="Save and retry now"),
    ]

    def __init__(self, step_id: str) -> None:
        super().__init__()
        self.step: StepProposal = self.state.step(step_id)
        self.index = self.state.step_index(step_id)

    def compose(self) -> ComposeResult:
        state, step = self.state, self.step
        steps = state.rollback_steps()
        recorded = state.choices.get(step.id)
        yield Header()
        with VerticalScroll(id="body"):
            yield Static(
                f"Step {self.index + 1} of {len(steps)} · {step.title}",
                classes="title",
                id="step-title",
            )
            yield Static(ladder_content(steps, step.id), id="ladder")
            yield Static(step.why, classes="why")
            if step.note:
                yield Static(step.note, classes="note")
            yield Tick(
                "Apply this step",
                value=recorded.enabled if recorded else step.default_on,
                id="step-on",
            )
            for number, proposal in enumerate(step.fields):
                enabled = proposal.default_on
                if recorded is not None:
                    enabled = recorded.fields.get(format_path(proposal.path), enabled)
                yield FieldRow(proposal, number, enabled)
            yield Static("", id="estimate")
            yield DiffView(id="step-diff")
        yield Footer()

    def on_mount(self) -> None:
        """Show the estimate and the diff of the defaults."""
        self.refresh_preview()

    def choice(self) -> StepChoice:
        """The step as the toggles and inputs show it now."""
        fields: dict[str, bool] = {}
        values: dict[str, Any] = {}
        for row in self.query(FieldRow):
            key = format_path(row.proposal.path)
            fields[key] = row.toggled
            valid, value = row.edited()
            if valid and value is not None:
                values[key] = value
        return StepChoice(
            step_id=self.step.id,
            enabled=self.query_one("#step-on", Tick).value,
            fields=fields,
            values=values,
        )

    def invalid_rows(self) -> list[FieldRow]:
        """Rows whose typed value does not validate."""
        return [row for row in self.query(FieldRow) if not row.edited()[0]]

    @on(Tick.Changed)
    @on(Input.Changed)
    def refresh_preview(self) -> None:
        """Recompute the memory estimate and this step's diff from the toggles."""
        choice = self.choice()
        state = self.state
        try:
            upto = effective_choices(state, upto=self.index + 1, extra=choice)
            figure = estimate(state, upto)
            only_this = {
                key: value if key == choice.step_id else StepChoice(key, enabled=False)
                for key, value in upto.items()
            }
            ready = prepared(state, only_this)
        except WizardError as exc:
            self.query_one("#estimate", Static).update(
                Content.styled(exc.one_line(), "$text-error")
            )
            return
        text = f"Memory, relative to today (≈): training {figure.train_pct:.0f}%"
        if figure.sample_pct is not None:
            text += f" · samples {figure.sample_pct:.0f}%"
        self.query_one("#estimate", Static).update(
            Content.assemble(text, ("\n" + figure.note if figure.note else "", "$text-muted"))
        )
        self.query_one("#step-diff", DiffView).show(ready)

    def _valid(self) -> bool:
        """Whether every typed value validates (else the first bad one is named)."""
        bad = self.invalid_rows()
        if bad:
            self.notify(
                f"{bad[0].proposal.label}: not a valid value", title="Check", severity="error"
            )
            return False
        return True

    def action_accept(self) -> None:
        """Keep the toggles as shown and go on to the next step."""
        if self._valid():
            self.dismiss(Accepted(self.choice()))

    def action_skip(self) -> None:
        """Leave this step out and go on to the next one."""
        self.dismiss(Accepted(StepChoice(self.step.id, enabled=False)))

    def action_back(self) -> None:
        """Back to the previous step (or the moment)."""
        self.dismiss(BACK)

    def action_save_now(self) -> None:
        """Save with this step and those before it; later steps stay for another retry."""
        if self._valid():
            self.dismiss(SaveNow(self.choice()))


def effect_label(proposal: FieldProposal) -> str:
    """What the field's box does when it is on, in words (an input follows a bare ``→``)."""
    before = show_value(proposal.before)
    if proposal.control == "bucket" and proposal.after is MISSING:
        return f"drop {proposal.label}"
    if proposal.control in ("number", "text"):
        return f"{proposal.label}: {before} →"
    return f"{proposal.label}: {before} → {show_value(proposal.after)}"


def _validators(value: Any) -> list[Validator]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [Integer(minimum=0)]
    if isinstance(value, float):
        return [Number(minimum=0)]
    return []


def _number(text: str, like: Any) -> Any:
    """``text`` as the type of the proposed value."""
    return int(text) if isinstance(like, int) and not isinstance(like, bool) else float(text)
