"""An approximate memory estimate: how a set of changes moves the peaks that crash.

It has two parts, both **approximate**. The activation part is relative: today's config is
100 %, and the figure says where the changed config lands against it, for one training step
and for one sample (the part of VRAM the shape levers move). The weights part is absolute:
the weights resident on the GPU, in GiB, at the three peaks (the end of loading, a training
step, a sample), from the arch's parameter counts (``archs.yaml``, with their source) and the
bytes per weight of its dtype and qtype (``levers.yaml``), minus what offloading moves to the
CPU. Quantization, low_vram, cached text embeddings, offloading, the LoRA rank and the
optimizer move that part; activations are not turned into GiB.

The formula
-----------

For each training process, the training load is the largest over its datasets of::

    tokens(dataset) × batch(dataset) × checkpointing

    tokens   = (R / (s × p))²  ×  frames_latent
    R        = the dataset's largest resolution bucket (a bucket caps the pixel count at R²)
    s, p     = the arch's spatial VAE compression and transformer patch size (archs.yaml;
               its ``unknown_arch`` entry, 8 and 2, when the arch is unknown)
    frames_latent = 1 + (F − 1) / t  for a video model, else 1
    F        = the dataset's num_frames; with auto_frame_count on, clips are not capped, so
               F is taken as the largest of num_frames, the arch's default sample length and
               the shortest clip on its frame grid (never less than a fixed count the plan
               would put in its place)
    t        = the arch's temporal compression (archs.yaml; ``unknown_arch``, 8, the
               toolkit's fallback, when unknown)
    batch    = datasets[].batch_size, else train.batch_size
    checkpointing = 1 with gradient checkpointing on, 4 with it off (a rough figure for
               keeping every layer's activations instead of recomputing them)

The sampling load is the largest over the samples that will render (none when
``train.disable_sampling`` is on) of ``(W / (s × p)) × (H / (s × p)) × frames_latent``, with
each sample's own width, height and frames winning over the section's. Sample steps and
``sample_every`` change time and frequency, not the peak, so they leave it as it is.

The job's load is the largest over its training processes, and the estimate is
``100 × after / before``.

The weights, per training process (the job's figure is the largest), in GiB (``× 10⁹ / 2³⁰``
of billions of bytes)::

    transformer = P_t × b_t × E × (1 − o_t)
    text_enc    = P_te × b_te × (1 − o_te)
    trainable   = LoRA: P_t × k × rank × (4 + 4 + S)      (fp32 weights and gradients)
                  no network section (full fine-tune): P_t × (b + S)
    training    = transformer + text_enc_train + trainable
    sample      = transformer + text_enc_sample + trainable
    load        = max(transformer_load, transformer + text_enc_load)

    P_t, P_te  = the arch's transformer and text-encoder parameters (billions; an arch without
                 counts uses levers.yaml's ``unknown_params``: the direction holds, the GiB
                 figures are then not shown)
    b          = bytes per weight of ``train.dtype`` (fp32 4, bf16 2, the toolkit's default fp32)
    b_t        = the qtype's bytes with ``model.quantize`` on (qfloat8 1, uint4 0.5...), else b;
                 b_te likewise with ``model.quantize_te`` (which defaults to ``quantize``)
    E          = the arch's experts (Wan 2.2 14B: 2), or 1 with ``model.low_vram`` on (the idle
                 expert stays on the CPU)
    o_t, o_te  = ``layer_offloading_*_percent`` with ``model.layer_offloading`` on (and the arch
                 supports it), else 0
    text_enc_train = 0 with ``train.cache_text_embeddings`` (the encoder is freed) or
                 ``train.unload_text_encoder`` (parked on the CPU), else text_enc
    text_enc_sample = 0 with cached embeddings only (unloading moves it back for samples)
    k          = levers.yaml's trainable weights per rank per transformer weight (rough)
    S          = the optimizer's state bytes per trainable weight (adamw 8, adamw8bit 2)
    transformer_load = the transformer at b (not b_t) while it is quantized: without
                 ``model.low_vram`` the full-precision model is moved to the GPU first, with it
                 it stays in system RAM and is quantized block by block (AI Toolkit's
                 toolkit/models/wan21/wan21.py:357-363, toolkit/util/quantize.py:445-466).
                 text_enc_load likewise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Final, Literal

from oom_wizard.formats.change import Change
from oom_wizard.formats.document import JobDocument, apply_edits
from oom_wizard.formats.view import DatasetView, JobView, ProcessView, SampleView, build_view
from oom_wizard.rules.catalog import ArchFacts, FrameGrid, Presets, load_presets

if TYPE_CHECKING:
    from oom_wizard.rules.memory import Calibration, JobMemory

CHECKPOINTING_OFF_FACTOR: Final = 4.0
"""Activation load without gradient checkpointing, relative to with it (rough)."""

NOTE: Final = (
    "Approximate: activation load of one training step and one sample against today's "
    "config (100 %), from tokens per sample × batch × a checkpointing factor; resident "
    "weights in GiB from the arch's parameter counts, dtype, qtype and offloading."
)

GIB: Final = 1e9 / 2**30
"""GiB per billion bytes."""

_EPSILON: Final = 1e-6

Peak = Literal["load", "training", "sample"]

CRASHED_PEAK: Final[Mapping[str, Peak]] = {
    "loading": "load",
    "early_steps": "training",
    "intermittent": "training",
    "sampling": "sample",
}
"""The peak a crash at each moment ran into (``loading`` also counts the first sample)."""

PEAK_WORDS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "load": "the loaded weights and the first sample",
        "training": "one training step",
        "sample": "the sample",
    }
)
"""How the plan names the peak a crash ran into (see :data:`CRASHED_PEAK`)."""


@dataclass(frozen=True)
class Residency:
    """Weights resident on the GPU at each peak, in GiB."""

    load: float
    training: float
    sample: float

    def at(self, peak: Peak) -> float:
        """The figure of one peak."""
        return {"load": self.load, "training": self.training, "sample": self.sample}[peak]


@dataclass(frozen=True)
class WeightsEstimate:
    """Resident weights before and after the changes.

    Attributes:
        before: Today's config.
        after: With the changes.
        known: Every process's arch has parameter counts; when False the figures come from
            nominal counts and only their direction means something.
    """

    before: Residency
    after: Residency
    known: bool


@dataclass(frozen=True)
class MemoryEstimate:
    """Where the changed config lands against today's (= 100), and its resident weights.

    Attributes:
        train_pct: The training step's activation load, in percent of today's.
        sample_pct: The sampling load in percent of today's; 0 when the changes switch
            sampling off, None when today's config renders no samples.
        note: How to read the figures, and what they leave out.
        weights: The resident weights in GiB before and after.
        gib: Each phase's band in GiB before and after (:mod:`oom_wizard.rules.memory`): the main
            figures; the percentages stay as a second number.
    """

    train_pct: float
    sample_pct: float | None
    note: str
    weights: WeightsEstimate | None = None
    gib: tuple[JobMemory, JobMemory] | None = None

    def gib_json(self) -> dict[str, object] | None:
        """``{"before": PHASES, "after": PHASES}`` as ``plan --json`` gives them."""
        if self.gib is None:
            return None
        before, after = self.gib
        return {"before": before.phases_json(), "after": after.phases_json()}

    def lowers(self, moment: str) -> bool:
        """Whether the changes lower the peak a crash at ``moment`` ran into.

        The training step for ``early_steps`` and ``intermittent``, the sample for
        ``sampling``, the loaded weights or the first sample for ``loading``.
        """
        peak = CRASHED_PEAK.get(moment)
        if peak is None:
            return False
        weights = self.weights
        sample = self.sample_pct is not None and self.sample_pct < 100.0 - _EPSILON

        def lighter(which: Peak) -> bool:
            return weights is not None and weights.after.at(which) < weights.before.at(which) - 1e-4

        if peak == "training":
            return self.train_pct < 100.0 - _EPSILON or lighter("training") or self._split_lowers()
        if peak == "sample":
            return sample or lighter("sample") or self._split_lowers()
        return lighter("load") or sample or lighter("sample") or self._split_lowers()

    def _split_lowers(self) -> bool:
        """A model split over more cards than before: the weights and activations each card
        holds drop, which the single-card percentages and residency do not see."""
        if self.gib is None:
            return False
        before, after = self.gib
        return after.cards > before.cards

    def weights_gib(self, moment: str) -> tuple[float | None, float | None]:
        """The resident weights of the crashed peak, before and after, in GiB (rounded to
        0.1); None when the arch's parameter counts are unknown."""
        peak = CRASHED_PEAK.get(moment, "training")
        if self.weights is None or not self.weights.known:
            return None, None
        return (
            round(self.weights.before.at(peak), 1),
            round(self.weights.after.at(peak), 1),
        )


