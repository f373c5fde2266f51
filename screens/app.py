"""The app: one :class:`~oom_wizard.application.settling.WizardState`, one screen per stage, one
app factory.

:func:`create_app` is the only way the command line, the tests and the snapshot harness
build the app. The app moves between stages (``show_*`` methods); the screens render the
state and hand the user's answers back through :meth:`OomWizardApp.update_state`.
"""

from __future__ import annotations

import tempfile
import traceback
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from textual import on
from textual.app import SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.theme import Theme
from textual.worker import Worker, WorkerState

from oom_wizard.application.preferences import remember_theme, saved_keymap, saved_theme
from oom_wizard.errors import error_line, is_bad_input
from oom_wizard.request import JobRequest
from oom_wizard.screens.base import CRASHED, RAN, Accepted, Back, Finished, SaveNow, StageScreen
from oom_wizard.screens.keys import apply_user_keymap
from oom_wizard.screens.messages import JobChosen, JobLoaded
from oom_wizard.screens.terminal import TerminalApp

if TYPE_CHECKING:
    from oom_wizard.application.leaving import LeavingSummary
    from oom_wizard.application.settling import WizardState
    from oom_wizard.rules.diagnosis import Answers

#: Where an app opened on a state already settled starts: the plan (the environment verdict
#: or the first step, as after the moment screen) or the review of the fix preselected.
FirstStage = Literal["plan", "review"]


