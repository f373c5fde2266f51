"""``history``: the change log's story in words."""

from __future__ import annotations

from collections.abc import Sequence

from oom_wizard.changelog import (
    ChangeEntry,
)
from oom_wizard.plan import ScaleUp


def change_why(entry: ChangeEntry) -> str:
    """Why a logged change was made (``history``'s "why" line): the step's title and its
    reason from the presets, then what the recorded reason adds beyond the field's name (a
    confirmed increase, the effective batch kept, the buckets dropped).

    A change without a known step (``set``) keeps the reason it was recorded with.
    """
    from oom_wizard.catalog import load_presets

    presets = load_presets()
    if entry.step is None or entry.step not in presets.steps:
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
