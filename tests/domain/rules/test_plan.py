"""Tests of ``oom_wizard.rules.plan``: step order, exact proposals, defaults, choices, JSON
shape."""

from __future__ import annotations

from typing import Any

import pytest

from oom_wizard.errors import ConfigError, WizardError
from oom_wizard.formats.document import MISSING
from oom_wizard.paths import format_path
from oom_wizard.rules.catalog import ModelKind, load_presets
from oom_wizard.rules.plan import (
    FieldProposal,
    Plan,
    StepChoice,
    StepProposal,
    build_plan,
    changes_for,
    default_model_kind,
    rewrite_prompt_flags,
    smaller_size,
)
from tests.support.plan_support import P0, document, job

# The procedure as DESIGN.md states it (deliberately not read from presets/).
LADDER = {
    "image": ["gradient_checkpointing", "batch_size", "top_bucket", "sampling", "low_vram"],
    "video": [
        "gradient_checkpointing",
        "num_frames",
        "batch_size",
        "top_bucket",
        "sampling",
        "low_vram",
    ],
}
# Where the ladder goes on when the usual rungs are in place (issue 11), in order of cost;
# the last two only for crashes in a training step.
DEEPER = [
    "attention",
    "smaller_bucket",
    "quantize",
    "text_encoder",
    "extra_passes",
    "control_images",
    "layer_offloading",
    "placement",
    "lora_rank",
    "optimizer_8bit",
]
TRAINING_ONLY = ["extra_passes", "control_images", "lora_rank", "optimizer_8bit"]
FIRST = {
    ("loading", "image"): ["sampling", "low_vram", "quantize", "text_encoder"],
    ("loading", "video"): ["sampling", "low_vram", "quantize", "text_encoder"],
    ("early_steps", "image"): ["gradient_checkpointing", "batch_size", "top_bucket"],
    ("early_steps", "video"): ["gradient_checkpointing", "batch_size", "top_bucket"],
    ("sampling", "image"): ["sampling"],
    ("sampling", "video"): ["sampling"],
    ("intermittent", "image"): ["top_bucket"],
    ("intermittent", "video"): ["num_frames", "top_bucket"],
}

# What costs no quality, per moment (issue 18 item 6, the seed's Fix A): the default fix takes
# it first wherever it lowers the crashed peak.
FREE = {
    "loading": ["text_encoder", "sampling", "low_vram"],
    "early_steps": ["gradient_checkpointing", "text_encoder"],
    "sampling": ["text_encoder", "sampling"],
    "intermittent": ["gradient_checkpointing", "text_encoder"],
}

HEAVY = job(
    train={"batch_size": 4, "steps": 3000, "gradient_checkpointing": False},
    datasets=[{"resolution": [512, 768, 1024], "num_frames": 81}],
    sample={"width": 1024, "height": 1024, "sample_steps": 30, "sample_every": 250},
    arch="wan21:14b",
)


def plan_of(tree: dict[str, Any], moment: str = "early_steps", kind: str = "image") -> Plan:
    return build_plan(document(tree), moment, kind)


def step_of(tree: dict[str, Any], step_id: str, moment: str = "early_steps", kind: str = "image"):
    found = plan_of(tree, moment, kind).step(step_id)
    assert found is not None, f"no step {step_id}"
    return found


def field_of(step: StepProposal, suffix: str) -> FieldProposal:
    matches = [f for f in step.fields if f.key.endswith(suffix)]
    assert len(matches) == 1, [f.key for f in step.fields]
    return matches[0]


def changed(
    tree: dict[str, Any],
    step_id: str,
    moment: str = "early_steps",
    kind: str = "image",
    toggles: dict[str, bool] | None = None,
) -> dict[str, Any]:
    """The changes of one step with its defaults, and field toggles given by key suffix."""
    plan = plan_of(tree, moment, kind)
    step = plan.step(step_id)
    assert step is not None
    fields = {
        f.key: on for f in step.fields for end, on in (toggles or {}).items() if f.key.endswith(end)
    }
    choice = StepChoice(step_id=step_id, enabled=True, fields=fields)
    return {format_path(c.path): c.after for c in changes_for(plan, {step_id: choice})}


