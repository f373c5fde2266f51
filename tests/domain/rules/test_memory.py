"""Tests of ``oom_wizard.rules.memory``: each phase of a job as a band of GiB.

The accounting is tested on a fixture family (figures of the contract's shape, FLUX-like),
so that its behaviour does not move when ``presets/memory.yaml`` gains measured figures.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from oom_wizard.formats.document import JobDocument, load_document
from oom_wizard.logs.scan import scan_log
from oom_wizard.rules.catalog import ArchFacts, OffloadMemory, UnetMemory, VaeMemory
from oom_wizard.rules.diagnosis import diagnose
from oom_wizard.rules.memory import (
    Band,
    Calibration,
    JobMemory,
    Parts,
    Phase,
    calibration_from,
    calibration_from_attempts,
    calibration_from_json,
    job_memory,
    verdict,
)
from oom_wizard.rules.memory.calibration import SCALE_RANGE
from oom_wizard.rules.memory.family import FamilyLike
from oom_wizard.rules.memory.overheads import ITEM_GIB
from oom_wizard.rules.memory.weights import BLOCKS_IN_FLIGHT, NON_BLOCK_SHARE
from tests.support.corpus import OWN_CONFIGS
from tests.support.plan_support import document, job

DEMO = Path(__file__).resolve().parents[3] / "presets" / "demo"


@dataclass(frozen=True)
class Block:
    name: str
    count: int
    saved_bytes_per_token: float
    input_bytes_per_token: float
    peak_bytes_per_token: float
    tokens: str = "joint"
    text_bytes_per_token: float | None = None


@dataclass(frozen=True)
class Activations:
    width: int
    text_tokens: int
    blocks: tuple[Block, ...]
    adapter: str = "none"
    text_embedding_width: int | None = None


@dataclass(frozen=True)
class Params:
    transformer: float
    text_encoder: float
    vae: float
    experts: int = 1
    beside: float = 0.0
    after_sample: float = 0.0


@dataclass(frozen=True)
class Family:
    id: str
    params: Params
    activations: Activations | None
    checked: str | None = "cpu"
    unet: UnetMemory | None = None
    vae: VaeMemory | None = None
    offload: OffloadMemory | None = None


FAMILY = Family(
    id="fixture",
    params=Params(transformer=12.0, text_encoder=4.9, vae=0.084),
    activations=Activations(
        width=3072,
        text_tokens=512,
        blocks=(
            Block("double", 19, 86_400.0, 6_144.0, 120_000.0),
            Block("single", 38, 55_000.0, 6_144.0, 80_000.0),
        ),
    ),
)


def families(_facts: ArchFacts | None) -> FamilyLike:
    return FAMILY


def tree(
    *,
    train: dict[str, Any] | None = None,
    model: dict[str, Any] | None = None,
    dataset: dict[str, Any] | None = None,
    sample: dict[str, Any] | None = None,
    network: dict[str, Any] | None = None,
    arch: str = "flux",
) -> dict[str, Any]:
    """A LoRA job (rank 16, bf16, batch 1, 1024 px, checkpointing on, cached embeddings)."""
    found = job(
        arch=arch,
        train={
            "batch_size": 1,
            "dtype": "bf16",
            "optimizer": "adamw8bit",
            "gradient_checkpointing": True,
            "cache_text_embeddings": True,
            **(train or {}),
        },
        model={"quantize": False, **(model or {})},
        datasets=[{"resolution": [1024], "cache_latents_to_disk": True, **(dataset or {})}],
        sample=sample,
    )
    found["config"]["process"][0]["network"] = {"type": "lora", "linear": 16, **(network or {})}
    return found


def memory(
    config: dict[str, Any], kind: str = "image", calibration: Calibration | None = None
) -> JobMemory:
    return job_memory(document(config), [], kind, families=families, calibration=calibration)


def band(config: dict[str, Any], phase: str = "training") -> Band:
    found = memory(config).phases[phase]  # type: ignore[index]
    assert found is not None
    return found


def parts(config: dict[str, Any], phase: str = "training") -> dict[str, float]:
    return memory(config).parts[phase].as_dict()  # type: ignore[index]


# --- the values ---------------------------------------------------------------------------


def test_verdict_follows_the_band_edges() -> None:
    assert verdict(Band(10.0, 20.0), 20.0) == "fits"
    assert verdict(Band(10.0, 20.0), 19.9) == "tight"
    assert verdict(Band(10.0, 20.0), 10.0) == "tight"
    assert verdict(Band(10.0, 20.0), 9.9) == "wont_fit"


def test_every_phase_is_a_band_and_the_peak_is_the_highest() -> None:
    found = memory(tree(sample={"width": 1024, "height": 1024, "sample_every": 250}))
    bands = {phase: b for phase, b in found.phases.items() if b is not None}
    assert set(bands) == {"load", "baseline_sample", "training", "sample"}
    assert all(0 < b.low < b.high for b in bands.values())
    assert found.peak() == max(bands.values(), key=lambda b: b.high)
    assert found.known


def test_a_phase_that_does_not_happen_is_none() -> None:
    found = memory(tree(sample={"sample_every": 250}, train={"disable_sampling": True}))
    assert found.phases["baseline_sample"] is None and found.phases["sample"] is None
    skipped = memory(tree(sample={"sample_every": 250}, train={"skip_first_sample": True}))
    assert skipped.phases["baseline_sample"] is None and skipped.phases["sample"] is not None


def test_no_family_figures_is_not_known_and_says_so() -> None:
    found = job_memory(document(tree()), [], "image", families=lambda _facts: None)
    assert not found.known
    assert any("not measured" in note for note in found.notes)


# --- resident weights ---------------------------------------------------------------------


def test_weights_follow_dtype_and_qtype() -> None:
    full = parts(tree())["transformer"]
    assert full == pytest.approx(12.0e9 * 2 * 1.015 / 2**30, rel=0.01)
    quantized = parts(tree(model={"quantize": True, "qtype": "qfloat8"}))["transformer"]
    assert quantized < 0.6 * full
    uint4 = parts(tree(model={"quantize": True, "qtype": "uint4"}))["transformer"]
    assert uint4 < 0.6 * quantized


def test_quantizing_on_the_card_loads_block_by_block() -> None:
    # AI Toolkit's loader quantizes one block at a time on the card: the load peaks at the
    # final residency plus one block at full precision, never the whole bf16 model.
    quantized = memory(tree(model={"quantize": True}))
    low_vram = memory(tree(model={"quantize": True, "low_vram": True}))
    block = 12.0e9 / 57 * 2 / 2**30  # one of the fixture's 57 blocks, in bf16
    load, parts_load = quantized.phases["load"], quantized.parts["load"]
    assert load is not None and parts_load.transformer < 12.0e9 * 2 / 2**30 / 1.5
    residency = quantized.parts["training"].transformer
    assert parts_load.transformer == pytest.approx(residency + block, rel=0.02)
    assert low_vram.parts["load"].transformer == pytest.approx(residency, rel=0.02)


def test_comfy_weights_load_at_their_file_s_precision() -> None:
    comfy = memory(tree(model={"model_kwargs": {"use_comfy_weights": True}}))
    whole = memory(tree())
    assert comfy.parts["load"].transformer < 0.6 * whole.parts["load"].transformer
    assert comfy.parts["load"].transformer == pytest.approx(
        comfy.parts["training"].transformer, rel=1e-6
    )
    assert any("use_comfy_weights" in note for note in comfy.notes)


def test_layer_offloading_moves_the_transformer_off_the_card() -> None:
    setting = {"layer_offloading": True, "layer_offloading_transformer_percent": 0.5}
    offloaded = tree(arch="qwen_image", model=setting)
    whole = parts(tree(arch="qwen_image"))["transformer"]
    stays = 0.5 * (NON_BLOCK_SHARE + BLOCKS_IN_FLIGHT / 57)  # the fixture's 57 blocks
    assert parts(offloaded)["transformer"] == pytest.approx(whole * (0.5 + stays), rel=0.01)
    # Under 100 % offloading the modules outside the blocks and the blocks in flight stay.
    full = {**setting, "layer_offloading_transformer_percent": 1.0}
    assert parts(tree(arch="qwen_image", model=full))["transformer"] == pytest.approx(
        whole * (NON_BLOCK_SHARE + BLOCKS_IN_FLIGHT / 57), rel=0.01
    )
    # FLUX's offloading does not work in the toolkit: nothing moves.
    assert parts(tree(model=setting))["transformer"] == parts(tree())["transformer"]


# --- text encoder and VAE (issue 23's placement) -------------------------------------------


def test_cached_embeddings_free_the_text_encoder_for_training_and_samples() -> None:
    sample = {"sample_every": 250}
    uncached = tree(train={"cache_text_embeddings": False}, sample=sample)
    cached = tree(sample=sample)
    assert parts(uncached)["text_encoder"] > 9
    assert parts(cached)["text_encoder"] == 0
    assert parts(cached, "sample")["text_encoder"] == 0
    unloaded = tree(
        train={"cache_text_embeddings": False, "unload_text_encoder": True}, sample=sample
    )
    assert parts(unloaded)["text_encoder"] == 0 and parts(unloaded, "sample")["text_encoder"] > 9


def test_te_device_cpu_keeps_the_text_encoder_off_the_card() -> None:
    on_cpu = tree(train={"cache_text_embeddings": False}, model={"te_device": "cpu"})
    assert parts(on_cpu)["text_encoder"] == 0
    assert (
        parts(on_cpu, "load")["transformer"]
        < band(tree(train={"cache_text_embeddings": False}), "load").low
    )
    assert any("te_device" in note for note in memory(on_cpu).notes)


def test_vae_device_cpu_keeps_the_vae_off_the_card() -> None:
    uncached = {"cache_latents_to_disk": False}
    assert parts(tree(), "load")["vae"] > 0.1
    assert parts(tree(dataset=uncached))["vae"] > 0.1
    assert parts(tree(model={"vae_device": "cpu"}), "load")["vae"] == 0
    assert parts(tree(model={"vae_device": "cpu"}, dataset=uncached))["vae"] == 0


def test_cached_latents_leave_the_vae_in_system_ram_for_the_training_step() -> None:
    """AI Toolkit's training state puts the VAE on the CPU when every dataset's latents are
    cached (BaseSDTrainProcess.py:2514, sd_device_states_presets.py:47-49); a sample brings it
    back to decode."""
    sample = {"sample_every": 250}
    cached = tree(sample=sample)
    assert parts(cached)["vae"] == 0
    assert parts(cached, "sample")["vae"] > 0.1
    one_uncached = tree(sample=sample)
    datasets = one_uncached["config"]["process"][0]["datasets"]
    datasets.append({**datasets[0], "cache_latents_to_disk": False})
    assert parts(one_uncached)["vae"] > 0.1


@pytest.mark.parametrize(
    ("setting", "most"), [({"text_encoder_bits": 8}, 0.51), ({"te_dtype": "float8"}, 0.51)]
)
def test_text_encoder_bits_and_dtype_shrink_the_text_encoder(
    setting: dict[str, Any], most: float
) -> None:
    base = tree(train={"cache_text_embeddings": False})
    smaller = tree(train={"cache_text_embeddings": False}, model=setting)
    assert parts(smaller)["text_encoder"] <= most * parts(base)["text_encoder"]


# --- what trains (issue 23's LoKr / LoCon, EMA, a trained text encoder) ----------------------


def test_rank_and_optimizer_move_the_trained_state() -> None:
    small, big = parts(tree(network={"linear": 16})), parts(tree(network={"linear": 64}))
    assert big["trainable"] == pytest.approx(4 * small["trainable"], rel=0.01)
    adamw = parts(tree(train={"optimizer": "adamw"}))
    assert adamw["optimizer"] == pytest.approx(4 * small["optimizer"], rel=0.03)


def test_a_full_fine_tune_trains_every_weight() -> None:
    full = tree()
    del full["config"]["process"][0]["network"]
    found = parts(full)
    assert found["trainable"] == pytest.approx(12.0e9 * 2 / 2**30, rel=0.01)
    assert found["optimizer"] == pytest.approx(12.0e9 * 2 / 2**30, rel=0.01)  # adamw8bit


def test_lokr_is_counted_by_its_own_parameters() -> None:
    lora = parts(tree(network={"linear": 16}))["trainable"]
    auto = parts(tree(network={"type": "lokr", "lokr_factor": -1}))["trainable"]
    factor4 = parts(tree(network={"type": "lokr", "lokr_factor": 4}))["trainable"]
    # f = -1: about 2/d of each weight; f = 4: (d/4)² of d², a sixteenth of the model.
    assert auto < lora
    assert factor4 == pytest.approx(12.0e9 / 16 * 8 / 2**30, rel=0.01)


def test_locon_conv_rank_adds_its_adapters() -> None:
    lora = parts(tree(network={"linear": 16}))["trainable"]
    locon = parts(tree(network={"type": "locon", "linear": 16, "conv": 16}))["trainable"]
    assert locon == pytest.approx(2 * lora, rel=0.01)


def test_ema_keeps_a_second_copy_of_the_trained_weights() -> None:
    plain = parts(tree())["trainable"]
    ema = tree(train={"ema_config": {"use_ema": True}})
    assert parts(ema)["trainable"] == pytest.approx(1.5 * plain, rel=0.01)
    assert any("EMA" in note for note in memory(ema).notes)


def test_a_trained_text_encoder_stays_on_the_card_and_trains() -> None:
    plain = parts(tree())
    trained = parts(tree(train={"train_text_encoder": True}))
    assert plain["text_encoder"] == 0 and trained["text_encoder"] > 9
    assert trained["trainable"] > plain["trainable"] * 1.3


# --- activations --------------------------------------------------------------------------


def test_four_times_the_pixels_is_well_under_four_times_the_activations() -> None:
    # one batch item's own cost (ITEM_GIB) is the same at both sizes
    small = parts(tree(dataset={"resolution": [512]}))["activations"] - ITEM_GIB
    big = parts(tree(dataset={"resolution": [1024]}))["activations"] - ITEM_GIB
    assert 2.0 < big / small < 3.6


def test_the_peak_grows_much_less_than_the_pixels() -> None:
    small = band(tree(dataset={"resolution": [512]})).mid
    big = band(tree(dataset={"resolution": [1024]})).mid
    assert big / small < 1.4


def test_checkpointing_off_keeps_every_block_s_activations() -> None:
    on = parts(tree())["activations"]
    off = parts(tree(train={"gradient_checkpointing": False}))["activations"]
    assert off > 5 * on


def test_batch_multiplies_the_activations() -> None:
    one = parts(tree())["activations"]
    four = parts(tree(train={"batch_size": 4}))["activations"]
    assert four == pytest.approx(4 * one, rel=0.01)


def test_frames_add_tokens_for_a_video_model() -> None:
    still = parts(tree(arch="wan21", dataset={"resolution": [512], "num_frames": 1}), "training")
    clip = memory(tree(arch="wan21", dataset={"resolution": [512], "num_frames": 41}), "video")
    longer = memory(tree(arch="wan21", dataset={"resolution": [512], "num_frames": 81}), "video")
    assert clip.parts["training"].activations > 3 * still["activations"]
    step = longer.parts["training"].activations - clip.parts["training"].activations
    assert step > 0


def test_each_control_image_adds_its_tokens() -> None:
    none = parts(tree())["activations"]
    one = parts(tree(dataset={"control_path": "/data/control"}))["activations"]
    three = parts(tree(dataset={"control_path": ["/a", "/b", "/c"]}))["activations"]
    assert none < one < three
    assert three - one > 1.5 * (one - none)


@pytest.mark.parametrize("flag", ["diff_output_preservation", "blank_prompt_preservation"])
def test_a_preservation_pass_keeps_a_second_pass_of_activations(flag: str) -> None:
    plain = parts(tree())["activations"]
    doubled = parts(tree(train={flag: True}))["activations"]
    item = ITEM_GIB  # one batch item's own cost is not a pass's
    # The blocks' kept inputs count twice; the recomputed block's transient once.
    assert 1.2 * (plain - item) < doubled - item < 2.0 * (plain - item)


@pytest.mark.parametrize("flag", ["inverted_mask_prior", "do_prior_divergence"])
def test_a_prior_prediction_without_gradients_does_not_stack(flag: str) -> None:
    config = tree(train={flag: True})
    assert parts(config)["activations"] == parts(tree())["activations"]
    assert any("without gradients" in note for note in memory(config).notes)


def test_classifier_free_guidance_doubles_the_sample_pass() -> None:
    sample = {"width": 1024, "height": 1024, "sample_every": 250}
    distilled = parts(tree(sample={**sample, "guidance_scale": 4.0}), "sample")["activations"]
    cfg = parts(tree(arch="qwen_image", sample={**sample, "guidance_scale": 4.0}), "sample")[
        "activations"
    ]
    no_cfg = parts(tree(arch="qwen_image", sample={**sample, "guidance_scale": 1.0}), "sample")[
        "activations"
    ]
    assert cfg == pytest.approx(2 * no_cfg, rel=0.01)
    assert distilled == pytest.approx(no_cfg, rel=0.01)


def test_a_bigger_sample_raises_only_the_sample_phases() -> None:
    small = memory(tree(sample={"width": 512, "height": 512, "sample_every": 250}))
    big = memory(tree(sample={"width": 1536, "height": 1536, "sample_every": 250}))
    varying = [m.parts["sample"].activations + m.parts["sample"].vae_pass for m in (small, big)]
    assert varying[1] > 3 * varying[0]
    assert big.phases["training"] == small.phases["training"]


def shipped(config: dict[str, Any], kind: str = "image") -> JobMemory:
    """The memory with the shipped presets' families."""
    return job_memory(document(config), [], kind)


