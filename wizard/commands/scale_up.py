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

from oom_wizard.commands._common import (
    add_edited_argument,
    print_changes,
    print_saved,
    stdout,
)


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
            "Writes the next config only with -o OUT or --yes."
        ),
    )
    parser.add_argument("config", metavar="CONFIG", help="the config the roll-back saved")
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
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Show the next re-add; write it with ``-o`` or ``--yes``."""
    from oom_wizard.application.saving import SaveResult, ToFile
    from oom_wizard.application.scale_up import (
        next_scale_up,
        nothing_left,
        open_for_scale_up,
        prepare_scale_up,
        save_scale_up,
        scale_up_notes,
        scale_up_prediction,
    )
    from oom_wizard.request import JobRequest

    config = Path(args.config)
    request = JobRequest(config, probe=False, edited_ok=args.edited_ok, changelog=args.changelog)
    state = open_for_scale_up(request, hint=" (or pass it with --changelog)")
    changelog = state.changelog
    assert changelog is not None
    console = stdout()
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
    for line in scale_up_notes(changelog, prepared, step):
        console.print(f"warning: {line}", markup=False)
    if args.dry_run or (args.output is None and not args.yes):
        console.print(prepared.diff(), markup=False)
        if not args.dry_run:
            console.print("Write it with --yes (or -o OUT).", markup=False)
        return 0
    result = save_scale_up(state, step, ToFile(args.output, force=args.force), ready=prepared)
    assert isinstance(result, SaveResult)  # a file destination writes a file
    print_saved(console, result, ui_job=Path(changelog.source.path).name == ".job_config.json")
    return 0
