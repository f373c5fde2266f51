"""``oom-wizard plan CONFIG``: the roll-back steps for a crashed job, without writing anything.

The job is opened and settled by :mod:`oom_wizard.service`, as the app does it: the moment and
the model kind come from ``--moment`` / ``--kind`` when given, else from the diagnosis of
``--log`` (or of the job folder's log) and the config, else from defaults that are always
named. ``apply`` shares this module's argument handling, so both see the same plan.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oom_wizard.commands._common import add_crash_arguments, stdout
from oom_wizard.commands._jobdb import add_db_arguments, show_jobs, wants_db

if TYPE_CHECKING:
    from rich.console import Console

    from oom_wizard.request import JobRequest
    from oom_wizard.service import Plan, StepProposal, WizardState


def add_parser(subparsers: Any) -> None:
    """Register ``plan``."""
    parser = subparsers.add_parser(
        "plan",
        help="show the roll-back steps for a crashed job (writes nothing)",
        description=(
            "Show the memory roll-back for a job that died with CUDA out of memory: the steps "
            "in order, each with the fields it would change (before → after), which are on "
            "by default, the fixes offered (just enough and safe) with their peak in GiB, and a "
            "relative memory estimate. Writes nothing; 'apply' saves it."
        ),
    )
    add_target_arguments(parser)
    add_db_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    parser.set_defaults(handler=run)


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
    """Open the job the arguments name and settle the moment and kind, through the service.

    Raises:
        WizardError: no config, or one of the files (or the database) cannot be read.
    """
    from oom_wizard.application.settling import Answers, start

    answers = Answers.coerce({"moment": args.moment, "model_kind": args.kind})
    return start(request_of(args, args.config), answers, new_crash=bool(args.new_crash))


def request_of(args: argparse.Namespace, target: str | Path | None) -> JobRequest:
    """What to open: CONFIG / JOB_DIR, ``--log``, ``--db``/``--job`` and ``--no-probe``."""
    from oom_wizard.request import JobRequest

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
    from oom_wizard.application.leaving import crashed_job_note, ui_job_note

    for note in (ui_job_note(state), crashed_job_note(state)):
        if note is not None:
            notes.append(note)
    if state.job.crashed_since_rollback and not new_crash_flag:
        notes.append(
            "The log is newer than the last roll-back and shows a crash: one rung further."
        )
    return tuple(notes)


def run(args: argparse.Namespace) -> int:
    """Print the plan (as text, or as JSON with ``--json``)."""
    if wants_db(args, args.config) and args.job is None:
        return show_jobs(args.db, stdout())
    state = load_target(args)
    notes = target_notes(state, new_crash_flag=args.new_crash)
    if args.json:
        for note in notes:
            print(f"oom-wizard: {note}", file=sys.stderr)
        print(json.dumps(plan_json(state), indent=2, ensure_ascii=False))
        return 0
    render_plan(stdout(), state, notes)
    return 0


def plan_json(state: WizardState) -> dict[str, Any]:
    """``plan --json``: the plan's JSON, its ``estimate.gib`` calibrated by the job's own
    figures when it has them (see :func:`oom_wizard.service.memory_calibration`)."""
    from oom_wizard.application.choosing import estimate

    found = state.plan.to_json()
    if found.get("estimate") is not None:
        found["estimate"]["gib"] = estimate(state, None).gib_json()
    return found


# --------------------------------------------------------------------------- text


def render_plan(console: Console, state: WizardState, notes: Sequence[str]) -> None:
    """The plan as text: context, the default fix's estimate, the fixes offered (and, when
    nothing lowers the crashed peak, that the ladder is exhausted and what remains), then one
    block per step."""
    from oom_wizard.application.choosing import estimate, estimate_words, fix_summary

    plan = state.plan
    console.print(f"Roll-back plan for {state.source}", markup=False)
    for note in notes:
        console.print(f"  {note}", markup=False)
    for warning in state.document.warnings:
        console.print(f"  warning: {warning}", markup=False)
    if plan.environment_checks:
        render_checks(console, plan)
        return
    figures = estimate(state, None)
    console.print(f"  with the default steps: {estimate_words(figures, plan.moment)}", markup=False)
    console.print(f"  {figures.note}", markup=False)
    for line in fix_summary(state):
        console.print(f"  {line}", markup=False)
    if plan.exhausted_advice:
        console.print("", markup=False)
        console.print(f"Ladder exhausted. {plan.exhausted_advice}", markup=False)
        console.print(
            "No step is on by default, and 'oom-wizard apply' saves nothing as a fix; you can "
            "still name steps with --steps.",
            markup=False,
        )
    console.print("")
    for number, step in enumerate(plan.steps, start=1):
        render_step(console, state, number, step)
    console.print(
        "Apply the default steps with 'oom-wizard apply', the safe set with --safe, all of "
        "them with --all, or name them with --steps ID,ID.",
        markup=False,
    )


def render_checks(console: Console, plan: Plan) -> None:
    """What to check for an ``environment`` crash (the config does not change)."""
    console.print("")
    console.print(
        "Nothing in the config changes: the GPU or the worker is the problem. Check:",
        markup=False,
    )
    for check in plan.environment_checks:
        console.print(f"  - {check}", markup=False)


def render_step(console: Console, state: WizardState, number: int, step: StepProposal) -> None:
    """One step: title and state, its fields, why, where in the UI, its note and estimate."""
    from oom_wizard.application.choosing import StepChoice, estimate, estimate_words
    from oom_wizard.spelling import value

    console.print(f"{number:2}. {step.title} [{step.id}]: {step.state_words()}", markup=False)
    for proposal in step.fields:
        toggle = "on " if proposal.default_on else "off"
        after = "(dropped)" if proposal.control == "bucket" else value(proposal.after)
        console.print(
            f"      [{toggle}] {proposal.label}: {value(proposal.before)} → {after}", markup=False
        )
    console.print(f"      why: {' '.join(step.why.split())}", markup=False)
    if step.ui_hint:
        console.print(f"      in AI Toolkit's UI: {step.ui_hint}", markup=False)
    if step.costs:
        console.print(f"      costs: {step.costs}", markup=False)
    if step.note:
        console.print(f"      note: {step.note}", markup=False)
    if step.fields and not step.satisfied:
        figures = estimate(state, {step.id: StepChoice(step_id=step.id, enabled=True)})
        console.print(
            f"      this step alone: {estimate_words(figures, state.plan.moment)}", markup=False
        )
    console.print("")
