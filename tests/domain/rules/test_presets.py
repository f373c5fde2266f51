"""Tests of the shipped presets and of their loader, ``oom_wizard.rules.catalog``."""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any, Final

import pytest
import yaml
from hypothesis import given, strategies as st

from oom_wizard.errors import PresetError
from oom_wizard.paths import parse_path
from oom_wizard.rules.catalog import (
    MODEL_KINDS,
    MOMENTS,
    VALIDATION_RUN,
    ArchFacts,
    FrameGrid,
    ModelKind,
    Moment,
    Presets,
    StepId,
    generic_field_key,
    load_presets,
)
from oom_wizard.rules.plan import build_plan, check_steps
from oom_wizard.rules.solver import loss_of, slows
from tests.support.plan_support import document, job

UI_IMAGE_ARCHS = [
    "anima", "flux", "flux_kontext", "flex1", "flex2", "chroma", "zeta_chroma", "lumina2",
    "qwen_image", "qwen_image:2512", "qwen_image_edit", "qwen_image_edit_plus",
    "qwen_image_edit_plus:2511", "hidream", "hidream_e1", "sdxl", "sd15", "omnigen2", "flux2",
    "zimage:turbo", "zimage", "zimage:deturbo", "flux2_klein_4b", "ernie_image", "flux2_klein_9b",
    "ace_step_15_xl", "ace_step_15", "nucleus_image", "hidream_o1", "zimage_l2p", "ideogram4",
    "prx_pixel", "krea2", "krea2:turbo", "krea2:o_edit", "krea2:o_edit_turbo", "mageflow",
    "mageflow_edit", "boogu_image", "boogu_image_edit",
]  # fmt: skip
UI_VIDEO_ARCHS = [
    "wan21:1b", "wan21_i2v:14b480p", "wan21_i2v:14b", "wan21:14b", "wan22_14b:t2v",
    "wan22_14b_i2v", "wan22_5b", "minimax_h3", "minimax_h3_ref2va", "ltx2", "ltx2.3", "ltx2.5",
]  # fmt: skip
PYTHON_ONLY_ARCHS = [
    "chroma_radiance", "f-lite", "cogview4", "wan21", "wan21_i2v", "sd1", "sd2", "sd3", "pixart",
    "pixart_sigma", "auraflow", "vega", "ssd",
]  # fmt: skip

WAN = FrameGrid(step=4, offset=1)
LTX = FrameGrid(step=8, offset=1)
MINIMAX = FrameGrid(step=17, offset=5)


@pytest.fixture(scope="module")
def presets() -> Presets:
    return load_presets()


def facts_of(presets: Presets, arch: str) -> ArchFacts:
    """The facts of an arch the shipped presets must know."""
    facts = presets.arch(arch)
    assert facts is not None, arch
    return facts


@pytest.fixture
def preset_copy(tmp_path: Path) -> Path:
    """A writable copy of the shipped preset folder."""
    source = resources.files("oom_wizard.presets")
    for name in ("archs.yaml", "ladders.yaml", "levers.yaml", "memory.yaml", "ui_fields.yaml"):
        (tmp_path / name).write_text((source / name).read_text(encoding="utf-8"), "utf-8")
    return tmp_path


def test_vocabulary_is_the_designs() -> None:
    assert MOMENTS == ("loading", "early_steps", "sampling", "intermittent", "environment")
    assert MODEL_KINDS == ("image", "video")


def test_default_load_is_cached() -> None:
    assert load_presets() is load_presets()


def test_an_explicit_folder_loads_the_same_data(preset_copy: Path, presets: Presets) -> None:
    assert load_presets(preset_copy) == presets


# --- architectures ---------------------------------------------------------------------------


@pytest.mark.parametrize("arch", UI_IMAGE_ARCHS + UI_VIDEO_ARCHS + PYTHON_ONLY_ARCHS)
def test_every_reference_arch_is_present_under_its_own_id(presets: Presets, arch: str) -> None:
    facts = presets.arch(arch)
    assert facts is not None
    assert facts.id == arch


def test_ui_archs_and_python_only_archs_are_told_apart(presets: Presets) -> None:
    assert all(facts_of(presets, a).in_ui for a in UI_IMAGE_ARCHS + UI_VIDEO_ARCHS)
    assert not any(facts_of(presets, a).in_ui for a in PYTHON_ONLY_ARCHS)


