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
from typing import TYPE_CHECKING, Any

from oom_wizard.application.leaving import job_notes
from oom_wizard.application.log_alone import Answers, diagnose_log_alone
from oom_wizard.application.settling import start
from oom_wizard.application.watching import first_step
from oom_wizard.commands._common import add_crash_arguments, stdout
from oom_wizard.commands._jobdb import add_db_arguments, wants_db
from oom_wizard.commands._report import show_jobs
from oom_wizard.commands._target import request_of
from oom_wizard.errors import WizardError
from oom_wizard.spelling import counted, gib, oom_figures

if TYPE_CHECKING:
    from rich.console import Console

    from oom_wizard.rules.diagnosis import Diagnosis

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
    add_db_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Diagnose and print; 0 when a diagnosis was printed."""
    if wants_db(args, args.target) and args.job is None:
        return show_jobs(args.db, stdout())
    diagnosis = diagnose_args(args)
    if args.json:
        json.dump(diagnosis.to_json(), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    report(diagnosis, stdout())
    return 0


def diagnose_args(args: argparse.Namespace) -> Diagnosis:
    """The diagnosis of what the arguments name: a job through the application layer, or a log
    alone.

    Raises:
        WizardError: nothing to diagnose, or a file (or the database) that cannot be read.
    """

    answers = Answers.coerce(
        {"moment": args.moment, "model_kind": args.kind, "worked_before": args.worked_before}
    )
    if args.target is None and args.db is None:
        if args.log is None:
            raise WizardError(
                "give the job's config, its output folder, or --log LOG (or --db PATH --job NAME)"
            )
        return diagnose_log_alone(args.log, answers, probe=not args.no_probe)

    state = start(request_of(args, args.target), answers)
    diagnosis = state.diagnosis
    notes = (
        *diagnosis.notes,
        *state.document.warnings,
        *((f"Log: {state.log_note}",) if state.log_note else ()),
        *((state.job.probe_note,) if state.job.probe_note else ()),
        *job_notes(state),
    )
    return dataclasses.replace(diagnosis, notes=notes, first_change=first_step(state))


# --- the human report ---------------------------------------------------------------------------


def report(diagnosis: Diagnosis, console: Console) -> None:
    """The diagnosis in a few lines: verdict, evidence, figures, environment, what to do."""
    from rich.table import Table
    from rich.text import Text

    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row("Verdict", Text(diagnosis.verdict))
    if diagnosis.certainty:
        grid.add_row("How sure", Text(diagnosis.certainty))
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
    if diagnosis.crash_step is not None:  # the step it ended in, not the bar's count of those done
        total = f" of {diagnosis.total_steps}" if diagnosis.total_steps else ""
        ended = "crashed" if diagnosis.crashed else "stops"
        parts.append(f"{ended} in step {diagnosis.crash_step}{total}")
    elif diagnosis.last_step is not None:
        total = f"/{diagnosis.total_steps}" if diagnosis.total_steps else ""
        parts.append(f"last step {diagnosis.last_step}{total}")
    if diagnosis.skip_count:
        parts.append(counted(diagnosis.skip_count, "OOM-skipped batch", "OOM-skipped batches"))
    return " · ".join(parts)


def _memory_line(diagnosis: Diagnosis) -> str:
    return " · ".join(oom_figures(diagnosis.to_json()["oom"] or {}))


def _gpu_now_line(diagnosis: Diagnosis) -> str:
    probe = diagnosis.probe
    if probe is None:
        return ""
    parts = [
        f"GPU {g.index} {g.name}: {gib(g.used_gib)} of {gib(g.total_gib)} used" for g in probe.gpus
    ]
    parts += [
        f"pid {p.pid} {p.name}" + (f" {gib(p.used_gib)}" if p.used_gib is not None else "")
        for p in probe.processes
    ]
    if probe.host_total_gib is not None and probe.host_available_gib is not None:
        parts.append(
            f"host RAM {gib(probe.host_available_gib)} free of {gib(probe.host_total_gib)}"
        )
    return " · ".join(parts)
