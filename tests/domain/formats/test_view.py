"""Tests of ``oom_wizard.formats.view``: defaults, presence, type errors with positions,
placeholders."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pydantic
import pytest
import yaml
from hypothesis import given, settings, strategies as st

from oom_wizard.errors import ConfigError
from oom_wizard.formats.view import (
    TRAINING_PROCESS_TYPES,
    JobView,
    ProcessView,
    SampleOverride,
    build_view,
    size_flags,
)
from oom_wizard.paths import FieldPath, parse_path
from tests.support.corpus import needs_shared, own_configs, shared_examples


class _ToolkitLoader(yaml.SafeLoader):
    """SafeLoader that, like AI Toolkit's loader, reads ``1e-4`` as a float."""


_ToolkitLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def load_yaml(text: str) -> Any:
    """Parse YAML text the way AI Toolkit does (for the purposes of these tests)."""
    return yaml.load(text, Loader=_ToolkitLoader)


def nowhere(path: FieldPath) -> tuple[int, int] | None:
    """A locate function that knows no positions."""
    return None


def view_of(process: Mapping[str, Any], *more: Mapping[str, Any]) -> JobView:
    """The view of a job whose processes are ``process`` and ``more``."""
    tree = {"job": "extension", "config": {"name": "demo", "process": [process, *more]}}
    return build_view(tree, file="job.yaml", locate=nowhere)


def primary(process: Mapping[str, Any]) -> ProcessView:
    """The training process of a one-process job."""
    found = view_of(process).primary
    assert found is not None
    return found


def trainer(**sections: Any) -> dict[str, Any]:
    """An ``sd_trainer`` process with the given sections."""
    return {"type": "sd_trainer", **sections}


def error_of(tree: Any, positions: Mapping[str, tuple[int, int]] | None = None) -> ConfigError:
    """The ConfigError ``build_view`` raises for ``tree``; ``positions`` maps paths to places."""
    known = {parse_path(text): place for text, place in (positions or {}).items()}

    def locate(path: FieldPath) -> tuple[int, int] | None:
        return known.get(path)

    with pytest.raises(ConfigError) as caught:
        build_view(tree, file="job.yaml", locate=locate)
    return caught.value


def job_tree(process: Mapping[str, Any]) -> dict[str, Any]:
    """A whole config tree with one process."""
    return {"job": "extension", "config": {"name": "demo", "process": [process]}}


# --- defaults and presence ----------------------------------------------------------------


def test_absent_sections_take_the_toolkit_python_defaults() -> None:
    process = primary(trainer())
    train, model = process.train, process.model
    assert (train.batch_size, train.gradient_accumulation, train.gradient_accumulation_steps) == (
        1,
        1,
        1,
    )
    assert train.gradient_checkpointing is True
    assert (train.steps, train.optimizer, train.dtype, train.lr) == (1000, "adamw", "fp32", 1e-6)
    assert not any(
        (
            train.disable_sampling,
            train.skip_first_sample,
            train.force_first_sample,
            train.cache_text_embeddings,
            train.unload_text_encoder,
        )
    )
    assert (model.arch, model.name_or_path, model.qtype, model.qtype_te) == (
        None,
        None,
        "qfloat8",
        "qfloat8",
    )
    assert (model.low_vram, model.quantize, model.quantize_te, model.compile) == (
        False,
        False,
        False,
        False,
    )
    assert model.layer_offloading is False
    assert model.layer_offloading_transformer_percent == 1.0
    assert model.layer_offloading_text_encoder_percent == 1.0
    assert process.sample is None
    assert process.first_sample_section is False
    assert process.datasets == ()
    assert process.network_rank is None
    assert train.present == frozenset()


def test_empty_sample_and_dataset_sections_take_defaults() -> None:
    process = primary(trainer(sample={}, datasets=[{}]))
    sample = process.sample
    assert sample is not None
    assert (sample.width, sample.height, sample.sample_steps, sample.sample_every) == (
        512,
        512,
        20,
        100,
    )
    assert (sample.sample_start_step, sample.num_frames, sample.fps) == (0, 1, 16)
    assert sample.guidance_scale == 7.0
    assert (sample.samples, sample.prompts) == ((), ())
    assert sample.path == ("config", "process", 0, "sample")
    (dataset,) = process.datasets
    assert dataset.resolution == (512,)
    assert dataset.resolution_is_list is False
    assert (dataset.batch_size, dataset.num_frames, dataset.fps) == (None, 1, 24)
    assert dataset.buckets is True
    assert not (dataset.cache_latents or dataset.cache_latents_to_disk)
    assert dataset.is_video is False


def test_null_section_is_treated_as_absent() -> None:
    process = primary(trainer(train=None, sample=None, datasets=None))
    assert process.train.batch_size == 1
    assert process.sample is None
    assert process.datasets == ()


