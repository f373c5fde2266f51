"""Tests of ``oom_wizard.rules.estimate``: a view of the one memory model, before and after
the changes (the bands, the weights held, the relative figures and which peak goes down)."""

from __future__ import annotations

from typing import Any

import pytest

from oom_wizard.errors import ConfigError
from oom_wizard.rules.catalog import MOMENTS
from oom_wizard.rules.estimate import MemoryEstimate, estimate
from oom_wizard.rules.memory import Calibration, job_memory
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
    assert "memory model" in figures.note


def test_every_figure_is_the_memory_models() -> None:
    doc = document(HEAVY)
    plan = build_plan(doc, "early_steps", "video")
    changes = changes_for(plan, {"batch_size": StepChoice("batch_size", True)})
    figures = estimate(doc, changes, "video")
    before, after = figures.gib
    assert before == job_memory(doc, [], "video")
    assert after.phases == job_memory(doc, changes, "video").phases
    activations = [m.parts["training"].activations for m in (before, after)]
    assert figures.train_pct == pytest.approx(100 * activations[1] / activations[0], abs=0.1)


def test_the_calibration_weighs_today_and_the_changes_alike() -> None:
    doc = document(HEAVY)
    today = job_memory(doc, [], "video").phases["training"]
    assert today is not None
    floor = Calibration("training", today.low * 2, None, 24.0, "a test")
    change = Change((*P0, "train", "batch_size"), 1)
    figures = estimate(doc, [change], "video", calibration=floor)
    before, after = figures.gib
    assert before.peak().low == pytest.approx(today.low * 2, rel=1e-3)
    assert after.scale == before.scale > 1.0


def test_checkpointing_on_lowers_the_training_activations() -> None:
    assert one_step(HEAVY, "gradient_checkpointing").train_pct < 25.0


def test_batch_one_is_a_quarter_of_batch_four() -> None:
    assert one_step(HEAVY, "batch_size").train_pct == 25.0


def test_dropping_1024_lowers_the_training_step() -> None:
    figures = one_step(HEAVY, "top_bucket")
    assert 100 * 512**2 / 1024**2 < figures.train_pct < 100.0


def test_frames_do_not_count_for_an_image_model() -> None:
    doc = document(HEAVY)
    change = Change((*P0, "datasets", 0, "num_frames"), 41)
    assert estimate(doc, [change], "image").train_pct == 100.0


def test_lighter_samples_lower_the_sample_load_only() -> None:
    figures = one_step(HEAVY, "sampling", "sampling")
    assert figures.train_pct == 100.0
    assert figures.sample_pct is not None and figures.sample_pct < 100.0


def test_disabled_sampling_is_zero_and_no_sample_section_is_none() -> None:
    doc = document(HEAVY)
    off = estimate(doc, [Change((*P0, "train", "disable_sampling"), True)], "video")
    assert off.sample_pct == 0.0
    assert estimate(document(job()), [], "image").sample_pct is None


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
        if step.id == "layer_offloading":
            # Each offloaded layer keeps its own input for backward (AI Toolkit's
            # _BouncingLinearFn saves it): more activations, the weights off the card.
            before, after = figures.gib
            assert after.parts["training"].transformer < before.parts["training"].transformer
            continue
        assert figures.train_pct <= 100.0, step.id
        assert figures.sample_pct is None or figures.sample_pct <= 100.0, step.id


def test_an_impossible_value_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="batch_size"):
        estimate(document(HEAVY), [Change((*P0, "train", "batch_size"), 0)], "video")


# --------------------------------------------------------------------------- which peak

FLUX_LORA = {"type": "lora", "linear": 16, "linear_alpha": 16}


def flux(model: dict[str, Any] | None = None, **train: Any) -> dict[str, Any]:
    tree = job(arch="flux", train={"batch_size": 1, "dtype": "bf16", **train}, model=model)
    tree["config"]["process"][0]["network"] = dict(FLUX_LORA)
    return tree


def test_the_weights_held_are_the_model_s_parts_beside_activations_and_overhead() -> None:
    change = Change(path=(*P0, "model", "quantize"), after=True, step="quantize", reason="q")
    figures = estimate(document(flux(optimizer="adamw")), [change], "image")
    before, after = figures.weights_gib("early_steps")
    parts = figures.gib[0].parts["training"]
    assert before == round(parts.weights, 1)
    assert before is not None and after is not None and after < before


@pytest.mark.parametrize(
    ("arch", "why"),
    [
        ("brand_new", "'brand_new' is not an arch AI Toolkit knows"),
        ("ming_image", "the parameter counts of Ming-Image (model.arch ming_image) are not known"),
        ("sd3", "model.arch sd3: the size follows name_or_path"),
    ],
)
def test_an_arch_without_counts_gives_a_direction_but_no_gib(arch: str, why: str) -> None:
    tree = job(arch=arch, train={"dtype": "bf16"})
    tree["config"]["process"][0]["model"]["name_or_path"] = "/models/mine"
    change = Change(path=(*P0, "model", "quantize"), after=True, step="quantize", reason="q")
    figures = estimate(document(tree), [change], "image")
    assert figures.lowers("early_steps")
    assert figures.weights_gib("early_steps") == (None, None)
    assert figures.not_estimated is not None and why in figures.not_estimated
    assert figures.note.startswith("No GiB from the memory model")


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
