"""``oom-wizard plan CONFIG``: the roll-back steps for a crashed job, without writing anything.

The moment and the model kind come from ``--moment`` / ``--kind`` when given, else from the
diagnosis of ``--log`` (or of the job folder's log), else from defaults that are always
named: the moment ``early_steps`` (see :data:`wizard.plan.DEFAULT_MOMENT`) and the kind the
arch implies. ``apply`` shares this module's argument handling, so both see the same plan.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wizard.commands._common import add_crash_arguments, stdout
from wizard.commands._jobdb import add_db_arguments, load_db_job, show_jobs, wants_db
from wizard.errors import WizardError

if TYPE_CHECKING:
    from rich.console import Console

    from wizard.changelog import ChangeLog
    from wizard.document import JobDocument
    from wizard.jobdb import DbJob
    from wizard.jobdir import JobLocation
    from wizard.logscan import LogScan
    from wizard.plan import DiagnosisLike, MemoryEstimate, Plan, StepProposal


def add_parser(subparsers: Any) -> None:
    """Register ``plan``."""
    parser = subparsers.add_parser(
        "plan",
        help="show the roll-back steps for a crashed job (writes nothing)",
        description=(
            "Show the memory roll-back for a job that died with CUDA out of memory: the steps "
            "in order, each with the fields it would change (before → after), which are on "
            "by default, and a relative memory estimate. Writes nothing; 'apply' saves it."
        ),
    )
    add_target_arguments(parser)
    add_db_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    parser.set_defaults(handler=run)


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    """CONFIG (or JOB_DIR), ``--moment``, ``--kind``, ``--log`` and ``--new-crash``."""
    parser.add_argument(
        "config",
        nargs="?",
        metavar="CONFIG",
        help="the job config (.yaml, .yml, .json, .jsonc), or the job's output folder",
    )
    add_crash_arguments(
        parser,
        moment_help="when it crashed (default: from the log, else early_steps, said so)",
        kind_help="image or video model (default: from the arch)",
        log_help="the training log (log.txt)",
    )
    parser.add_argument(
        "--new-crash",
        action="store_true",
        help="this config is our earlier roll-back and it crashed again: go one rung further",
    )


@dataclass(frozen=True)
class Target:
    """The job a plan is for, and what decided its moment and kind.

    Attributes:
        document: The config.
        changelog: The change log that describes it, when it is our own output.
        moment: The crash moment in effect.
        kind: The model kind in effect.
        diagnosis: The log's diagnosis, when there was a log.
        new_crash: It crashed again after the change log's last roll-back.
        notes: Where the moment and kind came from, and anything assumed.
        job: The jobs-database row, for ``--db``.
    """

    document: JobDocument
    changelog: ChangeLog | None
    moment: str
    kind: str
    diagnosis: DiagnosisLike | None
    new_crash: bool
    notes: tuple[str, ...]
    job: DbJob | None = None


def load_target(args: argparse.Namespace) -> Target:
    """Read the config, its change log and its log, and settle the moment and kind.

    Raises:
        WizardError: no config, or one of the files cannot be read.
    """
    source = _from_db(args) if wants_db(args, args.config) else _from_file(args)
    diagnosis = _diagnose(source, source.log, args) if source.log is not None else None
    moment, moment_note = _moment(args.moment, diagnosis)
    kind, kind_note = _kind(source.document, args.kind, diagnosis)
    crashed_again = _crashed_since(source.log, source.changelog, diagnosis)
    notes = [*source.notes, moment_note, kind_note]
    if crashed_again and not args.new_crash:
        notes.append(
            "The log is newer than the last roll-back and shows a crash: one rung further."
        )
    return Target(
        document=source.document,
        changelog=source.changelog,
        moment=moment,
        kind=kind,
        diagnosis=diagnosis,
        new_crash=bool(args.new_crash) or crashed_again,
        notes=tuple(notes),
        job=source.job,
    )


@dataclass(frozen=True)
class _Source:
    """What was read for a target: the config, its change log, the log to diagnose."""

    document: JobDocument
    changelog: ChangeLog | None
    log: Path | None
    scan: LogScan | None = None
    notes: tuple[str, ...] = ()
    job: DbJob | None = None


def _from_file(args: argparse.Namespace) -> _Source:
    """A config file or a job folder (whose log is used unless ``--log`` names one)."""
    from wizard.changelog import find_changelog, read_changelog
    from wizard.document import load_document
    from wizard.jobdir import locate_job

    if args.config is None:
        raise WizardError("give the job's config file (or its folder), or --db PATH --job NAME")
    located = locate_job(Path(args.config))
    found = find_changelog(located.config)
    document = load_document(located.config)
    source = _Source(
        document=document,
        changelog=read_changelog(found) if found is not None else None,
        log=args.log,
        notes=(ui_job_note(located.config, document),) if located.ui_job else (),
    )
    return _with_located_log(source, located, args)


def ui_job_note(config: Path, document: JobDocument) -> str:
    """For a web-UI job's ``.job_config.json``: the UI rewrites it from its database at every
    start, so point to ``--db`` and the database found for it."""
    from wizard.jobdb import DB_FILE_NAME

    name = config.parent.name
    candidates = []
    primary = document.view().primary
    recorded = document.get(primary.path("sqlite_db_path")) if primary is not None else None
    if isinstance(recorded, str) and recorded:
        candidates.append(Path(recorded))
    candidates.append(config.parent.parent.parent / DB_FILE_NAME)
    found = next((path for path in candidates if path.is_file()), None)
    where = f"--db {found} --job {name}" if found else f"--db PATH/{DB_FILE_NAME} --job {name}"
    return (
        f"{config.name} is written anew from AI Toolkit's jobs database at every start, so a "
        f"fixed copy of it changes nothing in the UI; to fix the job itself use {where}"
        + ("" if found else " (the database is aitk_db.db in the toolkit's folder)")
    )


def _from_db(args: argparse.Namespace) -> _Source:
    """A job of AI Toolkit's jobs database (``--db PATH --job NAME``)."""
    from wizard.jobdb import read_job_changelog

    document, located, job = load_db_job(args)
    source = _Source(document, read_job_changelog(job), args.log, job=job)
    return _with_located_log(source, located, args)


