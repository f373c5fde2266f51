"""One calibration per lineage (issue 38 item 2, issue 39 item 5): a config saved from a crash
is weighed with that crash's figures on every surface, and a run's measured peak is a point on
the same rule that ``fit`` on the same job uses and says."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
import yaml

from oom_wizard.application.attempts import describe_record
from oom_wizard.application.autopilot import autopilot, estimate_before_run
from oom_wizard.application.choosing import memory_peak
from oom_wizard.application.settling import job_card, start
from oom_wizard.request import JobRequest
from oom_wizard.storage.changelog import changelog_path_for, read_changelog
from tests.support.aitk_db import add_job, make_db
from tests.support.autopilot_support import SCENARIOS, fake_runner, write_config
from tests.support.corpus import OWN_CONFIGS, REPO
from tests.support.plan_support import cli

#: A Qwen-Image LoRA set up as AI Toolkit's own Qwen-Image example sets it up (our fixture).
QWEN = OWN_CONFIGS / "qwen_image_uint3_lora.yaml"

#: PyTorch's message of the Qwen-Image repro (issue 38): 21.40 allocated + 1.97 tried, 23.99.
QWEN_OOM = (
    "CUDA out of memory. Tried to allocate 1.97 GiB. GPU 0 has a total capacity of 23.99 GiB of "
    "which 1.05 GiB is free. Including non-PyTorch memory, this process has 22.10 GiB memory in "
    "use. Of the allocated memory 21.40 GiB is allocated by PyTorch, and 412.00 MiB is reserved "
    "by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation "
    "for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
)


def qwen_crash_log(folder: Path) -> Path:
    """The image demo's AI Toolkit log (a training step that ran out of memory three times)
    as the Qwen-Image example's job writes it, with the repro's message."""
    text = (REPO / "presets" / "demo" / "flux_portrait_lora.log").read_text(encoding="utf-8")
    text = text[text.index("# Running job:") :].replace("flux_portrait_lora", "qwen_lora")
    old = re.search(r"CUDA out of memory\. Tried to allocate 2\.25 GiB\.[^\n]*", text)
    assert old is not None
    path = folder / "qwen.log.txt"
    path.write_text("Running 1 job\n" + text.replace(old.group(0), QWEN_OOM), encoding="utf-8")
    return path


def band_of(memory: dict[str, object]) -> tuple[float, float]:
    band = memory["estimated_gib"]
    assert isinstance(band, dict)
    return band["low"], band["high"]


def fit_peak(*args: str | Path) -> tuple[str, tuple[float, float]]:
    status, out, err = cli("fit", *args, "--no-probe", "--json")
    assert status in (0, 3, 4), err
    found = json.loads(out)
    peak = found["phases"][found["peak_phase"]]
    return found["peak_phase"], (peak["low"], peak["high"])


def test_one_figure_per_lineage_the_qwen_repro(tmp_path: Path) -> None:
    source = tmp_path / "qwen.yaml"
    source.write_bytes(QWEN.read_bytes())
    log = qwen_crash_log(tmp_path)
    status, _out, err = cli("apply", source, "--log", log, "--no-probe")
    assert status in (0, 3, 4), err
    saved = tmp_path / "qwen.oomfix.yaml"
    recorded = json.loads(changelog_path_for(saved).read_text(encoding="utf-8"))
    memory = recorded["runs"][-1]["memory"]
    phase, band = memory["phase"], band_of(memory)
    assert phase == "training" and band[1] > 18.0  # the crash's 23.37 GiB floor, carried

    # fit on the saved file, with and without --gpu (the card: the lineage's crash's)
    assert fit_peak(saved, "--gpu", "24") == (phase, band)
    assert fit_peak(saved) == (phase, band)
    # plan: today's figures of the saved config
    status, out, err = cli("plan", saved, "--no-probe", "--json")
    assert status == 0, err
    today = json.loads(out)["estimate"]["gib"]["before"][phase]
    assert (today["low"], today["high"]) == band
    # the app's load screen, through the application layer
    peak = memory_peak(start(JobRequest(saved, probe=False)), {})
    assert peak is not None and peak.band.rounded() == {"low": band[0], "high": band[1]}
    assert peak.phase == phase and peak.card_gib == 23.99
    # run: what its attempt records as the estimate of the config before it runs
    before_run = estimate_before_run(saved)
    assert before_run is not None
    assert (before_run.peak_phase, before_run.peak().rounded()) == (
        phase,
        {"low": band[0], "high": band[1]},
    )
    # scale-up on the file: the figure it prints is the one it records
    status, out, err = cli("scale-up", saved, "-o", tmp_path / "next.yaml")
    assert status == 0, err
    said = re.search(r"peaks at (\d+\.\d)–(\d+\.\d) of", out)
    assert said is not None
    log_next = json.loads((tmp_path / "next.changelog.json").read_text(encoding="utf-8"))
    after = log_next["runs"][-1]["memory"]
    assert band_of(after) == (float(said[1]), float(said[2]))
    # and its descendant is weighed by the same crash: fit on it says what scale-up recorded
    assert fit_peak(tmp_path / "next.yaml", "--gpu", "24") == (after["phase"], band_of(after))


def fake_card(folder: Path, used_mib: int) -> str:
    """A fake ``nvidia-smi`` on PATH showing one 24 GiB card with ``used_mib`` in use."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    script = bin_dir / "nvidia-smi"
    script.write_text(
        '#!/bin/sh\ncase "$1" in --query-gpu=*) '
        f'echo "0, Fake RTX, 24576, {used_mib}, {24576 - used_mib}";; esac\n'
    )
    script.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ['PATH']}"


