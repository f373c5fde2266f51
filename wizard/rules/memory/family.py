"""The figures one process is weighed with: its family's parameter counts, its blocks'
activation figures, and how they were checked.

The figures are data: parameter counts and per-block activation bytes come from
``presets/memory.yaml`` (``bench/calibrate_memory.py`` made them); an arch without them falls back
to ``archs.yaml``'s parameter counts, and a family without activation figures to a FLUX-sized
nominal block (:class:`NominalBlock`, its text tokens 512; ``known`` is then False and the band a
stand-in's). An arch with no counts at all is weighed with nominal ones only for the direction a
change moves a phase: the job is "not estimated" (:mod:`oom_wizard.rules.memory.job`). A UNet's
activations are a line in its latent pixels (:class:`UNetFigures`), not per block.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from oom_wizard.formats.view import ProcessView
from oom_wizard.rules.catalog import (
    ArchFacts,
    OffloadMemory,
    Presets,
    UnetMemory,
    UnetPass,
    VaeMemory,
)
from oom_wizard.rules.memory.bands import Certainty
from oom_wizard.rules.shape import Shape

GIB_BYTES: Final = float(2**30)
BILLION: Final = 1e9


ADAPTER_SAVED_FACTOR: Final = 2.0
"""A family measured with frozen blocks (no adapter) saves this much more per token per block
without checkpointing once AI Toolkit's adapters are on every Linear (FLUX.1 on the H200:
153.5–155.0 KiB against 76.7–77.0 frozen): each adapted Linear keeps its input for the
adapter's weight gradient. Applied as a stand-in to every family whose figures are frozen."""


UNET_BLOCKS: Final = 20
"""A UNet's blocks for the share of one (no stacked blocks to count)."""


GPU_CHECKED_FAMILIES: Final = frozenset({"flux"})
"""Families whose transformer figures agree with the shared H200 rows (until
``presets/memory.yaml`` says ``checked: gpu`` itself)."""


@dataclass(frozen=True)
class UNetFigures:
    """A UNet's activations per batch item, in bytes: a fixed part and a slope per latent
    pixel ((resolution / 8)²), for a training step (its peak above the weights) with and
    without checkpointing, and for a sampling pass without gradients."""

    family: str
    step_fixed: float
    step_per_pixel: float
    checkpointed_fixed: float
    checkpointed_per_pixel: float
    sample_per_pixel: float
    source: str


SDXL_UNET: Final = UNetFigures(
    family="sdxl",
    step_fixed=0.133 * 2**30,
    step_per_pixel=512_900.0,
    checkpointed_fixed=0.173 * 2**30,
    checkpointed_per_pixel=38_440.0,
    sample_per_pixel=16_710.0,
    source="the SDXL UNet on the H200 (../shared/gpu-measurements.md): 512², 768², 1024² and "
    "batch 4, with and without checkpointing; a sampling pass at 1024² with guidance",
)
"""SDXL's UNet fitted on the shared GPU rows: the step's peak above the weights is within
0.13 GiB of a line in the latent pixels at 512²–1024² (batch 4 is four items)."""


UNET_FAMILIES: Final = frozenset({"sd15", "sd2", "sdxl", "ssd", "vega"})
"""Families whose denoiser is a UNet: SDXL's figures, GPU-checked, stand in for the others."""


NOMINAL_WIDTH: Final = 3072
"""The hidden width assumed without a family's figures (FLUX-sized)."""


class BlockLike(Protocol):
    """One kind of block of a family (``presets/memory.yaml``)."""

    @property
    def name(self) -> str: ...
    @property
    def count(self) -> int: ...
    @property
    def saved_bytes_per_token(self) -> float: ...
    @property
    def input_bytes_per_token(self) -> float: ...
    @property
    def peak_bytes_per_token(self) -> float: ...
    @property
    def tokens(self) -> str: ...
    @property
    def text_bytes_per_token(self) -> float | None: ...


