"""Stage 5, Result: where the new config is, how to run it, and how to scale up later."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Footer, Header, Static

from screens.base import StageScreen
from screens.widgets import show_value
from wizard.changes import Prepared
from wizard.presets import load_presets
from wizard.save import SaveResult


class ResultScreen(StageScreen):
    """The saved files, the command (or the UI clicks) to retry, the scale-up order."""

    BINDINGS = [  # noqa: RUF012
        Binding("enter", "app.quit", "Done", priority=True),
    ]

    def __init__(self, result: SaveResult, prepared: Prepared, *, scale_up: bool) -> None:
        super().__init__()
        self.result = result
        self.ready = prepared
        self.scale_up = scale_up

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="body"):
            title = "Saved: the next retry gets one setting back" if self.scale_up else "Saved"
            yield Static(title, classes="title")
            yield Static(self._files(), id="files")
            yield Static("How to retry", classes="section")
            yield Static(self._how_to_run(), id="run")
            yield Static("What changed", classes="section")
            yield Static(self._changes(), id="changes")
            yield Static("Later, when a retry trains through", classes="section")
            yield Static(self._scale_up_order(), id="later")
        yield Footer()

    def _files(self) -> Content:
        return Content.assemble(
            ("Config      ", "bold"),
            str(self.result.config),
            "\n",
            ("Change log  ", "bold"),
            str(self.result.changelog),
        )

    def _how_to_run(self) -> Content:
        if self.wizard.require_state().ui_job:
            return Content(
                "This job comes from AI Toolkit's web UI, which rewrites .job_config.json "
                "on every start. Open the job in the UI, change the fields below (each says "
                "where), or paste the new config under Show Advanced; then start the job."
            )
        return Content.assemble(
            "From AI Toolkit's folder:\n",
            (f"  python run.py {self.result.config}", "bold $text-accent"),
        )

    def _changes(self) -> Content:
        presets = load_presets()
        lines: list[Content] = []
        for entry in self.ready.entries:
            before = "(absent)" if entry.before is None else show_value(entry.before)
            after = "(removed)" if entry.after is None else show_value(entry.after)
            hint = presets.ui_hint(entry.path)
            row = Content.assemble(f"{entry.path}: {before} → {after}")
            if hint:
                row = Content.assemble(row, (f"  (UI: {hint})", "$text-muted"))
            lines.append(row)
        return Content("\n").join(lines)

    def _scale_up_order(self) -> Content:
        presets = load_presets()
        applied = {entry.step for entry in self.ready.entries}
        lines = [
            Content("Run `oom-wizard` on the new config; it gives back one setting per retry:")
        ]
        number = 0
        for step_id in presets.scale_up_order:
            if step_id not in applied:
                continue
            number += 1
            lines.append(Content(f"  {number}. {presets.step(step_id).restore}"))
        if number == 0:
            lines.append(Content.styled("  nothing to give back: no step was rolled back", "dim"))
        return Content("\n").join(lines)