def test_a_runs_measured_peak_is_recorded_then_used_by_fit_on_the_same_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    early = next(s for s in SCENARIOS if s.name == "image-early-steps")
    config = write_config(tmp_path, early)
    monkeypatch.setenv("PATH", fake_card(tmp_path, 18227))  # 17.8 GiB
    outcome = autopilot(config, fake_runner(24))
    last = outcome.config
    log = read_changelog(changelog_path_for(last))
    measured = [a for a in log.attempts if a.peak_gib is not None]
    assert measured and all(a.peak_gib == 17.8 for a in measured)
    # each attempt recorded what the model said of its config before it ran, and the phase
    # its measured peak is a point of; history shows one against the other
    assert all(a.estimate is not None and a.peak_phase is not None for a in measured)
    assert all("the measured peak is" in describe_record(a) for a in measured)

    monkeypatch.setenv("PATH", os.defpath)  # fit with no nvidia-smi: --gpu names the card
    status, out, err = cli("fit", last, "--gpu", "24", "--no-probe", "--json")
    assert status in (0, 3, 4), err
    found = json.loads(out)
    assert found["calibrated_by"]["measured_gib"] == 17.8
    assert found["calibrated_by"]["measured_at"] == measured[-1].at
    phase = measured[-1].peak_phase
    band = found["phases"][phase]
    assert (band["low"] + band["high"]) / 2 == pytest.approx(17.8, abs=0.15)
    status, text, err = cli("fit", last, "--gpu", "24", "--no-probe")
    day = measured[-1].at[:10]
    assert f"Measured on your card on {day}: 17.8 GiB in the " in text


