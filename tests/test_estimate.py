"""Tests of ``wizard.estimate``: direction, and figures that follow from each step's fields."""

from __future__ import annotations

from typing import Any

import pytest

from tests.plan_support import P0, document, job
from wizard.changes import Change
from wizard.errors import ConfigError
from wizard.estimate import CHECKPOINTING_OFF_FACTOR, MemoryEstimate, estimate
from wizard.plan import StepChoice, build_plan, changes_for
from wizard.presets import MOMENTS

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