def test_presence_records_exactly_the_keys_the_file_sets() -> None:
    process = primary(
        trainer(
            train={"gradient_accumulation_steps": 1, "batch_size": 2, "noise_scheduler": "x"},
            datasets=[{"folder_path": "/d", "batch_size": None}],
        )
    )
    train = process.train
    assert train.present == {"gradient_accumulation_steps", "batch_size"}
    assert train.is_set("gradient_accumulation_steps")
    assert not train.is_set("gradient_accumulation")
    assert not train.is_set("gradient_checkpointing")
    assert train.gradient_checkpointing is True
    dataset = process.datasets[0]
    assert dataset.is_set("batch_size")
    assert dataset.batch_size is None


def test_keys_named_like_derived_fields_are_not_read_from_the_file() -> None:
    process = primary(trainer(train={"present": ["batch_size"]}, datasets=[{"index": 7}]))
    assert process.train.present == frozenset()
    assert process.datasets[0].index == 0
    assert process.datasets[0].present == frozenset()


@pytest.mark.parametrize(
    ("folder", "name"),
    [
        ("/data/portraits", "portraits"),
        ("/data/portraits/", "portraits"),
        ("C:\\train\\dance_clips\\", "dance_clips"),
        ("clips", "clips"),
        (None, "#2"),
        ("", "#2"),
        ("/", "#2"),
    ],
)
def test_a_dataset_is_named_by_its_folder_else_by_its_place(folder: str | None, name: str) -> None:
    datasets = [{"folder_path": "/data/first"}, {"folder_path": folder, "name": "not read"}]
    assert primary(trainer(datasets=datasets)).datasets[1].name == name


def test_quantize_te_follows_quantize_unless_set() -> None:
    assert primary(trainer(model={"quantize": True})).model.quantize_te is True
    set_apart = primary(trainer(model={"quantize": True, "quantize_te": False})).model
    assert set_apart.quantize_te is False
    assert not set_apart.is_set("qtype")


def test_layer_offloading_follows_the_deprecated_auto_memory() -> None:
    assert primary(trainer(model={"auto_memory": True})).model.layer_offloading is True
    model = primary(trainer(model={"auto_memory": True, "layer_offloading": False})).model
    assert model.layer_offloading is False


def test_qtype_with_an_accuracy_recovery_adapter_is_kept_and_split() -> None:
    written = "uint4|ostris/accuracy_recovery_adapters/wan22_14b_t2i_torchao_uint4.safetensors"
    model = primary(trainer(model={"qtype": written})).model
    assert model.qtype == written
    assert model.qtype_base == "uint4"
    assert model.qtype_adapter == written.split("|")[1]
    plain = primary(trainer(model={"qtype": "qint4"})).model
    assert (plain.qtype_base, plain.qtype_adapter) == ("qint4", None)


def test_integers_are_accepted_where_a_float_is_expected() -> None:
    process = primary(
        trainer(
            train={"lr": 1},
            sample={"guidance_scale": 4},
            model={"layer_offloading_transformer_percent": 0},
        )
    )
    assert process.train.lr == 1.0
    assert isinstance(process.train.lr, float)
    assert process.sample is not None and process.sample.guidance_scale == 4.0
    assert process.model.layer_offloading_transformer_percent == 0.0


def test_views_are_frozen() -> None:
    process = primary(trainer())
    with pytest.raises(pydantic.ValidationError):
        process.train.batch_size = 4  # type: ignore[misc]


# --- wrong types --------------------------------------------------------------------------

WRONG_VALUES = [
    ("train", {"batch_size": "abc"}, "train.batch_size", "is 'abc'; expected a whole number >= 1"),
    ("train", {"batch_size": True}, "train.batch_size", "is true; expected a whole number >= 1"),
    ("train", {"batch_size": 0}, "train.batch_size", "is 0; expected a whole number >= 1"),
    (
        "train",
        {"batch_size": 2.0},
        "train.batch_size",
        "is 2.0; expected a whole number >= 1 (write 2, not 2.0)",
    ),
    (
        "train",
        {"gradient_checkpointing": "yes"},
        "train.gradient_checkpointing",
        "is 'yes'; expected true or false",
    ),
    ("train", {"lr": "1e-4"}, "train.lr", "is '1e-4'; expected a number"),
    ("train", {"lr": False}, "train.lr", "is false; expected a number"),
    ("train", {"optimizer": 8}, "train.optimizer", "is 8; expected text"),
    (
        "train",
        {"gradient_accumulation_steps": 0},
        "train.gradient_accumulation_steps",
        "is 0; expected a whole number >= 1, or -1 for a whole epoch",
    ),
    (
        "model",
        {"layer_offloading_transformer_percent": 1.5},
        "model.layer_offloading_transformer_percent",
        "is 1.5; expected a number from 0.0 to 1.0",
    ),
    ("model", {"is_flux": "true"}, "model.is_flux", "is 'true'; expected true or false"),
    ("model", {"arch": 12}, "model.arch", "is 12; expected text, or null"),
    (
        "sample",
        {"sample_every": -1},
        "sample.sample_every",
        "is -1; expected a whole number >= 0 (0 or null turns periodic sampling off)",
    ),
    (
        "sample",
        {"samples": [{"prompt": "a"}, {"prompt": "b", "width": "big"}]},
        "sample.samples[1].width",
        "is 'big'; expected a whole number >= 1, or null",
    ),
    (
        "sample",
        {"samples": ["a cat"]},
        "sample.samples[0]",
        "is 'a cat'; expected a mapping with a prompt (and optional width, height, num_frames)",
    ),
    ("sample", {"samples": "a cat"}, "sample.samples", "is 'a cat'; expected a list of samples"),
    ("sample", {"prompts": ["a", 3]}, "sample.prompts[1]", "is 3; expected the prompt text"),
    (
        "sample",
        {"prompts": ["a cat --w big"]},
        "sample.prompts[0]",
        "has '--w big'; expected a whole number >= 1 after --w",
    ),
    (
        "sample",
        {"samples": [{"prompt": "a cat --frames 0"}]},
        "sample.samples[0].prompt",
        "has '--frames 0'; expected a whole number >= 1 after --frames",
    ),
]


