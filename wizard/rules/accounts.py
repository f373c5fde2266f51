"""What one training process holds on the GPU in each phase of its run, in bytes: the terms of
the memory model. :mod:`oom_wizard.rules.memory` turns them into each phase's band of GiB, adds
what no CPU can measure (the CUDA context, the allocator's slack, the trainer's workspaces) and
calibrates them by the job's own figures.

The figures are data: parameter counts and per-block activation bytes come from
``presets/memory.yaml`` (``bench/calibrate_memory.py`` made them); an arch without them falls back
to ``archs.yaml``'s parameter counts, and a family without activation figures to a FLUX-sized
nominal block (:class:`NominalBlock`, its text tokens 512; ``known`` is then False and the band a
stand-in's). An arch with no counts at all is weighed with nominal ones only for the direction a
change moves a phase: the job is "not estimated" (:mod:`oom_wizard.rules.memory`).

The formula
-----------

Per training process (the job's figure of a phase is the largest over its processes), in bytes,
turned into GiB at the end (``/ 2³⁰``)::

    transformer  = P_t × b_t × E × (1 − o_t × (1 − k))             resident transformer
    in_flight    = ring (+ kept)                    weight copies made for the pass
    text_encoder = P_te × b_te × (1 − o_te) + o_te × R_te × b_te'   0 with te_device: cpu
    vae          = P_vae × b_vae                   0 with vae_device: cpu, and in a training
                                                   step when every dataset's latents are cached
    trainable    = adapter weights + gradients (+ EMA's copy)  or, for a full fine-tune,
                   P_t' × b × s (gradients) (+ P_t' × b, EMA), P_t' the weights left on the
                   card by layer offloading (a moved weight's gradient goes to system RAM as
                   it is made, and its state and EMA copy live beside it there; its gradient
                   ring of depth copies is in ``in_flight``); s = ``paramiter_swapping_factor``
                   with ``do_paramiter_swapping`` on an optimizer that swaps (levers.yaml's
                   ``paramiter_swapping``), else 1: only that share holds a gradient
    optimizer    = n × S                           n trained weights on the card, S state bytes each
    activations  = see below
    overhead     = C + k × (activations + in_flight) + W
                                                   the CUDA context (a constant), the allocator's
                                                   slack (a share) and, outside loading, the
                                                   libraries' workspaces (memory.py's Overheads)

    P_t, P_te, P_vae  billions of parameters (memory.yaml's family, else archs.yaml, else nominal;
                 an arch whose size follows ``model.name_or_path``, the generic ``wan21``, takes
                 the family its ``memory_by_name`` patterns find there)
    b            bytes per weight of ``train.dtype``; b_t the qtype's with ``model.quantize``;
                 b_te: ``te_dtype``'s bytes, the qtype_te's with ``quantize_te``, and at most
                 ``text_encoder_bits`` / 8; b_vae: ``vae_dtype``'s bytes, else b
    E            the arch's experts, 1 with ``low_vram``; o_t, o_te the layer-offloading shares
    k, ring      under layer offloading (AI Toolkit's memory manager moves each Linear and
                 Conv2d of the model, blocks or not): k the share of the transformer's
                 parameters outside those layers, which stays; ring = the staging rings'
                 copies of its largest layer (memory.yaml's ``offload``): depth + 1 for a
                 forward pass, 2 × depth + 1 in a training step (OFFLOAD_PIPELINE_DEPTH), at
                 the compute dtype (a torchao or quanto weight is dequantized into its slot,
                 with its stored copy beside it while it is), or at b_t for AI Toolkit's own
                 quantizers, which stage their codes; each moved layer also keeps its bf16
                 input for backward (BOUNCED_INPUT_SHARE)
    kept         a qtype AI Toolkit's own quantizers dequantize at every forward (levers.yaml's
                 ``dequantized_per_forward``, offloaded or not): F.linear keeps that copy for
                 the input's gradient until backward: the largest block's Linear weights at
                 the compute dtype with checkpointing, every Linear weight's without
    R_te, b_te'  the text encoders' parameters outside their Linear and Conv2d layers
                 (memory.yaml's ``offload.text_encoder_resident_params``: token embeddings
                 above all), which text-encoder offloading leaves on the card, unquantized

The adapter's trained weights n, per transformer weight (``d`` = the family's width, 3072 without
figures; each d×d Linear layer is adapted):

    LoRA / LoCon  n = P_t × a × r / d  (+ the same with r = ``network.conv`` for LoCon: conv
                  layers are counted as Linear ones of the same share, an upper bound for a
                  transformer); a = LORA_SHARE_PER_RANK
    LoKr          n = P_t × (f² + (d / f)²) / d²  with f = ``lokr_factor`` (−1: f ≈ √d, the
                  toolkit's largest factor), full rank as the toolkit's ``lokr_full_rank`` default
    with ``train_text_encoder`` the text encoder's weights are adapted (or fully trained) too,
    and it stays resident through training.

Adapter weights train in fp32: 4 bytes, 4 for the gradient, 4 for EMA's copy.

Training activations, per item of the largest bucket R of each dataset (batch × that, then the
largest over datasets)::

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
    input, saved and peak are memory.yaml's bytes per token. An eager ``attention_backend``
    (levers.yaml's ``attention.eager``) adds the attention matrix M = heads × T² × bytes
    (heads = d / head_dim, the family's own head width where levers.yaml gives one): each block
    saves ``eager_saved_matrices`` × M for backward (kept with checkpointing off, only the
    recomputed block's with it on) and holds
    ``eager_transient_matrices`` × M while it runs. ``diff_output_preservation`` and
    ``blank_prompt_preservation`` run a second pass with gradients: the Σ term counts twice.
    ``inverted_mask_prior`` and ``do_prior_divergence`` add a prior prediction made without
    gradients before the step: it does not stack on the step's peak (a note says so).

Sample activations (no gradients), per sample at its own width, height and frames::

    (2 × input + α × saved) × T (+ both eager matrices), the largest over blocks, × 2 with
    classifier-free guidance (guidance_scale > 1 on an arch that is not guidance-distilled),
    α = SAMPLE_SAVED_SHARE.

The validation pass (``train.validation_config``, BaseSDTrainProcess.validate) is the same
forward pass at ``resolution``² with one batch item per ``validation_sigmas`` entry and no
guidance; it runs after a training step, so the periodic ``sample`` phase takes the larger of
it and the sample (and happens with validation even when sampling is off).

The phases::

    load            transformer + one block at full precision while it is quantized on the
                    card (not with low_vram, which quantizes in system RAM, nor with ComfyUI's
                    pre-quantized weights) + text_encoder + vae (+ one item's encode while the
                    latents are cached) + the context
    baseline_sample transformer + text_encoder (0 when cached) + vae + adapter weights
                    + the larger of the sample's denoising pass and the VAE decode + overhead
    training        transformer + text_encoder (0 when cached or unloaded, unless trained) + vae
                    + trainable + optimizer + training activations + overhead
    sample          as baseline_sample, with the optimizer state that now exists
    On an arch whose low-VRAM sampling pipeline holds the text encoder only while it encodes
    (``low_vram_sample_unloads_te``, Wan 2.1), a sample counts the larger of the encoder and
    the activations, not their sum.

The weights' edges: weights × [1, 1 + WEIGHT_SLACK] (quantized models keep some layers
unquantized and carry scales: + QUANT_SLACK), counted at their middle; a training step adds each
batch item's own cost ITEM_GIB (``Terms.items``). The band around the sum is
:mod:`oom_wizard.rules.memory`'s (``CLASS_BAND``, by how the activations were checked: on a GPU,
on CPU only, a stand-in).

Left out, with a note where it matters: the text encoder's forward, cuDNN benchmark workspaces,
an accuracy recovery adapter's weights (its rank is in its file), a quantized layer's transient
dequantization beyond its slot (one layer at most).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal, Protocol

from oom_wizard.formats.view import DatasetView, ProcessView, SampleView
from oom_wizard.rules.catalog import (
    ArchFacts,
    LeversFile,
    OffloadMemory,
    OptimizerInfo,
    Presets,
    UnetMemory,
    UnetPass,
    VaeMemory,
)
from oom_wizard.rules.shape import Shape, dataset_frames, offloaded_fractions
from oom_wizard.spelling import counted

Phase = Literal["load", "baseline_sample", "training", "sample"]

GIB_BYTES: Final = float(2**30)
BILLION: Final = 1e9

WEIGHT_SLACK: Final = 0.03
"""Buffers, norms and embeddings beyond the counted parameters (upper edge of the band)."""
QUANT_SLACK: Final = 0.06
"""A quantized model keeps some layers in full precision and carries scales (upper edge)."""

Certainty = Literal["gpu", "cpu", "stand_in"]
"""How the activation figures of a process were checked: on a real GPU (the shared H200
rows), measured on CPU only (``bench/calibrate_memory.py``), or a stand-in (another family's
figures, or nominal ones)."""

ITEM_GIB: Final = 1.30
"""Per batch item, what does not scale with the pixels: the latents, noise and targets, the
text embeddings and the fp32 loss of one item. Refitted on the published batch series (each
source's runs that differ only in the batch size: SimpleTuner's Krea 2 and Ideogram 4), where
a trainer's own extras cancel out; ``bench/memory_accuracy.py`` prints the refit and a test
keeps this at it."""

ADAPTER_SAVED_FACTOR: Final = 2.0
"""A family measured with frozen blocks (no adapter) saves this much more per token per block
without checkpointing once AI Toolkit's adapters are on every Linear (FLUX.1 on the H200:
153.5–155.0 KiB against 76.7–77.0 frozen): each adapted Linear keeps its input for the
adapter's weight gradient. Applied as a stand-in to every family whose figures are frozen."""