class OomWizardApp(TerminalApp[int]):
    """oom-wizard: from a job that ran out of memory to a config worth retrying."""

    CSS_PATH = "app.tcss"
    TITLE = "oom-wizard"
    SUB_TITLE = "CUDA out of memory, one step at a time"
    BINDINGS = [  # noqa: RUF012 (Textual's own declaration style)
        Binding(
            "f1", "help", "Help", priority=True, tooltip="Keys and the procedure", id="app.help"
        ),
        Binding("question_mark", "help", "Help", show=False, id="app.help_alt"),
        Binding(
            "ctrl+q",
            "quit",
            "Quit",
            priority=True,
            tooltip="Asks first when choices are not saved",
            id="app.quit",
        ),
    ]

    def __init__(
        self,
        request: JobRequest,
        *,
        debug: bool = False,
        opened: WizardState | None = None,
        first: FirstStage = "plan",
        exit_on_save: bool = False,
    ) -> None:
        super().__init__()
        self.request = request
        self.trace_failures = debug
        self.state: WizardState | None = opened
        self.opened = opened
        self.first = first
        self.exit_on_save = exit_on_save
        self.finished: Finished | None = None
        """The last save that went through (``run`` reads it when the app has exited)."""
        self._saved_state: WizardState | None = None
        """The state that save was made from (leaving it drops nothing)."""

    def get_default_screen(self) -> Screen[Any]:
        """The load screen, at the bottom of the stack: every stage goes back to it, and the
        app builds no other screen before its first frame."""
        # boundary (b): stages and use cases, imported after the first frame
        from oom_wizard.screens.load import LoadScreen

        return LoadScreen(self.request, loaded=self.opened)

    def on_mount(self) -> None:
        """On the load screen (it loads the job at once when it is named), or, on a state
        already settled (``watch``, ``run``), open its first stage above it; in the theme the
        user chose last, with the keys of the user's keymap."""
        keymap = saved_keymap()
        if not keymap.empty:
            apply_user_keymap(self, keymap)
        theme = saved_theme()
        if theme is not None and theme in self.available_themes:
            self.theme = theme
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        if self.opened is not None:
            self.show_review(None) if self.first == "review" else self.show_plan()
            verdict = self.opened.diagnosis.verdict
            self.notify(verdict, title="The job crashed", timeout=12, markup=False)

    def _theme_changed(self, theme: Theme) -> None:
        """Remember the theme the user picks (the palette's "Change theme")."""
        remember_theme(theme.name)

    # --- state ---------------------------------------------------------------------------

    def require_state(self) -> WizardState:
        """The loaded state (every stage after the load screen has one)."""
        if self.state is None:
            raise RuntimeError("no job is loaded yet")
        return self.state

    # --- stages: each is pushed fresh with a callback that decides what comes next ----------

    def _stage(self, screen: Screen[Any], callback: Callable[[Any], None] | None = None) -> None:
        """Show ``screen`` as the one stage above the load screen.

        A stage that returns has already left the stack; a stage shown from the command
        palette replaces the one on top (its result is dropped, nothing stale stays). The load
        screen is the app's default screen, the bottom of the stack.
        """
        while len(self.screen_stack) > 1:
            self.pop_screen()
        self.push_screen(screen, callback)

    @on(JobLoaded)
    def _job_loaded(self, event: JobLoaded) -> None:
        """The load worker read a job: it is the state from now on (the screen shows it)."""
        self.state = event.state

    @on(JobChosen)
    def _job_chosen(self, event: JobChosen) -> None:
        """The load screen went on with a job: it is the state from now on (the same job,
        come back to: the answers and choices made since stay)."""
        if self.state is None or self.state.job is not event.state.job:
            self.state = event.state
        self.show_start()

    def show_start(self) -> None:
        """After loading: the coming-back question, or when the job crashed."""
        # boundary (b): stages and use cases, imported after the first frame
        from oom_wizard.screens.coming_back import ComingBackScreen

        if self.require_state().coming_back:
            self._stage(ComingBackScreen(), self._came_back)
        else:
            self.show_moment()

    def _came_back(self, result: str | Back | None) -> None:
        if result == RAN:
            self.show_scale_up()
        elif result == CRASHED:
            # boundary (b): stages and use cases, imported after the first frame
            from oom_wizard.application.settling import retry_crashed

            self.state = retry_crashed(self.require_state())
            self.show_moment()

    def show_moment(self) -> None:
        """When did it crash?"""
        # boundary (b): stages and use cases, imported after the first frame
        from oom_wizard.screens.moment import MomentScreen

        self._stage(MomentScreen(), self._answered)

    def _answered(self, result: Answers | Back | None) -> None:
        """New answers settle a new plan; every step screen after it is built from that plan."""
        # boundary (b): stages and use cases, imported after the first frame
        from oom_wizard.application.choosing import answer
        from oom_wizard.rules.diagnosis import Answers

        if isinstance(result, Answers):
            self.state = answer(self.require_state(), result)
            self.show_plan()
        elif self.require_state().coming_back:
            self.show_start()

    def show_plan(self) -> None:
        """After the answers: the environment verdict, or the first step to decide."""
        # boundary (b): stages and use cases, imported after the first frame
        from oom_wizard.screens.environment import EnvironmentScreen

        if self.require_state().moment == "environment":
            self._stage(EnvironmentScreen(), self._environment_answered)
        else:
            self.show_step(0)

    def _environment_answered(self, result: Answers | Back | None) -> None:
        # boundary (b): stages and use cases, imported after the first frame
        from oom_wizard.rules.diagnosis import Answers

        if isinstance(result, Answers):
            self._answered(result)
        else:
            self.show_moment()

    def show_step(self, index: int) -> None:
        """The first step of the walk at or after ``index`` (``choosing.in_walk``: not done,
        and put forward for this crash), else the review."""
        # boundary (b): stages and use cases, imported after the first frame
        from oom_wizard.application.choosing import in_walk
        from oom_wizard.screens.step import StepScreen

        state = self.require_state()
        steps = state.rollback_steps()
        while index < len(steps) and not in_walk(state, steps[index]):
            index += 1
        if index >= len(steps):
            self.show_review(None)
        else:
            step_id = steps[index].id
            self._stage(StepScreen(step_id), partial(self._stepped, step_id))

    def open_step(self, step_id: str) -> None:
        """Open one step as it is, done or not (the palette's "Step N" commands, a click on
        the step in the progress line)."""
        # boundary (b): stages and use cases, imported after the first frame
        from oom_wizard.screens.step import StepScreen

        if self.state is not None and any(s.id == step_id for s in self.state.rollback_steps()):
            self._stage(StepScreen(step_id), partial(self._stepped, step_id))

    def action_open_step(self, step_id: str) -> None:
        """The progress line's click action: :meth:`open_step`."""
        self.open_step(step_id)

    def _stepped(self, step_id: str, result: Accepted | SaveNow | Back | None) -> None:
        # boundary (b): stages and use cases, imported after the first frame
        from oom_wizard.application.choosing import choose

        state = self.require_state()
        index = state.step_index(step_id)
        if isinstance(result, Accepted | SaveNow):
            self.state = choose(state, result.choice)
        if isinstance(result, Accepted):
            self.show_step(index + 1)
        elif isinstance(result, SaveNow):
            self.show_review(index + 1)
        else:
            self._show_step_before(index)

    def _show_step_before(self, index: int) -> None:
        """The last step of the walk before ``index``, else the moment."""
        # boundary (b): stages and use cases, imported after the first frame
        from oom_wizard.application.choosing import in_walk
        from oom_wizard.screens.step import StepScreen

        state = self.require_state()
        steps = state.rollback_steps()
        for earlier in range(min(index, len(steps)) - 1, -1, -1):
            if in_walk(state, steps[earlier]):
                step_id = steps[earlier].id
                self._stage(StepScreen(step_id), partial(self._stepped, step_id))
                return
        self.show_moment()

    def show_review(self, upto: int | None) -> None:
        """The whole diff and the save: every step, at its default where undecided; Back
        goes to the last step of the walk before ``upto`` (None: the last one)."""
        # boundary (b): stages and use cases, imported after the first frame
        from oom_wizard.screens.review import ReviewScreen

        self._stage(ReviewScreen(), partial(self._reviewed, upto))

    def _reviewed(self, upto: int | None, result: Finished | Back | None) -> None:
        if isinstance(result, Finished):
            self.show_result(result)
        else:
            steps = self.require_state().rollback_steps()
            self._show_step_before(len(steps) if upto is None else upto)

    def show_result(self, finished: Finished) -> None:
        """Where the file is and what to do next (``exit_on_save``: leave with it)."""
        # boundary (b): stages and use cases, imported after the first frame
        from oom_wizard.screens.result import ResultScreen

        self.finished, self._saved_state = finished, self.state
        if self.exit_on_save:
            self.exit(0)
            return
        self._stage(ResultScreen(finished))

    def show_scale_up(self) -> None:
        """The one setting the next retry gets back."""
        # boundary (b): stages and use cases, imported after the first frame
        from oom_wizard.screens.scale_up import ScaleUpScreen

        self._stage(ScaleUpScreen(), self._scaled_up)

    def _scaled_up(self, result: Finished | Back | None) -> None:
        if isinstance(result, Finished):
            self.show_result(result)
        else:
            self.show_start()

    def save_now(self) -> None:
        """Review and save: on a step, with that step as shown (as its Ctrl+S does); every
        step not decided yet at its default."""
        # boundary (b): stages and use cases, imported after the first frame
        from oom_wizard.screens.step import StepScreen

        if isinstance(self.screen, StepScreen):
            self.screen.action_save_now()
        else:
            self.show_review(None)

    # --- leaving -----------------------------------------------------------------------------

    def leaving(self) -> LeavingSummary:
        """What the terminal keeps once the app is closed (the command line prints it)."""
        # boundary (b): stages and use cases, imported after the first frame
        from oom_wizard.application.leaving import leaving_summary

        return leaving_summary(self.state, self.finished.saved if self.finished else None)

    @property
    def unsaved_choices(self) -> bool:
        """Whether leaving now drops choices: a step was decided, or a step or the review is
        on screen, since the last save (or with none)."""
        # boundary (b): stages and use cases, imported after the first frame
        from oom_wizard.screens.review import ReviewScreen
        from oom_wizard.screens.step import StepScreen

        state = self.state
        if state is None or state is self._saved_state:
            return False
        on_screen = any(isinstance(s, StepScreen | ReviewScreen) for s in self.screen_stack)
        return bool(state.choices) or on_screen

    async def action_quit(self) -> None:
        """Quit; with choices not saved, ask first (a second Ctrl+Q leaves)."""
        # boundary (b): stages and use cases, imported after the first frame
        from oom_wizard.application.leaving import source_words
        from oom_wizard.screens.ask import LeaveScreen

        if isinstance(self.screen, LeaveScreen) or not self.unsaved_choices:
            self.exit()
            return
        self.push_screen(LeaveScreen(source_words(self.require_state())), self._leave_answered)

    def _leave_answered(self, leave: bool | None) -> None:
        if leave:
            self.exit()

    def action_help(self) -> None:
        """Keys and the procedure, over the current screen."""
        # boundary (b): stages and use cases, imported after the first frame
        from oom_wizard.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen))

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
        # boundary (b): stages and use cases, imported after the first frame
        from oom_wizard.application.choosing import step_status

        for number, step in enumerate(self.state.rollback_steps(), start=1):
            status = step_status(self.state, step).replace("unavailable", "not for this model")
            yield SystemCommand(
                f"Step {number}: {step.title} ({status})",
                "Open this step, even when it is already done (its optional rows)",
                partial(self.open_step, step.id),
            )
        yield SystemCommand(
            "Stage: review and save",
            "Save now, as Ctrl+S on a step does (every step not decided at its default)",
            self.save_now,
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
        line = error_line(error, "app")
        if self.trace_failures:
            line += f" (traceback in {self._write_traceback(error)})"
        screen = self.screen
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
    probe: bool = True,
    debug: bool = False,
    opened: WizardState | None = None,
    first: FirstStage = "plan",
    exit_on_save: bool = False,
) -> OomWizardApp:
    """The app, for the command line, the tests and the snapshots.

    The arguments are the fields of :class:`~oom_wizard.request.JobRequest` (a string is a path);
    none at all asks for a config in the app. ``debug`` writes the traceback of a failed
    worker to a log file that the error line names.

    ``opened`` is a job already opened and settled (``watch`` and ``run`` have diagnosed the
    crash): the app starts on ``first`` instead of reading it again. ``exit_on_save`` leaves
    the app after a save (``run`` runs the saved config next) instead of showing the result.
    """
    if opened is not None:
        row = opened.db_job
        request = JobRequest(
            target=opened.source if row is None else None,
            log=opened.log_path,
            db=row.db_path if row is not None else None,
            job=row.name if row is not None else None,
            probe=False,
        )
    else:
        request = JobRequest(_path(target), _path(log), _path(db), job, probe)
    return OomWizardApp(request, debug=debug, opened=opened, first=first, exit_on_save=exit_on_save)


def _path(value: Path | str | None) -> Path | None:
    """``value`` as a path (None stays None)."""
    return Path(value) if value is not None else None
