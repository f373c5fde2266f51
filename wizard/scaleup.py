"""The way back up: one heavier setting per retry, driven by the change log.

After a roll-back has run stably, the settings it lowered come back one step at a time, in
the order of ``scale_up`` in ``presets/ladders.yaml`` (the short validation run's step
count, then the biggest bucket, richer samples, the larger batch, longer clips, and last the
memory settings, which buy speed rather than quality), so that a new crash names its cause.
Every restored field gets its *original* value: the first ``before`` the change log records
for it, measured from the source config (a dropped bucket comes back in its original place
in the list). A step outside that order is never undone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from wizard.change import Change
from wizard.changelog import ChangeLog
from wizard.document import MISSING, JobDocument, same_value
from wizard.paths import parse_path
from wizard.presets import Presets, load_presets


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
    for step in presets.scale_up_order:
        paths = [
            entry.path
            for entry in changelog.changes
            if entry.step == step and entry.path not in claimed
        ]
        claimed.update(paths)
        info = presets.step(step)
        changes = tuple(
            Change(
                path=parsed,
                after=_original(originals[path]),
                step=step,
                reason=f"{info.restore}: back to the value before the roll-back",
            )
            for path in dict.fromkeys(paths)
            if not _same(document.get(parsed := parse_path(path)), _original(originals[path]))
        )
        if changes:
            title = info.restore or info.title
            pending.append(ScaleUp(step=step, title=title, why=_why(presets), changes=changes))
    return tuple(pending)


def _original(value: Any) -> Any:
    """The change log writes an absent key as null; restoring it removes the key."""
    return MISSING if value is None else value


def _same(current: Any, original: Any) -> bool:
    if current is MISSING or original is MISSING:
        return current is original
    return same_value(current, original)


def _why(presets: Presets) -> str:
    order = " → ".join(presets.step(step).restore or step for step in presets.scale_up_order)
    return (
        "One heavier setting per retry, so that a new crash names its cause. "
        f"The order is {order}: quality first; the memory settings (the low-memory path, "
        "checkpointing) come back last, because they buy speed, not quality."
    )
