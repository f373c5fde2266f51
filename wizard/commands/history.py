"""``oom-wizard history CONFIG_OR_CHANGELOG``: the story of a config, from its change log.

Each run (roll-back, scale-up, edit) with when, the moment and kind it was for, and every
field it changed with why; then what the next scale-up would re-add. Given a config, it
reads the change log beside it; given a change log, it reads the config the log describes
(its ``output``) to say what comes next.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oom_wizard.commands._common import change_line, stdout
from oom_wizard.errors import WizardError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rich.console import Console

    from oom_wizard.changelog import ChangeLog
    from oom_wizard.document import JobDocument
    from oom_wizard.plan import ScaleUp

_DIRECTIONS = {
    "rollback": "roll-back",
    "scale_up": "scale-up",
    "edit": "edit",
    "restore": "restore",
}


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
        help="a config that oom-wizard saved, or its .changelog.json",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the history."""
    from oom_wizard.changelog import (
        CHANGELOG_SUFFIX,
        changelog_for,
        changelog_path_for,
        read_changelog,
        resolve_recorded,
        sha256_of,
    )
    from oom_wizard.document import (
        MAX_CONFIG_BYTES,
        NotRegularFile,
        load_document,
        read_regular_file,
    )

    target = Path(args.target)
    if not args.target:
        raise WizardError(
            "the name is empty: give a config that oom-wizard saved, or its .changelog.json"
        )
    if target.is_dir() or target.name in ("", ".", ".."):
        raise WizardError(
            "this is a folder, not a file: give a config that oom-wizard saved, or its "
            ".changelog.json",
            file=target,
        )
    note: str | None = None
    if target.name.endswith(CHANGELOG_SUFFIX):
        log_path = target
        changelog = read_changelog(target)
        config = resolve_recorded(target, changelog.output.path)
        document = load_document(config) if config.is_file() else None
        # A file at the recorded path that is not the one saved says nothing about this log.
        if document is not None and changelog.output.sha256 != sha256_of(config.read_bytes()):
            document = None
    else:
        if not target.exists():
            raise WizardError("no such file", file=target)
        try:
            raw = read_regular_file(target, MAX_CONFIG_BYTES + 1)
        except NotRegularFile as exc:
            raise WizardError(f"this is {exc.kind}, not a config", file=target) from None
        belonging = changelog_for(target, raw, changelog_path_for(target))
        if belonging is None:
            raise WizardError(
                "no change log beside this config that describes it: oom-wizard did not save "
                "it (or its .changelog.json was moved)",
                file=target,
            )
        log_path, changelog = belonging.path, belonging.log
        document = None if belonging.edited else load_document(target)
        note = belonging.note(target)
    render_history(stdout(), changelog, log_path, document, note=note)
    return 0


def render_history(
    console: Console,
    changelog: ChangeLog,
    log_path: Path,
    document: JobDocument | None,
    *,
    note: str | None = None,
) -> None:
    """The change log as text, and the next re-add when the config is at hand (and is the
    one the log saved: ``note`` says why not)."""
    from oom_wizard.service import change_why

    if note is not None:
        console.print(f"note: {note}", markup=False)
    console.print(f"Change log {log_path}", markup=False)
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
        header = f"Run {index} · {run.at} · {_DIRECTIONS.get(run.direction, run.direction)}"
        console.print(f"{header}{f' ({about})' if about else ''}", markup=False)
        if run.steps:
            console.print(f"  steps: {', '.join(run.steps)}", markup=False)
        entries = changelog.changes_of_run(index)
        if not entries:
            console.print("  no field changed", markup=False)
        for entry in entries:
            console.print(change_line(entry.path, entry.before, entry.after), markup=False)
            why = change_why(entry)
            if why:
                console.print(f"      why: {why}", markup=False)
    console.print("", markup=False)
    if changelog.attempts:
        _render_attempts(console, changelog)
    _render_next(console, changelog, document)


def _render_attempts(console: Console, changelog: ChangeLog) -> None:
    """The trainer runs of ``oom-wizard run``, in order: a timeline."""
    from oom_wizard.application.autopilot import describe_record

    console.print("Attempts (oom-wizard run)", markup=False)
    for number, record in enumerate(changelog.attempts, start=1):
        console.print(f"  {number}. {record.at} · {describe_record(record)}", markup=False)
    console.print("", markup=False)


def _render_next(console: Console, changelog: ChangeLog, document: JobDocument | None) -> None:
    from oom_wizard.paths import format_path
    from oom_wizard.service import scale_ups_ahead

    if document is None:
        console.print(
            "Next scale-up: unknown (the latest config is not at its recorded path, or was "
            "edited after the save: 'oom-wizard scale-up CONFIG --edited-ok' plans from it).",
            markup=False,
        )
        return
    ahead = scale_ups_ahead(document, changelog)  # the first is next_scale_up's
    if not ahead:
        from oom_wizard.scaleup import nothing_left_text

        first, *rest = nothing_left_text(document, changelog)
        console.print(f"Next scale-up: nothing left; {first}", markup=False)
        for line in rest:
            console.print(line, markup=False)
        return
    from oom_wizard.scaleup import stop_text

    stops = [index for index, found in enumerate(ahead) if stop_text(changelog, found)]
    if stops:
        stopped = stop_text(changelog, ahead[stops[0]])
        ahead = ahead[: stops[0]]
        if not ahead:
            console.print(f"Next scale-up: none offered; {stopped}", markup=False)
            return
        console.print(f"The scale-up stops before: {stopped}", markup=False)
    step = ahead[0]
    console.print(f"Next scale-up: {step.title} [{step.step}]", markup=False)
    for change in step.changes:
        line = change_line(format_path(change.path), document.get(change.path), change.after)
        console.print(line, markup=False)
    _render_later(console, ahead)


#: The heading of the re-adds ahead (the result screen's "later" section lists the same).
LATER_HEADING = "Later, one setting back per retry that trains through:"


def _render_later(console: Console, ahead: Sequence[ScaleUp]) -> None:
    """Every re-add ahead, numbered: the same lines as the app's result screen."""
    from oom_wizard.service import later_lines

    console.print(LATER_HEADING, markup=False)
    for line in later_lines(ahead):
        console.print(line, markup=False)
