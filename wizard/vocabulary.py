"""The stable identifiers of DESIGN.md: moments, model kinds and step ids.

They live in a module of their own, free of pydantic and YAML, so that building the
command line (``--moment``, ``--kind`` choices) costs nothing at start-up.
``oom_wizard.rules.catalog`` re-exports them next to the data they index.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

Moment = Literal["loading", "early_steps", "sampling", "intermittent", "environment"]
ModelKind = Literal["image", "video"]
ArchKind = Literal["image", "video", "audio"]
LadderStepId = Literal[
    "gradient_checkpointing",
    "batch_size",
    "top_bucket",
    "sampling",
    "num_frames",
    "low_vram",
    "smaller_bucket",
    "quantize",
    "text_encoder",
    "layer_offloading",
    "lora_rank",
    "optimizer_8bit",
    "attention",
    "extra_passes",
    "placement",
    "control_images",
]
"""DESIGN.md's six steps, then the deeper levers the ladder goes on to when the crash needs it."""
AnyStepId = Literal[LadderStepId, "validation_run"]
"""A ladder step, or the optional short validation run (``train.steps`` → 100)."""

MOMENTS: Final[tuple[Moment, ...]] = get_args(Moment)
TRAINING_MOMENTS: Final[frozenset[Moment]] = frozenset({"early_steps", "intermittent"})
"""The moments whose crash is in a training step (the peak is one step's memory)."""
DEFAULT_MOMENT: Final[Moment] = "early_steps"
"""Assumed, and said so, when neither the user nor a log tells the moment: the first training
steps are where most out-of-memory crashes happen, and their changes are the main levers."""
MODEL_KINDS: Final[tuple[ModelKind, ...]] = get_args(ModelKind)
ARCH_KINDS: Final[tuple[ArchKind, ...]] = get_args(ArchKind)
STEP_IDS: Final[tuple[LadderStepId, ...]] = get_args(LadderStepId)
VALIDATION_RUN: Final = "validation_run"
ALL_STEP_IDS: Final[tuple[AnyStepId, ...]] = get_args(AnyStepId)


def json_schema(command: str, version: int) -> str:
    """The ``"schema"`` of a command's ``--json`` object: ``oom-wizard.fit/1``.

    The version goes up when a key is removed or renamed, or its meaning or type changes; a
    key added leaves it as it is (a script reads the keys it knows and passes over the rest).
    Each shape's version stands beside the code that builds it.
    """
    return f"oom-wizard.{command}/{version}"
