"""Stage 5, Result: where the fix is, how to run it, and how to scale up later."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Header, Static

from oom_wizard.application.history import later_lines
from oom_wizard.application.labels import ui_hint
from oom_wizard.application.leaving import db_job_arguments, run_command, ui_job_instructions
from oom_wizard.screens.base import Finished, StageScreen
from oom_wizard.screens.changes import change_line
from oom_wizard.screens.widgets import KeyBar
from oom_wizard.storage.changelog import ChangeEntry
from oom_wizard.storage.jobdb import DbSaveResult


class ResultScreen(StageScreen[None]):
    """The saved files or job, the command (or the UI clicks) to retry, the scale-up order."""

    BINDINGS = [  # noqa: RUF012
        Binding("enter", "app.quit", "Done", priority=True, id="result.done"),
        Binding("c", "copy_command", "Copy command", id="result.copy_command"),
    ]

    def __init__(self, finished: Finished) -> None:
        super().__init__()
        self.finished = finished
        self.result = finished.saved
        self.ready = finished.ready
        self.scale_up = finished.scale_up

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="body"):
            title = "Saved: the next retry gets one setting back" if self.scale_up else "Saved"
            yield Static(title, classes="title")
            yield Static(self._saved(), id="files")
            yield Static("How to retry", classes="section")
            yield Static(self._how_to_run(), id="run")
            yield Static("What changed", classes="section")
            yield Static(self._changes(), id="changes")
            yield Static("Later, when a retry trains through", classes="section")
            yield Static(self._scale_up_order(), id="later")
        yield KeyBar()

    @property
    def entries(self) -> tuple[ChangeEntry, ...]:
        """The changes written (a new job's also renames it)."""
        if isinstance(self.result, DbSaveResult):
            return self.result.entries
        return self.ready.entries

    def _saved(self) -> Content:
        result = self.result
        if not isinstance(result, DbSaveResult):
            return Content.assemble(
                ("Config      ", "bold"),
                str(result.config),
                "\n",
                ("Change log  ", "bold"),
                str(result.changelog),
            )
        how = (
            "updated in place"
            if result.in_place
            else f"a new job, a copy of '{result.origin_name}'"
        )
        return Content.assemble(
            ("UI job      ", "bold"),
            f"{result.job_name} ({how})",
            "\n",
            ("Database    ", "bold"),
            str(result.db_path),
            "\n",
            ("Change log  ", "bold"),
            str(result.changelog),
        )

    def _how_to_run(self) -> Content:
        result = self.result
        if isinstance(result, DbSaveResult):
            lines = [Content.styled(result.next_step(), "bold $text-accent")]
            if result.in_place:
                lines.append(Content(f"To undo it: oom-wizard restore {db_job_arguments(result)}"))
            return Content("\n").join(lines)
        command = self.run_command
        if command is None:
            return Content(ui_job_instructions())
        return Content.assemble(
            "From AI Toolkit's folder (c copies the command; -l keeps a log for the next crash):\n",
            (f"  {command}", "bold $text-accent"),
        )

    @property
    def run_command(self) -> str | None:
        """``python run.py CONFIG -l LOG`` for a saved config file (None for a UI job): the
        application layer's, which the terminal keeps when the wizard closes."""
        return run_command(self.state, self.result)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Offer "copy" only when there is a command to copy."""
        return action != "copy_command" or self.run_command is not None

    def action_copy_command(self) -> None:
        """Put the run command on the clipboard (through the terminal)."""
        if self.run_command is not None:
            self.app.copy_to_clipboard(self.run_command)
            self.notify(self.run_command, title="Copied")

    def _changes(self) -> Content:
        lines: list[Content] = []
        for entry in self.entries:
            hint = ui_hint(entry.path, self.state.document)
            row = Content(change_line(entry))
            if hint:
                row = Content.assemble(row, (f"  (UI: {hint})", "$text-muted"))
            lines.append(row)
        return Content("\n").join(lines)

    def _scale_up_order(self) -> Content:
        """The settings offered back, in the scale-up's order, and where it stops: the list
        ``history`` prints (the first is what ``scale-up`` offers next)."""
        later = self.finished.later
        lines = [Content(f"Run {self._reopen()}; it gives back one setting per retry:")]
        lines.extend(Content(line) for line in later_lines(later.ahead))
        if later.stopped is not None:
            stops = "then it stops before: " if later.ahead else "none offered; "  # history's
            lines.append(Content.styled(f"  {stops}{later.stopped}", "dim"))
        elif not later.ahead:
            lines.append(Content.styled("  nothing to give back: no step was rolled back", "dim"))
        return Content("\n").join(lines)

    def _reopen(self) -> str:
        """How to open the fix again, to scale it up."""
        result = self.result
        if isinstance(result, DbSaveResult):
            return f"`oom-wizard {db_job_arguments(result)}`"
        return "`oom-wizard` on the new config"
