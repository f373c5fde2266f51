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
  (:func:`oom_wizard.storage.changelog.changelog_for`); a change log that cannot be read stops the
  open with its one-line error (exit status 2 on the command line, the same line on the
  app's load screen). Why refuse rather than note it and go on: the change log decides which
  steps are already done, how far a crash-again goes and what the scale-up gives back, and a
  save appends to it. Going on without it would plan from a wrong history and then fail (or
  fork the history) at the save; the user's file is left as it is, to fix or move.
- **Settling** (:func:`settle`, ``application.settling``): the user's :class:`Answers` (any
  field may be unsaid) with the log, the config and the probe give one diagnosis, one moment
  (answer, else the log, else :data:`~oom_wizard.vocabulary.DEFAULT_MOMENT`), one model kind
  (answer, else :func:`oom_wizard.rules.modelkind.find_model_kind`, else image), and one plan.
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
        Jumped as Jumped,
        Review as Review,
        StepStatus as StepStatus,
        answer as answer,
        changes as changes,
        check_value as check_value,
        choose as choose,
        default_choice as default_choice,
        default_choices as default_choices,
        done_before as done_before,
        dropped_line as dropped_line,
        effective_batch_note as effective_batch_note,
        effective_choices as effective_choices,
        estimate as estimate,
        fix_names as fix_names,
        fix_steps_words as fix_steps_words,
        fix_summary as fix_summary,
        fix_words as fix_words,
        followed_values as followed_values,
        in_walk as in_walk,
        memory_peak as memory_peak,
        optional_line as optional_line,
        optional_steps as optional_steps,
        prepared as prepared,
        preselect_fix as preselect_fix,
        proposed_step as proposed_step,
        recorded_steps as recorded_steps,
        resume_of as resume_of,
        review as review,
        step_prepared as step_prepared,
        step_status as step_status,
        validation_choice as validation_choice,
        validation_note as validation_note,
        walk_steps as walk_steps,
    )
    from oom_wizard.application.editing import prepare_edit as prepare_edit
    from oom_wizard.application.fitting import (
        Card as Card,
        CardSource as CardSource,
        FitFix as FitFix,
        FitReport as FitReport,
        fit as fit,
        fit_fix as fit_fix,
        job_memory as job_memory,
        probed_card as probed_card,
    )
    from oom_wizard.application.follow import (
        JobRow as JobRow,
        LiveJob as LiveJob,
        LiveStatus as LiveStatus,
        LiveUpdate as LiveUpdate,
        WatchTarget as WatchTarget,
        read_job_row as read_job_row,
    )
    from oom_wizard.application.history import change_why as change_why, later_lines as later_lines
    from oom_wizard.application.labels import (
        LogClaim as LogClaim,
        arch_label as arch_label,
        log_claim as log_claim,
        moment_info as moment_info,
        ui_hint as ui_hint,
    )
    from oom_wizard.application.leaving import (
        RUN_LOG_SUFFIX as RUN_LOG_SUFFIX,
        LeavingSummary as LeavingSummary,
        crashed_job_note as crashed_job_note,
        db_job_arguments as db_job_arguments,
        leaving_summary as leaving_summary,
        new_job_name_problem as new_job_name_problem,
        new_job_name_taken as new_job_name_taken,
        new_job_warning as new_job_warning,
        reopen_command as reopen_command,
        run_command as run_command,
        run_command_for as run_command_for,
        run_log_for as run_log_for,
        source_words as source_words,
        ui_job_instructions as ui_job_instructions,
        ui_job_note as ui_job_note,
    )
    from oom_wizard.application.opening import (
        LOG_SUFFIXES as LOG_SUFFIXES,
        OpenedJob as OpenedJob,
        edited_words as edited_words,
        list_jobs as list_jobs,
        open_job as open_job,
        picker_folder as picker_folder,
    )
    from oom_wizard.application.preferences import (
        keymap_problems_line as keymap_problems_line,
        remember_theme as remember_theme,
        saved_keymap as saved_keymap,
        saved_theme as saved_theme,
    )
    from oom_wizard.application.saving import (
        Destination as Destination,
        FileTarget as FileTarget,
        Saved as Saved,
        ToFile as ToFile,
        default_file_output as default_file_output,
        default_file_target as default_file_target,
        file_target as file_target,
        save as save,
    )
    from oom_wizard.application.scale_up import (
        next_scale_up as next_scale_up,
        nothing_left as nothing_left,
        pending_scale_ups as pending_scale_ups,
        prepare_scale_up as prepare_scale_up,
        save_scale_up as save_scale_up,
        scale_up_notes as scale_up_notes,
        scale_up_prediction as scale_up_prediction,
    )
    from oom_wizard.application.settling import (
        VALIDATION_STEP as VALIDATION_STEP,
        Dropped as Dropped,
        EnvironmentVerdict as EnvironmentVerdict,
        LastRun as LastRun,
        RetryAnswer as RetryAnswer,
        RunEnding as RunEnding,
        Settled as Settled,
        Source as Source,
        WizardState as WizardState,
        advice_for as advice_for,
        card_of as card_of,
        crash_figures as crash_figures,
        environment_verdict as environment_verdict,
        given as given,
        last_run as last_run,
        memory_calibration as memory_calibration,
        retry_answer as retry_answer,
        retry_crashed as retry_crashed,
        settle as settle,
        start as start,
    )
    from oom_wizard.application.watching import (
        CrashReport as CrashReport,
        diagnose_crash as diagnose_crash,
        first_step as first_step,
        offers_save_now as offers_save_now,
        request_save_now as request_save_now,
        save_now_question as save_now_question,
        warm_up as warm_up,
    )
    from oom_wizard.formats.document import JobDocument as JobDocument
    from oom_wizard.host.probe import probe_gpu as probe_gpu, read_host_memory as read_host_memory
    from oom_wizard.logs.read import (
        ScanCancelled as ScanCancelled,
        Watch as Watch,
        watching as watching,
    )
    from oom_wizard.paths import MISSING as MISSING, format_path as format_path
    from oom_wizard.request import JobRequest as JobRequest
    from oom_wizard.rules.catalog import MomentInfo as MomentInfo
    from oom_wizard.rules.diagnosis import Answers as Answers, Diagnosis as Diagnosis
    from oom_wizard.rules.memory import (
        Band as Band,
        Calibration as Calibration,
        JobMemory as JobMemory,
        Parts as Parts,
        Prediction as Prediction,
        Verdict as Verdict,
    )
    from oom_wizard.rules.plan import (
        FieldProposal as FieldProposal,
        MemoryEstimate as MemoryEstimate,
        Plan as Plan,
        ScaleUp as ScaleUp,
        StepChoice as StepChoice,
        StepProposal as StepProposal,
    )
    from oom_wizard.rules.sizing import (
        FIX_WORDS as FIX_WORDS,
        FixName as FixName,
        MemoryPeak as MemoryPeak,
    )
    from oom_wizard.rules.values import ValueCheck as ValueCheck
    from oom_wizard.storage.changelog import (
        ChangeEntry as ChangeEntry,
        ChangeLog as ChangeLog,
        EditedSinceSave as EditedSinceSave,
        changelog_path_for as changelog_path_for,
    )
    from oom_wizard.storage.changes import Prepared as Prepared
    from oom_wizard.storage.jobdb import (
        AsNew as AsNew,
        DbJob as DbJob,
        DbSaveResult as DbSaveResult,
        InPlace as InPlace,
        SaveMode as SaveMode,
    )
    from oom_wizard.storage.save import SaveResult as SaveResult
    from oom_wizard.storage.settings import (
        SettingProblem as SettingProblem,
        UserKeymap as UserKeymap,
    )

