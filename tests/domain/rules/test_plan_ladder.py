"""Tests of the ladder going as far as the crash needs (issue 11).

The property: over every config we have (the fixtures in ``tests/fixtures/configs``, the demo
jobs, and a sample of AI Toolkit's examples when ``../shared`` is beside the checkout; every
example with ``python bench/ladder_cases.py``) and every moment but ``environment``, the
default fix lowers the estimate of the peak the crash ran into, or the plan says the ladder is
exhausted and switches nothing on. Rolling back again and again (each time after a new crash)
keeps that true and ends exhausted.
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from oom_wizard.formats.document import MISSING, JobDocument, load_document
from oom_wizard.paths import format_path
from oom_wizard.rules.estimate import estimate
from oom_wizard.rules.plan import Plan, StepChoice, build_plan, changes_for, default_model_kind
from oom_wizard.storage.changelog import ChangeLog, read_changelog
from oom_wizard.storage.changes import prepare
from oom_wizard.storage.save import SaveResult
from tests.support.corpus import OWN_CONFIGS, needs_examples, own_configs, shared_example
from tests.support.plan_support import cli, document, job, write_job
from tests.support.saving import commit_beside

FIXTURES = OWN_CONFIGS
DEMO = Path(str(resources.files("oom_wizard.presets") / "demo"))
MOMENTS = ["loading", "early_steps", "sampling", "intermittent"]
PEAK = {"loading": "load", "early_steps": "training", "intermittent": "training"}


def fixture_configs() -> list[Path]:
    """The fixtures and the demo jobs: always there, so the property never only skips."""
    return [*own_configs(), DEMO / "flux_portrait_lora.yaml", DEMO / "wan_dance_lora.yaml"]


def cases(configs: list[Path]) -> Iterator[tuple[Path, str]]:
    for config in configs:
        for moment in MOMENTS:
            yield config, moment


def plan_for(doc: JobDocument, moment: str, **kwargs: Any) -> Plan:
    return build_plan(doc, moment, default_model_kind(doc)[0], **kwargs)


def assert_fix_lowers_or_exhausted(doc: JobDocument, plan: Plan) -> None:
    changes = changes_for(plan)
    figures = estimate(doc, changes, plan.model_kind)
    if plan.exhausted:
        assert changes == [], "an exhausted plan must switch nothing on"
        assert not any(step.default_on for step in plan.steps)
        assert plan.exhausted_advice and "bigger card" in plan.exhausted_advice
    else:
        assert figures.lowers(plan.moment), (
            plan.moment,
            [s.id for s in plan.steps if s.default_on],
            figures,
        )
    assert plan.estimate == figures


def test_the_fixture_set_is_not_empty() -> None:
    # the own fixture configs and the 2 demo jobs, 4 moments each: cases that never skip
    assert len(fixture_configs()) >= 16
    assert len(list(cases(fixture_configs()))) == 4 * len(fixture_configs())


@pytest.mark.parametrize(("config", "moment"), list(cases(fixture_configs())), ids=str)
def test_default_fix_lowers_the_crashed_peak_or_is_exhausted(config: Path, moment: str) -> None:
    doc = load_document(config)
    assert_fix_lowers_or_exhausted(doc, plan_for(doc, moment))


#: AI Toolkit's examples the suite checks, one of each kind of model: an image edit, a
#: video, a text-to-image and a second text-to-image family. ``python bench/ladder_cases.py``
#: checks every example at every moment (and counts the cases that end exhausted).
EXAMPLE_SAMPLE = (
    "train_lora_flux_kontext_24gb.yaml",
    "train_lora_wan21_14b_24gb.yaml",
    "train_lora_qwen_image_24gb.yaml",
    "train_lora_lumina.yaml",
)


@needs_examples
@pytest.mark.parametrize("moment", MOMENTS)
@pytest.mark.parametrize("name", EXAMPLE_SAMPLE)
def test_default_fix_lowers_the_crashed_peak_on_the_examples(name: str, moment: str) -> None:
    doc = load_document(shared_example(name))
    assert_fix_lowers_or_exhausted(doc, plan_for(doc, moment))


def save_defaults(doc: JobDocument, plan: Plan) -> SaveResult:
    """Save the plan's default roll-back as the wizard does, recording its default-on steps."""
    return commit_beside(
        prepare(doc, changes_for(plan)),
        direction="rollback",
        moment=plan.moment,
        steps=[s.id for s in plan.steps if s.default_on],
    )