class ActivationsLike(Protocol):
    @property
    def width(self) -> int: ...
    @property
    def text_tokens(self) -> int: ...
    @property
    def text_embedding_width(self) -> int | None: ...
    @property
    def blocks(self) -> Sequence[BlockLike]: ...
    @property
    def adapter(self) -> str: ...


class ParamsLike(Protocol):
    @property
    def transformer(self) -> float: ...
    @property
    def text_encoder(self) -> float: ...
    @property
    def vae(self) -> float: ...
    @property
    def experts(self) -> int: ...
    @property
    def beside(self) -> float: ...
    @property
    def after_sample(self) -> float: ...


class FamilyLike(Protocol):
    """A memory family: its parameter counts and per-token activation figures."""

    @property
    def id(self) -> str: ...
    @property
    def params(self) -> ParamsLike: ...
    @property
    def activations(self) -> ActivationsLike | None: ...
    @property
    def checked(self) -> str | None: ...
    @property
    def unet(self) -> UnetMemory | None: ...
    @property
    def vae(self) -> VaeMemory | None: ...
    @property
    def offload(self) -> OffloadMemory | None: ...


Placed = Sequence[tuple[BlockLike, int]]
"""Blocks and how many of each are counted (all of a family's, or one card's)."""


@dataclass(frozen=True)
class NominalBlock:
    """A block with nominal figures, used when a family has none (FLUX's double block)."""

    name: str = "nominal"
    count: int = 57
    saved_bytes_per_token: float = 86_400.0
    input_bytes_per_token: float = 6_144.0
    peak_bytes_per_token: float = 120_000.0
    tokens: str = "joint"
    text_bytes_per_token: float | None = None


NOMINAL_TEXT_TOKENS: Final = 512