@pytest.mark.parametrize(("section", "values", "where", "problem"), WRONG_VALUES)
def test_wrong_value_names_the_path_and_its_position(
    section: str, values: dict[str, Any], where: str, problem: str
) -> None:
    path = f"config.process[0].{where}"
    error = error_of(job_tree(trainer(**{section: values})), {path: (12, 7)})
    assert error.message == f"{path} {problem}"
    assert (error.file, error.line, error.column) == ("job.yaml", 12, 7)


@pytest.mark.parametrize(
    ("dataset", "where", "problem"),
    [
        (
            {"resolution": [512, "x"]},
            "resolution[1]",
            "is 'x'; expected a whole number >= 1",
        ),
        (
            {"resolution": 0},
            "resolution",
            "is 0; expected a whole number >= 1, or a non-empty list of them",
        ),
        (
            {"resolution": []},
            "resolution",
            "is []; expected a whole number >= 1, or a non-empty list of them",
        ),
        (
            {"resolution": True},
            "resolution",
            "is true; expected a whole number >= 1, or a non-empty list of them",
        ),
        ({"num_frames": 1.5}, "num_frames", "is 1.5; expected a whole number >= 1"),
        ({"buckets": "on"}, "buckets", "is 'on'; expected true or false"),
    ],
)
def test_wrong_dataset_value_names_its_index(
    dataset: dict[str, Any], where: str, problem: str
) -> None:
    path = f"config.process[0].datasets[1].{where}"
    error = error_of(job_tree(trainer(datasets=[{}, dataset])), {path: (30, 21)})
    assert error.message == f"{path} {problem}"
    assert (error.line, error.column) == (30, 21)


def test_null_for_a_required_value_says_what_to_do() -> None:
    path = "config.process[0].train.batch_size"
    error = error_of(job_tree(trainer(train={"batch_size": None})), {path: (5, 19)})
    assert error.message == (
        f"{path} is empty (null); expected a whole number >= 1: write a value, or delete the "
        "key to use AI Toolkit's default"
    )
    assert (error.line, error.column) == (5, 19)


def test_null_is_accepted_where_the_toolkit_accepts_it() -> None:
    process = primary(
        trainer(
            sample={"sample_every": None},
            model={"arch": None, "qtype": None},
            datasets=[{"batch_size": None}],
            network={"rank": None, "linear": 8},
        )
    )
    assert process.sample is not None
    assert process.sample.sample_every is None
    assert process.sample.periodic_sampling is False
    assert process.model.arch_keys() == {}
    assert process.network_rank == 8


def test_only_the_first_error_is_raised_on_one_line() -> None:
    tree = job_tree(trainer(train={"steps": "x", "batch_size": "y"}, model={"quantize": 1}))
    error = error_of(tree)
    assert error.message.startswith("config.process[0].train.batch_size is 'y'")
    assert "\n" not in error.one_line()


def test_position_falls_back_to_the_nearest_located_parent() -> None:
    tree = job_tree(trainer(datasets=[{"resolution": 0}]))
    error = error_of(tree, {"config.process[0].datasets[0]": (40, 9)})
    assert (error.line, error.column) == (40, 9)


def test_error_without_any_known_position_still_names_the_file() -> None:
    error = error_of(job_tree(trainer(train={"batch_size": "abc"})))
    assert (error.file, error.line, error.column) == ("job.yaml", None, None)