# ------------------------------------------------------------------------- order


def expected_order(moment: str, kind: str) -> list[str]:
    """The moment's first steps, the rest of the ladder, the deeper levers, the validation run."""
    first = FIRST[(moment, kind)]
    training = moment in ("early_steps", "intermittent")
    deeper = [s for s in DEEPER if training or s not in TRAINING_ONLY]
    rest = [s for s in LADDER[kind] + deeper if s not in first]
    return first + rest + ["validation_run"]


@pytest.mark.parametrize(("moment", "kind"), sorted(FIRST))
def test_order_is_the_moments_first_steps_then_the_ladder(moment: str, kind: str) -> None:
    assert [s.id for s in plan_of(HEAVY, moment, kind).steps] == expected_order(moment, kind)


@pytest.mark.parametrize(("moment", "kind"), sorted(FIRST))
def test_what_costs_no_quality_and_the_moments_first_steps_are_on_by_default(
    moment: str, kind: str
) -> None:
    plan = plan_of(HEAVY, moment, kind)
    on = [s.id for s in plan.steps if s.default_on]
    wanted = FIRST[(moment, kind)] + FREE[moment]
    first = [s.id for s in plan.steps if s.id in wanted and not s.satisfied]
    # Sampling off for a loading crash comes with the short validation run.
    assert on == first + (["validation_run"] if moment == "loading" else [])
    assert on


@pytest.mark.parametrize("kind", ["image", "video"])
def test_environment_changes_nothing_and_lists_checks(kind: str) -> None:
    plan = plan_of(HEAVY, "environment", kind)
    assert plan.steps == ()
    checks = load_presets().environment_checks
    assert plan.environment_checks == checks
    assert plan.to_json()["environment_checks"] == list(checks)
    assert any("nvidia-smi" in check for check in checks)
    assert any("expandable_segments:True" in check for check in checks)
    assert changes_for(plan) == []


def test_environment_checks_start_with_the_diagnosis_reasons() -> None:
    class Found:
        moment = "environment"
        model_kind = "image"
        crashed = True
        environment_suspected = True
        reasons = ("0 bytes free on the GPU",)

        def to_json(self) -> dict[str, Any]:
            return {}

    plan = build_plan(document(HEAVY), "environment", "image", diagnosis=Found())
    assert plan.environment_checks[0] == "The log shows: 0 bytes free on the GPU"
    assert plan.environment_checks[1:] == load_presets().environment_checks


def test_when_the_first_steps_are_done_the_next_step_that_lowers_the_peak_is_on() -> None:
    light = job(
        train={"batch_size": 1, "steps": 2000},
        datasets=[{"resolution": [512]}],
        sample={"width": 1024, "height": 1024},
        model={"low_vram": True},
    )
    plan = plan_of(light)
    assert [s.id for s in plan.steps if s.satisfied][:3] == [
        "gradient_checkpointing",
        "batch_size",
        "top_bucket",
    ]
    # Lighter samples do not lower a training step, so the ladder goes on past them.
    sampling = plan.step("sampling")
    assert sampling is not None and not sampling.default_on and not sampling.satisfied
    on = [s for s in plan.steps if s.default_on]
    # Cached text embeddings cost no quality: they come with it.
    assert [s.id for s in on] == ["quantize", "text_encoder"]
    assert on[0].note is not None and "next step down the ladder" in on[0].note
    assert on[1].note is not None and "costs no quality" in on[1].note
    assert not plan.exhausted


def test_unknown_moment_or_kind_is_a_one_line_error() -> None:
    with pytest.raises(WizardError, match="unknown moment 'later'"):
        plan_of(HEAVY, "later")
    with pytest.raises(WizardError, match="unknown kind 'audio'"):
        plan_of(HEAVY, "early_steps", "audio")


def test_a_job_without_a_training_process_is_refused() -> None:
    tree = {"job": "extension", "config": {"name": "x", "process": [{"type": "to_folder"}]}}
    with pytest.raises(ConfigError, match="no training process"):
        plan_of(tree)


