"""The VAE's passes: a training batch's encode when its latents are not cached, one item's
encode while they are cached (in the load phase), and a sample's decode (the account's
``vae_pass``, where it, not the denoiser's pass, sets a phase's peak).

The figures are memory.yaml's ``vae`` of the family (its own VAE's decode and encode, by pixels
and frames), else a stand-in family's (:data:`IMAGE_VAE_STAND_IN`, :data:`VIDEO_VAE_STAND_IN`);
a pixel-space model has no VAE to pass through. An arch that tiles its samples' decode
(archs.yaml ``sample_decode_tiled_by``: Wan's text-to-video archs with ``model.low_vram`` or
``model.model_kwargs.vae_tiling``) decodes a frame larger than one tile tile by tile: the
family's ``vae.tiled_decode``.
"""

from __future__ import annotations

from typing import Final

from oom_wizard.formats.view import DatasetView
from oom_wizard.rules.memory.family import FamilyFigures
from oom_wizard.rules.memory.weights import on_cpu
from oom_wizard.rules.shape import dataset_frames

IMAGE_VAE_STAND_IN: Final = "flux"
VIDEO_VAE_STAND_IN: Final = "wan21_14b"
"""The memory families whose VAE figures (memory.yaml, checked on the H200) stand in for a family
without its own: FLUX.1's for an image model (the SD and SDXL VAEs have the same decoder
widths), Wan 2.1's for a video model. A stand-in never counts as checked."""


class VaePasses:
    """The VAE's passes of one process, in bytes (0 with ``vae_device: cpu``, or no VAE)."""

    def __init__(self, figures: FamilyFigures) -> None:
        self.figures = figures
        """The VAE passes' figures: the family's own, else a stand-in family's
        (:data:`IMAGE_VAE_STAND_IN`, :data:`VIDEO_VAE_STAND_IN`)."""
        own = self.figures.family.vae if self.figures.family is not None else None
        video = self.figures.video or (
            self.figures.facts is not None and self.figures.facts.kind == "video"
        )
        stand_in = self.figures.presets.memory_families[
            VIDEO_VAE_STAND_IN if video else IMAGE_VAE_STAND_IN
        ]
        self.measured = own if own is not None else stand_in.vae
        pixel_space = self.figures.facts is not None and self.figures.facts.spatial_compression == 1
        if (
            own is None
            and pixel_space
            and self.figures.family is not None
            and self.figures.family.params.vae == 0
        ):
            self.measured = None  # a pixel-space model: no VAE, nothing to decode or encode

    def latents_cached(self) -> bool:
        """Whether every dataset caches its latents (AI Toolkit's ``is_latents_cached``,
        BaseSDTrainProcess.py:143-172)."""
        datasets = self.figures.process.datasets or ()
        return all(d.caches_latents for d in datasets)

    def encode(self) -> float:
        """The VAE's encode of a training batch at its largest bucket, in bytes: 0 where every
        dataset's latents are cached (then it runs once, while caching)."""
        worst = 0.0
        for dataset in self.figures.process.datasets or ():
            if dataset.caches_latents:
                continue
            batch = dataset.batch_size or self.figures.process.train.batch_size or 1
            worst = max(worst, batch * self.item(dataset, decode=False))
        return worst

    def caching(self) -> float:
        """The VAE's encode of one item while the latents are cached (0 when none are)."""
        cached = [
            self.item(dataset, decode=False)
            for dataset in self.figures.process.datasets or ()
            if dataset.caches_latents
        ]
        return max(cached, default=0.0)

    def item(self, dataset: DatasetView, *, decode: bool) -> float:
        """One item of ``dataset`` through the VAE (encode; ``decode`` for a sample's size)."""
        resolution = max(dataset.resolution or (512,))
        frames = dataset_frames(dataset, self.figures.shape) if self.figures.video else 1
        return self.passed(resolution, resolution, frames, decode=decode)

    def passed(self, width: int, height: int, frames: int, *, decode: bool) -> float:
        """Bytes of one VAE decode (or encode) of ``frames`` frames of width × height.

        A video VAE works chunk by chunk with a causal cache, so its peak barely grows with the
        frames: the first chunk holds one frame (one latent frame), each later one the
        temporal compression's frames and the cache, so a clip of more than one latent frame
        costs its later chunk's working set and an image or a one-latent-frame clip only the
        first's (diffusers ``AutoencoderKLWan._decode``, ``_encode``)."""
        if on_cpu(self.figures.process.model.vae_device):
            return 0.0
        measured = self.measured
        if measured is None:
            return 0.0
        frames = max(frames, 1)
        chunks = int(self.figures.shape.latent_frames(frames)) if measured.frame_by_frame else 1
        tiled = measured.tiled_decode if decode else None
        if tiled is not None and self.tiles_decode() and tiled.tiles(width, height):
            return tiled.at(width * height, frames, chunks)
        passed = measured.decode if decode else measured.encode
        return passed.at(width * height, frames, chunks)

    def tiles_decode(self) -> bool:
        """Whether the samples' decode is tiled: a switch of the arch's
        ``sample_decode_tiled_by`` is on (AI Toolkit's ``use_vae_tiling``, wan21.py:523-528)
        and the family's VAE has the tiled figures. Says so in a note the first time."""
        facts = self.figures.facts
        if facts is None or not facts.sample_decode_tiled_by:
            return False
        if self.measured is None or self.measured.tiled_decode is None:
            return False
        model = self.figures.process.model
        kwargs = model.model_kwargs
        on = {
            "low_vram": model.low_vram is True,
            "vae_tiling": kwargs is not None and kwargs.vae_tiling is True,
        }
        switch = next((s for s in facts.sample_decode_tiled_by if on[s]), None)
        if switch is None:
            return False
        named = "low_vram" if switch == "low_vram" else "model_kwargs.vae_tiling"
        note = (
            f"With {named} the VAE decodes each sample tile by tile (tiles of "
            f"{self.measured.tiled_decode.tile} px), so the decode holds one tile's work, not "
            "a whole frame's."
        )
        if note not in self.figures.notes:
            self.figures.notes.append(note)
        return True
