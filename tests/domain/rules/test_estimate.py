"""Tests of ``oom_wizard.rules.estimate``: direction, and figures that follow from each step's
fields."""

from __future__ import annotations

from typing import Any

import pytest

from oom_wizard.errors import ConfigError
from oom_wizard.rules.catalog import MOMENTS
from oom_wizard.rules.estimate import CHECKPOINTING_OFF_FACTOR, MemoryEstimate, estimate
from oom_wizard.rules.plan import StepChoice, build_plan, changes_for
from oom_wizard.storage.changes import Change
from tests.support.plan_support import P0, document, job

HEAVY = job(
    arch="wan21:14b",
    train={"batch_size": 4, "steps": 3000, "gradient_checkpointing": False},
    datasets=[{"resolution": [512, 768, 1024], "num_frames": 81}],
    sample={"width": 1024, "height": 1024, "num_frames": 81, "sample_steps": 30},
)


def one_step(
    tree: dict[str, Any], step_id: str, moment: str = "early_steps", kind: str = "video"
) -> MemoryEstimate:
    doc = document(tree)
    plan = build_plan(doc, moment, kind)
    changes = changes_for(plan, {step_id: StepChoice(step_id, True)})
    return estimate(doc, changes, kind)


def test_no_changes_is_100_percent() -> None:
    figures = estimate(document(HEAVY), [], "video")
    assert (figures.train_pct, figures.sample_pct) == (100.0, 100.0)
    assert "approximate" in figures.note.lower()


def test_checkpointing_on_divides_by_its_factor() -> None:
    assert one_step(HEAVY, "gradient_checkpointing").train_pct == pytest.approx(
        100 / CHECKPOINTING_OFF_FACTOR, abs=0.1
    )


def test_batch_one_is_a_quarter_of_batch_four() -> None:
    assert one_step(HEAVY, "batch_size").train_pct == 25.0


def test_dropping_1024_leaves_768_squared() -> None:
    assert one_step(HEAVY, "top_bucket").train_pct == pytest.approx(100 * 768**2 / 1024**2, abs=0.1)


def test_half_the_frames_counts_latent_frames() -> None:
    # Wan: 4x temporal compression; 81 frames are 21 latent frames, 41 are 11.
    assert one_step(HEAVY, "num_frames", "intermittent").train_pct == pytest.approx(
        100 * 11 / 21, abs=0.1
    )


def test_an_unknown_arch_counts_frames_on_the_toolkits_fallback_grid() -> None:
    # No facts: temporal compression 8 (archs.yaml, unknown_arch); 81 -> 41 frames on 8n+1
    # are 11 -> 6 latent frames.
    tree = job(arch="not_an_arch", datasets=[{"resolution": 512, "num_frames": 81}])
    assert one_step(tree, "num_frames", "intermittent").train_pct == pytest.approx(
        100 * 6 / 11, abs=0.1
    )


def test_frames_do_not_count_for_an_image_model() -> None:
    doc = document(HEAVY)
    change = Change((*P0, "datasets", 0, "num_frames"), 41)
    assert estimate(doc, [change], "image").train_pct == 100.0


def test_lighter_samples_lower_the_sample_load_only() -> None:
    figures = one_step(HEAVY, "sampling", "sampling")
    # 1024x1024 -> 512x512 (video cap), 81 -> 41 frames (21 -> 11 latent frames).
    assert figures.train_pct == 100.0
    assert figures.sample_pct == pytest.approx(100 * (512 * 512 * 11) / (1024 * 1024 * 21), abs=0.1)


def test_disabled_sampling_is_zero_and_no_sample_section_is_none() -> None:
    doc = document(HEAVY)
    off = estimate(doc, [Change((*P0, "train", "disable_sampling"), True)], "video")
    assert off.sample_pct == 0.0
    assert estimate(document(job()), [], "image").sample_pct is None


def test_per_sample_overrides_count() -> None:
    tree = job(sample={"width": 512, "height": 512, "samples": [{"prompt": "x", "width": 1024}]})
    doc = document(tree)
    change = Change((*P0, "sample", "samples", 0, "width"), 512)
    assert estimate(doc, [change], "image").sample_pct == 50.0


