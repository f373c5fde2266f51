"""The application service: the one entry to the application layer, for both front ends.

The use cases live in :mod:`oom_wizard.application`, one module each (opening, settling,
choosing, saving, scaling up, ``set``, ``history``, ``restore``, watching, ``run``, ``fit``,
leaving); this module re-exports their functions and the value types they hand out, each
imported on first use, so that the app (``screens``) has one module to import and importing
it costs nothing. The command line (``oom_wizard.commands``)
imports the use-case modules themselves, so that a light command (``diagnose --log``,
``--version``) loads only what it runs.

The rules that must exist once, and where they live:

- **Opening** (:func:`open_job`, ``application.opening``): a config file, an AI Toolkit job
  folder or a job of the web UI's database becomes one :class:`OpenedJob`. The GPU is probed
  when the request says so (:attr:`JobRequest.probe <wizard.request.JobRequest.probe>`, on
  unless ``--no-probe``), the same for every command and the app.
- **The change log beside the config**: read once at the open, by SHA-256 or name
  (:func:`oom_wizard.changelog.changelog_for`); a change log that cannot be read stops the
  open with its one-line error (exit status 2 on the command line, the same line on the
  app's load screen). Why refuse rather than note it and go on: the change log decides which
  steps are already done, how far a crash-again goes and what the scale-up gives back, and a
  save appends to it. Going on without it would plan from a wrong history and then fail (or
  fork the history) at the save; the user's file is left as it is, to fix or move.
- **Settling** (:func:`settle`, ``application.settling``): the user's :class:`Answers` (any
  field may be unsaid) with the log, the config and the probe give one diagnosis, one moment
  (answer, else the log, else :data:`~wizard.vocabulary.DEFAULT_MOMENT`), one model kind
  (answer, else :func:`oom_wizard.modelkind.find_model_kind`, else image), and one plan.
- **Recording** (:func:`save`, :func:`save_scale_up`): one run of the change log whose
  ``steps`` are the steps that changed a field (:func:`recorded_steps`); a step that was
  switched on but changed nothing is not recorded as applied.

The app owns one :class:`WizardState`; every function returns a new one. The functions that
read or write files or the database run in the app's worker threads.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names as the type checker sees them; at run time, __getattr__
    from oom_wizard.application.choosing import (
        Jumped,
        StepStatus,
        answer,
        changes,
        check_value,
        choose,
        default_choice,
        default_choices,
        done_before,
        dropped_line,
        effective_batch_note,
        effective_choices,
        estimate,
        fix_names,
        fix_steps_words,
        fix_summary,
        fix_words,
        followed_values,
        given,
        in_walk,
        memory_peak,
        optional_line,
        optional_steps,
        prepared,
        preselect_fix,
        proposed_step,
        recorded_steps,
        resume_of,
        step_prepared,
        step_status,
        validation_choice,
        validation_note,
        walk_steps,
    )
    from oom_wizard.application.editing import prepare_edit
    from oom_wizard.application.fitting import (
        Card,
        CardSource,
        FitFix,
        FitReport,
        fit,
        fit_fix,
        job_memory,
        probed_card,
    )
    from oom_wizard.application.follow import (
        JobRow,
        LiveJob,
        LiveStatus,
        LiveUpdate,
        WatchTarget,
        read_job_row,
    )
    from oom_wizard.application.history import change_why, later_lines
    from oom_wizard.application.labels import arch_label, moment_info, ui_hint
    from oom_wizard.application.leaving import (
        RUN_LOG_SUFFIX,
        LeavingSummary,
        crashed_job_note,
        db_job_arguments,
        leaving_summary,
        new_job_name_problem,
        new_job_warning,
        reopen_command,
        run_command,
        run_command_for,
        run_log_for,
        source_words,
        ui_job_instructions,
        ui_job_note,
    )
    from oom_wizard.application.opening import (
        LOG_SUFFIXES,
        OpenedJob,
        edited_words,
        list_jobs,
        open_job,
        picker_folder,
    )
    from oom_wizard.application.preferences import (
        keymap_problems_line,
        remember_theme,
        saved_keymap,
        saved_theme,
    )
    from oom_wizard.application.saving import (
        Destination,
        FileTarget,
        Saved,
        ToFile,
        default_file_output,
        default_file_target,
        file_target,
        save,
    )
    from oom_wizard.application.scale_up import (
        next_scale_up,
        nothing_left,
        pending_scale_ups,
        prepare_scale_up,
        save_scale_up,
        scale_up_notes,
        scale_up_prediction,
        scale_ups_ahead,
    )
    from oom_wizard.application.settling import (
        VALIDATION_STEP,
        Dropped,
        EnvironmentVerdict,
        LastRun,
        RetryAnswer,
        RunEnding,
        Settled,
        Source,
        WizardState,
        advice_for,
        card_of,
        crash_figures,
        environment_verdict,
        last_run,
        memory_calibration,
        retry_answer,
        retry_crashed,
        settle,
        start,
    )
    from oom_wizard.application.watching import (
        CrashReport,
        diagnose_crash,
        first_step,
        offers_save_now,
        request_save_now,
        save_now_question,
        warm_up,
    )
    from oom_wizard.catalog import MomentInfo
    from oom_wizard.changelog import ChangeEntry, ChangeLog, EditedSinceSave, changelog_path_for
    from oom_wizard.changes import Prepared
    from oom_wizard.diagnosis import Answers, Diagnosis
    from oom_wizard.document import JobDocument
    from oom_wizard.jobdb import AsNew, DbJob, DbSaveResult, InPlace, SaveMode
    from oom_wizard.logread import ScanCancelled, Watch, watching
    from oom_wizard.memory import Band, Calibration, JobMemory, Parts, Prediction, Verdict
    from oom_wizard.paths import MISSING, format_path
    from oom_wizard.plan import (
        FieldProposal,
        MemoryEstimate,
        Plan,
        ScaleUp,
        StepChoice,
        StepProposal,
    )
    from oom_wizard.probe import probe_gpu, read_host_memory
    from oom_wizard.request import JobRequest
    from oom_wizard.save import SaveResult
    from oom_wizard.settings import SettingProblem, UserKeymap
    from oom_wizard.sizing import FIX_WORDS, FixName, MemoryPeak
    from oom_wizard.values import ValueCheck

#: Where each name comes from. A name is imported when first asked for
#: (``from oom_wizard.service import Plan``), so importing the service loads nothing of the
#: domain, and the app's first frame or a light command loads only the modules it uses.
_SOURCES: dict[str, tuple[str, ...]] = {
    "oom_wizard.application.choosing": (
        "Jumped",
        "StepStatus",
        "answer",
        "changes",
        "check_value",
        "choose",
        "default_choice",
        "default_choices",
        "done_before",
        "dropped_line",
        "effective_batch_note",
        "effective_choices",
        "estimate",
        "fix_names",
        "fix_steps_words",
        "fix_summary",
        "fix_words",
        "followed_values",
        "given",
        "in_walk",
        "memory_peak",
        "optional_line",
        "optional_steps",
        "prepared",
        "preselect_fix",
        "proposed_step",
        "recorded_steps",
        "resume_of",
        "step_prepared",
        "step_status",
        "validation_choice",
        "validation_note",
        "walk_steps",
    ),
    "oom_wizard.application.editing": ("prepare_edit",),
    "oom_wizard.application.fitting": (
        "Card",
        "CardSource",
        "FitFix",
        "FitReport",
        "fit",
        "fit_fix",
        "job_memory",
        "probed_card",
    ),
    "oom_wizard.application.follow": (
        "JobRow",
        "LiveJob",
        "LiveStatus",
        "LiveUpdate",
        "WatchTarget",
        "read_job_row",
    ),
    "oom_wizard.application.history": (
        "change_why",
        "later_lines",
    ),
    "oom_wizard.application.labels": (
        "arch_label",
        "moment_info",
        "ui_hint",
    ),
    "oom_wizard.application.leaving": (
        "RUN_LOG_SUFFIX",
        "LeavingSummary",
        "crashed_job_note",
        "db_job_arguments",
        "leaving_summary",
        "new_job_name_problem",
        "new_job_warning",
        "reopen_command",
        "run_command",
        "run_command_for",
        "run_log_for",
        "source_words",
        "ui_job_instructions",
        "ui_job_note",
    ),
    "oom_wizard.application.opening": (
        "LOG_SUFFIXES",
        "OpenedJob",
        "edited_words",
        "list_jobs",
        "open_job",
        "picker_folder",
    ),
    "oom_wizard.application.preferences": (
        "keymap_problems_line",
        "remember_theme",
        "saved_keymap",
        "saved_theme",
    ),
    "oom_wizard.application.saving": (
        "Destination",
        "FileTarget",
        "Saved",
        "ToFile",
        "default_file_output",
        "default_file_target",
        "file_target",
        "save",
    ),
    "oom_wizard.application.scale_up": (
        "next_scale_up",
        "nothing_left",
        "pending_scale_ups",
        "prepare_scale_up",
        "save_scale_up",
        "scale_up_notes",
        "scale_up_prediction",
        "scale_ups_ahead",
    ),
    "oom_wizard.application.settling": (
        "VALIDATION_STEP",
        "Dropped",
        "EnvironmentVerdict",
        "LastRun",
        "RetryAnswer",
        "RunEnding",
        "Settled",
        "Source",
        "WizardState",
        "advice_for",
        "card_of",
        "crash_figures",
        "environment_verdict",
        "last_run",
        "memory_calibration",
        "retry_answer",
        "retry_crashed",
        "settle",
        "start",
    ),
    "oom_wizard.application.watching": (
        "CrashReport",
        "diagnose_crash",
        "first_step",
        "offers_save_now",
        "request_save_now",
        "save_now_question",
        "warm_up",
    ),
    "oom_wizard.catalog": ("MomentInfo",),
    "oom_wizard.changelog": (
        "ChangeEntry",
        "ChangeLog",
        "EditedSinceSave",
        "changelog_path_for",
    ),
    "oom_wizard.changes": ("Prepared",),
    "oom_wizard.diagnosis": (
        "Answers",
        "Diagnosis",
    ),
    "oom_wizard.document": ("JobDocument",),
    "oom_wizard.jobdb": (
        "AsNew",
        "DbJob",
        "DbSaveResult",
        "InPlace",
        "SaveMode",
    ),
    "oom_wizard.logread": (
        "ScanCancelled",
        "Watch",
        "watching",
    ),
    "oom_wizard.memory": (
        "Band",
        "Calibration",
        "JobMemory",
        "Parts",
        "Prediction",
        "Verdict",
    ),
    "oom_wizard.paths": (
        "MISSING",
        "format_path",
    ),
    "oom_wizard.plan": (
        "FieldProposal",
        "MemoryEstimate",
        "Plan",
        "ScaleUp",
        "StepChoice",
        "StepProposal",
    ),
    "oom_wizard.probe": (
        "probe_gpu",
        "read_host_memory",
    ),
    "oom_wizard.request": ("JobRequest",),
    "oom_wizard.save": ("SaveResult",),
    "oom_wizard.settings": (
        "SettingProblem",
        "UserKeymap",
    ),
    "oom_wizard.sizing": (
        "FIX_WORDS",
        "FixName",
        "MemoryPeak",
    ),
    "oom_wizard.values": ("ValueCheck",),
}
_SOURCE_OF = {name: module for module, names in _SOURCES.items() for name in names}


def __getattr__(name: str) -> Any:
    """A re-exported name, imported from its module on first use (PEP 562)."""
    module = _SOURCE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "FIX_WORDS",
    "LOG_SUFFIXES",
    "MISSING",
    "RUN_LOG_SUFFIX",
    "VALIDATION_STEP",
    "Answers",
    "AsNew",
    "Band",
    "Calibration",
    "Card",
    "CardSource",
    "ChangeEntry",
    "ChangeLog",
    "CrashReport",
    "DbJob",
    "DbSaveResult",
    "Destination",
    "Diagnosis",
    "Dropped",
    "EditedSinceSave",
    "EnvironmentVerdict",
    "FieldProposal",
    "FileTarget",
    "FitFix",
    "FitReport",
    "FixName",
    "InPlace",
    "JobDocument",
    "JobMemory",
    "JobRequest",
    "JobRow",
    "Jumped",
    "LastRun",
    "LeavingSummary",
    "LiveJob",
    "LiveStatus",
    "LiveUpdate",
    "MemoryEstimate",
    "MemoryPeak",
    "MomentInfo",
    "OpenedJob",
    "Parts",
    "Plan",
    "Prediction",
    "Prepared",
    "RetryAnswer",
    "RunEnding",
    "SaveMode",
    "SaveResult",
    "Saved",
    "ScaleUp",
    "ScanCancelled",
    "SettingProblem",
    "Settled",
    "Source",
    "StepChoice",
    "StepProposal",
    "StepStatus",
    "ToFile",
    "UserKeymap",
    "ValueCheck",
    "Verdict",
    "Watch",
    "WatchTarget",
    "WizardState",
    "advice_for",
    "answer",
    "arch_label",
    "card_of",
    "change_why",
    "changelog_path_for",
    "changes",
    "check_value",
    "choose",
    "crash_figures",
    "crashed_job_note",
    "db_job_arguments",
    "default_choice",
    "default_choices",
    "default_file_output",
    "default_file_target",
    "diagnose_crash",
    "done_before",
    "dropped_line",
    "edited_words",
    "effective_batch_note",
    "effective_choices",
    "environment_verdict",
    "estimate",
    "file_target",
    "first_step",
    "fit",
    "fit_fix",
    "fix_names",
    "fix_steps_words",
    "fix_summary",
    "fix_words",
    "followed_values",
    "format_path",
    "given",
    "in_walk",
    "job_memory",
    "keymap_problems_line",
    "last_run",
    "later_lines",
    "leaving_summary",
    "list_jobs",
    "memory_calibration",
    "memory_peak",
    "moment_info",
    "new_job_name_problem",
    "new_job_warning",
    "next_scale_up",
    "nothing_left",
    "offers_save_now",
    "open_job",
    "optional_line",
    "optional_steps",
    "pending_scale_ups",
    "picker_folder",
    "prepare_edit",
    "prepare_scale_up",
    "prepared",
    "preselect_fix",
    "probe_gpu",
    "probed_card",
    "proposed_step",
    "read_host_memory",
    "read_job_row",
    "recorded_steps",
    "remember_theme",
    "reopen_command",
    "request_save_now",
    "resume_of",
    "retry_answer",
    "retry_crashed",
    "run_command",
    "run_command_for",
    "run_log_for",
    "save",
    "save_now_question",
    "save_scale_up",
    "saved_keymap",
    "saved_theme",
    "scale_up_notes",
    "scale_up_prediction",
    "scale_ups_ahead",
    "settle",
    "source_words",
    "start",
    "step_prepared",
    "step_status",
    "ui_hint",
    "ui_job_instructions",
    "ui_job_note",
    "validation_choice",
    "validation_note",
    "walk_steps",
    "warm_up",
    "watching",
]
