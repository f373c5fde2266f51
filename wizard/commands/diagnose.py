"""``oom-wizard diagnose [CONFIG | JOB_DIR] [--log LOG] [--json]``: when and why it crashed.

Reads the config (through the job document, like every command), the log (given, or found in
the job folder: the newest that crashed), looks at the GPU when ``nvidia-smi`` is here, and
prints the diagnosis: a short report, or with ``--json`` the keys DESIGN.md lists. A log alone
works too (the model kind is then unknown). Writes nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wizard.commands._common import add_crash_arguments, stdout
from wizard.commands._jobdb import add_db_arguments, load_db_job, show_jobs, wants_db
from wizard.errors import WizardError

if TYPE_CHECKING:
    from rich.console import Console

    from wizard.changelog import ChangeLog
    from wizard.diagnosis import Diagnosis
    from wizard.document import JobDocument
    from wizard.jobdir import JobLocation
    from wizard.logscan import LogScan

#: Evidence text longer than this is cut in the human report (``--json`` keeps it whole).
REPORT_TEXT = 160


def add_parser(subparsers: Any) -> None:
    """Register ``diagnose``."""
    parser = subparsers.add_parser(
        "diagnose",
        help="say when and why a job ran out of memory (writes nothing)",
        description=(
            "Read the job's config and its log, and say when the job ran out of memory, "
            "whether the config or the GPU's environment is to blame, with the evidence "
            "lines, PyTorch's memory figures and the first thing to change."
        ),
    )
    parser.add_argument(
        "target",
        nargs="?",
        metavar="CONFIG | JOB_DIR",
        help="the job config, or the job's output folder (<training_folder>/<name>/)",
    )
    add_crash_arguments(
        parser,
        moment_help="when it crashed, if you know",
        kind_help="image or video model, if you know",
        log_help="the training log (default: the newest crashed log of the job folder)",
    )
    parser.add_argument("--json", action="store_true", help="print the diagnosis as JSON")
    parser.add_argument(
        "--worked-before",
        action="store_true",
        help="this exact config worked before (suspect an update or the environment)",
    )
    parser.add_argument(
        "--no-probe", action="store_true", help="do not ask nvidia-smi about the GPU now"
    )
    add_db_arguments(parser)
    parser.set_defaults(handler=run)


@dataclass(frozen=True)
class Inputs:
    """What the diagnosis reads: the config, the log (and its scan), the change log."""

    document: JobDocument | None
    log: Path | None
    scan: LogScan | None
    changelog: ChangeLog | None
    notes: tuple[str, ...] = ()


def run(args: argparse.Namespace) -> int:
    """Diagnose and print; 0 when a diagnosis was printed."""
    if wants_db(args, args.target) and args.job is None:
        return show_jobs(args.db, stdout())
    diagnosis = diagnose_inputs(gather(args), args)
    if args.json:
        json.dump(diagnosis.to_json(), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    report(diagnosis, stdout())
    return 0


def gather(args: argparse.Namespace) -> Inputs:
    """Find and read the config, the log and the change log the arguments point to.

    Raises:
        WizardError: nothing to diagnose, or a file that cannot be read.
    """
    from wizard.logscan import scan_log

    if wants_db(args, args.target):
        inputs = _from_database(args)
    elif args.target is not None:
        inputs = _from_path(Path(args.target), args.log)
    elif args.log is not None:
        inputs = Inputs(document=None, log=args.log, scan=None, changelog=None)
    else:
        raise WizardError(
            "give the job's config, its output folder, or --log LOG (or --db PATH --job NAME)"
        )
    if inputs.log is not None and inputs.scan is None:
        inputs = dataclasses.replace(inputs, scan=scan_log(inputs.log))
    return inputs


def _from_path(path: Path, log: Path | None) -> Inputs:
    from wizard.document import load_document
    from wizard.jobdir import locate_job

    located = locate_job(path)
    document = load_document(located.config)
    changelog, note = _changelog(located.config)
    notes = (*document.warnings, *_log_note(located, log), *([note] if note else []))
    return Inputs(document, *_chosen_log(located, log), changelog, notes)


def _from_database(args: argparse.Namespace) -> Inputs:
    from wizard.jobdb import read_job_changelog

    document, located, job = load_db_job(args)
    chosen, scan = _chosen_log(located, args.log)
    return Inputs(document, chosen, scan, read_job_changelog(job), _log_note(located, args.log))


def _chosen_log(located: JobLocation, log: Path | None) -> tuple[Path | None, LogScan | None]:
    """``--log`` when given, else the job folder's log (with the scan made to find it)."""
    chosen = log or located.log
    return chosen, located.log_scan if chosen == located.log else None


def _log_note(located: JobLocation, log: Path | None) -> tuple[str, ...]:
    """Which log of the job folder was read, when ``--log`` did not name one."""
    return (f"Log: {located.log_note}",) if log is None and located.log_note else ()


def _changelog(config: Path) -> tuple[ChangeLog | None, str | None]:
    """The config's change log; a broken one is reported, it does not stop the diagnosis."""
    from wizard.changelog import find_changelog, read_changelog

    found = find_changelog(config)
    if found is None:
        return None, None
    try:
        return read_changelog(found), None
    except WizardError as exc:
        return None, f"The change log beside the config was not read: {exc.one_line()}"


