"""A fix that takes a step past its default rung: every front end that takes the default
fix takes the step at that rung (the review, ``run --auto``'s preselection, the step screen's
starting values), and a step accepted as shown follows the fix picked in the review."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

from oom_wizard.application.choosing import (
    choose,
    default_choice,
    preselect_fix,
    review,
)
from oom_wizard.application.settling import WizardState, start
from oom_wizard.formats.document import MISSING
from oom_wizard.request import JobRequest
from oom_wizard.rules.plan import build_plan

CONFIGS = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "configs"
PERCENT = "config.process[0].model.layer_offloading_transformer_percent"


def klein_on_12_gib(tmp_path: Path) -> WizardState:
    """FLUX.2 Klein as the web UI makes it, its plan sized against a 12 GiB card."""
    config = tmp_path / "klein.yaml"
    shutil.copyfile(CONFIGS / "klein9b_ui_defaults.yaml", config)
    state = start(JobRequest(target=config, probe=False))
    plan = build_plan(state.document, "early_steps", "image", card_gib=12.0)
    return replace(state, settled=replace(state.settled, plan=plan))


def saved_percent(state: WizardState, fix: str) -> object:
    ready = review(state, fix).ready  # type: ignore[arg-type]
    return next((e.after for e in ready.entries if e.path == PERCENT), MISSING)


def test_the_review_run_auto_and_the_step_screen_take_the_fix_s_rung(tmp_path: Path) -> None:
    state = klein_on_12_gib(tmp_path)
    plan = state.plan
    assert plan.default_fix == "just_enough" and plan.fix_rungs["just_enough"]
    assert saved_percent(state, "just_enough") == 1.0
    step = plan.step("layer_offloading")
    assert step is not None
    assert default_choice(state, step).values[PERCENT] == 1.0  # the step screen's start
    auto = preselect_fix(state, 0).choices["layer_offloading"]  # what run --auto saves
    assert auto.enabled and auto.values[PERCENT] == 1.0


def test_a_step_accepted_at_the_fix_s_rung_follows_the_fix_picked(tmp_path: Path) -> None:
    state = klein_on_12_gib(tmp_path)
    step = state.plan.step("layer_offloading")
    assert step is not None
    shown = default_choice(state, step)  # accepted as the step screen shows it
    accepted = choose(state, replace(shown, fields={f.key: True for f in step.fields}))
    assert "layer_offloading" not in state.plan.fix_steps("safe")
    assert saved_percent(accepted, "safe") is MISSING
    assert saved_percent(accepted, "just_enough") == 1.0