GPU_MID = 1.0  # the parts are the figures themselves: the band is around their sum
STAND_IN_MID = 1.0


def test_the_sample_is_the_larger_of_the_denoiser_s_pass_and_the_vae_decode() -> None:
    # FLUX at 1024²: the VAE decode (3.38 GiB on the H200) is five times the transformer's
    # pass; the phase holds the decode, not their sum.
    found = shipped(tree(sample={"width": 1024, "height": 1024, "sample_every": 250}))
    sample = found.parts["sample"]
    assert sample.activations == 0.0
    assert sample.vae_pass == pytest.approx(3.38 * GPU_MID, rel=0.01)


def test_a_video_vae_decodes_frame_by_frame() -> None:
    # Wan 2.1's VAE on the H200: 4.27 GiB for 33 frames at 480x832, 4.38 for 81: the peak
    # barely grows with the frames.
    def decode(frames: int) -> float:
        sample = {"width": 832, "height": 480, "num_frames": frames, "sample_every": 250}
        return shipped(tree(arch="wan21:1b", sample=sample), "video").parts["sample"].vae_pass

    assert decode(33) == pytest.approx(4.27 * GPU_MID, rel=0.03)
    assert decode(33) < decode(49) < decode(33) * 1.02


def test_uncached_latents_are_encoded_in_the_step() -> None:
    # SDXL's VAE (FLUX.1's figures stand in: 2.00 GiB at 1024²) is heavier than its UNet's
    # checkpointed step: the encode is the step's peak. While caching it runs with the VAE
    # alone on the card, below the loaded weights.
    uncached = shipped(tree(arch="sdxl", dataset={"cache_latents_to_disk": False}))
    assert uncached.parts["training"].vae_pass == pytest.approx(2.0 * STAND_IN_MID, rel=0.01)
    assert uncached.parts["training"].activations == 0.0
    cached = shipped(tree(arch="sdxl"))
    assert cached.parts["training"].vae_pass == 0.0
    assert cached.parts["load"].vae_pass == 0.0


