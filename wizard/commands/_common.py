"""Arguments and output shared by the commands that write a config."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from wizard.changes import Prepared
    from wizard.save import SaveResult


def add_output_arguments(parser: argparse.ArgumentParser, *, dry_run: bool = True) -> None:
    """``-o OUT``, ``--changelog PATH``, ``--force`` and (optionally) ``--dry-run``."""
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="OUT",
        help="where to write the new config (default: SOURCE.oomfix.EXT, never the source)",
    )
    parser.add_argument(
        "--changelog",
        type=Path,
        metavar="PATH",
        help="where to write the change log (default: beside the output, OUT-stem.changelog.json)",
    )
    parser.add_argument(
        "--force", action="store_true", help="replace OUT if it exists (never the source)"
    )
    if dry_run:
        parser.add_argument(
            "--dry-run", action="store_true", help="show the diff and write nothing"
        )


def stdout() -> Console:
    """The console for normal output (no colour when piped)."""
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)


def print_changes(console: Console, prepared: Prepared) -> None:
    """One line per changed field: ``path: before → after``."""
    if not prepared.entries:
        console.print("Nothing to change: the config already has these values.")
        return
    for entry in prepared.entries:
        before = "(absent)" if entry.before is None else repr(entry.before)
        after = "(removed)" if entry.after is None else repr(entry.after)
        console.print(f"  {entry.path}: {before} → {after}", markup=False)


def print_saved(console: Console, result: SaveResult) -> None:
    """Where the config and its change log went."""
    console.print(f"Wrote {result.config}", markup=False)
    console.print(f"Change log {result.changelog}", markup=False)
