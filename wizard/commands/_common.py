"""Arguments and output shared by the commands: the crash answers, the output files, the
line that shows a change, and the app's run.

Loaded before the app starts (``open``, ``demo``, ``watch``), so it stays off the
application layer: what the commands print of its results is in
:mod:`oom_wizard.commands._report`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oom_wizard.errors import WizardError
from oom_wizard.spelling import change
from oom_wizard.vocabulary import MODEL_KINDS, MOMENTS

if TYPE_CHECKING:
    from rich.console import Console
    from textual.app import AutopilotCallbackType

    from oom_wizard.screens.app import OomWizardApp


def add_crash_arguments(
    parser: argparse.ArgumentParser, *, moment_help: str, kind_help: str, log_help: str
) -> None:
    """``--moment``, ``--kind``, ``--log`` and ``--no-probe``: what is known about the crash.

    Args:
        parser: The command's parser.
        moment_help: What ``--moment`` means for this command (its default, if any).
        kind_help: The same for ``--kind``.
        log_help: The same for ``--log``.
    """

    parser.add_argument("--moment", choices=MOMENTS, help=moment_help)
    parser.add_argument("--kind", choices=MODEL_KINDS, help=kind_help)
    parser.add_argument("--log", type=Path, metavar="LOG", help=log_help)
    add_probe_argument(parser)
    add_edited_argument(parser)


def add_probe_argument(parser: argparse.ArgumentParser) -> None:
    """``--no-probe``: every command that opens a job (and the wizard) honours it alike."""
    parser.add_argument(
        "--no-probe", action="store_true", help="do not ask nvidia-smi about the GPU now"
    )


def add_edited_argument(parser: argparse.ArgumentParser) -> None:
    """``--edited-ok``: the user's word to go on from a config edited after our save."""
    parser.add_argument(
        "--edited-ok",
        action="store_true",
        help="the config was edited after oom-wizard saved it: go on from it as it is now, "
        "with its change log (without it, such a config is refused)",
    )


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


def change_line(path: str, before: Any, after: Any) -> str:
    """``  path: before → after``, spelled by :func:`oom_wizard.spelling.change`."""

    return f"  {change(path, before, after)}"


def need_terminal(command: str, instead: str) -> None:
    """Refuse a full-screen command without a terminal on standard input and output: the app
    would never end there, and would write its escape sequences into the redirected output.

    Raises:
        WizardError: one line naming ``instead``, what does the same job without a terminal.
    """
    streams = (("standard input", sys.stdin), ("standard output", sys.stdout))
    missing = [name for name, stream in streams if not _a_terminal(stream)]
    if not missing:
        return
    which = (
        f"{missing[0]} is not one" if len(missing) == 1 else "neither standard input nor output is"
    )
    raise WizardError(
        f"'oom-wizard {command}' is full-screen and needs a terminal, and {which}; {instead}"
    )


def _a_terminal(stream: object) -> bool:
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError, OSError):
        return False  # none (a closed descriptor), or closed


def run_wizard(
    app: OomWizardApp,
    console: Console | None = None,
    *,
    headless: bool = False,
    auto_pilot: AutopilotCallbackType | None = None,
) -> int:
    """Run the app; once it is closed, print its summary (what was saved, how to run it).

    The exit status is the app's. ``headless`` and ``auto_pilot`` are Textual's, for tests.
    """
    app.run(headless=headless, auto_pilot=auto_pilot)
    for line in app.leaving().lines:
        (console or stdout()).print(line, markup=False)
    return app.return_code or 0