def rollback_until_exhausted(source: Path, moment: str, limit: int = 25) -> list[list[str]]:
    """Apply the default fix, crash again, repeat: the steps of every roll-back."""
    config, log = source, None
    rounds: list[list[str]] = []
    for _ in range(limit):
        doc = load_document(config)
        changelog: ChangeLog | None = read_changelog(log) if log is not None else None
        plan = plan_for(doc, moment, changelog=changelog, new_crash=log is not None)
        assert_fix_lowers_or_exhausted(doc, plan)
        if plan.exhausted:
            return rounds
        changes = changes_for(plan)
        steps = [s.id for s in plan.steps if s.default_on]
        saved = commit_beside(
            prepare(doc, changes), direction="rollback", moment=moment, steps=steps
        )
        config, log = saved.config, saved.changelog
        rounds.append(steps)
    raise AssertionError(f"still not exhausted after {limit} roll-backs: {rounds}")


@pytest.mark.parametrize("moment", MOMENTS)
@pytest.mark.parametrize("name", ["kontext_light_edit.yaml", "qwen_image_heavy.yaml"])
def test_repeated_rollbacks_lower_the_peak_every_time_and_end_exhausted(
    name: str, moment: str, tmp_path: Path
) -> None:
    source = tmp_path / name
    source.write_bytes((FIXTURES / name).read_bytes())
    rounds = rollback_until_exhausted(source, moment)
    assert rounds, "the first roll-back had something to do"


def test_the_kontext_case_gets_a_training_lowering_fix() -> None:
    doc = load_document(FIXTURES / "kontext_light_edit.yaml")
    plan = plan_for(doc, "early_steps")
    # The seed's next rung down, and cached text embeddings, which cost no quality.
    assert [s.id for s in plan.steps if s.default_on] == ["smaller_bucket", "text_encoder"]
    assert plan.estimate is not None and plan.estimate.train_pct < 100
    sampling = plan.step("sampling")
    assert sampling is not None and not sampling.default_on


@needs_examples
@pytest.mark.parametrize("name", ["train_lora_flux_kontext_24gb", "train_lora_wan21_14b_24gb"])
def test_the_issue_examples_get_a_training_lowering_fix(name: str) -> None:
    doc = load_document(shared_example(f"{name}.yaml"))
    plan = plan_for(doc, "early_steps")
    assert not plan.exhausted
    assert plan.estimate is not None and plan.estimate.lowers("early_steps")
    assert plan.estimate.train_pct < 100


def test_the_demos_second_rollback_after_crashed_again_lowers_training(tmp_path: Path) -> None:
    source = tmp_path / "flux_portrait_lora.yaml"
    source.write_bytes((DEMO / "flux_portrait_lora.yaml").read_bytes())
    doc = load_document(source)
    first = plan_for(doc, "early_steps")
    saved = save_defaults(doc, first)
    again = load_document(saved.config)
    second = plan_for(
        again, "early_steps", changelog=read_changelog(saved.changelog), new_crash=True
    )
    assert not second.exhausted
    assert second.estimate is not None and second.estimate.train_pct < 100
    assert "sampling" not in [s.id for s in second.steps if s.default_on]


def test_training_only_steps_stay_out_of_other_moments() -> None:
    doc = document(job(train={"optimizer": "adamw"}))
    for moment in ("loading", "sampling"):
        ids = [s.id for s in plan_for(doc, moment).steps]
        assert "lora_rank" not in ids and "optimizer_8bit" not in ids


# ----------------------------------------------------------------------- the new steps


def with_network(tree: dict[str, Any], **network: Any) -> dict[str, Any]:
    tree["config"]["process"][0]["network"] = {"type": "lora", **network}
    return tree


def step_changes(tree: dict[str, Any], step_id: str, moment: str = "early_steps") -> dict[str, Any]:
    doc = document(tree)
    plan = plan_for(doc, moment)
    changes = changes_for(plan, {step_id: StepChoice(step_id, True)})
    return {format_path(c.path): c.after for c in changes}


P = "config.process[0]."


def test_smaller_bucket_drops_the_largest_small_bucket_and_keeps_one() -> None:
    assert step_changes(job(datasets=[{"resolution": [512, 768]}]), "smaller_bucket") == {
        P + "datasets[0].resolution": [512]
    }
    assert step_changes(job(datasets=[{"resolution": 768}]), "smaller_bucket") == {
        P + "datasets[0].resolution": 512
    }
    assert step_changes(job(datasets=[{"resolution": [512]}]), "smaller_bucket") == {}
    # Above the keep threshold the biggest bucket is top_bucket's, not this step's.
    assert step_changes(job(datasets=[{"resolution": [512, 1024]}]), "smaller_bucket") == {}