def _with_located_log(source: _Source, located: JobLocation, args: argparse.Namespace) -> _Source:
    """The job folder's log (and its note), unless ``--log`` names one."""
    if args.log is not None or located.log is None:
        return source
    notes = (*source.notes, *((located.log_note,) if located.log_note else ()))
    return dataclasses.replace(source, log=located.log, scan=located.log_scan, notes=notes)


def _diagnose(source: _Source, log: Path, args: argparse.Namespace) -> DiagnosisLike:
    from wizard.diagnosis import diagnose
    from wizard.logscan import scan_log

    answers = {
        key: value
        for key, value in (("moment", args.moment), ("model_kind", args.kind))
        if value is not None
    }
    scan = source.scan or scan_log(log)
    return diagnose(scan, source.document.view(), answers=answers, changelog=source.changelog)


def _moment(flag: str | None, diagnosis: DiagnosisLike | None) -> tuple[str, str]:
    from wizard.plan import DEFAULT_MOMENT
    from wizard.vocabulary import MOMENTS

    if flag is not None:
        return flag, f"moment {flag} (--moment)"
    found = diagnosis.moment if diagnosis is not None else None
    if found in MOMENTS:
        return str(found), f"moment {found} (from the log)"
    why = "the log does not say when" if diagnosis is not None else "no --moment and no log"
    return DEFAULT_MOMENT, (
        f"moment {DEFAULT_MOMENT} assumed ({why}): the first training steps are where most "
        "OOMs happen, and their changes are the main memory levers; pass --moment to change it"
    )


def _kind(
    document: JobDocument, flag: str | None, diagnosis: DiagnosisLike | None
) -> tuple[str, str]:
    from wizard.plan import default_model_kind
    from wizard.vocabulary import MODEL_KINDS

    if flag is not None:
        return flag, f"model kind {flag} (--kind)"
    found = diagnosis.model_kind if diagnosis is not None else None
    if found in MODEL_KINDS:
        return str(found), f"model kind {found} (from the log and config)"
    kind, reason = default_model_kind(document)
    return kind, f"model kind {kind} ({reason})"


def _crashed_since(
    log: Path | None, changelog: ChangeLog | None, diagnosis: DiagnosisLike | None
) -> bool:
    """Whether the log crashed after the change log's last roll-back was saved."""
    if log is None or changelog is None or diagnosis is None:
        return False
    rollbacks = [run for run in changelog.runs if run.direction == "rollback"]
    if not rollbacks or not diagnosis.crashed:
        return False
    try:
        saved = datetime.fromisoformat(rollbacks[-1].at)
        written = datetime.fromtimestamp(log.stat().st_mtime, tz=timezone.utc)
    except (ValueError, OSError):
        return False
    return written > saved


def build(target: Target) -> Plan:
    """The plan for a target."""
    from wizard.plan import build_plan

    return build_plan(
        target.document,
        target.moment,
        target.kind,
        changelog=target.changelog,
        diagnosis=target.diagnosis,
        new_crash=target.new_crash,
    )