@pytest.mark.parametrize(
    ("arch", "kind", "group"),
    [
        ("qwen_image_edit", "image", "instruction"),
        ("krea2:o_edit", "image", "experimental"),
        ("wan22_14b_i2v", "video", "video"),
        ("ace_step_15", "audio", "audio"),
        ("ltx2.3", "video", "video"),
        ("sdxl", "image", "image"),
    ],
)
def test_kinds_and_groups(presets: Presets, arch: str, kind: str, group: str) -> None:
    facts = presets.arch(arch)
    assert facts is not None
    assert (facts.kind, facts.group) == (kind, group)


def test_audio_archs_use_the_image_ladder(presets: Presets) -> None:
    facts = presets.arch("ace_step_15_xl")
    assert facts is not None
    assert facts.ladder_kind == "image"


@pytest.mark.parametrize(
    ("arch", "expected"),
    [
        ("wan21:14b", "wan21:14b"),
        ("wan21:1b", "wan21:1b"),
        ("wan21:2b", "wan21"),
        ("zimage:turbo", "zimage:turbo"),
        ("zimage:other", "zimage"),
        ("wan22_14b", "wan22_14b:t2v"),
        ("flex1", "flex1"),
    ],
)
def test_variant_lookup(presets: Presets, arch: str, expected: str) -> None:
    facts = presets.arch(arch)
    assert facts is not None
    assert facts.id == expected


def test_flex1_is_the_flux_family(presets: Presets) -> None:
    facts = presets.arch("flex1")
    assert facts is not None
    assert (facts.python_arch, facts.legacy_flag, facts.legacy_class) == ("flux", "is_flux", True)


@pytest.mark.parametrize("arch", [None, "", "no_such_arch", ":14b"])
def test_unknown_archs_are_none(presets: Presets, arch: str | None) -> None:
    assert presets.arch(arch) is None


@pytest.mark.parametrize(
    ("flag", "arch"),
    [
        ("is_v2", "sd2"),
        ("is_v3", "sd3"),
        ("is_xl", "sdxl"),
        ("is_pixart", "pixart"),
        ("is_pixart_sigma", "pixart_sigma"),
        ("is_auraflow", "auraflow"),
        ("is_flux", "flux"),
        ("is_lumina2", "lumina2"),
        ("is_vega", "vega"),
        ("is_ssd", "ssd"),
    ],
)
def test_legacy_flags(presets: Presets, flag: str, arch: str) -> None:
    facts = presets.arch_from_model({"name_or_path": "x", flag: True})
    assert facts is not None
    assert facts.id == arch
    assert facts.legacy_flag == flag


def test_arch_from_model_prefers_the_arch_key_and_the_toolkits_flag_order(
    presets: Presets,
) -> None:
    by_arch = presets.arch_from_model({"arch": "wan21:14b", "is_flux": True})
    by_flags = presets.arch_from_model({"is_flux": True, "is_xl": True})
    assert by_arch is not None and by_arch.id == "wan21:14b"
    assert by_flags is not None and by_flags.id == "sdxl"
    assert presets.arch_from_model({"is_flux": False}) is None
    assert presets.arch_from_model({}) is None


def test_layer_offloading_support(presets: Presets) -> None:
    support = {
        a: facts_of(presets, a).layer_offloading for a in ("ace_step_15", "boogu_image", "wan21")
    }
    assert support == {"ace_step_15": "raises", "boogu_image": "ignored", "wan21": "works"}


def test_ui_boxes_follow_the_reference(presets: Presets) -> None:
    wan = presets.arch("wan21:14b")
    wan22 = presets.arch("wan22_14b:t2v")
    flux = presets.arch("flux")
    assert wan is not None and wan22 is not None and flux is not None
    assert (wan.ui_low_vram_box, wan.ui_layer_offloading_box) == (True, False)
    assert (wan22.ui_low_vram_box, wan22.ui_layer_offloading_box) == (True, True)
    assert (flux.ui_low_vram_box, flux.ui_layer_offloading_box) == (False, False)


