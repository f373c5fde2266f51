"""Tests of ``oom-wizard plan``: text and JSON output, and where the moment and kind come from."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from oom_wizard.application.demo import IMAGE_JOB, VIDEO_JOB, copy_demo
from tests.support.corpus import FIXTURES
from tests.support.plan_support import APPLY_SAVED, cli, job, write_job

TREE = job(
    arch="wan21:14b",
    train={"batch_size": 2, "steps": 2000},
    datasets=[{"resolution": [512, 1024], "num_frames": 81}],
    sample={"width": 832, "height": 480, "num_frames": 81},
)


def write(tmp_path: Path, tree: dict[str, object] = TREE) -> Path:
    return write_job(tmp_path / "job.yaml", tree)


def test_json_is_the_plan_and_the_assumed_moment_is_said_on_stderr(tmp_path: Path) -> None:
    status, out, err = cli("plan", write(tmp_path), "--json")
    assert status == 0
    data = json.loads(out)
    assert (data["moment"], data["model_kind"]) == ("early_steps", "video")
    assert [s["id"] for s in data["steps"]][:3] == [
        "gradient_checkpointing",
        "batch_size",
        "top_bucket",
    ]
    assert "moment early_steps assumed" in err
    assert "model kind video (the arch wan21:14b (Wan 2.1 (14B)))" in err


def test_flags_win_and_are_named(tmp_path: Path) -> None:
    status, out, err = cli(
        "plan", write(tmp_path), "--json", "--moment", "sampling", "--kind", "image"
    )
    assert status == 0
    data = json.loads(out)
    assert (data["moment"], data["model_kind"]) == ("sampling", "image")
    assert "moment sampling (--moment)" in err and "model kind image (--kind)" in err


def test_text_shows_every_step_its_fields_and_an_estimate(tmp_path: Path) -> None:
    status, out, _ = cli("plan", write(tmp_path), "--moment", "intermittent")
    assert status == 0
    assert "moment intermittent (--moment)" in out
    assert "Fewer frames [num_frames]: offered, on by default" in out
    assert "datasets[0].num_frames: 81 → 41" in out
    assert "bucket 1024 (dataset #1): 1024 → (dropped)" in out  # no folder_path: its place
    assert "this step alone: training step ≈ " in out and "; today " in out
    assert "Gradient checkpointing on [gradient_checkpointing]: done" in out


def test_environment_lists_checks_and_no_steps(tmp_path: Path) -> None:
    status, out, _ = cli("plan", write(tmp_path), "--moment", "environment")
    assert status == 0
    assert "Nothing in the config changes" in out and "nvidia-smi" in out
    status, out, _ = cli("plan", write(tmp_path), "--moment", "environment", "--json")
    assert json.loads(out)["steps"] == []


def test_a_missing_config_is_one_line_and_status_2(tmp_path: Path) -> None:
    status, out, err = cli("plan", tmp_path / "nope.yaml")
    assert status == 2 and out == ""
    assert err.startswith("oom-wizard: error: ") and err.count("\n") == 1


def test_no_config_at_all_is_refused() -> None:
    status, _, err = cli("plan")
    assert status == 2 and "give the job's config file" in err


@pytest.fixture
def video_demo(tmp_path: Path) -> tuple[Path, Path]:
    """The bundled Wan 2.1 demo job, which dies now and then at step 613: config and log."""
    folder = copy_demo(tmp_path / "demo")
    return folder / VIDEO_JOB.config, folder / VIDEO_JOB.log


def test_the_log_gives_the_moment_and_kind(video_demo: tuple[Path, Path]) -> None:
    config, log = video_demo
    status, out, err = cli("plan", config, "--log", log, "--json")
    assert status == 0
    assert (json.loads(out)["moment"], json.loads(out)["model_kind"]) == ("intermittent", "video")
    assert "moment intermittent (from the log: it crashed in step 614 of 2000)" in err


def test_the_users_moment_wins_over_the_log(video_demo: tuple[Path, Path]) -> None:
    config, log = video_demo
    status, out, _ = cli("plan", config, "--log", log, "--moment", "sampling", "--json")
    assert status == 0 and json.loads(out)["moment"] == "sampling"


def test_apply_records_the_diagnosis_and_a_newer_crash_goes_one_rung_further(
    video_demo: tuple[Path, Path],
) -> None:
    source, crash_log = video_demo
    # The safe set: the seed's first rungs (the default is "just enough" here, sized by the
    # crash's own OOM figures).
    status, _, err = cli("apply", source, "--log", crash_log, "--moment", "intermittent", "--safe")
    assert status == 0, err
    output = source.with_name("wan_dance_lora.oomfix.yaml")
    log = json.loads(output.with_name("wan_dance_lora.oomfix.changelog.json").read_text("utf-8"))
    assert log["runs"][0]["diagnosis"]["signals"]
    _, out, _ = cli("plan", output, "--moment", "intermittent")
    assert "Fewer frames [num_frames]: done" in out
    retry_log = source.with_name("retry.log")
    shutil.copyfile(crash_log, retry_log)
    later = time.time() + 60
    os.utime(retry_log, (later, later))
    _, out, _ = cli("plan", output, "--moment", "intermittent", "--log", retry_log)
    assert "newer than the last roll-back and shows a crash" in out
    assert "datasets[0].num_frames: 41 → 21" in out


@pytest.mark.parametrize("folder", ["/data/train/dance_clips", "C:\\Users\\me\\dance_clips\\"])
def test_a_dataset_is_named_by_its_folder_never_dataset_n(tmp_path: Path, folder: str) -> None:
    tree = job(
        arch="wan21:14b",
        datasets=[{"folder_path": folder, "resolution": [512, 1024], "num_frames": 81}],
    )
    status, out, _ = cli("plan", write(tmp_path, tree), "--moment", "early_steps")
    assert status == 0
    assert "bucket 1024 (dataset dance_clips): 1024 → (dropped)" in out
    assert "Datasets → the 'dance_clips' dataset → Resolutions" in out
    assert "Dataset N" not in out and "(dataset 0)" not in out


def test_a_step_for_a_later_retry_has_its_own_state_and_is_not_satisfied(
    tmp_path: Path,
) -> None:
    """The next bucket down waits for the biggest to go: ``later`` in the JSON and in the
    text, never ``satisfied: true`` (issue 33); each state has its word in both."""
    source = (FIXTURES / "configs" / "flux_portrait_24gb.yaml").read_text(encoding="utf-8")
    config = tmp_path / "flux.yaml"
    config.write_text(source.replace("batch_size: 2\n", "batch_size: 1\n"), encoding="utf-8")
    status, out, _ = cli("plan", str(config), "--moment", "intermittent", "--json")
    assert status == 0
    steps = {step["id"]: step for step in json.loads(out)["steps"]}
    assert (steps["smaller_bucket"]["state"], steps["smaller_bucket"]["satisfied"]) == (
        "later",
        False,
    )
    states = {step["state"] for step in steps.values()}
    assert states == {"done", "later", "offered", "not_needed", "not_for_this_model"}
    assert all(step["satisfied"] == (step["state"] == "done") for step in steps.values())
    assert steps["batch_size"]["state"] == "done"
    assert steps["control_images"]["state"] == "not_for_this_model"
    status, text, _ = cli("plan", str(config), "--moment", "intermittent")
    assert status == 0
    assert (
        "Drop the next resolution down [smaller_bucket]: later: after the biggest resolution "
        "goes, for a later retry"
    ) in text
    assert "Batch size to 1 [batch_size]: done" in text
    assert "Fewer control images [control_images]: not for this model" in text
    assert "Lower LoRA rank [lora_rank]: not needed now, off by default" in text


def test_the_validation_run_shows_the_count_it_is_written_with(tmp_path: Path) -> None:
    """The image demo saves and samples every 250 steps: its short validation run is 251
    steps in ``plan``'s text, its JSON and the file ``apply`` writes; its reason names no
    count (issue 33: it was shown as ``3000 → 100`` and "a hundred steps")."""
    folder = copy_demo(tmp_path / "demo")
    config, log = folder / IMAGE_JOB.config, folder / IMAGE_JOB.log
    status, text, _ = cli("plan", config, "--log", log)
    assert status == 0
    block = text[text.index("[validation_run]") :].split("\n\n")[0]
    assert "train.steps: 3000 → 251" in block
    assert "hundred" not in block
    status, out, _ = cli("plan", config, "--log", log, "--json")
    step = next(s for s in json.loads(out)["steps"] if s["id"] == "validation_run")
    assert [f["after"] for f in step["fields"]] == [251]
    output = tmp_path / "out.yaml"
    steps = "gradient_checkpointing,validation_run"
    status, _, err = cli("apply", config, "--log", log, "--steps", steps, "-o", output)
    assert status in APPLY_SAVED, err
    assert "  steps: 251\n" in output.read_text(encoding="utf-8")