@pytest.mark.parametrize(
    ("process", "where", "problem"),
    [
        (trainer(train=[1, 2]), "train", "is [1, 2]; expected a mapping of training settings"),
        (trainer(model="flux"), "model", "is 'flux'; expected a mapping of model settings"),
        (trainer(sample=5), "sample", "is 5; expected a mapping of sample settings"),
        (
            trainer(datasets={"folder_path": "/d"}),
            "datasets",
            "is a mapping; expected a list of datasets (- folder_path: ...)",
        ),
        (
            trainer(datasets=["/d"]),
            "datasets[0]",
            "is '/d'; expected a mapping of dataset settings",
        ),
        (
            {"type": 5},
            "type",
            "is 5; expected text naming the process type, such as sd_trainer",
        ),
        (
            trainer(name=3),
            "name",
            "is 3; expected text, or null",
        ),
    ],
)
def test_section_of_the_wrong_kind_is_refused(
    process: dict[str, Any], where: str, problem: str
) -> None:
    path = f"config.process[0].{where}"
    error = error_of(job_tree(process), {path: (8, 5)})
    assert error.message == f"{path} {problem}"
    assert (error.line, error.column) == (8, 5)


# --- structure ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tree", "located", "starts"),
    [
        (["job", "config"], "", "the top level of the config is ['job', 'config']; expected"),
        ({"job": "extension"}, "", "the config has no config: section"),
        ({"job": "extension", "config": "x"}, "config", "config is 'x'; expected a mapping"),
        ({"config": {"name": "demo"}}, "config", "config has no process: list"),
        ({"config": {"process": {"type": "sd_trainer"}}}, "config.process", "config.process is"),
        ({"config": {"process": []}}, "config.process", "config.process is an empty list"),
        ({"config": {"process": ["sd_trainer"]}}, "config.process[0]", "config.process[0] is"),
        ({"config": {"process": [{"name": "x"}]}}, "config.process[0]", "config.process[0] has"),
        ({"job": 1, "config": {"process": [{"type": "x"}]}}, "job", "job is 1; expected text"),
        ({"config": {"name": 2, "process": [{"type": "x"}]}}, "config.name", "config.name is 2"),
    ],
)
def test_broken_structure_is_refused_with_a_position(tree: Any, located: str, starts: str) -> None:
    path: FieldPath = parse_path(located) if located else ()

    def locate(asked: FieldPath) -> tuple[int, int] | None:
        return (3, 4) if asked == path else None

    with pytest.raises(ConfigError) as caught:
        build_view(tree, file="job.yaml", locate=locate)
    assert caught.value.message.startswith(starts)
    assert (caught.value.line, caught.value.column) == (3, 4)


def test_structure_messages_say_what_to_do() -> None:
    assert "add one with the training process" in error_of({"config": {}}).message
    missing_type = error_of({"config": {"process": [{"name": "x"}]}}).message
    assert "type: sd_trainer" in missing_type


# --- placeholders -------------------------------------------------------------------------


def test_placeholder_where_a_number_is_expected_is_unknown_not_an_error() -> None:
    view = view_of(trainer(train={"steps": "${STEPS}", "batch_size": 2}))
    train = view.processes[0].train
    assert train.steps is None
    assert train.batch_size == 2
    assert train.is_set("steps")
    assert not train.is_known("steps")
    assert train.is_known("batch_size")
    assert view.placeholders == ("config.process[0].train.steps",)


def test_placeholders_are_recorded_everywhere_the_view_reads() -> None:
    view = view_of(
        trainer(
            train={"gradient_checkpointing": "${GC}", "dtype": "${DTYPE}"},
            model={"quantize": "${QUANT}", "layer_offloading_text_encoder_percent": "${P}"},
            sample={"sample_every": "${EVERY}", "samples": [{"prompt": "x", "width": "${W}"}]},
            datasets=[{"resolution": [512, "${RES}"], "folder_path": "${DATA}/images"}],
            network={"rank": "${RANK}", "linear": 16},
        )
    )
    process = view.processes[0]
    assert process.train.gradient_checkpointing is None
    assert process.train.dtype == "${DTYPE}"
    assert process.model.quantize is None
    assert process.model.quantize_te is None
    assert process.model.layer_offloading_text_encoder_percent is None
    assert process.sample is not None
    assert process.sample.sample_every is None
    assert process.sample.periodic_sampling is None
    assert process.sample.samples[0].width is None
    assert process.datasets[0].resolution is None
    assert process.datasets[0].resolution_is_list is True
    assert process.datasets[0].folder_path == "${DATA}/images"
    assert process.network_rank is None
    assert view.placeholders == (
        "config.process[0].train.gradient_checkpointing",
        "config.process[0].train.dtype",
        "config.process[0].model.quantize",
        "config.process[0].model.layer_offloading_text_encoder_percent",
        "config.process[0].sample.sample_every",
        "config.process[0].sample.samples[0].width",
        "config.process[0].datasets[0].folder_path",
        "config.process[0].datasets[0].resolution",
        "config.process[0].network.rank",
    )