# --- calibration --------------------------------------------------------------------------


def test_a_crash_floor_lifts_the_phase_to_it_and_carries_over_to_the_fix() -> None:
    config = tree()
    today = band(config)
    floor = today.low + 6.0
    calibration = Calibration("training", floor, None, 24.0, "PyTorch's OOM message")
    lifted = memory(config, calibration=calibration)
    assert lifted.phases["training"] is not None
    assert lifted.phases["training"].low == pytest.approx(floor, abs=0.05)
    assert lifted.scale > 1.0 and lifted.calibrated_by == calibration
    doc = document(config)
    batch = (
        job_memory(doc, [], "image", families=families, calibration=calibration)
        .parts["training"]
        .activations
    )
    from oom_wizard.formats.change import Change

    smaller = job_memory(
        doc,
        [
            Change(
                path=("config", "process", 0, "datasets", 0, "resolution"),
                after=[512],
                reason="t",
                step="top_bucket",
            )
        ],
        "image",
        families=families,
        calibration=calibration,
    )
    assert smaller.scale == pytest.approx(lifted.scale)
    assert smaller.parts["training"].activations < batch


def test_a_floor_far_above_the_estimate_is_a_fixed_amount_not_a_tenfold_factor() -> None:
    """A first sample that needed 30 GiB more than the model explains: the factor stops at its
    bound, the rest is held by both sample phases (and named), and the training step, which
    does not hold a sample's pipeline, keeps its own estimate at that bound."""
    config = tree(sample={"width": 1024, "height": 1024, "guidance_scale": 4.0})
    plain = memory(config)
    sample_band = plain.phases["baseline_sample"]
    assert sample_band is not None
    floor = sample_band.low + 30.0
    found = memory(
        config,
        calibration=Calibration("baseline_sample", floor, None, floor - 1.0, "a crash"),
    )
    assert found.scale == SCALE_RANGE[1]
    first, periodic, training = (found.phases[p] for p in ("baseline_sample", "sample", "training"))
    assert first is not None and periodic is not None and training is not None
    assert first.low == pytest.approx(floor, abs=0.05)
    extra = found.parts["baseline_sample"].unexplained
    assert 20.0 < extra < 30.0
    assert found.parts["sample"].unexplained == extra
    assert found.parts["training"].unexplained == 0.0
    today = plain.phases["training"]
    assert today is not None and training.high <= today.high * SCALE_RANGE[1]
    assert any("fixed amount in the first sample and periodic sample" in n for n in found.notes)


