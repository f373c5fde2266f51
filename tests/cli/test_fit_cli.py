"""Tests of ``oom-wizard fit`` and of ``plan --json``'s ``estimate.gib`` (DESIGN.md's contracts)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.aitk_db import add_job, make_db
from tests.support.plan_support import cli

DEMO = Path(__file__).resolve().parents[2] / "presets" / "demo"
PHASES = {"load", "baseline_sample", "training", "sample"}
PARTS = {
    "transformer",
    "in_flight",
    "text_encoder",
    "vae",
    "trainable",
    "optimizer",
    "activations",
    "vae_pass",
    "overhead",
    "context",
    "unexplained",
}


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    """The demo FLUX job (checkpointing off, batch 2, 1024 px) copied where it may be saved."""
    config = tmp_path / "flux_portrait_lora.yaml"
    shutil.copyfile(DEMO / "flux_portrait_lora.yaml", config)
    return config


#: ``fit``'s exit status by verdict (README: the exit statuses).
VERDICT_STATUS = {"fits": 0, "tight": 3, "wont_fit": 4, "not_estimated": 5}


def fit_json(*args: str | Path) -> dict[str, Any]:
    status, out, err = cli("fit", *args, "--no-probe", "--json")
    found: dict[str, Any] = json.loads(out)
    assert status == VERDICT_STATUS[found["verdict"]], err
    return found


def test_fit_json_has_the_contract_s_keys(demo: Path) -> None:
    found = fit_json(demo, "--gpu", "24")
    assert found["card_gib"] == 24.0 and found["card_source"] == "--gpu"
    assert set(found["phases"]) == PHASES
    for band in found["phases"].values():
        assert band is None or (set(band) == {"low", "high"} and band["low"] <= band["high"])
    assert found["peak_phase"] == "training"
    assert found["verdict"] == "wont_fit"
    assert set(found["parts_gib"]) == PARTS
    assert found["calibrated_by"] is None


def test_the_fix_is_the_plan_s_steps_in_its_order_and_reaches_fits(demo: Path) -> None:
    found = fit_json(demo, "--gpu", "24")
    ids = [step["id"] for step in found["fix"]]
    assert ids and ids[0] == "gradient_checkpointing"
    assert found["fix_moment"] == "early_steps" and found["fix_fits"] is True
    assert found["fix_peak_gib"]["high"] <= 24.0
    _status, out, _err = cli("plan", demo, "--moment", "early_steps", "--no-probe", "--json")
    order = [step["id"] for step in json.loads(out)["steps"]]
    assert [i for i in order if i in ids] == ids
    for step in found["fix"]:
        keys = {"id", "title", "why", "state", "satisfied", "default_on", "ui_hint", "fields"}
        assert keys <= set(step)
        assert step["state"] in ("offered", "not_needed")  # a fit's steps change something


def test_apply_takes_the_fix_as_it_is(demo: Path, tmp_path: Path) -> None:
    found = fit_json(demo, "--gpu", "24")
    assert found["fix_apply"] == [
        "oom-wizard",
        "apply",
        str(demo),
        "--moment",
        found["fix_moment"],
        "--steps",
        ",".join(step["id"] for step in found["fix"]),
    ]
    out = tmp_path / "fixed.yaml"
    ids = ",".join(step["id"] for step in found["fix"])
    status, _out, err = cli(
        "apply", demo, "--moment", found["fix_moment"], "--steps", ids, "-o", out
    )
    assert status == 0, err
    fixed = fit_json(out, "--gpu", "24")
    assert fixed["verdict"] == "fits"
    log = json.loads((tmp_path / "fixed.changelog.json").read_text("utf-8"))
    memory = log["runs"][-1]["memory"]
    # The change log records the saved config's own peak: its phase and its band, as fit says.
    assert memory["phase"] == fixed["peak_phase"]
    assert memory["estimated_gib"] == fixed["phases"][fixed["peak_phase"]]
    assert memory["estimated_gib"]["high"] <= 24.0


def test_a_job_that_fits_has_no_fix(demo: Path) -> None:
    found = fit_json(demo, "--gpu", "200")
    assert found["verdict"] == "fits" and found["fix"] == [] and found["fix_moment"] is None


def test_the_crash_s_own_figures_calibrate_the_fit(demo: Path) -> None:
    found = fit_json(demo, "--gpu", "24", "--log", DEMO / "flux_portrait_lora.log")
    calibrated = found["calibrated_by"]
    assert calibrated["phase"] == "training"
    assert calibrated["at_least_gib"] == pytest.approx(23.88, abs=0.01)
    assert "OOM message" in calibrated["source"]
    assert found["phases"]["training"]["low"] >= 23.88


def test_the_text_report_names_the_peak_and_the_apply_line(demo: Path) -> None:
    status, out, _err = cli("fit", demo, "--gpu", "24", "--no-probe")
    assert status == VERDICT_STATUS["wont_fit"]
    assert "peak: training step, " in out and ": won't fit;" in out and "wont" not in out
    assert "oom-wizard apply" in out and "--steps gradient_checkpointing" in out


def test_without_a_card_and_a_terminal_it_says_so_in_one_line(demo: Path) -> None:
    status, out, err = cli("fit", demo, "--no-probe")
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("oom-wizard: error: ") and "--gpu" in err


@pytest.mark.parametrize("gpu", ["abc", "0", "-3", "nan"])
def test_a_bad_card_size_is_one_line(demo: Path, gpu: str) -> None:
    status, _out, err = cli("fit", demo, "--gpu", gpu, "--no-probe")
    assert status == 2 and err.count("\n") == 1 and err.startswith("oom-wizard: error: ")


def test_a_broken_config_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("config:\n  process: [\n", encoding="utf-8")
    status, _out, err = cli("fit", bad, "--gpu", "24", "--no-probe")
    assert status == 2 and err.count("\n") == 1 and "bad.yaml:" in err


def test_fit_reads_a_web_ui_job(tmp_path: Path) -> None:
    db = make_db(tmp_path / "aitk_db.db")
    config = yaml.safe_load((DEMO / "flux_portrait_lora.yaml").read_text("utf-8"))
    config["config"]["process"][0]["train"]["lr"] = 1e-4  # safe_load reads 1e-4 as text
    add_job(db, "portrait", config=config)
    found = fit_json("--db", db, "--job", "portrait", "--gpu", "24")
    assert found["verdict"] == "wont_fit" and found["peak_phase"] == "training"
    line = found["fix_apply"]
    assert line[:7] == ["oom-wizard", "apply", "--db", str(db), "--job", "portrait", "--as-new"]
    status, _out, err = cli(*line[1:], "--no-probe")  # saved as a new job of the UI
    assert status == 0, err  # no card known to apply: 0


def test_plan_json_gives_the_bands_before_and_after(demo: Path) -> None:
    status, out, err = cli("plan", demo, "--moment", "early_steps", "--no-probe", "--json")
    assert status == 0, err
    gib = json.loads(out)["estimate"]["gib"]
    assert set(gib) == {"before", "after"}
    assert set(gib["before"]) == PHASES and set(gib["after"]) == PHASES
    assert gib["after"]["training"]["high"] < gib["before"]["training"]["low"]


def test_a_run_s_measured_peak_calibrates_the_fit(demo: Path, tmp_path: Path) -> None:
    out = tmp_path / "fixed.yaml"
    status, _out, err = cli("apply", demo, "--moment", "early_steps", "-o", out, "--no-probe")
    assert status == 0, err
    log_path = tmp_path / "fixed.changelog.json"
    log = json.loads(log_path.read_text("utf-8"))
    today = fit_json(out, "--gpu", "48")["phases"]["training"]
    measured = round(today["high"] + 5.0, 1)
    log["attempts"] = [
        {
            "at": "2026-12-01T10:00:00+00:00",
            "config": "other.yaml",
            "outcome": "finished",
            "peak_gib": 99.0,
            "card_gib": 80.0,
        },
        {
            "at": "2026-12-01T11:00:00+00:00",
            "config": str(out),
            "outcome": "finished",
            "peak_gib": measured,
            "card_gib": 48.0,
        },
    ]
    log_path.write_text(json.dumps(log), encoding="utf-8")
    found = fit_json(out, "--gpu", "48")
    assert found["calibrated_by"]["measured_gib"] == measured
    assert "attempt 2" in found["calibrated_by"]["source"]
    band = found["phases"]["training"]
    assert (band["low"] + band["high"]) / 2 == pytest.approx(measured, abs=0.1)
    assert found["calibration_scale"] > 1.0


def test_on_a_terminal_without_a_card_it_asks(demo: Path) -> None:
    """A real child process whose stdin and stderr are a terminal: the card is asked for."""
    import os
    import pty
    import select
    import subprocess
    import sys
    import time

    master, slave = pty.openpty()
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "oom_wizard", "fit", str(demo), "--no-probe", "--json"],
            stdin=slave,
            stderr=slave,
            stdout=subprocess.PIPE,
        )
        asked = b""
        deadline = time.monotonic() + 60
        while b"GiB: " not in asked and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                asked += os.read(master, 1024)
        assert b"The card's memory in GiB: " in asked
        os.write(master, b"24\n")
        out, _ = child.communicate(timeout=60)
    finally:
        os.close(master)
        os.close(slave)
    found = json.loads(out)
    assert child.returncode == VERDICT_STATUS[found["verdict"]]
    assert found["card_gib"] == 24.0 and found["card_source"] == "asked"


def two_cards(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ``nvidia-smi`` first on PATH that shows two idle 24 GiB cards."""
    import os
    import stat

    folder.mkdir()
    script = folder / "nvidia-smi"
    script.write_text(
        '#!/bin/sh\ncase "$1" in\n'
        "  --query-gpu=*) printf '0, NVIDIA RTX 4090, 24564, 0, 24564\\n"
        "1, NVIDIA RTX 4090, 24564, 0, 24564\\n' ;;\n"
        "  --query-compute-apps=*) printf '' ;;\nesac\n",
        encoding="utf-8",
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")


def test_fit_and_plan_json_weigh_a_split_model_per_card_with_two_gpus(
    demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = yaml.safe_load(demo.read_text("utf-8"))
    tree["config"]["process"][0]["model"].update(is_flux=True, split_model_over_gpus=True)
    demo.write_text(yaml.safe_dump(tree, sort_keys=False), encoding="utf-8")
    one = fit_json(demo, "--gpu", "24")  # no probe: one card
    two_cards(tmp_path / "bin", monkeypatch)
    status, out, err = cli("fit", demo, "--json")
    two = json.loads(out)
    assert status == VERDICT_STATUS[two["verdict"]], err
    assert two["card_gib"] == pytest.approx(24.0, abs=0.05) and two["card_source"] == "nvidia-smi"
    assert two["phases"]["training"]["high"] < one["phases"]["training"]["high"] - 1.0
    assert any("over 2 GPUs" in note for note in two["notes"])
    assert any("one GPU is seen (or none was probed)" in note for note in one["notes"])
    args = ("plan", demo, "--moment", "early_steps", "--json")
    _status, probed, _err = cli(*args)
    _status, alone, _err = cli(*args, "--no-probe")
    before = [json.loads(text)["estimate"]["gib"]["before"]["training"] for text in (probed, alone)]
    assert before[0]["high"] < before[1]["high"] - 1.0


def test_the_card_prompt_asks_again_after_a_typo() -> None:
    """``fit`` without a GPU asks for the card on a terminal: a typo is said and asked
    again, rather than ending the command (issue 33)."""
    import io

    from oom_wizard.commands.fit import ask_card
    from oom_wizard.errors import WizardError

    prompts = io.StringIO()
    card = ask_card(io.StringIO("24gb\n24\n"), prompts)
    assert (card.gib, card.source) == (24.0, "asked")
    assert "'24gb' is not a number of GiB, such as 24. Again, in GiB" in prompts.getvalue()
    with pytest.raises(WizardError, match="3 tries"):
        ask_card(io.StringIO("x\ny\nz\n"), io.StringIO())
    with pytest.raises(WizardError, match="no card size given"):
        ask_card(io.StringIO(""), io.StringIO())


def test_with_the_log_the_card_is_the_oom_message_s_and_not_asked(demo: Path) -> None:
    found = fit_json(demo, "--log", DEMO / "flux_portrait_lora.log")
    assert found["card_source"] == "oom-message" and found["card_gib"] == pytest.approx(23.54)
    # The crashed step is at or above the card; the phases the log shows passing fit.
    assert found["phases"]["training"]["low"] >= 23.54
    assert found["calibrated_by"]["passed"] == ["load", "baseline_sample"]
    for phase in ("load", "baseline_sample"):
        assert found["phases"][phase]["high"] <= 23.54


def test_with_the_log_the_fix_is_for_the_log_s_moment(tmp_path: Path) -> None:
    for name in ("wan_dance_lora.yaml", "wan_dance_lora.log"):
        shutil.copyfile(DEMO / name, tmp_path / name)
    config, log = tmp_path / "wan_dance_lora.yaml", tmp_path / "wan_dance_lora.log"
    found = fit_json(config, "--log", log)
    assert found["fix_moment"] == "intermittent"  # the log's moment, not early_steps


def test_an_intermittent_crash_puts_the_step_at_its_floor_from_either_side(tmp_path: Path) -> None:
    """The Wan demo trained 612 steps on its 47.5 GiB card before one crashed: the training
    step's low edge is on the crash's floor, lowered to it from the CPU figures' 52-78 GiB,
    and a fix on the ladder fits. Its log and its config agree: the factor is within the
    model's range, and no note says they disagree."""
    for name in ("wan_dance_lora.yaml", "wan_dance_lora.log"):
        shutil.copyfile(DEMO / name, tmp_path / name)
    config, log = tmp_path / "wan_dance_lora.yaml", tmp_path / "wan_dance_lora.log"
    alone = fit_json(config, "--gpu", "47.54")["phases"]["training"]
    found = fit_json(config, "--log", log)
    training = found["phases"]["training"]
    assert found["calibrated_by"]["also_ran"] is True
    assert found["card_gib"] == pytest.approx(47.54)
    assert alone["low"] > found["card_gib"]
    assert training["low"] == pytest.approx(found["card_gib"], abs=0.3)
    assert found["verdict"] == "tight" and found["fix_fits"] is True
    assert 0.5 <= found["calibration_scale"] < 1.0
    assert not any("disagree" in note for note in found["notes"])


def test_a_log_that_says_far_less_than_its_config_needs_is_called_out(tmp_path: Path) -> None:
    """The same job's log on a 23.5 GiB card, where 81 frames at 1008x576 cannot have trained
    612 steps (the block inputs checkpointing keeps are more than the card): the factor falls
    under 0.5 and a note says the log and the config disagree."""
    shutil.copyfile(DEMO / "wan_dance_lora.yaml", tmp_path / "wan_dance_lora.yaml")
    text = (DEMO / "wan_dance_lora.log").read_bytes()
    smaller = text.replace(b"capacity of 47.54 GiB", b"capacity of 23.54 GiB").replace(
        b"44.18 GiB is allocated", b"20.18 GiB is allocated"
    )
    assert smaller != text
    (tmp_path / "wan_dance_lora.log").write_bytes(smaller)
    found = fit_json(tmp_path / "wan_dance_lora.yaml", "--log", tmp_path / "wan_dance_lora.log")
    assert found["card_gib"] == pytest.approx(23.54)
    assert found["calibration_scale"] < 0.5
    assert any("disagree" in note for note in found["notes"])


def test_when_nothing_fits_it_says_so_and_prints_no_apply_line(demo: Path) -> None:
    status, out, _err = cli("fit", demo, "--gpu", "6", "--no-probe")
    assert status == VERDICT_STATUS["wont_fit"]
    assert "Nothing AI Toolkit offers for this job is predicted to fit" in out
    assert "The closest config, with " in out and "GiB over the 6.0 GiB card" in out
    assert "oom-wizard apply" not in out
    found = fit_json(demo, "--gpu", "6")
    assert found["fix_fits"] is False and found["fix_apply"] is None
    assert found["fix"] and found["fix_lacks_gib"] > 0


def test_a_job_type_the_model_does_not_cover_gets_no_verdict(tmp_path: Path) -> None:
    config = tmp_path / "ti.yaml"
    text = (DEMO / "flux_portrait_lora.yaml").read_text(encoding="utf-8")
    config.write_text(text.replace("type: 'sd_trainer'", "type: 'textual_inversion_trainer'"))
    found = fit_json(config, "--gpu", "24")
    assert found["verdict"] == "not_estimated" and "job type" in found["not_estimated"]
    assert set(found["phases"].values()) == {None} and found["parts_gib"] is None
    status, out, _err = cli("fit", config, "--gpu", "24", "--no-probe")
    assert status == VERDICT_STATUS["not_estimated"]
    assert "not estimated: this job type" in out and "apply" not in out


@pytest.mark.parametrize(
    ("arch", "why"),
    [
        ("textual_inversion_trainer", "this job type (textual_inversion_trainer)"),
        ("ming_image", "the parameter counts of Ming-Image (model.arch ming_image)"),
    ],
)
def test_a_job_without_figures_gets_no_gib_anywhere(tmp_path: Path, arch: str, why: str) -> None:
    """The plan still offers its steps by which way they move the peak, but no GiB: not in
    ``plan``, ``plan --json``, ``apply`` nor the change log, as ``fit`` says."""
    config = tmp_path / "job.yaml"
    text = (DEMO / "flux_portrait_lora.yaml").read_text(encoding="utf-8")
    if arch == "textual_inversion_trainer":
        text = text.replace("type: 'sd_trainer'", "type: 'textual_inversion_trainer'")
    else:
        text = text.replace('arch: "flux"', f'arch: "{arch}"')
    config.write_text(text, encoding="utf-8")
    log = ("--log", DEMO / "flux_portrait_lora.log")
    status, out, err = cli("plan", config, *log, "--no-probe")
    assert status == 0, err
    assert f"with the default steps: memory not estimated: {why}" in out
    assert "GiB (" not in out and "% of today's" not in out
    assert "Fixes: only the moment's usual changes (no GiB to weigh a smaller one against" in out
    status, out, err = cli("plan", config, *log, "--no-probe", "--json")
    assert status == 0, err
    estimate = json.loads(out)["estimate"]
    assert why in estimate["not_estimated"] and "gib" not in estimate
    assert estimate["lowers_peak"] is True
    status, out, err = cli("apply", config, *log, "--no-probe")
    assert status == 0, err
    assert "Estimate: memory not estimated" in out
    saved = json.loads((tmp_path / "job.oomfix.changelog.json").read_text(encoding="utf-8"))
    assert why in saved["runs"][-1]["memory"]["not_estimated"]


def test_the_parts_are_named_for_what_they_are(demo: Path) -> None:
    status, out, _err = cli("fit", demo, "--gpu", "24", "--no-probe")
    assert status == VERDICT_STATUS["wont_fit"]
    assert "CUDA context 0.7, allocator reserve and workspaces" in out
    assert "CUDA context + allocator reserve" not in out


def test_layer_offloading_names_the_layer_copies_it_stages(demo: Path) -> None:
    """Under 100 % layer offloading the transformer's weights leave the card; the copies its
    memory manager stages are their own part, in the text and in ``parts_gib``."""
    tree = yaml.safe_load(demo.read_text("utf-8"))
    model = tree["config"]["process"][0]["model"]
    model.update(
        arch="qwen_image",
        name_or_path="Qwen/Qwen-Image",
        quantize=False,
        layer_offloading=True,
        layer_offloading_transformer_percent=1.0,
    )
    demo.write_text(yaml.safe_dump(tree, sort_keys=False), encoding="utf-8")
    found = fit_json(demo, "--gpu", "24")
    parts = found["parts_gib"]
    assert parts["transformer"] < 0.1 and 0.5 < parts["in_flight"] < 2.0
    status, out, _err = cli("fit", demo, "--gpu", "24", "--no-probe")
    assert status == VERDICT_STATUS[found["verdict"]]
    assert "layer copies in flight" in out


def cards(folder: Path, monkeypatch: pytest.MonkeyPatch, *mib: int) -> None:
    """An ``nvidia-smi`` first on PATH that shows idle cards of these sizes (MiB), in order."""
    import os
    import stat

    folder.mkdir()
    rows = "".join(f"{i}, NVIDIA GPU, {size}, 0, {size}\\n" for i, size in enumerate(mib))
    script = folder / "nvidia-smi"
    script.write_text(
        f"#!/bin/sh\ncase \"$1\" in\n  --query-gpu=*) printf '{rows}' ;;\n"
        "  --query-compute-apps=*) printf '' ;;\nesac\n",
        encoding="utf-8",
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")


@pytest.mark.parametrize(("sizes", "card"), [((24564, 81920), 23.99), ((49152,), 48.0)])
def test_plan_and_fit_weigh_against_one_card(
    demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sizes: tuple[int, ...], card: float
) -> None:
    """One card by one rule (issue 38 item 1): the card AI Toolkit trains on (cuda:0), as
    nvidia-smi shows it, before the card in the crash's message. A 24 GiB and an 80 GiB card:
    24, not the largest; a 48 GiB card with the demo's crash log of a 23.5 GiB card: 48.
    ``plan --json`` and ``fit --json`` name the same card and the same fix."""
    cards(tmp_path / "bin", monkeypatch, *sizes)
    log = ("--log", DEMO / "flux_portrait_lora.log")
    status, out, err = cli("plan", demo, *log, "--json")
    assert status == 0, err
    plan = json.loads(out)
    status, out, err = cli("fit", demo, *log, "--json")
    fitted = json.loads(out)
    assert status == VERDICT_STATUS[fitted["verdict"]], err
    assert fitted["card_source"] == "nvidia-smi"
    assert fitted["card_gib"] == pytest.approx(card, abs=0.05)
    assert plan["sizing"]["card_gib"] == pytest.approx(card, abs=0.05)
    assert fitted["calibrated_by"]["card_gib"] == pytest.approx(23.54, abs=0.01)  # the crash's
    assert [step["id"] for step in fitted["fix"]] == [
        s for s in plan["fixes"]["just_enough"] if s != "validation_run"
    ]
    assert fitted["fix_fits"] is plan["sizing"]["covered"]
    status, out, _err = cli("fit", demo, *log)
    assert "note: that crash was on a 23.5 GiB card; this fit weighs the job against the" in out


def test_a_job_with_room_says_what_it_could_get_back_and_the_saved_config_fits(
    demo: Path,
) -> None:
    """Issue 38 item 4: at 140 GiB the demo job (4-bit FLUX, low_vram) gets back its text
    encoder at full precision and the faster load, not the full-precision transformer (it
    would not fit with the margin); ``set`` with the printed fields saves a config whose own
    ``fit`` fits with the same peak."""
    found = fit_json(demo, "--gpu", "140")
    room = found["give_back"]
    assert found["verdict"] == "fits" and found["fix"] == []
    assert [step["id"] for step in room["steps"]] == ["quantize_te", "low_vram"]
    assert room["held"]["id"] == "quantize" and room["held"]["peak_gib"]["high"] > 140 * 0.9
    command = room["command"]
    assert command[:3] == ["oom-wizard", "set", str(demo)]
    status, _out, err = cli(*command[1:], "-o", demo.with_name("back.yaml"))
    assert status == 0, err
    again = fit_json(demo.with_name("back.yaml"), "--gpu", "140")
    assert again["verdict"] == "fits"
    assert again["phases"][again["peak_phase"]] == room["peak_gib"]
    assert again["give_back"]["steps"] == [] and again["give_back"]["held"]["id"] == "quantize"


def test_a_rolled_back_job_with_room_gets_its_re_adds_through_scale_up(demo: Path) -> None:
    status, _out, err = cli("apply", demo, "--log", DEMO / "flux_portrait_lora.log", "--no-probe")
    assert status == 0, err
    saved = demo.with_name("flux_portrait_lora.oomfix.yaml")
    room = fit_json(saved, "--gpu", "32")["give_back"]
    assert room["steps"][0]["id"] == "batch_size" and room["held"] is not None
    assert room["command"] == ["oom-wizard", "scale-up", str(saved), "--yes"]


def test_a_phase_that_crashed_is_never_called_tight() -> None:
    """Issue 43: "training step 23.5-30.4 GiB tight (it crashed here)" on the card it crashed
    on is a contradiction: the crash is a fact, the phase does not fit that card (or a
    smaller one); on a bigger card the band decides."""
    from dataclasses import replace

    from oom_wizard.application.fitting import FitReport, crashed_here
    from oom_wizard.application.settling import JobCard
    from oom_wizard.rules.memory import Band, Calibration, JobMemory

    crash = Calibration("training", 23.40, None, 23.99, "PyTorch's OOM message")
    band = Band(23.5, 30.4)
    memory = JobMemory(
        phases={
            "load": Band(10.0, 12.0),
            "baseline_sample": None,
            "training": band,
            "sample": None,
        },
        parts={},
        peak_phase="training",
        known=True,
        calibrated_by=crash,
        notes=(),
    )
    assert crashed_here(memory, "training", 24.0) and not crashed_here(memory, "load", 24.0)
    on_it = FitReport(JobCard(24.0, "--gpu"), memory, "wont_fit", None)
    assert on_it.phase_verdict("training") == "wont_fit"
    assert on_it.phase_verdict("load") == "fits"
    bigger = FitReport(JobCard(28.0, "--gpu"), memory, "tight", None)
    assert not crashed_here(memory, "training", 28.0)
    assert bigger.phase_verdict("training") == "tight"
    intermittent = replace(crash, also_ran=True)
    assert not crashed_here(replace(memory, calibrated_by=intermittent), "training", 24.0)
