"""What one log shows about its last run: the immutable values a scan returns.

:class:`LogScan` is the whole answer (phase, signals, evidence, the OOM message's figures, the
training bar's progress and rate, skip banners); :func:`log_still_written` is the one rule for
which of a job folder's logs to read (a retry still being written is passed over).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

from oom_wizard.logs.signals import STEP_SIGNALS, DataFrame, Phase, Signal


@dataclass(frozen=True)
class EvidenceLine:
    """One line of the log that supports a finding.

    Attributes:
        line: 1-based line number, counted on ``\\n`` as an editor shows it.
        text: The segment's text (ANSI codes removed, shortened past ``EVIDENCE_CHARS``).
        tag: What it shows: a signal name, or ``phase``, ``bar``, ``error``, ``exception``,
            ``exit``, ``frame``, ``host_copy``, ``resume``, ``stopped``.
    """

    line: int
    text: str
    tag: str


@dataclass(frozen=True)
class OtherProcess:
    """Another process on the GPU, as PyTorch's message lists it."""

    pid: int | None
    gib: float


@dataclass(frozen=True)
class OomFigures:
    """The numbers of PyTorch's out-of-memory message, in GiB (None when not given).

    Attributes:
        form: ``current`` (``GPU 0 has a total capacity of …``) or ``legacy``
            (``(GPU 0; X total capacity; Y already allocated; Z free; W reserved …)``).
        gpu: The device index.
        tried: The allocation that failed.
        total: The card's capacity as PyTorch sees it; for a capped process (``N GiB
            allowed``), its allowance, which is the card it has.
        free: Free on the card at that moment (for a capped process, within its allowance).
        capacity: The physical card, when the process was capped below it (else None).
        this_process: Everything this process held, PyTorch's and CUDA's own.
        allocated: Memory in live tensors.
        reserved: Reserved by PyTorch's caching allocator (legacy form).
        reserved_unallocated: Reserved by PyTorch but holding no tensor (fragmentation);
            in the legacy form, reserved minus allocated.
        other_processes: Other processes on the card and what each held.
        line: Where the message is.
        this_process_inferred: The message named no process as "this process" (PyTorch
            could not match its own PID, as in a container); ``this_process`` is the listed
            process whose memory covers what PyTorch itself held (:func:`own_process`).
    """

    form: Literal["current", "legacy"]
    gpu: int | None = None
    tried: float | None = None
    total: float | None = None
    free: float | None = None
    capacity: float | None = None
    this_process: float | None = None
    allocated: float | None = None
    reserved: float | None = None
    reserved_unallocated: float | None = None
    other_processes: tuple[OtherProcess, ...] = ()
    line: int = 0
    this_process_inferred: bool = False

    @property
    def others_total(self) -> float:
        """GiB held by the other processes the message lists."""
        return sum(p.gib for p in self.other_processes)


@dataclass(frozen=True)
class SkipBanner:
    """``# OOM during training step, skipping batch k/3 #``, and the bar's step at that moment."""

    line: int
    attempt: int
    step: int | None