def test_low_memory_recipes(presets: Presets) -> None:
    minimax = presets.arch("minimax_h3")
    ltx25 = presets.arch("ltx2.5")
    ace = presets.arch("ace_step_15")
    assert minimax is not None and ltx25 is not None and ace is not None
    assert (minimax.low_memory.qtype, minimax.low_memory.qtype_te) == ("convrot8", "nvfp4")
    assert (ltx25.low_memory.qtype, ltx25.low_memory.qtype_te) == ("convrot8", "convrot8")
    assert ace.low_memory.layer_offloading is None
    offload = {c.field: c.value for c in minimax.low_memory.changes()}
    assert offload["model.low_vram"] is True
    assert offload["model.layer_offloading"] is True
    only = minimax.low_memory.changes(("qtype", "qtype_te"))
    assert [(c.field, c.value) for c in only] == [
        ("model.qtype", "convrot8"),
        ("model.qtype_te", "nvfp4"),
    ]


def test_recipes_only_change_fields_of_the_low_memory_steps(presets: Presets) -> None:
    allowed = {
        field
        for step in ("low_vram", "quantize", "text_encoder", "layer_offloading")
        for field in presets.step(StepId(step)).fields
    }
    for facts in presets.archs:
        assert {change.field for change in facts.low_memory.changes()} <= allowed, facts.id


def test_parameter_counts_name_their_source(presets: Presets) -> None:
    # The counts live in memory.yaml alone; an arch takes its family's.
    counted = [facts for facts in presets.archs if presets.memory_of(facts) is not None]
    assert len(counted) >= 20
    assert all(facts.params is None for facts in presets.archs)
    flux, wan22 = (presets.memory_of(presets.arch(a)) for a in ("flux", "wan22_14b:t2v"))
    assert flux and flux.params.transformer == 11.901 and flux.params.source  # exact count
    assert wan22 and wan22.params.experts == 2


def test_levers_bytes_per_weight(presets: Presets) -> None:
    levers = presets.levers
    assert levers.weight_bytes("bf16") == 2 and levers.weight_bytes(None) == 4
    assert levers.quantized_bytes(None) == 1  # qfloat8, the toolkit's default
    assert levers.quantized_bytes("uint4|ostris/accuracy_recovery_adapters/x.safetensors") == 0.5
    assert levers.quantized_bytes("nvfp4") == 0.5
    adamw = levers.optimizer("AdamW")
    assert adamw is not None and adamw.eight_bit == "adamw8bit"
    eight = levers.optimizer("adamw8bit")
    assert eight is not None and eight.eight_bit is None


def test_an_eight_bit_optimizer_the_table_lacks_is_an_error(preset_copy: Path) -> None:
    levers = preset_copy / "levers.yaml"
    text = levers.read_text(encoding="utf-8")
    levers.write_text(text.replace("eight_bit: lion8bit", "eight_bit: lion4bit"), "utf-8")
    with pytest.raises(PresetError, match="lion4bit"):
        load_presets(preset_copy)


@pytest.mark.parametrize(
    ("arch", "grid", "temporal", "spatial", "sample_frames"),
    [
        ("wan21:14b", (4, 1), 4, 8, 41),
        ("wan22_5b", (4, 1), 4, 16, 121),
        ("ltx2", (8, 1), 8, 32, 121),
        ("minimax_h3", (17, 5), 3.4, 16, 107),
    ],
)
def test_video_facts(
    presets: Presets,
    arch: str,
    grid: tuple[int, int],
    temporal: float,
    spatial: int,
    sample_frames: int,
) -> None:
    facts = presets.arch(arch)
    assert facts is not None and facts.frames is not None
    assert (facts.frames.step, facts.frames.offset) == grid
    assert facts.temporal_compression == temporal
    assert facts.spatial_compression == spatial
    assert facts.default_sample_frames == sample_frames


def test_only_video_archs_have_frames(presets: Presets) -> None:
    for facts in presets.archs:
        assert (facts.frames is not None) == (facts.kind == "video"), facts.id


# --- frame grids -----------------------------------------------------------------------------


def test_wan_halving_walks_81_41_21_9() -> None:
    assert [WAN.halve(n) for n in (81, 41, 21)] == [41, 21, 9]


@pytest.mark.parametrize(
    ("grid", "frames", "half"),
    [(LTX, 121, 57), (LTX, 57, 25), (LTX, 9, 1), (MINIMAX, 107, 39), (MINIMAX, 39, 5)],
)
def test_halving_on_other_grids(grid: FrameGrid, frames: int, half: int) -> None:
    assert grid.halve(frames) == half


