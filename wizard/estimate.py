"""A relative memory estimate: how a set of changes moves the activation peaks.

It is **relative and approximate**: today's config is 100 %, and the figure says where the
changed config lands against it. It counts the activation load of one training step and of
one sample, the part of VRAM that the roll-back's shape levers move; it does not count
weights, optimizer state, quantization or offloading (the low-memory path lowers those, so
its figure stays at 100 % here and the note says why).

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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from wizard.change import Change
from wizard.document import JobDocument, apply_to_tree
from wizard.presets import ArchFacts, FrameGrid, Presets, load_presets
from wizard.view import DatasetView, JobView, ProcessView, SampleView, build_view

CHECKPOINTING_OFF_FACTOR: Final = 4.0
"""Activation load without gradient checkpointing, relative to with it (rough)."""

NOTE: Final = (
    "Relative and approximate: activation load of one training step and one sample against "
    "today's config (100 %), from tokens per sample × batch × a checkpointing factor. "
    "Weights, quantization and offloading are not counted."
)


@dataclass(frozen=True)
class MemoryEstimate:
    """Where the changed config lands against today's (= 100).

    Attributes:
        train_pct: The training step's activation load, in percent of today's.
        sample_pct: The sampling load in percent of today's; 0 when the changes switch
            sampling off, None when today's config renders no samples.
        note: How to read the figures, and what they leave out.
    """

    train_pct: float
    sample_pct: float | None
    note: str


def estimate(
    document: JobDocument,
    changes: Sequence[Change],
    model_kind: str,
    *,
    presets: Presets | None = None,
) -> MemoryEstimate:
    """The relative estimate of ``changes`` applied to ``document``.

    Args:
        document: Today's config.
        changes: The changes to weigh (as :func:`wizard.plan.changes_for` makes them).
        model_kind: ``video`` counts frames; ``image`` counts one frame per sample.
        presets: The preset data (default: the shipped presets).

    Raises:
        ConfigError: the changes give a value the toolkit would refuse (a batch of 0...).
    """
    presets = presets or load_presets()
    tree = document.tree
    for change in changes:
        tree = apply_to_tree(tree, change.edit())
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
    return MemoryEstimate(
        train_pct=_percent(train_after, train_before) or 100.0,
        sample_pct=_percent(sample_after, sample_before),
        note=" ".join(notes),
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
