"""The phases of a run the memory model weighs, and the log's phases and the plan's moments
that map onto them.

Four phases peak at different moments: the end of ``load`` (the weights just moved to the
card), the ``baseline_sample`` before step 0, a ``training`` step, and a periodic ``sample``.
Each gets its own band (:mod:`oom_wizard.rules.memory.job`).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, Literal

Phase = Literal["load", "baseline_sample", "training", "sample"]

PassPhase = Literal["baseline_sample", "training", "sample"]
"""The phases after the load: each a pass through the transformer (a sample or a step)."""


PHASES: Final[tuple[Phase, ...]] = ("load", "baseline_sample", "training", "sample")


CRASH_PHASE: Final[Mapping[str, Phase]] = MappingProxyType(
    {
        "model_load": "load",
        "quantize": "load",
        "cache_latents": "load",
        "cache_text": "load",
        "baseline_sample": "baseline_sample",
        "training": "training",
        "periodic_sample": "sample",
    }
)
"""The memory phase of the log's finer phases."""

LoadMoment = Literal["loaded", "caching"]
"""The load phase's two moments: the weights loaded (quantized block by block, the text encoder
and the VAE beside them), then the latents encoded with the VAE alone on the card."""

LOAD_MOMENT: Final[Mapping[str, LoadMoment]] = MappingProxyType(
    {"model_load": "loaded", "quantize": "loaded", "cache_latents": "caching"}
)
"""The load's moment of the log's finer phases (caching the text embeddings is neither: the
text encoder's forward is not in the model)."""

MomentPhase = Literal["load", "training", "sample"]
"""The phases a crash moment maps onto (the first sample is weighed with the load)."""

MOMENT_PHASE: Final[Mapping[str, MomentPhase]] = MappingProxyType(
    {
        "loading": "load",
        "early_steps": "training",
        "intermittent": "training",
        "sampling": "sample",
    }
)
"""The memory phase of a crash moment, when the log says nothing finer: the peak that crash ran
into (a ``loading`` crash's counts the first sample too)."""

PHASE_MOMENT: Final[Mapping[Phase, str]] = MappingProxyType(
    {
        "load": "loading",
        "baseline_sample": "loading",
        "training": "early_steps",
        "sample": "sampling",
    }
)
"""The plan's moment whose ladder lowers a phase's peak."""


PHASE_WORDS: Final[Mapping[Phase, str]] = MappingProxyType(
    {
        "load": "loading",
        "baseline_sample": "first sample",
        "training": "training step",
        "sample": "periodic sample",
    }
)
"""How a phase is named in a sentence."""
