"""One phase of one process in GiB: the account's terms (bytes) with the card's overheads
added (:class:`Parts`), and the band around their sum (:func:`band_of`).

The figure: the terms (:mod:`oom_wizard.rules.memory.account`), the context CUDA_CONTEXT_GIB,
the slack ALLOCATOR_SLACK on the activations and the layers in flight, the workspaces
WORKSPACE_GIB (:mod:`oom_wizard.rules.memory.overheads`); the band: the figure × (1 ±
CLASS_BAND[certainty]) (:mod:`oom_wizard.rules.memory.bands`).
"""

from __future__ import annotations

from dataclasses import dataclass

from oom_wizard.rules.memory.account import Terms
from oom_wizard.rules.memory.bands import Band
from oom_wizard.rules.memory.family import GIB_BYTES
from oom_wizard.rules.memory.overheads import OVERHEADS, Overheads


@dataclass(frozen=True)
class Parts:
    """What one phase holds, in GiB (the band's midpoints)."""

    transformer: float
    text_encoder: float
    vae: float
    trainable: float
    optimizer: float
    activations: float
    overhead: float
    in_flight: float = 0.0
    """Copies of the transformer's weights made for the pass: under layer offloading the
    staging rings' copies of the layers in flight (the moved layers themselves live in system
    RAM), and the dequantized copies of a layer of AI Toolkit's own quantizers that autograd
    keeps until backward; ``transformer`` holds what stays resident."""
    vae_pass: float = 0.0
    """The VAE's decode (a sample) or encode (latents not cached, or while caching them),
    where it, not the denoiser's pass, sets the phase's peak."""
    context: float = 0.0
    """The CUDA context, part of ``overhead``."""
    slack: float = 0.0
    """The allocator's slack, part of ``overhead`` (reserved but not allocated): a figure
    published as PyTorch's peak allocation holds neither it nor the context."""
    items: int = 0
    """The batch items whose own cost (``Overheads.item_gib``) is in ``activations``."""
    unexplained: float = 0.0
    """What the log's figure says the phase held beyond this model's estimate with its
    factor at :data:`~oom_wizard.rules.memory.calibration.SCALE_RANGE`'s bound: a fixed amount,
    not any named part."""

    def as_dict(self) -> dict[str, float]:
        """The parts rounded to 0.01 GiB, in the contract's order (``overhead`` holds the CUDA
        context, ``context`` says how much of it that is)."""
        return {
            "transformer": round(self.transformer, 2),
            "in_flight": round(self.in_flight, 2),
            "text_encoder": round(self.text_encoder, 2),
            "vae": round(self.vae, 2),
            "trainable": round(self.trainable, 2),
            "optimizer": round(self.optimizer, 2),
            "activations": round(self.activations, 2),
            "vae_pass": round(self.vae_pass, 2),
            "overhead": round(self.overhead, 2),
            "context": round(self.context, 2),
            "unexplained": round(self.unexplained, 2),
        }

    @property
    def weights(self) -> float:
        """What the phase holds beside its activations and overhead: the weights, the
        trained state and the optimizer's."""
        return (
            self.transformer
            + self.in_flight
            + self.text_encoder
            + self.vae
            + self.trainable
            + self.optimizer
        )


def band_of(
    terms: Terms,
    quantized: bool,
    scale: float,
    unexplained: float = 0.0,
    overheads: Overheads = OVERHEADS,
) -> tuple[Band, Parts]:
    """The band and parts (GiB) of one phase of one process.

    The figure: ``weights + varying × scale + slack + workspaces + context``, the varying part
    the activations with each batch item's own cost (or the VAE's pass), the slack a share of
    it and of the layers in flight; ``scale`` is the job's calibration (1 without one). The
    band: the figure × (1 + the certainty class's :data:`CLASS_BAND`), then ``unexplained``
    (the GiB of a calibration's figure the factor at its bound does not reach) on both edges.
    """
    del quantized  # its slack is in the transformer's edges already

    def mid(pair: tuple[float, float]) -> float:
        return (pair[0] + pair[1]) / 2.0 / GIB_BYTES

    fixed = mid(terms.fixed())
    items = terms.items * overheads.item_gib
    act = (mid(terms.activations) + items) * scale
    vae = mid(terms.vae_pass) * scale
    in_flight = mid(terms.in_flight)
    slack = overheads.slack * (act + vae + in_flight)
    work = 0.0 if terms.loading else overheads.workspace_gib
    context = overheads.context_gib
    figure = fixed + act + vae + slack + work + context
    low, high = overheads.band[terms.certainty]
    band = Band(figure * (1.0 + low) + unexplained, figure * (1.0 + high) + unexplained)
    parts = Parts(
        transformer=mid(terms.transformer),
        in_flight=in_flight,
        text_encoder=mid(terms.text_encoder),
        vae=mid(terms.vae),
        trainable=mid(terms.trainable),
        optimizer=mid(terms.optimizer),
        activations=act,
        overhead=slack + work + context,
        vae_pass=vae,
        context=context,
        slack=slack,
        items=terms.items,
        unexplained=unexplained,
    )
    return band, parts
