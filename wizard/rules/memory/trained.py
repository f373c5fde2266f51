"""What trains: the adapter's weights (or a full fine-tune's), their gradients, EMA's copy and
the optimizer's state (the account's ``trainable`` and ``optimizer``).

The adapter's trained weights n, per transformer weight (``d`` = the family's width, 3072 without
figures; each d×d Linear layer is adapted)::

    LoRA / LoCon  n = P_t × a × r / d  (+ the same with r = ``network.conv`` for LoCon: conv
                  layers are counted as Linear ones of the same share, an upper bound for a
                  transformer); a = LORA_SHARE_PER_RANK
    LoKr          n = P_t × (f² + (d / f)²) / d²  with f = ``lokr_factor`` (−1: f ≈ √d, the
                  toolkit's largest factor), full rank as the toolkit's ``lokr_full_rank`` default
    with ``train_text_encoder`` the text encoder's weights are adapted (or fully trained) too,
    and it stays resident through training.

Adapter weights train in fp32: 4 bytes, 4 for the gradient, 4 for EMA's copy. A full
fine-tune's gradients, optimizer state and EMA copy are counted on the weights layer offloading
leaves on the card (a moved weight's live beside it in system RAM).
"""

from __future__ import annotations

import math
from typing import Final

from oom_wizard.formats.view import ProcessView
from oom_wizard.rules.catalog import OptimizerInfo
from oom_wizard.rules.memory.family import BILLION, FamilyFigures
from oom_wizard.rules.memory.weights import OFFLOAD_PIPELINE_DEPTH, Weights

LORA_SHARE_PER_RANK: Final = 1.4
"""A LoRA's weights per transformer weight, × d / r: 2 for a square Linear layer, 1.25 for an
MLP's d×4d one; a FLUX.1 rank-16 LoRA on every Linear layer (about 172 MB in bf16: 86 M
weights of 11.9 B) gives about 1.39."""


ADAPTER_BYTES: Final = 4.0
"""An adapter weight trains in fp32 (BaseSDTrainProcess.py:1983): 4 bytes, 4 its gradient."""


class TrainedState:
    """What trains, in bytes: ``adapter_weights``, ``gradients``, ``ema`` and ``optimizer``
    (and ``trained_weights``, their count), and ``in_flight``, the gradient ring of an
    offloaded full fine-tune."""

    def __init__(self, figures: FamilyFigures, weights: Weights) -> None:
        self.figures = figures
        self.weights = weights
        self.notes = figures.notes
        self.in_flight = 0.0
        """An offloaded full fine-tune's gradient ring, made on the card (bytes)."""
        levers = self.figures.presets.levers
        process, train = self.figures.process, self.figures.process.train
        info = levers.optimizer(train.optimizer)
        state = info.state_bytes if info is not None else levers.unknown_optimizer_state_bytes
        network = process.network
        ema = train.use_ema is True
        trains_te = train.train_text_encoder is True
        if network is None:  # a full fine-tune
            n = self.figures.p_t * BILLION
            on_card = n * (1.0 - self.weights.moved_share)
            if trains_te:
                n += self.figures.p_te * BILLION
                on_card += self.figures.p_te * BILLION
            self.adapter_weights = 0.0
            self.gradients = on_card * self.weights.full * self._swapped_share()
            self.ema = on_card * self.weights.full if ema else 0.0
            self.optimizer = on_card * self._full_state(info, state)
            if self.weights.moved_share > 0:
                self._offloaded_full_fine_tune()
        else:
            share = self._adapter_share(process)
            n = self.figures.p_t * BILLION * share
            if trains_te:
                n += self.figures.p_te * BILLION * share
            self.adapter_weights = n * ADAPTER_BYTES
            self.gradients = n * ADAPTER_BYTES
            self.ema = n * ADAPTER_BYTES if ema else 0.0
            self.optimizer = n * state
        self.trained_weights = n
        if ema:
            self.notes.append("EMA keeps a second copy of the trained weights.")
        if trains_te:
            self.notes.append("The text encoder is trained: it stays on the card while training.")

    def _full_state(self, info: OptimizerInfo | None, state: float) -> float:
        """A full fine-tune's optimizer state per weight: an optimizer that makes its state
        like the weights keeps it at their bytes (levers.yaml's ``follows_weights``: bf16
        weights, half of ``state_bytes``); a factored one its ``full_state_bytes``."""
        if info is None:
            return state
        if info.full_state_bytes is not None:
            return info.full_state_bytes
        if info.follows_weights:
            return state * min(self.weights.full, ADAPTER_BYTES) / ADAPTER_BYTES
        return state

    def _offloaded_full_fine_tune(self) -> None:
        """A full fine-tune under layer offloading: each moved weight's gradient is made on the
        card into a ring of
        :data:`~oom_wizard.rules.memory.weights.OFFLOAD_PIPELINE_DEPTH` slots and copied to its
        pinned weight in system RAM (manager_modules.py:121-146, 394-411), so the gradient, and the
        optimizer's state and EMA's copy that the optimizer makes beside each weight, leave the
        card with it."""
        ring = OFFLOAD_PIPELINE_DEPTH * self.weights.largest_layer * self.weights.full
        self.in_flight = ring
        moved = self.weights.moved_share
        self.notes.append(
            f"Layer offloading: {moved:.0%} of the transformer's weights train in "
            "system RAM; their gradients are copied there as they are made, and their optimizer "
            "state lives beside them, off the card."
        )

    def _swapped_share(self) -> float:
        """The share of a full fine-tune's weights that holds a gradient: the swapping factor
        with ``do_paramiter_swapping`` on an optimizer that can swap, else 1."""
        train = self.figures.process.train
        facts = self.figures.presets.levers.paramiter_swapping
        if train.do_paramiter_swapping is not True:
            return 1.0
        if (train.optimizer or "").strip().lower() not in facts.optimizers:
            self.notes.append(
                "do_paramiter_swapping needs the Adafactor or Automagic optimizer: with "
                f"{train.optimizer!r} every weight keeps its gradient."
            )
            return 1.0
        factor = train.paramiter_swapping_factor or facts.default_factor
        self.notes.append(
            f"Parameter swapping: {factor:g} of the weights hold a gradient at each step (the "
            "weights and the optimizer state stay whole)."
        )
        return factor

    def _adapter_share(self, process: ProcessView) -> float:
        """Trained adapter weights per transformer weight (the docstring's n / P_t)."""
        network = process.network
        assert network is not None
        d = float(self.figures.width)
        kind = (network.type or "lora").lower()
        if kind == "lokr":
            factor = network.lokr_factor if network.lokr_factor is not None else -1
            f = math.sqrt(d) if factor <= 0 else float(factor)
            return (f * f + (d / f) ** 2) / (d * d)
        rank = process.network_rank or self.figures.presets.levers.lora.rank_default
        share = LORA_SHARE_PER_RANK * rank / d
        if network.conv:
            share += LORA_SHARE_PER_RANK * network.conv / d
        return share
