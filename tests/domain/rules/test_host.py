"""The host's RAM per phase (``rules.host``): layer offloading's pinned copies with the pinned
allocator's rounding, the text encoder parked or freed, the loader's full-precision read, and
the verdict against the machine's RAM (Windows' pinned cap too); ``fit`` shows it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from oom_wizard.formats.document import load_document
from oom_wizard.host.media import MediaCount, count_media
from oom_wizard.rules.host import PINNED_ROUNDING, host_memory
from tests.support.plan_support import cli

DEMO = Path(__file__).resolve().parents[3] / "presets" / "demo" / "wan_dance_lora.yaml"


def wan(tmp_path: Path, **model: object) -> Path:
    """The demo Wan 2.1 14B job at 33 frames of 512 px, with ``model`` fields set."""
    tree = yaml.safe_load(DEMO.read_text("utf-8"))
    process = tree["config"]["process"][0]
    process["model"].update(model)
    for dataset in process["datasets"]:
        dataset.update(num_frames=33, resolution=[512])
    process["sample"].update(width=512, height=512, num_frames=33)
    path = tmp_path / f"wan-{len(list(tmp_path.glob('*.yaml')))}.yaml"
    path.write_text(yaml.safe_dump(tree, sort_keys=False), encoding="utf-8")
    return path


OFFLOADED = {
    "arch": "wan21",  # the Python class AI Toolkit attaches the memory manager to
    "layer_offloading": True,
    "layer_offloading_transformer_percent": 1.0,
    "layer_offloading_text_encoder_percent": 1.0,
}


def test_offloading_pins_the_moved_layers_rounded_and_the_host_is_the_limit(
    tmp_path: Path,
) -> None:
    config = wan(tmp_path, **OFFLOADED)
    alone = host_memory(load_document(wan(tmp_path)), 16.0)
    host = host_memory(load_document(config), 16.0)
    assert alone.pinned.high == 0.0 and alone.phases["training"].high < 8
    # 14 B weights at the qtype's byte, each copy rounded up by the pinned allocator.
    low, high = PINNED_ROUNDING
    assert host.pinned.high / host.pinned.low == pytest.approx(high / low)
    assert 12 < host.pinned.low < 20
    assert host.verdict == "wont_fit" and host.phases["training"].low > 16
    assert any("layer_offloading_transformer_percent" in lever for lever in host.levers)
    # The same job fits a 24 GiB card: the card is not where it fails.
    status, out, _ = cli("fit", config, "--gpu", "24", "--ram", "16", "--no-probe", "--json")
    found = json.loads(out)
    assert status == 0 and found["verdict"] == "fits" and found["host"]["verdict"] == "wont_fit"
    assert set(found["host"]["phases"]) == {"load", "caching", "training"}
    assert set(found["host"]["phases"]["training"]) == {"low", "high"}
    assert found["host"]["ram_gib"] == 16.0
    _, text, _ = cli("fit", config, "--gpu", "24", "--ram", "16", "--no-probe")
    assert "Host RAM (16.0 GiB of RAM):" in text and "host: won't fit" in text


def test_windows_weighs_the_pinned_share_against_half_the_ram(tmp_path: Path) -> None:
    document = load_document(wan(tmp_path, **OFFLOADED))
    linux = host_memory(document, 52.0)  # pinned 16.6-26.6 GiB, Windows' cap 26
    windows = host_memory(document, 52.0, windows=True)
    assert linux.verdict == "fits" and windows.verdict in ("tight", "wont_fit")


def test_a_parked_text_encoder_counts_and_a_freed_one_does_not(tmp_path: Path) -> None:
    freed = host_memory(load_document(wan(tmp_path)), None)  # cache_text_embeddings: true
    tree = yaml.safe_load(wan(tmp_path).read_text("utf-8"))
    train = tree["config"]["process"][0]["train"]
    train.update(cache_text_embeddings=False, unload_text_encoder=True)
    parked_path = tmp_path / "parked.yaml"
    parked_path.write_text(yaml.safe_dump(tree, sort_keys=False), encoding="utf-8")
    parked = host_memory(load_document(parked_path), None)
    names = [name for name, _, _ in parked.phases["training"].parts]
    assert "text encoder on the CPU" in names
    assert parked.phases["training"].high > freed.phases["training"].high + 2
    assert freed.verdict == "unknown"


def test_while_caching_the_models_not_in_use_wait_in_ram(tmp_path: Path) -> None:
    # set_device_state_preset('cache_latents') keeps only the VAE on the card while the latents
    # are encoded (dataloader_mixins.py:1962-1965, base_model.py:1554-1599): the transformer
    # and the text encoder, not yet freed, are in RAM for that while.
    host = host_memory(load_document(wan(tmp_path, quantize=True)), None)
    parts = {name: high for name, _, high in host.phases["caching"].parts}
    assert parts["transformer parked while caching"] == pytest.approx(14.3 * 1e9 / 2**30, rel=0.1)
    # quantize_te follows quantize: the UMT5 encoder at a byte a weight too
    assert parts["text encoder parked while caching"] == pytest.approx(5.7 * 1e9 / 2**30, rel=0.1)
    assert "transformer parked while caching" not in dict(
        (name, high) for name, _, high in host.phases["training"].parts
    )


def test_an_arch_that_skips_the_device_presets_parks_nothing_to_cache(tmp_path: Path) -> None:
    # Wan 2.1 I2V under low_vram returns from set_device_state_preset (wan21_i2v.py:364-368):
    # the card's load stacks the encode on the loaded weights, and the host holds no parked
    # model for it beyond what low_vram parks anyway
    host = host_memory(load_document(wan(tmp_path, arch="wan21_i2v:14b", low_vram=True)), None)
    names = [name for name, _, _ in host.phases["caching"].parts]
    assert "transformer parked (low_vram)" in names
    assert not any("while caching" in name for name in names)


def test_loading_reads_each_model_at_full_precision(tmp_path: Path) -> None:
    host = host_memory(load_document(wan(tmp_path)), 64.0)
    load = host.phases["load"]
    assert load.low < load.high  # one after the other, or both
    assert load.high > 26  # 14 B at bf16 and the UMT5 encoder
    shutil.rmtree(tmp_path)


def test_plan_and_the_app_say_the_host_when_it_is_the_limit(tmp_path: Path) -> None:
    import dataclasses

    from oom_wizard.application.settling import Answers, host_note, start
    from oom_wizard.host.probe import GpuInfo, ProbeResult
    from oom_wizard.request import JobRequest
    from oom_wizard.screens.load import summary

    config = wan(tmp_path, **OFFLOADED)
    state = start(JobRequest(target=config, probe=False), Answers(moment="early_steps"))
    assert host_note(state) is None  # no RAM read: nothing said
    probe = ProbeResult((GpuInfo(0, "RTX 4090", 24.0, 0.0, 24.0),), (), host_total_gib=16.0)
    state = dataclasses.replace(state, job=dataclasses.replace(state.job, probe=probe))
    words = host_note(state)
    assert words is not None and words.startswith("host RAM: the ")
    assert "of 16.0 GiB: won't fit" in words and "pinned" in words
    assert "Host RAM" in summary(state).plain


def test_the_plan_s_host_note_names_the_steps_that_lower_the_host_and_never_one_that_raises_it(
    tmp_path: Path,
) -> None:
    import dataclasses

    from oom_wizard.application.settling import Answers, host_note, start
    from oom_wizard.host.probe import GpuInfo, ProbeResult
    from oom_wizard.request import JobRequest

    # Half the transformer offloaded at bf16: its pinned copies set the peak; quantizing them
    # lowers it, offloading more would raise it.
    config = wan(
        tmp_path, **{**OFFLOADED, "layer_offloading_transformer_percent": 0.5}, quantize=False
    )
    state = start(JobRequest(target=config, probe=False), Answers(moment="early_steps"))
    offered = {s.id for s in state.plan.steps if s.available and not s.satisfied}
    assert {"quantize", "layer_offloading"} <= offered
    probe = ProbeResult((GpuInfo(0, "RTX 4090", 24.0, 0.0, 24.0),), (), host_total_gib=16.0)
    state = dataclasses.replace(state, job=dataclasses.replace(state.job, probe=probe))
    words = host_note(state)
    assert words is not None and "won't fit" in words
    named = words.split("the plan's steps that lower it: ")[1].split(", ")
    assert "quantize" in named and "layer_offloading" not in named and "low_vram" not in named


FLUX_DEMO = DEMO.with_name("flux_portrait_lora.yaml")


def with_dataset(source: Path, path: Path, **dataset: object) -> Path:
    """``source`` with its first dataset's fields set (latents kept in RAM, not on disk)."""
    tree = yaml.safe_load(source.read_text("utf-8"))
    first = tree["config"]["process"][0]["datasets"][0]
    first.pop("cache_latents_to_disk", None)
    first.update(cache_latents=True, **dataset)
    path.write_text(yaml.safe_dump(tree, sort_keys=False), encoding="utf-8")
    return path


