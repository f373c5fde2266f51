"""Tests of ``oom_wizard.rules.values``: the checks a typed value gets before a step may use it."""

from __future__ import annotations

from typing import Any

import pytest

from oom_wizard.rules.catalog import load_presets
from oom_wizard.rules.plan import StepChoice, build_plan, changes_for
from oom_wizard.rules.values import validate_value
from tests.support.plan_support import P0, document, job

PRESETS = load_presets()
WAN = PRESETS.arch("wan21:14b")
LTX = PRESETS.arch("ltx2")
FLUX = PRESETS.arch("flux")


@pytest.mark.parametrize(
    ("field", "typed", "arch", "reason"),
    [
        ("sample.width", "6", FLUX, "below the smallest sensible value, 64"),
        ("sample.width", "5000", FLUX, "above the largest sensible value, 4096"),
        ("sample.width", "1000", FLUX, "not a multiple of 32; use 992 or 1024"),
        ("sample.height", "500", WAN, "not a multiple of 16; use 496 or 512"),
        ("sample.width", "12.5", FLUX, "'12.5' is not a whole number"),
        ("sample.width", "wide", FLUX, "'wide' is not a whole number"),
        ("sample.width", "", FLUX, "a number is needed"),
        ("datasets[].num_frames", "40", WAN, "off the model's frame grid (4n+1); use 37 or 41"),
        ("sample.num_frames", "100", LTX, "(8n+1); use 97 or 105"),
        ("model.layer_offloading_transformer_percent", "1.5", WAN, "above the largest"),
        ("train.batch_size", "0", None, "below the smallest sensible value, 1"),
        ("train.batch_size", True, None, "not true or false"),
    ],
)
def test_invalid_values_say_why(field: str, typed: Any, arch: Any, reason: str) -> None:
    check = validate_value(field, typed, arch)
    assert not check.ok and check.value is None
    assert check.reason is not None and reason in check.reason


def test_a_valid_value_is_parsed_in_its_kind() -> None:
    assert validate_value("sample.width", " 768 ", FLUX).value == 768
    assert validate_value("config.process[0].sample.width", 768, FLUX).value == 768
    assert validate_value("datasets[].num_frames", "41", WAN).value == 41
    assert validate_value("model.layer_offloading_text_encoder_percent", "0.5", WAN).value == 0.5
    assert validate_value("train.optimizer", "adamw8bit", None).value == "adamw8bit"
    # An unknown arch uses the toolkit's fallbacks: size step 16, frames 8n+1.
    assert validate_value("sample.width", "528", None).ok
    assert not validate_value("sample.num_frames", "43", None).ok


def test_a_heavier_value_in_a_rollback_needs_a_confirmation() -> None:
    up = validate_value("sample.width", "4096", FLUX, before=1024)
    assert up.ok and up.increase and up.needs_confirmation
    assert up.reason is not None and "above today's 1024" in up.reason and "confirm" in up.reason
    down = validate_value("sample.width", "768", FLUX, before=1024)
    assert down.ok and not down.increase and down.reason is None
    rarer = validate_value("sample.sample_every", "100", None, before=250)
    assert rarer.increase and rarer.reason is not None and "below today's 250" in rarer.reason
    scale_up = validate_value("train.batch_size", "4", None, before=1, direction="scale_up")
    assert scale_up.increase and not scale_up.needs_confirmation
    assert not validate_value("train.steps", "5000", None, before=100).increase


def test_turning_a_thing_off_never_weighs_more_and_turning_it_on_does() -> None:
    # sample_every: a lower value samples more often (heavier), but 0 samples never.
    off = validate_value("sample.sample_every", "0", None, before=250)
    assert off.ok and off.value == 0 and not off.increase and off.reason is None
    on = validate_value("sample.sample_every", "250", None, before=0)
    assert on.increase and on.needs_confirmation
    assert on.reason is not None and "250 turns on what today's 0 leaves off" in on.reason
    assert not validate_value("sample.sample_every", "0", None, before=0).increase


def test_a_field_without_rules_is_passed_through() -> None:
    check = validate_value("train.lr", "1e-4", None)
    assert check.ok and check.value == "1e-4"


def test_an_edited_increase_is_logged_as_one() -> None:
    tree = job(sample={"width": 1024, "height": 1024})
    plan = build_plan(document(tree), "sampling", "image")
    key = "config.process[0].sample.width"
    choice = StepChoice("sampling", True, values={key: 1280})
    change = next(c for c in changes_for(plan, {"sampling": choice}) if c.path[-1] == "width")
    assert change.path == (*P0, "sample", "width") and change.after == 1280
    assert "an increase: 1024 → 1280, confirmed" in change.reason
    lower = StepChoice("sampling", True, values={key: 512})
    change = next(c for c in changes_for(plan, {"sampling": lower}) if c.path[-1] == "width")
    assert "increase" not in change.reason
