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
from oom_wizard.errors import WizardError


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
    from oom_wizard.changelog import changelog_for, changelog_path_for, refuse_edited
    from oom_wizard.changes import commit, prepare
    from oom_wizard.document import load_document
    from oom_wizard.plan import next_scale_up

    config = Path(args.config)
    document = load_document(config)
    log_path = args.changelog or changelog_path_for(config)
    belonging = changelog_for(
        config, config.read_bytes(), log_path, given=args.changelog is not None
    )
    if belonging is None:
        raise WizardError(
            "no change log beside this config that describes it; scale-up needs the "
            ".changelog.json that 'apply' wrote (or pass it with --changelog)",
            file=config,
        )
    if belonging.edited and not args.edited_ok:
        raise refuse_edited(belonging, config)
    changelog = belonging.log
    console = stdout()
    note = belonging.note(config)
    if note is not None:
        console.print(f"note: {note}", markup=False)
    step = next_scale_up(document, changelog)
    if step is None:
        from oom_wizard.scaleup import nothing_left_text

        first, *rest = nothing_left_text(document, changelog)
        console.print(f"Nothing left to re-add: {first}", markup=False)
        for line in rest:
            console.print(line, markup=False)
        return 0
    console.print(f"Next re-add: {step.title} [{step.step}]", markup=False)
    console.print(f"  {step.why}", markup=False)
    from oom_wizard.scaleup import predict

    last_run = changelog.last_run()
    kind = (last_run.model_kind if last_run is not None else None) or "image"
    prediction = predict(document, changelog, log_path, step, kind)
    if prediction is not None:
        console.print(f"  {prediction.words}", markup=False)
    prepared = prepare(document, list(step.changes))
    print_changes(console, prepared)
    from oom_wizard.service import scale_up_notes

    for line in scale_up_notes(changelog, prepared, step):
        console.print(f"warning: {line}", markup=False)
    if args.dry_run or (args.output is None and not args.yes):
        console.print(prepared.diff(), markup=False)
        if not args.dry_run:
            console.print("Write it with --yes (or -o OUT).", markup=False)
        return 0
    last = changelog.last_run()
    result = commit(
        prepared,
        direction="scale_up",
        model_kind=last.model_kind if last is not None else None,
        steps=[step.step],
        output=args.output,
        force=args.force,
        prior=changelog,
    )
    print_saved(console, result, ui_job=Path(changelog.source.path).name == ".job_config.json")
    return 0
