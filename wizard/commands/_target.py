"""The job a command opens, shared by ``plan``, ``apply``, ``diagnose`` and ``fit``: its
arguments, its request, what was assumed, and the checks of a crash the config cannot fix.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from oom_wizard.application.leaving import job_notes
from oom_wizard.application.settling import (
    Answers,
    WizardState,
    card_note,
    host_note,
    option_notes,
    start,
)
from oom_wizard.commands._common import add_crash_arguments
from oom_wizard.commands._jobdb import wants_db
from oom_wizard.request import JobRequest

if TYPE_CHECKING:
    from rich.console import Console

    from oom_wizard.rules.plan import Plan


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    """CONFIG (or JOB_DIR), ``--moment``, ``--kind``, ``--log`` and ``--new-crash``."""
    parser.add_argument(
        "config",
        nargs="?",
        metavar="CONFIG",
        help="the job config (.yaml, .yml, .json, .jsonc), or the job's output folder",
    )
    add_crash_arguments(
        parser,
        moment_help="when it crashed (default: from the log, else early_steps, said so)",
        kind_help="image or video model (default: from the arch)",
        log_help="the training log (log.txt)",
    )
    parser.add_argument(
        "--new-crash",
        action="store_true",
        help="this config is our earlier roll-back and it crashed again: go one rung further",
    )


def load_target(args: argparse.Namespace) -> WizardState:
    """Open the job the arguments name and settle the moment and kind, through the application
    layer.

    Raises:
        WizardError: no config, or one of the files (or the database) cannot be read.
    """

    answers = Answers.coerce({"moment": args.moment, "model_kind": args.kind})
    return start(request_of(args, args.config), answers, new_crash=bool(args.new_crash))


def request_of(args: argparse.Namespace, target: str | Path | None) -> JobRequest:
    """What to open: CONFIG / JOB_DIR, ``--log``, ``--db``/``--job`` and ``--no-probe``."""

    wants_db(args, target)
    return JobRequest(
        target=Path(target) if target is not None else None,
        log=args.log,
        db=getattr(args, "db", None),
        job=getattr(args, "job", None),
        probe=not getattr(args, "no_probe", False),
        edited_ok=bool(getattr(args, "edited_ok", False)),
    )


def target_notes(state: WizardState, *, new_crash_flag: bool = False) -> tuple[str, ...]:
    """Which log was read, where the moment and the kind come from, and anything assumed."""
    settled = state.settled
    notes = [state.log_note] if state.log_note else []
    if state.job.probe_note:
        notes.append(state.job.probe_note)
    tenants = card_note(state.job)
    if tenants is not None:
        notes.append(f"on the card: {tenants}")
    notes.extend(f"option {words}" for words in option_notes(state))
    host = host_note(state)
    if host is not None:
        notes.append(host)
    if settled.moment_source == "answer":
        notes.append(f"moment {settled.moment} (--moment)")
    elif settled.moment_source == "found":
        found = settled.diagnosis
        total = f" of {found.total_steps}" if found.total_steps else ""
        ended = "crashed" if found.crashed else "stops"
        at = (
            f": it {ended} in step {found.crash_step}{total}"
            if found.crash_step is not None
            else ""
        )
        notes.append(f"moment {settled.moment} (from the log{at})")
    else:
        why = "the log does not say when" if state.log_path else "no --moment and no log"
        notes.append(
            f"moment {settled.moment} assumed ({why}): the first training steps are where most "
            "OOMs happen, and their changes are the main memory levers; pass --moment to change it"
        )
    if settled.kind_source == "answer":
        notes.append(f"model kind {settled.model_kind} (--kind)")
    else:
        notes.append(f"model kind {settled.model_kind} ({settled.kind_reason})")

    notes.extend(job_notes(state))
    if state.job.crashed_since_rollback and not new_crash_flag:
        notes.append(
            "The log is newer than the last roll-back and shows a crash: one rung further."
        )
    return tuple(notes)


def render_checks(console: Console, plan: Plan) -> None:
    """What to check for an ``environment`` crash (the config does not change)."""
    console.print("")
    console.print(
        "Nothing in the config changes: the GPU or the worker is the problem. Check:",
        markup=False,
    )
    for check in plan.environment_checks:
        console.print(f"  - {check}", markup=False)