@pytest.mark.parametrize(
    ("grid", "frames", "snapped"),
    [
        (WAN, 80, 77),
        (WAN, 81, 81),
        (WAN, 0, 1),
        (LTX, 120, 113),
        (MINIMAX, 100, 90),
        (MINIMAX, 4, 5),
    ],
)
def test_snap_down(grid: FrameGrid, frames: int, snapped: int) -> None:
    assert grid.snap_down(frames) == snapped


def test_is_valid() -> None:
    assert [n for n in range(30) if MINIMAX.is_valid(n)] == [5, 22]
    assert [n for n in range(12) if WAN.is_valid(n)] == [1, 5, 9]


grids = st.sampled_from([WAN, LTX, MINIMAX])


@given(grid=grids, frames=st.integers(min_value=1, max_value=2000))
def test_snap_down_lands_on_the_grid_at_or_below_the_input(grid: FrameGrid, frames: int) -> None:
    snapped = grid.snap_down(frames)
    assert grid.is_valid(snapped)
    assert snapped <= max(frames, grid.smallest)
    assert snapped + grid.step > frames


@given(grid=grids, frames=st.integers(min_value=1, max_value=2000))
def test_halve_lands_on_the_grid_and_shrinks(grid: FrameGrid, frames: int) -> None:
    half = grid.halve(frames)
    assert grid.is_valid(half)
    assert half <= max(frames, grid.smallest)
    assert half <= max(frames / 2 + 0.5, grid.smallest)
    if frames > grid.smallest:
        assert half < frames


# --- ladders, moments, steps -----------------------------------------------------------------


def test_ladders_match_the_design(presets: Presets) -> None:
    assert presets.ladder("image") == (
        "gradient_checkpointing", "batch_size", "top_bucket", "sampling", "low_vram",
    )  # fmt: skip
    assert presets.ladder("video") == (
        "gradient_checkpointing", "num_frames", "batch_size", "top_bucket", "sampling", "low_vram",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("moment", "image", "video"),
    [
        (
            "loading",
            ("sampling", "low_vram", "quantize", "text_encoder"),
            ("sampling", "low_vram", "quantize", "text_encoder"),
        ),
        (
            "early_steps",
            ("gradient_checkpointing", "batch_size", "top_bucket"),
            ("gradient_checkpointing", "batch_size", "top_bucket"),
        ),
        ("sampling", ("sampling",), ("sampling",)),
        ("intermittent", ("top_bucket",), ("num_frames", "top_bucket")),
        ("environment", (), ()),
    ],
)
def test_moment_first_steps(
    presets: Presets, moment: Moment, image: tuple[str, ...], video: tuple[str, ...]
) -> None:
    info = presets.moment(moment)
    assert (info.first("image"), info.first("video")) == (image, video)
    assert info.words and info.cause and info.label


def test_loading_words_are_the_users(presets: Presets) -> None:
    words = presets.moment("loading").words
    assert "before step 1" in words and "baseline" in words
    assert "1-10" in presets.moment("early_steps").words


def test_rollback_order_puts_the_moment_first_then_the_ladder(presets: Presets) -> None:
    deeper = ("attention", "smaller_bucket", "quantize", "text_encoder")
    training_only = (
        "extra_passes", "control_images", "layer_offloading", "placement", "lora_rank",
        "optimizer_8bit",
    )  # fmt: skip
    assert presets.rollback_order("intermittent", "video") == (
        "num_frames", "top_bucket", "gradient_checkpointing", "batch_size", "sampling", "low_vram",
        *deeper, *training_only,
    )  # fmt: skip
    assert presets.rollback_order("early_steps", "image") == (
        *presets.ladder("image"), *deeper, *training_only,
    )  # fmt: skip
    assert presets.rollback_order("sampling", "image") == (
        "sampling", "gradient_checkpointing", "batch_size", "top_bucket", "low_vram", *deeper,
        "layer_offloading", "placement",
    )  # fmt: skip
    assert presets.rollback_order("environment", "video") == ()


@pytest.mark.parametrize("kind", MODEL_KINDS)
@pytest.mark.parametrize("moment", MOMENTS)
def test_rollback_order_never_repeats_a_step(
    presets: Presets, moment: Moment, kind: ModelKind
) -> None:
    order = presets.rollback_order(moment, kind)
    assert len(order) == len(set(order))


