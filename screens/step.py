"""Stage 3, one roll-back step: why, a row per field, the memory estimate and the diff."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import Header, Input, Static

from oom_wizard.application.choosing import (
    check_value,
    default_choice,
    done_before,
    dropped_line,
    effective_batch_note,
    effective_choices,
    estimate,
    followed_values,
    memory_peak,
    proposed_step,
    step_prepared,
    step_status,
)
from oom_wizard.errors import WizardError
from oom_wizard.paths import MISSING, format_path
from oom_wizard.rules.plan import FieldProposal, StepChoice, StepProposal
from oom_wizard.rules.values import ValueCheck
from oom_wizard.screens.ask import ConfirmIncreaseScreen
from oom_wizard.screens.base import BACK, Accepted, Back, SaveNow, StageScreen
from oom_wizard.screens.changes import DiffView
from oom_wizard.screens.memory_bar import MemoryBar
from oom_wizard.screens.toggles import Tick
from oom_wizard.screens.widgets import KeyBar, PlainInput, ladder_content
from oom_wizard.spelling import editable, value as show_value


class FieldRow(Vertical):
    """One field of a step: its box (saying what it does), the proposed value if editable.

    ``[x] train.batch_size: 2 → [1]`` (the proposed value is an input), ``[ ] drop bucket
    768 (dataset 0)``; under it, why a typed value is refused or needs a confirmation (the
    application layer checks it as it is typed), and the place in AI Toolkit's UI.
    """

    def __init__(
        self,
        proposal: FieldProposal,
        index: int,
        enabled: bool,
        check: Callable[[str], ValueCheck],
        typed: Any = None,
    ) -> None:
        super().__init__(classes="field-row")
        self.proposal = proposal
        self.index = index
        self.enabled = enabled
        self._check = check
        #: The value chosen for the field before (shown again), None for the proposed one.
        self.typed = typed
        #: The text the row was given to follow a value typed on another row (the
        #: accumulation that keeps the effective batch); None: the row shows its own.
        self.following: str | None = None

    def compose(self) -> ComposeResult:
        proposal = self.proposal
        with Horizontal(classes="field-line"):
            yield Tick(effect_label(proposal), value=self.enabled, id=f"toggle-{self.index}")
            if self.editable:
                shown = editable(proposal.after if self.typed is None else self.typed)
                yield PlainInput(shown, id=f"value-{self.index}", compact=True)
        if self.editable:
            reason = Static("", id=f"reason-{self.index}", classes="field-reason", markup=False)
            reason.display = False
            yield reason
        if proposal.ui_hint:
            yield Static(f"UI: {proposal.ui_hint}", classes="field-hint")

    @property
    def editable(self) -> bool:
        """Whether the proposed value is an input."""
        return self.proposal.control in ("number", "text")

    @property
    def toggled(self) -> bool:
        """Whether the field is toggled on."""
        return self.query_one(f"#toggle-{self.index}", Tick).value

    @property
    def value_input(self) -> Input:
        """The input of the proposed value (editable rows only)."""
        return self.query_one(f"#value-{self.index}", Input)

    @property
    def follows(self) -> bool:
        """Whether the row's value is not the user's own: the proposed one as it was, or
        the one it was given to follow another row."""
        if not self.editable:
            return False
        text = self.value_input.value.strip()
        return text == editable(self.proposal.after) or text == self.following

    def follow(self, text: str | None) -> None:
        """Show ``text``, the value that follows another row (None: the proposed one)."""
        self.following = text
        shown = editable(self.proposal.after) if text is None else text
        if self.value_input.value != shown:
            self.value_input.value = shown

    def check(self) -> ValueCheck | None:
        """The application layer's verdict on the typed value; None when nothing was edited."""
        if not self.editable:
            return None
        text = self.value_input.value.strip()
        if text == editable(self.proposal.after):
            return None
        return self._check(text)

    def edited(self) -> tuple[bool, Any]:
        """(valid, value) of the proposed-value input; (True, None) when not edited."""
        check = self.check()
        if check is None:
            return True, None
        return (True, check.value) if check.ok else (False, None)

    def show_check(self) -> None:
        """The reason on the row: a refusal in the error colour, an increase as a warning."""
        if not self.editable:
            return
        check = self.check()
        shown = self.query_one(f"#reason-{self.index}", Static)
        reason = check.reason if check is not None else None
        shown.set_class(check is not None and not check.ok, "refused")
        shown.update(
            f"{'✗' if check is not None and not check.ok else '!'} {reason}" if reason else ""
        )
        shown.display = bool(reason)


