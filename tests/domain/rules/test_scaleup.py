"""Tests of the scale-up: one re-add per run, in order, back to the original values.

The round trip (``tests/support/sweeps.py``): roll back every step the scale-up order knows,
then ``scale-up --yes`` until nothing is left; the final config must have the source's values
(the exactness check of SOURCE against FINAL: no field differs). The suite runs it on a fixed
sample of configs; ``python bench/sweep_examples.py`` on every one, AI Toolkit's examples too.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from oom_wizard.formats.document import load_document
from oom_wizard.rules.plan import StepChoice, build_plan, changes_for, next_scale_up
from oom_wizard.storage.changelog import read_changelog
from oom_wizard.storage.changes import prepare
from tests.support.corpus import FLOOR_CONFIG
from tests.support.plan_support import (
    SCALE_UP_ORDER,
    cli,
    differing,
    job,
    write_job,
)
from tests.support.saving import commit_beside
from tests.support.sweeps import (
    changelog_beside,
    latest,
    round_trip,
    sample,
    save_number,
    scale_up_all,
)


@pytest.mark.parametrize(
    "example",
    [path for path in sample() if path.name != FLOOR_CONFIG],  # it has nothing to roll back
    ids=lambda path: path.stem,
)
def test_round_trip_restores_every_value(example: Path, tmp_path: Path) -> None:
    assert round_trip(example, tmp_path)


def test_round_trip_after_all_steps_restores_every_value(tmp_path: Path) -> None:
    tree = job(
        arch="wan21:14b",
        train={
            "batch_size": 2,
            "steps": 3000,
            "gradient_checkpointing": False,
            "optimizer": "adamw",
        },
        datasets=[{"resolution": [512, 1024], "num_frames": 81, "batch_size": 2}],
        sample={"width": 832, "height": 480, "num_frames": 81, "sample_every": 250},
    )
    tree["config"]["process"][0]["network"] = {"type": "lora", "linear": 32, "linear_alpha": 32}
    source = tmp_path / "job.yaml"
    write_job(source, tree)
    assert cli("apply", source, "--moment", "early_steps", "--all")[0] == 0
    # Every step but the next bucket down (top_bucket drops the 1024 already) and the levers
    # this job does not use (no eager attention, no extra pass, one GPU, a LoRA, no control
    # images).
    unused = {"smaller_bucket", "extra_passes", "placement", "attention", "control_images"}
    assert scale_up_all(tmp_path) == [s for s in SCALE_UP_ORDER if s not in unused]
    assert differing(source, latest(tmp_path)) == set()


def test_quality_comes_back_before_the_memory_settings(tmp_path: Path) -> None:
    tree = job(arch="qwen_image", train={"batch_size": 2, "gradient_checkpointing": False})
    source = tmp_path / "job.yaml"
    write_job(source, tree)
    document = load_document(source)
    plan = build_plan(document, "early_steps", "image")
    every = {step.id: StepChoice(step.id, True) for step in plan.steps}
    saved = commit_beside(prepare(document, changes_for(plan, every)), direction="rollback")
    restored = []
    while (
        step := next_scale_up(load_document(saved.config), read_changelog(saved.changelog))
    ) is not None:
        restored.append(step.step)
        saved = commit_beside(
            prepare(load_document(saved.config), list(step.changes)),
            direction="scale_up",
            steps=[step.step],
        )
    assert restored == [s for s in SCALE_UP_ORDER if s in restored]
    assert restored[-2:] == ["low_vram", "gradient_checkpointing"]
    assert differing(source, saved.config) == set()


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
    # The validation run goes one step past the first save (AI Toolkit's save_every 1000).
    assert [(c.before, c.after) for c in log.changes_of_run(1)] == [(1001, 3000)]


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
    assert status == 0 and "then larger batch" in out
    log = read_changelog(tmp_path / "a.oomfix.changelog.json")
    assert [run.direction for run in log.runs] == ["rollback", "scale_up"]


def test_a_set_change_stands_so_nothing_claims_everything_is_back(tmp_path: Path) -> None:
    source = write_job(tmp_path / "job.yaml", job(train={"batch_size": 4, "steps": 3000}))
    assert cli("apply", source, "--moment", "early_steps", "--steps", "batch_size")[0] == 0
    rolled = tmp_path / "job.oomfix.yaml"
    status, _, err = cli(
        "set", rolled, "config.process[0].train.lr=0.0002", "-o", tmp_path / "edited.yaml"
    )
    assert status == 0, err
    edited = tmp_path / "edited.yaml"
    status, out, _ = cli("scale-up", edited, "--yes")
    assert status == 0 and "Next re-add: Larger batch [batch_size]" in out
    final = latest(tmp_path)
    status, out, _ = cli("scale-up", final, "--yes")
    assert status == 0 and "Nothing left to re-add" in out
    assert "is back to its original value" not in out
    assert "1 manual change made with 'oom-wizard set' still stands" in out
    assert "config.process[0].train.lr: (absent) → 0.0002 (set by hand)" in out
    status, out, _ = cli("history", final)
    assert status == 0 and "Next scale-up: nothing left" in out
    assert "manual change" in out and "train.lr" in out


def test_a_set_change_undone_by_hand_no_longer_stands(tmp_path: Path) -> None:
    from oom_wizard.rules.scaleup import standing_manual_changes

    source = write_job(tmp_path / "job.yaml", job(train={"batch_size": 4, "steps": 3000}))
    assert cli("apply", source, "--moment", "early_steps", "--steps", "batch_size")[0] == 0
    rolled = tmp_path / "job.oomfix.yaml"
    once = tmp_path / "once.yaml"
    assert cli("set", rolled, "config.process[0].train.steps=500", "-o", once)[0] == 0
    log = read_changelog(once.with_name("once.changelog.json"))
    assert [m.path for m in standing_manual_changes(load_document(once), log)] == [
        "config.process[0].train.steps"
    ]
    twice = tmp_path / "twice.yaml"
    assert cli("set", once, "config.process[0].train.steps=3000", "-o", twice)[0] == 0
    log = read_changelog(twice.with_name("twice.changelog.json"))
    assert standing_manual_changes(load_document(twice), log) == ()


def test_two_levers_on_one_list_come_back_one_at_a_time(tmp_path: Path) -> None:
    cached = {"batch_size": 1, "steps": 2000, "cache_text_embeddings": True}
    tree = job(train=cached, datasets=[{"resolution": [512, 768, 1024]}])
    source = write_job(tmp_path / "job.yaml", tree)
    assert cli("apply", source, "--moment", "intermittent")[0] == 0  # drops 1024
    first = latest(tmp_path)
    # It crashed again: the biggest bucket left (768) is the next one down.
    assert cli("apply", first, "--moment", "intermittent", "--new-crash")[0] == 0
    second = latest(tmp_path)
    resolution = ("config", "process", 0, "datasets", 0, "resolution")
    assert load_document(second).get(resolution) == [512]
    restored = scale_up_all(tmp_path)
    assert restored == ["smaller_bucket", "top_bucket"]
    values = [load_document(path).get(resolution) for path in sorted_saves(tmp_path)]
    assert values[-2:] == [[512, 768], [512, 768, 1024]]


def sorted_saves(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.oomfix*.yaml"), key=save_number)


def test_the_why_names_only_the_steps_this_rollback_lowered(tmp_path: Path) -> None:
    source = write_job(tmp_path / "job.yaml", job(train={"batch_size": 4, "steps": 3000}))
    assert cli("apply", source, "--moment", "early_steps")[0] == 0
    config = latest(tmp_path)
    step = next_scale_up(load_document(config), read_changelog(changelog_beside(config)))
    assert step is not None
    assert "The order: re-add the biggest resolution, then larger batch" in step.why
    assert "LoRA rank" not in step.why


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


def test_scale_up_of_an_edited_config_needs_the_users_word(tmp_path: Path) -> None:
    mine = _rolled_back(tmp_path, "mine", 4)
    mine.write_text(mine.read_text(encoding="utf-8") + "# my own note\n", encoding="utf-8")
    before = sorted(p.name for p in tmp_path.iterdir())

    status, out, err = cli("scale-up", mine, "--yes")

    assert status == 2 and not out
    assert err.count("\n") == 1 and "edited after oom-wizard saved it" in err
    assert "--edited-ok" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before

    status, out, err = cli("scale-up", mine, "--dry-run", "--edited-ok")

    assert status == 0, err
    assert "edited after oom-wizard saved it" in out


def test_plan_and_apply_refuse_an_edited_output_without_the_users_word(tmp_path: Path) -> None:
    mine = _rolled_back(tmp_path, "mine", 4)
    mine.write_text(mine.read_text(encoding="utf-8") + "# my own note\n", encoding="utf-8")

    for command in ("plan", "apply"):
        status, _, err = cli(command, mine, "--moment", "early_steps", "--no-probe")
        assert status == 2 and "--edited-ok" in err, err
    status, _, err = cli("plan", mine, "--moment", "early_steps", "--no-probe", "--edited-ok")
    assert status == 0, err


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
