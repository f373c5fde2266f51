"""The Wan VAE's passes chunk by chunk (``presets/memory.yaml``'s figures, which
``bench/calibrate_memory.py`` measures on fake tensors and ``bench/measure_vae_decode.py`` lists
size by size): the first chunk holds one frame, each later chunk four and the causal cache."""

from __future__ import annotations

from typing import Any

import pytest

from oom_wizard.rules.memory import JobMemory, job_memory
from tests.support.plan_support import document, job

# bench/measure_vae_decode.py, Wan 2.1 VAE, bf16, fake tensors, times the GPU factor of the
# shared H200 rows (decode 1.111, encode 1.155): one 1024² frame decodes in 3.378 GiB (x 1.111:
# 3.75), a 480x832 frame in 1.287 (1.43), 17 frames at 480x832 in 3.803 (4.23); one 1024²
# frame encodes in 1.883 (x 1.155: 2.17).
ONE_FRAME_1024 = 3.75
ONE_FRAME_480P = 1.43
CLIP_17_480P = 4.23
ENCODE_ONE_FRAME_1024 = 2.17


def memory(
    *, sample: dict[str, Any] | None = None, dataset: dict[str, Any] | None = None
) -> JobMemory:
    """A Wan 2.1 1.3B LoRA job's parts (its denoiser's pass is far below the decode)."""
    config = job(
        arch="wan21:1b",
        train={
            "batch_size": 1,
            "dtype": "bf16",
            "gradient_checkpointing": True,
            "cache_text_embeddings": True,
        },
        model={"quantize": False},
        datasets=[{"resolution": [1024], "cache_latents_to_disk": True, **(dataset or {})}],
        sample=sample,
    )
    config["config"]["process"][0]["network"] = {"type": "lora", "linear": 16}
    return job_memory(document(config), [], "video")


def decode(width: int, height: int, frames: int) -> float:
    sample = {"width": width, "height": height, "num_frames": frames, "sample_every": 250}
    return float(memory(sample=sample).parts["sample"].vae_pass)


def test_one_frame_decodes_as_the_first_chunk_alone() -> None:
    # A later chunk's working set per pixel gave one 1024² frame 11.0 GiB; the first chunk
    # decodes one frame and holds a one-frame cache.
    assert decode(1024, 1024, 1) == pytest.approx(ONE_FRAME_1024, rel=0.03)
    assert decode(832, 480, 1) == pytest.approx(ONE_FRAME_480P, rel=0.03)


def test_a_clip_pays_its_later_chunks_from_the_second_latent_frame() -> None:
    # Frames 1-4 are one latent frame (one chunk); the fifth starts a chunk of four frames.
    assert decode(832, 480, 4) == pytest.approx(decode(832, 480, 1), rel=0.01)
    assert decode(832, 480, 17) == pytest.approx(CLIP_17_480P, rel=0.03)
    assert decode(832, 480, 81) < decode(832, 480, 17) * 1.05


def test_one_frame_encodes_as_the_first_chunk_alone() -> None:
    # Uncached latents of a 1024 px image dataset: the step encodes one frame per item.
    step = memory(dataset={"cache_latents_to_disk": False}).parts["training"]
    assert step.vae_pass == pytest.approx(ENCODE_ONE_FRAME_1024, rel=0.03)
