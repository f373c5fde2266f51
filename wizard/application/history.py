"""``history``: the change log's story in words."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oom_wizard.application.attempts import repeated_crash_note
from oom_wizard.errors import WizardError
from oom_wizard.formats.document import (
    MAX_CONFIG_BYTES,
    JobDocument,
    NotRegularFile,
    load_document,
    read_regular_file,
)
from oom_wizard.paths import format_path
from oom_wizard.rules.catalog import load_presets
from oom_wizard.rules.limits import check_changelog
from oom_wizard.rules.plan import ScaleUp
from oom_wizard.rules.scaleup import nothing_left_text, pending_scale_ups, stop_text
from oom_wizard.spelling import verdict as verdict_words
from oom_wizard.storage.atomic import recover_beside, settle
from oom_wizard.storage.changelog import (
    CHANGELOG_SUFFIX,
    ChangeEntry,
    ChangeLog,
    changelog_for,
    changelog_path_for,
    read_changelog,
    resolve_recorded,
    sha256_of,
)
from oom_wizard.storage.changes import prepare
from oom_wizard.storage.jobdb import changelog_folder, find_db, job_document, load_job
from oom_wizard.storage.leftovers import SETTLE_WAIT_S, unfinished_in


@dataclass(frozen=True)
class History:
    """A config's story as ``history`` tells it.

    Attributes:
        changelog: The change log, read once.
        log_path: Where it is.
        document: The config it describes, when it is at hand and is the one the log saved
            (None: the next scale-up is unknown).
        note: Why the config is not the one saved (edited after the save), if so.
        job: For a job of AI Toolkit's web UI, the job in words (its config is its row).
    """

    changelog: ChangeLog
    log_path: Path
    document: JobDocument | None
    note: str | None = None
    job: str | None = None
    """A web-UI job's name and database, in words (None: a config file's story)."""


def read_history(typed: str) -> History:
    """The change log ``target`` names (a config that oom-wizard saved, by the one rule of
    :func:`oom_wizard.storage.changelog.changelog_for`, or the ``.changelog.json`` itself) and the
    config it describes.

    Raises:
        WizardError: an empty name, a folder, no such file, a FIFO or device, a config no
            change log describes, or a file that cannot be read.
    """

    target = Path(typed)
    if not typed:
        raise WizardError(
            "the name is empty: give a config that oom-wizard saved, or its .changelog.json"
        )
    if target.is_dir() or target.name in ("", ".", ".."):
        raise WizardError(
            "this is a folder, not a file: give a config that oom-wizard saved, or its "
            ".changelog.json",
            file=target,
        )
    # A save killed in this folder is finished or undone before anything is read: the config
    # and its change log are then read as they are (old pair or new), and reading writes nothing.
    recover_beside(target)
    if target.name.endswith(CHANGELOG_SUFFIX):
        changelog = read_changelog(target)
        check_changelog(changelog, target)
        config = resolve_recorded(target, changelog.output.path)
        if config.parent != target.parent:
            recover_beside(config)
        document = load_document(config) if config.is_file() else None
        # A file at the recorded path that is not the one saved says nothing about this log.
        if document is not None and changelog.output.sha256 != sha256_of(config.read_bytes()):
            document = None
        return History(changelog, target, document)
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
    check_changelog(belonging.log, belonging.path)
    document = None if belonging.edited else load_document(target)
    return History(belonging.log, belonging.path, document, belonging.note(target))


def read_job_history(db: Path, name: str) -> History:
    """The change log of a job of AI Toolkit's web UI, and the config its row holds.

    Raises:
        WizardError: no such database or job, or no change log of oom-wizard tells its story.
    """

    db_path = find_db(db)
    # A save of one of its jobs killed between the row's commit and its change log's rename is
    # finished (or undone) first, as every open does: then the row and its log are read in step.
    settle(changelog_folder(db_path), wait_s=SETTLE_WAIT_S)
    job = load_job(db_path, name)
    belonging = changelog_for(job.source, job.job_config.encode("utf-8"), job.changelog_to_read)
    words = f"job '{job.name}' of {job.db_path}"
    if belonging is None:
        raise WizardError(
            f"no change log of oom-wizard tells the story of {words}: oom-wizard has not "
            "saved it (or the UI created it anew)"
        )
    unfinished = unfinished_in(belonging.path.parent) if belonging.edited else None
    if unfinished is not None:  # a committed save a read-only folder kept from finishing
        raise WizardError(f"{unfinished}; nothing was written", file=belonging.path)
    document = None if belonging.edited else job_document(job)
    note = (
        f"{words} was edited in the UI after oom-wizard saved it; its story ends at that save"
        if belonging.edited
        else None
    )
    return History(belonging.log, belonging.path, document, note, words)


@dataclass(frozen=True)
class NextScaleUps:
    """What the scale-up gives back next, as ``history`` and the app's result screen list it
    (:func:`offered_scale_ups`).

    Attributes:
        ahead: The re-adds offered, in order, up to the first the scale-up stops before.
        stopped: Why the scale-up stops before the re-add after ``ahead`` (None: it does not).
        nothing_left: With nothing ahead at all: that everything is back, or what of ``set``
            still stands (empty otherwise).
        first_changes: The first re-add's fields: ``(path, value now, value back)``.
    """

    ahead: tuple[ScaleUp, ...]
    stopped: str | None
    nothing_left: tuple[str, ...]
    first_changes: tuple[tuple[str, Any, Any], ...]


def next_scale_ups(history: History) -> NextScaleUps | None:
    """The re-adds ahead of the config (None: the config is not at hand to plan from)."""
    if history.document is None:
        return None
    return offered_scale_ups(history.document, history.changelog, history.log_path)


def offered_scale_ups(
    document: JobDocument, changelog: ChangeLog, changelog_path: Path
) -> NextScaleUps:
    """The settings the scale-up offers back, in its order, up to the first it stops before
    (a re-add that crashed every time, or that gives back what an attempt of ``run`` crashed
    with): the one list ``history`` and the app's result screen render. The order is
    :func:`~oom_wizard.rules.scaleup.pending_scale_ups`'s, so the first is what ``scale-up``
    and the app's scale-up screen offer next (:func:`~oom_wizard.rules.scaleup.next_scale_up`).

    Args:
        document: The config the change log describes.
        changelog: Its change log.
        changelog_path: Where the change log is (the attempts' configs are found from it).
    """
    ahead = pending_scale_ups(document, changelog)  # the first is next_scale_up's
    if not ahead:
        return NextScaleUps((), None, tuple(nothing_left_text(document, changelog)), ())
    stopped: str | None = None
    for index, found in enumerate(ahead):
        stopped = stop_text(changelog, found) or _repeats_crash(
            document, changelog, changelog_path, ahead[: index + 1]
        )
        if stopped is not None:
            stopped = stop_text(changelog, found) or f"{found.title} [{found.step}]: {stopped}"
            ahead = ahead[:index]
            break
    first = (
        tuple(
            (format_path(change.path), document.get(change.path), change.after)
            for change in ahead[0].changes
        )
        if ahead
        else ()
    )
    return NextScaleUps(tuple(ahead), stopped, (), first)


def _repeats_crash(
    now: JobDocument, changelog: ChangeLog, changelog_path: Path, readds: Sequence[ScaleUp]
) -> str | None:
    """Whether making ``readds`` one after the other on ``now`` gives back what an attempt of
    ``run`` crashed with (:func:`oom_wizard.application.attempts.repeated_crash_note`)."""
    if not any(a.outcome == "crashed" for a in changelog.attempts):
        return None
    after = prepare(now, [change for readd in readds for change in readd.changes]).after
    return repeated_crash_note(now, after, changelog, changelog_path)


def host_words(memory: dict[str, Any] | None) -> str | None:
    """A run's recorded host RAM in one line (``runs[].memory.host``, written by
    :func:`~oom_wizard.application.saving.host_record`): the peak phase's band against the
    RAM of the machine that saved it, and the verdict; None when the run has none (a log
    written before it, or another writer's shape)."""
    host = (memory or {}).get("host")
    if not isinstance(host, dict):
        return None
    phases, peak, ram = host.get("phases"), host.get("peak_phase"), host.get("ram_gib")
    band = phases.get(peak) if isinstance(phases, dict) else None
    if not isinstance(band, dict):
        return None
    low, high = band.get("low"), band.get("high")
    if not all(isinstance(value, int | float) for value in (low, high)):
        return None
    against = (
        f"of {ram:.1f} GiB: {verdict_words(str(host.get('verdict', '')))}"
        if isinstance(ram, int | float)
        else "(the RAM was not known)"
    )
    return f"host RAM: the {peak} phase needs {low:.1f}–{high:.1f} GiB {against}"


def change_why(entry: ChangeEntry, direction: str = "rollback") -> str:
    """Why a logged change was made (``history``'s "why" line): the step's title and its
    reason from the presets, then what the recorded reason adds beyond the field's name (a
    confirmed increase, the effective batch kept, the buckets dropped).

    A change without a known step (``set``), and a change that gives a setting back
    (``direction`` ``scale_up``: the roll-back's reason does not say why it comes back),
    keep the reason they were recorded with.
    """

    presets = load_presets()
    if entry.step is None or entry.step not in presets.steps or direction == "scale_up":
        return entry.reason
    info = next(step for key, step in presets.steps.items() if key == entry.step)
    title, _, detail = entry.reason.partition(": ")
    short = _process_relative(entry.path)
    if detail.startswith(short):  # the field's name, perhaps with a note: keep the note
        detail = detail[len(short) :].strip()
    why = f"{title or info.title}: {' '.join(info.why.split())}"
    return f"{why} ({detail})" if detail else why


def _process_relative(path: str) -> str:
    """``config.process[0].train.lr`` → ``train.lr`` (the label a step's row shows)."""
    prefix, found, rest = path.partition("].")
    return rest if found and prefix.startswith("config.process[") else path


def later_lines(ahead: Sequence[ScaleUp]) -> tuple[str, ...]:
    """The re-adds ahead, numbered, one line each (``  1. Re-add the biggest resolution``):
    the result screen and ``history`` print these same lines."""
    return tuple(f"  {number}. {scale_up.title}" for number, scale_up in enumerate(ahead, 1))
