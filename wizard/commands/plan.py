"""``oom-wizard plan CONFIG``: the roll-back steps for a crashed job, without writing anything.

The job is opened and settled by the application layer, as the app does it: the moment and
the model kind come from ``--moment`` / ``--kind`` when given, else from the diagnosis of
``--log`` (or of the job folder's log) and the config, else from defaults that are always
named. ``apply`` shares its argument handling (``commands._target``), so both see the same
plan.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from oom_wizard.application.choosing import StepChoice, estimate, estimate_words, fix_summary
from oom_wizard.commands._common import stdout
from oom_wizard.commands._jobdb import add_db_arguments, wants_db
from oom_wizard.commands._report import show_jobs
from oom_wizard.commands._target import (
    add_target_arguments,
    load_target,
    render_checks,
    target_notes,
)
from oom_wizard.spelling import value

if TYPE_CHECKING:
    from rich.console import Console

    from oom_wizard.application.settling import WizardState
    from oom_wizard.rules.plan import StepProposal


def add_parser(subparsers: Any) -> None:
    """Register ``plan``."""
    parser = subparsers.add_parser(
        "plan",
        help="show the roll-back steps for a crashed job (writes nothing)",
        description=(
            "Show the memory roll-back for a job that died with CUDA out of memory: the steps "
            "in order, each with the fields it would change (before → after), which are on "
            "by default, the fixes offered (the least loss and the moment's usual "
            "changes) with their peak in GiB, and a relative memory estimate. Writes nothing; "
            "'apply' saves it."
        ),
    )
    add_target_arguments(parser)
    add_db_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the plan (as text, or as JSON with ``--json``)."""
    if wants_db(args, args.config) and args.job is None:
        return show_jobs(args.db, stdout())
    state = load_target(args)
    notes = target_notes(state, new_crash_flag=args.new_crash)
    if args.json:
        for note in notes:
            print(f"oom-wizard: {note}", file=sys.stderr)
        print(json.dumps(state.plan.to_json(), indent=2, ensure_ascii=False))
        return 0
    render_plan(stdout(), state, notes)
    return 0


# --------------------------------------------------------------------------- text


def render_plan(console: Console, state: WizardState, notes: Sequence[str]) -> None:
    """The plan as text: context, the default fix's estimate, the fixes offered (and, when
    nothing lowers the crashed peak, that the ladder is exhausted and what remains), then one
    block per step."""

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
        "Apply the default steps with 'oom-wizard apply', the moment's usual changes with "
        "--safe, all of them with --all, or name them with --steps ID,ID.",
        markup=False,
    )


def render_step(console: Console, state: WizardState, number: int, step: StepProposal) -> None:
    """One step: title and state, its fields, why, where in the UI, its note and estimate."""

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
