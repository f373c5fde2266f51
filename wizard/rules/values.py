"""Checks of a value the user types on a step, for the screens and the command line.

Its kind and range are the limits every value is held to, wherever it comes from
(:mod:`oom_wizard.rules.limits`); the multiple and the frame grid are a step's own.

:func:`validate_value` reads the rules of ``values`` in ``presets/levers.yaml``: the kind
(a whole number, a number, a text), a range that makes sense for the field, a multiple of the
arch's size step for widths and heights, the arch's frame grid for frame counts, and which
way the value costs more memory. In a roll-back a heavier value than today's is allowed only
with a confirmation, and is logged as an increase; an invalid value blocks the step, with the
reason to show on its row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from oom_wizard.formats.document import MISSING
from oom_wizard.paths import FieldPath
from oom_wizard.rules.catalog import ArchFacts, Presets, ValueRule, generic_field_key, load_presets
from oom_wizard.rules.limits import parse_number, range_problem

Direction = Literal["rollback", "scale_up"]


@dataclass(frozen=True)
class ValueCheck:
    """The verdict on one typed value.

    Attributes:
        ok: The value may be saved (after a confirmation when ``needs_confirmation``).
        value: The value as it would be written (an int, a float or the text), None when
            it is not valid.
        reason: Why it is not valid, or what the confirmation is about; None when neither.
        increase: The value costs more memory than today's (logged as an increase).
        needs_confirmation: An increase in a roll-back: ask before saving it.
    """

    ok: bool
    value: Any
    reason: str | None = None
    increase: bool = False
    needs_confirmation: bool = False


def validate_value(
    field: FieldPath | str,
    value: Any,
    arch: ArchFacts | None,
    *,
    before: Any = MISSING,
    direction: Direction = "rollback",
    presets: Presets | None = None,
) -> ValueCheck:
    """Check ``value`` (as typed, or already parsed) for ``field``.

    Args:
        field: The field's path or its generic key (``sample.width``).
        value: The text the user typed, or a number.
        arch: The job's arch (None when unknown: the toolkit's fallbacks apply).
        before: Today's value, to tell an increase.
        direction: A roll-back asks before an increase; a scale-up does not.
        presets: The preset data (default: the shipped presets).
    """
    presets = presets or load_presets()
    rule = presets.levers.values.get(generic_field_key(field))
    if rule is None:
        return ValueCheck(ok=True, value=value)
    parsed, problem = parse_number(rule, value)
    if problem is not None:
        return ValueCheck(ok=False, value=None, reason=problem)
    problem = _check(rule, parsed, arch, presets)
    if problem is not None:
        return ValueCheck(ok=False, value=None, reason=problem)
    increase = _heavier(rule, parsed, before)
    confirm = increase and direction == "rollback"
    reason = _increase_words(rule, parsed, before) if increase else None
    if confirm and reason:
        reason += ": it costs more memory, so this roll-back would raise it; confirm to keep it"
    return ValueCheck(
        ok=True,
        value=parsed,
        reason=reason,
        increase=increase,
        needs_confirmation=confirm,
    )


def _check(rule: ValueRule, value: Any, arch: ArchFacts | None, presets: Presets) -> str | None:
    """Why ``value`` is out of the rule's range, multiple or grid (None when it is fine)."""
    if rule.kind == "text":
        return None
    problem = range_problem(rule, value)
    if problem is not None:
        return problem
    multiple = rule.multiple_of
    if multiple == "arch":
        multiple = (arch.bucket_divisibility if arch else None) or presets.limits.size_multiple
    if isinstance(multiple, int) and value % multiple:
        lower = value // multiple * multiple
        options = f"{lower} or {lower + multiple}" if lower else str(multiple)
        return f"{value} is not a multiple of {multiple}; use {options}"
    if rule.grid == "frames":
        grid = presets.frame_grid(arch)
        if not grid.is_valid(value):
            low = grid.snap_down(value)
            high = low + grid.step if value > low else low
            return (
                f"{value} frames is off the model's frame grid ({grid.step}n+{grid.offset}); "
                f"use {low} or {high}"
            )
    return None


def _heavier(rule: ValueRule, value: Any, before: Any) -> bool:
    """Whether ``value`` costs more memory than ``before``: turning the thing off never does,
    turning it on always does."""
    if rule.heavier == "none" or isinstance(before, bool) or not isinstance(before, (int, float)):
        return False
    if rule.off_value is not None and rule.off_value in (value, before):
        return bool(value != rule.off_value)
    return bool(value > before if rule.heavier == "higher" else value < before)


def _increase_words(rule: ValueRule, value: Any, before: Any) -> str:
    """How ``value`` goes beyond today's ``before``, in the words of its rule."""
    if before == rule.off_value:
        return f"{_show(value)} turns on what today's {_show(before)} leaves off"
    side = "above" if rule.heavier == "higher" else "below"
    return f"{_show(value)} is {side} today's {_show(before)}"


def _show(value: Any) -> str:
    if value is MISSING:
        return "(absent)"
    return f"{value:g}" if isinstance(value, float) else str(value)
