"""The way back up: one heavier setting per retry, driven by the change log.

After a roll-back has run stably, the settings it lowered come back one step at a time, in
the order of ``scale_up`` in ``presets/ladders.yaml`` (the short validation run's step
count, then the biggest bucket, richer samples, the larger batch, longer clips, and last the
memory settings, which buy speed rather than quality), so that a new crash names its cause.
Every restored field gets its *original* value: the first ``before`` the change log records
for it, measured from the source config (a dropped bucket comes back in its original place
in the list). A field that two steps lowered comes back in two re-adds, the later lever
first: the next bucket down gives back the list as it was before it, then the biggest
bucket returns with the rest. A step outside that order is never undone.

Sampling off comes back first: when the roll-back switched ``train.disable_sampling`` on
together with the short validation run, a stable validation run has shown nothing about the
samples, so the first re-add gives sampling back (with the step count still short), and the
step count follows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from oom_wizard.formats.change import Change
from oom_wizard.formats.document import MISSING, JobDocument, same_value
from oom_wizard.paths import parse_path
from oom_wizard.rules.catalog import Presets, StepId, load_presets
from oom_wizard.spelling import counted, mid_sentence
from oom_wizard.storage.changelog import ChangeLog
from oom_wizard.vocabulary import VALIDATION_RUN

if TYPE_CHECKING:
    pass


@dataclass(frozen=True)
class ScaleUp:
    """One re-add: a step of the scale-up order and the changes that restore it.

    Attributes:
        step: The step id whose roll-back is undone (``top_bucket``...).
        title: How the scale-up names it (``Re-add the biggest resolution``).
        why: Why this one comes now.
        changes: The fields back to their original values.
    """

    step: str
    title: str
    why: str
    changes: tuple[Change, ...]


@dataclass(frozen=True)
class ManualChange:
    """A field a ``set`` run changed that still differs from the source.

    Attributes:
        path: The field, in AI Toolkit's notation.
        original: Its value in the source config (``MISSING`` when the source lacks it).
        current: Its value today (``MISSING`` when the key is gone).
    """

    path: str
    original: Any
    current: Any


def standing_manual_changes(
    document: JobDocument, changelog: ChangeLog
) -> tuple[ManualChange, ...]:
    """The fields changed by hand (``oom-wizard set``) that are not back to the source's value.

    The scale-up never undoes them (they belong to no step), so nothing may say "everything is
    back" while one of them stands.
    """
    originals = {path: first for path, (first, _last) in changelog.net().items()}
    manual = [
        entry.path
        for entry in changelog.changes
        if 0 <= entry.run < len(changelog.runs) and changelog.runs[entry.run].direction == "edit"
    ]
    standing = []
    for path in dict.fromkeys(manual):
        original = _original(originals.get(path))
        current = document.get(parse_path(path))
        if not _same(current, original):
            standing.append(ManualChange(path=path, original=original, current=current))
    return tuple(standing)


def nothing_left_text(document: JobDocument, changelog: ChangeLog) -> tuple[str, ...]:
    """What to say when no re-add is left: everything is back, or which manual changes stand."""
    manual = standing_manual_changes(document, changelog)
    if not manual:
        return ("every setting the roll-back changed is back to its original value.",)
    return (
        "every setting the roll-back changed is back, but not everything is: "
        f"{counted(len(manual), 'manual change')} made with "
        f"'oom-wizard set' still {'stand' if len(manual) != 1 else 'stands'} "
        "(the scale-up never undoes them):",
        *(f"  {m.path}: {_shown(m.original)} → {_shown(m.current)} (set by hand)" for m in manual),
    )


def _shown(value: Any) -> str:
    return "(absent)" if value is MISSING else repr(value)


def next_scale_up(
    document: JobDocument, changelog: ChangeLog, *, presets: Presets | None = None
) -> ScaleUp | None:
    """The one re-add the next retry should get, or None when nothing is left to restore.

    Args:
        document: The config the change log describes (its current values count).
        changelog: Its change log.
        presets: The preset data (default: the shipped presets).
    """
    pending = pending_scale_ups(document, changelog, presets=presets)
    return pending[0] if pending else None


def pending_scale_ups(
    document: JobDocument, changelog: ChangeLog, *, presets: Presets | None = None
) -> tuple[ScaleUp, ...]:
    """Every re-add still ahead, in the order the scale-up makes them."""
    presets = presets or load_presets()
    originals = {path: first for path, (first, _last) in changelog.net().items()}
    claimed: set[str] = set()
    pending: list[ScaleUp] = []
    order = _order(changelog, presets)
    for step in order:
        targets = _targets(changelog, step, originals, claimed)
        claimed.update(path for path, target in targets.items() if target == originals[path])
        info = presets.step(step)
        changes = tuple(
            Change(
                path=parsed,
                after=_original(target),
                step=step,
                reason=f"{info.restore}: back to the value before the roll-back",
            )
            for path, target in targets.items()
            if not _same(current := document.get(parsed := parse_path(path)), _original(target))
            and not _same(current, _original(originals[path]))  # back already: never lower it
        )
        if changes:
            title = info.restore or info.title
            why = _why(presets, order, changelog)
            pending.append(ScaleUp(step=step, title=title, why=why, changes=changes))
    return tuple(pending)


def _targets(
    changelog: ChangeLog, step: str, originals: dict[str, Any], claimed: set[str]
) -> dict[str, Any]:
    """Path → the value ``step`` restores it to: the value before the step's first roll-back
    change of it (the original, unless an earlier step had lowered it already). Paths an
    earlier re-add already brought back to the original are left out."""
    targets: dict[str, Any] = {}
    for entry in changelog.changes:
        if entry.step != step or entry.path in claimed or entry.path in targets:
            continue
        run = changelog.runs[entry.run] if 0 <= entry.run < len(changelog.runs) else None
        rollback = run is not None and run.direction == "rollback"
        targets[entry.path] = entry.before if rollback else originals[entry.path]
    return targets


def _order(changelog: ChangeLog, presets: Presets) -> tuple[StepId, ...]:
    """The scale-up order, with sampling first when it was switched off for a validation run."""
    order: tuple[StepId, ...] = presets.scale_up_order
    steps = {entry.step for entry in changelog.changes}
    sampling_off = any(
        entry.step == "sampling"
        and entry.path.endswith(".train.disable_sampling")
        and entry.after is True
        for entry in changelog.changes
    )
    if sampling_off and "validation_run" in steps:
        order = (StepId("sampling"), *(step for step in order if step != "sampling"))
    return order


def _original(value: Any) -> Any:
    """The change log writes an absent key as null; restoring it removes the key."""
    return MISSING if value is None else value


def _same(current: Any, original: Any) -> bool:
    if current is MISSING or original is MISSING:
        return current is original
    return same_value(current, original)


def _why(presets: Presets, order: tuple[StepId, ...], changelog: ChangeLog) -> str:
    """Why this order, naming only the steps this change log lowered (the full order is long)."""
    lowered = {entry.step for entry in changelog.changes}
    names = [presets.step(step).restore or step for step in order if step in lowered]
    said = ", then ".join(mid_sentence(name) for name in names)
    return (
        "One heavier setting per retry, so that a new crash names its cause. "
        f"The order: {said}. Quality comes first; the memory settings (the low-memory "
        "path, checkpointing) come last, because they buy speed, not quality."
    )


ELSE_TO_CHANGE = (
    "a card with more memory, less else on the GPU, or "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
)


def crashed_config_note(after: JobDocument, changelog: ChangeLog) -> str | None:
    """When a re-add gives back the exact config that crashed (every field the change log
    changed is back at the source's value), what to say; None otherwise.

    The source crashed: that is why the first roll-back was made.
    """
    first = next((run for run in changelog.runs if run.direction == "rollback"), None)
    if first is None or not changelog.changes:
        return None
    for path, (original, _last) in changelog.net().items():
        if not _same(after.get(parse_path(path)), _original(original)):
            return None
    moment = f" ({first.moment.replace('_', ' ')})" if first.moment else ""
    return (
        f"this is the config that crashed{moment}, before the roll-back of {first.at}: every "
        "setting the roll-back lowered is back, so it will crash again unless something else "
        f"changed ({ELSE_TO_CHANGE})"
    )


def crashed_tries(changelog: ChangeLog, step: str) -> tuple[int, int]:
    """How often re-adding ``step`` was tried, and how often it then crashed.

    A scale-up run is tried once a later run follows it; it crashed when the next run is a
    roll-back (the retry came back with a crash). The last run is not tried yet.
    """
    runs = changelog.runs
    tried = crashed = 0
    for index, run in enumerate(runs[:-1]):
        if run.direction == "scale_up" and step in run.steps:
            tried += 1
            crashed += runs[index + 1].direction == "rollback"
    return tried, crashed


def crashed_every_time(changelog: ChangeLog, step: str) -> int:
    """The number of tries of re-adding ``step`` when every one crashed (0 otherwise)."""
    tried, crashed = crashed_tries(changelog, step)
    return tried if tried and crashed == tried else 0


def stop_text(changelog: ChangeLog, scale_up: ScaleUp) -> str | None:
    """Why no scale-up is offered at ``scale_up``: it crashed each time it was tried."""
    times = crashed_every_time(changelog, scale_up.step)
    if not times:
        return None
    tries = "the one time" if times == 1 else f"each of the {times} times"
    return (
        f"{scale_up.title} [{scale_up.step}] crashed {tries} it was tried: it will crash "
        f"again unless something else changes ({ELSE_TO_CHANGE})"
    )


@dataclass(frozen=True)
class CrashedConfig:
    """The config an attempt of ``oom-wizard run`` crashed on, as it is on disk.

    Attributes:
        number: The attempt's number in the change log's ``attempts``, counted from 1.
        document: The config it ran.
    """

    number: int
    document: JobDocument


@dataclass(frozen=True)
class RepeatedCrash:
    """A re-add that gives back every setting a crashed attempt had beyond today's config.

    Attributes:
        crashed: The attempt whose config crashed.
        settings: ``(path, value)`` of each setting it had that the re-add gives back.
    """

    crashed: CrashedConfig
    settings: tuple[tuple[str, Any], ...]

    @property
    def today(self) -> bool:
        """The attempt crashed with today's settings: no re-add is safe before a run of
        today's config trains through."""
        return not self.settings


def repeated_crash(
    now: JobDocument,
    after: JobDocument,
    changelog: ChangeLog,
    crashed: tuple[CrashedConfig, ...],
) -> RepeatedCrash | None:
    """Whether ``after`` (a re-add made on ``now``) gives back a combination that crashed.

    Of the fields the change log changed (the validation run's step count left out: it
    weighs nothing), a crashed attempt's config had some heavier than ``now`` has them; when
    ``after`` has each of those at the crashed value or back at the source's, the re-add
    repeats that crash. The newest such attempt is named. When the change log's last attempt
    crashed with ``now``'s own settings, every re-add repeats it (:attr:`RepeatedCrash.today`);
    an earlier attempt with nothing beyond ``now`` names nothing (a later one trained through).
    """

    net = changelog.net()
    weighing = {e.path for e in changelog.changes if e.step != VALIDATION_RUN}
    paths = [path for path in net if path in weighing]
    for found in reversed(crashed):
        heavier: list[tuple[str, Any]] = []
        for path in paths:
            parsed = parse_path(path)
            value = found.document.get(parsed)
            if not _same(value, now.get(parsed)):
                heavier.append((path, value))
        if not heavier:
            if found.number == len(changelog.attempts):
                return RepeatedCrash(found, ())
            continue
        if all(
            _same(back := after.get(parse_path(path)), value)
            or _same(back, _original(net[path][0]))
            for path, value in heavier
        ):
            return RepeatedCrash(found, tuple(heavier))
    return None
