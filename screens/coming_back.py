"""Coming back: the config is our own output. Did the retry run?"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Header, Static
from textual.widgets.option_list import Option

from oom_wizard.application.settling import retry_answer
from oom_wizard.screens.base import BACK, CRASHED, RAN, Back, StageScreen
from oom_wizard.screens.changes import change_line
from oom_wizard.screens.widgets import KeyBar, MarkedOptionList
from oom_wizard.spelling import direction


class ComingBackScreen(StageScreen[str | Back]):
    """Shows what the last run changed and asks whether the retry trained through."""

    BINDINGS = [  # noqa: RUF012
        Binding("enter", "next", "Next", priority=True, id="coming_back.next"),
        Binding("escape", "back", "Back", id="coming_back.back"),
    ]

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="body"):
            yield Static("Welcome back. Did the retry run?", classes="title")
            yield Static(self._last_changes(), id="last")
            yield Static(retry_answer(self.state).evidence, id="evidence", markup=False)
            yield MarkedOptionList(
                Option("Yes: it trained without running out of memory", id=RAN),
                Option("No: it ran out of memory again", id=CRASHED),
                id="answer-list",
                compact=True,
            )
        yield KeyBar()

    def on_mount(self) -> None:
        """Focus the question, its answer preselected from the log (Yes only for a retry
        that finished or is training; without a word from the log, none: Enter asks)."""
        ran = retry_answer(self.state).ran
        answers = self.query_one("#answer-list", MarkedOptionList)
        # Nothing preselected without a word from the log: a guess would read as one.
        answers.highlighted = None if ran is None else 1 if ran is False else 0
        answers.focus()

    def _last_changes(self) -> Content:
        """The changes of the change log's last run, one line each."""
        log = self.state.changelog
        assert log is not None
        index = len(log.runs) - 1
        run = log.runs[index]
        lines = [
            Content.assemble(
                ("Last time ", "bold"),
                f"({direction(run.direction)}, {run.at}) the wizard changed:",
            )
        ]
        lines.extend(Content(f"  {change_line(entry)}") for entry in log.changes_of_run(index))
        return Content("\n").join(lines)

    def action_next(self) -> None:
        """Yes: scale up one step. No: a new diagnosis that knows what changed last."""
        highlighted = self.query_one("#answer-list", MarkedOptionList).highlighted_option
        if highlighted is None:
            self.notify("Pick Yes or No first (↑/↓): no log says how the retry went.")
            return
        self.dismiss(RAN if highlighted.id == RAN else CRASHED)

    def action_back(self) -> None:
        """Back to the loaded job."""
        self.dismiss(BACK)