#: Where each name comes from. A name is imported when first asked for
#: (``from oom_wizard.service import Plan``), so importing the service loads nothing of the
#: domain, and the app's first frame or a light command loads only the modules it uses.
_SOURCES: dict[str, tuple[str, ...]] = {
    "oom_wizard.application.choosing": (
        "Jumped",
        "Review",
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
        "in_walk",
        "memory_peak",
        "optional_line",
        "optional_steps",
        "prepared",
        "preselect_fix",
        "proposed_step",
        "recorded_steps",
        "resume_of",
        "review",
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
        "LogClaim",
        "arch_label",
        "log_claim",
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
        "new_job_name_taken",
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
        "given",
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
    "oom_wizard.rules.catalog": ("MomentInfo",),
    "oom_wizard.storage.changelog": (
        "ChangeEntry",
        "ChangeLog",
        "EditedSinceSave",
        "changelog_path_for",
    ),
    "oom_wizard.storage.changes": ("Prepared",),
    "oom_wizard.rules.diagnosis": (
        "Answers",
        "Diagnosis",
    ),
    "oom_wizard.formats.document": ("JobDocument",),
    "oom_wizard.storage.jobdb": (
        "AsNew",
        "DbJob",
        "DbSaveResult",
        "InPlace",
        "SaveMode",
    ),
    "oom_wizard.logs.read": (
        "ScanCancelled",
        "Watch",
        "watching",
    ),
    "oom_wizard.rules.memory": (
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
    "oom_wizard.rules.plan": (
        "FieldProposal",
        "MemoryEstimate",
        "Plan",
        "ScaleUp",
        "StepChoice",
        "StepProposal",
    ),
    "oom_wizard.host.probe": (
        "probe_gpu",
        "read_host_memory",
    ),
    "oom_wizard.request": ("JobRequest",),
    "oom_wizard.storage.save": ("SaveResult",),
    "oom_wizard.storage.settings": (
        "SettingProblem",
        "UserKeymap",
    ),
    "oom_wizard.rules.sizing": (
        "FIX_WORDS",
        "FixName",
        "MemoryPeak",
    ),
    "oom_wizard.rules.values": ("ValueCheck",),
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


__all__ = sorted(_SOURCE_OF)
