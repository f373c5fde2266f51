"""One memory model: the demo job's training band and its fix's band are one figure in
``plan`` (text and ``--json``), ``fit`` (text and ``--json``), ``apply``'s text, the change
log's ``runs[].memory`` and the app (its bar and its review's fix line)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from oom_wizard.application.choosing import fix_words, memory_peak
from oom_wizard.application.demo import IMAGE_JOB, copy_demo
from oom_wizard.application.settling import start
from oom_wizard.request import JobRequest
from oom_wizard.spelling import verdict as verdict_words
from tests.support.plan_support import cli

DEMO_VIDEO = Path(__file__).resolve().parents[2] / "presets" / "demo" / "wan_dance_lora.yaml"
BAND = r"(\d+\.\d)–(\d+\.\d)"


def rounded(band: dict[str, float]) -> tuple[str, str]:
    return f"{band['low']:.1f}", f"{band['high']:.1f}"


@pytest.fixture
def demo(tmp_path: Path) -> tuple[Path, Path]:
    folder = copy_demo(tmp_path / "demo")
    return folder / IMAGE_JOB.config, folder / IMAGE_JOB.log


def test_the_demo_s_training_and_fix_bands_are_one_figure_everywhere(
    demo: tuple[Path, Path],
) -> None:
    source, log = demo
    common = ("--log", log, "--no-probe")
    # plan --json: today's training band, and the default fix's.
    status, out, err = cli("plan", source, *common, "--json")
    assert status == 0, err
    plan: dict[str, Any] = json.loads(out)
    today = rounded(plan["estimate"]["gib"]["before"]["training"])
    fix = rounded(plan["estimate"]["gib"]["after"]["training"])
    assert rounded(plan["sizing"]["predicted_gib"][plan["default_fix"]]) == fix
    assert float(today[0]) >= 23.88  # the crash's floor: it needed more than 23.88 GiB
    steps = ",".join(plan["fixes"][plan["default_fix"]])

    # plan's text and apply's text: "training step ≈ M GiB (L–H; today L–H GiB; ...)".
    said = f"training step ≈ \\d+\\.\\d GiB \\({BAND}; today {BAND} GiB"
    status, out, err = cli("plan", source, *common)
    assert status == 0, err
    found = re.search(said, out)
    assert found is not None, out
    assert (found[1], found[2]) == fix and (found[3], found[4]) == today

    # fit: today's band per phase, the fix's band at the same phase (text and JSON).
    status, out, err = cli("fit", source, *common, "--json")
    assert status == 4, err  # won't fit: the job crashed
    fitted: dict[str, Any] = json.loads(out)
    assert fitted["card_source"] == "oom-message"  # no nvidia-smi, no --gpu: the log's card
    assert rounded(fitted["phases"]["training"]) == today
    assert [step["id"] for step in fitted["fix"]] == steps.split(",")
    assert rounded(fitted["fix_phases"]["training"]) == fix
    status, out, err = cli("fit", source, *common)
    assert status == 4, err
    assert re.search(f"training step +{today[0]}–{today[1]} GiB", out), out
    assert f"(training step {fix[0]}–{fix[1]} GiB; peak" in out

    # apply: the printed estimate, and the change log's record of the saved config.
    status, out, err = cli("apply", source, *common)
    assert status == 0, err
    found = re.search(said, out)
    assert found is not None, out
    assert (found[1], found[2]) == fix and (found[3], found[4]) == today
    changelog = json.loads(source.with_name(source.stem + ".oomfix.changelog.json").read_text())
    memory = changelog["runs"][-1]["memory"]
    assert rounded(memory["phases"]["training"]) == fix
    assert memory["calibrated_by"]["at_least_gib"] == pytest.approx(23.88)

    # The app: the load screen's bar (today) and the review's line for the default fix.
    state = start(JobRequest(source, log, probe=False))
    peak = memory_peak(state, {})
    assert peak is not None and peak.phase == "training"
    assert (f"{peak.band.low:.1f}", f"{peak.band.high:.1f}") == today
    assert peak.verdict == "wont_fit"  # it crashed there: never under the card
    assert f"({today[0]}–{today[1]})" in peak.words()
    sized = state.plan.sizing
    assert sized is not None
    fixed = sized.predicted(state.plan.default_fix)
    assert (f"{fixed.low:.1f}", f"{fixed.high:.1f}") == fix
    assert f"≈ {fixed.mid:.1f} of 23.5 GiB" in fix_words(state, state.plan.default_fix)


def test_the_change_log_records_the_saved_config_s_host_as_fit_gives_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``runs[].memory.host`` is ``fit --json``'s ``host`` for the saved config on the same
    machine (the probe's RAM, here 16 GiB): phases, RAM, verdict; ``history`` says it."""
    from oom_wizard.host.probe import GpuInfo, ProbeResult

    probe = ProbeResult((GpuInfo(0, "RTX 4090", 24.0, 0.0, 24.0),), (), host_total_gib=16.0)
    monkeypatch.setattr("oom_wizard.application.opening.read_probe", lambda: (probe, None))
    tree = yaml.safe_load(DEMO_VIDEO.read_text("utf-8"))
    process = tree["config"]["process"][0]
    process["model"].update(
        arch="wan21", layer_offloading=True, layer_offloading_transformer_percent=1.0
    )
    config = tmp_path / "wan.yaml"
    config.write_text(yaml.safe_dump(tree, sort_keys=False), encoding="utf-8")
    status, _, err = cli("apply", config, "--moment", "early_steps")
    assert status == 0, err
    saved = tmp_path / "wan.oomfix.yaml"
    log = json.loads((tmp_path / "wan.oomfix.changelog.json").read_text("utf-8"))
    recorded = log["runs"][-1]["memory"]["host"]
    _, out, _ = cli("fit", saved, "--json")
    host = json.loads(out)["host"]
    assert recorded["ram_gib"] == host["ram_gib"] == 16.0
    assert recorded["verdict"] == host["verdict"] != "unknown"
    assert recorded["phases"] == host["phases"]
    assert recorded["phases"]["training"]["high"] > 0
    peak = host["phases"][host["peak_phase"]]
    _, story, _ = cli("history", saved)
    assert (
        f"host RAM: the {host['peak_phase']} phase needs {peak['low']:.1f}–{peak['high']:.1f} "
        f"GiB of 16.0 GiB: {verdict_words(host['verdict'])}"
    ) in story