# ------------------------------------------------------------------ checkpointing


def test_checkpointing_off_is_turned_on() -> None:
    step = step_of(HEAVY, "gradient_checkpointing")
    assert not step.satisfied
    proposal = field_of(step, "train.gradient_checkpointing")
    assert (proposal.before, proposal.after, proposal.default_on) == (False, True, True)


@pytest.mark.parametrize("train", [{"steps": 10}, {"gradient_checkpointing": True}])
def test_checkpointing_missing_or_on_is_satisfied_and_adds_nothing(train: dict[str, Any]) -> None:
    step = step_of(job(train=train), "gradient_checkpointing")
    assert step.satisfied and step.fields == ()


# ------------------------------------------------------------------- batch size


def test_batch_goes_to_one_and_the_accumulation_keeps_the_effective_batch() -> None:
    tree = job(train={"batch_size": 4, "gradient_accumulation": 2})
    step = step_of(tree, "batch_size")
    accumulation = field_of(step, "train.gradient_accumulation")
    assert (accumulation.before, accumulation.after, accumulation.default_on) == (2, 8, True)
    assert accumulation.requires == format_path((*P0, "train", "batch_size"))
    assert changed(tree, "batch_size") == {
        "config.process[0].train.batch_size": 1,
        "config.process[0].train.gradient_accumulation": 8,
    }


def test_keep_the_effective_batch_can_be_switched_off() -> None:
    tree = job(train={"batch_size": 4})
    assert changed(tree, "batch_size", toggles={"gradient_accumulation": False}) == {
        "config.process[0].train.batch_size": 1
    }


def test_without_the_smaller_batch_the_accumulation_is_not_raised() -> None:
    tree = job(train={"batch_size": 4})
    assert changed(tree, "batch_size", toggles={"train.batch_size": False}) == {}


def test_the_legacy_accumulation_key_is_used_when_it_is_the_one_set() -> None:
    tree = job(train={"batch_size": 2, "gradient_accumulation_steps": 3})
    assert changed(tree, "batch_size") == {
        "config.process[0].train.batch_size": 1,
        "config.process[0].train.gradient_accumulation_steps": 6,
    }


def test_a_whole_epoch_accumulation_is_left_alone() -> None:
    tree = job(train={"batch_size": 2, "gradient_accumulation_steps": -1})
    step = step_of(tree, "batch_size")
    assert [f.key for f in step.fields] == ["config.process[0].train.batch_size"]
    assert step.note is not None and "-1" in step.note


def test_dataset_batch_sizes_go_to_one_and_the_largest_sets_the_factor() -> None:
    tree = job(
        train={"batch_size": 2},
        datasets=[{"resolution": 512, "batch_size": 6}, {"resolution": 512, "batch_size": 1}],
    )
    step = step_of(tree, "batch_size")
    assert field_of(step, "train.gradient_accumulation").requires == (
        "config.process[0].datasets[0].batch_size"
    )
    assert step.note is not None and "different batch sizes" in step.note
    assert changed(tree, "batch_size") == {
        "config.process[0].train.batch_size": 1,
        "config.process[0].datasets[0].batch_size": 1,
        "config.process[0].train.gradient_accumulation": 6,
    }


def test_batch_one_is_satisfied() -> None:
    assert step_of(job(train={"batch_size": 1}), "batch_size").satisfied


def test_a_placeholder_batch_is_named_not_changed() -> None:
    step = step_of(job(train={"batch_size": "${BATCH}"}), "batch_size")
    assert step.fields == () and step.satisfied
    assert step.note is not None and "train.batch_size is a ${...} placeholder" in step.note


# ------------------------------------------------------------------- top bucket


