"""Issue 23's rungs: each lever on a config that uses it, with the field, the estimate's change
and where it is in AI Toolkit's UI ("Show Advanced" where the simple form has no control)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from oom_wizard.memory import job_memory
from oom_wizard.plan import StepChoice, StepProposal, build_plan, changes_for
from tests.plan_support import document

DEMO = Path(__file__).resolve().parents[1] / "presets" / "demo" / "flux_portrait_lora.yaml"
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
        # the step's peak (memory.py's accounting), so the training peak stays.
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
    (proposal,) = two.fields
    assert proposal.key == f"{P0}.model.split_model_over_gpus" and proposal.after is True
    assert proposal.ui_hint == "Show Advanced → model.split_model_over_gpus"
    assert two.note is not None and "2 GPUs" in two.note
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