class StepScreen(StageScreen[Accepted | SaveNow | Back]):
    """One step of the roll-back ("Step 2 of 5 · Batch size to 1")."""

    BINDINGS = [  # noqa: RUF012
        Binding(
            "enter",
            "accept",
            "Accept",
            priority=True,
            tooltip="Apply the toggles shown",
            id="step.accept",
        ),
        Binding("ctrl+n", "skip", "Skip step", priority=True, id="step.skip"),
        Binding("escape", "back", "Back", id="step.back"),
        Binding(
            "ctrl+s",
            "save_now",
            "Save now",
            priority=True,
            tooltip="Save and retry now",
            id="step.save_now",
        ),
    ]

    def __init__(self, step_id: str) -> None:
        super().__init__()
        #: The step as the choices of the steps before it leave it (a value typed there is
        #: where a row on the same field starts).
        self.step: StepProposal = proposed_step(self.state, step_id)
        self.index = self.state.step_index(step_id)
        #: (field key, value) pairs whose increase the user confirmed on this screen.
        self.confirmed: set[tuple[str, Any]] = set()

    def compose(self) -> ComposeResult:
        state, step = self.state, self.step
        steps = state.rollback_steps()
        recorded = state.choices.get(step.id)
        status = {other.id: step_status(state, other) for other in steps}
        yield Header()
        with VerticalScroll(id="body"):
            yield Static(self.progress(), classes="title", id="step-title")
            yield Static(ladder_content(steps, step.id, status), id="ladder")
            yield Static(step.why, classes="why")
            if step.satisfied:
                optional = "the rows below are optional" if step.fields else "nothing to change"
                yield Static(
                    f"Already done: the config has this already; {optional}.",
                    classes="note",
                    id="done-note",
                )
            if step.note:
                yield Static(step.note, classes="note")
            dropped = dropped_line(state, step.id)
            if dropped is not None:
                yield Static(dropped, classes="note", id="dropped-note", markup=False)
            yield Tick(
                "Apply this step",
                value=recorded.enabled if recorded else default_choice(state, step).enabled,
                id="step-on",
            )
            default = default_choice(state, step)  # the fix's rung: its values shown
            for number, proposal in enumerate(step.fields):
                enabled = default.fields.get(proposal.key, proposal.default_on)
                typed = default.values.get(proposal.key)
                if recorded is not None:
                    enabled = recorded.fields.get(proposal.key, proposal.default_on)
                    typed = recorded.values.get(proposal.key)
                    if typed is not None:  # kept before: an increase was confirmed then
                        self.confirmed.add((proposal.key, typed))
                check = partial(check_value, state, proposal)
                yield FieldRow(proposal, number, enabled, check, typed)
            yield MemoryBar(id="memory")
            batch_note = Static("", id="batch-note", classes="note", markup=False)
            batch_note.display = False  # shown once a typed batch changes the effective batch
            yield batch_note
            yield Static("", id="estimate")
            yield DiffView(id="step-diff")
        yield KeyBar()

    def on_mount(self) -> None:
        """Show the estimate and the diff of the defaults; the focus on the first toggle."""
        self.refresh_preview()
        self.query(Tick).first().focus()

    def progress(self) -> str:
        """``Step 5 of 11 · Lighter samples``, saying which steps it jumped over and why."""
        steps = self.state.rollback_steps()
        text = f"Step {self.index + 1} of {len(steps)} · {self.step.title}"
        jumped = done_before(self.state, self.index)
        if jumped is not None:
            text += f" ({jumped.words()})"
        return text

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

    def used_rows(self) -> list[FieldRow]:
        """The rows whose value the step would use: the step and the row toggled on."""
        if not self.query_one("#step-on", Tick).value:
            return []
        return [row for row in self.query(FieldRow) if row.toggled]

    def invalid_rows(self) -> list[FieldRow]:
        """Rows in use whose typed value is refused."""
        return [row for row in self.used_rows() if not row.edited()[0]]

    def increases(self) -> list[tuple[FieldRow, ValueCheck]]:
        """Rows in use whose typed value is heavier than today's and not confirmed yet."""
        found = []
        for row in self.used_rows():
            check = row.check()
            if (
                check is not None
                and check.needs_confirmation
                and (row.proposal.key, check.value) not in self.confirmed
            ):
                found.append((row, check))
        return found

    def _follow_typed(self) -> None:
        """Rows that follow a typed value (the accumulation of a typed batch) show the value
        the application layer gives them; back to the proposed one when that value is no longer
        typed."""
        rows = list(self.query(FieldRow))
        typed: dict[str, Any] = {}
        for row in rows:
            valid, value = row.edited()
            if row.editable and not row.follows and valid and value is not None:
                typed[row.proposal.key] = value
        followed = followed_values(self.step, typed)
        for row in rows:
            if row.proposal.key in followed:
                row.follow(editable(followed[row.proposal.key]))
            elif row.following is not None and row.follows:
                row.follow(None)

    @on(Tick.Changed)
    @on(Input.Changed)
    def refresh_preview(self) -> None:
        """Check the typed values, recompute the memory estimate and this step's diff."""
        self._follow_typed()
        for row in self.query(FieldRow):
            row.show_check()
        choice = self.choice()
        note = effective_batch_note(self.step, choice.values) if choice.values else None
        shown = self.query_one("#batch-note", Static)
        if note is not None or shown.display:  # untouched while hidden: no reflow
            shown.update(note or "")
            shown.display = note is not None
        state = self.state
        try:
            upto = effective_choices(state, upto=self.index + 1, extra=choice)
            figure = estimate(state, upto)
            ready = step_prepared(state, upto, choice.step_id)
        except WizardError as exc:
            self.query_one("#estimate", Static).update(
                Content.styled(exc.one_line("app"), "$text-error")
            )
            return
        self.query_one("#memory", MemoryBar).show(memory_peak(state, upto))
        text = ""
        if figure.not_estimated is None:
            text = f"Activations against today's (≈): training {figure.train_pct:.0f}%"
            if figure.sample_pct is not None:
                text += f" · samples {figure.sample_pct:.0f}%"
            text += "\n"
        self.query_one("#estimate", Static).update(
            Content.assemble(text, (figure.note, "$text-muted"))
        )
        self.query_one("#step-diff", DiffView).show(ready)

    def _go_on(self, done: Callable[[], object]) -> None:
        """``done`` once every typed value in use is valid and every increase confirmed.

        A refused value blocks, with its reason on its row (and focused); a heavier value
        than today's is asked about first, and kept only when confirmed.
        """
        bad = self.invalid_rows()
        if bad:
            check = bad[0].check()
            reason = check.reason if check is not None else "not a valid value"
            self.notify(f"{bad[0].proposal.label}: {reason}", title="Check", severity="error")
            bad[0].value_input.focus()
            return
        increases = self.increases()
        if not increases:
            done()
            return

        def answered(keep: bool | None) -> None:
            if keep:
                self.confirmed.update((row.proposal.key, c.value) for row, c in increases)
                done()
            else:
                increases[0][0].value_input.focus()

        reasons = [f"{row.proposal.label}: {check.reason}" for row, check in increases]
        self.app.push_screen(ConfirmIncreaseScreen(reasons), answered)

    def unused_typed(self) -> list[FieldRow]:
        """Rows with a value the user typed that the step will not use: the step's switch,
        or the row's, is off."""
        used = set(self.used_rows())
        return [
            row
            for row in self.query(FieldRow)
            if row.editable and not row.follows and row not in used and row.edited() != (True, None)
        ]

    def _say_unused(self) -> None:
        """Say which typed values a switch that is off leaves unused (never silently)."""
        unused = self.unused_typed()
        if unused:
            rows = ", ".join(
                f"{row.proposal.label} {row.value_input.value.strip()}" for row in unused
            )
            self.notify(
                f"Typed but not used, its switch is off: {rows} (switch it on to use it)",
                title="Not used",
                severity="warning",
            )

    def action_accept(self) -> None:
        """Keep the toggles as shown and go on to the next step."""
        self._say_unused()
        self._go_on(lambda: self.dismiss(Accepted(self.choice())))

    def action_skip(self) -> None:
        """Leave this step out and go on to the next one."""
        self.dismiss(Accepted(StepChoice(self.step.id, enabled=False, skipped=True)))

    def action_back(self) -> None:
        """Back to the previous step (or the moment)."""
        self.dismiss(BACK)

    def action_save_now(self) -> None:
        """Review and save with this step as shown; the steps not decided yet at their defaults."""
        self._say_unused()
        self._go_on(lambda: self.dismiss(SaveNow(self.choice())))


def effect_label(proposal: FieldProposal) -> str:
    """What the field's box does when it is on, in words (an input follows a bare ``→``)."""
    before = show_value(proposal.before)
    if proposal.control == "bucket" and proposal.after is MISSING:
        return f"drop {proposal.label}"
    if proposal.control in ("number", "text"):
        return f"{proposal.label}: {before} →"
    return f"{proposal.label}: {before} → {show_value(proposal.after)}"