def test_one_toggle_per_bucket_but_the_smallest_and_the_largest_is_dropped() -> None:
    step = step_of(job(datasets=[{"resolution": [512, 768, 1024]}]), "top_bucket")
    assert [(f.before, f.default_on, f.control) for f in step.fields] == [
        (768, False, "bucket"),
        (1024, True, "bucket"),
    ]
    group = "config.process[0].datasets[0].resolution"
    assert {f.group for f in step.fields} == {group}
    assert [f.key for f in step.fields] == [f"{group}[1]", f"{group}[2]"]
    assert all(f.after is MISSING for f in step.fields)


def test_dropped_buckets_become_one_change_of_the_list_in_its_order() -> None:
    tree = job(datasets=[{"resolution": [1024, 512, 768]}])
    key = "config.process[0].datasets[0].resolution"
    assert changed(tree, "top_bucket") == {key: [512, 768]}
    assert changed(tree, "top_bucket", toggles={"resolution[2]": True}) == {key: [512]}


def test_512_and_768_stay_by_default() -> None:
    step = step_of(job(datasets=[{"resolution": [512, 768]}]), "top_bucket")
    assert step.satisfied and not step.default_on
    assert [(f.before, f.default_on) for f in step.fields] == [(768, False)]


@pytest.mark.parametrize(
    ("resolution", "after", "default_on"),
    [
        (2048, 1536, True),
        (1536, 1280, True),
        (1328, 1280, True),
        (1024, 768, True),
        ([1024], [768], True),
        (768, 512, False),
        ([632], [512], False),
    ],
)
def test_a_single_resolution_steps_down_one_rung(
    resolution: Any, after: Any, default_on: bool
) -> None:
    step = step_of(job(datasets=[{"resolution": resolution}]), "top_bucket")
    proposal = field_of(step, "datasets[0].resolution")
    assert (proposal.before, proposal.after, proposal.default_on) == (resolution, after, default_on)


@pytest.mark.parametrize("resolution", [512, [512], 256])
def test_nothing_below_512_is_proposed(resolution: Any) -> None:
    step = step_of(job(datasets=[{"resolution": resolution}]), "top_bucket")
    assert step.satisfied and step.fields == ()


# ---------------------------------------------------------------------- sampling


def test_loading_skips_the_first_sample_and_disables_sampling() -> None:
    tree = job(sample={"width": 1024, "height": 1024})
    assert changed(tree, "sampling", "loading") == {
        "config.process[0].train.skip_first_sample": True,
        "config.process[0].train.disable_sampling": True,
    }


def test_disabled_sampling_is_satisfied_for_every_moment() -> None:
    tree = job(train={"disable_sampling": True}, sample={"width": 1024, "height": 1024})
    for moment in ("loading", "sampling", "early_steps"):
        assert step_of(tree, "sampling", moment).satisfied


def test_lighter_samples_for_an_image_model() -> None:
    tree = job(sample={"width": 1024, "height": 1024, "sample_steps": 30, "sample_every": 250})
    step = step_of(tree, "sampling", "sampling")
    disable = field_of(step, "train.disable_sampling")
    assert (disable.after, disable.default_on) == (True, False)
    assert changed(tree, "sampling", "sampling") == {
        "config.process[0].sample.width": 768,
        "config.process[0].sample.height": 768,
        "config.process[0].sample.sample_steps": 15,
        "config.process[0].sample.sample_every": 500,
    }


def test_lighter_samples_for_a_video_model_keep_the_aspect_and_the_grid() -> None:
    tree = job(
        arch="wan21:14b",
        sample={"width": 832, "height": 480, "num_frames": 81, "sample_steps": 20},
    )
    assert changed(tree, "sampling", "sampling", "video") == {
        "config.process[0].sample.width": 512,
        "config.process[0].sample.height": 288,
        "config.process[0].sample.sample_steps": 10,
        "config.process[0].sample.sample_every": 200,
        "config.process[0].sample.num_frames": 41,
    }