def test_every_step_has_a_title_a_two_line_why_and_fields(presets: Presets) -> None:
    for step_id, info in presets.steps.items():
        assert info.title and len(info.title) <= 40, step_id
        assert len(info.why.splitlines()) == 2, step_id
        assert info.fields, step_id


# --- the step registry: ladders.yaml's steps, one builder each in rules/plan.py ---------------

CROP: Final = {
    "title": "Crop the buckets",
    "loses": "quality",
    "why": "One line of why.\nAnd its second line.",
    "fields": ["datasets[].resolution"],
}


def _ladders(folder: Path, edit: Callable[[dict[str, Any]], object]) -> Path:
    """Rewrite the copy's ladders.yaml through ``edit`` of its data; return the folder."""
    path = folder / "ladders.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    edit(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return folder


def _gain_crop(data: dict[str, Any], deeper: bool = True) -> None:
    data["steps"]["bucket_crop"] = CROP
    if deeper:
        data["deeper"]["image"].append("bucket_crop")


def _lose_placement(data: dict[str, Any]) -> None:
    del data["steps"]["placement"]
    for kind in ("image", "video"):
        data["deeper"][kind].remove("placement")
    data["scale_up"].remove("placement")


def test_the_steps_and_the_builders_are_the_same_ids(presets: Presets) -> None:
    check_steps(presets)  # the shipped pair; the two tests below show it refuses a difference


def test_a_step_without_a_builder_is_refused_with_what_to_write(preset_copy: Path) -> None:
    presets = load_presets(_ladders(preset_copy, _gain_crop))
    assert "bucket_crop" in presets.rollback_order("early_steps", "image")
    with pytest.raises(PresetError) as caught:
        check_steps(presets)
    assert caught.value.file is not None and caught.value.file.endswith("ladders.yaml")
    assert caught.value.message == (
        "steps.bucket_crop has no builder: write the function that proposes its edits in "
        'wizard/rules/plan.py and register it with @_builds("bucket_crop")'
    )
    with pytest.raises(PresetError, match="bucket_crop has no builder"):
        build_plan(document(job()), "early_steps", "image", presets=presets)


def test_a_builder_without_a_step_is_refused_with_what_to_add(preset_copy: Path) -> None:
    presets = load_presets(_ladders(preset_copy, _lose_placement))
    with pytest.raises(PresetError) as caught:
        build_plan(document(job()), "early_steps", "image", presets=presets)
    assert caught.value.message.startswith(
        "steps lacks placement, which wizard/rules/plan.py builds: add its entry"
    )


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda data: data["steps"].pop("placement"),
            "lacks placement, which ladders or deeper name",
        ),
        (lambda data: _gain_crop(data, deeper=False), "bucket_crop is on no ladder"),
        (
            lambda data: data["steps"]["top_bucket"].pop("loses"),
            "top_bucket does not say what it loses",
        ),
        (lambda data: data["training_only"].append("lora_rnak"), "lora_rnak: not a step"),
        (lambda data: data["scale_up"].append("bucket_crop"), "bucket_crop: not a step"),
    ],
)
def test_a_step_the_yaml_names_without_its_entry_is_refused_on_load(
    preset_copy: Path, edit: Callable[[dict[str, Any]], object], message: str
) -> None:
    with pytest.raises(PresetError, match=message) as caught:
        load_presets(_ladders(preset_copy, edit))
    assert caught.value.file is not None and caught.value.file.endswith("ladders.yaml")


def test_what_a_step_loses_is_its_entrys() -> None:
    assert (loss_of("batch_size"), loss_of("sampling"), loss_of("top_bucket")) == (
        "time",
        "samples",
        "quality",
    )
    assert slows("layer_offloading") and not slows("low_vram")
    assert loss_of("validation_run") == "quality"  # on no ladder: counted as the dearest


def test_scale_up_order(presets: Presets) -> None:
    assert presets.scale_up_order == (
        "validation_run", "smaller_bucket", "top_bucket", "sampling", "extra_passes",
        "control_images", "lora_rank", "batch_size", "num_frames", "optimizer_8bit", "placement",
        "layer_offloading", "text_encoder", "quantize", "low_vram", "gradient_checkpointing",
        "attention",
    )  # fmt: skip
    assert all(presets.step(step).restore for step in presets.scale_up_order)
    assert presets.step(VALIDATION_RUN).fields == ("train.steps",)