NON_BLOCK_SHARE: Final = 0.03
"""Without a family's offload figures (memory.yaml ``offload``): the share of the transformer
layer offloading is assumed to leave on the card (a stand-in; measured families leave 0-0.4 %,
HiDream-O1's token embedding 7 %)."""
BLOCKS_IN_FLIGHT: Final = 2
"""Without a family's offload figures: the blocks whose weights are assumed on the card at once
(a stand-in for the staging ring)."""
OFFLOAD_PIPELINE_DEPTH: Final = 4
"""The slots of each of AI Toolkit's staging rings (PIPELINE_DEPTH, ``AI_TOOLKIT_OFFLOAD_DEPTH``;
toolkit/memory_management/manager_modules.py:27 at 27a03a91). A slot keeps its weight until the
layer ``depth`` places later replaces it, and the new copy is made before the old one is let go
(:88, :111): depth + 1 copies through a forward pass. The forward ring is never emptied, so in a
training step the backward ring's depth + 1 come on top of its depth (:57-59); AI Toolkit's own
quantizers stage through the forward ring only (:743-763). Counted at the family's largest
layer."""
BOUNCED_INPUT_SHARE: Final = 0.5
"""An offloaded Linear keeps its own input for its backward (``_BouncingLinearFn`` saves it,
even for a frozen weight), in bf16: half the fp32 copy an adapter keeps of the same input, so
a block saves this share of (saved with adapters − saved frozen) more per offloaded layer."""
UNET_BLOCKS: Final = 20
"""A UNet's blocks for the share of one (no stacked blocks to count)."""

SAMPLE_SAVED_SHARE: Final = (0.3, 0.6)
"""The share of a block's saved bytes alive at once in a forward pass without gradients."""

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


IMAGE_VAE_STAND_IN: Final = "flux"
VIDEO_VAE_STAND_IN: Final = "wan21_14b"
"""The memory families whose VAE figures (memory.yaml, checked on the H200) stand in for a family
without its own: FLUX.1's for an image model (the SD and SDXL VAEs have the same decoder
widths), Wan 2.1's for a video model. A stand-in never counts as checked."""

NOMINAL_WIDTH: Final = 3072
"""The hidden width assumed without a family's figures (FLUX-sized)."""
LORA_SHARE_PER_RANK: Final = 1.4
"""A LoRA's weights per transformer weight, × d / r: 2 for a square Linear layer, 1.25 for an
MLP's d×4d one; a FLUX.1 rank-16 LoRA on every Linear layer (about 172 MB in bf16: 86 M
weights of 11.9 B) gives about 1.39."""
ADAPTER_BYTES: Final = 4.0
"""An adapter weight trains in fp32 (BaseSDTrainProcess.py:1983): 4 bytes, 4 its gradient."""

GUIDANCE_DISTILLED: Final = frozenset({"flux", "flux_kontext", "flex1", "flex2"})
"""Archs whose guidance_scale is an input of one pass, not classifier-free guidance."""


# --------------------------------------------------------------------------- the figures read


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


# --------------------------------------------------------------------------- the accounting