def test_per_sample_sizes_and_prompt_flags_are_offered_too() -> None:
    tree = job(
        sample={
            "width": 1024,
            "height": 1024,
            "samples": [
                {"prompt": "a cat", "width": 1280, "height": 720},
                {"prompt": "a dog --w 1024 --h 1536 --seed 3"},
            ],
        }
    )
    result = changed(tree, "sampling", "sampling")
    assert result["config.process[0].sample.samples[0].width"] == 768
    assert result["config.process[0].sample.samples[0].height"] == 432
    assert result["config.process[0].sample.samples[1].prompt"] == "a dog --w 512 --h 768 --seed 3"
    note = step_of(tree, "sampling", "sampling").note
    assert note is not None and "their own size" in note


def test_no_sample_section_means_nothing_to_lighten() -> None:
    step = step_of(job(), "sampling", "sampling")
    assert step.satisfied and step.fields == ()


@pytest.mark.parametrize(
    ("size", "kind", "expected"),
    [
        ((1024, 1024), "image", (768, 768)),
        ((768, 768), "image", (576, 576)),
        ((1920, 1080), "image", (768, 432)),
        ((480, 832), "video", (288, 512)),
        ((512, 512), "video", (384, 384)),
        ((256, 256), "image", (256, 256)),
        ((300, 200), "image", (256, 176)),
    ],
)
def test_smaller_size(size: tuple[int, int], kind: ModelKind, expected: tuple[int, int]) -> None:
    assert smaller_size(*size, kind) == expected


def test_rewrite_prompt_flags_changes_only_the_numbers() -> None:
    prompt = "a dog --w  1024 --h 768  --frames 81"
    assert rewrite_prompt_flags(prompt, {"--w": 512, "--frames": 41}) == (
        "a dog --w  512 --h 768  --frames 41"
    )


# -------------------------------------------------------------------------- frames


@pytest.mark.parametrize(
    ("arch", "frames", "after"),
    [
        ("wan21:14b", 81, 41),
        ("wan21:14b", 41, 21),
        ("wan21:14b", 21, 9),
        ("wan21:14b", 9, 5),
        ("wan21:14b", 40, 17),
        ("ltx2", 121, 57),
        ("minimax_h3", 107, 39),
    ],
)
def test_frames_are_halved_onto_the_arch_grid(arch: str, frames: int, after: int) -> None:
    tree = job(arch=arch, datasets=[{"resolution": 512, "num_frames": frames}])
    step = step_of(tree, "num_frames", "intermittent", "video")
    assert field_of(step, "datasets[0].num_frames").after == after


@pytest.mark.parametrize(("arch", "frames"), [("wan21:14b", 5), ("minimax_h3", 5), ("ltx2", 9)])
def test_clips_never_become_single_frames(arch: str, frames: int) -> None:
    tree = job(arch=arch, datasets=[{"resolution": 512, "num_frames": frames}])
    assert step_of(tree, "num_frames", "intermittent", "video").satisfied


def test_auto_frame_count_goes_off_with_a_fixed_count() -> None:
    tree = job(arch="minimax_h3", datasets=[{"resolution": 512, "auto_frame_count": True}])
    step = step_of(tree, "num_frames", "intermittent", "video")
    frames = field_of(step, "datasets[0].num_frames")
    auto = field_of(step, "datasets[0].auto_frame_count")
    assert (frames.before, frames.after) == (MISSING, 39)
    assert (auto.before, auto.after, auto.requires) == (True, False, frames.key)


def test_auto_frame_count_keeps_a_fixed_count_on_the_grid() -> None:
    tree = job(
        arch="ltx2", datasets=[{"resolution": 512, "num_frames": 121, "auto_frame_count": True}]
    )
    assert changed(tree, "num_frames", "intermittent", "video") == {
        "config.process[0].datasets[0].auto_frame_count": False
    }


def test_image_datasets_and_sample_frames_by_default_are_untouched() -> None:
    tree = job(
        arch="wan21:14b",
        datasets=[{"resolution": 512}, {"resolution": 512, "num_frames": 81}],
        sample={"num_frames": 81},
    )
    step = step_of(tree, "num_frames", "intermittent", "video")
    assert not any("datasets[0]" in f.key for f in step.fields)
    sample = field_of(step, "sample.num_frames")
    assert (sample.after, sample.default_on) == (41, False)
    assert changed(tree, "num_frames", "intermittent", "video") == {
        "config.process[0].datasets[1].num_frames": 41
    }