def diagnose_inputs(inputs: Inputs, args: argparse.Namespace) -> Diagnosis:
    """The diagnosis, with the plan's first unsatisfied step as the first change."""
    from wizard.diagnosis import Answers, diagnose
    from wizard.probe import probe_gpu

    answers = Answers.coerce(
        {"moment": args.moment, "model_kind": args.kind, "worked_before": args.worked_before}
    )
    document = inputs.document
    diagnosis = diagnose(
        inputs.scan,
        document.view() if document is not None else None,
        answers=answers,
        probe=None if args.no_probe else probe_gpu(),
        changelog=inputs.changelog,
    )
    notes = (*diagnosis.notes, *inputs.notes)
    diagnosis = dataclasses.replace(diagnosis, notes=notes)
    if document is None:
        return diagnosis
    return dataclasses.replace(diagnosis, first_change=_first_step(diagnosis, document, inputs))


def _first_step(diagnosis: Diagnosis, document: JobDocument, inputs: Inputs) -> str | None:
    """The first roll-back step that changes something by default, with its fields.

    Advice that comes first (an environment problem, a scale-up to undo) stays first.
    """
    from wizard.document import MISSING
    from wizard.plan import build_plan, default_model_kind

    moment = diagnosis.moment
    if moment is None or moment == "environment" or _advice_first(diagnosis):
        return diagnosis.first_change
    kind = diagnosis.model_kind or default_model_kind(document)[0]
    try:
        plan = build_plan(document, moment, kind, changelog=inputs.changelog, diagnosis=diagnosis)
    except WizardError:
        return diagnosis.first_change
    step = next((s for s in plan.steps if s.default_on and not s.satisfied), None)
    if step is None:
        return (
            plan.exhausted_advice
            or "Every default step of this roll-back is already in the config."
        )

    def shown(value: Any, absent: str) -> str:
        return absent if value is MISSING else json.dumps(value, default=str)

    changes = [
        f"{f.label} {shown(f.before, '(absent)')} → {shown(f.after, '(removed)')}"
        for f in step.fields
        if f.default_on
    ]
    return f"{step.title}: {', '.join(changes)}" if changes else step.title


def _advice_first(diagnosis: Diagnosis) -> bool:
    return bool(diagnosis.advice) and diagnosis.advice[0].id == "undo_scale_up"


# --- the human report ---------------------------------------------------------------------------


def report(diagnosis: Diagnosis, console: Console) -> None:
    """The diagnosis in a few lines: verdict, evidence, figures, environment, what to do."""
    from rich.table import Table
    from rich.text import Text

    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row("Verdict", Text(diagnosis.verdict))
    if diagnosis.log is not None:
        grid.add_row("Log", Text(_log_line(diagnosis)))
    if diagnosis.evidence:
        lines = Table.grid(padding=(0, 1))
        lines.add_column(justify="right", style="dim", no_wrap=True)
        lines.add_column(overflow="fold")
        for item in diagnosis.evidence:
            text = (
                item.text if len(item.text) <= REPORT_TEXT else item.text[: REPORT_TEXT - 1] + "…"
            )
            lines.add_row(str(item.line), Text(text))
        grid.add_row("Evidence", lines)
    if memory := _memory_line(diagnosis):
        grid.add_row("Memory", Text(memory))
    if now := _gpu_now_line(diagnosis):
        grid.add_row("GPU now", Text(now))
    if diagnosis.reasons:
        label = "Environment" if diagnosis.environment_suspected else "Not the GPU"
        grid.add_row(label, Text("\n".join(f"• {r}" for r in diagnosis.reasons)))
    advice = [a.text for a in diagnosis.advice if a.text != diagnosis.first_change]
    if advice:
        grid.add_row("Also", Text("\n".join(f"• {a}" for a in advice)))
    if diagnosis.first_change:
        grid.add_row("First", Text(diagnosis.first_change))
    extra = [*diagnosis.disagreements, *diagnosis.notes]
    if extra:
        grid.add_row("Note", Text("\n".join(f"• {n}" for n in extra)))
    console.print(grid)


def _log_line(diagnosis: Diagnosis) -> str:
    parts = [str(diagnosis.log)]
    if diagnosis.run_count > 1:
        parts.append(f"{diagnosis.run_count} runs, the last one read")
    if diagnosis.resumed:
        parts.append("a resumed run")
    if diagnosis.last_step is not None:
        total = f"/{diagnosis.total_steps}" if diagnosis.total_steps else ""
        parts.append(f"last step {diagnosis.last_step}{total}")
    if diagnosis.skip_count:
        parts.append(f"{diagnosis.skip_count} OOM-skipped batch(es)")
    return " · ".join(parts)


def _memory_line(diagnosis: Diagnosis) -> str:
    oom = diagnosis.to_json()["oom"]
    names = {
        "tried_gib": "tried",
        "total_gib": "card",
        "free_gib": "free",
        "this_process_gib": "this process",
        "allocated_gib": "allocated",
        "reserved_gib": "reserved",
        "reserved_unallocated_gib": "reserved unallocated",
    }
    parts = [f"{label} {oom[key]:.2f} GiB" for key, label in names.items() if key in oom]
    for other in oom.get("other_processes", []):
        who = f"pid {other['pid']}" if other["pid"] else "another process"
        parts.append(f"{who} {other['gib']:.2f} GiB")
    return " · ".join(parts)


def _gpu_now_line(diagnosis: Diagnosis) -> str:
    probe = diagnosis.probe
    if probe is None:
        return ""
    parts = [
        f"GPU {g.index} {g.name}: {g.used_gib:.1f}/{g.total_gib:.1f} GiB used" for g in probe.gpus
    ]
    parts += [
        f"pid {p.pid} {p.name}" + (f" {p.used_gib:.1f} GiB" if p.used_gib is not None else "")
        for p in probe.processes
    ]
    if probe.host_total_gib is not None and probe.host_available_gib is not None:
        parts.append(f"host RAM {probe.host_available_gib:.1f}/{probe.host_total_gib:.1f} GiB free")
    return " · ".join(parts)