def test_a_loading_floor_above_the_estimate_stays_in_every_later_phase() -> None:
    """What the loaded model held beyond the estimate stays on the card through the run."""
    config = tree()
    load = memory(config).phases["load"]
    assert load is not None
    found = memory(config, calibration=Calibration("load", load.high + 20.0, None, None, "x"))
    extra = found.parts["load"].unexplained
    assert extra > 0.0 and found.parts["training"].unexplained == extra


def test_a_loading_floor_on_weights_alone_puts_no_factor_on_the_activations() -> None:
    """A load that holds only weights has nothing a factor could scale: what its floor needs
    is all held beyond the estimate, and the training step's activations stay as measured."""
    config = tree()
    plain = memory(config)
    load = plain.phases["load"]
    assert load is not None and plain.parts["load"].vae_pass == 0.0
    floor = load.low + 1.0
    found = memory(config, calibration=Calibration("load", floor, None, None, "x"))
    assert found.scale == 1.0
    assert found.parts["training"].activations == pytest.approx(plain.parts["training"].activations)
    assert found.parts["training"].unexplained == pytest.approx(1.0, abs=0.01)


def test_a_crash_while_caching_the_latents_is_the_encode_s_and_stays_there() -> None:
    """A crash the log shows while the latents were encoded (the VAE alone on the card) is
    fitted on that moment of the load: what it leaves unexplained is the encode's, not the
    loaded weights' nor any later phase's, as it is after a crash loading the weights."""
    config = tree()
    floor = band(config, "load").high + 5.0
    caching = memory(
        config, calibration=Calibration("load", floor, None, None, "x", moment="caching")
    )
    load = caching.parts["load"]
    assert load.transformer == 0.0 and load.vae_pass > 0.0 and load.unexplained > 0.0
    assert caching.parts["training"].unexplained == 0.0
    assert any("latents' encode while loading" in note for note in caching.notes)
    loaded = memory(
        config, calibration=Calibration("load", floor, None, None, "x", moment="loaded")
    )
    assert loaded.parts["load"].transformer > 0.0
    assert loaded.parts["training"].unexplained == pytest.approx(loaded.parts["load"].unexplained)
    assert loaded.parts["training"].unexplained > 0.0


def test_before_a_crash_while_caching_the_loaded_weights_were_within_the_card() -> None:
    # FLUX's loaded weights at 8 bits came before the encode that crashed on a 16 GiB card:
    # they fit it, so the load's band is the encode's moment, not the weights' high edge
    config = tree(model={"quantize": True})
    crash = Calibration("load", 16.5, None, 16.0, "x", moment="caching")
    assert band(config, "load").high > 16.0
    found = memory(config, calibration=crash)
    assert found.parts["load"].transformer == 0.0 and found.parts["load"].vae_pass > 0.0
    load = found.phases["load"]
    assert load is not None and load.low == pytest.approx(16.5)


