"""The limits of a value, one set wherever the value comes from.

A value typed on a step or given to ``set`` (:mod:`oom_wizard.rules.values`), one read from a
config file or a web-UI job, one recorded in a change log, the card's memory given with
``--gpu`` and the card's memory ``nvidia-smi`` reports: each is held to the same limits, the
``values`` (per field: kind and range) and ``card_gib`` of ``presets/levers.yaml``, and every
number must be finite. The arch's multiple and frame grid are a step's advice, not a limit: a
config off them still trains (AI Toolkit rounds), so reading one is not refused.

A config or change log outside the limits is refused with one line at the value (exit 2); a
probe outside them is ignored (the caller says so).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oom_wizard.errors import ConfigError, WizardError
from oom_wizard.paths import FieldPath, format_path, parse_path
from oom_wizard.rules.catalog import Presets, ValueRule, generic_field_key, load_presets

if TYPE_CHECKING:
    from oom_wizard.formats.document import JobDocument
    from oom_wizard.host.probe import ProbeResult
    from oom_wizard.storage.changelog import ChangeLog


def parse_number(rule: ValueRule, value: Any) -> tuple[Any, str | None]:
    """The value in the rule's kind (an int, a finite float, a text), or why it is not one."""
    if rule.kind == "text":
        text = str(value).strip()
        return (text, None) if text else (None, "a value is needed")
    if isinstance(value, bool):
        return None, "a number is needed, not true or false"
    if isinstance(value, str):
        text = value.strip().replace("_", "")
        if not text:
            return None, "a number is needed"
        try:
            number: float = float(text) if rule.kind == "float" else int(text)
        except ValueError:
            what = "a whole number" if rule.kind == "int" else "a number"
            return None, f"'{value.strip()}' is not {what}"
    elif isinstance(value, (int, float)):
        number = value
    else:
        return None, "a number is needed"
    # An int of any size is finite (and math.isfinite cannot take one past a float's range).
    if isinstance(number, float) and not math.isfinite(number):
        return None, "a finite number is needed"
    if rule.kind == "int":
        if isinstance(number, float) and not number.is_integer():
            return None, f"{number:g} is not a whole number"
        return int(number), None
    return float(number), None


def range_problem(rule: ValueRule, value: float) -> str | None:
    """Why a number is outside the rule's range (None when inside)."""
    if rule.min is not None and value < rule.min:
        return f"{shown(value)} is below the smallest sensible value, {shown(rule.min)}"
    if rule.max is not None and value > rule.max:
        return f"{shown(value)} is above the largest sensible value, {shown(rule.max)}"
    return None


def value_problem(field: FieldPath | str, value: Any, presets: Presets | None = None) -> str | None:
    """Why a number read for ``field`` is outside the limits (None: inside, not a number, or
    a field without a rule). Text, flags and placeholders are the config reader's to check."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value!r} is not a finite number, which AI Toolkit cannot train with"
    rule = (presets or load_presets()).levers.values.get(generic_field_key(field))
    if isinstance(value, int) and not _fits_a_float(value):
        # Past any field's limits, ruled or not: AI Toolkit (Python, torch) reads it as a float.
        return f"{shown(value)} is beyond any number AI Toolkit can train with"
    if rule is None or rule.kind == "text":
        return None
    parsed, problem = parse_number(rule, value)
    return problem if problem is not None else range_problem(rule, parsed)


def _fits_a_float(value: int) -> bool:
    try:
        float(value)
    except OverflowError:
        return False
    return True


def card_problem(gib: float, presets: Presets | None = None) -> str | None:
    """Why a card's memory in GiB is not one a card has (None: it is)."""
    rule = (presets or load_presets()).levers.card_gib
    parsed, problem = parse_number(rule, gib)
    if problem is not None:
        return f"{gib!r} GiB is not a card's memory: {problem}"
    problem = range_problem(rule, parsed)
    return None if problem is None else f"a card's memory in GiB: {problem}"


