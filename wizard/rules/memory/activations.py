"""A training step's activations: what the blocks keep for the backward pass and the one
block's transient peak (the account's ``activations`` in a training step).

Per item of the largest bucket R of each dataset (batch × that, then the largest over
datasets)::

    T_img  = (R / (s × p))² × frames_latent + control images × T_control
    T_control = the target's tokens: the dataloader crops a control image to the target's
             bucket (512² with ``full_size_control_images: false``); an arch that sizes its
             raw control images itself (archs.yaml's ``control_pixels``) resizes each to its
             pixel budget, or caps it there (counted at the cap), or with
             ``model_kwargs.match_target_res`` to the target's area
    T_joint = T_img + text tokens (memory.yaml's ``text_tokens``)
    checkpointing on:   Σ_blocks count × input × T + max_blocks (saved + peak) × T
    checkpointing off:  Σ_blocks count × saved × T + max_blocks peak × T

    T is T_joint for a block that attends jointly, T_img for one that sees image tokens only;
    input, saved and peak are memory.yaml's bytes per token. Where the text embeddings are far
    wider than a block's input (memory.yaml's ``text_embedding_width``, LTX-2's Gemma hidden
    states stacked: 188,160 values a token), each item's pass also holds text tokens × that
    width at the train dtype (0.36 GiB for LTX-2's 1,024 tokens). An eager ``attention_backend``
    (levers.yaml's ``attention.eager``) adds the attention matrix M = heads × T² × bytes
    (heads = d / head_dim, the family's own head width where levers.yaml gives one): each block
    saves ``eager_saved_matrices`` × M for backward (kept with checkpointing off, only the
    recomputed block's with it on) and holds
    ``eager_transient_matrices`` × M while it runs. ``diff_output_preservation`` and
    ``blank_prompt_preservation`` run a second pass with gradients: the Σ term counts twice.
    ``inverted_mask_prior`` and ``do_prior_divergence`` add a prior prediction made without
    gradients before the step: it does not stack on the step's peak (a note says so).

Each batch item's own cost (latents, noise, targets, the loss) is not per token: it is the
card's overheads' ``item_gib`` (:mod:`oom_wizard.rules.memory.overheads`), counted by
:meth:`TrainingActivations.items`.
"""

from __future__ import annotations

import math
from typing import Final

from oom_wizard.formats.view import DatasetView
from oom_wizard.rules.memory.family import BlockLike, FamilyFigures, Placed
from oom_wizard.rules.memory.weights import Weights
from oom_wizard.rules.shape import dataset_frames

BOUNCED_INPUT_SHARE: Final = 0.5
"""An offloaded Linear keeps its own input for its backward (``_BouncingLinearFn`` saves it,
even for a frozen weight), in bf16: half the fp32 copy an adapter keeps of the same input, so
a block saves this share of (saved with adapters − saved frozen) more per offloaded layer."""


