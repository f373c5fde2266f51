"""Tests of ``oom-wizard apply``: what it writes, what it records, and that it can be repeated.

The example loop (``tests/support/sweeps.py``) runs ``apply --all`` on a config for every
moment, checks each output with the exactness check and plans the output again with its
change log: every step must then be satisfied. The suite runs it on a fixed sample of configs;
``python bench/sweep_examples.py`` on every one, AI Toolkit's examples too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from oom_wizard.rules.catalog import MOMENTS
from tests.support.aitk_db import add_job, job_row, make_db
from tests.support.plan_support import (
    assert_exact,
    cli,
    differing,
    job,
    write_job,
)
from tests.support.sweeps import apply_every_moment, sample

TREE = job(
    arch="flux",
    train={"batch_size": 4, "steps": 2000, "gradient_accumulation_steps": 2},
    datasets=[{"resolution": [512, 768, 1024]}],
    sample={"width": 1024, "height": 1024, "sample_steps": 30, "sample_every": 250},
)


def write(tmp_path: Path, tree: dict[str, object] = TREE, name: str = "job.yaml") -> Path:
    return write_job(tmp_path / name, tree)


def changelog_of(config: Path) -> Any:
    """The change log beside ``config``, as parsed JSON."""
    return json.loads(config.with_name(config.stem + ".changelog.json").read_text("utf-8"))


@pytest.mark.parametrize("example", sample(), ids=lambda path: path.stem)
def test_apply_all_verifies_and_replans_satisfied_for_every_moment(
    example: Path, tmp_path: Path
) -> None:
    done = apply_every_moment(example, tmp_path)
    assert set(done) == set(MOMENTS)


def test_default_apply_saves_the_default_steps_beside_the_source(tmp_path: Path) -> None:
    source = write(tmp_path)
    status, out, _ = cli("apply", source, "--moment", "early_steps")
    assert status == 0
    output = tmp_path / "job.oomfix.yaml"
    assert f"Wrote {output}" in out
    log = changelog_of(output)
    memory = log["runs"][0].pop("memory")
    assert log["runs"] == [
        {
            "at": log["runs"][0]["at"],
            "direction": "rollback",
            "moment": "early_steps",
            "model_kind": "image",
            "diagnosis": None,
            "steps": ["batch_size", "top_bucket", "text_encoder"],
        }
    ]
    assert memory["phase"] == "training" and memory["calibrated_by"] is None
    assert 0 < memory["estimated_gib"]["low"] <= memory["estimated_gib"]["high"]
    changes = {c["path"]: (c["before"], c["after"], c["step"]) for c in log["changes"]}
    assert changes == {
        "config.process[0].train.batch_size": (4, 1, "batch_size"),
        "config.process[0].train.gradient_accumulation_steps": (2, 8, "batch_size"),
        "config.process[0].datasets[0].resolution": ([512, 768, 1024], [512, 768], "top_bucket"),
        # cached text embeddings cost no quality: the default fix takes them (issue 18)
        "config.process[0].train.cache_text_embeddings": (None, True, "text_encoder"),
    }
    assert all(c["reason"] for c in log["changes"])
    tree = yaml.safe_load(output.read_text(encoding="utf-8"))
    assert "gradient_accumulation" not in tree["config"]["process"][0]["train"]


def test_steps_names_the_steps(tmp_path: Path) -> None:
    source = write(tmp_path)
    status, _, _ = cli("apply", source, "--moment", "early_steps", "--steps", "sampling")
    assert status == 0
    log = changelog_of(tmp_path / "job.oomfix.yaml")
    assert {c["step"] for c in log["changes"]} == {"sampling"}


def test_an_unknown_step_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    source = write(tmp_path)
    status, _, err = cli("apply", source, "--moment", "early_steps", "--steps", "num_frames")
    assert status == 2 and "num_frames not in this plan" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.yaml"]


def test_dry_run_shows_the_diff_and_writes_nothing(tmp_path: Path) -> None:
    source = write(tmp_path)
    status, out, _ = cli("apply", source, "--moment", "early_steps", "--dry-run")
    assert status == 0
    removed = [line for line in out.splitlines() if line.startswith("-") and "1024" in line]
    assert removed == ["-      - 1024"]
    assert "batch_size: 4 → 1" in out and "Estimate: training step ≈ " in out
    assert "; today " in out and "activations ≈" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.yaml"]


DEMO = Path(__file__).resolve().parents[2] / "presets" / "demo"


def test_dry_run_s_estimate_is_the_sized_fix_s_peak_calibrated_by_the_crash(
    tmp_path: Path,
) -> None:
    # The demo's log holds PyTorch's OOM message: the just-enough fix is sized in its GiB, and
    # the Estimate line beside it says the same band (its midpoint is the fix's peak).
    import re

    config = DEMO / "flux_portrait_lora.yaml"
    log = DEMO / "flux_portrait_lora.log"
    status, out, _ = cli("apply", config, "--log", log, "--dry-run", "--no-probe")
    assert status == 0
    fix = re.search(r"^Applying least loss: .*training peak ≈ ([\d.]+) of ", out, re.M)
    line = re.search(
        r"^Estimate: training step ≈ ([\d.]+) GiB \(([\d.]+)–([\d.]+); today [\d.–]+ GiB; "
        r"it crashed needing more than 23.88 GiB",
        out,
        re.M,
    )
    assert fix is not None and line is not None, out
    low, high = float(line[2]), float(line[3])
    assert float(line[1]) == pytest.approx(float(fix[1]), abs=0.05)
    assert (low + high) / 2 == pytest.approx(float(fix[1]), abs=0.1)


def test_dry_run_without_the_crash_s_figures_says_no_calibration(tmp_path: Path) -> None:
    source = write(tmp_path)
    status, out, _ = cli("apply", source, "--moment", "early_steps", "--dry-run", "--no-probe")
    assert status == 0 and "Estimate: " in out and "calibrated by the crash" not in out


def test_environment_writes_nothing(tmp_path: Path) -> None:
    source = write(tmp_path)
    status, out, _ = cli("apply", source, "--moment", "environment", "--all")
    assert status == 0 and "nvidia-smi" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.yaml"]


def test_nothing_to_change_writes_nothing(tmp_path: Path) -> None:
    light = job(train={"batch_size": 1, "steps": 50}, datasets=[{"resolution": 512}])
    source = write(tmp_path, light)
    status, out, _ = cli("apply", source, "--moment", "early_steps", "--steps", "batch_size")
    assert status == 0 and "Nothing to change" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.yaml"]


def test_an_existing_output_is_refused(tmp_path: Path) -> None:
    source = write(tmp_path)
    taken = tmp_path / "taken.yaml"
    taken.write_text("keep me", encoding="utf-8")
    status, _, err = cli("apply", source, "--moment", "early_steps", "-o", taken)
    assert status == 2 and "already exists" in err
    assert taken.read_text(encoding="utf-8") == "keep me"


def test_json_stays_json(tmp_path: Path) -> None:
    source = write(tmp_path, name="job.json")
    status, _, _ = cli("apply", source, "--moment", "early_steps")
    assert status == 0
    output = tmp_path / "job.oomfix.json"
    tree = json.loads(output.read_text(encoding="utf-8"))
    assert tree["config"]["process"][0]["train"]["batch_size"] == 1
    assert differing(source, output) == {
        "config.process[0].train.batch_size",
        "config.process[0].train.gradient_accumulation_steps",
        "config.process[0].datasets[0].resolution[2]",
        "config.process[0].train.cache_text_embeddings",
    }
    assert_exact(source, output, tmp_path / "job.oomfix.changelog.json")


def test_a_new_crash_goes_one_rung_further_and_the_log_accumulates(tmp_path: Path) -> None:
    source = write(tmp_path, job(datasets=[{"resolution": [512, 1024, 1536]}]))
    assert cli("apply", source, "--moment", "intermittent")[0] == 0
    first = tmp_path / "job.oomfix.yaml"
    _, out, _ = cli("plan", first, "--moment", "intermittent")
    assert "Drop the biggest resolution [top_bucket]: done" in out
    assert "Applied in the last roll-back" in out
    _, out, _ = cli("plan", first, "--moment", "intermittent", "--new-crash")
    assert "It crashed again after the last roll-back: one rung further" in out
    assert cli("apply", first, "--moment", "intermittent", "--new-crash")[0] == 0
    second = tmp_path / "job.oomfix-2.yaml"
    log = changelog_of(second)
    assert log["source"]["path"] == str(source)
    resolution = [c for c in log["changes"] if c["path"].endswith("resolution")]
    assert [(c["before"], c["after"]) for c in resolution] == [
        ([512, 1024, 1536], [512, 1024]),
        ([512, 1024], [512]),
    ]
    assert differing(source, second) == {
        "config.process[0].datasets[0].resolution[1]",
        "config.process[0].datasets[0].resolution[2]",
        "config.process[0].train.cache_text_embeddings",
    }
    assert_exact(source, second, tmp_path / "job.oomfix-2.changelog.json")


def test_plan_and_apply_work_on_a_job_of_the_ui_database(tmp_path: Path) -> None:
    db = make_db(tmp_path / "aitk_db.db")
    add_job(db, "my_lora", step=3)
    status, out, _ = cli("plan", "--db", db, "--job", "my_lora", "--moment", "early_steps")
    assert status == 0 and "train.batch_size: 4 → 1" in out
    status, out, err = cli(
        "apply", "--db", db, "--job", "my_lora", "--moment", "early_steps", "--as-new"
    )
    assert status == 0, err
    assert "Created job 'my_lora_oomfix'" in out
    row = job_row(db, "my_lora_oomfix")
    assert row is not None
    saved = json.loads(row["job_config"])
    train = saved["config"]["process"][0]["train"]
    assert (train["batch_size"], train["gradient_accumulation"]) == (1, 4)
    assert train["gradient_checkpointing"] is True


def test_a_database_job_is_not_saved_to_a_file(tmp_path: Path) -> None:
    db = make_db(tmp_path / "aitk_db.db")
    add_job(db, "my_lora")
    status, _, err = cli(
        "apply",
        "--db",
        db,
        "--job",
        "my_lora",
        "--moment",
        "early_steps",
        "--in-place",
        "-o",
        tmp_path / "out.yaml",
    )
    assert status == 2 and "-o and --changelog are for config files" in err
    assert not (tmp_path / "out.yaml").exists()


def test_dry_run_of_a_database_job_lists_the_fields_not_a_one_line_diff(tmp_path: Path) -> None:
    db = make_db(tmp_path / "aitk_db.db")
    add_job(db, "my_lora")
    before = job_row(db, "my_lora")
    status, out, err = cli(
        "apply", "--db", db, "--job", "my_lora", "--moment", "early_steps", "--dry-run"
    )
    assert status == 0, err
    assert "config.process[0].train.batch_size: 4 → 1" in out
    assert "nothing was written" in out
    assert max(len(line) for line in out.splitlines()) < 400
    assert job_row(db, "my_lora") == before


def test_restore_ends_by_saying_the_restored_config_ran_out_of_memory(tmp_path: Path) -> None:
    db = make_db(tmp_path / "aitk_db.db")
    add_job(db, "my_lora", step=3)
    args = ("--db", db, "--job", "my_lora", "--moment", "early_steps")
    assert cli("apply", *args, "--in-place")[0] == 0
    status, out, err = cli("restore", "--db", db, "--job", "my_lora")
    assert status == 0, err
    last = out.strip().splitlines()[-1]
    assert "The restored config is the one that ran out of memory" in out
    assert f"oom-wizard plan --db {db} --job my_lora" in last


@pytest.mark.parametrize("recorded", [True, False])
def test_a_ui_job_folder_without_db_points_to_the_database(tmp_path: Path, recorded: bool) -> None:
    root = tmp_path / "ai-toolkit"
    folder = root / "output" / "my_lora"
    folder.mkdir(parents=True)
    db = make_db(root / "aitk_db.db")
    tree = dict(TREE)
    if recorded:  # the worker records the database path in the job it writes
        moved = make_db(tmp_path / "elsewhere.db")
        tree = json.loads(json.dumps(TREE))
        tree["config"]["process"][0]["sqlite_db_path"] = str(moved)
        db = moved
    write_job(folder / ".job_config.json", tree)
    status, out, _ = cli("plan", folder, "--moment", "early_steps")
    assert status == 0
    assert f"use --db {db} --job my_lora" in out
    assert "written anew from AI Toolkit's jobs database" in out
    status, out, _ = cli("apply", folder, "--moment", "early_steps", "--dry-run")
    assert status == 0 and f"--db {db} --job my_lora" in out


@pytest.mark.parametrize("name", ["fixed.txt", "fixed.YAML", "fixed"])
def test_an_output_ai_toolkit_would_not_read_is_refused(tmp_path: Path, name: str) -> None:
    """AI Toolkit picks its reader by the exact lower-case suffix: a ``.txt`` (or ``.YAML``,
    or no suffix) output is refused in one line, and nothing is written (issue 33)."""
    config = write(tmp_path)
    status, _, err = cli("apply", config, "-o", tmp_path / name)
    assert status == 2
    assert err.count("\n") == 1
    assert "AI Toolkit reads only job files ending in lower-case .yaml, .yml, .json" in err
    assert err.rstrip().endswith("name the output fixed.yaml")
    assert sorted(p.name for p in tmp_path.iterdir()) == [config.name]


def test_the_apps_save_as_field_refuses_a_txt_name_as_it_is_typed(tmp_path: Path) -> None:
    from oom_wizard.application.saving import file_target
    from oom_wizard.application.settling import start
    from oom_wizard.request import JobRequest

    state = start(JobRequest(write(tmp_path), probe=False))
    target = file_target(state, str(tmp_path / "fixed.txt"), None)
    assert target.destination is None and target.output_refused is not None
    assert "refuses '.txt'" in target.output_refused.one_line("app")
    # The change-log field follows the name typed even while it is refused: never stale.
    assert target.changelog_beside == tmp_path / "fixed.changelog.json"


def test_a_one_line_json_config_is_shown_field_by_field(tmp_path: Path) -> None:
    """A config stored as one line of JSON (as the web UI stores it) is not printed whole as
    its diff: the fields that change, a line each, as the app shows them (issue 33)."""
    config = tmp_path / "job.json"
    config.write_text(json.dumps(TREE), encoding="utf-8")
    status, out, err = cli("apply", config, "--dry-run")
    assert status == 0, err
    assert "The config is one long line; the fields that change:" in out
    assert "+ config.process[0].train.cache_text_embeddings: true" in out
    assert json.dumps(TREE) not in out  # the config's one line is not printed whole


def test_the_saved_yaml_differs_by_the_changed_lines_and_the_header_the_readme_names(
    tmp_path: Path,
) -> None:
    import difflib

    from oom_wizard.storage.save import HEADER

    source = write(tmp_path)
    assert cli("apply", source, "--moment", "early_steps")[0] == 0
    before = source.read_text(encoding="utf-8").splitlines()
    after = (tmp_path / "job.oomfix.yaml").read_text(encoding="utf-8").splitlines()
    diff = [d for d in difflib.ndiff(before, after) if d[:1] in "+-"]
    added = [d[2:] for d in diff if d.startswith("+")]
    removed = [d[2:] for d in diff if d.startswith("-")]
    assert after[0] == f"# {HEADER}" == added[0]
    changes = json.loads((tmp_path / "job.oomfix.changelog.json").read_text())["changes"]
    # Every other line that differs is a field's own (a key or a list item), no comment, at
    # most one removed and one added per change.
    others = [*added[1:], *removed]
    assert all(re.match(r"\s*(- |[\w.]+:)", line) for line in others), others
    assert len(added) - 1 <= len(changes) and len(removed) <= len(changes)
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert f"`# {HEADER.split(':')[0]}: …`" in readme


@pytest.mark.parametrize("name", ["chroma_fix.txt", "job.yaml"])
def test_a_refused_output_name_is_one_line_before_anything_is_shown(
    tmp_path: Path, name: str
) -> None:
    source = write(tmp_path)
    status, out, err = cli("apply", source, "--moment", "early_steps", "-o", tmp_path / name)
    assert status == 2
    assert out == "" and len(err.strip().splitlines()) == 1, (out, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.yaml"]


def test_scale_up_refuses_its_output_name_before_anything_is_shown(tmp_path: Path) -> None:
    source = write(tmp_path)
    assert cli("apply", source, "--moment", "early_steps")[0] == 0
    saved = tmp_path / "job.oomfix.yaml"
    status, out, err = cli("scale-up", saved, "-o", tmp_path / "next.txt")
    assert status == 2
    assert out == "" and len(err.strip().splitlines()) == 1, (out, err)
