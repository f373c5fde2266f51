"""Issue 23's rungs: each lever on a config that uses it, with the field, the estimate's change
and where it is in AI Toolkit's UI ("Show Advanced" where the simple form has no control)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from oom_wizard.rules.memory import Calibration, job_memory
from oom_wizard.rules.plan import StepChoice, StepProposal, build_plan, changes_for
from tests.support.lever_cases import RUNGS, TERMS, Rung, Term, rung_row, term_row
from tests.support.plan_support import document

DEMO = Path(__file__).resolve().parents[3] / "presets" / "demo" / "flux_portrait_lora.yaml"
P0 = "config.process[0]"


def demo_with(change: Callable[[dict[str, Any]], None]) -> Any:
    tree = yaml.safe_load(DEMO.read_text("utf-8"))
    process = tree["config"]["process"][0]
    process["train"]["gradient_checkpointing"] = True
    process["train"].pop("ema_config", None)
    change(process)
    return document(copy.deepcopy(tree))


def training_mid(document: Any, step: StepProposal | None, plan: Any) -> float:
    choices = {step.id: StepChoice(step.id, enabled=True)} if step is not None else {}
    band = job_memory(document, changes_for(plan, choices), "image").phases["training"]
    assert band is not None
    return band.mid


LEVERS = [
    (
        "diff_output_preservation",
        lambda p: p["train"].update(diff_output_preservation=True),
        "train.diff_output_preservation",
        "Training → Regularization → Differential Output Preservation",
    ),
    (
        "blank_prompt_preservation",
        lambda p: p["train"].update(blank_prompt_preservation=True),
        "train.blank_prompt_preservation",
        "Training → Regularization → Blank Prompt Preservation",
    ),
    (
        "inverted_mask_prior",
        lambda p: p["train"].update(inverted_mask_prior=True),
        "train.inverted_mask_prior",
        "Show Advanced → train.inverted_mask_prior",
    ),
    (
        "do_prior_divergence",
        lambda p: p["train"].update(do_prior_divergence=True),
        "train.do_prior_divergence",
        "Show Advanced → train.do_prior_divergence",
    ),
    (
        "ema",
        lambda p: p["train"].update(ema_config={"use_ema": True, "ema_decay": 0.99}),
        "train.ema_config.use_ema",
        "Training → EMA (Exponential Moving Average) → Use EMA",
    ),
    (
        "train_text_encoder",
        lambda p: p["train"].update(train_text_encoder=True),
        "train.train_text_encoder",
        "Show Advanced → train.train_text_encoder",
    ),
]


@pytest.mark.parametrize(("name", "change", "field", "where"), LEVERS, ids=[x[0] for x in LEVERS])
def test_an_extra_pass_or_copy_is_switched_off_with_its_cost_said(
    name: str, change: Callable[[dict[str, Any]], None], field: str, where: str
) -> None:
    document = demo_with(change)
    plan = build_plan(document, "early_steps", "image")
    step = plan.step("extra_passes")
    assert step is not None and not step.satisfied
    (proposal,) = step.fields
    assert proposal.key == f"{P0}.{field}" and (proposal.before, proposal.after) == (True, False)
    assert proposal.ui_hint == where
    assert "(off: " in proposal.label  # its quality cost, on its own row
    assert step.costs is not None and "quality" in step.costs
    before, after = training_mid(document, None, plan), training_mid(document, step, plan)
    if name in ("inverted_mask_prior", "do_prior_divergence"):
        # A prior prediction made without gradients before the step: it does not stack on
        # the step's peak (the memory wing's account), so the training peak stays.
        assert after == pytest.approx(before)
    else:
        assert after < before


def test_an_extra_pass_is_not_offered_for_a_sampling_crash() -> None:
    document = demo_with(lambda p: p["train"].update(diff_output_preservation=True))
    assert build_plan(document, "sampling", "image").step("extra_passes") is None


def test_an_eager_attention_backend_is_flagged_and_replaced() -> None:
    document = demo_with(lambda p: p["train"].update(attention_backend="_native_math"))
    plan = build_plan(document, "early_steps", "image")
    step = plan.step("attention")
    assert step is not None and step.default_on  # it costs no quality: the fix takes it first
    (proposal,) = step.fields
    assert proposal.key == f"{P0}.train.attention_backend"
    assert (proposal.before, proposal.after) == ("_native_math", "native")
    assert proposal.ui_hint == "Show Advanced → train.attention_backend"
    assert step.note is not None and "likely cause of this crash" in step.note
    plain = build_plan(demo_with(lambda p: None), "early_steps", "image").step("attention")
    assert plain is not None and plain.satisfied and not plain.fields


def test_the_rank_rung_halves_a_locons_conv_rank_too() -> None:
    def locon(process: dict[str, Any]) -> None:
        process["network"].update(type="locon", conv=16, conv_alpha=16)

    document = demo_with(locon)
    plan = build_plan(document, "early_steps", "image")
    step = plan.step("lora_rank")
    assert step is not None
    rows = {f.key: (f.before, f.after, f.ui_hint) for f in step.fields}
    assert rows[f"{P0}.network.conv"] == (
        16,
        8,
        "Target → Conv Rank (the form sets Conv Alpha to the same number)",
    )
    assert rows[f"{P0}.network.conv_alpha"] == (16, 8, "Show Advanced → network.conv_alpha")
    assert rows[f"{P0}.network.linear"][:2] == (32, 16)
    assert training_mid(document, step, plan) < training_mid(document, None, plan)


def test_a_full_rank_lokr_is_not_offered_a_lower_rank() -> None:
    document = demo_with(lambda p: p["network"].update(type="lokr", lokr_factor=4))
    step = build_plan(document, "early_steps", "image").step("lora_rank")
    assert step is not None and not step.fields and not step.available
    assert step.note is not None and "lokr_factor" in step.note


def test_splitting_flux_over_gpus_is_offered_only_when_the_probe_sees_several() -> None:
    document = demo_with(lambda p: None)
    one = build_plan(document, "early_steps", "image").step("placement")
    assert one is not None and not one.fields and not one.available
    two = build_plan(document, "early_steps", "image", gpus=2).step("placement")
    assert two is not None and not two.satisfied
    split, is_flux = two.fields
    assert split.key == f"{P0}.model.split_model_over_gpus" and split.after is True
    assert split.ui_hint == "Show Advanced → model.split_model_over_gpus"
    assert two.note is not None and "2 GPUs" in two.note
    # model.arch: flux alone: AI Toolkit's check wants is_flux (config_modules.py:700).
    assert is_flux.key == f"{P0}.model.is_flux" and is_flux.after is True
    assert is_flux.requires == split.key and "model.is_flux: true" in two.note
    assert is_flux.ui_hint == "Show Advanced → model.is_flux"
    wan = demo_with(lambda p: p["model"].update(arch="wan21:14b"))
    other = build_plan(wan, "early_steps", "video", gpus=2).step("placement")
    assert other is not None and not other.fields and "only FLUX" in (other.note or "")


def test_parameter_swapping_is_offered_for_an_adafactor_full_fine_tune() -> None:
    def full(process: dict[str, Any]) -> None:
        process.pop("network")
        process["train"]["optimizer"] = "adafactor"

    document = demo_with(full)
    step = build_plan(document, "early_steps", "image").step("placement")
    assert step is not None
    (proposal,) = step.fields
    assert proposal.key == f"{P0}.train.do_paramiter_swapping" and proposal.after is True
    assert proposal.ui_hint == (
        "Show Advanced → train.do_paramiter_swapping "
        "(only with the Adafactor or Automagic optimizer)"
    )
    assert step.costs is not None and "learns more slowly" in step.costs
    lora = build_plan(demo_with(lambda p: None), "early_steps", "image").step("placement")
    assert lora is not None and not lora.fields


# --- issue 23's must-show 3: each lever on a config that uses it, through the application layer
# -------


def _names_its_field_where_the_form_has_none(where: str | None, field: str) -> None:
    assert where, "no UI location"
    if where.startswith("Show Advanced"):
        # The Advanced view edits the raw config: the hint names the path to edit.
        assert where.split(" (")[0] == f"Show Advanced → {field}"


@pytest.mark.parametrize("rung", RUNGS, ids=[r.name for r in RUNGS])
def test_each_rung_s_plan_shows_its_field_its_gib_saving_and_its_ui_location(
    rung: Rung, tmp_path: Path
) -> None:
    row = rung_row(rung, tmp_path)
    assert row.before != row.after
    _names_its_field_where_the_form_has_none(row.where, row.field)
    if rung.zero_because is None:
        assert row.gib_change < -0.05, row  # a saving the plan can show in GiB
    else:
        assert row.gib_change == pytest.approx(0.0, abs=1e-9), rung.zero_because


@pytest.mark.parametrize("term", TERMS, ids=[t.name for t in TERMS])
def test_each_term_moves_the_estimate_and_has_a_ui_location(term: Term, tmp_path: Path) -> None:
    row = term_row(term, tmp_path)
    assert abs(row.gib_change) > 0.05, row
    _names_its_field_where_the_form_has_none(row.where, row.field)


# --- fewer control images --------------------------------------------------------------------


def edit_job(arch: str, **dataset: Any) -> Any:
    def change(process: dict[str, Any]) -> None:
        process["model"] = {"name_or_path": "/models/edit", "arch": arch, "quantize": True}
        process["datasets"][0].update(resolution=[1024], **dataset)

    return demo_with(change)


THREE = {"control_path_1": "/c/1", "control_path_2": "/c/2", "control_path_3": "/c/3"}


def test_a_multi_control_arch_drops_the_last_control_image_one_per_rollback() -> None:
    document = edit_job("flux2", **THREE)
    plan = build_plan(document, "early_steps", "image")
    step = plan.step("control_images")
    assert step is not None and not step.satisfied and step.available
    (proposal,) = step.fields
    assert proposal.key == f"{P0}.datasets[0].control_path_3"
    assert proposal.ui_hint == "Datasets → the 'portraits' dataset → Control Dataset 3"
    assert "(off: the LoRA no longer learns from this reference)" in proposal.label
    assert step.costs is not None and "quality" in step.costs
    assert training_mid(document, step, plan) < training_mid(document, None, plan)
    two = edit_job("flux2", control_path_1="/c/1", control_path_2="/c/2")
    (second,) = build_plan(two, "early_steps", "image").step("control_images").fields  # type: ignore[union-attr]
    assert second.key == f"{P0}.datasets[0].control_path_2"


def test_a_list_of_control_paths_loses_its_last_one() -> None:
    document = edit_job("qwen_image_edit_plus", control_path=["/c/1", "/c/2"])
    step = build_plan(document, "early_steps", "image").step("control_images")
    assert step is not None
    (proposal,) = step.fields
    assert (proposal.before, proposal.after) == (["/c/1", "/c/2"], ["/c/1"])
    # A list has no control in the simple form.
    assert proposal.ui_hint is not None and "a list of paths has no control" in proposal.ui_hint


def test_one_control_image_or_a_single_control_arch_has_no_rung() -> None:
    one = build_plan(edit_job("flux2", control_path_1="/c/1"), "early_steps", "image")
    step = one.step("control_images")
    assert step is not None and not step.fields and not step.available
    single = build_plan(
        edit_job("flux_kontext", control_path=["/c/1", "/c/2"]), "early_steps", "image"
    ).step("control_images")
    assert single is not None and not single.fields and not single.available
    assert single.note is not None and "takes one control image per item" in single.note


def test_fewer_control_images_is_not_offered_for_a_sampling_crash() -> None:
    document = edit_job("flux2", **THREE)
    assert build_plan(document, "sampling", "image").step("control_images") is None


# --- validation: the sampling rung lowers its pass --------------------------------------------


def with_validation(**values: Any) -> Any:
    def change(process: dict[str, Any]) -> None:
        items = [{"image_path": "/val/0.png", "prompt": "p0rtr41t"}]
        process["train"]["validation_config"] = {"validation_items": items, **values}

    return demo_with(change)


def sample_mid(document: Any, step: StepProposal | None, plan: Any) -> float:
    choices = {step.id: StepChoice(step.id, enabled=True)} if step is not None else {}
    band = job_memory(document, changes_for(plan, choices), "image").phases["sample"]
    assert band is not None
    return band.mid


def test_the_sampling_rung_lightens_the_validation_pass() -> None:
    document = with_validation(resolution=1024, validation_sigmas=[1.0, 0.75, 0.5, 0.25])
    plan = build_plan(document, "sampling", "image")
    step = plan.step("sampling")
    assert step is not None
    rows = {f.key: (f.before, f.after, f.ui_hint) for f in step.fields}
    base = f"{P0}.train.validation_config"
    assert rows[f"{base}.resolution"] == (1024, 768, "Validation → Validation Resolution")
    assert rows[f"{base}.validation_sigmas"] == (
        [1.0, 0.75, 0.5, 0.25],
        [0.5],
        "Validation → Validation Sigmas",
    )
    assert step.note is not None and "val/loss that is not comparable" in step.note
    assert sample_mid(document, step, plan) < sample_mid(document, None, plan)


def test_a_validation_pass_already_light_is_left_alone() -> None:
    document = with_validation(resolution=512, validation_sigmas=[0.5])
    step = build_plan(document, "sampling", "image").step("sampling")
    assert step is not None
    assert not [f for f in step.fields if "validation_config" in f.key]


# --- the GiB of attention and parameter swapping ---------------------------------------------


def test_the_attention_rung_shows_its_saving_in_gib() -> None:
    document = demo_with(lambda p: p["train"].update(attention_backend="_native_math"))
    plan = build_plan(document, "early_steps", "image")
    step = plan.step("attention")
    assert step is not None and step.note is not None and "heads × tokens²" in step.note
    assert training_mid(document, step, plan) < training_mid(document, None, plan) - 1.0


def test_parameter_swapping_shows_its_saving_in_gib() -> None:
    def full(process: dict[str, Any]) -> None:
        process.pop("network")
        process["train"]["optimizer"] = "adafactor"

    document = demo_with(full)
    plan = build_plan(document, "early_steps", "image")
    step = plan.step("placement")
    # FLUX.1's 11.9 B weights in bf16: 0.9 of their gradients go.
    saving = training_mid(document, None, plan) - training_mid(document, step, plan)
    assert saving > 0.9 * 11.9e9 * 2 / 2**30


def lean(network: bool) -> Callable[[dict[str, Any]], None]:
    """Everything but the split already done (batch 1, 512 px, rank 4, 8-bit Adam, no samples,
    4-bit weights), with model.is_flux set: a LoRA, or a full fine-tune."""

    def change(process: dict[str, Any]) -> None:
        process["model"].update(is_flux=True, qtype="uint4")
        process["network"].update(linear=4, linear_alpha=4)
        if not network:
            process.pop("network")
        process["train"].update(
            batch_size=1, optimizer="adamw8bit", cache_text_embeddings=True, disable_sampling=True
        )
        process["datasets"][0].update(resolution=[512])

    return change


def split_plan(network: bool, card: float = 8.0) -> Any:
    crash = Calibration("training", card + 4.0, None, card, "PyTorch's OOM message")
    document = demo_with(lean(network))
    return build_plan(document, "early_steps", "image", gpus=2, card_gib=card, calibration=crash)


def test_the_split_step_shows_its_saving_in_gib_on_two_gpus() -> None:
    plan = split_plan(network=False)
    step = plan.step("placement")
    assert step is not None and [f.key for f in step.fields] == [
        f"{P0}.model.split_model_over_gpus"
    ]
    document = demo_with(lean(network=False))
    on = {step.id: StepChoice(step.id, enabled=True)}
    before = job_memory(document, [], "image", gpus=2).phases["training"]
    after = job_memory(document, changes_for(plan, on), "image", gpus=2).phases["training"]
    assert before is not None and after is not None
    assert after.mid < before.mid - 1.0
    # The plan's estimate counts the cards too: its default fix takes the split.
    assert "placement" in plan.fix_steps()
    assert plan.estimate is not None and plan.estimate.gib is not None
    today, fixed = (memory.phases["training"] for memory in plan.estimate.gib)
    assert today is not None and fixed is not None and fixed.mid < today.mid - 1.0


def test_a_lora_split_is_offered_but_no_fix_takes_it() -> None:
    plan = split_plan(network=True)
    step = plan.step("placement")
    assert step is not None and not step.satisfied and step.unsized is not None
    assert "AI Toolkit issue 1048" in (step.note or "")
    assert all("placement" not in steps for steps in plan.fixes.values())
    assert plan.exhausted and "no fix takes it" in (plan.exhausted_advice or "")


def test_a_config_with_the_split_on_is_weighed_per_card_with_two_gpus() -> None:
    document = demo_with(lambda p: p["model"].update(is_flux=True, split_model_over_gpus=True))
    one = build_plan(document, "early_steps", "image")
    two = build_plan(document, "early_steps", "image", gpus=2)
    assert one.estimate is not None and one.estimate.gib is not None
    assert two.estimate is not None and two.estimate.gib is not None
    today_one, today_two = one.estimate.gib[0], two.estimate.gib[0]
    assert today_two.peak().mid < today_one.peak().mid - 1.0
    assert any("over 2 GPUs" in note for note in today_two.notes)
    assert any("one GPU is seen" in note for note in today_one.notes)
    step = two.step("placement")
    assert step is not None and step.satisfied and not step.fields