def test_placeholder_in_a_required_value_is_not_taken_for_null() -> None:
    process = primary(trainer(train={"batch_size": "${BATCH}"}))
    assert process.train.batch_size is None


def test_name_placeholder_stays_as_written_and_is_no_unknown() -> None:
    view = view_of(trainer(training_folder="output/[name]", datasets=[{"folder_path": "[name]"}]))
    process = view.processes[0]
    assert process.training_folder == "output/[name]"
    assert process.datasets[0].folder_path == "[name]"
    assert view.placeholders == ()


def test_name_placeholder_where_a_number_is_expected_is_an_error() -> None:
    error = error_of(job_tree(trainer(train={"steps": "[name]"})))
    assert error.message == (
        "config.process[0].train.steps is '[name]'; expected a whole number >= 1"
    )


def test_arch_placeholder_leaves_the_arch_unknown() -> None:
    model = primary(trainer(model={"arch": "${ARCH}", "is_flux": True})).model
    assert model.arch == "${ARCH}"
    assert model.arch_keys() == {"arch": "${ARCH}", "is_flux": True}


# --- gradient accumulation ----------------------------------------------------------------


def test_both_accumulation_keys_in_use_are_refused_like_the_toolkit() -> None:
    steps = "config.process[0].train.gradient_accumulation_steps"
    tree = job_tree(trainer(train={"gradient_accumulation": 4, "gradient_accumulation_steps": 2}))
    error = error_of(tree, {steps: (14, 38)})
    assert error.message == (
        "config.process[0].train.gradient_accumulation is 4 and "
        f"{steps} is 2: the toolkit refuses this, the two are mutually exclusive; keep one "
        "and set the other to 1"
    )
    assert (error.line, error.column) == (14, 38)


@pytest.mark.parametrize(
    "train",
    [
        {"gradient_accumulation": 4, "gradient_accumulation_steps": 1},
        {"gradient_accumulation": 1, "gradient_accumulation_steps": -1},
        {"gradient_accumulation": 1, "gradient_accumulation_steps": 8},
        {"gradient_accumulation": 4, "gradient_accumulation_steps": "${ACC}"},
    ],
)
def test_accumulation_combinations_the_toolkit_accepts(train: dict[str, Any]) -> None:
    view = primary(trainer(train=train)).train
    assert view.accumulation_conflict() is False


# --- processes ----------------------------------------------------------------------------


def test_only_diffusion_training_processes_are_viewed() -> None:
    view = view_of({"type": "to_folder", "output": "x"}, trainer(name="second"))
    assert view.other_processes == ((0, "to_folder"),)
    (process,) = view.processes
    assert view.primary is process
    assert (process.index, process.type, process.name) == (1, "sd_trainer", "second")
    assert process.path("train", "batch_size") == ("config", "process", 1, "train", "batch_size")
    assert (view.name, view.job) == ("demo", "extension")


def test_other_processes_are_not_validated() -> None:
    view = view_of({"type": "extract", "train": "not a mapping"})
    assert view.processes == ()
    assert view.primary is None


@pytest.mark.parametrize("kind", TRAINING_PROCESS_TYPES)
def test_every_trainer_type_is_a_training_process(kind: str) -> None:
    assert view_of({"type": kind}).processes[0].type == kind


def test_first_sample_section_is_read() -> None:
    process = primary(trainer(first_sample={"width": 256}))
    assert process.first_sample_section is True
    assert process.first_sample is not None
    assert process.first_sample.width == 256
    assert process.first_sample.path == ("config", "process", 0, "first_sample")
    assert process.sample is None


@pytest.mark.parametrize(
    ("network", "rank"),
    [({"rank": 8, "linear": 32}, 8), ({"linear": 32}, 32), ({"type": "lora"}, 4), (None, None)],
)
def test_network_rank_prefers_rank_over_linear(network: Any, rank: int | None) -> None:
    assert primary(trainer(network=network)).network_rank == rank


# --- datasets -----------------------------------------------------------------------------


def test_resolution_may_be_one_number_or_a_list() -> None:
    process = primary(trainer(datasets=[{"resolution": 768}, {"resolution": [512, 1024]}]))
    one, many = process.datasets
    assert (one.index, one.resolution, one.resolution_is_list) == (0, (768,), False)
    assert (many.index, many.resolution, many.resolution_is_list) == (1, (512, 1024), True)


@pytest.mark.parametrize(
    ("dataset", "video"),
    [
        ({"num_frames": 1}, False),
        ({"num_frames": 41}, True),
        ({"auto_frame_count": True}, True),
        ({"num_frames": "${FRAMES}"}, False),
    ],
)
def test_dataset_is_video_by_frames_or_auto_frame_count(
    dataset: dict[str, Any], video: bool
) -> None:
    assert primary(trainer(datasets=[dataset])).datasets[0].is_video is video


