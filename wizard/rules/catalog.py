"""The data in ``presets/``: per-arch facts, the roll-back ladders, the moment table, UI hints.

The YAML files describe AI Toolkit; this module only gives them a schema and a small query API.
Every file is validated by a frozen pydantic model that forbids unknown keys, and a bad value
fails loudly with a :class:`~oom_wizard.errors.PresetError` that points at its file, line and
column.

Typical use::

    presets = load_presets()
    facts = presets.arch_from_model(config_model_section)
    order = presets.rollback_order("early_steps", facts.ladder_kind if facts else "image")
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Collection, Mapping
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal, TypeVar

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from oom_wizard.formats.preset import parse_preset
from oom_wizard.frozen import FrozenModel
from oom_wizard.paths import FieldPath, format_path

# Re-exported: the vocabulary belongs with the data it indexes.
from oom_wizard.vocabulary import (
    ARCH_KINDS as ARCH_KINDS,
    MODEL_KINDS as MODEL_KINDS,
    MOMENTS as MOMENTS,
    TRAINING_MOMENTS as TRAINING_MOMENTS,
    VALIDATION_RUN as VALIDATION_RUN,
    ArchKind as ArchKind,
    Loss as Loss,
    ModelKind as ModelKind,
    Moment as Moment,
    StepId as StepId,
)

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

ArchGroup = Literal["image", "instruction", "video", "audio", "experimental"]
OffloadSupport = Literal["works", "ignored", "raises"]
DecodeTilingSwitch = Literal["low_vram", "vae_tiling"]
"""A switch that tiles an arch's sample decode: ``model.low_vram``, or
``model.model_kwargs.vae_tiling``."""
UiCondition = Literal[
    "low_vram_box",
    "layer_offloading_box",
    "quantize_box",
    "quantize_te_box",
    "video",
    "control_single",
    "control_multi",
    "match_target_res_box",
]
RecipeField = Literal[
    "low_vram",
    "quantize",
    "qtype",
    "quantize_te",
    "qtype_te",
    "cache_text_embeddings",
    "layer_offloading",
]

ARCHS_FILE: Final = "archs.yaml"
LADDERS_FILE: Final = "ladders.yaml"
LEVERS_FILE: Final = "levers.yaml"
MEMORY_FILE: Final = "memory.yaml"
UI_FIELDS_FILE: Final = "ui_fields.yaml"

_INDEX = re.compile(r"\[\d+\]")
_PROCESS_PREFIX: Final = "config.process[]."
_K = TypeVar("_K")


class _Frozen(FrozenModel):
    """Base of every preset model: immutable, and unknown keys are an error."""

    model_config = ConfigDict(extra="forbid")


def generic_field_key(path: FieldPath | str) -> str:
    """The key of ``ui_fields.yaml`` for a field path: indexes become ``[]``, no process prefix.

    ``config.process[0].datasets[1].resolution`` and ``("datasets", 1, "resolution")`` both give
    ``datasets[].resolution``; a key that is already generic is returned unchanged.
    """
    text = path if isinstance(path, str) else format_path(path)
    text = _INDEX.sub("[]", text.strip())
    return text.removeprefix(_PROCESS_PREFIX)


def _unique(items: tuple[_K, ...]) -> tuple[_K, ...]:
    """Reject a list that names the same item twice."""
    repeated = sorted({str(item) for item in items if items.count(item) > 1})
    if repeated:
        raise ValueError(f"listed more than once: {', '.join(repeated)}")
    return items


def _known_field(value: str, info: ValidationInfo) -> str:
    """Check a field key against ``ui_fields.yaml`` when the loader passes its keys as context."""
    known = info.context.get("ui_fields") if isinstance(info.context, dict) else None
    if known is not None and value not in known:
        raise ValueError(f"'{value}' is not a key of {UI_FIELDS_FILE}")
    return value


FieldKey = Annotated[str, Field(min_length=1), AfterValidator(_known_field)]
NonEmpty = Annotated[str, Field(min_length=1)]


def _known_family(value: str, info: ValidationInfo) -> str:
    """Check a memory family id against ``memory.yaml`` when the loader passes its ids."""
    known = info.context.get("memory_families") if isinstance(info.context, dict) else None
    if known is not None and value not in known:
        raise ValueError(f"'{value}' is not a family of {MEMORY_FILE}")
    return value


def _compiles(value: str) -> str:
    """Check that a pattern is a Python regular expression."""
    try:
        re.compile(value)
    except re.error as error:
        raise ValueError(f"not a regular expression: {error}") from None
    return value


class NamedFamily(_Frozen):
    """A memory family that ``model.name_or_path`` names (an arch whose size follows it)."""

    pattern: Annotated[NonEmpty, AfterValidator(_compiles)]
    """Searched in name_or_path, case-insensitive."""
    family: Annotated[NonEmpty, AfterValidator(_known_family)]


# --- architectures ---------------------------------------------------------------------------


class FrameGrid(_Frozen):
    """The frame counts a video arch accepts: ``step * n + offset`` for n >= 0 (Wan: 4n+1)."""

    step: int = Field(gt=0)
    offset: int = Field(ge=1)

    @property
    def smallest(self) -> int:
        """The smallest valid frame count."""
        return self.offset

    def is_valid(self, frames: int) -> bool:
        """Whether ``frames`` lies on the grid."""
        return frames >= self.offset and (frames - self.offset) % self.step == 0

    def snap_down(self, frames: int) -> int:
        """The largest valid count <= ``frames``, but never below the smallest valid count."""
        if frames <= self.offset:
            return self.offset
        return self.offset + (frames - self.offset) // self.step * self.step

    def halve(self, frames: int) -> int:
        """About half of ``frames``: half rounded up, then snapped down onto the grid.

        On 4n+1 this walks 81 → 41 → 21 → 9 → 5 → 1; on 8n+1 121 → 57 → 25 → 9 → 1;
        on 17n+5 107 → 39 → 5.
        """
        return self.snap_down(math.ceil(frames / 2))


_RECIPE_KEYS: Final[Mapping[RecipeField, str]] = {
    "low_vram": "model.low_vram",
    "quantize": "model.quantize",
    "qtype": "model.qtype",
    "quantize_te": "model.quantize_te",
    "qtype_te": "model.qtype_te",
    "cache_text_embeddings": "train.cache_text_embeddings",
    "layer_offloading": "model.layer_offloading",
}


class RecipeChange(_Frozen):
    """One field the low-memory recipe sets: its generic key and the value."""

    field: str
    value: bool | float | str


class LowMemoryRecipe(_Frozen):
    """The low-memory fields of one arch, spread over the ``low_vram``, ``quantize``,
    ``text_encoder`` and ``layer_offloading`` steps; a field left as None is not touched."""

    low_vram: bool | None = None
    quantize: bool | None = None
    qtype: NonEmpty | None = None
    quantize_te: bool | None = None
    qtype_te: NonEmpty | None = None
    cache_text_embeddings: bool | None = None
    layer_offloading: bool | None = None
    """True: the layer_offloading step is offered (its percents come from the limits)."""

    @model_validator(mode="after")
    def _consistent(self) -> LowMemoryRecipe:
        if self.qtype is not None and self.quantize is not True:
            raise ValueError("qtype is set but quantize is not true")
        if self.qtype_te is not None and self.quantize_te is not True:
            raise ValueError("qtype_te is set but quantize_te is not true")
        return self

    def changes(self, names: Collection[RecipeField] | None = None) -> tuple[RecipeChange, ...]:
        """The recipe as field changes, keyed like ``ui_fields.yaml`` (``model.low_vram``...);
        only the recipe fields in ``names`` when given."""
        found: list[RecipeChange] = []
        for name, key in _RECIPE_KEYS.items():
            value = getattr(self, name)
            if value is not None and (names is None or name in names):
                found.append(RecipeChange(field=key, value=value))
        return tuple(found)


class ArchParams(_Frozen):
    """Parameter counts of one arch in billions, and where the figures come from."""

    transformer: float = Field(gt=0)
    text_encoder: float = Field(ge=0)
    experts: int = Field(default=1, ge=1)
    """How many transformers the arch holds (Wan 2.2 14B: two)."""
    source: NonEmpty


class ControlPixels(_Frozen):
    """An arch that takes raw control images (``use_raw_control_images``) and sizes them itself.

    ``resize``: every control image is resized to ``pixels`` of area; ``cap``: one larger than
    ``pixels`` is scaled down to it (a smaller one keeps its size). ``kwarg``: the
    ``model.model_kwargs`` key that replaces ``pixels``. With ``model_kwargs.match_target_res``
    each is resized to the target's area instead.
    """

    mode: Literal["resize", "cap"]
    pixels: int = Field(gt=0)
    kwarg: NonEmpty | None = None
    source: NonEmpty


class ArchFacts(_Frozen):
    """What the wizard knows about one ``model.arch`` value (see the header of archs.yaml)."""

    id: NonEmpty
    label: NonEmpty
    group: ArchGroup
    kind: ArchKind
    python_arch: NonEmpty
    python_class: NonEmpty | None = None
    legacy_class: bool = False
    legacy_flag: Annotated[str, Field(pattern=r"^is_[a-z0-9_]+$")] | None = None
    in_ui: bool = True
    frames: FrameGrid | None = None
    temporal_compression: float | None = Field(default=None, gt=0)
    spatial_compression: int | None = Field(default=None, gt=0)
    latent_channels: int | None = Field(default=None, gt=0)
    patch: int | None = Field(default=None, gt=0)
    bucket_divisibility: int | None = Field(default=None, gt=0)
    default_sample_frames: int | None = Field(default=None, gt=0)
    ui_low_vram_box: bool = False
    ui_layer_offloading_box: bool = False
    ui_quantize_box: bool = True
    ui_quantize_te_box: bool = True
    layer_offloading: OffloadSupport
    low_memory: LowMemoryRecipe
    params: ArchParams | None = None
    """Counts for an arch without a memory family (none ships so): an arch with ``memory``
    takes its family's, which ``memory.yaml`` alone holds."""
    memory: Annotated[NonEmpty, AfterValidator(_known_family)] | None = None
    """The memory family of ``memory.yaml`` whose counts and activation figures apply."""
    memory_unknown: NonEmpty | None = None
    """Why the arch has no memory family (then the memory accounting has no figures for it)."""
    memory_by_name: tuple[NamedFamily, ...] = ()
    """With memory_unknown: the family ``model.name_or_path`` gives, first match wins."""
    low_vram_sample_unloads_te: bool = False
    """With low_vram, sampling holds the text encoder only while it encodes the prompts."""
    low_vram_skips_device_presets: bool = False
    """With low_vram, the model keeps its parts where they are while the latents are cached."""
    sample_decode_tiled_by: Annotated[tuple[DecodeTilingSwitch, ...], AfterValidator(_unique)] = ()
    """The switches, any of which tiles the VAE's decode of a sample (none: never tiled)."""
    ui_control_paths: Literal["single", "multi"] | None = None
    """An edit arch's control-image pickers in the simple form: one, or up to three."""
    control_pixels: ControlPixels | None = None
    """How the model resizes the raw control images it takes (None: the dataloader gives
    them at the target's bucket)."""

    @model_validator(mode="after")
    def _consistent(self) -> ArchFacts:
        if (self.memory is None) == (self.memory_unknown is None):
            raise ValueError("needs exactly one of memory (a family id) and memory_unknown (why)")
        if self.memory_by_name and self.memory is not None:
            raise ValueError("memory_by_name is for an arch without a fixed memory family")
        if self.params is not None and self.memory is not None:
            raise ValueError(
                "params is for an arch without a memory family: memory.yaml holds its counts"
            )
        expected_kind = self.group if self.group in ("video", "audio") else "image"
        if self.kind != expected_kind:
            raise ValueError(f"group {self.group} needs kind {expected_kind}, not {self.kind}")
        video_facts = (self.frames, self.temporal_compression, self.default_sample_frames)
        if self.kind == "video" and None in video_facts:
            raise ValueError(
                "a video arch needs frames, temporal_compression, default_sample_frames"
            )
        if self.kind != "video" and video_facts != (None, None, None):
            raise ValueError("only a video arch has frames, temporal_compression, sample frames")
        frames, sample_frames = self.frames, self.default_sample_frames
        if frames and sample_frames and not frames.is_valid(sample_frames):
            raise ValueError(f"default_sample_frames {sample_frames} is off-grid")
        spatial = (self.spatial_compression, self.patch, self.bucket_divisibility)
        if self.kind != "audio" and None in spatial:
            raise ValueError("needs spatial_compression, patch and bucket_divisibility")
        if self.layer_offloading != "works" and self.low_memory.layer_offloading:
            raise ValueError(f"layer offloading {self.layer_offloading}: keep it out of the recipe")
        return self

    @model_validator(mode="after")
    def _tiled_decode_measured(self, info: ValidationInfo) -> ArchFacts:
        context = info.context if isinstance(info.context, dict) else {}
        measured = context.get("tiled_decode_families")
        families = {self.memory} if self.memory else {n.family for n in self.memory_by_name}
        if self.sample_decode_tiled_by and measured is not None and families - measured:
            raise ValueError(
                f"sample_decode_tiled_by needs its families' vae.tiled_decode in {MEMORY_FILE}"
            )
        return self

    @property
    def ladder_kind(self) -> ModelKind:
        """Which roll-back ladder applies: video for video archs, image for everything else."""
        return "video" if self.kind == "video" else "image"

    def shows(self, condition: UiCondition) -> bool:
        """Whether AI Toolkit's simple job form shows the control behind ``condition``."""
        shown: dict[UiCondition, bool] = {
            "low_vram_box": self.ui_low_vram_box,
            "layer_offloading_box": self.ui_layer_offloading_box,
            "quantize_box": self.ui_quantize_box,
            "quantize_te_box": self.ui_quantize_te_box,
            "video": self.kind == "video",
            "control_single": self.ui_control_paths == "single",
            "control_multi": self.ui_control_paths == "multi",
            "match_target_res_box": self.control_pixels is not None,
        }
        return shown[condition]