def test_low_vram_does_not_move_the_activation_figures() -> None:
    figures = one_step(HEAVY, "low_vram")
    assert (figures.train_pct, figures.sample_pct) == (100.0, 100.0)


@pytest.mark.parametrize("moment", [m for m in MOMENTS if m != "environment"])
@pytest.mark.parametrize("kind", ["image", "video"])
def test_no_step_raises_the_estimate(moment: str, kind: str) -> None:
    doc = document(HEAVY)
    plan = build_plan(doc, moment, kind)
    for step in plan.steps:
        every_field = {f.key: True for f in step.fields}
        choice = {step.id: StepChoice(step.id, True, fields=every_field)}
        figures = estimate(doc, changes_for(plan, choice), kind)
        assert figures.train_pct <= 100.0, step.id
        assert figures.sample_pct is None or figures.sample_pct <= 100.0, step.id


def test_an_impossible_value_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="batch_size"):
        estimate(document(HEAVY), [Change((*P0, "train", "batch_size"), 0)], "video")


# --------------------------------------------------------------------------- weights

GIB = 1e9 / 2**30
# The exact counts of presets/memory.yaml (bench/calibrate_memory.py), in billions.
FLUX_T, FLUX_TE = 11.901, 4.885  # FLUX.1-dev; T5-XXL encoder + CLIP-L
QWEN_T = 20.43  # Qwen-Image
WAN_T = 14.288  # one Wan 2.2 A14B expert
FLUX_LORA = {"type": "lora", "linear": 16, "linear_alpha": 16}


def flux(model: dict[str, Any] | None = None, **train: Any) -> dict[str, Any]:
    tree = job(arch="flux", train={"batch_size": 1, "dtype": "bf16", **train}, model=model)
    tree["config"]["process"][0]["network"] = dict(FLUX_LORA)
    return tree


def weights(tree: dict[str, Any], changes: list[Change] | None = None) -> Any:
    figures = estimate(document(tree), changes or [], "image")
    assert figures.weights is not None
    return figures.weights


def lora(optimizer_bytes: float = 8.0, rank: int = 16) -> float:
    """LoRA weights, gradients and adamw state for FLUX (11.9B) at ``rank``, in GB."""
    return FLUX_T * 0.00065 * rank * (4 + 4 + optimizer_bytes)


def test_weights_count_transformer_text_encoder_and_the_lora() -> None:
    today = weights(flux(optimizer="adamw")).before
    # bf16: 11.9B × 2 + 4.9B × 2, and the LoRA in fp32 with adamw's two states.
    expected = FLUX_T * 2 + FLUX_TE * 2 + lora()
    assert today.training == pytest.approx(GIB * expected, rel=1e-6)
    assert today.sample == today.training


def test_absent_dtype_is_the_toolkits_fp32() -> None:
    tree = flux(optimizer="adamw")
    del tree["config"]["process"][0]["train"]["dtype"]
    expected = FLUX_T * 4 + FLUX_TE * 4 + lora()
    assert weights(tree).before.training == pytest.approx(GIB * expected, rel=1e-6)


def test_quantization_halves_bf16_weights_and_the_text_encoder_follows_quantize() -> None:
    change = Change(path=(*P0, "model", "quantize"), after=True, step="quantize", reason="q")
    after = weights(flux(optimizer="adamw"), [change]).after
    # quantize_te is absent, so it follows quantize: both to qfloat8, 1 byte.
    assert after.training == pytest.approx(GIB * (FLUX_T + FLUX_TE + lora()), rel=1e-6)


def test_quantizing_without_low_vram_loads_the_full_precision_model_first() -> None:
    quantized = flux({"quantize": True, "quantize_te": True}, optimizer="adamw")
    low = Change(path=(*P0, "model", "low_vram"), after=True, step="low_vram", reason="lv")
    figures = weights(quantized, [low])
    # The bf16 transformer sits on the GPU while it is quantized: 11.9B × 2 bytes.
    assert figures.before.load == pytest.approx(GIB * FLUX_T * 2, rel=1e-6)
    assert figures.after.load == pytest.approx(GIB * (FLUX_T + FLUX_TE), rel=1e-6)