# --- UI hints --------------------------------------------------------------------------------


def test_every_field_a_step_may_change_has_a_ui_hint(presets: Presets) -> None:
    for step_id, info in presets.steps.items():
        for field in info.fields:
            assert presets.ui_hint(field), f"{step_id}: {field}"


@pytest.mark.parametrize(
    ("path", "hint"),
    [
        ("config.process[0].train.batch_size", "Training → Batch Size"),
        ("train.batch_size", "Training → Batch Size"),
        ("datasets[].resolution", "Datasets → Dataset N → Resolutions"),
        ("config.process[0].datasets[2].resolution", "Datasets → Dataset N → Resolutions"),
        ("train.gradient_checkpointing", "Show Advanced → train.gradient_checkpointing"),
        ("train.lr", None),
    ],
)
def test_ui_hint_accepts_paths_and_generic_keys(
    presets: Presets, path: str, hint: str | None
) -> None:
    assert presets.ui_hint(path) == hint
    if path.startswith("config."):
        assert presets.ui_hint(parse_path(path)) == hint


def test_ui_hint_depends_on_what_the_arch_shows(presets: Presets) -> None:
    assert presets.ui_hint("model.low_vram", presets.arch("qwen_image")) == (
        "Model → Options → Low VRAM"
    )
    assert presets.ui_hint("model.low_vram", presets.arch("flux")) == (
        "Show Advanced → model.low_vram"
    )
    assert presets.ui_hint("model.low_vram") == "Model → Options → Low VRAM"


def test_generic_field_key() -> None:
    assert generic_field_key(("config", "process", 1, "sample", "samples", 3, "width")) == (
        "sample.samples[].width"
    )
    assert generic_field_key("sample.samples[].width") == "sample.samples[].width"


# --- broken presets --------------------------------------------------------------------------


def _break(folder: Path, name: str, old: str, new: str) -> int:
    """Replace the first ``old`` in a preset file; return the 1-based line it was on."""
    path = folder / name
    text = path.read_text(encoding="utf-8")
    assert old in text
    line = text[: text.index(old)].count("\n") + 1
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return line


def test_a_bad_value_names_file_line_and_field(preset_copy: Path) -> None:
    line = _break(
        preset_copy, "archs.yaml", "frames: &wan_grid {step: 4,", "frames: &wan_grid {step: -4,"
    )
    with pytest.raises(PresetError) as caught:
        load_presets(preset_copy)
    error = caught.value
    assert error.file is not None and error.file.endswith("archs.yaml")
    assert error.line == line
    assert "step" in error.message
    assert "wan21:1b" in error.message
    assert str(error).startswith(f"{error.file}:{line}:")


def test_a_bad_literal_is_quoted(preset_copy: Path) -> None:
    line = _break(preset_copy, "archs.yaml", "kind: video", "kind: vidoe")
    with pytest.raises(PresetError) as caught:
        load_presets(preset_copy)
    assert caught.value.line == line
    assert "kind" in caught.value.message and "'vidoe'" in caught.value.message


def test_an_unknown_key_is_refused(preset_copy: Path) -> None:
    line = _break(
        preset_copy, "ladders.yaml", "  batch_size:\n    title:", "  batch_size:\n    titel:"
    )
    with pytest.raises(PresetError, match="titel") as caught:
        load_presets(preset_copy)
    assert caught.value.file is not None and caught.value.file.endswith("ladders.yaml")
    assert caught.value.line is not None and caught.value.line >= line


def test_a_step_field_without_a_ui_entry_is_refused(preset_copy: Path) -> None:
    line = _break(preset_copy, "ladders.yaml", "- train.batch_size", "- train.batchsize")
    with pytest.raises(PresetError, match=r"train\.batchsize") as caught:
        load_presets(preset_copy)
    assert caught.value.line == line


def test_a_misspelled_moment_is_refused_at_its_key(preset_copy: Path) -> None:
    line = _break(preset_copy, "ladders.yaml", "  intermittent:", "  intermitent:")
    with pytest.raises(PresetError, match="intermitent") as caught:
        load_presets(preset_copy)
    assert caught.value.line == line


def test_a_duplicate_key_is_refused(preset_copy: Path) -> None:
    line = _break(preset_copy, "ui_fields.yaml", "  train.steps:", "  train.batch_size:")
    with pytest.raises(PresetError, match="twice") as caught:
        load_presets(preset_copy)
    assert caught.value.line == line