# --- model arch ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "flags"),
    [
        ({"is_xl": True}, {"is_xl"}),
        ({"is_flux": True, "is_v_pred": True}, {"is_flux", "is_v_pred"}),
        ({"is_v2": True, "is_xl": True}, {"is_v2", "is_xl"}),
        ({"is_xl": False, "is_v_pred": True}, {"is_v_pred"}),
        ({"arch": "wan21:14b"}, set()),
        ({"arch": "qwen_image", "is_flux": True}, {"is_flux"}),
        ({}, set()),
    ],
)
def test_legacy_flags_and_the_keys_that_choose_the_arch(
    model: dict[str, Any], flags: set[str]
) -> None:
    view = primary(trainer(model=model)).model
    assert view.legacy_flags == flags
    expected = dict.fromkeys(flags, True) | ({"arch": model["arch"]} if "arch" in model else {})
    assert view.arch_keys() == expected


# --- samples ------------------------------------------------------------------------------


def test_sample_items_hold_only_their_own_overrides() -> None:
    sample = primary(
        trainer(
            sample={
                "width": 1024,
                "samples": [{"prompt": "a cat"}, {"prompt": "a dog", "height": 768}],
            }
        )
    ).sample
    assert sample is not None
    first, second = sample.samples
    assert (first.prompt, first.width, first.height, first.num_frames) == (
        "a cat",
        None,
        None,
        None,
    )
    assert (second.width, second.height) == (None, 768)
    assert second.is_set("height") and not second.is_set("width")


def test_overrides_list_item_fields_then_prompt_flags() -> None:
    sample = primary(
        trainer(
            sample={
                "samples": [
                    {"prompt": "plain"},
                    {"prompt": "a dog --w 640 --h 480 --seed 3", "width": 1280, "num_frames": 41},
                ]
            }
        )
    ).sample
    assert sample is not None
    base = ("config", "process", 0, "sample", "samples", 1)
    assert sample.overrides() == (
        SampleOverride(sample=1, field="width", source="field", path=(*base, "width"), value=1280),
        SampleOverride(
            sample=1, field="num_frames", source="field", path=(*base, "num_frames"), value=41
        ),
        SampleOverride(
            sample=1,
            field="width",
            source="prompt_flag",
            path=(*base, "prompt"),
            flag="--w",
            value=640,
        ),
        SampleOverride(
            sample=1,
            field="height",
            source="prompt_flag",
            path=(*base, "prompt"),
            flag="--h",
            value=480,
        ),
    )


def test_legacy_prompts_carry_flags_too() -> None:
    sample = primary(
        trainer(sample={"prompts": ["a cat", "a clip --frames 81", "a clip --num_frames 33"]})
    ).sample
    assert sample is not None
    assert sample.prompts == ("a cat", "a clip --frames 81", "a clip --num_frames 33")
    prompts = ("config", "process", 0, "sample", "prompts")
    assert [(o.sample, o.field, o.path, o.flag, o.value) for o in sample.overrides()] == [
        (1, "num_frames", (*prompts, 1), "--frames", 81),
        (2, "num_frames", (*prompts, 2), "--num_frames", 33),
    ]


def test_samples_win_over_legacy_prompts_like_in_the_toolkit() -> None:
    sample = primary(
        trainer(sample={"samples": [{"prompt": "new"}], "prompts": ["old --w 2048"]})
    ).sample
    assert sample is not None
    assert sample.overrides() == ()
    assert sample.prompt_paths() == (
        (("config", "process", 0, "sample", "samples", 0, "prompt"), "new"),
    )


@pytest.mark.parametrize(
    ("prompt", "flags"),
    [
        ("a cat", []),
        ("a cat --w 768", [("w", "768")]),
        ("a cat --w 768 --h 512 --n blurry", [("w", "768"), ("h", "512")]),
        ("a--b", []),
        ("a cat --w768", []),
        ("a clip --frames 41 --fps 16", [("frames", "41")]),
    ],
)
def test_size_flags_split_like_the_toolkit(prompt: str, flags: list[tuple[str, str]]) -> None:
    assert list(size_flags(prompt)) == flags


# --- real configs -------------------------------------------------------------------------


def _views(paths: list[Path]) -> dict[str, JobView]:
    views: dict[str, JobView] = {}
    for path in paths:
        try:
            tree = load_yaml(path.read_text(encoding="utf-8"))
        except yaml.YAMLError:
            continue  # one upstream example has an unterminated quote
        views[path.name] = build_view(tree, file=str(path), locate=nowhere)
    return views


def _assert_every_view_has_a_training_process(views: dict[str, JobView]) -> None:
    for name, view in views.items():
        assert view.primary is not None, name
        assert view.placeholders == (), name


def test_every_own_config_builds_a_view() -> None:
    views = _views(own_configs())
    assert len(views) == len(own_configs()) >= 7
    _assert_every_view_has_a_training_process(views)


