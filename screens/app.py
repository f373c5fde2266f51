"""The app: one :class:`~wizard.session.WizardState`, one screen per stage, one app factory.

:func:`create_app` is the only way the command line, the tests and the snapshot harness
build the app. The app moves between stages (``show_*`` methods); the screens render the
state and hand the user's answers back through :meth:`OomWizardApp.update_state`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.worker import Worker, WorkerState

if TYPE_CHECKING:
    from wizard.changes import Prepared
    from wizard.request import JobRequest
    from wizard.session import Saved, WizardState


class OomWizardApp(App[int]):
    """oom-wizard: from a job that ran out of memory to a config worth retrying."""

    CSS_PATH = "app.tcss"
    TITLE = "oom-wizard"
    SUB_TITLE = "CUDA out of memory, one step at a time"
    BINDINGS = [  # noqa: RUF012 (Textual's own declaration style)
        Binding("f1", "help", "Help", priority=True, tooltip="Keys and the procedure"),
        Binding("question_mark", "help", "Help", show=False),
        Binding("ctrl+q", "quit", "Quit", priority=True),
    ]

    def __init__(self, request: JobRequest, *, debug: bool = False) -> None:
        super().__init__()
        self.request = request
        self.trace_failures = debug
        self.state: WizardState | None = None

    def on_mount(self) -> None:
        """Open on the load screen (which loads the job at once when it is named)."""
        from screens.load import LoadScreen

        self.push_screen(LoadScreen(self.request))

    # --- state --------------------------------------------------------------------------

    def require_state(self) -> WizardState:
        """The loaded state (every stage after the load screen has one)."""
        if self.state is None:
            raise RuntimeError("no job is loaded yet")
        return self.state

    def update_state(self, state: WizardState) -> None:
        """Replace the state with the one a screen computed."""
        self.state = state

    # --- stages ---------------------------------------------------------------------------

    def show_start(self) -> None:
        """After loading: the coming-back question, or when the job crashed."""
        from screens.coming_back import ComingBackScreen
        from screens.moment import MomentScreen

        state = self.require_state()
        self.push_screen(ComingBackScreen() if state.coming_back else MomentScreen())

    def show_moment(self) -> None:
        """When did it crash?"""
        from screens.moment import MomentScreen

        self.push_screen(MomentScreen())

    def show_plan(self) -> None:
        """After the answers: the environment verdict, or the first step to decide."""
        from screens.environment import EnvironmentScreen

        state = self.require_state()
        if state.answers.moment == "environment":
            self.push_screen(EnvironmentScreen())
        else:
            self.show_step(0)

    def show_step(self, index: int) -> None:
        """The first step at or after ``index`` that is not satisfied yet, else the review."""
        from screens.step import StepScreen

        steps = self.require_state().rollback_steps()
        while index < len(steps) and steps[index].satisfied:
            index += 1
        if index >= len(steps):
            self.show_review(None)
        else:
            self.push_screen(StepScreen(index))

    def show_review(self, upto: int | None) -> None:
        """The whole diff and the save; ``upto`` steps count (None: all, with defaults)."""
        from screens.review import ReviewScreen

        self.push_screen(ReviewScreen(upto))

    def show_result(self, result: Saved, prepared: Prepared, *, scale_up: bool) -> None:
        """Where the file is and what to do next."""
        from screens.result import ResultScreen

        self.push_screen(ResultScreen(result, prepared, scale_up=scale_up))

    def show_scale_up(self) -> None:
        """The one setting the next retry gets back."""
        from screens.scale_up import ScaleUpScreen

        self.push_screen(ScaleUpScreen())

    def action_help(self) -> None:
        """Keys and the procedure, over the current screen."""
        from screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    # --- the command palette ---------------------------------------------------------------

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        """The stages, beside Textual's own commands (themes, keys, quit)."""
        yield from super().get_system_commands(screen)
        yield SystemCommand("Help", "Keys and the roll-back procedure", self.action_help)
        if self.state is None:
            return
        yield SystemCommand(
            "Stage: when did it crash?", "Change the moment or the model kind", self.show_moment
        )
        yield SystemCommand(
            "Stage: first step", "Walk the roll-back from its first step", lambda: self.show_step(0)
        )
        yield SystemCommand(
            "Stage: review and save",
            "Save with the choices made so far (the rest at their defaults)",
            lambda: self.show_review(None),
        )
        if self.state.coming_back:
            yield SystemCommand(
                "Stage: scale up", "Give the next retry one setting back", self.show_scale_up
            )

    # --- the one place worker errors are shown ------------------------------------------------

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The app's own workers; the stages forward theirs (the event does not bubble)."""
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            self.report_failure(event.worker.error)

    def report_failure(self, error: BaseException) -> None:
        """A worker failed: show the line the command line would print, on the stage too.

        With ``--debug`` the traceback goes to a log file, which the line names.
        """
        from wizard.cli import error_line, is_bad_input

        line = error_line(error)
        if self.trace_failures:
            line += f" (traceback in {self._write_traceback(error)})"
        screen = self.screen
        from screens.base import StageScreen

        if isinstance(screen, StageScreen):
            screen.show_failure(line)
        self.notify(
            line,
            title="Refused" if is_bad_input(error) else "Something went wrong",
            severity="error",
            timeout=15,
            markup=False,
        )

    def _write_traceback(self, error: BaseException) -> Path:
        import tempfile
        import traceback

        handle, name = tempfile.mkstemp(prefix="oom-wizard-debug-", suffix=".log")
        with open(handle, "w", encoding="utf-8") as stream:
            stream.write("".join(traceback.format_exception(error)))
        return Path(name)


def create_app(
    target: Path | str | None = None,
    *,
    log: Path | str | None = None,
    db: Path | str | None = None,
    job: str | None = None,
    debug: bool = False,
) -> OomWizardApp:
    """The app, for the command line, the tests and the snapshots.

    The arguments are the fields of :class:`~wizard.request.JobRequest` (a string is a path);
    none at all asks for a config in the app. ``debug`` writes the traceback of a failed
    worker to a log file that the error line names.
    """
    from wizard.request import JobRequest

    return OomWizardApp(JobRequest(_path(target), _path(log), _path(db), job), debug=debug)


def _path(value: Path | str | None) -> Path | None:
    """``value`` as a path (None stays None)."""
    return Path(value) if value is not None else None
