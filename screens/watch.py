"""``oom-wizard watch``: the live screen beside a running job.

It polls the job's log (:func:`oom_wizard.application.follow.follow_log`) a few times a second
and shows the job and its phase, step/total and the time left, the s/it trend as a sparkline,
the OOM skips and the other warnings as they come, and the GPU (from ``nvidia-smi``, when it
is there) and host RAM. When the run crashes it diagnoses the crash
(``oom_wizard.application.watching.diagnose_crash``: the job
opened on its log and settled, as the wizard opens it) and, for an out-of-memory crash of a job with
a config, leaves at once with that state: the command then opens the wizard on it, on the first
change (Esc there goes back to the moment, Ctrl+Q quits). Any other crash, or a log without its
config, shows the verdict on the crash panel (Enter still opens the wizard when there is a config).
It never writes anything of the job's, except, for a web-UI job whose log shows trouble and only
after a yes, the row's ``save_now`` (key ``s``: the UI's "save a checkpoint now", so that a retry
resumes from there). Its readings of the GPU, by the phase the log was in, leave with it
(:class:`WatchResult`): the command keeps them in the job's change log
(:func:`~oom_wizard.application.watching.keep_readings`).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.css.query import NoMatches
from textual.widgets import Header, Log, Sparkline, Static
from textual.worker import get_current_worker

from oom_wizard.application.follow import JobRow, WatchTarget, follow_log, read_job_row
from oom_wizard.application.settling import WizardState
from oom_wizard.application.watching import (
    CrashReport,
    MachineLook,
    Readings,
    diagnose_crash,
    look_at_machine,
    offers_save_now,
    request_save_now,
    save_now_question,
    warm_up,
)
from oom_wizard.errors import WizardError
from oom_wizard.logs.tail import LiveStatus, LiveUpdate
from oom_wizard.screens.ask import SaveNowScreen
from oom_wizard.screens.keys import apply_user_keymap
from oom_wizard.screens.terminal import TerminalApp
from oom_wizard.screens.widgets import KeyBar
from oom_wizard.spelling import counted, rate_axes

POLL_S = 0.1
"""Seconds between two reads of the log."""
PROBE_S = 5.0
"""Seconds between two looks at the GPU."""
SWITCH_S = 0.0005
"""The interpreter's thread switch interval while the live screen runs (Python's is 5 ms)."""
YIELD_S = 0.0
"""Seconds the reading worker sleeps after each piece it scanned (the screen runs then)."""
ROW_S = 2.0
"""Seconds between two reads of a web-UI job's row."""


@dataclass(frozen=True)
class WatchResult:
    """How the live screen was left: to open the wizard on the crash, or just quit.

    Attributes:
        open_wizard: Open the wizard on the job.
        state: The job opened on the crash, diagnosed and settled: the wizard starts on it
            (None: the wizard opens the job itself, from its load screen).
        readings: What ``nvidia-smi`` showed, by the phase the log was in.
        status: The log's last status (None: never read).
    """

    open_wizard: bool
    state: WizardState | None = None
    readings: Readings = field(default_factory=Readings)
    status: LiveStatus | None = None