def test_lora_rank_halves_with_alpha_in_proportion_and_stops_at_the_floor() -> None:
    tree = with_network(job(), linear=32, linear_alpha=16)
    assert step_changes(tree, "lora_rank") == {
        P + "network.linear": 16,
        P + "network.linear_alpha": 8,
    }
    ranked = with_network(job(), linear=32, rank=8)
    assert step_changes(ranked, "lora_rank") == {P + "network.rank": 4}
    assert step_changes(with_network(job(), linear=4), "lora_rank") == {}
    assert step_changes(job(), "lora_rank") == {}  # no network: a full fine-tune


def test_optimizer_8bit_only_where_there_is_a_variant() -> None:
    assert step_changes(job(train={"optimizer": "AdamW"}), "optimizer_8bit") == {
        P + "train.optimizer": "adamw8bit"
    }
    assert step_changes(job(train={}), "optimizer_8bit") == {P + "train.optimizer": "adamw8bit"}
    for name in ("adamw8bit", "adafactor", "automagic"):
        assert step_changes(job(train={"optimizer": name}), "optimizer_8bit") == {}


def test_layer_offloading_goes_up_by_its_rungs() -> None:
    off = step_changes(job(arch="qwen_image"), "layer_offloading")
    assert off == {
        P + "model.layer_offloading": True,
        P + "model.layer_offloading_transformer_percent": 0.5,
        P + "model.layer_offloading_text_encoder_percent": 0.5,
    }
    half = job(
        arch="qwen_image",
        model={
            "layer_offloading": True,
            "layer_offloading_transformer_percent": 0.5,
            "layer_offloading_text_encoder_percent": 1.0,
        },
    )
    assert step_changes(half, "layer_offloading") == {
        P + "model.layer_offloading_transformer_percent": 1.0
    }


def test_the_percents_need_the_offloading_switch() -> None:
    doc = document(job(arch="qwen_image"))
    plan = plan_for(doc, "early_steps")
    step = plan.step("layer_offloading")
    assert step is not None
    switch = next(f for f in step.fields if f.key.endswith("layer_offloading"))
    choice = StepChoice("layer_offloading", True, fields={switch.key: False})
    assert changes_for(plan, {"layer_offloading": choice}) == []


def test_every_new_step_lowers_a_peak_in_the_estimate() -> None:
    tree = with_network(
        job(
            arch="qwen_image",
            train={"batch_size": 1, "optimizer": "adamw", "dtype": "bf16"},
            datasets=[{"resolution": [512, 768]}],
        ),
        linear=32,
        linear_alpha=32,
    )
    doc = document(tree)
    plan = plan_for(doc, "early_steps")
    for step_id in ("smaller_bucket", "quantize", "text_encoder", "layer_offloading",
                    "lora_rank", "optimizer_8bit"):  # fmt: skip
        figures = estimate(doc, changes_for(plan, {step_id: StepChoice(step_id, True)}), "image")
        assert figures.lowers("early_steps"), step_id


def test_exhausted_plan_and_apply_say_so_and_save_nothing(tmp_path: Path) -> None:
    source = tmp_path / "floor.yaml"
    source.write_bytes((FIXTURES / "floor_everything.yaml").read_bytes())
    status, out, _ = cli("plan", source, "--moment", "early_steps")
    assert status == 0
    assert "Ladder exhausted" in out and "does not fit this card" in out
    assert "bigger card" in out and "smaller variant" in out and "offloading" in out
    status, out, err = cli("apply", source, "--moment", "early_steps")
    assert status == 2 and err.count("\n") == 1 and "ladder exhausted, nothing saved" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["floor.yaml"]
    status, out, _ = cli("plan", source, "--moment", "early_steps", "--json")
    import json

    data = json.loads(out)
    assert data["exhausted"] is True and "bigger card" in data["remaining"]
    assert data["estimate"]["training"] == 100.0
    assert data["estimate"]["weights_gib"]["before"] == data["estimate"]["weights_gib"]["after"]


def test_apply_says_when_chosen_steps_leave_the_crashed_peak_unchanged(tmp_path: Path) -> None:
    source = write_job(
        tmp_path / "job.yaml",
        job(train={"batch_size": 1, "steps": 3000}, sample={"width": 1024, "height": 1024}),
    )
    status, out, _ = cli("apply", source, "--moment", "early_steps", "--steps", "sampling")
    assert status == 0
    assert "leaves one training step unchanged" in out