def estimate(
    document: JobDocument,
    changes: Sequence[Change],
    model_kind: str,
    *,
    presets: Presets | None = None,
    calibration: Calibration | None = None,
    gpus: int = 1,
) -> MemoryEstimate:
    """The relative estimate of ``changes`` applied to ``document``, with the GiB bands.

    Args:
        document: Today's config.
        changes: The changes to weigh (as :func:`oom_wizard.rules.plan.changes_for` makes them).
        model_kind: ``video`` counts frames; ``image`` counts one frame per sample.
        presets: The preset data (default: the shipped presets).
        calibration: A crash's or a run's own figures for today's config (see
            :func:`oom_wizard.rules.memory.job_memory`).
        gpus: How many GPUs the probe sees (a model split over them is weighed per card).

    Raises:
        ConfigError: the changes give a value the toolkit would refuse (a batch of 0...).
    """
    presets = presets or load_presets()
    tree = apply_edits(document.tree, [change.edit() for change in changes])
    before = document.view()
    after = build_view(tree, file=str(document.source), locate=lambda _path: None)
    shapes = {
        process.index: _Shape.of(arch_facts(process, presets), presets)
        for process in before.processes
    }
    video = model_kind == "video"
    train_before = _train_load(before, shapes, video)
    train_after = _train_load(after, shapes, video)
    sample_before = _sample_load(before, shapes, video)
    sample_after = _sample_load(after, shapes, video)
    notes = [NOTE]
    if video and _auto_frames(before):
        notes.append(
            "Auto frame count is on, so clip length is unknown; it is counted as the arch's "
            "default sample length."
        )
    facts = {process.index: arch_facts(process, presets) for process in before.processes}
    known = all(f is not None and f.params is not None for f in facts.values())
    if not known:
        notes.append("The arch's parameter counts are unknown, so the weights have no GiB here.")
    from oom_wizard.rules.memory import job_memory

    gib = (
        job_memory(document, [], model_kind, presets=presets, calibration=calibration, gpus=gpus),
        job_memory(
            document, changes, model_kind, presets=presets, calibration=calibration, gpus=gpus
        ),
    )
    return MemoryEstimate(
        gib=gib,
        train_pct=_percent(train_after, train_before) or 100.0,
        sample_pct=_percent(sample_after, sample_before),
        note=" ".join(notes),
        weights=WeightsEstimate(
            before=_residency(before, facts, presets),
            after=_residency(after, facts, presets),
            known=known,
        ),
    )


