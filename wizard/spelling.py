"""The one spelling of config values, changes and memory figures, for every front end.

The command line, the diagnosis's advice and the app's widgets all show a value the same way:
as the config's own notation would read it (``true``/``false``, ``null``, ``[512, 768]``,
strings in double quotes so that ``"512"`` and ``512`` differ), ``(absent)`` for a key that
is not there and ``(removed)`` for one a change takes out; a change as
``path: before → after``; memory as ``0.40 GiB`` (two decimals).
JSON output keeps the numbers themselves: this module is for people, not for machines.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, Final

from oom_wizard.paths import MISSING

ABSENT: Final = "(absent)"
"""A key that is not in the config (before a change adds it)."""
REMOVED: Final = "(removed)"
"""A key that a change takes out of the config."""
ARROW: Final = "→"


def value(item: Any) -> str:
    """A config value as the user reads it: ``true``, ``null``, ``[512, 768]``, ``1e-04``."""
    if item is MISSING:
        return ABSENT
    if item is None:
        return "null"
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, float):
        return _float(item)
    if isinstance(item, list | tuple):
        return "[" + ", ".join(value(element) for element in item) + "]"
    if isinstance(item, Mapping):
        return "{" + ", ".join(f"{key}: {value(element)}" for key, element in item.items()) + "}"
    if isinstance(item, str):
        return json.dumps(item, ensure_ascii=False)
    return str(item)


def editable(item: Any) -> str:
    """A value as an input field holds it for editing: a string bare, the rest as shown."""
    return item if isinstance(item, str) else value(item)


def _float(number: float) -> str:
    """A float as YAML would read it back: ``0.0001``, ``1e-05``, ``2.0``, ``.inf``."""
    if math.isnan(number):
        return ".nan"
    if math.isinf(number):
        return ".inf" if number > 0 else "-.inf"
    return repr(number)


def before_after(before: Any, after: Any) -> tuple[str, str]:
    """Both sides of a change; a missing side (``MISSING`` or a change log's null) is
    ``(absent)`` before and ``(removed)`` after."""
    shown_before = ABSENT if before is None or before is MISSING else value(before)
    shown_after = REMOVED if after is None or after is MISSING else value(after)
    return shown_before, shown_after


def change(path: str, before: Any, after: Any) -> str:
    """``path: before → after``."""
    shown_before, shown_after = before_after(before, after)
    return f"{path}: {shown_before} {ARROW} {shown_after}"


def gib(amount: float) -> str:
    """A memory figure: ``0.40 GiB``."""
    return f"{amount:.2f} GiB"


#: PyTorch's figures (``diagnose --json``'s ``oom`` keys) as the report names them.
OOM_LABELS: Final[Mapping[str, str]] = {
    "tried_gib": "tried",
    "total_gib": "card",
    "free_gib": "free",
    "this_process_gib": "this process",
    "allocated_gib": "allocated",
    "reserved_gib": "reserved",
    "reserved_unallocated_gib": "reserved unallocated",
}


def oom_figures(oom: Mapping[str, Any]) -> list[str]:
    """PyTorch's memory figures of a diagnosis (its ``oom`` JSON), one phrase each:
    ``tried 2.25 GiB``, ``pid 4242 6.00 GiB``."""
    parts = [f"{label} {gib(oom[key])}" for key, label in OOM_LABELS.items() if key in oom]
    for other in oom.get("other_processes", []):
        who = f"pid {other['pid']}" if other["pid"] else "another process"
        parts.append(f"{who} {gib(other['gib'])}")
    return parts


def field_changes(count: int) -> str:
    """``1 field changes``, ``4 fields change``: a count of changed fields as a clause."""
    return f"{count} field changes" if count == 1 else f"{count} fields change"


def rate_axes(rates: tuple[float, ...], *, step: int | None) -> tuple[str, str]:
    """The labels of ``watch``'s s/it chart: what the height means (its range), and what
    runs across (the readings, oldest to newest). Empty without a reading."""
    if not rates:
        return "", ""
    low, high = min(rates), max(rates)
    count = len(rates)
    newest = f"step {step}" if step is not None else "the newest"
    return (
        f"s/it (vertical): {low:.2f} at the bottom, {high:.2f} at the top",
        f"time (across): the last {counted(count, 'reading')}, oldest left, {newest} right",
    )


def counted(count: int, singular: str, plural: str | None = None) -> str:
    """``1 skipped batch``, ``3 skipped batches``: a count and its noun, agreeing (``plural``:
    when it is not ``singular`` + s, ``process`` → ``processes``)."""
    noun = singular if count == 1 else (plural or singular + "s")
    return f"{count} {noun}"


def mid_sentence(title: str) -> str:
    """A title inside a sentence: ``Larger batch`` → ``larger batch``, while an acronym keeps
    its capitals (``LoRA rank as it was``, ``OOM skips``, ``GPU``)."""
    first = title.split(" ", 1)[0]
    if len(first) > 1 and any(char.isupper() for char in first[1:]):
        return title
    return title[:1].lower() + title[1:]


#: A memory verdict (``fits``, ``tight``, ``wont_fit``) as the user reads it: the JSON keeps the
#: identifier, every text (``fit``, the app's memory bar) these words.
VERDICT_WORDS: Final = {"fits": "fits", "tight": "tight", "wont_fit": "won't fit"}


def verdict(recorded: str) -> str:
    """``wont_fit`` → ``won't fit``: a memory verdict in words."""
    return VERDICT_WORDS.get(recorded, recorded.replace("_", " "))


#: A change log run's direction (``rollback``, ``scale_up``...) as the user reads it.
_DIRECTIONS: Final = {
    "rollback": "roll-back",
    "scale_up": "scale-up",
    "edit": "edit",
    "restore": "restore",
}


def direction(recorded: str) -> str:
    """``scale_up`` → ``scale-up``: a run's direction in words (``history`` and the app)."""
    return _DIRECTIONS.get(recorded, recorded.replace("_", " "))