class FamilyFigures:
    """The figures one process is weighed with: its family's parameter counts (memory.yaml's,
    else archs.yaml's, else nominal ones and ``known`` False), its blocks' activation figures
    (or a UNet's, or a nominal block) and how they were checked (``certainty``). Every term of
    the account reads them; what they assume is said in ``notes``, which the terms share."""

    def __init__(
        self,
        process: ProcessView,
        facts: ArchFacts | None,
        family: FamilyLike | None,
        presets: Presets,
        video: bool,
        notes: list[str],
    ) -> None:
        self.process = process
        self.facts = facts
        self.family = family
        self.presets = presets
        self.video = video
        self.notes = notes
        self.known = True
        self.shape = Shape.of(facts, presets)
        self.certainty: Certainty = "cpu"
        self.unet: UNetFigures | None = None
        self.unet_pass: UnetPass | None = None
        # values per text token of the embeddings a step holds for each item, where
        # memory.yaml's text_embedding_width gives them (0: the item's own cost holds them)
        self.text_embedding_width = 0
        self._params()
        self._blocks()

    def _params(self) -> None:
        levers = self.presets.levers
        family, facts = self.family, self.facts
        if family is not None:
            p = family.params
            self.p_t, self.p_te, self.p_vae, self.experts = (
                p.transformer,
                p.text_encoder,
                p.vae,
                p.experts,
            )
        elif facts is not None and facts.params is not None:
            p2 = facts.params
            self.p_t, self.p_te, self.p_vae, self.experts = (
                p2.transformer,
                p2.text_encoder,
                0.0,
                p2.experts,
            )
            self.notes.append("The VAE's parameters are not counted for this arch.")
        else:  # not estimated (_not_estimated): nominal counts, for the direction only
            self.known = False
            self.p_t = levers.unknown_params.transformer
            self.p_te = levers.unknown_params.text_encoder
            self.p_vae, self.experts = 0.0, 1
            return
        loader = facts.python_class if facts is not None else None
        dropped = levers.text_encoder_dropped.get(loader or "", 0.0)
        if dropped and self.p_te > dropped:
            self.p_te -= dropped
            self.notes.append(
                f"The text encoder's vision tower ({dropped:.2f} B parameters) is dropped "
                "before the encoder comes to the card."
            )

    def _blocks(self) -> None:
        family_id = self.family.id if self.family is not None else ""
        activations = self.family.activations if self.family is not None else None
        measured_unet = self.family.unet if self.family is not None else None
        if measured_unet is not None:
            network = self.process.network
            locon = network is not None and bool(network.conv)
            self.unet_pass = (
                measured_unet.networks.get("locon") if locon else None
            ) or measured_unet.networks["lora"]
            self.unet = SDXL_UNET  # its sampling pass per latent pixel stands in
            self.blocks: Sequence[BlockLike] = ()
            self.width = NOMINAL_WIDTH
            self.text_tokens = measured_unet.text_tokens
            self.certainty = "gpu" if self.family and self.family.checked == "gpu" else "cpu"
            return
        if family_id in UNET_FAMILIES:
            self.unet = SDXL_UNET
            self.blocks = ()
            self.width = NOMINAL_WIDTH
            self.text_tokens = 0
            if family_id == SDXL_UNET.family:
                self.certainty = "gpu"
            else:
                self.certainty = "stand_in"
                self.notes.append(
                    "The UNet's activations are SDXL's, fitted per latent pixel on a GPU: a "
                    "stand-in for this UNet until its own are measured."
                )
            return
        if activations is None or not activations.blocks:
            self.known = False
            self.certainty = "stand_in"
            self.blocks = (NominalBlock(),)
            self.width = NOMINAL_WIDTH
            self.text_tokens = NOMINAL_TEXT_TOKENS
            self.notes.append(
                "The arch's activation figures are not measured: a FLUX-sized block stands "
                "in for them, so the band is wide."
            )
            return
        self.blocks = tuple(activations.blocks)
        self.width = activations.width
        self.text_tokens = activations.text_tokens
        self.text_embedding_width = activations.text_embedding_width or 0
        checked = self.family.checked if self.family is not None else None
        if not self.known:
            self.certainty = "stand_in"
        elif checked == "gpu" or (checked is None and family_id in GPU_CHECKED_FAMILIES):
            self.certainty = "gpu"
        else:
            self.notes.append(
                "The activations are measured on CPU on the model's own blocks (not checked "
                "on a GPU): the band is wider."
            )
        if activations.adapter != "lora":
            self.notes.append(
                "The blocks were measured frozen: AI Toolkit's adapters are counted at FLUX.1's "
                f"measured ×{ADAPTER_SAVED_FACTOR:g} on the saved bytes (a stand-in)."
            )

    def largest_block_share(self) -> float:
        """The largest block's share of the transformer's parameters (levers.yaml's block
        sizes where it has them, else an even share of the family's blocks)."""
        sizes = self.presets.levers.split_model.block_params
        known = [sizes[b.name] for b in self.blocks if b.name in sizes]
        if known and self.p_t > 0:
            return min(max(known) / (self.p_t * BILLION), 1.0)
        count = sum(b.count for b in self.blocks) or UNET_BLOCKS
        return 1.0 / count

    def wide_text_embeddings(self) -> float:
        """Bytes of one prompt's text embeddings where they are far wider than a block's input
        (memory.yaml's ``text_embedding_width``, at ``train.dtype``); 0 where they are not."""
        if not self.text_embedding_width:
            return 0.0
        dtype_bytes = self.presets.levers.weight_bytes(self.process.train.dtype)
        return self.text_tokens * self.text_embedding_width * dtype_bytes

    def saved_factor(self) -> float:
        """The saved bytes of a block with AI Toolkit's adapters (or a full fine-tune's weight
        gradients) against memory.yaml's figures: 1 where they were measured with the adapters
        in place, FLUX.1's measured factor where the blocks were measured frozen."""
        activations = self.family.activations if self.family is not None else None
        if activations is not None and activations.adapter == "lora":
            return 1.0
        return ADAPTER_SAVED_FACTOR

    def placed(self, blocks: Placed | None) -> Placed:
        """The blocks counted (with how many of each): all of them, or one card's."""
        return blocks if blocks is not None else tuple((b, b.count) for b in self.blocks)
