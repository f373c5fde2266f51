"""The default fix takes first what costs no quality, then the fewest rungs that cover the
deficit the crash's own figures give (issue 18 item 6)."""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path

import pytest
import yaml

from oom_wizard.application.choosing import (
    answer,
    choose,
    chosen_fix,
    chosen_fix_names,
    chosen_fix_words,
    default_choice,
    default_choices,
    effective_choices,
    preselect_fix,
)
from oom_wizard.application.fitting import fit
from oom_wizard.application.saving import SaveResult, ToFile, save
from oom_wizard.application.settling import JobCard, WizardState, start
from oom_wizard.formats.document import JobDocument, load_document
from oom_wizard.request import JobRequest
from oom_wizard.rules.diagnosis import Answers
from oom_wizard.rules.estimate import estimate
from oom_wizard.rules.memory import Calibration
from oom_wizard.rules.plan import Plan, StepChoice, build_plan, changes_for
from oom_wizard.rules.sizing import MARGIN_SHARE, FixName
from oom_wizard.screens.toggles import Choice
from tests.support.plan_support import cli, document as plan_document, job

DEMO = Path(__file__).resolve().parents[3] / "presets" / "demo"


def demo_state(moment: str, tmp_path: Path) -> WizardState:
    for name in ("flux_portrait_lora.yaml", "flux_portrait_lora.log"):
        (tmp_path / name).write_bytes((DEMO / name).read_bytes())
    request = JobRequest(
        target=tmp_path / "flux_portrait_lora.yaml",
        log=tmp_path / "flux_portrait_lora.log",
        probe=False,
    )
    state = start(request)
    return answer(state, Answers(moment=moment))  # type: ignore[arg-type]


@pytest.mark.parametrize("moment", ["intermittent", "early_steps"])
def test_the_demo_told_intermittent_gets_checkpointing_on_by_default(
    moment: str, tmp_path: Path
) -> None:
    state = demo_state(moment, tmp_path)
    fixes: tuple[FixName | None, ...] = ("safe", None)
    for fix in fixes:
        chosen = default_choices(state, fix)
        assert chosen["gradient_checkpointing"].enabled, fix


def test_the_demos_crash_sizes_a_just_enough_fix_that_is_the_default(tmp_path: Path) -> None:
    plan = demo_state("early_steps", tmp_path).plan
    assert plan.default_fix == "just_enough"
    # Checkpointing alone leaves the step at 19.7-24.3 GiB on the 23.5 GiB card: the batch
    # of one item is the next rung that makes it fit with the margin.
    assert plan.fixes["just_enough"] == ("gradient_checkpointing", "batch_size")
    assert set(plan.fixes["safe"]) == {"gradient_checkpointing", "batch_size", "top_bucket"}
    sizing = plan.sizing
    assert sizing is not None and sizing.calibrated and sizing.covered
    assert sizing.card_gib == pytest.approx(23.54)
    assert sizing.deficit_gib == pytest.approx(21.63 + 2.25 - 23.54)
    assert sizing.margin_gib == pytest.approx(MARGIN_SHARE * 23.54)
    predicted = sizing.predicted("just_enough")
    assert predicted.high <= sizing.card_gib
    assert predicted.mid <= sizing.card_gib - sizing.margin_gib
    # The steps shown keep the seed's order; only their toggles follow the fix.
    assert [s.id for s in plan.steps if s.default_on] == ["gradient_checkpointing", "batch_size"]


def test_the_demo_told_intermittent_sizes_its_fix_on_the_same_model(tmp_path: Path) -> None:
    plan = demo_state("intermittent", tmp_path).plan
    sizing = plan.sizing
    assert sizing is not None and sizing.calibrated and sizing.covered
    assert "gradient_checkpointing" in plan.fixes["just_enough"]
    assert sizing.predicted("just_enough").high <= sizing.card_gib


