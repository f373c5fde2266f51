"""Stage 1, Load: pick the job, read it and its log, show what it is.

The job is a config file or job folder (typed, or picked in a folder tree), or a job of AI
Toolkit's jobs database (``--db``), picked from the list of its jobs.

Reading happens in a thread worker. A big log shows its progress (bytes read of the total, in
a progress bar) and Esc cancels the reading: the scanner checks the worker between two
chunks, and the screen goes back to asking for a job.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.suggester import Suggester
from textual.widget import Widget
from textual.widgets import DirectoryTree, Header, Input, Static
from textual.widgets.option_list import Option
from textual.worker import Worker, get_current_worker

from oom_wizard.errors import WizardError
from oom_wizard.screens.ask import GoOnEditedScreen
from oom_wizard.screens.base import StageScreen
from oom_wizard.screens.memory_bar import MemoryBar
from oom_wizard.screens.messages import EditedAsked, JobChosen, JobLoaded, JobsListed, LoadFailed
from oom_wizard.screens.widgets import MARKER_WIDTH, KeyBar, MarkedOptionList, PlainInput
from oom_wizard.spelling import counted, oom_figures

if TYPE_CHECKING:
    from textual.widgets import ProgressBar

    from oom_wizard.application.settling import WizardState
    from oom_wizard.request import JobRequest
    from oom_wizard.storage.jobdb import DbJob

CONFIG_SUFFIXES = (".yaml", ".yml", ".json", ".jsonc")
#: What the wizard saves beside a config: a change log, never a config to open.
CHANGELOG_SUFFIX = ".changelog.json"


def offered(path: Path) -> bool:
    """Whether the picker and the path completion offer ``path``: a folder, or a job config
    (not a change log); no hidden entries except the UI's ``.job_config.json``."""
    if path.name.startswith(".") and path.name != ".job_config.json":
        return False
    if path.is_dir():
        return True
    return path.suffix in CONFIG_SUFFIXES and not path.name.endswith(CHANGELOG_SUFFIX)


def offered_log(path: Path) -> bool:
    """Whether the picker and the log field's completion offer ``path`` as a training log
    (or a folder to find one in); no hidden entries."""
    # boundary (b): the application layer, imported after the first frame
    from oom_wizard.application.opening import LOG_SUFFIXES

    if path.name.startswith("."):
        return False
    return path.is_dir() or path.suffix in LOG_SUFFIXES


#: Column widths of the database's job list (the info column takes the rest of the line).
NAME_WIDTH, STATUS_WIDTH, STEP_WIDTH = 28, 9, 6

#: Steps of the reading progress bar over a whole log (one message to the screen per step).
PROGRESS_STEPS = 200
#: A log smaller than this is read without showing a progress bar.
PROGRESS_MIN_BYTES = 4 << 20


class LogChunksRead(Message):
    """The load worker has read ``done`` bytes of a log of ``total`` bytes."""

    def __init__(self, done: int, total: int) -> None:
        super().__init__()
        self.done = done
        self.total = total


def _megabytes(size: int) -> str:
    return f"{size / 1e6:,.0f} MB" if size >= 10**7 else f"{size / 1e6:,.1f} MB"


class PathSuggester(Suggester):
    """Completes a typed path with the first job config or folder of that name."""

    def __init__(self, *, logs: bool = False) -> None:
        super().__init__(use_cache=False, case_sensitive=True)
        self.offers = offered_log if logs else offered

    async def get_suggestion(self, value: str) -> str | None:
        """The first entry of the typed folder whose name starts with the typed tail."""
        if not value:
            return None
        typed = Path(value).expanduser()
        folder, stem = (typed, "") if value.endswith("/") else (typed.parent, typed.name)
        try:
            names = sorted(entry.name for entry in folder.iterdir() if self.offers(entry))
        except OSError:
            return None
        for name in names:
            if name.startswith(stem) and name != stem:
                return value + name[len(stem) :]
        return None


class ConfigTree(DirectoryTree):
    """A folder tree that lists folders, job configs and training logs only."""

    def filter_paths(self, paths: Any) -> list[Path]:
        """Folders, config files (no change logs) and logs, no hidden entries (see
        :func:`offered` and :func:`offered_log`)."""
        return [path for path in paths if offered(path) or offered_log(path)]


