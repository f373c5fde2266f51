"""Tests of ``presets/memory.yaml``: parameter counts and measured activations per family."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from oom_wizard.errors import PresetError
from oom_wizard.rules.catalog import BlockMemory, MemoryFamily, Presets, load_presets

FILES = ("archs.yaml", "ladders.yaml", "levers.yaml", "memory.yaml", "ui_fields.yaml")


@pytest.fixture(scope="module")
def presets() -> Presets:
    return load_presets()


@pytest.fixture
def preset_copy(tmp_path: Path) -> Path:
    """A writable copy of the shipped preset folder."""
    source = resources.files("oom_wizard.presets")
    for name in FILES:
        (tmp_path / name).write_text((source / name).read_text(encoding="utf-8"), "utf-8")
    return tmp_path


def _replace(folder: Path, name: str, old: str, new: str) -> int:
    """Replace the first ``old`` in a preset file; the 1-based line it was on."""
    path = folder / name
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return text[: text.index(old)].count("\n") + 1


def families(presets: Presets) -> list[MemoryFamily]:
    return [presets.memory_families[key] for key in sorted(presets.memory_families)]


def test_every_arch_has_a_family_or_a_real_reason(presets: Presets) -> None:
    for facts in presets.archs:
        family = presets.memory_of(facts)
        if facts.memory is not None:
            assert family is not None and family.id == facts.memory, facts.id
        else:
            assert family is None
            reason = facts.memory_unknown or ""
            assert len(reason) > 20, f"{facts.id}: say why there are no figures ({reason!r})"
            assert "not measured yet" not in reason and "in progress" not in reason, facts.id


@pytest.mark.parametrize(
    ("name_or_path", "family_id"),
    [
        ("stabilityai/stable-diffusion-3.5-large", "sd35_large"),
        ("stabilityai/stable-diffusion-3.5-large-turbo", "sd35_large"),
        ("/models/sd3.5_medium.safetensors", "sd35_medium"),
        ("stabilityai/stable-diffusion-3-medium-diffusers", "sd3"),
    ],
)
def test_sd3_s_size_follows_the_model_name(
    presets: Presets, name_or_path: str, family_id: str
) -> None:
    # SD3.5 Large is 8B, not SD3 Medium's 2B: AI Toolkit's own SD3 example trains it.
    family = presets.memory_of(presets.arch("sd3"), name_or_path)
    assert family is not None and family.id == family_id
    assert presets.memory_of(presets.arch("sd3"), "my-own-model") is None


def test_sd3_5_large_is_counted_as_8b(presets: Presets) -> None:
    assert presets.memory_families["sd35_large"].params.transformer == pytest.approx(8.06, abs=0.01)
    assert presets.memory_families["sd3"].params.transformer == pytest.approx(2.03, abs=0.01)


def test_an_unknown_arch_has_no_family(presets: Presets) -> None:
    assert presets.memory_of(None) is None
    assert presets.memory_of(presets.arch("no_such_arch")) is None


def test_every_family_is_used_by_an_arch(presets: Presets) -> None:
    used = {facts.memory for facts in presets.archs}
    used |= {rule.family for facts in presets.archs for rule in facts.memory_by_name}
    assert sorted(set(presets.memory_families) - used) == []


def test_the_measuring_packages_are_named(presets: Presets) -> None:
    measured = presets.memory_measured_with
    for key in ("torch", "diffusers", "transformers", "python", "device", "dtype", "sdpa"):
        assert measured.get(key), key
    assert measured["dtype"] == "bfloat16"


def test_parameter_counts_are_sane_and_sourced(presets: Presets) -> None:
    for family in families(presets):
        params = family.params
        assert 0.05 < params.transformer < 100, family.id
        assert 0 <= params.text_encoder < 100, family.id
        assert 0 <= params.vae < 5, family.id
        assert params.source.strip(), family.id


def test_known_counts(presets: Presets) -> None:
    # Figures every reader can check against the model cards: FLUX.1-dev "12B", Wan 2.2 A14B
    # two experts, Qwen-Image "20B".
    flux = presets.memory_families["flux"].params
    assert 11.5 < flux.transformer < 12.5
    assert presets.memory_families["wan22_14b"].params.experts == 2
    assert 19.5 < presets.memory_families["qwen_image"].params.transformer < 21


def test_activation_figures_are_sane(presets: Presets) -> None:
    for family in families(presets):
        acts = family.activations
        if acts is None:
            if family.unet is None:
                assert family.unknown and "not measured yet" not in family.unknown, family.id
            continue
        assert acts.source.strip() and acts.blocks, family.id
        for block in acts.blocks:
            where = f"{family.id}.{block.name}"
            # With checkpointing a block keeps at least a bf16 hidden state of the width.
            assert block.input_bytes_per_token >= 2 * acts.width * 0.5, where
            assert block.saved_bytes_per_token >= block.input_bytes_per_token, where
            # Without it, a block saves several hidden states, never thousands.
            assert block.saved_bytes_per_token < 2 * acts.width * 400, where
            assert block.peak_bytes_per_token >= 0, where
        if acts.linearity is not None:
            assert acts.linearity < 0.05, family.id
        # A fused attention kernel ran (one that keeps no tokens x tokens matrix), so the figures
        # are per token; the math path would make them grow with the square of the tokens.
        assert acts.attention and ("flash" in acts.attention or "efficient" in acts.attention)


# --- bad data is refused, located ---------------------------------------------------------------


def test_an_arch_with_neither_family_nor_reason_is_refused(preset_copy: Path) -> None:
    line = _replace(preset_copy, "archs.yaml", "    memory: flux\n", "")
    with pytest.raises(PresetError) as caught:
        load_presets(preset_copy)
    message = str(caught.value)
    assert "archs.yaml" in message and "(flux)" in message
    assert "exactly one of memory" in message
    assert caught.value.line is not None and caught.value.line < line


def test_an_arch_naming_a_missing_family_is_refused(preset_copy: Path) -> None:
    line = _replace(preset_copy, "archs.yaml", "    memory: flux\n", "    memory: fluxx\n")
    with pytest.raises(PresetError) as caught:
        load_presets(preset_copy)
    assert "'fluxx' is not a family of memory.yaml" in str(caught.value)
    assert caught.value.line == line


EXTRA_FAMILY = """\
  extra:
    checked: cpu
    params: {transformer: 1.0, text_encoder: 0.5, vae: 0.1, experts: 1, source: "a test"}
    activations:
      width: 1024
      text_tokens: 77
      adapter: lora
      adapted: "every Linear of the blocks"
      blocks:
        - {name: Block, count: 2, saved_bytes_per_token: 40000, input_bytes_per_token: 2048,
           peak_bytes_per_token: 9000}
      source: "a test"