def test_own_configs_read_as_expected() -> None:
    views = _views(own_configs())
    flux = views["flux_portrait_24gb.yaml"].processes[0]
    assert flux.train.lr == pytest.approx(1e-4)
    assert flux.model.arch_keys() == {"is_flux": True}
    assert flux.datasets[0].resolution == (512, 768, 1024)
    assert flux.network_rank == 32
    assert flux.sample is not None and flux.sample.width == 1024

    wan = views["wan22_i2v_clips.yml"].processes[0]
    assert wan.model.qtype_base == "uint4"
    assert wan.model.qtype_adapter is not None
    assert wan.model.qtype_adapter.endswith("wan22_14b_i2v_torchao_uint4.safetensors")
    assert [d.num_frames for d in wan.datasets] == [81, 1]

    sdxl = views["sdxl_style_12gb.yaml"].processes[0]
    assert sdxl.model.arch_keys() == {"is_xl": True}
    assert sdxl.train.batch_size == 4 and sdxl.train.gradient_checkpointing is False


@needs_shared
def test_every_shipped_example_builds_a_view() -> None:
    views = _views(shared_examples())
    assert len(views) >= 20
    _assert_every_view_has_a_training_process(views)


@needs_shared
def test_shipped_examples_read_as_expected() -> None:
    views = _views(shared_examples())
    flux = views["train_lora_flux_24gb.yaml"].processes[0]
    assert flux.train.lr == pytest.approx(1e-4)
    assert flux.model.arch_keys() == {"is_flux": True}
    assert flux.datasets[0].resolution == (512, 768, 1024)
    assert flux.network_rank == 16
    assert flux.sample is not None and flux.sample.width == 1024

    wan = views["train_lora_wan22_14b_24gb.yaml"].processes[0]
    assert wan.model.qtype_base == "uint4"
    assert wan.model.qtype_adapter is not None
    assert wan.model.qtype_adapter.endswith("wan22_14b_t2i_torchao_uint4.safetensors")

    legacy = views["sd_trainer_train.example.yaml"].processes[0]
    assert legacy.type == "textual_inversion_trainer"
    assert legacy.train.batch_size == 4


# --- robustness ---------------------------------------------------------------------------

