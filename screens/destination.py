"""Where a fix is saved: a new config file, or (for a web-UI job) its row or a new job.

One widget for the review and the scale-up screens. A config file is always saved as a
new file beside it. A job of AI Toolkit's jobs database offers three places: update the
job itself, a new job like the UI's Clone (its name editable; empty takes the name the
database picks), or a config file. The database takes neither while the job runs (or is
stopping or queued): both are then greyed out, the reason is shown, and the file remains.
"""

from __future__ import annotations

from typing import Final

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from oom_wizard.application.leaving import (
    crashed_job_note,
    new_job_name_problem,
    new_job_name_taken,
    new_job_warning,
)
from oom_wizard.application.saving import Destination, FileTarget, default_file_target, file_target
from oom_wizard.application.settling import WizardState
from oom_wizard.errors import WizardError
from oom_wizard.screens.widgets import MarkedOptionList, PlainInput
from oom_wizard.storage.jobdb import AsNew, InPlace

IN_PLACE: Final = "in-place"
AS_NEW: Final = "as-new"
TO_FILE: Final = "to-file"


class DestinationPicker(Vertical):
    """The save's destination, as the user set it."""

    DEFAULT_CSS = """
    DestinationPicker {
        height: auto;
        & > #file-rows {
            height: auto;
        }
    }
    """

    def __init__(self, state: WizardState, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.state = state
        #: The change-log path this widget filled in itself (beside the output); while the
        #: field still shows it, the change log follows the output.
        self._default = default_file_target(state)
        self._derived_changelog = str(self._default.changelog)

    def compose(self) -> ComposeResult:
        job = self.state.db_job
        if job is not None:
            busy = job.busy_reason()
            yield MarkedOptionList(
                Option(
                    f"Update job '{job.name}' (oom-wizard restore undoes it)",
                    id=IN_PLACE,
                    disabled=busy is not None,
                ),
                Option(
                    "Save as a new job, like the UI's Clone", id=AS_NEW, disabled=busy is not None
                ),
                Option("Save a config file (for run.py, or to paste into the UI)", id=TO_FILE),
                id="where",
                compact=True,
            )
            if busy is not None:
                yield Static(f"Not now: {busy}", id="busy", classes="note")
            crashed = crashed_job_note(self.state)
            if crashed is not None:
                yield Static(crashed, id="crashed", classes="note", markup=False)
            with Horizontal(classes="path-row", id="name-row"):
                yield Static("New name")
                yield PlainInput(
                    placeholder=f"{job.name}_oomfix, or the next free name",
                    id="new-name",
                    compact=True,
                )
            yield Static(
                new_job_warning(self.state) or "", id="new-job-note", classes="note", markup=False
            )
        output = self._default.output
        with Vertical(id="file-rows"):
            with Horizontal(classes="path-row"):
                yield Static("Save as")
                yield PlainInput(str(output), id="output", compact=True)
            yield _reason("output-reason")
            with Horizontal(classes="path-row"):
                yield Static("Change log")
                yield PlainInput(self._derived_changelog, id="changelog", compact=True)
            yield _reason("changelog-reason")

    def on_mount(self) -> None:
        """For a database job: the first place that is open, focused."""
        if self.state.db_job is None:
            return
        where = self.query_one("#where", MarkedOptionList)
        first = TO_FILE if self.state.db_job.busy_reason() else IN_PLACE
        where.highlighted = where.get_option_index(first)
        where.focus()
        self._show_fields(self.choice)

    @property
    def choice(self) -> str:
        """``IN_PLACE``, ``AS_NEW`` or ``TO_FILE``."""
        if self.state.db_job is None:
            return TO_FILE
        highlighted = self.query_one("#where", MarkedOptionList).highlighted_option
        return highlighted.id or TO_FILE if highlighted is not None else TO_FILE

    def destination(self) -> Destination | None:
        """Where the save goes, as the widgets show it now (None: a file name is refused,
        and its row says why)."""
        choice = self.choice
        if choice == IN_PLACE:
            return InPlace()
        if choice == AS_NEW:
            return AsNew(self.query_one("#new-name", Input).value.strip() or None)
        return self.file_target().destination

    def typed(self) -> tuple[str, str]:
        """The file fields as the user typed them (Save as, Change log; the change log empty
        while it follows Save as, so that its following is no edit of the user's)."""
        changelog = self.query_one("#changelog", Input).value
        followed = changelog.strip() == self._derived_changelog
        return self.query_one("#output", Input).value, "" if followed else changelog

    def file_target(self) -> FileTarget:
        """The file fields, checked by the application layer.

        The change log goes beside the output unless the user typed one of their own: read
        that way, the destination does not depend on whether the change-log field has caught
        up with an edit of the output field yet.
        """
        typed = self.query_one("#changelog", Input).value.strip()
        changelog = None if typed == self._derived_changelog else typed
        return file_target(self.state, self.query_one("#output", Input).value, changelog)

    def show_reasons(self) -> FileTarget:
        """Each file field's refusal on its row (none: the rows are hidden); the check."""
        target = self.file_target()
        for selector, reason in zip(
            ("#output-reason", "#changelog-reason"), target.reasons("app"), strict=True
        ):
            row = self.query_one(selector, Static)
            row.update(f"✗ {reason}" if reason else "")
            row.display = reason is not None
        return target

    @on(OptionList.OptionHighlighted, "#where")
    def _where_changed(self, event: OptionList.OptionHighlighted) -> None:
        self._show_fields(event.option.id or TO_FILE)

    def _show_fields(self, choice: str) -> None:
        """The new job's name for a new job, the file paths for a file; nothing else."""
        self.query_one("#name-row").display = choice == AS_NEW
        self.query_one("#new-job-note").display = choice == AS_NEW
        self.query_one("#file-rows").display = choice == TO_FILE

    @on(Input.Changed, "#new-name")
    def _new_name_changed(self, event: Input.Changed) -> None:
        """A name AI Toolkit could not use (a path, a control character) says why on its row;
        saving it is refused with the same line."""
        problem = new_job_name_problem(event.value)
        note = self.query_one("#new-job-note", Static)
        note.update(f"Not this name: {problem}" if problem else new_job_warning(self.state) or "")
        if problem is None and event.value.strip():
            self._check_taken(event.value)

    @work(thread=True, exclusive=True, group="name-taken", exit_on_error=False)
    def _check_taken(self, name: str) -> None:
        """Whether a job or a job folder has the name already (the database is read off the
        screen's thread); said on the row as it is typed, not only on Save."""
        try:
            taken = new_job_name_taken(self.state, name)
        except WizardError:
            return  # the save says it, in its one line
        if taken is not None:
            self.app.call_from_thread(self._say_taken, name, taken)

    def _say_taken(self, name: str, taken: str) -> None:
        if self.query_one("#new-name", Input).value == name:
            self.query_one("#new-job-note", Static).update(f"Not this name: {taken}")

    @on(Input.Changed, "#output")
    def _output_changed(self, event: Input.Changed) -> None:
        """Keep the change log beside the output (emptied with it, while the output is no
        file name); the reasons."""
        changelog = self.query_one("#changelog", Input)
        beside = file_target(self.state, event.value, None).changelog_beside
        if changelog.value.strip() == self._derived_changelog:
            # It follows the output as typed, refused or not: never a stale name.
            self._derived_changelog = str(beside) if beside is not None else ""
            changelog.value = self._derived_changelog
        self.show_reasons()

    @on(Input.Changed, "#changelog")
    def _changelog_changed(self) -> None:
        self.show_reasons()


def _reason(id: str) -> Static:
    """A file field's refusal, under its row (hidden while there is none)."""
    reason = Static("", id=id, classes="field-reason refused", markup=False)
    reason.display = False
    return reason