def run(args: argparse.Namespace) -> int:
    """Print the plan (as text, or as JSON with ``--json``)."""
    if wants_db(args, args.config) and args.job is None:
        return show_jobs(args.db, stdout())
    target = load_target(args)
    plan = build(target)
    if args.json:
        for note in target.notes:
            print(f"oom-wizard: {note}", file=sys.stderr)
        print(json.dumps(plan.to_json(), indent=2, ensure_ascii=False))
        return 0
    render_plan(stdout(), target, plan)
    return 0


# --------------------------------------------------------------------------- text


def render_plan(console: Console, target: Target, plan: Plan) -> None:
    """The plan as text: context, the default fix's estimate (and, when nothing lowers the
    crashed peak, that the ladder is exhausted and what remains), then one block per step."""
    from wizard.plan import changes_for, estimate

    console.print(f"Roll-back plan for {target.document.source}", markup=False)
    for note in target.notes:
        console.print(f"  {note}", markup=False)
    for warning in target.document.warnings:
        console.print(f"  warning: {warning}", markup=False)
    if plan.environment_checks:
        render_checks(console, plan)
        return
    figures = plan.estimate or estimate(target.document, changes_for(plan), plan.model_kind)
    console.print(
        f"  with the default steps: {describe_estimate(figures, plan.moment)}", markup=False
    )
    console.print(f"  {figures.note}", markup=False)
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
        render_step(console, target, plan, number, step)
    console.print(
        "Apply the default steps with 'oom-wizard apply', all of them with --all, "
        "or name them with --steps ID,ID.",
        markup=False,
    )


def render_checks(console: Console, plan: Plan) -> None:
    """What to check for an ``environment`` crash (the config does not change)."""
    console.print("")
    console.print(
        "Nothing in the config changes: the GPU or the worker is the problem. Check:",
        markup=False,
    )
    for check in plan.environment_checks:
        console.print(f"  - {check}", markup=False)


def render_step(
    console: Console, target: Target, plan: Plan, number: int, step: StepProposal
) -> None:
    """One step: title and state, its fields, why, where in the UI, its note and estimate."""
    from wizard.plan import StepChoice, changes_for, estimate

    if not step.available:
        state = "not available for this model"
    elif step.satisfied:
        state = "done"
    elif step.default_on:
        state = "on by default"
    else:
        state = "offered, off by default"
    console.print(f"{number:2}. {step.title} [{step.id}]: {state}", markup=False)
    for proposal in step.fields:
        toggle = "on " if proposal.default_on else "off"
        after = "(dropped)" if proposal.control == "bucket" else show(proposal.after)
        console.print(
            f"      [{toggle}] {proposal.label}: {show(proposal.before)} → {after}", markup=False
        )
    console.print(f"      why: {' '.join(step.why.split())}", markup=False)
    if step.ui_hint:
        console.print(f"      in AI Toolkit's UI: {step.ui_hint}", markup=False)
    if step.costs:
        console.print(f"      costs: {step.costs}", markup=False)
    if step.note:
        console.print(f"      note: {step.note}", markup=False)
    if step.fields and not step.satisfied:
        alone = changes_for(plan, {step.id: StepChoice(step_id=step.id, enabled=True)})
        figures = estimate(target.document, alone, plan.model_kind)
        console.print(
            f"      this step alone: {describe_estimate(figures, plan.moment)}", markup=False
        )
    console.print("")


def describe_estimate(figures: MemoryEstimate, moment: str | None = None) -> str:
    """``training ≈ 25 % of today, samples ≈ 56 %; weights on the GPU ≈ 16.9 → 9.1 GiB``
    (approximate), and for a crash ``moment``, whether the peak it ran into goes down."""
    from wizard.estimate import CRASHED_PEAK, PEAK_WORDS

    text = f"training ≈ {figures.train_pct:g} % of today"
    if figures.sample_pct is not None:
        text += f", samples ≈ {figures.sample_pct:g} %"
    text += " (relative activation load"
    if moment is not None:
        before, after = figures.weights_gib(moment)
        if before is not None and after is not None:
            text += f"; weights on the GPU ≈ {before:g} → {after:g} GiB"
    text += ", approximate)"
    if moment is not None and moment in CRASHED_PEAK and not figures.lowers(moment):
        text += f"; this leaves {PEAK_WORDS[CRASHED_PEAK[moment]]} unchanged"
    return text


def show(value: Any) -> str:
    """A config value for a one-line display (``(absent)`` for a missing key)."""
    from wizard.document import MISSING

    if value is MISSING:
        return "(absent)"
    return json.dumps(value, ensure_ascii=False)
