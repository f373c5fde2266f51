"""Tests of the scale-up: one re-add per run, in order, back to the original values.

The round trip runs on every AI Toolkit example config: roll back every step the scale-up
order knows, then ``scale-up --yes`` until nothing is left; the final config must have the
source's values (``verify_change.py SOURCE FINAL``: no field differs).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.plan_support import SCALE_UP_ORDER, cli, examples, job, verify, verify_change, write_job
from wizard.changelog import read_changelog
from wizard.changes import commit, prepare
from wizard.document import load_document
from wizard.plan import StepChoice, build_plan, changes_for, next_scale_up


def latest(folder: Path) -> Path:
    """The newest config in ``folder`` (each save gets the next ``.oomfix-N`` name)."""
    return max(folder.glob("*.oomfix*.yaml"), key=_save_number)


def _save_number(config: Path) -> int:
    match = re.search(r"\.oomfix(?:-(\d+))?$", config.stem)
    return int(match.group(1) or 1) if match else 0


def changelog_beside(config: Path) -> Path:
    return config.with_name(config.stem + ".changelog.json")


def scale_up_all(folder: Path) -> list[str]:
    """Run ``scale-up --yes`` until nothing is left; the step each run restored."""
    restored: list[str] = []
    for _ in range(len(SCALE_UP_ORDER) + 2):
        config = latest(folder)
        status, out, err = cli("scale-up", config, "--yes")
        assert status == 0, err
        if "Nothing left to re-add" in out:
            return restored
        runs = json.loads(changelog_beside(latest(folder)).read_text("utf-8"))["runs"]
        assert runs[-1]["direction"] == "scale_up" and len(runs[-1]["steps"]) == 1
        restored.append(runs[-1]["steps"][0])
    raise AssertionError(f"scale-up did not finish: {restored}")


def rollback_steps(config: Path, moment: str = "early_steps") -> list[str]:
    """The steps of the plan that the scale-up order can undo."""
    document = load_document(config)
    from wizard.plan import default_model_kind

    plan = build_plan(document, moment, default_model_kind(document)[0])
    return [step.id for step in plan.steps if step.id in SCALE_UP_ORDER]


@pytest.mark.parametrize("example", examples(), ids=lambda path: path.stem)
def test_round_trip_restores_every_value(example: Path, tmp_path: Path) -> None:
    source = tmp_path / example.name
    shutil.copyfile(example, source)
    steps = ",".join(rollback_steps(source))
    status, _, err = cli("apply", source, "--moment", "early_steps", "--steps", steps)
    assert status == 0, err
    rolled = json.loads(changelog_beside(latest(tmp_path)).read_text("utf-8"))
    applied = rolled["runs"][0]["steps"]
    restored = scale_up_all(tmp_path)
    assert restored == [step for step in SCALE_UP_ORDER if step in applied]
    final = latest(tmp_path)
    assert _differing(source, final) == set()
    verdict, report = verify(source, final, changelog_beside(final))
    assert verdict == 0, report


def test_round_trip_after_all_steps_restores_every_value(tmp_path: Path) -> None:
    tree = job(
        arch="wan21:14b",
        train={"batch_size": 2, "steps": 3000, "gradient_checkpointing": False},
        datasets=[{"resolution": [512, 1024], "num_frames": 81, "batch_size": 2}],
        sample={"width": 832, "height": 480, "num_frames": 81, "sample_every": 250},
    )
    source = tmp_path / "job.yaml"
    write_job(source, tree)
    assert cli("apply", source, "--moment", "early_steps", "--all")[0] == 0
    assert scale_up_all(tmp_path) == SCALE_UP_ORDER
    assert _differing(source, latest(tmp_path)) == set()


def test_quality_comes_back_before_the_memory_settings(tmp_path: Path) -> None:
    tree = job(arch="qwen_image", train={"batch_size": 2, "gradient_checkpointing": False})
    source = tmp_path / "job.yaml"
    write_job(source, tree)
    document = load_document(source)
    plan = build_plan(document, "early_steps", "image")
    every = {step.id: StepChoice(step.id, True) for step in plan.steps}
    saved = commit(prepare(document, changes_for(plan, every)), direction="rollback")
    restored = []
    while (
        step := next_scale_up(load_document(saved.config), read_changelog(saved.changelog))
    ) is not None:
        restored.append(step.step)
        saved = commit(
            prepare(load_document(saved.config), list(step.changes)),
            direction="scale_up",
            steps=[step.step],
        )
    assert restored == [s for s in SCALE_UP_ORDER if s in restored]
    assert restored[-2:] == ["low_vram", "gradient_checkpointing"]
    assert _differing(source, saved.config) == set()


def test_a_dropped_bucket_comes_back_in_its_place(tmp_path: Path) -> None:
    source = tmp_path / "job.yaml"
    tree = job(datasets=[{"resolution": [1024, 512, 768]}])
    write_job(source, tree)
    assert cli("apply", source, "--moment", "intermittent")[0] == 0
    assert (
        cli(
            "apply",
            latest(tmp_path),
            "--moment",
            "intermittent",
            "--new-crash",
            "--steps",
            "top_bucket",
        )[0]
        == 0
    )
    status, out, _ = cli("scale-up", latest(tmp_path), "--yes")
    assert status == 0 and "Re-add the biggest resolution" in out
    tree_after = yaml.safe_load(latest(tmp_path).read_text("utf-8"))
    assert tree_after["config"]["process"][0]["datasets"][0]["resolution"] == [1024, 512, 768]


def test_scale_up_shows_and_writes_nothing_without_yes_or_output(tmp_path: Path) -> None:
    source = tmp_path / "job.yaml"
    write_job(source, job(train={"batch_size": 4, "steps": 100}))
    assert cli("apply", source, "--moment", "early_steps")[0] == 0
    before = sorted(p.name for p in tmp_path.iterdir())
    status, out, _ = cli("scale-up", latest(tmp_path))
    assert (
        status == 0
        and "Write it with --yes" in out
        and "resolution: [512, 768] → [512, 768, 1024]" in out
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    status, out, _ = cli("scale-up", latest(tmp_path), "--dry-run", "--yes")
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_scale_up_extends_the_change_log_from_the_original_source(tmp_path: Path) -> None:
    source = tmp_path / "job.yaml"
    write_job(source, job(train={"batch_size": 4, "steps": 3000}))
    assert cli("apply", source, "--moment", "early_steps", "--all")[0] == 0
    out = tmp_path / "next.yaml"
    assert cli("scale-up", latest(tmp_path), "-o", out)[0] == 0
    log = read_changelog(changelog_beside(out))
    assert log.source.path == str(source)
    assert [run.direction for run in log.runs] == ["rollback", "scale_up"]
    assert log.runs[1].steps == ("validation_run",)
    assert [(c.before, c.after) for c in log.changes_of_run(1)] == [(100, 3000)]


def test_scale_up_without_a_change_log_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "job.yaml"
    write_job(source, job())
    status, _, err = cli("scale-up", source)
    assert status == 2 and "no change log beside this config" in err


def test_scale_up_reads_a_named_change_log(tmp_path: Path) -> None:
    source = tmp_path / "job.yaml"
    write_job(source, job(train={"batch_size": 4, "steps": 30}))
    assert (
        cli(
            "apply",
            source,
            "--moment",
            "early_steps",
            "-o",
            tmp_path / "a.yaml",
            "--changelog",
            tmp_path / "elsewhere.json",
        )[0]
        == 0
    )
    status, out, _ = cli(
        "scale-up", tmp_path / "a.yaml", "--changelog", tmp_path / "elsewhere.json", "--yes"
    )
    assert status == 0 and "Larger batch" in out
    log = read_changelog(tmp_path / "a.oomfix.changelog.json")
    assert [run.direction for run in log.runs] == ["rollback", "scale_up"]


def _differing(original: Path, edited: Path) -> set[str]:
    """The paths whose values differ, as verify_change.py's --json reports them."""
    check = verify_change()
    flat_a = check.flatten(check.load_tree(original))
    flat_b = check.flatten(check.load_tree(edited))
    missing: Any = check._MISSING
    return {
        path
        for path in flat_a.keys() | flat_b.keys()
        if not check.same(flat_a.get(path, missing), flat_b.get(path, missing))
    }