class WatchApp(TerminalApp[WatchResult]):
    """The live screen (see the module docstring)."""

    TITLE = "oom-wizard watch"
    CSS = """
    #job { text-style: bold; }
    #progress, #gpu { height: auto; }
    #rates { height: 3; }
    #rates-x { margin: 0 0 1 0; }
    .axis { color: $text-muted; }
    #warnings { height: 1fr; border: round $warning; }
    #crash { height: auto; border: heavy $error; display: none; padding: 0 1; }
    #crash.shown { display: block; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open_wizard", "Open the wizard", show=False, id="watch.open_wizard"),
        Binding("s", "save_now", "Save a checkpoint now", id="watch.save_now"),
        Binding("q", "quit_watch", "Quit", id="watch.quit"),
    ]

    def __init__(
        self,
        target: WatchTarget,
        *,
        poll_s: float = POLL_S,
        probe: bool = True,
        stall_s: float | None = None,
    ) -> None:
        super().__init__()
        self.target = target
        self.log_path = target.log
        self.job_name = target.name
        self.poll_s = poll_s
        self.probe = probe
        self.live = (
            follow_log(target.log, between=_let_others_run)
            if stall_s is None
            else follow_log(target.log, stall_s=stall_s, between=_let_others_run)
        )
        self.crash: CrashReport | None = None
        self.diagnosing = False
        self._shown = ""
        self._rates: tuple[tuple[float, ...], int | None] = ((), None)
        #: The log showed trouble (a warning: a spill, a stall, a skipped OOM batch).
        self.troubled = False
        self._switch_interval = sys.getswitchinterval()
        #: Set when the screen goes: the reading worker stops at once, not after its sleep.
        self._leaving = threading.Event()
        #: What nvidia-smi showed, by the log's phase at each reading.
        self.readings = Readings()
        self.status: LiveStatus | None = None

    def compose(self) -> ComposeResult:
        """Header, the job, progress, sparkline, warnings, GPU, and the crash panel."""
        yield Header()
        with Vertical():
            yield Static(f"Job {self.job_name} · log {self.log_path}", id="job", markup=False)
            yield Static("Waiting for the log to appear…", id="progress", markup=False)
            yield Static("", id="rates-y", classes="axis", markup=False)
            yield Sparkline([], id="rates")
            yield Static("", id="rates-x", classes="axis", markup=False)
            yield Log(id="warnings", highlight=False)
            yield Static("", id="row", markup=False)
            yield Static("", id="gpu", markup=False)
            yield Static("", id="crash", markup=False)
        yield KeyBar()

    def on_mount(self) -> None:
        """Start following the log in a thread (and polling the GPU); make the crash's
        diagnosis ready meanwhile (with the keys of the user's keymap)."""

        apply_user_keymap(self)
        self.query_one("#warnings", Log).border_title = "Warnings"
        # The reading worker is busy in Python code; the screen's thread, waiting for the
        # interpreter at each await, gets it back within this interval rather than 5 ms.
        self._switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(SWITCH_S)
        self.run_worker(self._follow, thread=True, group="follow")
        self.run_worker(self._warm_up, thread=True, group="warm-up")
        if self.probe:
            self.set_interval(PROBE_S, self.look_at_gpu)
            self.look_at_gpu()
        if self.target.db is not None:
            self.set_interval(ROW_S, self.read_row)
            self.read_row()

    def read_row(self) -> None:
        """Read the web-UI job's row (read-only, one short read) in a thread."""
        self.run_worker(self._row, thread=True, exclusive=True, group="row")

    def _row(self) -> None:

        assert self.target.db is not None and self.target.job is not None
        row = read_job_row(self.target.db, self.target.job)
        if row is not None:
            self._from_thread(self._show, "#row", row_text(row))

    def _follow(self) -> None:
        """Read the log in this thread (the screen answers keys meanwhile) and hand each poll
        to the screen; a poll that read a full share reads again at once."""
        worker = get_current_worker()
        while not worker.is_cancelled and not self._leaving.is_set():
            update = self.live.poll()
            self._from_thread(self.show_update, update)
            if not self.live.busy:
                self._leaving.wait(self.poll_s)

    def show_update(self, update: LiveUpdate) -> None:
        """Show one poll of the log (nothing once the screen is gone)."""
        try:
            warnings = self.query_one("#warnings", Log)
        except NoMatches:  # a last poll while the app shuts down
            return
        for text in update.warnings:
            warnings.write_line(f"⚠ {text}")
        if (update.warnings or update.status.skip_count) and not self.troubled:
            self.troubled = True
            self.refresh_bindings()
        status = update.status
        self.status = status
        phase = self.readings.phase
        self.readings = self.readings.saw(status)
        if self.probe and self.readings.phase not in (None, phase):
            self.look_at_gpu()  # a reading in every phase, however short
        shown = progress_text(status)
        if shown != self._shown:  # repaint only what changed: a busy log costs little
            self._shown = shown
            self.query_one("#progress", Static).update(shown)
        # A full window of equal readings is the same tuple: the newest reading's step tells
        # a new one (the caption names it).
        if status.rates and (status.rates, status.rate_step) != self._rates:
            self._rates = (status.rates, status.rate_step)
            self.query_one("#rates", Sparkline).data = list(status.rates)
            y_axis, x_axis = rate_axes(status.rates, step=status.rate_step)
            self.query_one("#rates-y", Static).update(y_axis)
            self.query_one("#rates-x", Static).update(x_axis)
        if status.crashed and self.crash is None and not self.diagnosing:
            self.diagnosing = True
            log = status.crash_log or self.target.log
            self.run_worker(
                lambda: self._diagnose(replace(self.target, log=log)),
                thread=True,
                exclusive=True,
                group="diagnose",
            )

    def _warm_up(self) -> None:
        """Read the presets and the log markers while the job runs: the crash's diagnosis
        then starts without that wait."""
        warm_up()

    def _diagnose(self, target: WatchTarget) -> None:

        try:
            report = diagnose_crash(target)
        except WizardError as exc:
            report = CrashReport(f"The job crashed ({exc.one_line()})", None, None)
        self._from_thread(self.show_crash, report)

    def show_crash(self, report: CrashReport) -> None:
        """The crash, diagnosed, and the first change; an out-of-memory crash leaves for the
        wizard at once, any other waits for Enter."""
        self.crash = report
        if report.state is not None and report.moment is not None:
            self.leave(open_wizard=True, state=report.state)
            return
        lines = [f"CRASHED: {report.verdict}"]
        if report.certainty:
            lines.append(report.certainty)
        if report.first_change:
            lines.append(f"First change: {report.first_change}")
        if self.target.can_open_wizard:
            lines.append("Enter: open the wizard on this crash · q: quit")
        panel = self.query_one("#crash", Static)
        panel.update("\n".join(lines))
        panel.add_class("shown")

    def look_at_gpu(self) -> None:
        """Poll nvidia-smi and /proc/meminfo in a thread (it can take a moment)."""
        self.run_worker(self._probe, thread=True, exclusive=True, group="probe")

    def _probe(self) -> None:
        self._from_thread(self._took, look_at_machine())

    def _took(self, look: MachineLook) -> None:
        """Show one look at the machine, and keep it as a reading of the log's phase."""
        self._show("#gpu", look.line)
        self.readings = self.readings.read(look)

    def _from_thread(self, callback: Callable[..., object], *args: object) -> None:
        """Run ``callback`` on the app's thread; dropped when the app is already gone."""
        with contextlib.suppress(RuntimeError):
            self.call_from_thread(callback, *args)

    def _show(self, selector: str, text: str) -> None:
        with contextlib.suppress(NoMatches):
            self.query_one(selector, Static).update(text)

    def action_open_wizard(self) -> None:
        """Leave, asking the command to open the wizard on the crash."""
        if self.crash is not None and self.target.can_open_wizard:
            self.leave(open_wizard=True)

    def leave(self, *, open_wizard: bool, state: WizardState | None = None) -> None:
        """Leave with the readings and the log's last status."""
        self.exit(WatchResult(open_wizard, state, self.readings, self.status))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """``s`` only for a web-UI job whose log showed trouble."""
        if action == "save_now":
            return offers_save_now(self.target, troubled=self.troubled)
        return True

    def action_save_now(self) -> None:
        """Ask first; on yes, set the row's ``save_now`` (in a thread) and say what happened."""

        def answered(yes: bool | None) -> None:
            if yes:
                self.run_worker(self._save_now, thread=True, exclusive=True, group="save-now")

        self.push_screen(SaveNowScreen(save_now_question(self.target)), answered)

    def _save_now(self) -> None:

        try:
            line, failed = request_save_now(self.target), False
        except WizardError as exc:
            line, failed = exc.one_line(), True
        self._from_thread(self._said, line, failed)

    def _said(self, line: str, failed: bool) -> None:
        """The save-now answer: what was asked, or why nothing was written."""
        title = "Not saved" if failed else "Save now"
        self.notify(line, title=title, severity="error" if failed else "information")

    def on_unmount(self) -> None:
        """Stop the reading worker; give the interpreter its switch interval back."""
        self._leaving.set()
        sys.setswitchinterval(self._switch_interval)

    def action_quit_watch(self) -> None:
        """Leave."""
        self.leave(open_wizard=False)


def _let_others_run() -> None:
    """Between two pieces of the log read in the worker: the screen's thread takes the
    interpreter at once (a thread busy in C code keeps it for up to the switch interval)."""
    time.sleep(YIELD_S)


def row_text(row: JobRow) -> str:
    """``UI job: running · step 250 · Training``; after an error, ``last saved at step 250``."""
    info = row.info.strip().splitlines()[0] if row.info.strip() else ""
    return f"UI job: {row.status} · {row.step_words}" + (f" · {info}" if info else "")


def progress_text(status: LiveStatus) -> str:
    """``Phase training · step 250/3000 · 1.73 s/it · 1:19:20 left · 2 OOM skips``."""
    if status.refused is not None:
        return f"Not following the log: {status.refused}"
    if status.waiting:
        return "Waiting for the log to appear…"
    parts = [f"Phase {status.phase.replace('_', ' ')}"]
    if status.crashed and status.crash_step is not None:
        total = f" of {status.total}" if status.total else ""
        parts.append(f"crashed in step {status.crash_step}{total}")
    elif status.step is not None:
        total = f"/{status.total}" if status.total else ""
        parts.append(f"step {status.step}{total}")
    if status.seconds_per_step is not None:
        parts.append(f"{status.seconds_per_step:.2f} s/it")
    if status.left and not status.ended:
        parts.append(f"{status.left} left")
    if status.skip_count:
        parts.append(counted(status.skip_count, "OOM skip"))
    if status.crashed:
        if status.crash_step is None:  # else said with its step, above
            parts.append("crashed")
    elif status.failing:
        parts.append("error printed: waiting to see whether the job goes on")
    elif status.stopped:
        parts.append("stopped")
    elif status.ended:
        parts.append("finished")
    return " · ".join(parts)