def test_the_log_names_the_load_s_moment_of_its_crash(tmp_path: Path) -> None:
    lines = (DEMO / "flux_portrait_lora.log").read_text("utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Caching latents to disk"))
    log = tmp_path / "caching.log"
    log.write_text(
        "\n".join(
            [
                *lines[:start],
                "Caching latents to disk:  14%|#4        | 6/42 [00:02<00:14, 2.50it/s]",
                "Traceback (most recent call last):",
                '  File "/home/me/ai-toolkit/toolkit/dataloader_mixins.py", line 1972, in '
                "cache_latents_all_latents",
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has "
                "a total capacity of 23.54 GiB of which 2.10 GiB is free. Of the allocated memory "
                "20.60 GiB is allocated by PyTorch, and 0.20 GiB is reserved by PyTorch but "
                "unallocated.",
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    doc = load_document(DEMO / "flux_portrait_lora.yaml")
    found = calibration_from(diagnose(scan_log(log), doc.view(), answers=None), None)
    assert found is not None and found.phase == "load" and found.moment == "caching"
    assert found.as_json()["moment"] == "caching"
    assert calibration_from_json(found.as_json()) == found


def test_a_crash_floor_below_the_band_changes_nothing() -> None:
    config = tree()
    # The floor is the card's at least: 20 GiB lies under this job's band (23.7-33.0 GiB).
    calibration = Calibration("training", 1.0, None, 20.0, "PyTorch's OOM message")
    assert memory(config, calibration=calibration).phases == memory(config).phases


def test_a_measured_peak_outside_the_band_moves_its_midpoint_onto_it() -> None:
    config = tree()
    measured = band(config).high + 4.0
    found = memory(config, calibration=Calibration("training", None, measured, 80.0, "run"))
    assert found.phases["training"] is not None
    assert found.phases["training"].mid == pytest.approx(measured, abs=0.05)


def test_the_demo_crash_gives_its_floor() -> None:
    scan = scan_log(DEMO / "flux_portrait_lora.log")
    doc = load_document(DEMO / "flux_portrait_lora.yaml")
    found = calibration_from(diagnose(scan, doc.view(), answers=None), None)
    assert found is not None
    assert found.phase == "training"
    assert found.at_least_gib == pytest.approx(21.63 + 2.25, abs=0.01)
    assert found.card_gib == pytest.approx(23.54, abs=0.01)
    assert "line 173" in found.source


def test_a_run_s_measured_peak_is_read_from_its_attempts() -> None:
    attempts: list[dict[str, object]] = [
        {"outcome": "crashed"},
        {"outcome": "finished", "peak_gib": 21.5, "card_gib": 24.0},
    ]
    found = calibration_from_attempts(attempts)
    assert found is not None and found.measured_gib == 21.5 and "attempt 2" in found.source
    assert calibration_from_attempts([{"outcome": "finished"}]) is None


def test_the_shipped_presets_give_a_band_for_the_demo() -> None:
    doc: JobDocument = load_document(DEMO / "flux_portrait_lora.yaml")
    found = job_memory(doc, [], "image")
    assert found.peak_phase == "training" and found.peak().low > 24
    assert copy.deepcopy(found.phases_json())["training"] is not None


# --- issue 23's terms: eager attention, parameter swapping, validation, Wan's sampling ------

GIB = 2**30
MID_ACTIVATIONS = 1.0  # the parts are the figures themselves: the band is around their sum


def matrix_bytes(tokens: int, width: int = 3072) -> float:
    """One attention matrix: heads (width / 128) × tokens² in bf16 (levers.yaml's figures)."""
    return width / 128 * tokens * tokens * 2


def test_an_eager_backend_keeps_each_block_s_attention_matrix() -> None:
    tokens = (1024 // 16) ** 2 + 512  # FLUX at 1024 px: 4096 image tokens and 512 text tokens
    blocks = 19 + 38
    for checkpointing, matrices in ((False, blocks * 1 + 2), (True, 1 + 2)):
        train = {"gradient_checkpointing": checkpointing}
        flash = parts(tree(train=train))["activations"]
        eager = parts(tree(train={**train, "attention_backend": "_native_math"}))["activations"]
        expected = matrices * matrix_bytes(tokens) * MID_ACTIVATIONS / GIB
        assert eager - flash == pytest.approx(expected, abs=0.01)
    assert any(
        "is eager" in note for note in memory(tree(train={"attention_backend": "math"})).notes
    )
    assert parts(tree(train={"attention_backend": "flash"})) == parts(tree())


def test_an_eager_backend_weighs_on_the_sample_pass_too() -> None:
    sample = {"width": 1536, "height": 1536, "sample_every": 250}
    flash = parts(tree(sample=sample), "sample")
    eager = parts(tree(sample=sample, train={"attention_backend": "eager"}), "sample")
    assert flash["activations"] == 0.0  # the VAE decode is the larger with a flash kernel
    assert eager["activations"] > 3 * matrix_bytes(9216 + 512) / GIB > flash["vae_pass"]


def full_fine_tune(**train: Any) -> dict[str, Any]:
    config = tree(train=train)
    del config["config"]["process"][0]["network"]
    return config


def test_parameter_swapping_keeps_gradients_for_its_share_of_the_weights() -> None:
    whole = parts(full_fine_tune(optimizer="adafactor"))
    swapped = parts(full_fine_tune(optimizer="adafactor", do_paramiter_swapping=True))
    quarter = parts(
        full_fine_tune(
            optimizer="adafactor", do_paramiter_swapping=True, paramiter_swapping_factor=0.25
        )
    )
    assert whole["trainable"] == pytest.approx(12.0e9 * 2 / GIB, rel=0.01)
    assert swapped["trainable"] == pytest.approx(0.1 * whole["trainable"], rel=0.01)
    assert quarter["trainable"] == pytest.approx(0.25 * whole["trainable"], rel=0.01)
    # The weights stay on the card, and the optimizer state, once made, stays.
    assert swapped["transformer"] == whole["transformer"]
    assert swapped["optimizer"] == whole["optimizer"]


def test_parameter_swapping_with_an_optimizer_that_cannot_swap_changes_nothing() -> None:
    config = full_fine_tune(optimizer="adamw8bit", do_paramiter_swapping=True)
    assert parts(config) == parts(full_fine_tune(optimizer="adamw8bit"))
    assert any("needs the Adafactor or Automagic" in note for note in memory(config).notes)


def validation(**values: Any) -> dict[str, Any]:
    items = [{"image_path": "/val/0.png", "prompt": "a portrait"}]
    return {"validation_config": {"validation_items": items, **values}}


def test_validation_is_a_periodic_peak_even_without_samples() -> None:
    assert memory(tree(train={"disable_sampling": True})).phases["sample"] is None
    found = memory(tree(train={"disable_sampling": True, **validation(resolution=1024)}))
    assert found.phases["sample"] is not None and found.phases["baseline_sample"] is None
    assert any("validation pass (4 sigmas in one batch at 1024 px" in n for n in found.notes)


def test_each_validation_sigma_is_an_item_of_the_pass_s_batch() -> None:
    def act(**values: Any) -> float:
        config = tree(train={"disable_sampling": True, **validation(**values)})
        return memory(config).parts["sample"].activations

    four, one = act(resolution=1024), act(resolution=1024, validation_sigmas=[0.5])
    assert four == pytest.approx(4 * one, rel=1e-3)
    # a quarter of the image tokens, the same 512 text tokens: a third of the 1024 px pass
    assert act(resolution=512, validation_sigmas=[0.5]) == pytest.approx(one / 3, rel=0.01)


def test_the_heavier_of_validation_and_the_sample_sets_the_periodic_peak() -> None:
    sample = {"width": 512, "height": 512, "sample_every": 250, "guidance_scale": 1.0}
    light = parts(tree(sample=sample), "sample")["activations"]
    heavy = parts(tree(sample=sample, train=validation(resolution=1024)), "sample")
    assert heavy["activations"] > 4 * light
    small = parts(tree(sample=sample, train=validation(resolution=256, validation_sigmas=[1])))
    assert small == parts(tree(sample=sample))  # the training phase never sees it


def test_wan_s_low_vram_sampling_holds_the_text_encoder_only_while_it_encodes() -> None:
    def sample_parts(low_vram: bool) -> dict[str, float]:
        config = tree(
            arch="wan21:14b",
            model={"low_vram": low_vram},
            train={"cache_text_embeddings": False},
            sample={"width": 256, "height": 256, "num_frames": 1, "sample_every": 250},
        )
        return parts(config, "sample")

    held, unloaded = sample_parts(False), sample_parts(True)
    assert held["text_encoder"] > 0
    # The larger of encoder and activations counts, not their sum.
    assert unloaded["text_encoder"] + unloaded["activations"] == pytest.approx(
        max(held["text_encoder"], held["activations"]), rel=0.02
    )


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("Wan-AI/Wan2.1-T2V-14B-Diffusers", "wan21_14b"),
        ("Wan-AI/Wan2.1-T2V-1.3B-Diffusers", "wan21_1b"),
        ("/models/wan2.1_t2v_1_3b", "wan21_1b"),
        ("Wan-AI/Wan2.1-I2V-14B-480P-Diffusers", "wan21_14b"),
    ],
)
def test_the_generic_wan21_arch_takes_its_size_from_name_or_path(name: str, family: str) -> None:
    from oom_wizard.rules.catalog import load_presets

    presets = load_presets()
    arch = "wan21_i2v" if "I2V" in name else "wan21"
    config = tree(arch=arch, model={"name_or_path": name})
    found = job_memory(document(config), [], "video")
    assert found.known
    assert f"the size comes from model.name_or_path ({family}'s figures)" in " ".join(found.notes)
    if arch == "wan21":  # the same figures as the tagged id of that size
        tagged = f"wan21:{'1b' if family == 'wan21_1b' else '14b'}"
        same = job_memory(document(tree(arch=tagged, model={"name_or_path": name})), [], "video")
        assert same.phases == found.phases
    assert presets.memory_of(presets.arch(arch), name) is presets.memory_families[family]


@pytest.mark.parametrize("name", ["/models/my_wan", None])
def test_a_wan21_name_without_a_size_is_not_estimated(name: str | None) -> None:
    config = tree(arch="wan21", model={"name_or_path": name} if name else {})
    found = job_memory(document(config), [], "video")
    assert not found.known
    assert found.not_estimated is not None
    assert found.not_estimated.startswith("not estimated: model.arch wan21: the size (1.3B or 14B)")
    named = f"model.name_or_path {name!r} names none" if name else "no model.name_or_path"
    assert found.not_estimated.endswith(named)
    assert set(found.phases_json().values()) == {None}


# --- model.split_model_over_gpus (the shipped FLUX.1 figures: the split needs its block sizes)

DOUBLE, SINGLE = 339_831_296, 141_591_808
"""levers.yaml's FLUX.1 block sizes; the embedders and output layers make up the rest."""


def split(gpus: int, *, network: bool = True, **model: Any) -> JobMemory:
    """The LoRA job (or a full fine-tune) with the split on, as AI Toolkit accepts it."""
    config = tree(model={"is_flux": True, "split_model_over_gpus": True, **model})
    if not network:
        del config["config"]["process"][0]["network"]
        config["config"]["process"][0]["train"]["optimizer"] = "adafactor"
    return job_memory(document(config), [], "image", gpus=gpus)


def one_card(*, network: bool = True) -> JobMemory:
    config = tree(model={"is_flux": True})
    if not network:
        del config["config"]["process"][0]["network"]
        config["config"]["process"][0]["train"]["optimizer"] = "adafactor"
    return job_memory(document(config), [], "image")


def test_a_split_over_two_gpus_is_weighed_on_its_fullest_card() -> None:
    # AI Toolkit's rule: cuda:0 starts at 5e9 × 0.3 = 1.5e9; each card's share is
    # (11.901e9 + 1.5e9) / 2 = 6.70e9; 1.5e9 + 16 double blocks = 6.94e9 passes it, so 16 stay
    # on cuda:0 and cuda:1 takes 3 double and all 38 single blocks (6.40e9, the fuller card).
    whole, two = one_card(), split(2)
    assert any(
        "cuda:0 16 FluxTransformerBlock" in note
        and "cuda:1 3 FluxTransformerBlock + 38 FluxSingleTransformerBlock" in note
        for note in two.notes
    )
    card_1 = (3 * DOUBLE + 38 * SINGLE) / 11_901_408_320
    training, alone = two.parts["training"], whole.parts["training"]
    assert training.transformer == pytest.approx(alone.transformer * card_1, rel=0.01)
    # The adapter, its gradients and optimizer state, and the text encoder stay on cuda:0.
    assert training.trainable == 0.0 and training.optimizer == 0.0
    assert training.text_encoder == 0.0 and training.vae == 0.0
    assert 0.0 < training.activations < alone.activations
    for phase in ("load", "training"):
        assert two.phases[phase].high < whole.phases[phase].high  # type: ignore[union-attr]


def test_a_split_full_fine_tune_keeps_each_card_s_gradients_and_state_beside_its_weights() -> None:
    whole, two = one_card(network=False), split(2, network=False)
    card_1 = (3 * DOUBLE + 38 * SINGLE) / 11_901_408_320
    training, alone = two.parts["training"], whole.parts["training"]
    assert training.trainable == pytest.approx(alone.trainable * card_1, rel=0.01)
    assert training.optimizer == pytest.approx(alone.optimizer * card_1, rel=0.01)


def test_more_gpus_spread_the_blocks_further() -> None:
    two, four = split(2), split(4)
    assert four.peak().high < two.peak().high
    assert any("over 4 GPUs" in note and "cuda:3" in note for note in four.notes)


def test_the_split_s_scale_moves_the_first_card_s_share() -> None:
    # Scale 0: each card's share is 11.901e9 / 2 = 5.95e9; 18 double blocks pass it.
    found = split(2, split_model_other_module_param_count_scale=0.0)
    assert any("cuda:0 18 FluxTransformerBlock" in note for note in found.notes)


@pytest.mark.parametrize("gpus", [0, 1])
def test_with_one_gpu_or_none_the_split_is_counted_on_one_card_and_says_so(gpus: int) -> None:
    found = split(gpus)
    assert found.phases == one_card().phases
    assert any("one GPU is seen (or none was probed)" in note for note in found.notes)


def test_the_split_without_is_flux_is_refused_by_the_toolkit_and_counted_on_one_card() -> None:
    config = tree(model={"split_model_over_gpus": True})  # model.arch: flux alone
    found = job_memory(document(config), [], "image", gpus=2)
    assert found.phases == job_memory(document(tree()), [], "image").phases
    assert any("only with model.is_flux: true" in note for note in found.notes)


def test_the_split_of_another_arch_is_refused_and_counted_on_one_card() -> None:
    config = tree(arch="wan21:14b", model={"split_model_over_gpus": True})
    plain = job_memory(document(tree(arch="wan21:14b")), [], "video")
    found = job_memory(document(config), [], "video", gpus=2)
    assert found.phases == plain.phases
    assert any("splits only FLUX" in note for note in found.notes)


def test_a_split_lora_says_the_toolkit_leaves_its_adapter_on_the_first_card() -> None:
    assert any("AI Toolkit issue 1048" in note for note in split(2).notes)
    assert not any("AI Toolkit issue 1048" in note for note in split(2, network=False).notes)


# --- the control images' own size (archs.yaml's control_pixels)


def control_added(arch: str, side: int, **options: Any) -> float:
    """GiB of activations one control image adds at a ``side``² target, on the fixture blocks
    (their bytes grow in step with the tokens, so the difference is the control's tokens)."""
    model = {"model_kwargs": options.pop("model_kwargs")} if "model_kwargs" in options else {}
    dataset = {"resolution": [side], **options}

    def activations(control: dict[str, Any]) -> float:
        config = tree(arch=arch, model=model, dataset={**dataset, **control})
        return parts(config)["activations"]

    return activations({"control_path": "/data/control"}) - activations({})


def test_the_dataloader_gives_a_control_image_the_target_s_size() -> None:
    # flux_kontext takes the dataloader's crop: the control grows with the target.
    assert control_added("flux_kontext", 1024) == pytest.approx(
        4 * control_added("flux_kontext", 512), rel=0.05
    )


def test_full_size_control_images_off_gives_each_512_pixels_a_side() -> None:
    small = control_added("flux_kontext", 1024, full_size_control_images=False)
    assert small == pytest.approx(control_added("flux_kontext", 512), rel=0.02)
    found = memory(
        tree(arch="flux_kontext", dataset={"control_path": "/c", "full_size_control_images": False})
    )
    assert any("512 × 512" in note for note in found.notes)


def test_qwen_edit_plus_resizes_each_control_image_to_a_megapixel() -> None:
    # Whatever the target, each control image is VAE_IMAGE_SIZE (1024²) of area.
    at_512 = control_added("qwen_image_edit_plus", 512)
    assert at_512 == pytest.approx(control_added("qwen_image_edit_plus", 1024), rel=0.02)
    assert at_512 > 3 * control_added("flux_kontext", 512)
    config = tree(arch="qwen_image_edit_plus", dataset={"control_path": "/c"})
    assert any("resizes each control image to 1 MP" in note for note in memory(config).notes)


def test_match_target_res_gives_each_control_image_the_target_s_area() -> None:
    matched = control_added("qwen_image_edit_plus", 512, model_kwargs={"match_target_res": True})
    assert matched == pytest.approx(control_added("qwen_image_edit_plus", 1024) / 4, rel=0.05)


def test_a_capped_control_image_is_counted_at_its_cap_and_the_kwarg_moves_it() -> None:
    capped = control_added("flux2", 512)
    assert capped == pytest.approx(control_added("flux2", 1024), rel=0.02)
    assert capped > 3 * control_added("flux2", 512, model_kwargs={"match_target_res": True})
    quarter = {"control_image_max_pixels": 512 * 512}
    assert control_added("krea2:o_edit", 1024, model_kwargs=quarter) == pytest.approx(
        control_added("krea2:o_edit", 1024) / 4, rel=0.05
    )
    config = tree(arch="flux2", dataset={"control_path": "/c"})
    assert any("an upper bound" in note for note in memory(config).notes)


def test_an_eager_matrix_counts_the_family_s_own_heads() -> None:
    # SD3-medium: 24 heads of 64 channels (its published config), not 1536 / 128 = 12.
    def activations(backend: str) -> float:
        config = tree(
            arch="sd3",
            train={"attention_backend": backend},
            model={"name_or_path": "stabilityai/stable-diffusion-3-medium-diffusers"},
        )
        return job_memory(document(config), [], "image").parts["training"].activations

    tokens = (1024 // 16) ** 2 + 333  # 4096 image tokens and SD3's 333 text tokens
    matrix = 24 * tokens * tokens * 2
    expected = (1 + 2) * matrix * MID_ACTIVATIONS / GIB
    assert activations("_native_math") - activations("native") == pytest.approx(expected, rel=0.01)


# --- issue 29: facts before estimates, one calibration rule -------------------------------


def test_a_crash_below_the_card_still_puts_its_phase_at_the_card() -> None:
    config = tree()
    today = band(config)
    floor = Calibration("training", today.low / 2, None, today.low * 1.5, "a crash")
    found = memory(config, calibration=floor).phases["training"]
    assert found is not None and found.low >= today.low * 1.5  # never under the card


def test_a_phase_the_log_shows_passing_is_within_the_card() -> None:
    config = tree(sample={"width": 1024, "height": 1024, "sample_every": 250})
    today = memory(config)
    load = today.phases["load"]
    assert load is not None
    card = load.high - 1.0  # the estimate says loading may not fit; the log says it did
    facts = Calibration("training", load.high + 5, None, card, "a crash", passed=("load",))
    found = memory(config, calibration=facts)
    passed = found.phases["load"]
    assert passed is not None and passed.high <= card and verdict(passed, card) == "fits"
    crashed = found.phases["training"]
    assert crashed is not None and crashed.low >= load.high + 5


def test_the_log_says_which_phases_passed() -> None:
    doc = load_document(DEMO / "flux_portrait_lora.yaml")
    diagnosis = diagnose(scan_log(DEMO / "flux_portrait_lora.log"), doc.view(), answers=None)
    found = calibration_from(diagnosis, None)
    assert found is not None and found.phase == "training"
    assert found.passed == ("load", "baseline_sample")
    assert found.floor_gib == pytest.approx(23.88)


def test_a_measured_peak_is_a_point_the_band_is_centred_on() -> None:
    config = tree()
    today = band(config)
    point = Calibration("training", None, today.mid * 1.02, None, "a run")
    found = memory(config, calibration=point).phases["training"]
    assert found is not None and found.mid == pytest.approx(today.mid * 1.02, rel=1e-3)


def test_a_config_without_an_arch_is_ai_toolkit_s_sd1() -> None:
    config = tree(model={"name_or_path": "runwayml/stable-diffusion-v1-5"})
    del config["config"]["process"][0]["model"]["arch"]
    found = shipped(config)
    assert found.known and found.not_estimated is None
    assert any("sd1" in note for note in found.notes)
    assert verdict(found.peak(), 12.0) == "fits"  # an SD 1.5 LoRA on a 12 GB card


def test_a_job_type_the_model_does_not_cover_is_not_estimated() -> None:
    config = tree()
    config["config"]["process"][0]["type"] = "textual_inversion_trainer"
    found = shipped(config)
    assert found.not_estimated is not None and "job type" in found.not_estimated


def test_an_arch_ai_toolkit_does_not_know_is_a_load_error() -> None:
    found = shipped(tree(arch="not_an_arch"))
    assert found.not_estimated is not None and "while loading" in found.not_estimated


def test_bands_are_as_wide_as_their_figures_are_sure() -> None:
    checked = shipped(tree(arch="flux", train={"gradient_checkpointing": False}))
    cpu = shipped(tree(arch="krea2", train={"gradient_checkpointing": False}))
    stand_in = shipped(tree(arch="iris3b", train={"gradient_checkpointing": False}))
    assert (checked.certainty, cpu.certainty, stand_in.certainty) == ("gpu", "cpu", "stand_in")
    spread = [
        (m.phases["training"].high - m.phases["training"].low) / m.phases["training"].mid  # type: ignore[union-attr]
        for m in (checked, cpu, stand_in)
    ]
    assert spread[0] < spread[1] < spread[2]
    assert "checked on a GPU" in checked.basis() and "stand-in" in stand_in.basis()


def test_an_arch_counted_by_arithmetic_is_estimated_on_a_stand_in_block() -> None:
    # Z-Image L2P had no counts ("not estimated"); its transformer is counted from AI Toolkit's
    # own code now, and no block of it is measured: a stand-in band that says so.
    found = shipped(tree(arch="zimage_l2p", train={"gradient_checkpointing": True}))
    assert found.not_estimated is None and found.certainty == "stand_in"
    assert "stand-in" in found.basis()


OFFLOAD_FIGURES = OffloadMemory(
    resident_params=120_000_000,
    largest_layer_params=50_000_000,
    text_encoder_resident_params=400_000_000,
    source="x",
)
MEASURED = replace(FAMILY, offload=OFFLOAD_FIGURES)


def measured(config: dict[str, Any], phase: Phase = "training") -> Parts:
    """The phase's parts with the fixture family's offload figures."""
    return job_memory(document(config), [], "image", families=lambda _f: MEASURED).parts[phase]


def test_layer_offloading_leaves_what_ai_toolkit_s_manager_leaves() -> None:
    """The transformer's parameters outside its Linear and Conv2d layers and the unmoved share
    of those stay resident; the staging rings' copies of its largest layer are their own part:
    2 x 4 + 1 in a training step (the forward ring stays full through backward), 4 + 1 in a
    sample's pass (manager_modules.py: PIPELINE_DEPTH 4, a slot's weight replaced only after
    the next copy is made)."""
    whole = 12.0e9 * 2
    layer = 50_000_000 * 2
    for percent in (1.0, 0.5):
        setting = {"layer_offloading": True, "layer_offloading_transformer_percent": percent}
        config = tree(arch="qwen_image", model=setting, sample={"sample_every": 250})
        found = measured(config)
        resident = whole * (1 - percent * (1 - 0.01))
        assert found.transformer * 2**30 == pytest.approx(resident, rel=0.02), percent
        assert found.in_flight * 2**30 == pytest.approx(9 * layer, rel=1e-6), percent
        assert measured(config, "sample").in_flight * 2**30 == pytest.approx(5 * layer, rel=1e-6)
    # Without offloading nothing is staged.
    assert measured(tree(arch="qwen_image")).in_flight == 0.0


def test_a_quantized_layer_is_dequantized_into_its_slot_beside_its_stored_copy() -> None:
    """torchao and quanto weights are staged at their stored precision and dequantized on the
    card into the ring's slot (manager_modules.py:290-303): one stored copy is in flight beside
    the ring's compute-dtype copies."""
    setting = {"layer_offloading": True, "quantize": True, "qtype": "qfloat8"}
    found = measured(tree(arch="qwen_image", model=setting))
    assert found.in_flight * 2**30 == pytest.approx(9 * 100_000_000 + 50_000_000, rel=1e-6)


def test_ai_toolkit_s_own_quantizer_keeps_each_dequantized_layer_for_backward() -> None:
    """uint2-8, orbit and nvfp4 layers build their weight at the compute dtype at every forward
    and hand it to F.linear, which keeps it for the input's gradient (ostris_quant.py:66-72,
    uintx_quant.py:198-205): one recomputed block's layers with checkpointing, every layer
    without; offloaded or not. Offloaded, their ring holds codes (forward ring only)."""
    linear = 12.0e9 - 120_000_000
    block = linear / 57 * 2  # the fixture's 57 blocks, an even share
    model = {"quantize": True, "qtype": "uint4|ostris/some_adapter.safetensors"}
    resident = measured(tree(arch="qwen_image", model=model))
    assert resident.in_flight * 2**30 == pytest.approx(block, rel=0.02)
    no_checkpointing = tree(arch="qwen_image", model=model, train={"gradient_checkpointing": False})
    assert measured(no_checkpointing).in_flight * 2**30 == pytest.approx(linear * 2, rel=0.02)
    offloaded = measured(tree(arch="qwen_image", model={**model, "layer_offloading": True}))
    codes = 5 * 50_000_000 * 0.5
    assert offloaded.in_flight * 2**30 == pytest.approx(block + codes, rel=0.02)
    # A qtype the toolkit stages as a torchao or quanto weight keeps nothing of the kind.
    plain = measured(tree(arch="qwen_image", model={"quantize": True, "qtype": "qfloat8"}))
    assert plain.in_flight == 0.0


def test_an_accuracy_recovery_adapter_is_said_to_be_left_out() -> None:
    model = {"quantize": True, "qtype": "uint3|ostris/accuracy_recovery_adapters/x.safetensors"}
    found = memory(tree(arch="qwen_image", model=model))
    assert any("accuracy recovery adapter" in note for note in found.notes)
    plain = memory(tree(arch="qwen_image", model={"quantize": True, "qtype": "uint3"}))
    assert not any("accuracy recovery adapter" in note for note in plain.notes)


def test_text_encoder_offloading_leaves_its_embedding_on_the_card() -> None:
    """The memory manager moves the text encoder's Linear and Conv2d weights to system RAM and
    its other parameters (the token embedding above all) to the card, unquantized."""
    # qwen_image.py drops the encoder's vision tower (0.677 B) before it comes to the card
    moved = 4.9e9 - 0.677e9 - 400_000_000
    train = {"cache_text_embeddings": False}
    for percent in (1.0, 0.5):
        model = {"layer_offloading": True, "layer_offloading_text_encoder_percent": percent}
        found = measured(tree(arch="qwen_image", model=model, train=train))
        expected = moved * 2 * (1 - percent) + 400_000_000 * 2
        assert found.text_encoder * 2**30 == pytest.approx(expected, rel=0.02), percent
    # Quantized, the embedding stays at the encoder's dtype (quanto and torchao quantize
    # Linear and Conv2d weights only).
    quantized = {"layer_offloading": True, "quantize_te": True, "qtype_te": "qfloat8"}
    found = measured(tree(arch="qwen_image", model=quantized, train=train))
    assert found.text_encoder * 2**30 == pytest.approx(400_000_000 * 2, rel=0.02)
    # An arch without the figure says that part is not counted.
    unknown = memory(tree(arch="qwen_image", model={"layer_offloading": True}, train=train))
    assert unknown.parts["training"].text_encoder == 0.0
    assert any("token embedding) is not counted" in note for note in unknown.notes)


def test_an_offloaded_full_fine_tune_trains_the_moved_weights_in_system_ram() -> None:
    """Each moved weight's gradient is made on the card into a ring of 4 slots and copied to
    its pinned weight in system RAM (manager_modules.py:121-146, 394-411): the gradients and
    the optimizer's state of the moved weights leave the card with them."""
    resident = full_fine_tune(optimizer="adamw")
    resident["config"]["process"][0]["model"]["arch"] = "qwen_image"
    offloaded = copy.deepcopy(resident)
    offloaded["config"]["process"][0]["model"]["layer_offloading"] = True
    whole, found = measured(resident), measured(offloaded)
    on_card = 120_000_000 / 12.0e9  # the parameters outside the Linear and Conv2d layers
    assert found.trainable == pytest.approx(whole.trainable * on_card, rel=0.02)
    assert found.optimizer == pytest.approx(whole.optimizer * on_card, rel=0.02)
    rings = (9 + 4) * 50_000_000 * 2
    assert found.in_flight * 2**30 == pytest.approx(rings, rel=1e-6)


def test_a_pixel_space_model_has_no_vae_pass() -> None:
    """Iris-3B denoises pixels (no VAE): no encode while caching, no decode in a sample."""
    config = tree(
        arch="iris3b",
        sample={"width": 1024, "height": 1024},
        dataset={"cache_latents_to_disk": True},
    )
    found = job_memory(document(config), [], "image")
    for phase in ("load", "baseline_sample", "sample"):
        assert found.parts[phase].vae_pass == 0.0, phase
    assert found.parts["training"].transformer == pytest.approx(2.988e9 * 2 / 2**30, rel=0.02)


def test_a_fibo_lora_is_counted_from_its_own_family() -> None:
    """FIBO's LoRA at 1024 px on a 24 GiB card with the arch's UI defaults (both models
    quantized): the fibo family's counts and CPU-measured blocks, not nominal ones, and it fits;
    unquantized, the transformer is the family's 8.286 B at bf16."""
    doc = load_document(OWN_CONFIGS / "fibo_lora_24gb.yaml")
    found = job_memory(doc, [], "image")
    assert found.known and found.certainty == "cpu" and found.not_estimated is None
    assert not any("nominal" in note for note in found.notes), found.notes
    assert verdict(found.peak(), 24.0) == "fits"
    whole = copy.deepcopy(doc.tree)
    whole["config"]["process"][0]["model"].update(quantize=False, quantize_te=False)
    training = job_memory(document(whole), [], "image").parts["training"]
    assert training.transformer == pytest.approx(8.286e9 * 2 / 2**30, rel=0.02)
    assert training.text_encoder == pytest.approx(3.075e9 * 2 / 2**30, rel=0.02)


def test_a_cross_attention_block_saves_its_text_tokens_too() -> None:
    """A block that sees the image tokens and attends to the text by cross-attention (Wan,
    LTX-2, HiDream's double-stream blocks) saves memory.yaml's text_bytes_per_token for each
    text token: in every block without checkpointing, in the recomputed one with it."""
    assert FAMILY.activations is not None
    block = Block("cross", 40, 400_000.0, 10_240.0, 120_000.0, tokens="image")
    with_text = replace(block, text_bytes_per_token=80_000.0)

    def activations(chosen: Block, checkpointing: bool) -> float:
        assert FAMILY.activations is not None
        family = replace(FAMILY, activations=replace(FAMILY.activations, blocks=(chosen,)))
        config = tree(train={"gradient_checkpointing": checkpointing})
        found = job_memory(document(config), [], "image", families=lambda _f: family)
        return found.parts["training"].activations

    added = {
        checkpointing: activations(with_text, checkpointing) - activations(block, checkpointing)
        for checkpointing in (False, True)
    }
    assert added[True] > 0.0
    assert added[False] == pytest.approx(40 * added[True], rel=1e-6)