def test_broken_yaml_is_located(preset_copy: Path) -> None:
    _break(preset_copy, "ui_fields.yaml", "fields:", "fields: [")
    with pytest.raises(PresetError, match="not valid YAML") as caught:
        load_presets(preset_copy)
    assert caught.value.line is not None


def test_a_missing_file_is_named(preset_copy: Path) -> None:
    (preset_copy / "ladders.yaml").unlink()
    with pytest.raises(PresetError, match="cannot read") as caught:
        load_presets(preset_copy)
    assert caught.value.file is not None and caught.value.file.endswith("ladders.yaml")


def test_a_first_step_outside_its_ladder_is_refused(preset_copy: Path) -> None:
    _break(preset_copy, "ladders.yaml", "      image: [top_bucket]", "      image: [num_frames]")
    with pytest.raises(PresetError, match="not in the image ladder") as caught:
        load_presets(preset_copy)
    assert caught.value.file is not None and caught.value.file.endswith("ladders.yaml")


def test_a_repeated_arch_id_is_refused(preset_copy: Path) -> None:
    _break(preset_copy, "archs.yaml", "  - id: wan22_5b\n", "  - id: wan21\n")
    with pytest.raises(PresetError, match="more than once: wan21"):
        load_presets(preset_copy)


def test_an_arch_that_tiles_its_sample_decode_needs_its_familys_tiled_figures(
    preset_copy: Path,
) -> None:
    # Qwen-Image's family has no tiled decode figures.
    _break(
        preset_copy,
        "archs.yaml",
        "    python_arch: qwen_image\n",
        "    python_arch: qwen_image\n    sample_decode_tiled_by: [vae_tiling]\n",
    )
    with pytest.raises(PresetError, match=r"vae\.tiled_decode"):
        load_presets(preset_copy)


def test_the_step_limits_are_data(presets: Presets) -> None:
    limits = presets.limits
    assert limits.resolution_rungs == (1536, 1280, 1024, 768, 512)
    assert limits.keep_buckets_up_to == 768
    assert (limits.sample_long_side.of("image"), limits.sample_long_side.of("video")) == (768, 512)
    assert presets.frame_grid(None) == FrameGrid(step=8, offset=1)
    assert presets.frame_grid(facts_of(presets, "wan21:14b")) == WAN


def test_resolution_rungs_that_do_not_go_down_are_refused(preset_copy: Path) -> None:
    line = _break(preset_copy, "ladders.yaml", "[1536, 1280, 1024,", "[1536, 1024, 1280,")
    with pytest.raises(PresetError, match="largest first") as caught:
        load_presets(preset_copy)
    assert caught.value.line == line


def test_a_sample_cap_off_the_size_multiple_is_refused(preset_copy: Path) -> None:
    _break(preset_copy, "ladders.yaml", "{image: 768, video: 512}", "{image: 770, video: 512}")
    with pytest.raises(PresetError, match="multiples of size_multiple 16"):
        load_presets(preset_copy)


def test_an_unknown_arch_grid_off_its_compression_is_refused(preset_copy: Path) -> None:
    _break(
        preset_copy,
        "archs.yaml",
        "  frames: {step: 8, offset: 1}",
        "  frames: {step: 4, offset: 1}",
    )
    with pytest.raises(PresetError, match="temporal_compression"):
        load_presets(preset_copy)


def test_environment_checks_may_not_be_empty(preset_copy: Path) -> None:
    text = (preset_copy / "ladders.yaml").read_text(encoding="utf-8")
    head = text[: text.index("environment_checks:")]
    (preset_copy / "ladders.yaml").write_text(head + "environment_checks: []\n", "utf-8")
    with pytest.raises(PresetError, match="environment_checks"):
        load_presets(preset_copy)


def test_match_target_res_is_in_the_model_options_of_the_archs_that_size_their_controls() -> None:
    from oom_wizard.rules.catalog import load_presets

    presets = load_presets()
    field = "model.model_kwargs.match_target_res"
    assert presets.ui_hint(field, presets.arch("qwen_image_edit_plus")) == (
        "Model → Options → Match Target Res"
    )
    assert presets.ui_hint(field, presets.arch("flux_kontext")) == f"Show Advanced → {field}"