class ReadingBar(Widget):
    """The reading progress of a big log: Textual's progress bar, mounted the first time it is
    shown. A small log, nearly every one, never shows it, and the first screen is painted
    without the bar's parts or even its module."""

    DEFAULT_CSS = """
    ReadingBar {
        height: auto;
    }
    """

    _bar: ProgressBar | None = None

    def show_progress(self, done: int, total: int) -> None:
        """Show ``done`` bytes read of ``total``."""
        from textual.widgets import ProgressBar  # deferred: see above

        if self._bar is None:
            self._bar = ProgressBar(id="reading-bar", show_eta=False)
            self.mount(self._bar)
        self.display = True
        bar = self._bar
        bar.update(total=total, progress=done)


class LoadScreen(StageScreen[None]):
    """Reads the job (in a worker) and shows its memory-relevant facts."""

    BINDINGS = [  # noqa: RUF012
        Binding("enter", "next", "Next", priority=True, id="load.next"),
        Binding("escape", "cancel_reading", "Cancel reading", id="load.cancel_reading"),
        Binding("escape", "other_job", "Other job", id="load.other_job"),
    ]

    def __init__(self, request: JobRequest, *, loaded: WizardState | None = None) -> None:
        super().__init__()
        self.request = request
        self.loaded: WizardState | None = loaded
        """The job read (given: read already, by ``watch`` or ``run``)."""
        self.reader: Worker[None] | None = None
        """The worker reading a job, while it reads."""

    def compose(self) -> ComposeResult:
        request = self.request
        yield Header()
        with VerticalScroll(id="body"):
            yield Static("Load the job that ran out of memory", classes="title")
            yield Static("", id="status")
            yield ReadingBar(id="reading")
            yield Static("", id="error", classes="error")
            if request.listing:
                with Vertical(id="job-list"):
                    yield Static(_job_header(), id="job-header")
                    yield MarkedOptionList(id="jobs", compact=True)
            with Vertical(id="picker"):
                if request.asks_for_config:  # else built when the picker is first shown
                    yield from self._path_inputs()
                    yield ConfigTree(Path.cwd(), id="tree")
            yield Static("", id="summary")
            yield MemoryBar(id="memory")
        yield KeyBar()

    def _path_inputs(self) -> tuple[PlainInput, PlainInput]:
        """The picker's fields: the config, and its log (the one asked for, if any)."""
        log = self.request.log
        return (
            PlainInput(
                placeholder="a config (.yaml, .json) or an AI Toolkit job folder",
                suggester=PathSuggester(),
                id="path",
            ),
            PlainInput(
                str(log) if log is not None else "",
                placeholder="its log (optional: a job folder's log.txt is found)",
                suggester=PathSuggester(logs=True),
                id="log-path",
            ),
        )

    def _typed(self, field: str) -> str:
        """What the picker's ``field`` holds (nothing while the picker was never built)."""
        inputs = self.query(f"#{field}").results(Input)
        return next((typed.value.strip() for typed in inputs), "")

    def on_mount(self) -> None:
        """Load the job named on the command line, list the database's jobs, or ask."""
        request = self.request
        self.query_one("#picker").display = request.asks_for_config
        self.query_one("#reading").display = False
        self.query_one("#memory").display = False
        if self.loaded is not None:
            self._show_loaded(self.loaded)
        elif request.db is not None and request.job is not None:
            self.call_after_refresh(self.load_db_job, request.job)
        elif request.db is not None:
            self.query_one("#job-list").display = False
            self.query_one("#status", Static).update(f"Reading the jobs in {request.db} …")
            self._list(request.db)
        elif request.target is not None:
            self.call_after_refresh(self.load, request.target)
        else:
            self.query_one("#path", Input).focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """ "Other job" only when a database job was picked from the list."""
        if action == "other_job":
            return self.request.listing and self.loaded is not None and self.reader is None
        if action == "cancel_reading":
            return self.reader is not None
        return True

    def load(self, target: Path) -> None:
        """Read ``target`` in a worker, with the log picked (else the one asked for); the
        result arrives as a message."""
        typed = self._typed("log-path")
        log = Path(typed).expanduser() if typed else self.request.log
        self._read(str(target), replace(self.request, target=target, log=log))

    def load_db_job(self, name: str) -> None:
        """Read the database job ``name`` in a worker; the result arrives as a message."""
        self._read(f"job '{name}'", replace(self.request, job=name))

    def _read(self, what: str, request: JobRequest) -> None:
        """Say what is being read, and read it in a worker."""
        self.query_one("#error", Static).update("")
        self.query_one("#status", Static).update(f"Reading {what} …")
        self.reader = self._open(what, request)
        self.refresh_bindings()

    @work(thread=True, exclusive=True, exit_on_error=False)
    def _open(self, what: str, request: JobRequest) -> None:
        # boundary (b): the application layer, imported after the first frame
        from oom_wizard.application.settling import start_watched
        from oom_wizard.logs.read import ScanCancelled, Watch
        from oom_wizard.storage.changelog import EditedSinceSave

        worker = get_current_worker()
        watch = Watch(self._progress_poster(worker), lambda: worker.is_cancelled)
        try:
            state = start_watched(request, watch)
        except ScanCancelled:
            return  # the screen already says so (see action_cancel_reading)
        except EditedSinceSave as exc:
            message: Message = EditedAsked(edited_question(exc), exc.one_line(), what, request)
        except WizardError as exc:
            message = LoadFailed(exc.one_line("app"))
        else:
            message = JobLoaded(state)
        if not worker.is_cancelled:
            self.post_message(message)

    def _progress_poster(self, worker: Worker[None]) -> Callable[[int, int], None]:
        """A progress callback that posts :class:`LogChunksRead` about every 0.5 % of a log."""
        last = -1

        def progress(done: int, total: int) -> None:
            nonlocal last
            if total < PROGRESS_MIN_BYTES or worker.is_cancelled:
                return
            if last < 0 or done - last >= total // PROGRESS_STEPS or done >= total:
                last = done
                self.post_message(LogChunksRead(done, total))

        return progress

    @on(LogChunksRead)
    def _progressed(self, event: LogChunksRead) -> None:
        if self.reader is None:
            return  # a message of a reading that was cancelled
        self.query_one("#reading", ReadingBar).show_progress(event.done, event.total)
        self.query_one("#status", Static).update(
            f"Reading the log: {_megabytes(event.done)} of {_megabytes(event.total)} (Esc cancels)"
        )

    def action_cancel_reading(self) -> None:
        """Stop reading the job (at the next chunk of its log) and ask for a job again."""
        if self.reader is None:
            return
        self.reader.cancel()
        self._done_reading()
        if self.request.listing:
            again = "Pick a job in the list."
        elif self.request.db is not None:
            again = "Enter reads it again."
        else:
            again = "Type a job or pick one; Enter reads it."
        self.query_one("#status", Static).update(f"Reading cancelled. {again}")
        self._ask_again()

    def _done_reading(self) -> None:
        self.reader = None
        self.query_one("#reading").display = False
        self.refresh_bindings()

    def _ask_again(self) -> None:
        """Show the way to pick a job again (the database's list, or the path and tree)."""
        if self.request.listing:
            self.query_one("#job-list").display = True
            self.query_one("#jobs", MarkedOptionList).focus()
            return
        if self.request.db is not None:
            return
        path = self._show_picker()
        if not path.value and self.request.target is not None:
            path.value = str(self.request.target)
        path.focus()

    def _show_picker(self) -> Input:
        """Show the path input and the tree of the working folder; the input."""
        # boundary (b): the application layer, imported after the first frame
        from oom_wizard.application.opening import picker_folder

        picker = self.query_one("#picker")
        picker.display = True
        if not picker.query("#path"):
            picker.mount(*self._path_inputs())
        if not picker.query(ConfigTree):
            picker.mount(ConfigTree(picker_folder(self.request.target), id="tree"))
        return self.query_one("#path", Input)

    @work(thread=True, exclusive=True, exit_on_error=False)
    def _list(self, db: Path) -> None:
        # boundary (b): the application layer, imported after the first frame
        from oom_wizard.application.opening import list_jobs

        try:
            path, jobs = list_jobs(db)
        except WizardError as exc:
            self.post_message(LoadFailed(exc.one_line("app")))
        else:
            self.post_message(JobsListed(path, jobs))

    @on(JobsListed)
    def _listed(self, event: JobsListed) -> None:
        status = self.query_one("#status", Static)
        if not event.jobs:
            status.update(f"No jobs in {event.db_path}.")
            return
        status.update(f"Jobs in {event.db_path}, newest first. Enter opens the highlighted one.")
        jobs = self.query_one("#jobs", MarkedOptionList)
        jobs.add_options(Option(_job_row(job), id=job.name) for job in event.jobs)
        self.query_one("#job-list").display = True
        jobs.highlighted = 0
        jobs.focus()

    @on(JobLoaded)
    def _loaded(self, event: JobLoaded) -> None:
        self._done_reading()
        self._show_loaded(event.state)

    def _show_loaded(self, state: WizardState) -> None:
        self.loaded = state
        self.query_one("#picker").display = False
        if self.request.listing:
            self.query_one("#job-list").display = False
        self.query_one("#status", Static).update(
            Content.styled("Read. Enter: when did it crash?", "$text-success")
        )
        self.query_one("#summary", Static).update(summary(state))
        self._show_memory(state)
        self.refresh_bindings()

    @on(EditedAsked)
    def _ask_edited(self, event: EditedAsked) -> None:
        """Ask before planning from the change log of a config edited since our save."""

        self._done_reading()

        def answered(yes: bool | None) -> None:
            if yes:
                self._read(event.what, replace(event.request, edited_ok=True))
            else:
                self.post_message(LoadFailed(event.refusal))

        self.app.push_screen(GoOnEditedScreen(event.question), answered)

    def _show_memory(self, state: WizardState | None) -> None:
        """Today's peak against the card as a bar (hidden until a job is read)."""
        # boundary (b): the application layer, imported after the first frame
        from oom_wizard.application.choosing import memory_peak

        bar = self.query_one("#memory", MemoryBar)
        bar.display = state is not None
        if state is not None:
            bar.show(memory_peak(state, {}))

    @on(LoadFailed)
    def _failed(self, event: LoadFailed) -> None:
        self._done_reading()
        self.query_one("#status", Static).update("")
        self.query_one("#error", Static).update(event.error)
        self.notify(event.error, title="Cannot load", severity="error")
        if self.request.db is not None:
            return
        self._show_picker().focus()

    @on(DirectoryTree.FileSelected)
    def _picked(self, event: DirectoryTree.FileSelected) -> None:
        """A config is read (with the log picked); a log is the log of the next read."""
        if offered_log(event.path) and not offered(event.path):
            self.query_one("#log-path", Input).value = str(event.path)
            self.query_one("#status", Static).update(
                f"Log: {event.path.name}. Now pick the config (or type it; Enter reads it)."
            )
            return
        self.load(event.path)

    def action_next(self) -> None:
        """Go on when loaded; otherwise load the job highlighted, typed or selected."""
        if self.reader is not None:
            return  # reading: Esc cancels it
        if self.loaded is not None:
            self.post_message(JobChosen(self.loaded))
        elif self.request.db is not None and self.request.job is not None:
            self.load_db_job(self.request.job)
        elif self.request.listing:
            self._open_highlighted_job()
        else:
            self._open_typed_or_selected()

    def action_other_job(self) -> None:
        """Back to the database's job list, to pick another job."""
        self.loaded = None
        self.query_one("#summary", Static).update("")
        self.query_one("#memory").display = False
        self.query_one("#status", Static).update("Enter opens the highlighted job.")
        self.query_one("#job-list").display = True
        self.query_one("#jobs", MarkedOptionList).focus()
        self.refresh_bindings()

    def _open_highlighted_job(self) -> None:
        highlighted = self.query_one("#jobs", MarkedOptionList).highlighted_option
        if highlighted is not None and highlighted.id is not None:
            self.load_db_job(highlighted.id)

    def _open_typed_or_selected(self) -> None:
        typed = self._typed("path")
        if typed:
            self.load(Path(typed).expanduser())
            return
        tree = self.query_one("#tree", ConfigTree) if self.query("#tree") else None
        node = tree.cursor_node if tree is not None else None
        if tree is not None and tree.has_focus and node is not None and node.data is not None:
            path = Path(node.data.path)
            if path.is_file():
                self.load(path)
            else:
                tree.action_select_cursor()


