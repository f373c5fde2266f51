"""``oom-wizard apply CONFIG``: save the roll-back as a new config with its change log.

Without ``--steps`` or ``--all`` it applies the plan's default-on steps with their default
field toggles (what the wizard saves when every default is accepted); ``--all`` applies
every step of the plan with its default toggles; ``--steps ID,ID`` names the steps; ``--safe``
takes the moment's usual changes (``safe``) where the default is the least loss
(``just_enough``) (:mod:`oom_wizard.rules.sizing`); ``--set FIELD=VALUE`` (repeatable) sets a
field of a chosen step beyond its default, as ``fit``'s ``apply`` line carries a fix's rungs
(:func:`~oom_wizard.application.choosing.set_values`). The
moment and kind are settled exactly as ``plan`` settles them. The source is never written.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from oom_wizard.application.choosing import (
    StepChoice,
    default_choices,
    estimate,
    estimate_words,
    fix_words,
    prepared,
    set_values,
)
from oom_wizard.application.fitting import saved_verdict
from oom_wizard.application.saving import (
    DbSaveResult,
    SaveResult,
    ToFile,
    check_destination,
    save,
)
from oom_wizard.commands._common import add_output_arguments, stdout
from oom_wizard.commands._jobdb import add_db_arguments, wants_db
from oom_wizard.commands._report import (
    print_changes,
    print_db_saved,
    print_saved,
    save_mode,
    show_jobs,
)
from oom_wizard.commands._target import (
    add_target_arguments,
    load_target,
    render_checks,
    target_notes,
)
from oom_wizard.errors import WizardError

if TYPE_CHECKING:
    from oom_wizard.rules.plan import Plan


def add_parser(subparsers: Any) -> None:
    """Register ``apply``."""
    parser = subparsers.add_parser(
        "apply",
        help="save the roll-back as a new config beside the source, with a change log",
        description=(
            "Apply the roll-back plan and save a new config (never the source) with a change "
            "log that records every change, its step and why. Default: the steps that are on "
            "by default (the least loss where the crash's own figures size it, else "
            "the moment's usual changes); --safe: the moment's usual changes; --all: every "
            "step; --steps: the ones named; --set FIELD=VALUE: a field of a chosen step past "
            "its default (the values 'fit' prints in its apply line)."
        ),
    )
    add_target_arguments(parser)
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--steps",
        metavar="ID,ID",
        help="apply these steps (ids as 'plan' prints them), each with its default toggles",
    )
    which.add_argument(
        "--all", action="store_true", help="apply every step of the plan with its defaults"
    )
    which.add_argument(
        "--safe",
        action="store_true",
        help=(
            "apply the moment's usual changes: what costs no quality and all the moment's "
            "first rungs (the default is the least loss where the crash's own "
            "figures size it)"
        ),
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        dest="set_values",
        help=(
            "set a field of a chosen step beyond its default (repeatable): FIELD as 'plan' "
            "names it (model.layer_offloading_transformer_percent), VALUE a YAML scalar "
            "(1.0, true), checked as the app checks a typed value; a field off by default is "
            "switched on"
        ),
    )
    add_output_arguments(parser)
    add_db_arguments(parser, saving=True)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Apply the chosen steps and save (through the application layer), or show them with
    ``--dry-run``; the exit status is the saved config's verdict against the job's card (0
    fits or no card known, 3 tight, 4 predicted not to fit, with a warning)."""

    console = stdout()
    if wants_db(args, args.config) and args.job is None:
        return show_jobs(args.db, console)
    state = load_target(args)
    if state.db_job is None and not args.dry_run:
        check_destination(state, ToFile(args.output, args.changelog, force=args.force))
    plan = state.plan
    notes = target_notes(state, new_crash_flag=args.new_crash)
    if plan.environment_checks:
        for note in notes:
            console.print(note, markup=False)
        render_checks(console, plan)
        return 0
    picked = choose(plan, all_steps=args.all, named=args.steps)
    if args.safe:
        picked = default_choices(state, "safe")
    choices = picked
    if args.set_values:  # refused before anything is said: one line, nothing written
        base = default_choices(state) if picked is None else picked
        choices = set_values(state, base, args.set_values)
    for note in notes:
        console.print(note, markup=False)
    if picked is None or args.safe:
        fix = "safe" if args.safe else plan.default_fix
        console.print(f"Applying {fix_words(state, fix)}", markup=False)
    if picked is None and plan.exhausted_advice:
        raise WizardError(
            f"{state.document.source}: ladder exhausted, nothing saved. {plan.exhausted_advice}"
        )
    ready = prepared(state, choices)
    print_changes(console, ready)
    if not ready.changed:
        return 0
    figures = estimate(state, choices)
    console.print(f"Estimate: {estimate_words(figures, plan.moment)}", markup=False)
    judged = saved_verdict(state, figures.gib[1])
    warning = judged.warning()
    if warning is not None:
        console.print(warning, markup=False)
    if args.dry_run:
        if state.db_job is None:
            console.print(ready.shown_diff(), markup=False)
        else:
            console.print(
                "Dry run: the job's config is one JSON value in the database, so the changed "
                "fields above are the whole difference; nothing was written.",
                markup=False,
            )
        return judged.status
    if state.db_job is not None:
        if args.output is not None or args.changelog is not None:
            raise WizardError(
                "-o and --changelog are for config files; a database job is saved with "
                "--in-place or --as-new, and its change log goes beside the database"
            )
        result = save(state, choices, save_mode(args), ready=ready)
        assert isinstance(result, DbSaveResult)
        print_db_saved(console, result)
        return judged.status
    saved = save(state, choices, ToFile(args.output, args.changelog, force=args.force), ready=ready)
    assert isinstance(saved, SaveResult)
    print_saved(console, saved, ui_job=state.ui_job)
    return judged.status


def choose(plan: Plan, *, all_steps: bool, named: str | None) -> Mapping[str, StepChoice] | None:
    """The step choices of ``--all`` / ``--steps`` (None: the plan's defaults).

    Raises:
        WizardError: ``--steps`` names a step that is not in this plan.
    """

    if all_steps:
        return {step.id: StepChoice(step_id=step.id, enabled=True) for step in plan.steps}
    if named is None:
        return None
    wanted = [item.strip() for item in named.split(",") if item.strip()]
    known = [step.id for step in plan.steps]
    unknown = [item for item in wanted if item not in known]
    if unknown or not wanted:
        raise WizardError(
            f"--steps: {', '.join(unknown) or 'no step named'} not in this plan "
            f"({plan.moment}, {plan.model_kind}); its steps are {', '.join(known)}"
        )
    return {step_id: StepChoice(step_id=step_id, enabled=step_id in wanted) for step_id in known}