def test_without_the_crashs_figures_the_safe_set_is_the_default(tmp_path: Path) -> None:
    source = tmp_path / "flux_portrait_lora.yaml"
    source.write_bytes((DEMO / source.name).read_bytes())
    document = load_document(source)
    plan = build_plan(document, "intermittent", "image")
    assert plan.default_fix == "safe" and plan.sizing is None and set(plan.fixes) == {"safe"}
    assert plan.step("gradient_checkpointing").default_on  # type: ignore[union-attr]
    # A known card (the probe's) sizes "just enough" too, but it is not the default.
    sized = build_plan(document, "intermittent", "image", card_gib=80.0)
    assert sized.default_fix == "safe" and "just_enough" in sized.fixes
    assert sized.sizing is not None and not sized.sizing.calibrated
    assert [s.id for s in sized.steps if s.default_on] == list(sized.fixes["safe"])


def test_one_rule_of_the_defaults_for_the_cli_the_app_and_run(tmp_path: Path) -> None:
    state = demo_state("intermittent", tmp_path)
    rule = default_choices(state)
    undecided = effective_choices(state)
    assert {k: c.enabled for k, c in undecided.items()} == {k: c.enabled for k, c in rule.items()}
    assert changes_for(state.plan) == changes_for(state.plan, rule)
    preselected = preselect_fix(state, 0)
    assert {k: c.enabled for k, c in preselected.choices.items()} == {
        k: c.enabled for k, c in rule.items() if k != "validation_run"
    }


def test_naming_the_safe_fix_moves_the_steps_accepted_as_they_were(tmp_path: Path) -> None:
    state = demo_state("early_steps", tmp_path)
    steps = state.rollback_steps()
    for step in steps:  # every step accepted with its defaults, as Enter on each screen does
        state = choose(state, default_choice(state, step))
    safe = effective_choices(state, fix="safe")
    assert {k for k, c in safe.items() if c.enabled} == set(state.plan.fixes["safe"])
    # A step the user changed stays as the user left it.
    state = choose(state, StepChoice("top_bucket", enabled=False, fields={}, values={}))
    changed = choose(state, StepChoice("batch_size", enabled=True))
    kept = effective_choices(changed, fix="safe")
    assert kept["batch_size"].enabled and kept["top_bucket"].enabled


def test_apply_takes_just_enough_by_default_and_the_safe_set_with_safe(tmp_path: Path) -> None:
    for name in ("flux_portrait_lora.yaml", "flux_portrait_lora.log"):
        (tmp_path / name).write_bytes((DEMO / name).read_bytes())
    source, log = tmp_path / "flux_portrait_lora.yaml", tmp_path / "flux_portrait_lora.log"
    args = ("--log", log, "--moment", "early_steps", "--no-probe", "--dry-run")
    status, out, err = cli("apply", source, *args)
    assert status == 0, err
    assert "Applying least loss: 2 steps (gradient_checkpointing, batch_size), training peak" in out
    assert "gradient_checkpointing: false → true" in out and "resolution" not in out
    status, out, err = cli("apply", source, *args, "--safe")
    assert status == 0, err
    assert "Applying more margin: 3 steps (gradient_checkpointing, batch_size, top_bucket)" in out
    assert "resolution: [512, 768, 1024] → [512, 768]" in out
    status, out, _ = cli("plan", source, *args[:-1], "--json")
    data = json.loads(out)
    assert data["default_fix"] == "just_enough"
    assert data["fixes"] == {
        "just_enough": ["gradient_checkpointing", "batch_size"],
        "safe": ["gradient_checkpointing", "batch_size", "top_bucket"],
    }
    assert data["sizing"]["calibrated"] is True and data["sizing"]["phase"] == "training"