def test_cached_embeddings_free_the_text_encoder_and_unloading_only_parks_it() -> None:
    cache = Change(path=(*P0, "train", "cache_text_embeddings"), after=True, step="t", reason="t")
    unload = Change(path=(*P0, "train", "unload_text_encoder"), after=True, step="t", reason="t")
    cached = weights(flux(optimizer="adamw"), [cache])
    parked = weights(flux(optimizer="adamw"), [unload])
    freed = cached.before.training - cached.after.training
    assert freed == pytest.approx(GIB * FLUX_TE * 2, rel=1e-6)
    assert cached.after.sample == cached.after.training
    assert parked.after.training == cached.after.training
    assert parked.after.sample == parked.before.sample  # back on the GPU for samples


def test_offloading_moves_its_share_off_the_gpu_where_the_arch_supports_it() -> None:
    half = {
        "layer_offloading": True,
        "layer_offloading_transformer_percent": 0.5,
        "layer_offloading_text_encoder_percent": 0.0,
    }
    on = job(arch="qwen_image", train={"dtype": "bf16"}, model=half)
    off = job(arch="qwen_image", train={"dtype": "bf16"})
    difference = weights(off).before.training - weights(on).before.training
    assert difference == pytest.approx(GIB * QWEN_T * 2 * 0.5, rel=1e-6)
    # FLUX.1 ignores layer offloading: nothing moves.
    ignored = flux(half, optimizer="adamw")
    assert weights(ignored).before.training == weights(flux(optimizer="adamw")).before.training


def test_low_vram_keeps_the_idle_wan22_expert_on_the_cpu() -> None:
    tree = job(arch="wan22_14b:t2v", train={"dtype": "bf16", "cache_text_embeddings": True})
    low = Change(path=(*P0, "model", "low_vram"), after=True, step="low_vram", reason="lv")
    figures = weights(tree, [low])
    expert = GIB * WAN_T * 2
    assert figures.before.training - figures.after.training == pytest.approx(expert, rel=1e-6)


def test_rank_and_the_8bit_optimizer_lower_the_training_weights() -> None:
    rank = Change(path=(*P0, "network", "linear"), after=8, step="lora_rank", reason="r")
    eight = Change(path=(*P0, "train", "optimizer"), after="adamw8bit", step="o", reason="o")
    base = weights(flux(optimizer="adamw")).before.training
    assert base - weights(flux(optimizer="adamw"), [rank]).after.training == pytest.approx(
        GIB * (lora() - lora(rank=8)), rel=1e-6
    )
    assert base - weights(flux(optimizer="adamw"), [eight]).after.training == pytest.approx(
        GIB * (lora() - lora(2.0)), rel=1e-6
    )


def test_an_arch_without_counts_gives_a_direction_but_no_gib() -> None:
    tree = job(arch="brand_new", train={"dtype": "bf16"})
    change = Change(path=(*P0, "model", "quantize"), after=True, step="quantize", reason="q")
    figures = estimate(document(tree), [change], "image")
    assert figures.lowers("early_steps")
    assert figures.weights_gib("early_steps") == (None, None)
    assert "unknown" in figures.note


@pytest.mark.parametrize(
    ("moment", "change", "lowers"),
    [
        ("early_steps", ("train", "batch_size", 1), True),
        ("early_steps", ("sample", "width", 512), False),
        ("sampling", ("sample", "width", 512), True),
        ("sampling", ("train", "batch_size", 1), False),
        ("loading", ("train", "disable_sampling", True), True),
        ("loading", ("train", "batch_size", 1), False),
        ("intermittent", ("model", "quantize", True), True),
    ],
)
def test_lowers_names_the_peak_of_the_moment(
    moment: str, change: tuple[str, str, Any], lowers: bool
) -> None:
    tree = flux(optimizer="adamw", batch_size=4)
    tree["config"]["process"][0]["sample"] = {"width": 1024, "height": 1024}
    section, key, value = change
    edit = Change(path=(*P0, section, key), after=value, step="x", reason="x")
    assert estimate(document(tree), [edit], "image").lowers(moment) is lowers
