"""``oom-wizard history CONFIG_OR_CHANGELOG``: the story of a config, from its change log.

Each run (roll-back, scale-up, edit) with when, the moment and kind it was for, and every
field it changed with why; then what the next scale-up would re-add. Given a config, it
reads the change log beside it; given a change log, it reads the config the log describes
(its ``output``) to say what comes next.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from oom_wizard.application.attempts import describe_record
from oom_wizard.application.history import (
    change_why,
    host_words,
    later_lines,
    next_scale_ups,
    read_history,
    read_job_history,
)
from oom_wizard.commands._common import change_line, stdout
from oom_wizard.commands._jobdb import add_db_arguments, wants_db
from oom_wizard.commands._report import show_jobs
from oom_wizard.errors import WizardError
from oom_wizard.spelling import direction

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rich.console import Console

    from oom_wizard.application.history import History
    from oom_wizard.rules.plan import ScaleUp
    from oom_wizard.storage.changelog import ChangeLog


def add_parser(subparsers: Any) -> None:
    """Register ``history``."""
    parser = subparsers.add_parser(
        "history",
        help="show what each run changed and why, and what scale-up re-adds next",
        description=(
            "Render a change log: every run of oom-wizard on this line of configs, what it "
            "changed and why, and what the next scale-up would re-add."
        ),
    )
    parser.add_argument(
        "target",
        metavar="CONFIG_OR_CHANGELOG",
        nargs="?",
        help="a config that oom-wizard saved, or its .changelog.json",
    )
    add_db_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the history."""

    console = stdout()
    if wants_db(args, args.target):
        if args.job is None:
            return show_jobs(args.db, console)
        history = read_job_history(args.db, args.job)
    elif args.target is None:
        raise WizardError(
            "give a config that oom-wizard saved, its .changelog.json, or --db PATH --job NAME"
        )
    else:
        history = read_history(args.target)
    render_history(console, history)
    return 0


def render_history(console: Console, history: History) -> None:
    """The change log as text, and the next re-add when the config is at hand (and is the
    one the log saved: its note says why not)."""

    changelog, log_path = history.changelog, history.log_path
    if history.note is not None:
        console.print(f"note: {history.note}", markup=False)
    console.print(f"Change log {log_path}", markup=False)
    if history.job is not None:  # the row is the config: no file of its own to name
        console.print(f"  {history.job}", markup=False)
    else:
        console.print(f"  original config: {changelog.source.path}", markup=False)
        console.print(f"  latest config:   {changelog.output.path}", markup=False)
    for index, run in enumerate(changelog.runs):
        console.print("", markup=False)
        about = ", ".join(
            text
            for text in (
                f"moment {run.moment}" if run.moment else "",
                f"{run.model_kind} model" if run.model_kind else "",
            )
            if text
        )
        header = f"Run {index} · {run.at} · {direction(run.direction)}"
        console.print(f"{header}{f' ({about})' if about else ''}", markup=False)
        if run.steps:
            console.print(f"  steps: {', '.join(run.steps)}", markup=False)
        if (host := host_words(run.memory)) is not None:
            console.print(f"  {host}", markup=False)
        entries = changelog.changes_of_run(index)
        if not entries:
            console.print("  no field changed", markup=False)
        for entry in entries:
            console.print(change_line(entry.path, entry.before, entry.after), markup=False)
            why = change_why(entry, run.direction)
            if why:
                console.print(f"      why: {why}", markup=False)
    console.print("", markup=False)
    if changelog.attempts:
        _render_attempts(console, changelog)
    _render_next(console, history)


def _render_attempts(console: Console, changelog: ChangeLog) -> None:
    """The trainer runs of ``oom-wizard run`` and those ``watch`` followed, in order: a
    timeline, each with what the model said of its config against what was measured."""

    watched = any(record.watched for record in changelog.attempts)
    console.print(f"Attempts (oom-wizard run{' and watch' if watched else ''})", markup=False)
    for number, record in enumerate(changelog.attempts, start=1):
        console.print(f"  {number}. {record.at} · {describe_record(record)}", markup=False)
    console.print("", markup=False)


def _render_next(console: Console, history: History) -> None:

    found = next_scale_ups(history)
    if found is None and history.job is not None:
        console.print(
            "Next scale-up: unknown (the job was edited in the UI after the save: "
            f"'oom-wizard scale-up --db DB --job NAME --edited-ok' plans from it; {history.job}).",
            markup=False,
        )
        return
    if found is None:
        console.print(
            "Next scale-up: unknown (the latest config is not at its recorded path, or was "
            "edited after the save: 'oom-wizard scale-up CONFIG --edited-ok' plans from it).",
            markup=False,
        )
        return
    if found.nothing_left:
        first, *rest = found.nothing_left
        console.print(f"Next scale-up: nothing left; {first}", markup=False)
        for line in rest:
            console.print(line, markup=False)
        return
    if found.stopped is not None:
        if not found.ahead:
            console.print(f"Next scale-up: none offered; {found.stopped}", markup=False)
            return
        console.print(f"The scale-up stops before: {found.stopped}", markup=False)
    step = found.ahead[0]
    console.print(f"Next scale-up: {step.title} [{step.step}]", markup=False)
    for path, now, back in found.first_changes:
        console.print(change_line(path, now, back), markup=False)
    _render_later(console, found.ahead)


#: The heading of the re-adds ahead (the result screen's "later" section lists the same).
LATER_HEADING = "Later, one setting back per retry that trains through:"


def _render_later(console: Console, ahead: Sequence[ScaleUp]) -> None:
    """Every re-add ahead, numbered: the same lines as the app's result screen."""

    console.print(LATER_HEADING, markup=False)
    for line in later_lines(ahead):
        console.print(line, markup=False)