def test_one_figure_per_lineage_a_web_ui_job(tmp_path: Path) -> None:
    """The Qwen repro as a web-UI job: apply --db, fit --db and scale-up --db (its printed
    figure and its record) rest on the same crash."""
    tree = yaml.safe_load(QWEN.read_text(encoding="utf-8"))
    tree["config"]["name"] = "qwen_lora"
    tree["config"]["process"][0]["train"]["lr"] = 1e-4  # the UI saves a number
    tree["config"]["process"][0]["training_folder"] = str(tmp_path / "output")
    db = make_db(tmp_path / "aitk_db.db")
    add_job(db, "qwen_lora", config=tree, step=3, info="CUDA out of memory.")
    folder = tmp_path / "output" / "qwen_lora"
    folder.mkdir(parents=True)
    log = qwen_crash_log(folder).rename(folder / "log.txt")
    crashed = time.time() - 600  # the crash came before the fix (a newer log is its retry's)
    os.utime(log, (crashed, crashed))
    job = ("--db", db, "--job", "qwen_lora")
    status, out, err = cli("apply", *job, "--in-place", "--no-probe")
    assert status in (0, 3, 4), err
    changelog = Path(next(ln for ln in out.splitlines() if ln.startswith("Change log "))[11:])
    memory = json.loads(changelog.read_text(encoding="utf-8"))["runs"][-1]["memory"]
    assert memory["phase"] == "training" and band_of(memory)[1] > 18.0
    assert fit_peak(*job, "--gpu", "24") == (memory["phase"], band_of(memory))
    status, out, err = cli("scale-up", *job, "--in-place")
    assert status == 0, err
    said = re.search(r"peaks at (\d+\.\d)–(\d+\.\d) of", out)
    assert said is not None
    after = json.loads(changelog.read_text(encoding="utf-8"))["runs"][-1]["memory"]
    assert band_of(after) == (float(said[1]), float(said[2]))
    assert fit_peak(*job, "--gpu", "24") == (after["phase"], band_of(after))


def test_the_card_says_which_log_its_oom_message_is_in(tmp_path: Path) -> None:
    """A config saved from a crash is weighed against the card of that crash's OOM message:
    ``fit``, ``plan``, the app's bar and the change log name that crash's log and the day of
    the save, not "the log", which only a log given now is."""

    for name in ("flux_portrait_lora.yaml", "flux_portrait_lora.log"):
        (tmp_path / name).write_bytes((REPO / "presets" / "demo" / name).read_bytes())
    source, log = tmp_path / "flux_portrait_lora.yaml", tmp_path / "flux_portrait_lora.log"
    status, _out, err = cli("apply", source, "--log", log, "--no-probe")
    assert status in (0, 3, 4), err
    saved = source.with_name("flux_portrait_lora.oomfix.yaml")
    day = read_changelog(changelog_path_for(saved)).runs[-1].at[:10]
    crash = "PyTorch's OOM message in the log of the crash this config"
    words = f"{crash} was saved from, flux_portrait_lora.log, {day}"

    state = start(JobRequest(saved, probe=False))
    card = job_card(state.job, state.diagnosis)
    assert card is not None and (card.source, card.words) == ("oom-message", words)
    _status, out, _err = cli("fit", saved, "--no-probe")
    assert f"on a 23.5 GiB card (from {words})\n" in out
    assert f"  {words}: the training step needed more than 23.88 GiB" in out
    _status, out, _err = cli("plan", saved, "--no-probe")
    assert f"Fixes sized against the 23.5 GiB card (from {words}): " in out
    peak = memory_peak(state, {})
    assert peak is not None and peak.card_source == words
    _status, out, _err = cli("fit", source, "--log", log, "--no-probe")
    assert "on a 23.5 GiB card (from PyTorch's OOM message in the log)\n" in out

    # Rolled back again with no log of its own: the crash it descends from is still the one
    # named, in the new change log too (its own run records no message).
    status, _out, err = cli("apply", saved, "--new-crash", "--moment", "early_steps", "--no-probe")
    assert status in (0, 3, 4), err
    again = saved.with_name("flux_portrait_lora.oomfix-2.yaml")
    words = f"{crash} descends from, flux_portrait_lora.log, {day}"
    _status, out, _err = cli("fit", again, "--no-probe")
    assert f"on a 23.5 GiB card (from {words})\n" in out
    recorded = read_changelog(changelog_path_for(again)).runs[-1]
    assert recorded.memory is not None and "flux_portrait_lora.log" in str(recorded.memory)
