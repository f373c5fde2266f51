"""Stage 2, When did it crash: the moment and the model kind, preselected from the log."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import Checkbox, Footer, Header, OptionList, RadioButton, RadioSet, Static
from textual.widgets.option_list import Option

from screens.base import StageScreen
from wizard.presets import MODEL_KINDS, MOMENTS, load_presets
from wizard.session import Answers, answer

#: How many evidence lines the screen shows (the rest are in ``diagnose``).
EVIDENCE_LINES = 6


class MomentScreen(StageScreen):
    """Asks when the job crashed and what kind of model it trains."""

    BINDINGS = [  # noqa: RUF012
        Binding("enter", "next", "Next", priority=True),
        Binding("escape", "back", "Back"),
        Binding("ctrl+t", "toggle_kind", "Image/video"),
    ]

    def compose(self) -> ComposeResult:
        state = self.state
        presets = load_presets()
        yield Header()
        with VerticalScroll(id="body"):
            yield Static("When did it crash?", classes="title")
            options = [
                Option(
                    Content.assemble(
                        (presets.moment(moment).label, "bold"),
                        " — ",
                        presets.moment(moment).words,
                    ),
                    id=moment,
                )
                for moment in MOMENTS
            ]
            yield OptionList(*options, id="moments", compact=True)
            yield Static(self._detected(), id="detected")
            yield Static(self._evidence(), id="evidence")
            with Vertical(id="answers"):
                with RadioSet(id="kind", compact=True):
                    for kind in MODEL_KINDS:
                        yield RadioButton(
                            f"{kind} model", value=kind == state.answers.model_kind, id=kind
                        )
                yield Checkbox(
                    "This exact config worked before",
                    value=state.answers.worked_before,
                    id="worked",
                    compact=True,
                )
        yield Footer()

    def on_mount(self) -> None:
        """Highlight the moment in effect and focus the list."""
        moments = self.query_one("#moments", OptionList)
        moments.highlighted = MOMENTS.index(self.state.answers.moment)
        moments.focus()

    def _detected(self) -> Content:
        diagnosis = self.state.diagnosis
        if diagnosis is None:
            return Content.styled("No log: pick what you saw.", "$text-muted")
        report: dict[str, Any] = diagnosis.to_json()
        label = load_presets().moment(report["moment"]).label if report.get("moment") else "?"
        text = f"The log points to: {label}"
        if report.get("environment_suspected"):
            text += " · the GPU itself looks suspect"
        return Content.styled(text, "$text-accent")

    def _evidence(self) -> Content:
        diagnosis = self.state.diagnosis
        if diagnosis is None:
            return Content("")
        evidence = diagnosis.to_json().get("evidence") or []
        lines = [
            Content.assemble((f"{item['line']:>6}  ", "$text-muted"), str(item["text"])[:200])
            for item in evidence[-EVIDENCE_LINES:]
        ]
        return Content("\n").join(lines)

    def chosen(self) -> Answers:
        """The answers as the widgets show them now."""
        moments = self.query_one("#moments", OptionList)
        index = moments.highlighted if moments.highlighted is not None else 0
        pressed = self.query_one("#kind", RadioSet).pressed_button
        kind = pressed.id if pressed is not None and pressed.id else self.state.answers.model_kind
        return Answers(
            moment=MOMENTS[index],
            model_kind=kind,
            worked_before=self.query_one("#worked", Checkbox).value,
        )

    def action_next(self) -> None:
        """Plan for these answers and go on."""
        self.wizard.update_state(answer(self.state, self.chosen()))
        self.wizard.show_plan()

    def action_back(self) -> None:
        """Back to the loaded job."""
        self.dismiss()

    def action_toggle_kind(self) -> None:
        """Switch between image and video."""
        current = self.chosen().model_kind
        other = MODEL_KINDS[(MODEL_KINDS.index(current) + 1) % len(MODEL_KINDS)]
        self.query_one(f"#{other}", RadioButton).value = True
