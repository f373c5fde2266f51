"""The environment verdict: the GPU or the worker is the problem, not the config."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Header, Static
from textual.widgets.option_list import Option

from oom_wizard.application.labels import moment_info
from oom_wizard.application.settling import environment_verdict
from oom_wizard.rules.diagnosis import Answers
from oom_wizard.screens.base import BACK, Back, StageScreen
from oom_wizard.screens.widgets import KeyBar, MarkedOptionList
from oom_wizard.vocabulary import DEFAULT_MOMENT, MOMENTS

CONFIG_MOMENTS = tuple(moment for moment in MOMENTS if moment != "environment")


class EnvironmentScreen(StageScreen[Answers | Back]):
    """Why the config is not the problem, what to check, and a way to go on anyway."""

    BINDINGS = [  # noqa: RUF012
        Binding("enter", "go_on", "Go on anyway", priority=True, id="environment.go_on"),
        Binding("escape", "back", "Back", id="environment.back"),
    ]

    def compose(self) -> ComposeResult:
        state = self.state
        verdict = environment_verdict(state)
        yield Header()
        with VerticalScroll(id="body"):
            yield Static(verdict.title, classes="title", id="verdict")
            yield Static(verdict.why, classes="why", id="cause")
            reasons = "\n".join(f"• {reason}" for reason in verdict.reasons)
            yield Static(reasons, id="reasons", markup=False)
            yield Static(
                Content.styled(
                    "Don't keep retrying the same config: it will fail the same way.", "bold"
                ),
                classes="note",
            )
            yield Static("Or go on anyway, as if it crashed:", classes="section")
            yield MarkedOptionList(
                *(Option(moment_info(m).label, id=m) for m in CONFIG_MOMENTS),
                id="go-on",
                compact=True,
            )
            yield Static("What to check before any retry", classes="section")
            checks = [f"• {check}" for check in state.plan.environment_checks]
            yield Static("\n".join(checks), id="checks", markup=False)
        yield KeyBar()

    def on_mount(self) -> None:
        """Preselect the likeliest config moment."""
        options = self.query_one("#go-on", MarkedOptionList)
        options.highlighted = CONFIG_MOMENTS.index(DEFAULT_MOMENT)
        options.focus()

    def action_go_on(self) -> None:
        """Roll the config back anyway, for the moment highlighted."""
        highlighted = self.query_one("#go-on", MarkedOptionList).highlighted_option
        chosen = highlighted.id if highlighted is not None else None
        moment = next((m for m in MOMENTS if m == chosen), DEFAULT_MOMENT)
        current = self.state
        self.dismiss(Answers(moment, current.model_kind, current.answers.worked_before))

    def action_back(self) -> None:
        """Back to when it crashed."""
        self.dismiss(BACK)