class UnknownArch(_Frozen):
    """What the toolkit assumes for a model the presets do not know (``unknown_arch``)."""

    frames: FrameGrid
    temporal_compression: float = Field(gt=0)
    spatial_compression: int = Field(gt=0)
    patch: int = Field(gt=0)

    @model_validator(mode="after")
    def _consistent(self) -> UnknownArch:
        if self.frames.step != self.temporal_compression:
            raise ValueError("frames.step must equal temporal_compression")
        return self


def _unique_ids(archs: tuple[ArchFacts, ...]) -> tuple[ArchFacts, ...]:
    """Reject two entries with the same arch id."""
    _unique(tuple(arch.id for arch in archs))
    return archs


class ArchsFile(_Frozen):
    """The schema of ``archs.yaml``."""

    recipes: Mapping[str, LowMemoryRecipe]
    unknown_arch: UnknownArch
    archs: Annotated[tuple[ArchFacts, ...], AfterValidator(_unique_ids)] = Field(min_length=1)
    legacy_flags: Annotated[tuple[str, ...], AfterValidator(_unique)]

    @field_validator("legacy_flags")
    @classmethod
    def _flags_match_archs(cls, flags: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        archs: tuple[ArchFacts, ...] = info.data.get("archs", ())
        used = {arch.legacy_flag for arch in archs if arch.legacy_flag}
        if archs and used != set(flags):
            raise ValueError(f"must list exactly the flags the archs use: {sorted(used)}")
        for flag in flags:
            if archs and not any(a.legacy_flag == flag and a.id == a.python_arch for a in archs):
                raise ValueError(f"no arch whose id is its python_arch has the flag {flag}")
        return flags


# --- memory: parameter counts and measured activations (memory.yaml) ------------------------

Checked = Literal["gpu", "cpu"]
"""How far a family's figures are checked: ``gpu`` where the same measurement agrees with a real
GPU's peaks (``../shared/gpu-measurements.md``), ``cpu`` where they are measured on the CPU only.
A family without figures is a stand-in; the code knows it by their absence."""


class FamilyParams(_Frozen):
    """Parameter counts of one memory family in billions, and how they were obtained."""

    transformer: float = Field(gt=0)
    """One transformer (or UNet); the experts of a mixture of transformers are counted apart."""
    text_encoder: float = Field(ge=0)
    """All text encoders together."""
    vae: float = Field(ge=0)
    experts: int = Field(default=1, ge=1)
    beside: float = Field(default=0.0, ge=0)
    """Parameters of modules beside the transformer that AI Toolkit moves to the transformer's
    card for every pass and never quantizes nor offloads (LTX-2's text connectors and text
    projection): on the card at the train dtype from the first pass on, not while loading."""
    after_sample: float = Field(default=0.0, ge=0)
    """Parameters of modules a sample moves to the card and nothing moves back (LTX-2's
    vocoder): on the card at the train dtype in a sample, and in every training step after the
    first sample; not with sampling off."""
    source: NonEmpty


class BlockMemory(_Frozen):
    """One kind of block the transformer stacks, and its bf16 activation bytes per token.

    The figures are taken with the family's ``adapter`` in place (see
    :class:`FamilyActivations`): with AI Toolkit's LoRA, every adapted Linear keeps its input
    for the adapter's weight gradient, which a frozen block does not.
    """

    name: NonEmpty
    count: int = Field(gt=0)
    saved_bytes_per_token: float = Field(gt=0)
    """Bytes saved for backward per token by one block, without checkpointing."""
    input_bytes_per_token: float = Field(gt=0)
    """Bytes kept per token by one block with checkpointing (its input, the hidden state)."""
    peak_bytes_per_token: float = Field(ge=0)
    """One block's transient peak per token during forward and backward, above its saved bytes."""
    tokens: Literal["joint", "image"] = "joint"
    """Per token of the joint sequence (image + text), or of the image tokens only."""
    text_bytes_per_token: float | None = Field(default=None, ge=0)
    """For an image-token block: bytes saved per text token (its cross-attention keys/values)."""
    checkpointed_peak_bytes_per_token: float | None = Field(default=None, ge=0)
    """With checkpointing: the block's peak per token while it is recomputed and back-propagated."""
    frozen_saved_bytes_per_token: float | None = Field(default=None, gt=0)
    """The same block with no adapter at all (the gradient flowing to the inputs only): what a
    module the adapter leaves out costs, and the figure the frozen GPU rows check."""
    lokr_saved_bytes_per_token: float | None = Field(default=None, gt=0)
    """With AI Toolkit's LoKr instead of its LoRA, where that saves a different amount."""
    autocast_saved_bytes_per_token: float | None = Field(default=None, gt=0)
    """With the LoRA run under bf16 autocast (its input kept in bf16, shared with the base), as
    the shared GPU rows were taken and other trainers train: the figure that checks the method
    against them (the wizard's own figures are AI Toolkit's)."""
    autocast_checkpointed_peak_bytes_per_token: float | None = Field(default=None, ge=0)
    """``checkpointed_peak_bytes_per_token`` in that setup."""

    @model_validator(mode="after")
    def _consistent(self) -> BlockMemory:
        if self.saved_bytes_per_token < self.input_bytes_per_token:
            raise ValueError("saved_bytes_per_token is below input_bytes_per_token")
        frozen = self.frozen_saved_bytes_per_token
        if frozen is not None and frozen > self.saved_bytes_per_token:
            raise ValueError("frozen_saved_bytes_per_token is above saved_bytes_per_token")
        return self


class FamilyActivations(_Frozen):
    """The measured activation figures of one family's transformer blocks."""

    width: int = Field(gt=0)
    text_tokens: int = Field(ge=0)
    """The text sequence length AI Toolkit trains the arch with."""
    text_embedding_width: int | None = Field(default=None, gt=0)
    """Values per text token of the embeddings a training step holds on the card for each
    batch item, at the train dtype, where they are far wider than a block's input (LTX-2:
    Gemma's hidden states stacked, 188,160; the source says where the code does it). None:
    no wider, and the item's own cost holds them."""
    adapter: Literal["lora", "none"]
    """What was in place while measuring: AI Toolkit's LoRA on the modules ``adapted`` names, or
    nothing (frozen blocks, an older measurement that counts no adapter inputs: too low for a
    LoRA without checkpointing)."""
    adapted: NonEmpty | None = None
    """Which modules AI Toolkit adapts for this arch, and where its code says so."""
    blocks: Annotated[tuple[BlockMemory, ...], Field(min_length=1)]
    tokens_per_frame_note: NonEmpty | None = None
    linearity: float | None = Field(default=None, ge=0)
    """The largest relative miss of the per-token fit at a further token count (0.01 = 1 %)."""
    attention: NonEmpty | None = None
    """The attention kernels that ran while measuring (the fused SDPA ones keep no n² matrix)."""
    source: NonEmpty

    @field_validator("blocks")
    @classmethod
    def _distinct_blocks(cls, blocks: tuple[BlockMemory, ...]) -> tuple[BlockMemory, ...]:
        _unique(tuple(block.name for block in blocks))
        return blocks

    @model_validator(mode="after")
    def _adapted_named(self) -> FamilyActivations:
        if (self.adapter == "lora") != (self.adapted is not None):
            raise ValueError("adapter: lora needs adapted (which modules); adapter: none has none")
        return self


# The smallest latent a UNet trains at (256 px: 32 x 32 latent pixels); a fit must be positive
# from there on.
_SMALLEST_LATENT_PIXELS: Final = 32 * 32


class LatentFit(_Frozen):
    """Bytes of one UNet pass per batch item: a fixed part plus a slope per latent pixel."""

    fixed_bytes: float
    """The intercept of the fit (small, and may be slightly negative)."""
    bytes_per_latent_pixel: float = Field(ge=0)

    @model_validator(mode="after")
    def _positive(self) -> LatentFit:
        if self.at(_SMALLEST_LATENT_PIXELS) < 0:
            raise ValueError(f"negative at {_SMALLEST_LATENT_PIXELS} latent pixels")
        return self

    def at(self, latent_pixels: float) -> float:
        """The fit's bytes for one batch item of ``latent_pixels`` (height × width / 64)."""
        return self.fixed_bytes + self.bytes_per_latent_pixel * latent_pixels


class UnetPass(_Frozen):
    """A UNet's training step with one kind of adapter, with and without checkpointing."""

    saved: LatentFit
    """Saved for backward when the forward has returned, no checkpointing."""
    peak: LatentFit
    """The step's peak above ``saved`` (backward's transient), no checkpointing."""
    checkpointed_saved: LatentFit
    """Kept when the forward has returned, with diffusers' gradient checkpointing."""
    checkpointed_peak: LatentFit
    """The step's peak above ``checkpointed_saved`` (one block recomputed and back-propagated)."""


class UnetMemory(_Frozen):
    """A UNet family's activations: not a stack of equal blocks, so fitted per latent pixel."""

    text_tokens: int = Field(ge=0)
    adapted: NonEmpty
    """Which modules AI Toolkit adapts in the UNet, and where its code says so."""
    networks: Mapping[Literal["lora", "locon"], UnetPass]
    """``lora``: AI Toolkit's LoRA (Linears and 1x1 convolutions); ``locon``: with ``conv`` set,
    the 3x3 convolutions adapted too, each keeping its input."""
    gpu_setup: UnetPass | None = None
    """The same measurement in the setup of the shared GPU rows (LoRA on the attention blocks'
    Linears under bf16 autocast): what checks the method against them."""
    linearity: float | None = Field(default=None, ge=0)
    """The largest relative miss of the fit at a further resolution (0.01 = 1 %)."""
    attention: NonEmpty | None = None
    source: NonEmpty

    @field_validator("networks")
    @classmethod
    def _lora_given(cls, networks: Mapping[str, UnetPass]) -> Mapping[str, UnetPass]:
        if "lora" not in networks:
            raise ValueError("needs the lora figures")
        return networks


class VaePass(_Frozen):
    """The peak of one VAE pass above its weights, no gradients, bf16, one image or clip.

    ``bytes_per_pixel`` is per pixel of the image; for a VAE that works chunk by chunk, per
    pixel of one frame in its first chunk (one frame: an image, or a clip's first).
    ``chunk_bytes_per_pixel`` is what each later chunk adds to that, per pixel of one frame:
    its frames (four for Wan's VAE) and its causal convolutions' cache, held from the second
    chunk on. ``bytes_per_clip_pixel`` is per pixel of the whole clip (frames × height ×
    width): what the assembled video costs.
    """

    fixed_bytes: float
    bytes_per_pixel: float = Field(gt=0)
    chunk_bytes_per_pixel: float = Field(default=0.0, ge=0)
    bytes_per_clip_pixel: float = Field(default=0.0, ge=0)

    def at(self, pixels: float, frames: int = 1, chunks: int = 1) -> float:
        """The pass's peak for one image of ``pixels`` (or a clip of ``frames`` such frames,
        taken in ``chunks`` chunks)."""
        return (
            self.fixed_bytes
            + self.bytes_per_pixel * pixels
            + (self.chunk_bytes_per_pixel * pixels if chunks > 1 else 0.0)
            + self.bytes_per_clip_pixel * pixels * frames
        )


class TiledDecode(_Frozen):
    """The peak of a spatially tiled decode above the VAE's weights, no gradients, bf16.

    A frame wider or taller than ``tile`` pixels is decoded tile by tile (overlapping tiles of
    ``tile`` pixels), each tile through every chunk of frames with its own causal cache, and the
    decoded tiles are kept and blended into the clip: one tile's working set in its first chunk
    (``fixed_bytes``), what a tile's later chunk of frames adds from the second latent frame on
    (``chunk_bytes``), and the kept tiles and the assembled clip per pixel of the whole clip
    (``bytes_per_clip_pixel``). A frame within one tile is decoded whole (the untiled figures).
    """

    tile: int = Field(gt=0)
    fixed_bytes: float = Field(gt=0)
    chunk_bytes: float = Field(ge=0)
    bytes_per_clip_pixel: float = Field(ge=0)
    source: NonEmpty

    def tiles(self, width: int, height: int) -> bool:
        """Whether a frame of width × height is decoded tile by tile."""
        return width > self.tile or height > self.tile

    def at(self, pixels: float, frames: int = 1, chunks: int = 1) -> float:
        """The tiled decode's peak for a clip of ``frames`` frames of ``pixels`` each, taken in
        ``chunks`` chunks."""
        return (
            self.fixed_bytes
            + (self.chunk_bytes if chunks > 1 else 0.0)
            + self.bytes_per_clip_pixel * pixels * frames
        )


class VaeMemory(_Frozen):
    """A family's VAE: the peaks of its decode (every sample) and encode (uncached latents)."""

    checked: Checked
    frame_by_frame: bool = False
    """A video VAE that decodes and encodes one chunk of frames at a time with a cache, so its
    working set does not grow with the frame count (a one-chunk image's is smaller)."""
    decode: VaePass
    encode: VaePass
    tiled_decode: TiledDecode | None = None
    """The decode tile by tile, where an arch of the family tiles its samples' decode
    (archs.yaml ``sample_decode_tiled_by``)."""
    source: NonEmpty

    @model_validator(mode="after")
    def _clip_term(self) -> VaeMemory:
        for name, fit in (("decode", self.decode), ("encode", self.encode)):
            clip = (fit.bytes_per_clip_pixel, fit.chunk_bytes_per_pixel)
            if not self.frame_by_frame and any(clip):
                raise ValueError(
                    f"{name}: bytes_per_clip_pixel and chunk_bytes_per_pixel are for a "
                    "frame_by_frame VAE"
                )
            if fit.at(256 * 256) <= 0:
                raise ValueError(f"{name} is not positive at 256x256")
        return self


class OffloadMemory(_Frozen):
    """What AI Toolkit's layer offloading leaves of one transformer on the card: its memory
    manager moves every Linear and Conv2d of the whole model (toolkit/memory_management/
    manager.py) and keeps the rest, and stages the moved weights in a ring of copies the size of
    its largest such layer (manager_modules.py)."""

    resident_params: int = Field(ge=0)
    """Parameters outside every Linear and Conv2d (norms, embeddings, Conv3d, tables)."""
    largest_layer_params: int = Field(gt=0)
    """The largest Linear or Conv2d, whose copies fill the staging ring."""
    text_encoder_resident_params: int | None = Field(default=None, ge=0)
    """The text encoders' parameters outside every Linear and Conv2d (their token embeddings
    above all): what stays of them on the card under text-encoder offloading. None where the
    encoders were not built (counts from a model card)."""
    source: NonEmpty


class MemoryFamily(_Frozen):
    """One memory family: its parameter counts and, when measured, its activation figures
    (``activations`` for a stack of blocks, ``unet`` for a UNet) and its VAE's passes."""

    id: NonEmpty
    checked: Checked | None = None
    """How the training figures (``activations`` or ``unet``) are checked; given with them."""
    params: FamilyParams
    offload: OffloadMemory | None = None
    activations: FamilyActivations | None = None
    unet: UnetMemory | None = None
    vae: VaeMemory | None = None
    unknown: NonEmpty | None = None
    """Why there are no activation figures (given exactly when there are none)."""

    @model_validator(mode="after")
    def _consistent(self) -> MemoryFamily:
        if self.activations is not None and self.unet is not None:
            raise ValueError("give activations (blocks) or unet, not both")
        measured = self.activations is not None or self.unet is not None
        if measured == (self.unknown is not None):
            raise ValueError("give activations or unet, or activations: null with unknown: why")
        if measured != (self.checked is not None):
            raise ValueError("checked (gpu or cpu) goes with the activation figures, and only")
        return self


class MemoryFile(_Frozen):
    """The schema of ``memory.yaml``."""

    format: Literal[2]
    measured_with: Mapping[NonEmpty, NonEmpty] = Field(min_length=1)
    families: Mapping[NonEmpty, MemoryFamily] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _ids_from_keys(cls, data: Any) -> Any:
        """Each family's id is its key in ``families``."""
        if isinstance(data, dict) and isinstance(data.get("families"), dict):
            families = {}
            for key, entry in data["families"].items():
                if isinstance(entry, dict) and "id" not in entry:
                    entry = {"id": key, **entry}
                families[key] = entry
            data = {**data, "families": families}
        return data

    @model_validator(mode="after")
    def _keys_are_ids(self) -> MemoryFile:
        for key, family in self.families.items():
            if family.id != key:
                raise ValueError(f"family '{key}' says its id is '{family.id}'")
        return self


# --- the procedure ---------------------------------------------------------------------------

StepList = Annotated[tuple[StepId, ...], AfterValidator(_unique)]


class Ladders(_Frozen):
    """The roll-back order per model kind, first to last."""

    image: StepList
    video: StepList

    def of(self, kind: ModelKind) -> tuple[StepId, ...]:
        """The ladder of ``kind``."""
        return self.image if kind == "image" else self.video


class MomentInfo(_Frozen):
    """One crash moment: the user's words for it, the likely cause, the steps that come first."""

    label: NonEmpty
    words: NonEmpty
    cause: NonEmpty
    first_steps: Ladders

    def first(self, kind: ModelKind) -> tuple[StepId, ...]:
        """The steps that go first for a model of ``kind`` (empty: change nothing)."""
        return self.first_steps.of(kind)


class StepInfo(_Frozen):
    """One step: a short title, why it helps (two short lines), the fields it may change."""

    title: NonEmpty
    why: NonEmpty
    fields: Annotated[tuple[FieldKey, ...], AfterValidator(_unique)] = Field(min_length=1)
    restore: NonEmpty | None = None
    """How the scale-up names undoing this step; only steps of the scale-up order have one."""
    costs: NonEmpty | None = None
    """What the step costs besides memory (speed, system RAM, quality), for its note."""
    loses: Loss | None = None
    """What the user loses by it, which orders the solver's levers: only ``time``, the
    preview ``samples``, or ``quality``; every step on a ladder says."""
    slow: bool = False
    """It slows every step several-fold: the last lever of the time class, and it says so."""
    rungs: bool = False
    """It goes down one rung per roll-back, so a next rung is always left: done when the
    latest roll-back applied it, one rung further only after a new crash."""


class PerKind(_Frozen):
    """One number per model kind."""

    image: int = Field(gt=0)
    video: int = Field(gt=0)

    def of(self, kind: ModelKind) -> int:
        """The number for ``kind``."""
        return self.image if kind == "image" else self.video


class Limits(_Frozen):
    """The numbers the roll-back steps work with: rungs, caps and floors."""

    resolution_rungs: tuple[Annotated[int, Field(gt=0)], ...] = Field(min_length=1)
    """A single resolution steps down this ladder, one rung per roll-back (largest first)."""
    keep_buckets_up_to: int = Field(gt=0)
    """Buckets of this size or smaller stay by default."""
    sample_long_side: PerKind
    """The longest side a lighter sample may have."""
    sample_side_floor: int = Field(gt=0)
    """Samples are never made smaller than this on their long side."""
    sample_steps_floor: int = Field(gt=0)
    """Fewer sample steps never go below this."""
    size_multiple: int = Field(gt=0)
    """Sample width and height stay multiples of this."""
    validation_steps: int = Field(gt=0)
    """``train.steps`` of the optional short validation run."""
    rank_floor: int = Field(gt=0)
    """A lower LoRA rank never goes below this."""
    offload_rungs: tuple[Annotated[float, Field(gt=0.0, le=1.0)], ...] = Field(min_length=1)
    """The fractions layer offloading goes up by, one per roll-back (smallest first)."""

    @model_validator(mode="after")
    def _consistent(self) -> Limits:
        if any(lower >= higher for lower, higher in itertools.pairwise(self.offload_rungs)):
            raise ValueError("offload_rungs must go up, smallest first")
        rungs = self.resolution_rungs
        if any(lower >= higher for higher, lower in itertools.pairwise(rungs)):
            raise ValueError("resolution_rungs must go down, largest first")
        sizes = (self.sample_side_floor, self.sample_long_side.image, self.sample_long_side.video)
        if any(size % self.size_multiple for size in sizes):
            raise ValueError(
                f"sample sizes must be multiples of size_multiple {self.size_multiple}"
            )
        if self.sample_side_floor > min(self.sample_long_side.image, self.sample_long_side.video):
            raise ValueError("sample_side_floor is above a sample_long_side")
        return self


class LaddersFile(_Frozen):
    """The schema of ``ladders.yaml``: its ``steps`` are the one list of roll-back steps, and
    every other part names only steps that have an entry there."""

    ladders: Ladders
    deeper: Ladders
    steps: Mapping[StepId, StepInfo]
    training_only: StepList
    no_quality_cost: Mapping[StepId, tuple[Moment, ...]] = Field(default_factory=dict)
    moments: Mapping[Moment, MomentInfo]
    scale_up: Annotated[tuple[StepId, ...], AfterValidator(_unique)]
    limits: Limits
    environment_checks: tuple[NonEmpty, ...] = Field(min_length=1)

    @field_validator("deeper")
    @classmethod
    def _deeper_is_new(cls, deeper: Ladders, info: ValidationInfo) -> Ladders:
        ladders: Ladders | None = info.data.get("ladders")
        for kind in MODEL_KINDS:
            both = set(deeper.of(kind)) & set(ladders.of(kind) if ladders else ())
            if both:
                raise ValueError(f"{sorted(both)} are in the {kind} ladder already")
        return deeper

    @field_validator("steps")
    @classmethod
    def _steps_on_ladders(
        cls, steps: Mapping[StepId, StepInfo], info: ValidationInfo
    ) -> Mapping[StepId, StepInfo]:
        """Every step a ladder names has an entry, every entry but the validation run is on
        a ladder, and a step on a ladder says what it loses."""
        ladders: Ladders | None = info.data.get("ladders")
        deeper: Ladders | None = info.data.get("deeper")
        if ladders is None or deeper is None:  # reported already
            return steps
        placed = {
            step for lists in (ladders, deeper) for kind in MODEL_KINDS for step in lists.of(kind)
        }
        missing = sorted(placed - set(steps))
        if missing:
            raise ValueError(f"lacks {', '.join(missing)}, which ladders or deeper name")
        for step, entry in steps.items():
            if step != VALIDATION_RUN and step not in placed:
                raise ValueError(f"{step} is on no ladder: put it in ladders or deeper")
            if step in placed and entry.loses is None:
                raise ValueError(f"{step} does not say what it loses: time, samples or quality")
        return steps

    @field_validator("training_only", "no_quality_cost", "scale_up")
    @classmethod
    def _known_steps(cls, named: Collection[StepId], info: ValidationInfo) -> Collection[StepId]:
        steps: Mapping[StepId, StepInfo] | None = info.data.get("steps")
        unknown = [step for step in named if steps is not None and step not in steps]
        if unknown:
            raise ValueError(f"{', '.join(unknown)}: not a step (no entry under steps)")
        return named

    @field_validator("moments")
    @classmethod
    def _moments_complete(
        cls, moments: Mapping[Moment, MomentInfo], info: ValidationInfo
    ) -> Mapping[Moment, MomentInfo]:
        _require_keys(moments.keys(), MOMENTS)
        ladders: Ladders | None = info.data.get("ladders")
        deeper: Ladders | None = info.data.get("deeper")
        if ladders is None or deeper is None:  # reported already
            return moments
        for moment, entry in moments.items():
            for kind in MODEL_KINDS:
                stray = set(entry.first(kind)) - set(ladders.of(kind)) - set(deeper.of(kind))
                if stray:
                    raise ValueError(f"{moment}: {sorted(stray)} are not in the {kind} ladder")
        return moments

    @field_validator("scale_up")
    @classmethod
    def _scale_up_restorable(
        cls, scale_up: tuple[StepId, ...], info: ValidationInfo
    ) -> tuple[StepId, ...]:
        steps: Mapping[StepId, StepInfo] = info.data.get("steps", {})
        missing = [step for step in scale_up if step in steps and steps[step].restore is None]
        if missing:
            raise ValueError(f"steps without a restore title: {', '.join(missing)}")
        return scale_up


def _require_keys(found: Collection[str], wanted: tuple[str, ...]) -> None:
    """Every identifier of the vocabulary must have an entry."""
    missing = [key for key in wanted if key not in found]
    if missing:
        raise ValueError(f"lacks {', '.join(missing)}")


# --- the levers' worth -----------------------------------------------------------------------


class OptimizerInfo(_Frozen):
    """One optimizer: its state per trainable weight, and its 8-bit variant if it has one."""

    state_bytes: float = Field(ge=0)
    eight_bit: NonEmpty | None = None
    follows_weights: bool = False
    """Its state is made like the weights it trains (``zeros_like(p)``): ``state_bytes`` is
    at fp32, a full fine-tune's bf16 weights keep it at their own bytes."""
    full_state_bytes: float | None = None
    """The state per weight of a full fine-tune where it is not ``state_bytes`` (a factored
    second moment: rows and columns of each matrix, next to nothing per weight)."""


class LoraFacts(_Frozen):
    """How the LoRA's size follows its rank (see levers.yaml)."""

    rank_default: int = Field(gt=0)
    params_per_rank: float = Field(gt=0)


class NominalParams(_Frozen):
    """Parameter counts assumed for an arch without its own (direction only, no GiB)."""

    transformer: float = Field(gt=0)
    text_encoder: float = Field(ge=0)


class ValueRule(_Frozen):
    """What a value typed for one field may be (``values`` in levers.yaml)."""

    kind: Literal["int", "float", "text"]
    min: float | None = None
    max: float | None = None
    multiple_of: int | Literal["arch"] | None = None
    grid: Literal["frames"] | None = None
    heavier: Literal["higher", "lower", "none"]
    off_value: float | None = None
    """The value that turns the thing off (``sample_every: 0``): it weighs nothing, whatever
    ``heavier`` says of the values around it."""

    @model_validator(mode="after")
    def _consistent(self) -> ValueRule:
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError("min is above max")
        if self.kind == "text" and (self.min, self.max, self.multiple_of) != (None, None, None):
            raise ValueError("a text value has no range or multiple")
        return self


class AttentionFacts(_Frozen):
    """Attention backends: those that keep the whole attention matrix, and the one proposed."""

    eager: tuple[NonEmpty, ...] = Field(min_length=1)
    efficient: NonEmpty
    head_dim: int = Field(gt=0)
    """Channels per attention head: heads = the family's width / this."""
    head_dim_by_family: Mapping[
        Annotated[NonEmpty, AfterValidator(_known_family)], Annotated[int, Field(gt=0)]
    ] = Field(default_factory=dict)
    """A memory family's own head width, where its published config differs from head_dim."""
    eager_saved_matrices: float = Field(ge=0)
    """Attention matrices (heads × tokens²) an eager kernel saves for backward, per block."""
    eager_transient_matrices: float = Field(ge=0)
    """Matrices alive at once beside the saved one while a block runs (scores, gradients)."""
    matrix_bytes: float = Field(gt=0)
    """Bytes per element of the matrix (the training dtype's, bf16)."""


class SwappingFacts(_Frozen):
    """``train.do_paramiter_swapping``: the optimizers that can, and the default share."""

    optimizers: tuple[NonEmpty, ...] = Field(min_length=1)
    default_factor: float = Field(gt=0, le=1)


class SplitFacts(_Frozen):
    """``model.split_model_over_gpus``: AI Toolkit's split rule's constants, and the parameters
    of each block it places (by the block's name in ``memory.yaml``)."""

    other_module_params: float = Field(ge=0)
    """The parameters counted on cuda:0 before any block (× the config's scale)."""
    block_params: Mapping[NonEmpty, int] = Field(min_length=1)


class LeversFile(_Frozen):
    """The schema of ``levers.yaml``."""

    dtype_bytes: Mapping[NonEmpty, float] = Field(min_length=1)
    qtype_bytes: Mapping[NonEmpty, float] = Field(min_length=1)
    default_qtype: NonEmpty
    dequantized_per_forward: frozenset[NonEmpty] = frozenset()
    """The qtypes of AI Toolkit's own quantizers that dequantize a layer at every forward,
    whose copy autograd keeps for backward."""
    text_encoder_dropped: Mapping[NonEmpty, float] = Field(default_factory=dict)
    """Billions of its text encoder's parameters a loader (``python_class``) drops before the
    encoder comes to the card (Qwen-Image's vision tower)."""
    quantized_off_card: frozenset[NonEmpty] = frozenset()
    """The loaders (``python_class``) whose transformer is quantized block by block on the
    card and each block moved back to system RAM, before the rest comes to the card."""
    optimizers: Mapping[NonEmpty, OptimizerInfo] = Field(min_length=1)
    unknown_optimizer_state_bytes: float = Field(ge=0)
    lora: LoraFacts
    unknown_params: NominalParams
    attention: AttentionFacts
    paramiter_swapping: SwappingFacts
    split_model: SplitFacts
    values: Mapping[NonEmpty, ValueRule] = Field(min_length=1)
    card_gib: ValueRule
    """What a card's memory in GiB may be (``--gpu``, nvidia-smi's figure, a recorded one)."""

    @model_validator(mode="after")
    def _consistent(self) -> LeversFile:
        if self.default_qtype not in self.qtype_bytes:
            raise ValueError(f"default_qtype {self.default_qtype} has no qtype_bytes entry")
        unknown = sorted(self.dequantized_per_forward - set(self.qtype_bytes))
        if unknown:
            raise ValueError(f"dequantized_per_forward names unknown qtypes: {', '.join(unknown)}")
        stray = sorted(
            info.eight_bit
            for info in self.optimizers.values()
            if info.eight_bit and info.eight_bit not in self.optimizers
        )
        if stray:
            raise ValueError(f"eight_bit names optimizers the table lacks: {', '.join(stray)}")
        return self

    def weight_bytes(self, dtype: str | None) -> float:
        """Bytes per weight for ``train.dtype`` (its Python default, fp32, when unknown)."""
        return self.dtype_bytes.get((dtype or "fp32").lower(), self.dtype_bytes["fp32"])

    def quantized_bytes(self, qtype: str | None) -> float:
        """Bytes per weight for a qtype (the ARA form by its part before ``|``; 1 if unknown)."""
        name = (qtype or self.default_qtype).split("|", 1)[0].strip().lower()
        return self.qtype_bytes.get(name or self.default_qtype, 1.0)

    def optimizer(self, name: str | None) -> OptimizerInfo | None:
        """The table's entry for an optimizer name (case-insensitive)."""
        return self.optimizers.get((name or "adamw").lower())


# --- the web UI --------------------------------------------------------------------------------


class UiField(_Frozen):
    """Where one config field lives in AI Toolkit's web UI."""

    where: NonEmpty
    shown_for: UiCondition | None = None
    otherwise: NonEmpty | None = None
    note: NonEmpty | None = None

    @model_validator(mode="after")
    def _consistent(self) -> UiField:
        if (self.shown_for is None) != (self.otherwise is None):
            raise ValueError("shown_for and otherwise go together")
        return self

    def hint(self, arch: ArchFacts | None = None) -> str:
        """Panel → control for ``arch`` (the plain location when the arch is unknown)."""
        where = self.where
        if (
            self.shown_for
            and self.otherwise
            and arch is not None
            and not arch.shows(self.shown_for)
        ):
            where = self.otherwise
        return f"{where} ({self.note})" if self.note else where


class UiFieldsFile(_Frozen):
    """The schema of ``ui_fields.yaml``."""

    fields: Mapping[NonEmpty, UiField] = Field(min_length=1)


# --- everything together -----------------------------------------------------------------------


class Presets(_Frozen):
    """All preset data, validated, with the lookups the wizard needs."""

    archs: tuple[ArchFacts, ...]
    legacy_flags: tuple[str, ...]
    ladders: Ladders
    deeper: Ladders
    training_only: tuple[StepId, ...]
    no_quality_cost: Mapping[StepId, tuple[Moment, ...]]
    moments: Mapping[Moment, MomentInfo]
    steps: Mapping[StepId, StepInfo]
    scale_up_order: tuple[StepId, ...]
    limits: Limits
    environment_checks: tuple[str, ...]
    unknown_arch: UnknownArch
    ui_fields: Mapping[str, UiField]
    levers: LeversFile
    memory_families: Mapping[str, MemoryFamily]
    memory_measured_with: Mapping[str, str]
    """The package versions, device and dtype that measured ``memory.yaml``'s figures."""

    _by_id: dict[str, ArchFacts] = PrivateAttr(default_factory=dict)

    def model_post_init(self, context: Any, /) -> None:
        """Index the archs by id and by the arch the toolkit resolves them to."""
        for facts in self.archs:
            self._by_id.setdefault(facts.id, facts)
        for facts in self.archs:
            self._by_id.setdefault(facts.python_arch, facts)

    def arch(self, arch: str | None) -> ArchFacts | None:
        """The facts for a ``model.arch`` value, or None when it is unknown.

        The exact id wins (``wan21:14b``, ``qwen_image:2512``); otherwise the variant tag after
        the first ``:`` is dropped and the base name is looked up (``wan21:foo`` → ``wan21``),
        first as an id and then as the arch the toolkit resolves to (``wan22_14b`` →
        ``wan22_14b:t2v``).
        """
        if not arch:
            return None
        return self._by_id.get(arch) or self._by_id.get(arch.split(":", 1)[0])

    def arch_from_model(self, model: Mapping[str, Any]) -> ArchFacts | None:
        """The facts for a config's ``model`` section: its ``arch``, else its legacy ``is_*`` flags.

        Like AI Toolkit, a set ``arch`` wins over the flags, and the flags are tried in the
        toolkit's order. None when neither says anything (the toolkit would then assume SD 1.x).
        """
        arch = model.get("arch")
        if isinstance(arch, str) and arch:
            return self.arch(arch)
        for flag in self.legacy_flags:
            if model.get(flag):
                return next(
                    a for a in self.archs if a.legacy_flag == flag and a.id == a.python_arch
                )
        return None

    def memory_of(
        self, facts: ArchFacts | None, name_or_path: str | None = None
    ) -> MemoryFamily | None:
        """The memory family of an arch: None for an unknown arch or one marked memory_unknown,
        unless ``name_or_path`` matches one of its ``memory_by_name`` patterns."""
        if facts is None:
            return None
        if facts.memory is not None:
            return self.memory_families[facts.memory]
        for rule in facts.memory_by_name if name_or_path else ():
            if re.search(rule.pattern, name_or_path or "", re.IGNORECASE):
                return self.memory_families[rule.family]
        return None

    def frame_grid(self, facts: ArchFacts | None) -> FrameGrid:
        """The frame grid of an arch; for one the presets do not know, the toolkit's fallback."""
        if facts is not None and facts.frames is not None:
            return facts.frames
        return self.unknown_arch.frames

    def ladder(self, kind: ModelKind) -> tuple[StepId, ...]:
        """The roll-back ladder for ``kind``, first step first."""
        return self.ladders.of(kind)

    def moment(self, moment_id: Moment) -> MomentInfo:
        """The moment table's row for ``moment_id``."""
        return self.moments[moment_id]

    def step(self, step_id: StepId) -> StepInfo:
        """Title, reason and fields of one step."""
        return self.steps[step_id]

    def rollback_order(self, moment_id: Moment, kind: ModelKind) -> tuple[StepId, ...]:
        """The steps in the order they are offered: the moment's first steps, then the ladder,
        then the deeper levers (the training-only ones for training-step crashes only).

        Empty for a moment whose first steps are empty (``environment``: the config is not
        the problem).
        """
        first = self.moment(moment_id).first(kind)
        if not first:
            return ()
        training = moment_id in TRAINING_MOMENTS
        rest = (
            step
            for step in (*self.ladder(kind), *self.deeper.of(kind))
            if step not in first and (training or step not in self.training_only)
        )
        return first + tuple(rest)

    def free_steps(self, moment_id: Moment) -> frozenset[StepId]:
        """The steps that cost no quality for a crash at ``moment_id`` (ladders.yaml's
        ``no_quality_cost``): the default fix takes them before any rung that costs quality."""
        return frozenset(
            step for step, moments in self.no_quality_cost.items() if moment_id in moments
        )

    def ui_field(self, field_key: FieldPath | str) -> UiField | None:
        """The UI entry for a field path or generic key, None if the field has none."""
        return self.ui_fields.get(generic_field_key(field_key))

    def ui_hint(self, field_key: FieldPath | str, arch: ArchFacts | None = None) -> str | None:
        """Where to change ``field_key`` in AI Toolkit's web UI, e.g. ``Training → Batch Size``.

        Args:
            field_key: A field path (``config.process[0].train.batch_size`` or its tuple) or a
                generic key (``datasets[].resolution``).
            arch: The job's arch, when known: some controls exist only for some archs, and the
                hint then says where the others find the field.
        """
        entry = self.ui_field(field_key)
        return entry.hint(arch) if entry else None


# --- loading -------------------------------------------------------------------------------------


def load_presets(directory: Path | None = None) -> Presets:
    """Load and validate the preset files of ``directory`` (default: the installed ``presets``).

    Raises:
        PresetError: a file is missing, is not YAML, or does not match its schema; the error
            names the file, the line and column of the bad value, and its path in the file.
    """
    if directory is None:
        return _default_presets()
    return _load(directory)


@functools.cache
def _default_presets() -> Presets:
    """The shipped presets, loaded once per process."""
    return _load(resources.files("oom_wizard.presets"))


def _load(directory: Traversable) -> Presets:
    ui_fields = parse_preset(directory / UI_FIELDS_FILE, UiFieldsFile)
    memory = parse_preset(directory / MEMORY_FILE, MemoryFile)
    archs = parse_preset(
        directory / ARCHS_FILE,
        ArchsFile,
        {
            "memory_families": set(memory.families),
            "tiled_decode_families": {
                key
                for key, family in memory.families.items()
                if family.vae is not None and family.vae.tiled_decode is not None
            },
        },
    )
    ladders = parse_preset(
        directory / LADDERS_FILE, LaddersFile, {"ui_fields": set(ui_fields.fields)}
    )
    levers = parse_preset(
        directory / LEVERS_FILE, LeversFile, {"memory_families": set(memory.families)}
    )
    return Presets(
        archs=archs.archs,
        legacy_flags=archs.legacy_flags,
        ladders=ladders.ladders,
        deeper=ladders.deeper,
        training_only=ladders.training_only,
        no_quality_cost=ladders.no_quality_cost,
        levers=levers,
        moments=ladders.moments,
        steps=ladders.steps,
        scale_up_order=ladders.scale_up,
        limits=ladders.limits,
        environment_checks=ladders.environment_checks,
        unknown_arch=archs.unknown_arch,
        ui_fields=ui_fields.fields,
        memory_families=memory.families,
        memory_measured_with=memory.measured_with,
    )