@dataclass(frozen=True)
class Terms:
    """One phase of one process, in bytes: (low, high) of each part."""

    transformer: tuple[float, float]
    text_encoder: tuple[float, float]
    vae: tuple[float, float]
    trainable: tuple[float, float]
    optimizer: tuple[float, float]
    activations: tuple[float, float]
    loading: bool = False
    """Loading: whole tensors moved in, no trainer workspaces."""
    in_flight: tuple[float, float] = (0.0, 0.0)
    vae_pass: tuple[float, float] = (0.0, 0.0)
    """The VAE's decode or encode where it is the larger of it and the denoiser's pass (then
    ``activations`` is 0): it is the phase's varying part in their place."""
    certainty: Certainty = "cpu"
    """How the process's activation figures were checked: the band's width
    (:data:`oom_wizard.rules.memory.CLASS_BAND`)."""
    items: int = 0
    """A training step's batch items whose own cost (latents, noise, targets, the loss) the
    per-token figures leave out: :mod:`oom_wizard.rules.memory` adds each at its fitted
    ``item_gib`` (0 for a UNet, whose fitted figures hold it, and outside a training step)."""

    def fixed(self) -> tuple[float, float]:
        parts = (
            self.transformer,
            self.in_flight,
            self.text_encoder,
            self.vae,
            self.trainable,
            self.optimizer,
        )
        return sum(p[0] for p in parts), sum(p[1] for p in parts)