def folder_of(path: Path, *names: str) -> Path:
    for name in names:
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).touch()
    return path


def test_a_folder_is_counted_as_ai_toolkit_lists_it(tmp_path: Path) -> None:
    folder = folder_of(
        tmp_path / "set",
        *("a.jpg", "b.PNG", "c.webp", "sub/d.jpeg"),  # images, in subfolders and any case
        *("a.txt", ".e.png", ".thumbs/f.jpg", "_controls/g.png"),  # captions, hidden, controls
        "clip.mp4",
    )
    assert count_media(folder) == MediaCount(folder, images=4, videos=1)
    assert count_media(tmp_path / "absent") is None


def test_latents_kept_in_ram_count_each_image_at_each_resolution(tmp_path: Path) -> None:
    config = with_dataset(FLUX_DEMO, tmp_path / "flux.yaml", resolution=[512, 1024], num_repeats=2)
    document = load_document(config)
    counted = host_memory(document, 16.0, media={(0, 0): MediaCount(tmp_path, images=3)})
    unknown = host_memory(document, 16.0)
    # FLUX.1's latent: 16 channels at 1/8 of each side, bf16; 3 images twice, at both sizes.
    expected = 2 * 3 * 16 * ((512 / 8) ** 2 + (1024 / 8) ** 2) * 2 / 1024**3
    for phase in ("caching", "training"):
        parts = {name: hi for name, _, hi in counted.phases[phase].parts}
        assert parts["latents kept in RAM"] == pytest.approx(expected)
        added = counted.phases[phase].high - unknown.phases[phase].high
        assert added == pytest.approx(expected)
    assert counted.phases["load"] == unknown.phases["load"]
    said = " ".join(counted.notes)
    assert "3 images counted in" in said and "2 copies each" in said
    assert "16 latent channels" in said
    assert "0.50 MiB an image at 1024²" in said and "assumed" not in said
    assert "not on this machine" in " ".join(unknown.notes)
    # With cache_latents_to_disk as well, AI Toolkit saves them and keeps them in RAM too.
    both = with_dataset(
        FLUX_DEMO,
        tmp_path / "both.yaml",
        resolution=[512, 1024],
        num_repeats=2,
        cache_latents_to_disk=True,
    )
    kept = host_memory(load_document(both), 16.0, media={(0, 0): MediaCount(tmp_path, images=3)})
    assert kept.phases["training"].high == pytest.approx(counted.phases["training"].high)


