"""A re-add is predicted to fit or not from the job's own figures, and stays allowed."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from oom_wizard.application.settling import memory_calibration, start
from oom_wizard.formats.document import load_document
from oom_wizard.request import JobRequest
from oom_wizard.rules.memory import Calibration, predict_readd
from oom_wizard.rules.plan import next_scale_up
from oom_wizard.storage.changelog import read_changelog
from tests.support.plan_support import cli

DEMO = Path(__file__).resolve().parents[3] / "presets" / "demo"


@pytest.fixture
def rolled_back(tmp_path: Path) -> Path:
    """The demo FLUX job rolled back with its crash log (the OOM figures are recorded)."""
    for name in ("flux_portrait_lora.yaml", "flux_portrait_lora.log"):
        shutil.copyfile(DEMO / name, tmp_path / name)
    status, _out, err = cli(
        "apply",
        tmp_path / "flux_portrait_lora.yaml",
        "--log",
        tmp_path / "flux_portrait_lora.log",
        "--no-probe",
    )
    assert status == 0, err
    return tmp_path / "flux_portrait_lora.oomfix.yaml"


def test_the_roll_back_records_its_estimate_and_the_crash_that_calibrated_it(
    rolled_back: Path,
) -> None:
    log = read_changelog(rolled_back.with_name("flux_portrait_lora.oomfix.changelog.json"))
    memory = log.runs[-1].memory
    assert memory is not None
    # The rolled-back job's training step tops its load: the latents' encode runs with the
    # VAE alone on the card, not beside the loaded FLUX and its text encoder
    assert memory["phase"] == "training"
    assert memory["phases"]["training"]["high"] > memory["phases"]["load"]["high"]
    assert memory["estimated_gib"]["low"] < 23.54 < 52.0
    assert memory["calibrated_by"]["at_least_gib"] == pytest.approx(23.88, abs=0.01)


def test_the_next_re_add_is_predicted_from_the_crash_s_headroom(rolled_back: Path) -> None:
    status, out, _err = cli("scale-up", rolled_back, "--dry-run")
    assert status == 0
    assert re.search(r"Predicted (to fit|tight|not to fit): the training step peaks at ", out)
    crash = "PyTorch's OOM message in the log of the crash this config was saved from"
    assert f"of 23.5 GiB (calibrated by {crash}, flux_portrait_lora.log, " in out


def test_a_re_add_predicted_not_to_fit_is_said_and_still_offered(rolled_back: Path) -> None:
    document = load_document(rolled_back)
    changelog = read_changelog(rolled_back.with_name("flux_portrait_lora.oomfix.changelog.json"))
    step = next_scale_up(document, changelog)
    assert step is not None
    state = start(JobRequest(rolled_back, probe=False))  # the lineage's one calibration
    calibration = memory_calibration(state)
    assert calibration is not None and calibration.on is not None  # the crashed config's
    small = predict_readd(
        document, list(step.changes), "image", card_gib=8.0, calibration=calibration
    )
    assert small is not None and small.verdict == "wont_fit"
    assert (
        small.words.startswith("Predicted not to fit") and "You can still re-add it" in small.words
    )
    status, out, _err = cli("scale-up", rolled_back, "--yes")
    assert status == 0 and "Wrote" in out


def test_a_measured_peak_makes_the_prediction_tighter() -> None:
    document = load_document(DEMO / "flux_portrait_lora.yaml")
    plain = predict_readd(document, [], "image", card_gib=80.0, calibration=None)
    # Above the uncalibrated band (FLUX.1 LoRA without checkpointing, AI Toolkit's fp32 adapter
    # inputs: 110-190 GiB), so it moves it.
    measured = Calibration("training", None, 300.0, 80.0, "attempt 2's measured peak (nvidia-smi)")
    lifted = predict_readd(document, [], "image", card_gib=80.0, calibration=measured)
    assert plain is not None and lifted is not None
    assert plain.memory.peak().high < 300.0
    assert lifted.memory.peak().mid == pytest.approx(300.0, abs=0.1)
    assert lifted.verdict == "wont_fit" or lifted.verdict == "tight"
    assert "attempt 2" in lifted.words


def test_without_a_card_there_is_no_prediction() -> None:
    document = load_document(DEMO / "flux_portrait_lora.yaml")
    assert predict_readd(document, [], "image", card_gib=None, calibration=None) is None


def test_the_service_gives_the_app_the_same_prediction(rolled_back: Path) -> None:
    from oom_wizard.application.scale_up import next_scale_up as service_next, scale_up_prediction
    from oom_wizard.application.settling import start
    from oom_wizard.request import JobRequest

    state = start(JobRequest(target=rolled_back, probe=False))
    step = service_next(state)
    assert step is not None
    found = scale_up_prediction(state, step)
    assert found is not None and found.words.startswith("Predicted")
    assert found.card_gib == pytest.approx(23.54, abs=0.01)


def test_a_re_add_on_a_split_model_is_weighed_per_card(tmp_path: Path) -> None:
    import yaml

    from tests.support.plan_support import document

    tree = yaml.safe_load((DEMO / "flux_portrait_lora.yaml").read_text("utf-8"))
    tree["config"]["process"][0]["model"].update(is_flux=True, split_model_over_gpus=True)
    config = document(tree)

    def predicted(gpus: int) -> float:
        found = predict_readd(config, [], "image", card_gib=24.0, calibration=None, gpus=gpus)
        assert found is not None
        return found.memory.peak().high

    assert predicted(2) < predicted(1) - 1.0


def test_scale_up_prints_the_figure_its_change_log_records(rolled_back: Path) -> None:
    """Issue 38 item 4: one figure for a re-add, printed before the save and recorded in the
    change log the save writes."""
    status, out, _err = cli("scale-up", rolled_back, "--yes")
    assert status == 0
    printed = re.search(r"peaks at (\d+\.\d)–(\d+\.\d) of", out)
    assert printed is not None
    saved = sorted(rolled_back.parent.glob("flux_portrait_lora.oomfix-2.changelog.json"))
    memory = read_changelog(saved[0]).runs[-1].memory
    assert memory is not None
    recorded = memory["estimated_gib"]
    assert (float(printed[1]), float(printed[2])) == (recorded["low"], recorded["high"])


def test_after_a_scale_up_crashed_the_roll_back_first_takes_it_back(rolled_back: Path) -> None:
    """Issue 43: the scale-up gave the batch back and the job crashed; the next roll-back's
    first step undoes that re-add, named for what it is, and is the default fix alone (the
    config before it trained), not a quality loss ahead of it."""
    import json

    status, _out, err = cli("scale-up", rolled_back, "--yes")
    assert status == 0, err
    scaled = rolled_back.with_name("flux_portrait_lora.oomfix-2.yaml")
    status, out, err = cli("plan", scaled, "--moment", "early_steps", "--no-probe", "--json")
    assert status == 0, err
    plan = json.loads(out)
    first = plan["steps"][0]
    assert first["id"] == "batch_size" and first["default_on"] is True
    assert first["title"] == "Undo the scale-up that crashed: batch size to 1"
    assert plan["fixes"][plan["default_fix"]] == ["batch_size"]
    top = next(step for step in plan["steps"] if step["id"] == "top_bucket")
    assert top["default_on"] is False