def _percent(after: float, before: float) -> float | None:
    if before <= 0:
        return None
    return round(100.0 * after / before, 1)


def arch_facts(process: ProcessView, presets: Presets) -> ArchFacts | None:
    """The presets' facts for the arch a process trains: its ``arch``, else its legacy
    ``is_*`` flags (None when neither names one we know: the estimate then uses defaults)."""
    return presets.arch_from_model(process.model.arch_keys())


@dataclass(frozen=True)
class _Shape:
    """How one process turns pixels and frames into tokens: its arch's facts, else the
    presets' ``unknown_arch`` fallback, field by field."""

    latent_pixel: float
    temporal: float
    grid: FrameGrid
    default_frames: int | None

    @classmethod
    def of(cls, facts: ArchFacts | None, presets: Presets) -> _Shape:
        unknown = presets.unknown_arch
        spatial = (facts and facts.spatial_compression) or unknown.spatial_compression
        patch = (facts and facts.patch) or unknown.patch
        return cls(
            latent_pixel=float(spatial * patch),
            temporal=(facts and facts.temporal_compression) or unknown.temporal_compression,
            grid=presets.frame_grid(facts),
            default_frames=facts.default_sample_frames if facts else None,
        )

    def latent_frames(self, frames: int) -> float:
        """``1 + (F − 1) / t``: the latent frames of a clip of ``frames``."""
        return 1.0 + (max(frames, 1) - 1) / self.temporal

    def tokens(self, width: int, height: int, frames: int) -> float:
        """Tokens of one item: ``(W / (s × p)) × (H / (s × p)) × frames_latent``."""
        return (
            (width / self.latent_pixel) * (height / self.latent_pixel) * self.latent_frames(frames)
        )


def _train_load(view: JobView, shapes: Mapping[int, _Shape], video: bool) -> float:
    loads = [
        _dataset_load(process, dataset, shapes[process.index], video)
        for process in view.processes
        for dataset in process.datasets
    ]
    return max(loads, default=0.0)


def _dataset_load(process: ProcessView, dataset: DatasetView, shape: _Shape, video: bool) -> float:
    resolution = max(dataset.resolution or (0,))
    frames = _dataset_frames(dataset, shape) if video else 1
    batch = dataset.batch_size or process.train.batch_size or 1
    checkpointing = (
        1.0 if process.train.gradient_checkpointing is not False else CHECKPOINTING_OFF_FACTOR
    )
    return shape.tokens(resolution, resolution, frames) * batch * checkpointing


def _dataset_frames(dataset: DatasetView, shape: _Shape) -> int:
    """The clip length counted for a dataset: with auto frame count on (no upper limit), the
    largest of its num_frames, the arch's default sample length and the shortest clip."""
    frames = dataset.num_frames or 1
    if dataset.auto_frame_count is not True:
        return frames
    return max(frames, shape.default_frames or 1, frame_floor(shape.grid))