"""


def _add_family(folder: Path, text: str) -> int:
    """Append a family to memory.yaml's families (the last key of the file); its first line."""
    path = folder / "memory.yaml"
    old = path.read_text(encoding="utf-8")
    assert old.rstrip().splitlines()[-1].startswith("    "), "families must come last"
    path.write_text(old.rstrip("\n") + "\n" + text, encoding="utf-8")
    return old.rstrip("\n").count("\n") + 2


def test_a_well_formed_family_loads(preset_copy: Path) -> None:
    _add_family(preset_copy, EXTRA_FAMILY)
    family = load_presets(preset_copy).memory_families["extra"]
    assert family.activations is not None
    assert family.activations.blocks[0].tokens == "joint"
    assert family.activations.blocks[0].saved_bytes_per_token == 40000


def test_saved_below_the_input_is_refused(preset_copy: Path) -> None:
    first = _add_family(preset_copy, EXTRA_FAMILY.replace("40000", "1000"))
    with pytest.raises(PresetError) as caught:
        load_presets(preset_copy)
    assert "memory.yaml" in str(caught.value)
    assert "saved_bytes_per_token is below input_bytes_per_token" in str(caught.value)
    assert caught.value.line == first + 9


def test_missing_activations_need_a_reason(preset_copy: Path) -> None:
    text = EXTRA_FAMILY.split("    activations:")[0].replace("    checked: cpu\n", "")
    text += "    activations: null\n"
    _add_family(preset_copy, text)
    with pytest.raises(PresetError, match="activations: null with unknown"):
        load_presets(preset_copy)