# ------------------------------------- issue 12: a change log must belong to the config


def _rolled_back(folder: Path, name: str, batch: int) -> Path:
    folder.mkdir(exist_ok=True)
    source = write_job(folder / f"{name}.yaml", job(train={"batch_size": batch, "steps": 2000}))
    status, _, err = cli("apply", source, "--moment", "early_steps")
    assert status == 0, err
    return folder / f"{name}.oomfix.yaml"


def test_scale_up_refuses_another_jobs_change_log(tmp_path: Path) -> None:
    mine = _rolled_back(tmp_path, "mine", 4)
    theirs = _rolled_back(tmp_path, "theirs", 8)
    before = sorted(p.name for p in tmp_path.iterdir())

    status, _, err = cli("scale-up", mine, "--changelog", changelog_beside(theirs), "--yes")

    assert status == 2
    assert "describes" in err and "not mine.oomfix.yaml" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_scale_up_of_an_edited_config_goes_on_with_a_note(tmp_path: Path) -> None:
    mine = _rolled_back(tmp_path, "mine", 4)
    mine.write_text(mine.read_text(encoding="utf-8") + "# my own note\n", encoding="utf-8")

    status, out, err = cli("scale-up", mine, "--dry-run")

    assert status == 0, err
    assert "edited after oom-wizard saved it" in out


def test_a_relative_output_is_recorded_relative_to_the_change_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "jobs").mkdir()
    write_job(tmp_path / "jobs" / "job.yaml", job(train={"batch_size": 4, "steps": 2000}))
    monkeypatch.chdir(tmp_path)
    status, _, err = cli(
        "apply", "jobs/job.yaml", "--moment", "early_steps", "-o", "jobs/job.fixed.yaml"
    )
    assert status == 0, err

    log = read_changelog(tmp_path / "jobs" / "job.fixed.changelog.json")

    assert log.output.path == "job.fixed.yaml"
    assert log.source.path == "job.yaml"