def probe_problem(probe: ProbeResult, presets: Presets | None = None) -> str | None:
    """Why the GPU probe's figures cannot be a card's (None: they can): a card's memory
    outside ``card_gib``, or memory in use or free below 0 or above the card's."""
    presets = presets or load_presets()
    for gpu in probe.gpus:
        problem = card_problem(gpu.total_gib, presets)
        if problem is not None:
            return f"nvidia-smi reports card {gpu.index} with {problem}"
        for what, gib in (("in use", gpu.used_gib), ("free", gpu.free_gib)):
            if not (math.isfinite(gib) and 0 <= gib <= gpu.total_gib * 1.01 + 0.01):
                return (
                    f"nvidia-smi reports {shown(gib)} GiB {what} on card {gpu.index} of "
                    f"{shown(gpu.total_gib)} GiB, which no card has"
                )
    return None


def check_document(document: JobDocument, presets: Presets | None = None) -> None:
    """Refuse a config holding a number outside the limits, at the value's line and column.

    Raises:
        ConfigError: the first such value, the field named, what to do.
    """
    presets = presets or load_presets()
    for path, value in _leaves(document.tree, ()):
        problem = value_problem(path, value, presets)
        if problem is None:
            continue
        at = document.position(path)
        raise ConfigError(
            f"{format_path(path)}: {problem} (the limits 'oom-wizard set' holds a value to): "
            "correct it in the config",
            file=document.source,
            line=at[0] if at else None,
            column=at[1] if at else None,
        )


def check_changelog(log: ChangeLog, path: Path | str, presets: Presets | None = None) -> None:
    """Refuse a change log that records a number outside the limits (a hand edit).

    Raises:
        WizardError: the first such value, its run and field named.
    """
    presets = presets or load_presets()
    for entry in log.changes:
        try:
            field = parse_path(entry.path)
        except WizardError:
            field = None
        for side, value in (("before", entry.before), ("after", entry.after)):
            for where, leaf in _leaves(value, field or ()):
                problem = value_problem(where if field else "", leaf, presets)
                if problem is not None:
                    raise WizardError(
                        f"run {entry.run} records {entry.path} {side} as {_short(leaf)}: "
                        f"{problem}; oom-wizard never writes that, so the change log was "
                        "edited: restore it from a backup, or remove it to start afresh",
                        file=path,
                    )
    for attempt in log.attempts:
        phases = [(f"peaks_gib.{k}", v) for k, v in (attempt.peaks_gib or {}).items()]
        for name, gib in (("card_gib", attempt.card_gib), ("peak_gib", attempt.peak_gib), *phases):
            problem = None if gib is None or name != "card_gib" else card_problem(gib, presets)
            if name != "card_gib" and gib is not None:  # any use of a card, none included
                top = presets.levers.card_gib.max
                inside = math.isfinite(gib) and 0 <= gib <= (top if top is not None else gib)
                problem = None if inside else f"{shown(gib)} GiB is no card's use"
            if problem is not None:
                raise WizardError(
                    f"an attempt at {attempt.at} records {name} {_short(gib)}: {problem}; "
                    "oom-wizard never writes that, so the change log was edited: restore it "
                    "from a backup, or remove it to start afresh",
                    file=path,
                )


def _leaves(value: Any, path: FieldPath) -> Iterator[tuple[FieldPath, Any]]:
    """Every value of a tree with its path; a list is a value too (``resolution``)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str | int) and not isinstance(key, bool):
                yield from _leaves(item, (*path, key))
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaves(item, (*path, index))
        return
    yield path, value


def shown(value: float) -> str:
    """A limit or a value as a person writes it (``256``, ``0.0001``, ``1e+50``)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, float):
        return f"{value:g}"
    text = str(value)
    # A whole number of hundreds of digits is said by its size, not spelled out.
    return text if len(text) <= 24 else f"a number of {len(text.lstrip('-'))} digits"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 24 else f"{text[:10]}…({len(text)} characters)"
