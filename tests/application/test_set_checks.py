"""``set`` checks a value as the app checks a typed one (one rule: ``presets/levers.yaml``
through the application layer), and removing a whole section needs ``--force`` (issue 19, item
15)."""

from __future__ import annotations

from pathlib import Path

import pytest

from oom_wizard.application.choosing import check_value
from oom_wizard.application.editing import prepare_edit
from oom_wizard.application.settling import start
from oom_wizard.cli import main
from oom_wizard.errors import EditError
from oom_wizard.formats.fields import parse_assignment
from oom_wizard.request import JobRequest

CONFIG = (
    "job: extension\nconfig:\n  name: x\n  process:\n    - type: sd_trainer\n"
    "      train: {batch_size: 4, steps: 100}\n"
    "      model: {name_or_path: black-forest-labs/FLUX.1-dev, arch: flux}\n"
    "      datasets: [{folder_path: /d, resolution: [512, 768, 1024]}]\n"
    "      sample: {width: 1024, height: 1024}\n"
)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(CONFIG, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("assignment", "reason"),
    [
        ("config.process[0].datasets[0].resolution=[500]", "500 is not a multiple of 32"),
        ("config.process[0].datasets[0].resolution=[512, 9000]", "above the largest"),
        ("config.process[0].sample.width=1000", "1000 is not a multiple of 32"),
        ("config.process[0].train.batch_size=0", "below the smallest"),
    ],
)
def test_set_refuses_what_the_app_refuses(
    config: Path, assignment: str, reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = sorted(p.name for p in config.parent.iterdir())
    assert main(["set", str(config), assignment]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and reason in err and err.startswith(f"oom-wizard: error: {config}")
    assert sorted(p.name for p in config.parent.iterdir()) == before


def test_the_app_and_set_give_the_same_reason_for_a_bucket(config: Path) -> None:
    state = start(JobRequest(target=config, probe=False))
    bucket = next(
        proposal
        for step in state.plan.steps
        for proposal in step.fields
        if proposal.control == "bucket"
    )
    in_app = check_value(state, bucket, "500")
    assert not in_app.ok
    change = parse_assignment(f"{_path(bucket.path)}=500", state.document)
    with pytest.raises(EditError) as refused:
        prepare_edit(state.document, [change], force=False)
    assert in_app.reason is not None and in_app.reason in refused.value.message


def _path(path: tuple[str | int, ...]) -> str:
    from oom_wizard.paths import format_path

    return format_path(path)


def test_unsetting_a_whole_section_needs_force(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["set", str(config), "--unset", "config.process[0].train"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "whole section" in err and "--force" in err
    assert not list(config.parent.glob("*.oomfix*"))

    assert main(["set", str(config), "--unset", "config.process[0].train", "--force"]) == 0
    assert list(config.parent.glob("job.oomfix.yaml"))


def test_a_good_value_and_a_single_key_unset_still_go_through(config: Path) -> None:
    argv = ["set", str(config), "config.process[0].datasets[0].resolution=[512, 768]"]
    assert main([*argv, "--unset", "config.process[0].sample.height"]) == 0