class TrainingActivations:
    """A training step's activations of one process, in bytes (the module's formula)."""

    def __init__(self, figures: FamilyFigures, weights: Weights) -> None:
        self.figures = figures
        self.weights = weights
        self.notes = figures.notes

    def training(self, blocks: Placed | None = None) -> float:
        process = self.figures.process
        checkpointing = process.train.gradient_checkpointing is not False
        passes = 1 + int(
            process.train.diff_output_preservation is True
            or process.train.blank_prompt_preservation is True
        )
        if process.train.inverted_mask_prior is True or process.train.do_prior_divergence is True:
            self.notes.append(
                "The prior prediction (inverted_mask_prior / do_prior_divergence) runs without "
                "gradients before the step: it does not add to the step's peak."
            )
        if passes > 1:
            self.notes.append(
                "The preservation pass runs with gradients: the step keeps two passes' activations."
            )
        embeddings = self._text_embeddings()
        loads = []
        for dataset in process.datasets or ():
            resolution = max(dataset.resolution or (512,))
            frames = dataset_frames(dataset, self.figures.shape) if self.figures.video else 1
            batch = dataset.batch_size or process.train.batch_size or 1
            if self.figures.unet is not None:  # its fitted fixed part holds the item's own cost
                kept, transient = self._unet_item(resolution, checkpointing), 0.0
            else:
                image = self.figures.shape.tokens(resolution, resolution, frames)
                control = dataset.control_images
                image_tokens = image + control * self._control_tokens(dataset, image)
                kept, transient = self._per_item(image_tokens, checkpointing, blocks)
            loads.append(batch * ((kept + embeddings) * passes + transient))
        if not loads:
            if self.figures.unet is not None:
                return self._unet_item(512, checkpointing)
            kept, transient = self._per_item(
                self.figures.shape.tokens(512, 512, 1), checkpointing, blocks
            )
            loads.append(kept + embeddings + transient)
        return max(loads)

    def _text_embeddings(self) -> float:
        """Bytes of one item's text embeddings where they are far wider than a block's input
        (memory.yaml's ``text_embedding_width``): held on the card through the pass."""
        held = self.figures.wide_text_embeddings()
        if not held:
            return 0.0
        width = self.figures.text_embedding_width
        self.notes.append(
            f"The text embeddings (every hidden state of the text encoder stacked: {width:,} "
            f"values a token, {self.figures.text_tokens:,} tokens) stay on the card through "
            f"each pass: {held / 2**30:.2f} GiB a batch item, counted with the activations."
        )
        return held

    def items(self) -> int:
        """A training step's batch items whose own cost the per-token figures leave out
        (:data:`~oom_wizard.rules.memory.overheads.ITEM_GIB`, added by
        :mod:`~oom_wizard.rules.memory.parts`); 0 for a UNet, whose fitted figures hold it
        already."""
        if self.figures.unet is not None:
            return 0
        return max(
            (
                d.batch_size or self.figures.process.train.batch_size or 1
                for d in self.figures.process.datasets
            ),
            default=self.figures.process.train.batch_size or 1,
        )

    def _unet_item(self, resolution: int, checkpointing: bool) -> float:
        """One item's training step above the weights for a UNet: a fixed part and a slope in
        the latent pixels ((R / 8)²)."""
        pixels = (resolution / 8.0) ** 2
        measured = self.figures.unet_pass
        if measured is not None:
            if checkpointing:
                return measured.checkpointed_saved.at(pixels) + measured.checkpointed_peak.at(
                    pixels
                )
            return measured.saved.at(pixels) + measured.peak.at(pixels)
        unet = self.figures.unet
        assert unet is not None
        if checkpointing:
            return unet.checkpointed_fixed + unet.checkpointed_per_pixel * pixels
        return unet.step_fixed + unet.step_per_pixel * pixels

    def _control_tokens(self, dataset: DatasetView, target: float) -> float:
        """Tokens of one control image of ``dataset``, whose target has ``target`` tokens.

        The dataloader crops each to the target's bucket (or to 512 × 512 with
        ``full_size_control_images: false``), unless the arch takes the raw images and sizes
        them itself (archs.yaml's ``control_pixels``): to its pixel budget, or to the target's
        area with ``model_kwargs.match_target_res``.
        """
        if not dataset.control_images:
            return 0.0
        facts = self.figures.facts.control_pixels if self.figures.facts is not None else None
        kwargs = self.figures.process.model.model_kwargs
        where = f"datasets[{dataset.index}]"
        if facts is None:
            if dataset.full_size_control_images is False:
                self.notes.append(
                    f"{where}.full_size_control_images is false: the dataloader resizes each "
                    "control image to 512 × 512."
                )
                return self.figures.shape.tokens(512, 512, 1)
            return target
        if kwargs is not None and kwargs.match_target_res is True:
            self.notes.append(
                "model_kwargs.match_target_res: each control image is resized to the target's area."
            )
            return target
        pixels = facts.pixels
        if facts.kwarg is not None and kwargs is not None:
            pixels = getattr(kwargs, facts.kwarg, None) or pixels
        side = round(math.sqrt(pixels))
        megapixels = f"{pixels / 2**20:.2g} MP ({side}² px)"
        self.notes.append(
            f"The model resizes each control image to {megapixels}, whatever the target's size."
            if facts.mode == "resize"
            else f"The model scales a control image larger than {megapixels} down to it: each is "
            "counted at that cap (a smaller one keeps its own size, so this is an upper bound)."
        )
        return self.figures.shape.tokens(side, side, 1)

    def _per_item(
        self, image_tokens: float, checkpointing: bool, blocks: Placed | None = None
    ) -> tuple[float, float]:
        """(kept across the pass, one block's transient) in bytes for one item."""
        kept = 0.0
        transient = 0.0
        factor = self.figures.saved_factor()
        saved_matrix, transient_matrix = eager_matrices(self.figures)
        for block, count in self.figures.placed(blocks):
            tokens = image_tokens + (self.figures.text_tokens if block.tokens != "image" else 0)
            matrix = matrix_bytes(self.figures, tokens)
            text = self._text_saved(block) * factor
            saved = block.saved_bytes_per_token * factor
            if self.weights.offloaded > 0:
                frozen = getattr(block, "frozen_saved_bytes_per_token", None)
                base = float(frozen) if frozen else block.saved_bytes_per_token
                saved += self.weights.offloaded * BOUNCED_INPUT_SHARE * max(saved - base, 0.0)
            if checkpointing:
                kept += count * block.input_bytes_per_token * tokens
                transient = max(
                    transient,
                    (saved + block.peak_bytes_per_token) * tokens
                    + text
                    + (saved_matrix + transient_matrix) * matrix,
                )
            else:
                kept += count * (saved * tokens + text + saved_matrix * matrix)
                transient = max(
                    transient, block.peak_bytes_per_token * tokens + transient_matrix * matrix
                )
        return kept, transient

    def _text_saved(self, block: BlockLike) -> float:
        """Bytes a block that attends to the text by cross-attention (``tokens: image``) saves
        for the text tokens: memory.yaml's ``text_bytes_per_token`` (its keys' and values'
        inputs) × the text tokens; 0 for a joint block, whose text tokens are in its tokens."""
        if block.tokens != "image":
            return 0.0
        return (block.text_bytes_per_token or 0.0) * self.figures.text_tokens


def eager_matrices(figures: FamilyFigures) -> tuple[float, float]:
    """(saved, transient) attention matrices per block: 0 for a flash or memory-efficient
    kernel, levers.yaml's counts for an eager ``train.attention_backend``."""
    facts = figures.presets.levers.attention
    backend = (figures.process.train.attention_backend or "").strip().lower()
    if backend not in facts.eager:
        return 0.0, 0.0
    figures.notes.append(
        f"train.attention_backend {backend!r} is eager: each attention block keeps its "
        "heads × tokens² matrix."
    )
    return facts.eager_saved_matrices, facts.eager_transient_matrices


def matrix_bytes(figures: FamilyFigures, tokens: float) -> float:
    """Bytes of one attention matrix over ``tokens`` (heads × tokens² elements)."""
    facts = figures.presets.levers.attention
    family = figures.family.id if figures.family is not None else ""
    heads = max(1.0, figures.width / facts.head_dim_by_family.get(family, facts.head_dim))
    return heads * tokens * tokens * facts.matrix_bytes
