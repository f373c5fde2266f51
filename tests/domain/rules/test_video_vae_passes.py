"""The Wan VAE's passes chunk by chunk (``presets/memory.yaml``'s figures, which
``bench/calibrate_memory.py`` measures on fake tensors and ``bench/measure_vae_decode.py`` lists
size by size): the first chunk holds one frame, each later chunk four and the causal cache; and
the tiled decode of Wan's text-to-video samples with ``low_vram`` or ``model_kwargs.vae_tiling``."""

from __future__ import annotations

from typing import Any

import pytest

from oom_wizard.formats.document import load_document
from oom_wizard.rules.catalog import load_presets
from oom_wizard.rules.memory import (
    GIB_BYTES as GIB,
    JobMemory,
    ProcessAccount,
    job_memory,
    view_after,
)
from tests.support.corpus import needs_examples, shared_example
from tests.support.plan_support import document, job

# bench/measure_vae_decode.py, Wan 2.1 VAE, bf16, fake tensors, times the GPU factor of the
# shared H200 rows (decode 1.111, encode 1.155): one 1024² frame decodes in 3.378 GiB (x 1.111:
# 3.75), a 480x832 frame in 1.287 (1.43), 17 frames at 480x832 in 3.803 (4.23); one 1024²
# frame encodes in 1.883 (x 1.155: 2.17).
ONE_FRAME_1024 = 3.75
ONE_FRAME_480P = 1.43
CLIP_17_480P = 4.23
ENCODE_ONE_FRAME_1024 = 2.17
# The same, tiled (tiles of 256 px): one 1024² frame 0.245 GiB, one 480x832 frame 0.238, 33
# frames at 480x832 0.80, 81 frames 0.96 (untiled 4.27 and 4.38 on the H200).
TILED_ONE_FRAME_1024 = 0.245
TILED_CLIP_33_480P = 0.80
TILED_CLIP_81_480P = 0.96


def memory(
    *,
    sample: dict[str, Any] | None = None,
    dataset: dict[str, Any] | None = None,
    model: dict[str, Any] | None = None,
    arch: str = "wan21:1b",
) -> JobMemory:
    """A Wan 2.1 1.3B LoRA job's parts (its denoiser's pass is far below the decode)."""
    config = job(
        arch=arch,
        train={
            "batch_size": 1,
            "dtype": "bf16",
            "gradient_checkpointing": True,
            "cache_text_embeddings": True,
        },
        model={"quantize": False, **(model or {})},
        datasets=[{"resolution": [1024], "cache_latents_to_disk": True, **(dataset or {})}],
        sample=sample,
    )
    config["config"]["process"][0]["network"] = {"type": "lora", "linear": 16}
    return job_memory(document(config), [], "video")


def decode(
    width: int,
    height: int,
    frames: int,
    model: dict[str, Any] | None = None,
    arch: str = "wan21:1b",
) -> float:
    sample = {"width": width, "height": height, "num_frames": frames, "sample_every": 250}
    return float(memory(sample=sample, model=model, arch=arch).parts["sample"].vae_pass)


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


LOW_VRAM = {"low_vram": True}
VAE_TILING = {"model_kwargs": {"vae_tiling": True}}


def account(arch: str, model: dict[str, Any] | None = None) -> ProcessAccount:
    """The account of a LoRA job of ``arch`` with ``model``'s switches."""
    config = job(arch=arch, model={"quantize": False, **(model or {})})
    process = view_after(document(config), []).processes[0]
    presets = load_presets()
    facts = presets.arch(arch)
    assert facts is not None
    family = presets.memory_of(facts, process.model.name_or_path)
    return ProcessAccount(process, facts, family, presets, True)


def sample_decode(
    arch: str, model: dict[str, Any] | None, width: int, height: int, frames: int
) -> float:
    return account(arch, model).vae_passes.passed(width, height, frames, decode=True) / GIB


def test_low_vram_or_vae_tiling_tiles_a_text_to_video_sample_decode() -> None:
    # wan21.py use_vae_tiling: low_vram or model_kwargs.vae_tiling; one tile's work at a time.
    for arch in ("wan21:1b", "wan21:14b", "wan22_14b:t2v"):
        for switch in (LOW_VRAM, VAE_TILING):
            one = sample_decode(arch, switch, 1024, 1024, 1)
            assert one == pytest.approx(TILED_ONE_FRAME_1024, rel=0.05)
            clip = sample_decode(arch, switch, 832, 480, 33)
            assert clip == pytest.approx(TILED_CLIP_33_480P, rel=0.05)
            longer = sample_decode(arch, switch, 832, 480, 81)
            assert longer == pytest.approx(TILED_CLIP_81_480P, rel=0.05)
        assert sample_decode(arch, None, 1024, 1024, 1) == pytest.approx(ONE_FRAME_1024, rel=0.03)
    # The Python-only arch wan21 (its size from name_or_path) tiles as wan21:1b does.
    named = account("wan21", {"name_or_path": "Wan-AI/Wan2.1-T2V-1.3B-Diffusers", **LOW_VRAM})
    assert named.vae_passes.tiles_decode()
    # Wan 2.2 5B's own VAE (16x spatial compression, the same 256 px tiles): 0.84 GiB tiled.
    assert sample_decode("wan22_5b", LOW_VRAM, 832, 480, 33) == pytest.approx(0.84, rel=0.05)
    tiled = account("wan21:1b", LOW_VRAM)
    tiled.vae_passes.passed(832, 480, 33, decode=True)
    assert any("tile by tile" in note for note in tiled.notes), tiled.notes


def test_a_frame_within_one_tile_and_the_image_to_video_archs_decode_whole() -> None:
    # diffusers tiles only a frame wider or taller than its 256 px tile; wan21_i2v and
    # wan22_14b_i2v sample without AI Toolkit's use_vae_tiling.
    small = sample_decode("wan21:1b", None, 256, 256, 1)
    assert sample_decode("wan21:1b", LOW_VRAM, 256, 256, 1) == pytest.approx(small, rel=1e-6)
    for arch in ("wan21_i2v:14b", "wan22_14b_i2v"):
        whole = sample_decode(arch, None, 832, 480, 33)
        assert sample_decode(arch, LOW_VRAM, 832, 480, 33) == pytest.approx(whole, rel=1e-6)
        assert whole > 4.0


@needs_examples
def test_the_wan22_14b_example_decodes_its_low_vram_sample_tiled() -> None:
    # low_vram: true and one 1024² frame per sample: 3.75 GiB untiled set the first sample's
    # peak; tiled, the decode is a quarter GiB and the denoising pass sets it.
    document = load_document(shared_example("train_lora_wan22_14b_24gb.yaml"))
    first = job_memory(document, [], "video").parts["baseline_sample"]
    assert first.vae_pass < 0.5, first