def test_plan_json_estimate_is_the_default_fixs() -> None:
    doc = load_document(FIXTURES / "qwen_image_heavy.yaml")
    data = plan_for(doc, "loading").to_json()
    weights = data["estimate"]["weights_gib"]
    assert data["exhausted"] is False and data["estimate"]["peak"] == "load"
    assert weights["after"] < weights["before"]
    assert data["estimate"]["sample"] == 0.0  # sampling off for the validation run


def test_a_bucket_is_never_dropped_to_nothing() -> None:
    doc = document(job(datasets=[{"resolution": [512]}, {"resolution": [256, 512]}]))
    for moment in MOMENTS:
        plan = plan_for(doc, moment)
        every = {s.id: StepChoice(s.id, True) for s in plan.steps}
        for change in changes_for(plan, every):
            if change.path[-1] == "resolution":
                assert change.after not in ([], MISSING)


# ------------------------------------------------------------------- sampling off


def test_sampling_off_comes_with_the_validation_run_and_says_so() -> None:
    doc = document(job(train={"steps": 3000}, sample={"width": 1024, "height": 1024}))
    plan = plan_for(doc, "loading")
    on = [s.id for s in plan.steps if s.default_on]
    assert "sampling" in on and "validation_run" in on
    sampling = plan.step("sampling")
    assert sampling is not None
    disable = next(f for f in sampling.fields if f.key.endswith("disable_sampling"))
    assert "a full run with it makes no samples" in disable.label
    changed = {format_path(c.path): c.after for c in changes_for(plan)}
    # 100 steps raised past the first periodic save (AI Toolkit's default save_every, 1000)
    assert changed[P + "train.steps"] == 1001 and changed[P + "train.disable_sampling"] is True


def test_the_scale_up_gives_sampling_back_first_after_the_validation_run(tmp_path: Path) -> None:
    from oom_wizard.rules.plan import next_scale_up

    source = write_job(
        tmp_path / "job.yaml",
        job(train={"steps": 3000}, sample={"width": 1024, "height": 1024}),
    )
    doc = load_document(source)
    plan = plan_for(doc, "loading")
    saved = save_defaults(doc, plan)
    first = next_scale_up(load_document(saved.config), read_changelog(saved.changelog))
    assert first is not None and first.step == "sampling"
    assert any(c.path[-1] == "disable_sampling" for c in first.changes)


def test_diagnose_says_the_ladder_is_exhausted(tmp_path: Path) -> None:
    source = tmp_path / "floor.yaml"
    source.write_bytes((FIXTURES / "floor_everything.yaml").read_bytes())
    status, out, _ = cli("diagnose", source, "--moment", "early_steps", "--no-probe")
    assert status == 0
    assert "does not fit this card" in " ".join(out.split())


def test_a_lever_the_arch_lacks_is_not_available_rather_than_done() -> None:
    plan = plan_for(document(job(arch="flux")), "early_steps")
    offload = plan.step("layer_offloading")
    assert offload is not None and not offload.available and offload.satisfied
    rank = plan.step("lora_rank")  # job() has no network section: a full fine-tune
    assert rank is not None and not rank.available
    quantize = plan.step("quantize")
    assert quantize is not None and quantize.available
    sdxl = plan_for(document(job(arch="sdxl")), "early_steps").step("quantize")
    assert sdxl is not None and not sdxl.available
    status, out, _ = cli("plan", FIXTURES / "kontext_edit_lora.yaml", "--moment", "early_steps")
    assert status == 0
    assert "Offload layers to system RAM [layer_offloading]: not for this model" in out


def test_after_dropping_the_biggest_bucket_the_next_one_down_waits_for_a_new_crash(
    tmp_path: Path,
) -> None:
    source = write_job(tmp_path / "job.yaml", job(datasets=[{"resolution": [512, 768, 1024]}]))
    doc = load_document(source)
    plan = plan_for(doc, "intermittent")
    saved = save_defaults(doc, plan)
    log = read_changelog(saved.changelog)
    again = plan_for(load_document(saved.config), "intermittent", changelog=log)
    smaller = again.step("smaller_bucket")
    assert smaller is not None and smaller.satisfied and smaller.fields == ()
    assert smaller.note is not None and "Applied in the last roll-back" in smaller.note
    crashed = plan_for(load_document(saved.config), "intermittent", changelog=log, new_crash=True)
    assert [s.id for s in crashed.steps if s.default_on] == ["smaller_bucket"]