# ------------------------------------------------------------------------ low VRAM


def test_the_low_memory_recipe_is_spread_over_its_steps() -> None:
    plan = plan_of(job(arch="qwen_image"), "loading")

    def on(step_id: str) -> dict[str, Any]:
        step = plan.step(step_id)
        assert step is not None
        return {f.key.rsplit(".", 1)[1]: f.after for f in step.fields if f.default_on}

    assert on("low_vram") == {"low_vram": True}
    assert on("quantize") == {"quantize": True, "quantize_te": True}
    assert on("text_encoder") == {"cache_text_embeddings": True}
    offload = plan.step("layer_offloading")
    assert offload is not None and not offload.default_on
    assert offload.note is not None and "system RAM" in offload.note and "float8" in offload.note
    assert offload.costs is not None and "RAM" in offload.costs


def test_quantize_keeps_a_chosen_qtype_and_text_encoder_skips_caching_with_unload() -> None:
    tree = job(
        arch="qwen_image",
        model={"quantize": False, "qtype": "uint4|ostris/x/y.safetensors"},
        train={"unload_text_encoder": True},
    )
    quantize = step_of(tree, "quantize", "loading")
    assert "qtype" not in {f.key.rsplit(".", 1)[1] for f in quantize.fields}
    text = step_of(tree, "text_encoder", "loading")
    assert text.fields == () and text.note is not None and "unload_text_encoder" in text.note


def test_quantize_fills_an_empty_qtype() -> None:
    step = step_of(job(arch="minimax_h3", model={"qtype": ""}), "quantize", "loading", "video")
    assert field_of(step, "model.qtype").after == "convrot8"


def test_the_memory_path_steps_never_touch_the_optimizer_or_learning_rate() -> None:
    memory = ("low_vram", "quantize", "text_encoder", "layer_offloading")
    for arch in ("flux", "wan21:14b", "ace_step_15", "sdxl", None):
        plan = plan_of(job(arch=arch, train={"optimizer": "adamw", "lr": 1e-4}))
        for step in plan.steps:
            if step.id in memory:
                assert not any(f.key.endswith(("optimizer", "lr")) for f in step.fields)


def test_no_layer_offloading_where_it_does_not_work() -> None:
    for arch in ("ace_step_15", "boogu_image", "flux"):
        step = step_of(job(arch=arch), "layer_offloading")
        assert step.fields == ()


def test_an_unknown_arch_gets_only_low_vram() -> None:
    step = step_of(job(arch="someday_model"), "low_vram")
    assert [f.key for f in step.fields] == ["config.process[0].model.low_vram"]


def test_low_vram_on_with_the_recipe_in_place_is_satisfied() -> None:
    model = {"low_vram": True, "quantize": True, "quantize_te": True}
    tree = job(arch="qwen_image", model=model, train={"cache_text_embeddings": True})
    step = step_of(tree, "low_vram")
    assert step.satisfied
    assert all(not f.default_on for f in step.fields)


# ----------------------------------------------------------------- validation run


def test_validation_run_is_offered_off_by_default() -> None:
    step = step_of(job(train={"steps": 3000}), "validation_run")
    assert not step.default_on and not step.satisfied
    # the presets' 100 steps, raised past the first save (AI Toolkit's default, every 1000):
    # the count it is written with, not a figure raised only on save (issue 33)
    assert field_of(step, "train.steps").after == 1001
    assert step_of(job(train={"steps": 80}), "validation_run").satisfied


# ----------------------------------------------------------------------- choices


def test_defaults_apply_the_default_on_steps_only() -> None:
    plan = plan_of(HEAVY)
    assert {c.step for c in changes_for(plan)} == {
        "gradient_checkpointing",
        "batch_size",
        "top_bucket",
        "text_encoder",
    }
    assert {c.step for c in changes_for(plan)} == {s.id for s in plan.steps if s.default_on}


