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
from typing import Any

from oom_wizard.catalog import AnyStepId, Presets, load_presets
from oom_wizard.change import Change
from oom_wizard.changelog import ChangeLog
from oom_wizard.document import MISSING, JobDocument, same_value
from oom_wizard.paths import parse_path


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
        f"{len(manual)} manual change{'s' if len(manual) != 1 else ''} made with "
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


def _order(changelog: ChangeLog, presets: Presets) -> tuple[AnyStepId, ...]:
    """The scale-up order, with sampling first when it was switched off for a validation run."""
    order: tuple[AnyStepId, ...] = presets.scale_up_order
    steps = {entry.step for entry in changelog.changes}
    sampling_off = any(
        entry.step == "sampling"
        and entry.path.endswith(".train.disable_sampling")
        and entry.after is True
        for entry in changelog.changes
    )
    if sampling_off and "validation_run" in steps:
        order = ("sampling", *(step for step in order if step != "sampling"))
    return order


def _original(value: Any) -> Any:
    """The change log writes an absent key as null; restoring it removes the key."""
    return MISSING if value is None else value


def _same(current: Any, original: Any) -> bool:
    if current is MISSING or original is MISSING:
        return current is original
    return same_value(current, original)


def _why(presets: Presets, order: tuple[AnyStepId, ...], changelog: ChangeLog) -> str:
    """Why this order, naming only the steps this change log lowered (the full order is long)."""
    lowered = {entry.step for entry in changelog.changes}
    names = [presets.step(step).restore or step for step in order if step in lowered]
    said = ", then ".join(name[:1].lower() + name[1:] for name in names)
    return (
        "One heavier setting per retry, so that a new crash names its cause. "
        f"The order: {said}. Quality comes first; the memory settings (the low-memory "
        "path, checkpointing) come last, because they buy speed, not quality."
    )
