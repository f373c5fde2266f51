"""The passes without gradients: a sample's denoising pass with its VAE decode, and the
validation pass (the account's ``activations`` in a sample phase).

A sample, per sample at its own width, height and frames::

    (2 × input + α × saved) × T (+ both eager matrices), the largest over blocks, × 2 with
    classifier-free guidance (guidance_scale > 1 on an arch that is not guidance-distilled),
    α = SAMPLE_SAVED_SHARE.

Where the text embeddings are far wider than a block's input (memory.yaml's
``text_embedding_width``: LTX-2's), a sample holds them through its denoising and its decode:
the prompt's and the negative prompt's, each padded to the text tokens (ltx2.py
generate_single_image, pad_embeds), and with classifier-free guidance the two again,
concatenated by the pipeline (diffusers pipeline_ltx2.py ``__call__``, ``torch.cat``).

The validation pass (``train.validation_config``, BaseSDTrainProcess.validate) is the same
forward pass at ``resolution``² with one batch item per ``validation_sigmas`` entry and no
guidance; it runs after a training step, so the periodic ``sample`` phase takes the larger of
it and the sample (and happens with validation even when sampling is off).
"""

from __future__ import annotations

from typing import Final

from oom_wizard.formats.view import SampleView
from oom_wizard.rules.memory.activations import eager_matrices, matrix_bytes
from oom_wizard.rules.memory.family import FamilyFigures, Placed
from oom_wizard.rules.memory.vae_passes import VaePasses
from oom_wizard.spelling import counted

SAMPLE_SAVED_SHARE: Final = (0.3, 0.6)
"""The share of a block's saved bytes alive at once in a forward pass without gradients."""


GUIDANCE_DISTILLED: Final = frozenset({"flux", "flux_kontext", "flex1", "flex2"})
"""Archs whose guidance_scale is an input of one pass, not classifier-free guidance."""


class SamplingActivations:
    """The passes without gradients of one process, in bytes (the module's formula)."""

    def __init__(self, figures: FamilyFigures, vae: VaePasses) -> None:
        self.figures = figures
        self.vae = vae
        self.notes = figures.notes

    def forward(self, image: float, blocks: Placed | None = None) -> tuple[float, float]:
        """(low, high) bytes of one item's forward pass without gradients over ``image``
        tokens: the heaviest block's input, output and share of its saved bytes, and with an
        eager kernel its scores and softmax."""
        if self.figures.unet is not None:  # image tokens are latent pixels (patch 1)
            pixels = image * self.figures.unet.sample_per_pixel
            return pixels, pixels
        saved_matrix, transient_matrix = eager_matrices(self.figures)
        eager = saved_matrix + transient_matrix
        low = high = 0.0
        for block, _count in self.figures.placed(blocks):
            tokens = image + (self.figures.text_tokens if block.tokens != "image" else 0)
            base = 2.0 * block.input_bytes_per_token * tokens + eager * matrix_bytes(
                self.figures, tokens
            )
            low = max(low, base + SAMPLE_SAVED_SHARE[0] * block.saved_bytes_per_token * tokens)
            high = max(high, base + SAMPLE_SAVED_SHARE[1] * block.saved_bytes_per_token * tokens)
        return low, high

    def validation(self, blocks: Placed | None = None) -> tuple[float, float] | None:
        """(low, high) bytes of the validation pass, None without ``validation_config``.

        BaseSDTrainProcess.validate: each validation image, resized to the pixel budget of
        ``resolution``², is predicted once per sigma in one batch, without gradients and
        without guidance, after a training step (at the start step and every
        ``validate_every_n_steps``): the periodic-sample moment.
        """
        validation = self.figures.process.train.validation_config
        if validation is None:
            return None
        side = validation.resolution or 512
        batch = len(validation.validation_sigmas or (1.0, 0.75, 0.5, 0.25))
        low, high = self.forward(self.figures.shape.tokens(side, side, 1), blocks)
        every = validation.validate_every_n_steps
        when = f"every {every} steps" if every else "at the start step"
        self.notes.append(
            f"The validation pass ({counted(batch, 'sigma')} in one batch at "
            f"{side} px, {when}) peaks beside the periodic sample."
        )
        return low * batch, high * batch

    def sample(
        self, sample: SampleView, blocks: Placed | None = None
    ) -> tuple[float, float, float]:
        """(low, high) bytes of the heaviest sample's denoising pass, and its VAE decode."""
        cfg = 2 if self._cfg(sample) else 1
        worst = (0.0, 0.0)
        decode = 0.0
        for index in range(max(len(sample.prompt_paths()), 1)):
            size = sample.rendered_size(index)
            frames = size["num_frames"] if self.figures.video else 1
            image = self.figures.shape.tokens(size["width"], size["height"], frames)
            if self.figures.unet is not None:
                pixels = size["width"] * size["height"] / 64.0
                low = high = self.figures.unet.sample_per_pixel * pixels
            else:
                low, high = self.forward(image, blocks)
            if high * cfg > worst[1]:
                worst = (low * cfg, high * cfg)
            decode = max(
                decode, self.vae.passed(size["width"], size["height"], frames, decode=True)
            )
        held = self._text_embeddings(cfg)
        return worst[0] + held, worst[1] + held, decode + held if decode else 0.0

    def _text_embeddings(self, cfg: int) -> float:
        """Bytes of a sample's text embeddings where they are far wider than a block's input:
        the prompt's and the negative prompt's, and their concatenation with guidance."""
        one = self.figures.wide_text_embeddings()
        if not one:
            return 0.0
        copies = 2 * cfg
        self.notes.append(
            f"A sample holds {copies} copies of the wide text embeddings (the prompt's and the "
            "negative prompt's" + (", and both again for guidance" if cfg > 1 else "") + "): "
            f"{copies * one / 2**30:.2f} GiB through its denoising and decode."
        )
        return copies * one

    def _cfg(self, sample: SampleView) -> bool:
        arch = self.figures.facts.id if self.figures.facts is not None else None
        return (sample.guidance_scale or 0.0) > 1.0 and arch not in GUIDANCE_DISTILLED
