"""The newer options that change memory (``rules.options``): model.compile, the feature-extractor
loss, control images from the same folder; each with its source, effect and lever, in ``fit``
and ``plan``; the control images count in the estimate."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from oom_wizard.application.fitting import VERDICT_STATUS
from oom_wizard.formats.document import load_document
from oom_wizard.rules.options import option_findings
from tests.support.plan_support import cli

DEMO = Path(__file__).resolve().parents[3] / "presets" / "demo" / "flux_portrait_lora.yaml"


def flux(tmp_path: Path, name: str, **edits: dict[str, object]) -> Path:
    tree = yaml.safe_load(DEMO.read_text("utf-8"))
    process = tree["config"]["process"][0]
    for section, fields in edits.items():
        if section == "dataset":
            process["datasets"][0].update(fields)
        else:
            process.setdefault(section, {}).update(fields)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(tree, sort_keys=False), encoding="utf-8")
    return path


def test_each_option_is_read_with_its_source_effect_and_lever(tmp_path: Path) -> None:
    config = flux(
        tmp_path,
        "all",
        model={"compile": True},
        train={"diffusion_feature_extractor_path": "v4"},
        dataset={"control_from_same_folder": True, "num_controls_from_same_folder": 2},
    )
    found = {f.path.rsplit(".", 1)[-1]: f for f in option_findings(load_document(config))}
    assert set(found) == {"compile", "diffusion_feature_extractor_path", "control_from_same_folder"}
    assert "BaseSDTrainProcess.py" in found["compile"].source
    assert "model.compile: false" in found["compile"].lever
    assert "SigLIP2" in found["diffusion_feature_extractor_path"].effect
    assert "v2 works on latents" in found["diffusion_feature_extractor_path"].lever
    assert "2 other images" in found["control_from_same_folder"].effect
    assert found["control_from_same_folder"].counted and not found["compile"].counted
    status, out, err = cli("fit", config, "--gpu", "24", "--no-probe", "--json")
    report = json.loads(out)
    assert status == VERDICT_STATUS[report["verdict"]], err
    assert len(report["options"]) == 3
    _, text, _ = cli("plan", config, "--moment", "early_steps", "--no-probe")
    assert "option config.process[0].model.compile: True" in text


def test_control_images_from_the_same_folder_raise_the_training_step(tmp_path: Path) -> None:
    def step(config: Path) -> float:
        _, out, _ = cli("fit", config, "--gpu", "80", "--no-probe", "--json")
        return float(json.loads(out)["phases"]["training"]["high"])

    plain = step(flux(tmp_path, "plain"))
    two = step(
        flux(
            tmp_path,
            "two",
            dataset={"control_from_same_folder": True, "num_controls_from_same_folder": 2},
        )
    )
    assert two > plain + 1.0