class ProcessAccount:
    """The docstring's terms for one process."""

    def __init__(
        self,
        process: ProcessView,
        facts: ArchFacts | None,
        family: FamilyLike | None,
        presets: Presets,
        video: bool,
        gpus: int = 1,
    ) -> None:
        self.process = process
        self.facts = facts
        self.family = family
        self.presets = presets
        self.video = video
        self.notes: list[str] = []
        self.known = True
        self.shape = Shape.of(facts, presets)
        self.certainty: Certainty = "cpu"
        self.unet: UNetFigures | None = None
        self.unet_pass: UnetPass | None = None
        self._params()
        self._blocks()
        self._vae_figures()
        self._weights()
        self._trained()
        self.split = self._split_cards(gpus)

    # --- figures

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

    def _vae_figures(self) -> None:
        """The VAE passes' figures: the family's own, else a stand-in family's
        (:data:`IMAGE_VAE_STAND_IN`, :data:`VIDEO_VAE_STAND_IN`)."""
        own = self.family.vae if self.family is not None else None
        video = self.video or (self.facts is not None and self.facts.kind == "video")
        stand_in = self.presets.memory_families[VIDEO_VAE_STAND_IN if video else IMAGE_VAE_STAND_IN]
        self.vae_measured = own if own is not None else stand_in.vae
        pixel_space = self.facts is not None and self.facts.spatial_compression == 1
        if own is None and pixel_space and self.family is not None and self.family.params.vae == 0:
            self.vae_measured = None  # a pixel-space model: no VAE, nothing to decode or encode

    def _largest_block_share(self) -> float:
        """The largest block's share of the transformer's parameters (levers.yaml's block
        sizes where it has them, else an even share of the family's blocks)."""
        sizes = self.presets.levers.split_model.block_params
        known = [sizes[b.name] for b in self.blocks if b.name in sizes]
        if known and self.p_t > 0:
            return min(max(known) / (self.p_t * BILLION), 1.0)
        count = sum(b.count for b in self.blocks) or UNET_BLOCKS
        return 1.0 / count

    def _saved_factor(self) -> float:
        """The saved bytes of a block with AI Toolkit's adapters (or a full fine-tune's weight
        gradients) against memory.yaml's figures: 1 where they were measured with the adapters
        in place, FLUX.1's measured factor where the blocks were measured frozen."""
        activations = self.family.activations if self.family is not None else None
        if activations is not None and activations.adapter == "lora":
            return 1.0
        return ADAPTER_SAVED_FACTOR

    # --- weights

    def _weights(self) -> None:
        levers = self.presets.levers
        model, train = self.process.model, self.process.train
        self.full = levers.weight_bytes(train.dtype)
        quantize_te = model.quantize_te if "quantize_te" in model.present else model.quantize
        self.quantized = model.quantize is True
        b_t = min(self.full, levers.quantized_bytes(model.qtype)) if self.quantized else self.full
        b_te = _dtype_bytes(levers, model.te_dtype, self.full)
        if quantize_te is True:
            b_te = min(b_te, levers.quantized_bytes(model.qtype_te))
        bits = model.text_encoder_bits or 16
        if bits < 16:
            b_te = min(b_te, bits / 8.0)
        b_vae = _dtype_bytes(levers, model.vae_dtype, self.full)
        kwargs = model.model_kwargs
        comfy = kwargs is not None and kwargs.use_comfy_weights is True
        if comfy:  # ComfyUI's pre-quantized file: int8/fp8 (1 byte), or the qtype's when set
            self.quantized = True
            b_t = min(self.full, levers.quantized_bytes(model.qtype) if model.qtype else 1.0)
            self.notes.append(
                "model_kwargs.use_comfy_weights: the transformer is loaded pre-quantized, at "
                "its file's precision, and never held at full precision."
            )
        experts = 1 if model.low_vram is True else self.experts
        o_t, o_te = offloaded_fractions(self.process, self.facts)
        self.offloaded = o_t
        whole = self.p_t * BILLION * b_t * experts
        block = self._largest_block_share()
        own_quantizer = self.quantized and not comfy and self._dequantized_per_forward(model.qtype)
        if self.quantized and "|" in (model.qtype or ""):
            # config_modules.py:741-743 reads the adapter from the qtype; quantize.py:391-394
            # puts it on the card, and the memory manager offloads its layers with the model's
            # (manager.py:126-133).
            self.notes.append(
                "The accuracy recovery adapter named in model.qtype is a LoRA beside every "
                "quantized layer, on the card at the model's dtype unless layer offloading moves "
                "it with its layers: its rank is in the adapter's file, so it is not counted."
            )
        resident, ring_pass, ring_step = self._offload_residency(o_t, whole, b_t, own_quantizer)
        self.transformer = resident
        kept = self._dequantized_kept(block, own_quantizer)
        self.in_flight_pass = ring_pass
        self.in_flight_step = ring_step + kept
        # A loader that quantizes in place on the card peaks at the final residency plus one
        # block at full precision (with low_vram it quantizes in system RAM, and pre-quantized
        # weights are never at full precision); quantize_model's loaders (levers.yaml's
        # quantized_off_card) send each block back to system RAM before the rest arrives.
        loader = self.facts.python_class if self.facts is not None else None
        off_card = loader in levers.quantized_off_card
        quantizing = (
            self.p_t * BILLION * self.full * block
            if self.quantized and not comfy and model.low_vram is not True and not off_card
            else 0.0
        )
        self.transformer_load = resident + quantizing
        beside = self.family.params.beside if self.family is not None else 0.0
        if beside:
            # ltx2.py get_noise_prediction moves the connectors to the transformer's device
            # at the first pass; quantize_model and the memory manager see the transformer only
            self.transformer = resident + beside * BILLION * self.full
            self.notes.append(
                f"The text connectors and text projection ({beside:.2f} B parameters) stay on "
                "the card beside the transformer from the first pass on, at the train dtype: "
                "AI Toolkit neither quantizes nor offloads them."
            )
        te_on_cpu = _on_cpu(model.te_device)
        self.text_encoder = 0.0 if te_on_cpu else self._text_encoder_on_card(o_te, b_te)
        self.te_load = self.text_encoder
        self.vae = 0.0 if _on_cpu(model.vae_device) else self.p_vae * BILLION * b_vae
        if te_on_cpu:
            self.notes.append("The text encoder lives on the CPU (te_device): 0 GiB on the card.")
        if _on_cpu(model.vae_device):
            self.notes.append("The VAE lives on the CPU (vae_device): 0 GiB on the card.")

    def _offload_residency(
        self, o_t: float, whole: float, b_t: float, own_quantizer: bool
    ) -> tuple[float, float, float]:
        """(what stays resident, the staging rings through a forward pass, through a training
        step) of the transformer, in bytes, under layer offloading of the share ``o_t`` (whole
        ``whole`` bytes without it).

        AI Toolkit's memory manager moves each Linear and Conv2d of the whole model with the
        probability ``o_t`` and keeps the rest (norms, embeddings, Conv3d, tables; memory.yaml's
        ``offload``; toolkit/memory_management/manager.py:102-168). The moved weights come to
        the card through rings of :data:`OFFLOAD_PIPELINE_DEPTH` slots: a weight at the compute
        dtype (a torchao or quanto weight is dequantized into its slot, its stored copy beside
        it meanwhile: manager_modules.py:290-303), or the codes of AI Toolkit's own quantizers,
        which run their forward on them (:727-763).
        """
        self.moved_share = 0.0
        self.largest_layer = 0.0
        if o_t <= 0:
            return whole, 0.0, 0.0
        figures = self.family.offload if self.family is not None else None
        if figures is None or self.p_t <= 0:
            block = self._largest_block_share()
            stays = NON_BLOCK_SHARE + BLOCKS_IN_FLIGHT * block
            self.moved_share = o_t * (1.0 - stays)
            self.notes.append(
                f"Layer offloading moves {o_t:.0%} of the transformer's weights to system RAM; "
                f"what stays on the card is a stand-in ({NON_BLOCK_SHARE:.0%} of it and "
                f"{BLOCKS_IN_FLIGHT} blocks in flight): this arch's layers are not counted."
            )
            return whole * (1.0 - o_t + o_t * stays), 0.0, 0.0
        kept = min(figures.resident_params / (self.p_t * BILLION), 1.0)
        layer = figures.largest_layer_params
        self.moved_share = o_t * (1.0 - kept)
        self.largest_layer = float(layer)
        depth = OFFLOAD_PIPELINE_DEPTH
        if own_quantizer:  # codes through the forward ring only; autograd keeps the rest
            ring_pass = ring_step = (depth + 1) * layer * b_t
        else:
            stored = layer * b_t if b_t < self.full else 0.0  # the stored copy while it dequantizes
            ring_pass = (depth + 1) * layer * self.full + stored
            ring_step = (2 * depth + 1) * layer * self.full + stored
        self.notes.append(
            f"Layer offloading moves {o_t:.0%} of the transformer's Linear and Conv2d weights to "
            f"system RAM; its other parameters ({kept:.1%}) stay on the card, and the staging "
            f"rings hold copies of up to {2 * depth + 1} of its layers in a training step (at "
            f"most {ring_step / GIB_BYTES:.2f} GiB, {depth + 1} in a sample's pass); each "
            "offloaded layer keeps its input for the backward pass."
        )
        return whole * (1.0 - o_t * (1.0 - kept)), ring_pass, ring_step

    def _dequantized_per_forward(self, qtype: str | None) -> bool:
        """Whether ``qtype`` is one of AI Toolkit's own quantizers that dequantize a layer at
        every forward (levers.yaml's ``dequantized_per_forward``)."""
        levers = self.presets.levers
        name = (qtype or levers.default_qtype).split("|", 1)[0].strip().lower()
        return name in levers.dequantized_per_forward

    def _dequantized_kept(self, block: float, own_quantizer: bool) -> float:
        """Bytes of dequantized weights autograd keeps for backward in a training step.

        AI Toolkit's own quantizers (OstrisLinear: uint2-8, orbit, nvfp4) build the layer's
        weight at the compute dtype under no_grad and call F.linear with it
        (toolkit/util/ostris_quant.py:66-72, uintx_quant.py:198-205): F.linear keeps that copy
        for the input's gradient, offloaded or not. With gradient checkpointing only the block
        being recomputed holds them; without, every Linear of the transformer does.
        """
        if not own_quantizer or self.p_t <= 0:
            return 0.0
        figures = self.family.offload if self.family is not None else None
        kept = figures.resident_params / (self.p_t * BILLION) if figures is not None else 0.0
        linear = self.p_t * BILLION * max(1.0 - kept, 0.0)
        checkpointing = self.process.train.gradient_checkpointing is not False
        share = block if checkpointing else 1.0
        found = linear * share * self.full
        self.notes.append(
            f"AI Toolkit's {self.process.model.qtype or 'own'} quantizer dequantizes each layer "
            "at every forward, and autograd keeps that copy until backward: "
            + (
                f"the recomputed block's layers ({found / GIB_BYTES:.2f} GiB) with checkpointing."
                if checkpointing
                else f"every layer of the transformer ({found / GIB_BYTES:.2f} GiB) without "
                "checkpointing."
            )
        )
        return found

    def _text_encoder_on_card(self, o_te: float, b_te: float) -> float:
        """Bytes of the text encoders on the card.

        Their Linear and Conv2d weights at ``b_te``, less the share ``o_te`` text-encoder
        offloading moves to system RAM; their other parameters (token embeddings above all,
        memory.yaml's ``offload.text_encoder_resident_params``) at ``te_dtype``: neither
        quantizer touches them (quanto and torchao quantize Linear and Conv2d weights), and the
        memory manager moves them to the card (toolkit/memory_management/manager.py:56-63).
        """
        whole = self.p_te * BILLION
        figures = self.family.offload if self.family is not None else None
        resident = figures.text_encoder_resident_params if figures is not None else None
        if resident is None:
            if o_te > 0:
                self.notes.append(
                    "Text-encoder offloading: what stays of the text encoder on the card (its "
                    "token embedding) is not counted for this arch."
                )
            return whole * b_te * (1.0 - o_te)
        te_dtype = _dtype_bytes(self.presets.levers, self.process.model.te_dtype, self.full)
        moved = max(whole - resident, 0.0)
        return moved * b_te * (1.0 - o_te) + min(resident, whole) * max(te_dtype, b_te)

    # --- what trains

    def _trained(self) -> None:
        levers = self.presets.levers
        process, train = self.process, self.process.train
        info = levers.optimizer(train.optimizer)
        state = info.state_bytes if info is not None else levers.unknown_optimizer_state_bytes
        network = process.network
        ema = train.use_ema is True
        trains_te = train.train_text_encoder is True
        if network is None:  # a full fine-tune
            n = self.p_t * BILLION
            on_card = n * (1.0 - self.moved_share)
            if trains_te:
                n += self.p_te * BILLION
                on_card += self.p_te * BILLION
            self.adapter_weights = 0.0
            self.gradients = on_card * self.full * self._swapped_share()
            self.ema = on_card * self.full if ema else 0.0
            self.optimizer = on_card * self._full_state(info, state)
            if self.moved_share > 0:
                self._offloaded_full_fine_tune()
        else:
            share = self._adapter_share(process)
            n = self.p_t * BILLION * share
            if trains_te:
                n += self.p_te * BILLION * share
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
            return state * min(self.full, ADAPTER_BYTES) / ADAPTER_BYTES
        return state

    def _offloaded_full_fine_tune(self) -> None:
        """A full fine-tune under layer offloading: each moved weight's gradient is made on the
        card into a ring of :data:`OFFLOAD_PIPELINE_DEPTH` slots and copied to its pinned
        weight in system RAM (manager_modules.py:121-146, 394-411), so the gradient, and the
        optimizer's state and EMA's copy that the optimizer makes beside each weight, leave the
        card with it."""
        ring = OFFLOAD_PIPELINE_DEPTH * self.largest_layer * self.full
        self.in_flight_step += ring
        self.notes.append(
            f"Layer offloading: {self.moved_share:.0%} of the transformer's weights train in "
            "system RAM; their gradients are copied there as they are made, and their optimizer "
            "state lives beside them, off the card."
        )

    def _swapped_share(self) -> float:
        """The share of a full fine-tune's weights that holds a gradient: the swapping factor
        with ``do_paramiter_swapping`` on an optimizer that can swap, else 1."""
        train = self.process.train
        facts = self.presets.levers.paramiter_swapping
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
        d = float(self.width)
        kind = (network.type or "lora").lower()
        if kind == "lokr":
            factor = network.lokr_factor if network.lokr_factor is not None else -1
            f = math.sqrt(d) if factor <= 0 else float(factor)
            return (f * f + (d / f) ** 2) / (d * d)
        rank = process.network_rank or self.presets.levers.lora.rank_default
        share = LORA_SHARE_PER_RANK * rank / d
        if network.conv:
            share += LORA_SHARE_PER_RANK * network.conv / d
        return share

    # --- activations

    def _placed(self, blocks: Placed | None) -> Placed:
        """The blocks counted (with how many of each): all of them, or one card's."""
        return blocks if blocks is not None else tuple((b, b.count) for b in self.blocks)

    def _training_activations(self, blocks: Placed | None = None) -> float:
        process = self.process
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
        loads = []
        for dataset in process.datasets or ():
            resolution = max(dataset.resolution or (512,))
            frames = dataset_frames(dataset, self.shape) if self.video else 1
            batch = dataset.batch_size or process.train.batch_size or 1
            if self.unet is not None:  # its fitted fixed part holds the item's own cost
                kept, transient = self._unet_item(resolution, checkpointing), 0.0
            else:
                image = self.shape.tokens(resolution, resolution, frames)
                control = dataset.control_images
                image_tokens = image + control * self._control_tokens(dataset, image)
                kept, transient = self._per_item(image_tokens, checkpointing, blocks)
            loads.append(batch * (kept * passes + transient))
        if not loads:
            if self.unet is not None:
                return self._unet_item(512, checkpointing)
            kept, transient = self._per_item(self.shape.tokens(512, 512, 1), checkpointing, blocks)
            loads.append(kept + transient)
        return max(loads)

    def _items(self) -> int:
        """A training step's batch items whose own cost the per-token figures leave out
        (:data:`ITEM_GIB`, added by :mod:`oom_wizard.rules.memory`); 0 for a UNet, whose
        fitted figures hold it already."""
        if self.unet is not None:
            return 0
        return max(
            (d.batch_size or self.process.train.batch_size or 1 for d in self.process.datasets),
            default=self.process.train.batch_size or 1,
        )

    def _unet_item(self, resolution: int, checkpointing: bool) -> float:
        """One item's training step above the weights for a UNet: a fixed part and a slope in
        the latent pixels ((R / 8)²)."""
        pixels = (resolution / 8.0) ** 2
        measured = self.unet_pass
        if measured is not None:
            if checkpointing:
                return measured.checkpointed_saved.at(pixels) + measured.checkpointed_peak.at(
                    pixels
                )
            return measured.saved.at(pixels) + measured.peak.at(pixels)
        unet = self.unet
        assert unet is not None
        if checkpointing:
            return unet.checkpointed_fixed + unet.checkpointed_per_pixel * pixels
        return unet.step_fixed + unet.step_per_pixel * pixels

    def _latents_cached(self) -> bool:
        """Whether every dataset caches its latents (AI Toolkit's ``is_latents_cached``,
        BaseSDTrainProcess.py:143-172)."""
        datasets = self.process.datasets or ()
        return all(d.cache_latents is True or d.cache_latents_to_disk is True for d in datasets)

    def _encode(self) -> float:
        """The VAE's encode of a training batch at its largest bucket, in bytes: 0 where every
        dataset's latents are cached (then it runs once, while caching)."""
        worst = 0.0
        for dataset in self.process.datasets or ():
            if dataset.cache_latents is True or dataset.cache_latents_to_disk is True:
                continue
            batch = dataset.batch_size or self.process.train.batch_size or 1
            worst = max(worst, batch * self._vae_bytes(dataset, decode=False))
        return worst

    def _caching(self) -> float:
        """The VAE's encode of one item while the latents are cached (0 when none are)."""
        cached = [
            self._vae_bytes(dataset, decode=False)
            for dataset in self.process.datasets or ()
            if dataset.cache_latents is True or dataset.cache_latents_to_disk is True
        ]
        return max(cached, default=0.0)

    def _vae_bytes(self, dataset: DatasetView, *, decode: bool) -> float:
        """One item of ``dataset`` through the VAE (encode; ``decode`` for a sample's size)."""
        resolution = max(dataset.resolution or (512,))
        frames = dataset_frames(dataset, self.shape) if self.video else 1
        return self._vae_pass(resolution, resolution, frames, decode=decode)

    def _vae_pass(self, width: int, height: int, frames: int, *, decode: bool) -> float:
        """Bytes of one VAE decode (or encode) of ``frames`` frames of width × height.

        A video VAE works chunk by chunk with a causal cache, so its peak barely grows with the
        frames: the first chunk holds one frame (one latent frame), each later one the
        temporal compression's frames and the cache, so a clip of more than one latent frame
        costs its later chunk's working set and an image or a one-latent-frame clip only the
        first's (diffusers ``AutoencoderKLWan._decode``, ``_encode``)."""
        if _on_cpu(self.process.model.vae_device):
            return 0.0
        measured = self.vae_measured
        if measured is None:
            return 0.0
        passed = measured.decode if decode else measured.encode
        frames = max(frames, 1)
        chunks = int(self.shape.latent_frames(frames)) if measured.frame_by_frame else 1
        return passed.at(width * height, frames, chunks)

    def _control_tokens(self, dataset: DatasetView, target: float) -> float:
        """Tokens of one control image of ``dataset``, whose target has ``target`` tokens.

        The dataloader crops each to the target's bucket (or to 512 × 512 with
        ``full_size_control_images: false``), unless the arch takes the raw images and sizes
        them itself (archs.yaml's ``control_pixels``): to its pixel budget, or to the target's
        area with ``model_kwargs.match_target_res``.
        """
        if not dataset.control_images:
            return 0.0
        facts = self.facts.control_pixels if self.facts is not None else None
        kwargs = self.process.model.model_kwargs
        where = f"datasets[{dataset.index}]"
        if facts is None:
            if dataset.full_size_control_images is False:
                self.notes.append(
                    f"{where}.full_size_control_images is false: the dataloader resizes each "
                    "control image to 512 × 512."
                )
                return self.shape.tokens(512, 512, 1)
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
        return self.shape.tokens(side, side, 1)

    def _per_item(
        self, image_tokens: float, checkpointing: bool, blocks: Placed | None = None
    ) -> tuple[float, float]:
        """(kept across the pass, one block's transient) in bytes for one item."""
        kept = 0.0
        transient = 0.0
        factor = self._saved_factor()
        saved_matrix, transient_matrix = self._eager_matrices()
        for block, count in self._placed(blocks):
            tokens = image_tokens + (self.text_tokens if block.tokens != "image" else 0)
            matrix = self._matrix_bytes(tokens)
            text = self._text_saved(block) * factor
            saved = block.saved_bytes_per_token * factor
            if self.offloaded > 0:
                frozen = getattr(block, "frozen_saved_bytes_per_token", None)
                base = float(frozen) if frozen else block.saved_bytes_per_token
                saved += self.offloaded * BOUNCED_INPUT_SHARE * max(saved - base, 0.0)
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
        return (block.text_bytes_per_token or 0.0) * self.text_tokens

    def _eager_matrices(self) -> tuple[float, float]:
        """(saved, transient) attention matrices per block: 0 for a flash or memory-efficient
        kernel, levers.yaml's counts for an eager ``train.attention_backend``."""
        facts = self.presets.levers.attention
        backend = (self.process.train.attention_backend or "").strip().lower()
        if backend not in facts.eager:
            return 0.0, 0.0
        self.notes.append(
            f"train.attention_backend {backend!r} is eager: each attention block keeps its "
            "heads × tokens² matrix."
        )
        return facts.eager_saved_matrices, facts.eager_transient_matrices

    def _matrix_bytes(self, tokens: float) -> float:
        """Bytes of one attention matrix over ``tokens`` (heads × tokens² elements)."""
        facts = self.presets.levers.attention
        family = self.family.id if self.family is not None else ""
        heads = max(1.0, self.width / facts.head_dim_by_family.get(family, facts.head_dim))
        return heads * tokens * tokens * facts.matrix_bytes

    def _forward_activations(
        self, image: float, blocks: Placed | None = None
    ) -> tuple[float, float]:
        """(low, high) bytes of one item's forward pass without gradients over ``image``
        tokens: the heaviest block's input, output and share of its saved bytes, and with an
        eager kernel its scores and softmax."""
        if self.unet is not None:  # image tokens are latent pixels (patch 1)
            pixels = image * self.unet.sample_per_pixel
            return pixels, pixels
        saved_matrix, transient_matrix = self._eager_matrices()
        eager = saved_matrix + transient_matrix
        low = high = 0.0
        for block, _count in self._placed(blocks):
            tokens = image + (self.text_tokens if block.tokens != "image" else 0)
            base = 2.0 * block.input_bytes_per_token * tokens + eager * self._matrix_bytes(tokens)
            low = max(low, base + SAMPLE_SAVED_SHARE[0] * block.saved_bytes_per_token * tokens)
            high = max(high, base + SAMPLE_SAVED_SHARE[1] * block.saved_bytes_per_token * tokens)
        return low, high

    def _validation_activations(self, blocks: Placed | None = None) -> tuple[float, float] | None:
        """(low, high) bytes of the validation pass, None without ``validation_config``.

        BaseSDTrainProcess.validate: each validation image, resized to the pixel budget of
        ``resolution``², is predicted once per sigma in one batch, without gradients and
        without guidance, after a training step (at the start step and every
        ``validate_every_n_steps``): the periodic-sample moment.
        """
        validation = self.process.train.validation_config
        if validation is None:
            return None
        side = validation.resolution or 512
        batch = len(validation.validation_sigmas or (1.0, 0.75, 0.5, 0.25))
        low, high = self._forward_activations(self.shape.tokens(side, side, 1), blocks)
        every = validation.validate_every_n_steps
        when = f"every {every} steps" if every else "at the start step"
        self.notes.append(
            f"The validation pass ({counted(batch, 'sigma')} in one batch at "
            f"{side} px, {when}) peaks beside the periodic sample."
        )
        return low * batch, high * batch

    def _sample_activations(
        self, sample: SampleView, blocks: Placed | None = None
    ) -> tuple[float, float, float]:
        """(low, high) bytes of the heaviest sample's denoising pass, and its VAE decode."""
        cfg = 2 if self._cfg(sample) else 1
        worst = (0.0, 0.0)
        decode = 0.0
        for index in range(max(len(sample.prompt_paths()), 1)):
            size = sample.rendered_size(index)
            frames = size["num_frames"] if self.video else 1
            image = self.shape.tokens(size["width"], size["height"], frames)
            if self.unet is not None:
                pixels = size["width"] * size["height"] / 64.0
                low = high = self.unet.sample_per_pixel * pixels
            else:
                low, high = self._forward_activations(image, blocks)
            if high * cfg > worst[1]:
                worst = (low * cfg, high * cfg)
            decode = max(decode, self._vae_pass(size["width"], size["height"], frames, decode=True))
        return worst[0], worst[1], decode

    def _sample_unloads_te(self) -> bool:
        """Whether sampling moves the text encoder back off the card before denoising."""
        if self.facts is None or not self.facts.low_vram_sample_unloads_te:
            return False
        if self.process.model.low_vram is not True:
            return False
        self.notes.append(
            "With low_vram the sampling pipeline holds the text encoder only while it encodes "
            "the prompts, then moves it to the CPU before the denoising passes."
        )
        return True

    def _cfg(self, sample: SampleView) -> bool:
        arch = self.facts.id if self.facts is not None else None
        return (sample.guidance_scale or 0.0) > 1.0 and arch not in GUIDANCE_DISTILLED

    # --- phases

    def _samples(self, first: bool) -> SampleView | None:
        process, train = self.process, self.process.train
        if train.disable_sampling is True:
            return None
        if first:
            if process.first_sample is not None:
                return process.first_sample
            if train.skip_first_sample is True and train.force_first_sample is not True:
                return None
            return process.sample
        sample = process.sample
        if sample is None or sample.periodic_sampling is False:
            return None
        return sample

    def cards(self, phase: Phase) -> list[Terms]:
        """The phase's terms: one, or one per card of a split model (the fullest sets the
        phase's band); none where the phase does not happen."""
        if self.split is None:
            terms = self.terms(phase)
            return [] if terms is None else [terms]
        found = (self.terms(phase, card) for card in self.split)
        return [terms for terms in found if terms is not None]

    def _held(self, card: _Card | None) -> _Held:
        """What the process holds on ``card`` (None: everything, on one card).

        Split: the card's share of the transformer; cuda:0 also the text encoder, the VAE, the
        adapter with its gradients and optimizer state, and EMA's copy; a full fine-tune's
        gradients and optimizer state live beside their weights, on each card by its share.
        """
        if card is None:
            return _Held(
                self.transformer,
                self.transformer_load,
                self.text_encoder,
                self.te_load,
                self.vae,
                self.adapter_weights,
                self.gradients,
                self.ema,
                self.optimizer,
                self.in_flight_pass,
                self.in_flight_step,
            )
        first = card.index == 0
        whole = 1.0 if first else 0.0
        full = self.process.network is None
        by_share = card.share if full else whole
        return _Held(
            self.transformer * card.share,
            self.transformer_load * card.share,
            self.text_encoder * whole,
            self.te_load * whole,
            self.vae * whole,
            self.adapter_weights * whole,
            self.gradients * by_share,
            self.ema * whole,
            self.optimizer * by_share,
            self.in_flight_pass * card.share,
            self.in_flight_step * card.share,
        )

    def terms(self, phase: Phase, card: _Card | None = None) -> Terms | None:
        held = self._held(card)
        blocks = card.blocks if card is not None else None
        w = 1.0 + WEIGHT_SLACK + (QUANT_SLACK if self.quantized else 0.0)
        te_slack = 1.0 + WEIGHT_SLACK
        first = card is None or card.index == 0  # the VAE lives on cuda:0
        cached = self.process.train.cache_text_embeddings is True or any(
            d.cache_text_embeddings is True for d in self.process.datasets
        )
        trains_te = self.process.train.train_text_encoder is True
        zero = (0.0, 0.0)
        if phase == "load":
            # Quantized block by block on the card: the final residency plus the block being
            # quantized; the encoder and VAE beside it, and while the latents are cached, one
            # item's encode.
            encode = self._caching() if first else 0.0
            return Terms(
                transformer=(held.transformer_load, held.transformer_load * w),
                text_encoder=(held.te_load, held.te_load * te_slack),
                vae=(held.vae, held.vae * te_slack),
                trainable=zero,
                optimizer=zero,
                activations=zero,
                loading=True,
                vae_pass=(encode, encode),
                certainty=self.certainty,
            )
        if phase == "training":
            unloaded = cached or self.process.train.unload_text_encoder is True
            te = held.text_encoder if trains_te or not unloaded else 0.0
            # With every dataset's latents cached the training state puts the VAE in system
            # RAM (BaseSDTrainProcess.py:2514; sd_device_states_presets.py:47-49).
            vae = 0.0 if self._latents_cached() else held.vae
            trainable = held.adapter_weights + held.gradients + held.ema
            act = self._training_activations(blocks)
            encode = self._encode() if first else 0.0
            if encode > act:  # the encode runs before the forward and is freed by then
                self.notes.append(
                    "Latents are not cached: the VAE encodes each batch in the step, and that "
                    "encode is the step's peak."
                )
            return Terms(
                transformer=(held.transformer, held.transformer * w),
                in_flight=(held.in_flight_step, held.in_flight_step),
                text_encoder=(te, te * te_slack),
                vae=(vae, vae * te_slack),
                trainable=(trainable, trainable),
                optimizer=(held.optimizer, held.optimizer),
                activations=zero if encode > act else (act, act),
                vae_pass=(encode, encode) if encode > act else zero,
                items=0 if encode > act else self._items(),
                certainty=self.certainty,
            )
        sample = self._samples(first=phase == "baseline_sample")
        validation = self._validation_activations(blocks) if phase == "sample" else None
        if sample is None and validation is None:
            return None
        decode = 0.0
        if sample is not None:
            te = 0.0 if cached else held.text_encoder
            low, high, decode = self._sample_activations(sample, blocks)
            if te and self._sample_unloads_te():
                # The encoder is on the card while it encodes, the activations while the
                # transformer denoises: the larger of the two counts, not their sum.
                te = max(te - (low + high) / 2.0, 0.0)
        else:  # validation only: its prompts were encoded at start, the encoder is as in training
            unloaded = cached or self.process.train.unload_text_encoder is True
            te = held.text_encoder if trains_te or not unloaded else 0.0
            low = high = 0.0
        if validation is not None and validation[1] > high:
            low, high = validation
        weights = held.adapter_weights + held.ema
        optimizer = held.optimizer if phase == "sample" else 0.0
        if not first:
            decode = 0.0
        # The VAE decodes after the denoising passes: the larger of the two is the peak.
        decoded = decode > (low + high) / 2.0
        return Terms(
            transformer=(held.transformer, held.transformer * w),
            in_flight=(held.in_flight_pass, held.in_flight_pass),
            text_encoder=(te, te * te_slack),
            vae=(held.vae, held.vae * te_slack),
            trainable=(weights, weights),
            optimizer=(optimizer, optimizer),
            activations=zero if decoded else (low, high),
            vae_pass=(decode, decode) if decoded else zero,
            certainty=self.certainty,
        )

    # --- a model split over the GPUs

    def _split_cards(self, gpus: int) -> tuple[_Card, ...] | None:
        """The cards of ``model.split_model_over_gpus`` as AI Toolkit places the blocks
        (levers.yaml's ``split_model``), or None when the model stays on one card: the split
        is off, the toolkit refuses it, or one GPU (or none) is seen."""
        model = self.process.model
        if model.split_model_over_gpus is not True:
            return None
        facts = self.presets.levers.split_model
        if model.is_flux is not True:
            arch = (model.arch or "").split(":", 1)[0]
            self.notes.append(
                "model.split_model_over_gpus is on, but AI Toolkit accepts it only with "
                "model.is_flux: true (its check, config_modules.py:700, runs before model.arch "
                "flux sets is_flux at :790): the job stops while loading, so one card is "
                "counted."
                if arch in ("flux", "flex1")
                else f"model.split_model_over_gpus is on, but AI Toolkit splits only FLUX "
                f"(config_modules.py:700): with model.arch {arch or 'unset'} it stops while "
                "loading, so one card is counted."
            )
            return None
        sizes = facts.block_params
        if any(block.name not in sizes for block in self.blocks):
            self.notes.append(
                "model.split_model_over_gpus is on, but AI Toolkit splits only FLUX's "
                "transformer blocks: this model is counted on one card."
            )
            return None
        if gpus <= 1:
            self.notes.append(
                "model.split_model_over_gpus is on, but one GPU is seen (or none was probed): "
                "AI Toolkit spreads the blocks over torch.cuda.device_count() cards, so with "
                "one every block stays on cuda:0 and one card is counted."
            )
            return None
        total = self.p_t * BILLION
        scale = model.split_model_other_module_param_count_scale
        if scale is None:  # a ${...} placeholder: the toolkit's default
            scale = type(model).model_fields["split_model_other_module_param_count_scale"].default
        other = facts.other_module_params * scale
        per_card = (total + other) / gpus
        counts: list[dict[str, int]] = [{} for _ in range(gpus)]
        params = [0.0] * gpus
        index, current = 0, other
        for block in self.blocks:
            size = sizes[block.name]
            for _ in range(block.count):
                counts[index][block.name] = counts[index].get(block.name, 0) + 1
                params[index] += size
                current += size
                if current > per_card:  # the block that passes the share stays
                    index, current = min(index + 1, gpus - 1), 0.0
        params[0] += max(total - sum(params), 0.0)  # embedders and output layers: cuda:0
        cards = tuple(
            _Card(
                index=i,
                share=params[i] / total if total > 0 else 0.0,
                blocks=tuple(
                    (block, counts[i][block.name])
                    for block in self.blocks
                    if block.name in counts[i]
                ),
            )
            for i in range(gpus)
            if i == 0 or counts[i]
        )
        self.notes.append(self._split_words(cards))
        if self.process.network is not None:
            self.notes.append(
                "AI Toolkit keeps the adapter on cuda:0 (network.force_to(device_torch), "
                "BaseSDTrainProcess.py:1983) while the split moves the blocks, so an adapted "
                "layer on another card gets its input there and its adapter on cuda:0: such "
                "LoRA runs are reported to stop with a device error (AI Toolkit issue 1048)."
            )
        return cards

    def _split_words(self, cards: Sequence[_Card]) -> str:
        with_first = "the adapter" if self.process.network is not None else "EMA's copy"
        if self.process.network is None and not self.ema:
            with_first = "the latents"

        def held(card: _Card) -> str:
            blocks = " + ".join(f"{count} {block.name}" for block, count in card.blocks)
            return f"cuda:{card.index} {blocks or 'no blocks'}"

        first, *rest = cards
        return (
            f"model.split_model_over_gpus over {len(cards)} GPUs (AI Toolkit's rule, "
            f"toolkit/models/flux.py): {held(first)} with the text encoder, the VAE, "
            f"{with_first} and the transformer's other layers"
            + "".join(f"; {held(card)}" for card in rest)
            + ". Each phase is its fullest card's."
        )


@dataclass(frozen=True)
class _Card:
    """One GPU of a split model: its share of the transformer's parameters and the blocks it
    holds, with how many of each."""

    index: int
    share: float
    blocks: Placed


@dataclass(frozen=True)
class _Held:
    """Bytes one process holds on one card (before the band's slack)."""

    transformer: float
    transformer_load: float
    text_encoder: float
    te_load: float
    vae: float
    adapter_weights: float
    gradients: float
    ema: float
    optimizer: float
    in_flight_pass: float = 0.0
    """Weight copies made for a forward pass (offloading's staging rings)."""
    in_flight_step: float = 0.0
    """Weight copies made for a training step (both rings, and dequantized copies kept)."""


def _dtype_bytes(levers: LeversFile, dtype: str | None, default: float) -> float:
    """Bytes per weight of ``dtype``; ``default`` (the model's) when unset or unknown."""
    if not dtype:
        return default
    return levers.dtype_bytes.get(dtype.strip().lower(), default)


def _on_cpu(device: str | None) -> bool:
    return device is not None and device.strip().lower().startswith("cpu")