@dataclass(frozen=True)
class LogScan:
    """What one log shows about its last run.

    Attributes:
        source: The file read, if any.
        phase: Where the run was when it ended: the traceback's frames when they say, else
            the last phase line or bar.
        marker_phase: The phase from the toolkit's own lines and bars only.
        frame_phase: The phase the failing traceback's frames point to, if they do.
        phase_line: The line that set ``phase``.
        signals: What the run shows, in :data:`SIGNALS` order.
        oom: The last allocator message's numbers.
        skips: The last skip banners (``skip_count`` counts them all).
        last_step: The last training step the log shows (bar, save or sample line): the bar's
            ``n``, i.e. steps completed.
        total_steps: ``total`` of the training bar.
        first_step: The training bar's first value in this run (> 0 after a resume).
        training_started: Whether a training bar appeared in this run.
        crashed: The run ends in a failure (an error, an OOM, a kill), not in progress.
        stopped: The user stopped the job.
        resumed: The run continued an earlier one.
        run_count: Runs in the file; the fields describe the last.
        run_start_line: Where the last run starts.
        header_seen: The last run starts with a run header (not a truncated or pasted log).
        line_count: Lines in the file.
        exception: The last ``SomeError: message`` line of the run.
        exit_code: The exit status the log reports, if any.
        job_ended: The trainer said its job failed as its process ended (``job_ends``).
        host_copy: The failing traceback copies between GPU and pinned host memory.
        cpu_copy: The failing traceback moves tensors to the CPU (``cpu_target``).
        data_frame: The failing traceback's outermost frame of data loading (``data_frames``):
            a DataLoader worker starting, or a batch fetched in the training loop.
        evidence: Lines that support the findings, in file order.
        finished: The run says it finished (a final result line, a training bar at its total).
        ends_open: The run just stops: it progressed, then no error, no stop and no finish sign
            (a stall, a kill from outside, or a pasted excerpt).
        excerpt: The training bar was first seen past step 0 with hours of elapsed time: the
            log starts in the middle of a run, which is not a resume.
        spill_step: The training step at which the bar's s/it grew ``SPILL_FACTOR``-fold over
            its stable stretch (``sysmem_spill``).
        stall_line: The bar stuck at no progress the log stops on (``stall``).
        modified: The log file's modification time (seconds since the epoch), if a file.
        config_dump: The memory fields (``config_fields``) of the process config the run
            printed at its start: (path relative to the process, value).
        job_name: The job the run's banner names (AI Toolkit's ``# Running job: NAME``, its
            ``config.name``), if the log shows it.
        job_id: The id of the web-UI job the run printed (``Job ID: "…"``), if any.
        host_pressure_line: The last line that shows the host's RAM as the limit (Colab's
            huge-allocation warnings, a Colab runtime's paths: ``host_pressure``).
        sample_first: The launch command in the log makes a sample come first.
        best_rate: The training bar's fastest step after its first, in seconds per step.
        failure_whole: The run is failing and its failure has been printed whole: the
            traceback's error line was read, and no traceback was opened after it.
        frame_hint: Where the phase came from only a hint of the failing traceback's frames
            (``hint`` rules: attention, which training and sampling both run), that phase;
            ``frame_phase`` is then None.
    """

    source: str | None
    phase: Phase
    marker_phase: Phase
    frame_phase: Phase | None
    phase_line: int | None
    signals: tuple[Signal, ...]
    oom: OomFigures | None
    skips: tuple[SkipBanner, ...]
    skip_count: int
    last_step: int | None
    total_steps: int | None
    first_step: int | None
    training_started: bool
    crashed: bool
    stopped: bool
    resumed: bool
    run_count: int
    run_start_line: int
    header_seen: bool
    line_count: int
    exception: EvidenceLine | None
    exit_code: int | None
    host_copy: bool
    evidence: tuple[EvidenceLine, ...]
    finished: bool = False
    ends_open: bool = False
    excerpt: bool = False
    spill_step: int | None = None
    stall_line: int | None = None
    modified: float | None = None
    config_dump: tuple[tuple[str, Any], ...] | None = None
    job_name: str | None = None
    job_id: str | None = None
    cpu_copy: bool = False
    data_frame: DataFrame | None = None
    host_pressure_line: int | None = None
    sample_first: bool = False
    best_rate: float | None = None
    job_ended: bool = False
    frame_hint: Phase | None = None
    failure_whole: bool = False

    @property
    def failure_shaped(self) -> bool:
        """The failure is one only a failing process prints: an exception line, a traceback,
        AI Toolkit's ``Error running job``, an exit line, the kernel's kill; not a message
        that any printed text may quote (a sample prompt that names an OOM). Silence after a
        failure counts as a crash only when it is shaped so."""
        return (
            self.exception is not None
            or self.exit_code is not None
            or self.has("host_oom_kill")
            or any(e.tag in ("error", "frame", "exit") for e in self.evidence)
        )

    def has(self, *signals: Signal) -> bool:
        """Whether the run shows any of ``signals``."""
        return any(s in self.signals for s in signals)

    def evidence_for(self, *tags: str) -> tuple[EvidenceLine, ...]:
        """The evidence lines with one of ``tags``."""
        return tuple(e for e in self.evidence if e.tag in tags)


#: A log modified this recently may be a retry still being written: a job folder's reading
#: passes over it for an older crash. Never a reason to tell the user the job may be running:
#: a pasted log is just as new (the diagnosis asks the web UI's status and the card's processes).
LOG_STILL_WRITTEN_S: Final = 600.0


def log_still_written(scan: LogScan, now: float) -> bool:
    """Whether the log was modified in the last :data:`LOG_STILL_WRITTEN_S` before ``now``: the
    rule for the log a job folder's reading picks (:func:`oom_wizard.storage.jobdir.choose_log`)."""
    return scan.modified is not None and now - scan.modified < LOG_STILL_WRITTEN_S


def crash_phase(scan: LogScan) -> Phase:
    """The phase a run's end is placed in: the scan's, or a training step where the log's
    only word for it is one of the trainer's own step banners (``# OOM during training step``)."""
    if scan.phase == "unknown" and scan.has(*STEP_SIGNALS):
        return "training"
    return scan.phase


def crash_step_of(done: int | None, phase: str | None) -> int | None:
    """The step a run ended in (a crash, a stall, a kill), numbered as AI Toolkit numbers
    them, from its training bar's count ``done`` and the phase it ended in: the one rule for
    the number every front end says (``diagnose``, ``plan``, ``run``, ``history``, ``watch``,
    the app).

    * ``training``: the bar counts the steps completed (AI Toolkit advances it to ``step + 1``
      after each step), so a run whose bar last read ``4/3000`` ended in step 5, the one then
      running; an OOM skip banner under ``58/3000`` is step 59's.
    * ``periodic_sample``, ``save``: they run after step ``done`` trained and before the bar
      moves on, and AI Toolkit names them by it (``Saving at step 250``, sample files
      ``…__000000250_…``, the bar still at ``250/3000``): step ``done``.
    * any other phase (loading, the baseline sample, unknown): None; no step is placed.

    Args:
        done: The training bar's last count (:attr:`LogScan.last_step`, an attempt's ``step``).
        phase: The phase it ended in (:func:`crash_phase`).
    """
    if done is None:
        return None
    if phase == "training":
        return done + 1
    if phase in ("periodic_sample", "save"):
        return done
    return None


def crash_step(scan: LogScan) -> int | None:
    """The step the log's last run ended in (:func:`crash_step_of`); None when it finished,
    or when no step was running."""
    if scan.finished:
        return None
    return crash_step_of(scan.last_step, crash_phase(scan))