async def test_the_review_offers_just_enough_and_the_safe_set_by_keyboard(
    tmp_path: Path,
) -> None:
    from textual.widgets import RadioSet

    from tests.support.app_support import (
        accept_steps,
        demo_app,
        demo_folder,
        press,
        save_from_review,
        wait_for_screen,
        wait_for_state,
    )

    folder = demo_folder(tmp_path)
    app = demo_app(folder)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for_state(pilot)
        await press(pilot, "enter", "enter")
        await accept_steps(pilot)
        await wait_for_screen(pilot, "ReviewScreen")
        fixes = app.screen.query_one("#fix", RadioSet)
        labels = [str(button.label) for button in fixes.query(Choice)]
        assert labels[0].startswith("least loss: 2 steps, peak ≈ ")
        assert labels[0].endswith(" (default)") and " of 23.5 GiB (" in labels[0]
        assert labels[1].startswith("more margin: 3 steps, peak ≈ ")
        hint = str(app.screen.query("#fixes Static").last().render())
        assert "least loss: Gradient checkpointing on, Batch size to 1" in hint
        assert "more margin: Gradient checkpointing on, Batch size to 1, Drop the biggest" in hint
        for _ in range(12):  # Tab until the choice of fix has the focus
            if app.focused is fixes:
                break
            await press(pilot, "tab")
        assert app.focused is fixes
        await press(pilot, "down", "space")
        assert fixes.pressed_button is not None and fixes.pressed_button.id == "fix-safe"
        await save_from_review(pilot)
    saved = yaml.safe_load((folder / "flux_portrait_lora.oomfix.yaml").read_text("utf-8"))
    train = saved["config"]["process"][0]["train"]
    assert train["gradient_checkpointing"] is True and train["batch_size"] == 1
    assert saved["config"]["process"][0]["datasets"][0]["resolution"] == [512, 768]


def test_the_review_prices_each_fix_as_the_user_left_the_walk(tmp_path: Path) -> None:
    """Issue 38 item 6: a step the user switched off stays off in every fix the review offers,
    the fix is priced without it, and the figure shown is ``fit``'s on the saved bytes (the
    demo: checkpointing alone, 19.7-24.2 GiB on the 23.5 GiB card, predicted not to fit)."""
    state = demo_state("early_steps", tmp_path)
    assert chosen_fix(state, "just_enough") == ("gradient_checkpointing", "batch_size")
    skipped = choose(state, StepChoice("batch_size", enabled=False))
    assert chosen_fix(skipped, "just_enough") == ("gradient_checkpointing",)
    assert "batch_size" not in chosen_fix(skipped, "safe")
    words = chosen_fix_words(skipped, "just_enough")
    assert words.startswith("least loss: 1 step, peak ≈ ")
    assert "(predicted not to fit)" in words
    choices = effective_choices(skipped, fix="just_enough")
    saved = save(skipped, choices, ToFile(None, None))
    assert isinstance(saved, SaveResult)
    again = start(JobRequest(target=saved.config, probe=False))
    fitted = fit(again, JobCard(23.54, "--gpu")).memory.peak()
    assert f"({fitted.low:.1f}–{fitted.high:.1f})" in words


def test_the_review_offers_one_fix_when_the_users_choices_make_both_the_same(
    tmp_path: Path,
) -> None:
    state = demo_state("early_steps", tmp_path)
    assert len(chosen_fix_names(state)) == 2
    on = choose(state, StepChoice("top_bucket", enabled=True))  # the safe set's extra step
    assert chosen_fix_names(on) == ("just_enough",)


def test_a_step_left_out_stays_out_of_every_fix_one_accepted_as_shown_follows_it(
    tmp_path: Path,
) -> None:
    """The biggest resolution is off in the preselected fix and on in "more margin": accepted
    as shown it follows the fix picked; left out (the app's Ctrl+N) it stays out of both,
    which are then the same set, offered once."""
    state = demo_state("early_steps", tmp_path)
    step = state.plan.step("top_bucket")
    assert step is not None
    shown = choose(state, default_choice(state, step))
    assert "top_bucket" in chosen_fix(shown, "safe")
    left_out = choose(state, StepChoice("top_bucket", enabled=False, skipped=True))
    assert "top_bucket" not in chosen_fix(left_out, "safe")
    assert chosen_fix_names(left_out) == ("just_enough",)


def test_each_fix_is_named_by_what_it_is(tmp_path: Path) -> None:
    """Issue 38 item 5: the solver's answer is the least loss (the closest to
    fitting when nothing does); the moment's usual changes are "with more margin" only where
    they fit and leave more room than it."""
    import dataclasses

    from oom_wizard.rules.memory import Band
    from oom_wizard.rules.sizing import fix_label

    sizing = demo_state("early_steps", tmp_path).plan.sizing
    assert sizing is not None and sizing.covered
    assert fix_label("just_enough", sizing) == "least loss"
    assert fix_label("safe", sizing) == "more margin"
    least = sizing.bands["just_enough"]
    over = Band(sizing.card_gib - 1.0, sizing.card_gib + 1.0)
    for usual in (least, over):  # no more room, or above the card: no margin to speak of
        other = dataclasses.replace(sizing, bands={"just_enough": least, "safe": usual})
        assert fix_label("safe", other) == "usual changes"
    short = dataclasses.replace(sizing, covered=False)
    assert fix_label("just_enough", short) == "closest to fitting"