def _job_header() -> Content:
    """The column titles of the job list (indented past the rows' highlight marker)."""
    text = (
        " " * MARKER_WIDTH
        + f"{'NAME':<{NAME_WIDTH}} {'STATUS':<{STATUS_WIDTH}} {'STEP':>{STEP_WIDTH}}  INFO"
    )
    return Content.styled(text, "bold $text-muted")


def _job_row(job: DbJob) -> Content:
    """One job as a row of the list: name, status, step and the first line of its info."""
    name = job.name if len(job.name) <= NAME_WIDTH else job.name[: NAME_WIDTH - 1] + "…"
    info = job.info.strip().splitlines()[0] if job.info.strip() else ""
    status = job.status_short  # a running row whose process is gone: crashed
    status_style = "$text-error" if status in ("error", "crashed") else ""
    return Content.assemble(
        (f"{name:<{NAME_WIDTH}} ", "bold"),
        (f"{status:<{STATUS_WIDTH}} ", status_style),
        f"{job.step:>{STEP_WIDTH}}  ",
        (info, "$text-muted"),
    )


def summary(state: WizardState) -> Content:
    """The job in a few lines: name, arch, kind, processes, datasets, the GPU figures."""
    # boundary (b): the application layer, imported after the first frame
    from oom_wizard.application.labels import arch_label
    from oom_wizard.application.leaving import ui_job_note
    from oom_wizard.application.settling import card_note, host_note

    view = state.document.view()
    ui_note = ui_job_note(state)
    lines: list[Content] = [
        *_origin_rows(state),
        *([_row("", Content.styled(ui_note, "$text-warning"))] if ui_note else []),
        _row("Log", str(state.log_path) if state.log_path else "none (answer from memory)"),
        *([_row("", state.log_note)] if state.log_note else []),
        *([_row("GPU probe", state.job.probe_note)] if state.job.probe_note else []),
        *([_row("On the card", tenants)] if (tenants := card_note(state.job)) else []),
        *([_row("Host RAM", host)] if (host := host_note(state)) else []),
        _row("Job", view.name or "(no name)"),
    ]
    for process in view.processes:
        model = state.document.get(process.path("model"), {})
        arch = arch_label(model) or str(process.model.arch or "unknown")
        lines.append(_row(f"Process {process.index}", f"{process.type} · {arch}"))
        train = process.train
        lines.append(
            _row(
                "  Training",
                f"batch {train.batch_size} · gradient checkpointing "
                f"{'on' if train.gradient_checkpointing else 'off'} · "
                f"{_count(train.steps, 'step')}",
            )
        )
        for dataset in process.datasets:
            sizes = dataset.resolution
            buckets = ", ".join(str(size) for size in sizes) if sizes else "(a placeholder)"
            frames = f" · {_count(dataset.num_frames, 'frame')}" if dataset.is_video else ""
            if dataset.auto_frame_count:
                frames = " · frames from clip length"
            lines.append(_row("  Dataset", f"{dataset.name} · buckets {buckets}{frames}"))
    lines.extend(_gpu_rows(state))
    if state.coming_back and state.changelog_path is not None:
        lines.append(_row("Change log", str(state.changelog_path)))
    return Content("\n").join(lines)


