"""``oom-wizard set CONFIG PATH=VALUE ...``: the document layer on the command line."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from oom_wizard.application.editing import prepare_set, save_set
from oom_wizard.commands._common import add_output_arguments, stdout
from oom_wizard.commands._report import print_changes, print_saved


def add_parser(subparsers: Any) -> None:
    """Register ``set``."""
    parser = subparsers.add_parser(
        "set",
        help="change fields of a config by path, into a new file with a change log",
        description=(
            "Change fields by path (AI Toolkit's notation) and save a new config beside "
            "the source, with a change log. VALUE is a YAML scalar or flow list: "
            'true, 1, 0.0001, [512, 768], "text". Each value is checked as the app checks a '
            "typed one; removing a whole section (--unset of a mapping or list) needs --force."
        ),
    )
    parser.add_argument("config", help="the job config (.yaml, .yml, .json, .jsonc)")
    parser.add_argument(
        "assignments",
        nargs="*",
        metavar="PATH=VALUE",
        help="e.g. config.process[0].train.batch_size=1",
    )
    parser.add_argument("--unset", action="append", default=[], metavar="PATH", help="remove a key")
    add_output_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Apply the assignments and save, or show them with ``--dry-run``."""
    edit = prepare_set(Path(args.config), args.assignments, args.unset, force=args.force)
    prepared = edit.prepared
    console = stdout()
    for warning in edit.document.warnings:
        console.print(f"warning: {warning}", markup=False)
    if args.dry_run or not prepared.changed:
        print_changes(console, prepared)
        if prepared.changed:
            console.print(prepared.shown_diff(), markup=False)
        return 0
    result = save_set(edit, output=args.output, changelog=args.changelog, force=args.force)
    print_changes(console, prepared)
    print_saved(console, result)
    return 0