_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 5000)
    | st.floats(allow_nan=False)
    | st.sampled_from(["", "abc", "${X}", "[name]", "a --w 9", "a --w x"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)
_KEYS = st.sampled_from(
    [
        ("train", "batch_size"),
        ("train", "gradient_checkpointing"),
        ("train", "lr"),
        ("model", "qtype"),
        ("model", "quantize"),
        ("sample", "samples"),
        ("sample", "prompts"),
        ("sample", "width"),
        ("network", "rank"),
    ]
)


@settings(max_examples=150, deadline=None)
@given(key=_KEYS, value=_JSON_VALUES, resolution=_JSON_VALUES)
def test_any_value_gives_a_view_or_a_config_error(
    key: tuple[str, str], value: Any, resolution: Any
) -> None:
    section, name = key
    process = trainer(**{section: {name: value}}, datasets=[{"resolution": resolution}])
    try:
        view = view_of(process)
    except ConfigError as error:
        assert error.message.startswith("config.process[0].")
        assert "\n" not in error.one_line()
    else:
        assert view.primary is not None


def test_rendered_size_reads_the_prompts_once_for_all_samples(monkeypatch) -> None:
    """Issue 12, item 12: one pass over the overrides, not one per sample (quadratic)."""
    import oom_wizard.formats.view as view_module

    prompts = [f"p{i} --w 640" for i in range(200)]
    tree = {
        "job": "extension",
        "config": {
            "name": "t",
            "process": [{"type": "sd_trainer", "sample": {"prompts": prompts}}],
        },
    }
    view = view_module.build_view(tree, file="job.yaml", locate=lambda _path: None)
    sample = view.processes[0].sample
    assert sample is not None
    calls = 0
    real = view_module.size_flags

    def counted(text: str) -> Any:
        nonlocal calls
        calls += 1
        return real(text)

    monkeypatch.setattr(view_module, "size_flags", counted)

    sizes = [sample.rendered_size(i) for i in range(len(prompts))]

    assert all(size["width"] == 640 for size in sizes)
    assert calls == len(prompts)


# --- memory-relevant options (issue 18, issue 23) ------------------------------------------


def test_memory_options_take_the_toolkit_defaults_when_absent() -> None:
    process = primary(trainer(network={}, datasets=[{}]))
    train, model, network = process.train, process.model, process.network
    assert not any(
        (
            train.train_text_encoder,
            train.diff_output_preservation,
            train.blank_prompt_preservation,
            train.inverted_mask_prior,
            train.do_prior_divergence,
            train.use_ema,
        )
    )
    assert (model.te_device, model.vae_device, model.te_dtype, model.vae_dtype) == (None,) * 4
    assert model.text_encoder_bits == 16
    assert network is not None
    assert (network.type, network.conv, network.lokr_factor, network.lokr_full_rank) == (
        "lora",
        None,
        -1,
        True,
    )
    assert process.adapter is None
    assert process.datasets[0].control_images == 0


def test_memory_options_are_read_as_the_file_sets_them() -> None:
    process = primary(
        trainer(
            train={
                "train_text_encoder": True,
                "diff_output_preservation": True,
                "blank_prompt_preservation": True,
                "inverted_mask_prior": True,
                "do_prior_divergence": True,
                "ema_config": {"use_ema": True, "ema_decay": 0.99},
            },
            model={
                "te_device": "cpu",
                "vae_device": "cpu",
                "te_dtype": "fp8",
                "text_encoder_bits": 4,
            },
            network={"type": "lokr", "lokr_factor": 8, "conv": 16, "linear": 32},
            adapter={"type": "control_lora", "num_control_images": 2},
        )
    )
    train, model, network = process.train, process.model, process.network
    assert train.train_text_encoder and train.diff_output_preservation
    assert train.blank_prompt_preservation and train.inverted_mask_prior
    assert train.do_prior_divergence and train.use_ema is True
    assert (model.te_device, model.vae_device, model.te_dtype) == ("cpu", "cpu", "fp8")
    assert model.text_encoder_bits == 4
    assert network is not None
    assert (network.type, network.lokr_factor, network.conv, process.network_rank) == (
        "lokr",
        8,
        16,
        32,
    )
    assert process.adapter is not None and process.adapter.num_control_images == 2


@pytest.mark.parametrize(
    ("dataset", "count"),
    [
        ({"control_path": "/data/control"}, 1),
        ({"control_path": ""}, 0),
        ({"control_path": ["/a", "/b", "/c"]}, 3),
        ({"control_path": "/a", "control_path_1": "/x", "control_path_3": "/z"}, 2),
        ({"control_path_2": "/y"}, 1),
        ({}, 0),
    ],
)
def test_control_images_are_counted_as_the_toolkit_reads_the_paths(
    dataset: dict[str, Any], count: int
) -> None:
    assert primary(trainer(datasets=[dataset])).datasets[0].control_images == count


def test_a_wrong_ema_flag_names_its_nested_path() -> None:
    error = error_of(job_tree(trainer(train={"ema_config": {"use_ema": "yes"}})))
    assert "config.process[0].train.ema_config.use_ema is 'yes'; expected true or false" in str(
        error
    )


def test_the_new_memory_options_are_fields_set_accepts() -> None:
    from oom_wizard.formats.fields import known_field_keys

    assert {
        "train.ema_config.use_ema",
        "train.diff_output_preservation",
        "model.te_device",
        "model.text_encoder_bits",
        "network.conv",
        "network.lokr_factor",
        "adapter.num_control_images",
        "datasets[].control_path_2",
    } <= known_field_keys()
    assert "train.ema_config" not in known_field_keys()


# --- issue 23's settings ---------------------------------------------------------------------


def test_validation_config_takes_the_toolkit_s_defaults() -> None:
    train = primary(trainer(train={"validation_config": {"validation_items": []}})).train
    validation = train.validation_config
    assert validation is not None
    assert (validation.resolution, validation.validate_every_n_steps) == (512, 10)
    assert validation.validation_sigmas == (1.0, 0.75, 0.5, 0.25)
    assert primary(trainer()).train.validation_config is None
    sigmas = primary(trainer(train={"validation_config": {"validation_sigmas": [1, 0.5]}}))
    assert sigmas.train.validation_config.validation_sigmas == (1.0, 0.5)  # type: ignore[union-attr]


def test_swapping_and_the_attention_backend_are_read() -> None:
    train = primary(trainer()).train
    assert (train.attention_backend, train.do_paramiter_swapping) == (None, False)
    assert train.paramiter_swapping_factor == 0.1
    train = primary(
        trainer(train={"attention_backend": "_native_math", "do_paramiter_swapping": True})
    ).train
    assert (train.attention_backend, train.do_paramiter_swapping) == ("_native_math", True)


@pytest.mark.parametrize(
    ("validation", "expected"),
    [
        ({"validation_sigmas": "0.5"}, "a non-empty list of numbers"),
        ({"validation_sigmas": []}, "a non-empty list of numbers"),
        ({"resolution": 0}, "a whole number >= 1"),
    ],
)
def test_a_bad_validation_value_is_one_line_at_its_place(
    validation: dict[str, Any], expected: str
) -> None:
    key = next(iter(validation))
    path = f"config.process[0].train.validation_config.{key}"
    error = error_of(job_tree(trainer(train={"validation_config": validation})), {path: (12, 7)})
    text = str(error)
    assert "\n" not in text and path in text and expected in text
