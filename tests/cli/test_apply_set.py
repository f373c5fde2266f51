"""``apply --set FIELD=VALUE``: a value beyond a step's default, as ``fit``'s ``apply`` line
carries a fix's rungs; its refusals are one line, exit 2, nothing written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.plan_support import cli

CONFIGS = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "configs"


def copied(tmp_path: Path, name: str) -> Path:
    config = tmp_path / name
    shutil.copyfile(CONFIGS / name, config)
    return config


def fit_json(*args: str | Path) -> dict[str, Any]:
    _status, out, err = cli("fit", *args, "--no-probe", "--json")
    assert out, err
    found: dict[str, Any] = json.loads(out)
    return found


def process(path: Path) -> dict[str, Any]:
    tree: dict[str, Any] = yaml.safe_load(path.read_text("utf-8"))
    return tree["config"]["process"][0]  # type: ignore[no-any-return]


def test_fit_s_apply_line_saves_the_config_it_weighed_and_that_config_fits(
    tmp_path: Path,
) -> None:
    """FLUX.2 Klein on 12 GiB: the fix offloads every layer, past the step's default half;
    its ``apply`` line says so with ``--set``, and the saved config's own ``fit`` fits, at the
    figures the fix was weighed at."""
    config = copied(tmp_path, "klein9b_ui_defaults.yaml")
    found = fit_json(config, "--gpu", "12")
    line = found["fix_apply"]
    assert found["fix_fits"] is True and "--set" in line
    assert "model.layer_offloading_transformer_percent=1.0" in line
    status, _out, err = cli(*line[1:], "--no-probe")
    assert status == 0, err
    saved = tmp_path / "klein9b_ui_defaults.oomfix.yaml"
    model = process(saved)["model"]
    assert model["layer_offloading_transformer_percent"] == 1.0
    assert model["layer_offloading_text_encoder_percent"] == 1.0
    again = fit_json(saved, "--gpu", "12")
    assert again["verdict"] == "fits" and again["fix"] == []
    assert again["phases"] == found["fix_phases"]


def test_set_switches_samples_off_and_leaves_the_samples_as_they_are(tmp_path: Path) -> None:
    config = copied(tmp_path, "sdxl_ui_defaults.yaml")
    out = tmp_path / "fixed.yaml"
    status, _out, err = cli(
        "apply", config, "--moment", "early_steps", "--steps", "sampling",
        "--set", "train.disable_sampling=true", "-o", out, "--no-probe",
    )  # fmt: skip
    assert status == 0, err
    saved, before = process(out), process(config)
    assert saved["train"]["disable_sampling"] is True
    assert saved["sample"] == before["sample"]


@pytest.mark.parametrize(
    ("steps", "setting", "said"),
    [
        ("layer_offloading", "model.layer_offloading_transformer_percent", "is not FIELD=VALUE"),
        ("layer_offloading", "model.layer_offloading_transformer_percent=1.5", "1.5"),
        ("layer_offloading", "model.layer_offloading_transformer_percent=abc", "abc"),
        ("layer_offloading", "model.layer_offloading=1", "a switch takes true or false"),
        ("text_encoder", "model.layer_offloading_transformer_percent=1.0", "not a field of"),
        ("top_bucket", "datasets[0].resolution[2]=768", "a bucket is dropped or kept"),
    ],
)
def test_a_bad_setting_is_one_line_and_nothing_is_written(
    tmp_path: Path, steps: str, setting: str, said: str
) -> None:
    config = copied(tmp_path, "klein9b_ui_defaults.yaml")
    status, out, err = cli(
        "apply", config, "--moment", "early_steps", "--steps", steps, "--set", setting,
        "--no-probe",
    )  # fmt: skip
    assert status == 2 and out == "", out
    assert err.count("\n") == 1 and err.startswith("oom-wizard: error: --set ") and said in err
    assert sorted(p.name for p in tmp_path.iterdir()) == [config.name]
