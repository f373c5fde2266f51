"""``oom-wizard scale-up CONFIG``: after a stable run, get one heavier setting back.

It reads the change log that describes CONFIG (beside it, or ``--changelog``) and proposes
exactly one re-add, in the fixed scale-up order. With ``-o OUT`` or ``--yes`` it writes the
next config and a change log that extends CONFIG's with a ``scale_up`` run (its ``source``
stays the original config); otherwise it only shows what it would do.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from oom_wizard.application.saving import DbSaveResult, SaveResult, ToFile, check_destination
from oom_wizard.application.scale_up import (
    next_scale_up,
    nothing_left,
    open_for_scale_up,
    prepare_scale_up,
    save_scale_up,
    scale_up_notes,
    scale_up_prediction,
)
from oom_wizard.commands._common import add_edited_argument, stdout
from oom_wizard.commands._jobdb import add_db_arguments, wants_db
from oom_wizard.commands._report import (
    print_changes,
    print_db_saved,
    print_saved,
    save_mode,
    show_jobs,
)
from oom_wizard.errors import WizardError
from oom_wizard.request import JobRequest


def add_parser(subparsers: Any) -> None:
    """Register ``scale-up``."""
    parser = subparsers.add_parser(
        "scale-up",
        help="after a stable run, re-add one setting the roll-back lowered",
        description=(
            "Propose exactly one re-add from the change log, in this order: the step count of "
            "a validation run, the biggest resolution, richer samples, the larger batch, "
            "longer clips; then, last, the low-memory path and checkpointing (they buy speed, "
            "not quality). Each restored field gets its value from before the roll-back. "
            "Writes the next config only with -o OUT or --yes; a web-UI job (--db PATH --job "
            "NAME) only with --in-place or --as-new [NAME]."
        ),
    )
    parser.add_argument(
        "config", metavar="CONFIG", nargs="?", help="the config the roll-back saved"
    )
    parser.add_argument(
        "--changelog",
        type=Path,
        metavar="PATH",
        help="CONFIG's change log (default: the one beside it, CONFIG-stem.changelog.json)",
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="OUT",
        help="write the next config here (default with --yes: CONFIG's name, next number)",
    )
    parser.add_argument("--yes", action="store_true", help="write it under the default name")
    parser.add_argument(
        "--force", action="store_true", help="replace OUT if it exists (never the source)"
    )
    parser.add_argument("--dry-run", action="store_true", help="show the diff, write nothing")
    add_edited_argument(parser)
    add_db_arguments(parser, saving=True)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Show the next re-add; write it with ``-o`` or ``--yes``."""

    console = stdout()
    if wants_db(args, args.config):
        if args.job is None:
            return show_jobs(args.db, console)
        request = JobRequest(db=args.db, job=args.job, probe=False, edited_ok=args.edited_ok)
    elif args.config is None:
        raise WizardError("give the config the roll-back saved (or --db PATH --job NAME)")
    else:
        request = JobRequest(
            Path(args.config), probe=False, edited_ok=args.edited_ok, changelog=args.changelog
        )
    state = open_for_scale_up(request, hint=" (or pass it with --changelog)")
    if state.db_job is None and args.output is not None and not args.dry_run:
        check_destination(state, ToFile(args.output, force=args.force))
    changelog = state.changelog
    assert changelog is not None
    if state.job.changelog_note is not None:
        console.print(f"note: {state.job.changelog_note}", markup=False)
    step = next_scale_up(state)
    if step is None:
        first, *rest = nothing_left(state)
        console.print(f"Nothing left to re-add: {first}", markup=False)
        for line in rest:
            console.print(line, markup=False)
        return 0
    console.print(f"Next re-add: {step.title} [{step.step}]", markup=False)
    console.print(f"  {step.why}", markup=False)
    prediction = scale_up_prediction(state, step)
    if prediction is not None:
        console.print(f"  {prediction.words}", markup=False)
    prepared = prepare_scale_up(state, step)
    print_changes(console, prepared)
    for line in scale_up_notes(state, prepared, step):
        console.print(f"warning: {line}", markup=False)
    to_db = state.db_job is not None
    asked = (args.in_place or args.as_new is not None) if to_db else args.output or args.yes
    if args.dry_run or not asked:
        console.print(prepared.shown_diff(), markup=False)
        if not args.dry_run:
            how = "--in-place (or --as-new [NAME])" if to_db else "--yes (or -o OUT)"
            console.print(f"Write it with {how}.", markup=False)
        return 0
    if to_db:
        saved = save_scale_up(state, step, save_mode(args), ready=prepared)
        assert isinstance(saved, DbSaveResult)  # a database destination writes the row
        print_db_saved(console, saved)
        return 0
    result = save_scale_up(state, step, ToFile(args.output, force=args.force), ready=prepared)
    assert isinstance(result, SaveResult)  # a file destination writes a file
    print_saved(console, result, ui_job=Path(changelog.source.path).name == ".job_config.json")
    return 0