# ------------------------------------------------------------------ what a free step must do

CONFIGS = Path(__file__).resolve().parents[2] / "fixtures" / "configs"


def _lowers_the_load(plan: Plan, document: JobDocument, ids: Collection[str]) -> bool:
    """Whether the plan's steps ``ids`` (with their default fields) lower a load crash's peak."""
    trial = {step.id: StepChoice(step.id, step.id in ids) for step in plan.steps}
    return estimate(document, changes_for(plan, trial), plan.model_kind).lowers("loading")


@pytest.mark.parametrize("card", [None, 11.63])
def test_a_free_step_that_does_not_lower_a_load_crash_is_left_off(card: float | None) -> None:
    """SDXL is not quantized, so AI Toolkit's low_vram (quantizing in system RAM, parking idle
    parts) moves nothing off the card at the load: it costs no quality, and still no fix for
    a crash while loading takes it, without a card and with the crash's own figures; the plan
    says why. The first step on, and every other, lowers the load."""

    document = load_document(CONFIGS / "sdxl_ui_defaults.yaml")
    crash = Calibration("load", 11.35, None, card, "PyTorch's OOM message") if card else None
    plan = build_plan(document, "loading", "image", calibration=crash, card_gib=card)
    low_vram = plan.step("low_vram")
    assert low_vram is not None and low_vram.state == "not_needed"
    assert not _lowers_the_load(plan, document, ["low_vram"])
    for fix in plan.fixes:
        assert "low_vram" not in plan.fix_steps(fix), fix
    assert low_vram.note is not None
    assert "does not lower the loaded weights and the first sample" in low_vram.note
    assert "leaves it off" in low_vram.note and "takes it" not in low_vram.note
    on = [step.id for step in plan.steps if step.default_on and step.id != "validation_run"]
    assert on[0] == "sampling"
    for step in on:
        assert _lowers_the_load(plan, document, [step]), step


@pytest.mark.parametrize(
    ("config", "kind"), [("wan22_experts.yaml", "video"), ("flux_portrait_24gb.yaml", "image")]
)
def test_a_free_step_that_lowers_a_load_crash_is_taken_first(config: str, kind: str) -> None:
    """Wan 2.2 14B with low_vram keeps the idle expert in system RAM; a FLUX.1 that is
    quantized on the card quantizes in system RAM instead: low_vram lowers their load, so the
    fix for a crash while loading takes it, as what costs no quality."""

    document = load_document(CONFIGS / config)
    plan = build_plan(document, "loading", kind)
    low_vram = plan.step("low_vram")
    assert low_vram is not None and low_vram.default_on
    assert "low_vram" in plan.fix_steps(plan.default_fix)
    assert _lowers_the_load(plan, document, ["low_vram"])
    assert low_vram.note is not None and "costs no quality" in low_vram.note
    assert "does not lower" not in low_vram.note


def test_a_free_step_that_lowers_a_load_crash_beside_another_is_taken_and_says_so() -> None:
    """A FLUX.1 that is not quantized: low_vram alone leaves the load where it was (nothing is
    quantized on the card); beside the quantization the fix takes, it lowers it, and its
    note names that step."""

    document = plan_document(
        job(arch="flux", model={"quantize": False}, sample={"width": 1024, "height": 1024})
    )
    plan = build_plan(document, "loading", "image")
    low_vram = plan.step("low_vram")
    assert low_vram is not None and low_vram.default_on
    assert not _lowers_the_load(plan, document, ["low_vram"])
    assert _lowers_the_load(plan, document, ["quantize", "low_vram"])
    assert low_vram.note is not None
    assert "beside quantized weights it lowers the loaded weights" in low_vram.note
