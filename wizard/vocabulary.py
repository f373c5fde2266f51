"""The stable identifiers of DESIGN.md: moments, model kinds and step ids.

They live in a module of their own, free of pydantic and YAML, so that building the
command line (``--moment``, ``--kind`` choices) costs nothing at start-up.
``oom_wizard.rules.catalog`` re-exports them next to the data they index.
"""

from __future__ import annotations

from typing import Final, Literal, NewType, get_args

Moment = Literal["loading", "early_steps", "sampling", "intermittent", "environment"]
ModelKind = Literal["image", "video"]
ArchKind = Literal["image", "video", "audio"]
StepId = NewType("StepId", str)
"""A roll-back step: a key of ``presets/ladders.yaml``'s ``steps`` (``top_bucket``...).

The YAML is the one list of steps. Loading it checks that every step its ladders, moments and
scale-up name has an entry there, and a plan checks that entry against the builders of
``rules/plan.py``, both ways. mypy strict still tells a step id from any string in each
signature: source that names a step says so, ``StepId("top_bucket")``."""
Loss = Literal["time", "samples", "quality"]
"""What a step takes from the user besides memory: only time (a slower step, a caching pass,
system RAM), the preview samples, or quality (fewer pixels, frames, rank, bits or passes)."""

MOMENTS: Final[tuple[Moment, ...]] = get_args(Moment)
TRAINING_MOMENTS: Final[frozenset[Moment]] = frozenset({"early_steps", "intermittent"})
"""The moments whose crash is in a training step (the peak is one step's memory)."""
DEFAULT_MOMENT: Final[Moment] = "early_steps"
"""Assumed, and said so, when neither the user nor a log tells the moment: the first training
steps are where most out-of-memory crashes happen, and their changes are the main levers."""
MODEL_KINDS: Final[tuple[ModelKind, ...]] = get_args(ModelKind)
ARCH_KINDS: Final[tuple[ArchKind, ...]] = get_args(ArchKind)
VALIDATION_RUN: Final = StepId("validation_run")
"""The optional short validation run (``train.steps`` → 100): a step, on no ladder."""


def json_schema(command: str, version: int) -> str:
    """The ``"schema"`` of a command's ``--json`` object: ``oom-wizard.fit/1``.

    The version goes up when a key is removed or renamed, or its meaning or type changes; a
    key added leaves it as it is (a script reads the keys it knows and passes over the rest).
    Each shape's version stands beside the code that builds it.
    """
    return f"oom-wizard.{command}/{version}"