def test_a_video_datasets_clips_are_counted_at_their_latent_frames(tmp_path: Path) -> None:
    config = with_dataset(DEMO, tmp_path / "wan.yaml", resolution=[512], num_frames=33)
    counted = host_memory(
        load_document(config), 64.0, media={(0, 0): MediaCount(tmp_path, images=1, videos=2)}
    )
    # Wan 2.1's latent: 16 channels at 1/8, 1 + 32 / 4 = 9 latent frames a clip of 33; an
    # image of a video dataset is one frame.
    latent = 16 * (512 / 8) ** 2 * 2
    expected = (2 * 9 * latent + latent) / 1024**3
    parts = {name: hi for name, _, hi in counted.phases["training"].parts}
    assert parts["latents kept in RAM"] == pytest.approx(expected)
    assert "1 image and 2 videos counted" in " ".join(counted.notes)


def test_fit_counts_the_folder_where_it_is_here_and_notes_it_where_not(tmp_path: Path) -> None:
    folder_of(tmp_path / "imgs", "a.jpg", "b.jpg", "c.png")
    here = with_dataset(FLUX_DEMO, tmp_path / "here.yaml", folder_path="imgs")  # relative
    _, out, err = cli("fit", here, "--gpu", "24", "--ram", "16", "--no-probe", "--json")
    host = json.loads(out)["host"]
    assert "latents kept in RAM" in host["parts_gib"]["training"], err
    assert any("3 images counted in" in note for note in host["notes"])
    away = with_dataset(FLUX_DEMO, tmp_path / "away.yaml", folder_path=str(tmp_path / "gone"))
    _, out, err = cli("fit", away, "--gpu", "24", "--ram", "16", "--no-probe", "--json")
    host = json.loads(out)["host"]
    assert "latents kept in RAM" not in host["parts_gib"]["training"], err
    assert any("not on this machine" in note for note in host["notes"])