UNET_FAMILY = """\
  extra:
    checked: gpu
    params: {transformer: 1.0, text_encoder: 0.5, vae: 0.1, experts: 1, source: "a test"}
    unet:
      text_tokens: 77
      adapted: "every Linear of the UNet"
      networks:
        lora:
          saved: {fixed_bytes: 1000, bytes_per_latent_pixel: 500000}
          peak: {fixed_bytes: 0, bytes_per_latent_pixel: 4000}
          checkpointed_saved: {fixed_bytes: 0, bytes_per_latent_pixel: 37000}
          checkpointed_peak: {fixed_bytes: 160000000, bytes_per_latent_pixel: 1200}
      source: "a test"
    vae:
      checked: cpu
      frame_by_frame: true
      decode: {fixed_bytes: 0, bytes_per_pixel: 11000, bytes_per_clip_pixel: 6}
      encode: {fixed_bytes: 0, bytes_per_pixel: 8600}
      source: "a test"
"""


def test_a_unet_family_with_a_video_vae_loads(preset_copy: Path) -> None:
    _add_family(preset_copy, UNET_FAMILY)
    family = load_presets(preset_copy).memory_families["extra"]
    assert family.activations is None and family.unknown is None
    assert family.checked == "gpu"
    assert family.unet is not None and family.vae is not None
    lora = family.unet.networks["lora"]
    assert lora.saved.at(128 * 128) == 1000 + 500000 * 128 * 128
    # Frame by frame: the working set is one frame's; only the assembled clip grows with frames.
    frame = 480 * 832
    assert family.vae.decode.at(frame, frames=81) == 11000 * frame + 6 * frame * 81
    assert family.vae.encode.at(frame, frames=81) == family.vae.encode.at(frame, frames=33)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("    checked: gpu\n", "", "checked (gpu or cpu) goes with the activation figures"),
        ("    checked: gpu\n", "    checked: maybe\n", "checked"),
        ("        lora:\n", "        loha:\n", "networks"),
        ("fixed_bytes: 1000,", "fixed_bytes: -600000000,", "negative at 1024 latent pixels"),
        ("      frame_by_frame: true\n", "", "bytes_per_pixel are for a frame_by_frame VAE"),
        ("bytes_per_pixel: 8600", "bytes_per_pixel: 0", "greater than 0"),
        ('      adapted: "every Linear of the UNet"\n', "", "adapted"),
    ],
)
def test_a_bad_unet_or_vae_is_refused(preset_copy: Path, old: str, new: str, message: str) -> None:
    _add_family(preset_copy, UNET_FAMILY.replace(old, new, 1))
    with pytest.raises(PresetError, match=re.escape(message)) as caught:
        load_presets(preset_copy)
    assert "memory.yaml" in str(caught.value) and "extra" in str(caught.value)