def _origin_rows(state: WizardState) -> list[Content]:
    """Where the config comes from: its file, or its row of the jobs database."""
    job = state.db_job
    if job is None:
        return [_row("Config", str(state.source))]
    rows = [
        _row("Database", str(job.db_path)),
        _row("UI job", f"{job.name} · {job.status_words} · step {job.step}"),
    ]
    if job.error:
        rows.append(_row("", Content.styled(job.error, "$text-error")))
    return rows


def _gpu_rows(state: WizardState) -> list[Content]:
    """PyTorch's memory figures from the log, and how its last run ended (a crash only when
    it crashed: the application layer says)."""
    # boundary (b): the application layer, imported after the first frame
    from oom_wizard.application.settling import last_run

    run = last_run(state)
    if state.log_diagnosis is None or run is None:
        return []
    report = state.diagnosis.to_json()
    rows: list[Content] = []
    figures = oom_figures(report.get("oom") or {})
    if figures:
        rows.extend(_field_rows("GPU", figures))
    rows.append(_row(run.label, run.where))
    return rows


#: The widest a row of fields may be: what the value column holds on an 80-column terminal
#: (the narrowest the wizard is made for), so that a line never breaks inside a field.
FIELD_ROW_WIDTH = 62


def _field_rows(label: str, fields: list[str]) -> list[Content]:
    """Fields joined with `` · `` into rows of at most :data:`FIELD_ROW_WIDTH` cells, the
    label on the first: a row breaks between two fields, never inside one."""
    lines: list[str] = []
    for field in fields:
        if lines and len(lines[-1]) + 3 + len(field) <= FIELD_ROW_WIDTH:
            lines[-1] += " · " + field
        else:
            lines.append(field)
    return [_row(label if number == 0 else "", line) for number, line in enumerate(lines)]


def _count(count: int | None, noun: str) -> str:
    """``1 step``, ``3000 steps``; a placeholder's count is unknown."""
    return counted(count, noun) if count is not None else f"{noun}s: a placeholder"


def _row(label: str, value: str | Content) -> Content:
    """One summary row: the label in bold, in a column of its own."""
    return Content.assemble((f"{label:<12}", "bold"), value)


# The domain (pydantic, the presets, the document layer) is imported inside the worker, so
# the first screen paints while it loads.


def edited_question(exc: Exception) -> str:
    """The question's text: the refusal's own line (the application layer words it)."""
    # boundary (b): the application layer, imported after the first frame
    from oom_wizard.application.opening import edited_words

    return edited_words(exc)