def test_a_step_missing_from_the_choices_is_off_and_edited_values_win() -> None:
    plan = plan_of(HEAVY)
    key = format_path((*P0, "train", "batch_size"))
    choice = StepChoice(step_id="batch_size", enabled=True, values={key: 2})
    changes = changes_for(plan, {"batch_size": choice})
    assert {c.step for c in changes} == {"batch_size"}
    assert next(c for c in changes if format_path(c.path) == key).after == 2


def test_every_change_names_its_step_and_reason() -> None:
    plan = plan_of(HEAVY)
    titles = {step.id: step.title for step in plan.steps}
    changes = changes_for(plan, {s.id: StepChoice(s.id, True) for s in plan.steps})
    assert {change.step for change in changes} == {s.id for s in plan.steps if s.fields}
    for change in changes:
        assert change.step in titles and change.reason.startswith(f"{titles[change.step]}: ")


def test_two_steps_on_one_field_give_one_change() -> None:
    tree = job(arch="wan21:14b", datasets=[{"resolution": 512}], sample={"num_frames": 81})
    plan = plan_of(tree, "intermittent", "video")
    everything = {
        s.id: StepChoice(s.id, True, fields={f.key: True for f in s.fields}) for s in plan.steps
    }
    paths = [c.path for c in changes_for(plan, everything)]
    assert len(paths) == len(set(paths))


def test_several_processes_are_all_planned_and_labelled() -> None:
    second = {"type": "sd_trainer", "train": {"batch_size": 2}, "datasets": [{"resolution": 512}]}
    tree = job(train={"batch_size": 4}, extra_processes=[second])
    step = step_of(tree, "batch_size")
    labels = [f.label for f in step.fields if f.key.endswith("train.batch_size")]
    assert labels == ["process 0: train.batch_size", "process 1: train.batch_size"]


# -------------------------------------------------------------------------- JSON


def test_json_has_exactly_the_design_shape() -> None:
    data = plan_of(HEAVY).to_json()
    assert set(data) == {
        "schema",
        "moment",
        "model_kind",
        "steps",
        "environment_checks",
        "exhausted",
        "estimate",
        "fixes",
        "fix_values",
        "default_fix",
        "sizing",
    }
    assert data["environment_checks"] == [] and data["exhausted"] is False
    assert data["fix_values"] == {"safe": {}}  # the safe fix takes every step at its default
    assert set(data["fixes"]) == {"safe"} and data["default_fix"] == "safe"  # no card to size
    assert set(data["estimate"]) == {
        "training", "sample", "weights_gib", "peak", "lowers_peak", "gib"
    }  # fmt: skip
    assert set(data["estimate"]["weights_gib"]) == {"before", "after"}
    assert set(data["estimate"]["gib"]) == {"before", "after"}
    phases = {"load", "baseline_sample", "training", "sample"}
    assert set(data["estimate"]["gib"]["before"]) == set(data["estimate"]["gib"]["after"]) == phases
    for step in data["steps"]:
        assert set(step) == {
            "id", "title", "why", "state", "satisfied", "default_on", "ui_hint", "costs",
            "available", "fields", "rungs",
        }  # fmt: skip
        for proposal in step["fields"]:
            assert set(proposal) == {"path", "before", "after", "default_on"}
    top = next(s for s in data["steps"] if s["id"] == "top_bucket")
    assert top["fields"][-1] == {
        "path": "config.process[0].datasets[0].resolution[2]",
        "before": 1024,
        "after": None,
        "default_on": True,
    }


# ------------------------------------------------------------------------ kind


@pytest.mark.parametrize(
    ("tree", "kind"),
    [
        (job(arch="wan22_14b:t2v"), "video"),
        (job(arch="flux"), "image"),
        (job(arch="ace_step_15"), "image"),
        (job(arch="nobody_knows", datasets=[{"resolution": 512, "num_frames": 33}]), "video"),
        (job(arch="nobody_knows"), "image"),
    ],
)
def test_default_model_kind(tree: dict[str, Any], kind: str) -> None:
    assert default_model_kind(document(tree))[0] == kind