def test_blocks_and_a_unet_together_are_refused(preset_copy: Path) -> None:
    both = UNET_FAMILY + EXTRA_FAMILY.split("\n", 3)[3]
    _add_family(preset_copy, both)
    with pytest.raises(PresetError, match=re.escape("activations (blocks) or unet, not both")):
        load_presets(preset_copy)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('      adapted: "every Linear of the blocks"\n', "", "adapter: lora needs adapted"),
        (
            "saved_bytes_per_token: 40000,",
            "saved_bytes_per_token: 40000, frozen_saved_bytes_per_token: 50000,",
            "frozen_saved_bytes_per_token is above saved_bytes_per_token",
        ),
    ],
)
def test_an_adapter_figure_out_of_place_is_refused(
    preset_copy: Path, old: str, new: str, message: str
) -> None:
    _add_family(preset_copy, EXTRA_FAMILY.replace(old, new, 1))
    with pytest.raises(PresetError, match=re.escape(message)):
        load_presets(preset_copy)


def test_checked_goes_with_figures_and_only_with_them(presets: Presets) -> None:
    for family in families(presets):
        measured = family.activations is not None or family.unet is not None
        assert (family.checked is not None) == measured, family.id
        if family.activations is not None and family.activations.adapter == "lora":
            assert family.activations.adapted, family.id


GIB = 2**30