Shape = _Shape
"""How one process turns pixels and frames into tokens (used by :mod:`oom_wizard.rules.memory`)."""


def dataset_frames(dataset: DatasetView, shape: _Shape) -> int:
    """The clip length counted for a dataset (see the module docstring)."""
    return _dataset_frames(dataset, shape)


def frame_floor(grid: FrameGrid) -> int:
    """The smallest frame count above one on ``grid``: a clip never becomes a still."""
    return grid.offset if grid.offset > 1 else grid.offset + grid.step


def _sample_load(view: JobView, shapes: Mapping[int, _Shape], video: bool) -> float:
    loads = [
        _process_sample_load(process.sample, shapes[process.index], video)
        for process in view.processes
        if process.sample is not None and process.train.disable_sampling is not True
    ]
    return max(loads, default=0.0)


def _process_sample_load(sample: SampleView, shape: _Shape, video: bool) -> float:
    """The heaviest sample: each one at the size and length it renders at."""
    count = max(len(sample.prompt_paths()), 1)
    loads = []
    for index in range(count):
        size = sample.rendered_size(index)
        frames = size["num_frames"] if video else 1
        loads.append(shape.tokens(size["width"], size["height"], frames))
    return max(loads)


def _auto_frames(view: JobView) -> bool:
    return any(d.auto_frame_count is True for p in view.processes for d in p.datasets)


# --------------------------------------------------------------------------- weights


def _residency(view: JobView, facts: Mapping[int, ArchFacts | None], presets: Presets) -> Residency:
    """The job's resident weights: per peak, the largest over its training processes."""
    each = [
        _process_residency(process, facts.get(process.index), presets) for process in view.processes
    ]
    return Residency(
        load=max((r.load for r in each), default=0.0),
        training=max((r.training for r in each), default=0.0),
        sample=max((r.sample for r in each), default=0.0),
    )


def _process_residency(
    process: ProcessView, facts: ArchFacts | None, presets: Presets
) -> Residency:
    """The docstring's formula for one process."""
    levers = presets.levers
    model, train = process.model, process.train
    params = facts.params if facts is not None else None
    p_t = params.transformer if params else levers.unknown_params.transformer
    p_te = params.text_encoder if params else levers.unknown_params.text_encoder
    experts = 1 if model.low_vram is True else (params.experts if params else 1)
    full = levers.weight_bytes(train.dtype)
    quantize_te = model.quantize_te if "quantize_te" in model.present else model.quantize
    b_t = min(full, levers.quantized_bytes(model.qtype)) if model.quantize is True else full
    b_te = min(full, levers.quantized_bytes(model.qtype_te)) if quantize_te is True else full
    o_t, o_te = offloaded_fractions(process, facts)
    transformer = p_t * b_t * experts * (1.0 - o_t)
    text_encoder = p_te * b_te * (1.0 - o_te)
    cached = train.cache_text_embeddings is True
    te_train = 0.0 if cached or train.unload_text_encoder is True else text_encoder
    te_sample = 0.0 if cached else text_encoder
    trainable = _trainable(process, p_t, full, presets)
    transformer_load = (
        p_t * full * experts * (1.0 - o_t)
        if model.quantize is True and model.low_vram is not True
        else transformer
    )
    te_load = (
        p_te * full * (1.0 - o_te)
        if quantize_te is True and model.low_vram is not True
        else text_encoder
    )
    return Residency(
        load=GIB * max(transformer_load, transformer + te_load),
        training=GIB * (transformer + te_train + trainable),
        sample=GIB * (transformer + te_sample + trainable),
    )


def offloaded_fractions(process: ProcessView, facts: ArchFacts | None) -> tuple[float, float]:
    """The fractions of the transformer and text encoder that layer offloading moves off
    (both estimates weigh it this one way)."""
    model = process.model
    on = model.layer_offloading if "layer_offloading" in model.present else model.auto_memory
    if on is not True or (facts is not None and facts.layer_offloading != "works"):
        return 0.0, 0.0
    return (
        float(model.layer_offloading_transformer_percent or 0.0),
        float(model.layer_offloading_text_encoder_percent or 0.0),
    )


def _trainable(process: ProcessView, p_t: float, full: float, presets: Presets) -> float:
    """Billions of bytes for the trained weights, their gradients and the optimizer state."""
    levers = presets.levers
    info = levers.optimizer(process.train.optimizer)
    state = info.state_bytes if info is not None else levers.unknown_optimizer_state_bytes
    if process.network_rank is None:  # no network section: a full fine-tune
        return p_t * (full + state)
    rank = process.network_rank or levers.lora.rank_default
    return p_t * levers.lora.params_per_rank * rank * (4.0 + 4.0 + state)
