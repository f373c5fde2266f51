"""A job's shape: how one training process turns pixels and frames into tokens, and what its
arch and offloading leave on the card.

The memory model (:mod:`oom_wizard.rules.memory`) and the plan (:mod:`oom_wizard.rules.plan`)
both read a job through these helpers; they hold no memory figure of their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from oom_wizard.formats.view import DatasetView, ProcessView
from oom_wizard.rules.catalog import ArchFacts, FrameGrid, Presets

DEFAULT_ARCH: Final = "sd1"
"""The arch AI Toolkit gives a model section with no ``arch`` and no ``is_*`` flag."""

__all__ = [
    "DEFAULT_ARCH",
    "Shape",
    "arch_facts",
    "dataset_frames",
    "frame_floor",
    "offloaded_fractions",
]


def arch_facts(process: ProcessView, presets: Presets) -> ArchFacts | None:
    """The presets' facts for the arch a process trains: its ``arch``, else its legacy
    ``is_*`` flags, else AI Toolkit's default (``sd1``: ModelConfig, config_modules.py:764-821)
    when neither is set; None when the config names an arch we do not know."""
    keys = process.model.arch_keys()
    if not keys:
        return presets.arch(DEFAULT_ARCH)
    return presets.arch_from_model(keys)


@dataclass(frozen=True)
class Shape:
    """How one process turns pixels and frames into tokens: its arch's facts, else the
    presets' ``unknown_arch`` fallback, field by field.

    ``tokens = (W / (s × p)) × (H / (s × p)) × (1 + (F − 1) / t)`` with s, p the arch's
    spatial VAE compression and patch size, t its temporal compression.
    """

    latent_pixel: float
    temporal: float
    grid: FrameGrid
    default_frames: int | None

    @classmethod
    def of(cls, facts: ArchFacts | None, presets: Presets) -> Shape:
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


def dataset_frames(dataset: DatasetView, shape: Shape) -> int:
    """The clip length counted for a dataset: its ``num_frames``; with auto frame count on
    (clips are not capped), the largest of its num_frames, the arch's default sample length
    and the shortest clip on its frame grid."""
    frames = dataset.num_frames or 1
    if dataset.auto_frame_count is not True:
        return frames
    return max(frames, shape.default_frames or 1, frame_floor(shape.grid))


def frame_floor(grid: FrameGrid) -> int:
    """The smallest frame count above one on ``grid``: a clip never becomes a still."""
    return grid.offset if grid.offset > 1 else grid.offset + grid.step


def offloaded_fractions(process: ProcessView, facts: ArchFacts | None) -> tuple[float, float]:
    """The fractions of the transformer and text encoder that layer offloading moves off."""
    model = process.model
    on = model.layer_offloading if "layer_offloading" in model.present else model.auto_memory
    if on is not True or (facts is not None and facts.layer_offloading != "works"):
        return 0.0, 0.0
    return (
        float(model.layer_offloading_transformer_percent or 0.0),
        float(model.layer_offloading_text_encoder_percent or 0.0),
    )