# The rows of ../shared/gpu-measurements.md (one H200, 2026-12-04) the shipped figures must
# reproduce where memory.yaml says `checked: gpu` (the file itself is not shipped).
@pytest.mark.parametrize(
    ("family_id", "pass_name", "pixels", "frames", "measured_gib"),
    [
        ("flux", "decode", 1024 * 1024, 1, 3.38),
        ("flux", "decode", 1536 * 1536, 1, 7.60),
        ("flux", "encode", 1024 * 1024, 1, 2.00),
        ("flux", "encode", 1536 * 1536, 1, 4.50),
        ("wan21_14b", "decode", 480 * 832, 33, 4.27),
        ("wan21_14b", "decode", 480 * 832, 81, 4.38),
        ("wan21_14b", "encode", 480 * 832, 33, 3.20),
        ("wan21_14b", "encode", 480 * 832, 81, 3.20),
    ],
)
def test_gpu_checked_vae_figures_reproduce_the_gpu_rows(
    presets: Presets, family_id: str, pass_name: str, pixels: int, frames: int, measured_gib: float
) -> None:
    vae = presets.memory_families[family_id].vae
    assert vae is not None and vae.checked == "gpu"
    figure = getattr(vae, pass_name).at(pixels, frames, (frames - 1) // 4 + 1) / GIB
    assert figure == pytest.approx(measured_gib, rel=0.05)


@pytest.mark.parametrize(
    ("latent", "fwd_gib", "step_gib", "ckpt_fwd_gib", "ckpt_step_gib"),
    [(64 * 64, 2.07, 2.09, 0.15, 0.32), (128 * 128, 7.89, 7.96, 0.58, 0.76)],
)
def test_sdxl_unet_s_gpu_setup_reproduces_the_gpu_rows(
    presets: Presets,
    latent: int,
    fwd_gib: float,
    step_gib: float,
    ckpt_fwd_gib: float,
    ckpt_step_gib: float,
) -> None:
    # gpu_setup: the rows' own setup (LoRA on the attention blocks' Linears under bf16 autocast);
    # the toolkit's figures (networks) run its fp32 adapter path on every Linear and 1x1 conv.
    sdxl = presets.memory_families["sdxl"]
    assert sdxl.unet is not None and sdxl.unet.gpu_setup is not None
    setup = sdxl.unet.gpu_setup
    saved = setup.saved.at(latent)
    assert saved / GIB == pytest.approx(fwd_gib, rel=0.1)
    assert (saved + setup.peak.at(latent)) / GIB == pytest.approx(step_gib, rel=0.1)
    kept = setup.checkpointed_saved.at(latent)
    assert kept / GIB == pytest.approx(ckpt_fwd_gib, rel=0.15)
    step = kept + setup.checkpointed_peak.at(latent)
    assert step / GIB == pytest.approx(ckpt_step_gib, rel=0.15)
    toolkit = sdxl.unet.networks["lora"]
    assert toolkit.saved.at(latent) > saved  # more modules adapted, each an fp32 input copy
    assert toolkit.checkpointed_saved.at(latent) < toolkit.saved.at(latent) / 4


def test_every_unet_family_is_measured(presets: Presets) -> None:
    for family_id in ("sd15", "sd2", "sdxl", "ssd", "vega"):
        family = presets.memory_families[family_id]
        assert family.unet is not None and family.checked is not None, family_id
        lora = family.unet.networks["lora"]
        assert lora.saved.bytes_per_latent_pixel > lora.checkpointed_saved.bytes_per_latent_pixel


def _mean(blocks: tuple[BlockMemory, ...], figure: str) -> float:
    total = sum(block.count for block in blocks)
    return sum(float(getattr(block, figure)) * block.count for block in blocks) / total


def test_flux_blocks_in_the_gpu_rows_setup_reproduce_them(presets: Presets) -> None:
    # FLUX.1-dev on the H200: per token per block over the 57 blocks, LoRA under bf16 autocast
    # 152.8 KiB (the slope of the no-checkpointing rows), frozen 76.5 KiB, kept with
    # checkpointing 6.2 KiB.
    flux = presets.memory_families["flux"]
    acts = flux.activations
    assert flux.checked == "gpu" and acts is not None and acts.adapter == "lora"
    blocks = acts.blocks
    assert _mean(blocks, "autocast_saved_bytes_per_token") / 1024 == pytest.approx(152.8, rel=0.1)
    assert _mean(blocks, "frozen_saved_bytes_per_token") / 1024 == pytest.approx(76.5, rel=0.06)
    assert _mean(blocks, "input_bytes_per_token") / 1024 == pytest.approx(6.2, rel=0.05)
    # AI Toolkit's own path (fp32 adapters, the input cast to fp32 per adapted Linear) keeps
    # more than the rows' setup, and LoRA more than no adapter.
    assert _mean(blocks, "saved_bytes_per_token") > _mean(blocks, "autocast_saved_bytes_per_token")


@pytest.mark.parametrize(
    ("family_id", "ffn"),
    [("wan21_14b", 13824), ("wan21_1b", 8960), ("wan22_14b", 13824), ("wan22_5b", 14336)],
)
def test_wan_s_lora_costs_what_its_linears_inputs_count(
    presets: Presets, family_id: str, ffn: int
) -> None:
    # Per image token, above the frozen block (whose Linears keep no input: their weights are
    # frozen), with the width w: AI Toolkit's LoRA keeps an fp32 copy of the input of each of
    # the 8 adapted Linears (self-attention q, k, v, out; cross-attention q, out; the FFN's two)
    # and its rank-16 fp32 product; under bf16 autocast the LoRA reads the base's bf16 tensors,
    # one per input the projections share (q, k and v read one; the attention outputs the out
    # projections read are kept by the flash kernel already): the self-attention's and the
    # cross-attention's query inputs, the FFN's input and its GELU's output.
    family = presets.memory_families[family_id]
    assert family.activations is not None
    w = family.activations.width
    (block,) = family.activations.blocks
    frozen = block.frozen_saved_bytes_per_token
    assert frozen is not None and block.autocast_saved_bytes_per_token is not None
    assert block.saved_bytes_per_token - frozen == 4 * (7 * w + ffn) + 8 * 16 * 4
    assert block.autocast_saved_bytes_per_token - frozen == 2 * (3 * w + ffn) + 8 * 16 * 2


def test_a_lora_measurement_saves_more_than_frozen_blocks(presets: Presets) -> None:
    for family in families(presets):
        acts = family.activations
        if acts is None or acts.adapter != "lora":
            continue
        for block in acts.blocks:
            assert block.frozen_saved_bytes_per_token is not None, family.id
            assert block.saved_bytes_per_token >= block.frozen_saved_bytes_per_token, family.id


def test_an_unknown_block_kind_of_tokens_is_refused(preset_copy: Path) -> None:
    _add_family(
        preset_copy,
        EXTRA_FAMILY.replace(
            "peak_bytes_per_token: 9000", "peak_bytes_per_token: 9000, tokens: text"
        ),
    )
    with pytest.raises(PresetError, match="tokens"):
        load_presets(preset_copy)


def test_a_negative_count_is_refused_at_its_line(preset_copy: Path) -> None:
    line = _replace(preset_copy, "memory.yaml", "      transformer: ", "      transformer: -")
    with pytest.raises(PresetError) as caught:
        load_presets(preset_copy)
    assert "params.transformer" in str(caught.value)
    assert caught.value.line == line


# --- the calibration script's data side (no torch) ------------------------------------------------

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "bench" / "calibrate_memory.py"


def _script() -> Any:
    """bench/calibrate_memory.py as a module (it imports torch only inside its measuring code)."""
    spec = importlib.util.spec_from_file_location("calibrate_memory", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_memory_yaml_is_what_the_script_writes() -> None:
    script = _script()
    measured_with, families = script.load_memory()
    text = (ROOT / "presets" / "memory.yaml").read_text(encoding="utf-8")
    assert script.dump(measured_with, families) == text


def test_an_arch_with_a_family_copies_none_of_its_counts(preset_copy: Path) -> None:
    # memory.yaml alone holds the counts: an arch that names a family takes the family's.
    line = _replace(
        preset_copy,
        "archs.yaml",
        "    memory: flux\n",
        "    memory: flux\n    params: {transformer: 11.9, text_encoder: 4.9, source: copied}\n",
    )
    with pytest.raises(PresetError) as caught:
        load_presets(preset_copy)
    assert "memory.yaml holds its counts" in str(caught.value)
    assert line > 0


def test_every_family_of_the_yaml_is_one_the_script_knows() -> None:
    script = _script()
    _, families = script.load_memory()
    assert sorted(families) == sorted(family.id for family in script.FAMILIES)


def test_the_table_needs_no_torch_and_lists_every_family(presets: Presets) -> None:
    # The table of the closing note comes from the YAML alone: torch is never imported for it.
    code = (
        "import runpy, sys; sys.argv = [sys.argv[1], '--table']\n"
        "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\n"
        "except SystemExit as e:\n    assert not e.code\n"
        "assert 'torch' not in sys.modules, 'torch was imported'"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(SCRIPT)], capture_output=True, text=True, check=True
    )
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| family |")
    listed = {row.split("|")[1].strip() for row in rows[1:]}
    assert listed == set(presets.memory_families)
    flux = next(row for row in rows if row.startswith("| flux |"))
    assert "FluxTransformerBlock" in flux and "11.901" in flux


def test_each_family_s_own_head_width_divides_its_width(presets: Presets) -> None:
    widths = presets.levers.attention.head_dim_by_family
    assert widths
    for family_id, head_dim in widths.items():
        family = presets.memory_families[family_id]
        assert family.activations is not None, family_id
        assert family.activations.width % head_dim == 0, family_id


def test_a_head_width_for_a_missing_family_is_refused(preset_copy: Path) -> None:
    _replace(preset_copy, "levers.yaml", "{sd3: 64,", "{sd9: 64,")
    with pytest.raises(PresetError) as caught:
        load_presets(preset_copy)
    assert "'sd9' is not a family of memory.yaml" in str(caught.value)


def test_the_archs_ai_toolkit_added_are_counted_or_say_why_not(presets: Presets) -> None:
    """Iris-3B is counted from AI Toolkit's vendored config (about 3 B, as its README says);
    FIBO from its paper's architecture table and mflux's port of the release (the paper's
    "8B parameters"), with SmolLM3-3B and the Wan 2.2 VAE; Ming-Image names the configs no
    stored source holds."""
    iris = presets.memory_families["iris3b"]
    assert iris.params.transformer == pytest.approx(2.988)
    assert iris.params.text_encoder == pytest.approx(4.022) and iris.params.vae == 0.0
    assert "2fa0bd87" in iris.params.source and iris.activations is None
    fibo = presets.memory_of(presets.arch("fibo"))
    assert fibo is not None and fibo.id == "fibo" and fibo.checked == "cpu"
    assert fibo.params.transformer == pytest.approx(8.286)
    assert fibo.params.text_encoder == pytest.approx(3.075)
    assert fibo.params.vae == presets.memory_families["wan22_5b"].params.vae
    assert "2511.06876" in fibo.params.source and "mflux" in fibo.params.source
    assert fibo.activations is not None
    assert [(b.name, b.count) for b in fibo.activations.blocks] == [
        ("BriaFiboTransformerBlock", 8),
        ("BriaFiboSingleTransformerBlock", 38),
    ]
    facts = presets.arch("ming_image")
    assert facts is not None and presets.memory_of(facts) is None
    assert "no stored source holds" in (facts.memory_unknown or "")


def test_a_video_vae_under_an_image_family_is_measured_on_one_frame(presets: Presets) -> None:
    """FIBO decodes one 1024 px frame with the Wan 2.2 VAE: its first chunk, one frame, not a
    clip's four-frame chunks, which Wan 2.2 5B's video fit holds apart (a clip's later chunk
    costs over three times the first)."""
    fibo, wan = (presets.memory_families[key].vae for key in ("fibo", "wan22_5b"))
    assert fibo is not None and wan is not None
    assert not fibo.frame_by_frame and wan.frame_by_frame
    image = fibo.decode.at(1024 * 1024) / 2**30
    assert 2.5 < image < 4.0
    assert wan.decode.at(1024 * 1024) / 2**30 == pytest.approx(image, rel=0.02)
    assert wan.decode.at(1024 * 1024, 5, 2) / 2**30 > 3 * image


def test_offload_figures_say_what_stays_and_the_largest_layer(presets: Presets) -> None:
    """Measured on the meta device: a transformer keeps under 1 % outside its Linear and Conv2d
    layers (HiDream-O1, a language model, its 0.6 B token table), and its largest such layer is
    a real one (FLUX.1's double-block modulation, 3072 x 6 x 3072 + bias)."""
    flux = presets.memory_families["flux"].offload
    assert flux is not None and flux.largest_layer_params == 3072 * 18432 + 18432
    for family in families(presets):
        offload = family.offload
        if not family.params.source.startswith("exact counts on the meta device"):
            assert offload is None, family.id  # counted by arithmetic: no library class builds it
            continue
        assert offload is not None, family.id
        share = offload.resident_params / (family.params.transformer * 1e9)
        assert share < (0.08 if family.id == "hidream_o1" else 0.01), family.id


def test_the_families_fake_tensors_cannot_follow_run_real_ones_on_grids_they_take() -> None:
    """HiDream-I1 routes each token by its gate's values and Lumina 2 reads its text mask's:
    both are measured with real tensors at small token counts. HiDream pads a non-square latent
    to 4096 tokens, so its grids are square, and its text splits into three equal sequences."""
    script = _script()
    by_id = {family.id: family for family in script.FAMILIES}
    for family_id in ("hidream", "lumina2"):
        family = by_id[family_id]
        assert family.real and family.unknown is None and family.inputs is not None, family_id
        grids = script._grids(family, real=True)
        assert max(grid.image_tokens + grid.text for grid in grids) <= 1024 + 96, family_id
    hidream = script._grids(by_id["hidream"], real=True)
    assert all(grid.height == grid.width and grid.text % 3 == 0 for grid in hidream)
    flux = by_id["flux"]
    assert flux.real is None and not flux.square


def test_hidream_and_lumina2_have_real_tensor_figures(presets: Presets) -> None:
    """Measured with AI Toolkit's LoRA on every block (HiDream: also each routed expert and the
    shared ones), checked on the CPU; the fit holds at a third grid."""
    expected = {
        "hidream": [
            ("HiDreamBlock (double_stream_blocks)", 16),
            ("HiDreamBlock (single_stream_blocks)", 32),
        ],
        "lumina2": [
            ("Lumina2TransformerBlock (noise_refiner)", 2),
            ("Lumina2TransformerBlock (layers)", 26),
        ],
    }
    for family_id, blocks in expected.items():
        family = presets.memory_families[family_id]
        acts = family.activations
        assert family.checked == "cpu" and acts is not None and acts.adapter == "lora", family_id
        assert [(block.name, block.count) for block in acts.blocks] == blocks
        assert "bf16 real tensors" in acts.source and "fake tensors on" not in acts.source
        assert acts.linearity is not None and acts.linearity < 0.02, family_id
        assert "flash" in (acts.attention or ""), family_id
    hidream = presets.memory_families["hidream"].activations
    assert hidream is not None and hidream.text_tokens == 384
    assert "2 of 4 experts" in hidream.source


def test_counting_by_arithmetic_reproduces_the_meta_device_counts() -> None:
    """The layer-by-layer helpers that count the archs no library class builds give, for the
    layouts they share, the very counts the meta device gave (memory.yaml's sources)."""
    script = _script()
    counted = sys.modules["families.counted"]  # bench/families/counted.py, which the script loads
    _, families = script.load_memory()

    def stored(family_id: str, label: str) -> int:
        source = str(families[family_id]["params"]["source"])
        tail = source[source.index(label) :]
        return int(tail[tail.index(" = ") + 3 :].split(";")[0].replace(",", ""))

    assert counted.chroma_transformer() == stored("chroma", "Chroma transformer")
    assert counted.zimage_transformer() == stored("zimage", "Z-Image transformer")
    assert counted.qwen25_vl_7b() == stored("qwen_image", "Qwen2.5-VL-7B-Instruct")
    assert counted.mistral_small_31() == stored("flux2", "Mistral-Small-3.1-24B")
    owners = {
        "T5-XXL encoder": "flux",
        "Qwen3-4B": "zimage",
        "Qwen3-VL-8B-Instruct": "ideogram4",
        "FLUX.1 VAE": "flux",
        "FLUX.2 VAE": "flux2",
    }
    for label, count in counted.COUNTED.items():
        assert count == stored(owners[label], label + ":"), label


def test_the_archs_counted_by_arithmetic_get_figures_with_a_stand_in_band(
    presets: Presets,
) -> None:
    """Chroma Radiance, F Lite, Z-Image L2P, Zeta-Chroma, ERNIE-Image, Boogu-Image and OmniGen2
    had no counts: each is counted now, with no measured block (a stand-in band); Nucleus-Image
    and Mage-Flow still say why not."""
    counted = {
        "chroma_radiance": (9.506, 4.762, 0.0),
        "f-lite": (9.785, 4.762, 0.084),
        "zimage_l2p": (6.166, 4.022, 0.0),
        "zeta_chroma": (6.499, 4.022, 0.0),
        "ernie_image": (8.033, 3.849, 0.084),
        "boogu_image": (10.293, 8.145, 0.084),
        "boogu_image_edit": (10.293, 8.145, 0.084),
        "omnigen2": (3.967, 3.755, 0.084),
    }
    for arch, (transformer, text, vae) in counted.items():
        facts = presets.arch(arch)
        family = presets.memory_of(facts) if facts is not None else None
        assert family is not None, arch
        assert (family.params.transformer, family.params.text_encoder, family.params.vae) == (
            transformer,
            text,
            vae,
        ), arch
        assert family.activations is None and "not measured" in (family.unknown or ""), arch
    for arch in ("nucleus_image", "mageflow", "mageflow_edit"):
        facts = presets.arch(arch)
        assert facts is not None and presets.memory_of(facts) is None, arch
