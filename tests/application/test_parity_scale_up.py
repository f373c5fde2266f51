"""Parity of the scale-up save: ``oom-wizard scale-up`` and the app's scale-up (the application
layer's
:func:`~oom_wizard.application.scale_up.save_scale_up`, which the scale-up screen calls) write the
same
config bytes and the same change log (see ``tests/support/scale_up_parity.py``).

The first case is the one that forked: a roll-back saved with ``apply --kind video`` on the
FLUX demo (an image model), then scaled up. The kind the user confirmed at the roll-back is
the scale-up's kind, on both sides.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from oom_wizard.application.demo import IMAGE_JOB
from tests.support.scale_up_parity import (
    SCALE_UP_CASES,
    ScaleUpCase,
    through_app_service,
    through_cli,
)


@pytest.mark.parametrize("case", SCALE_UP_CASES, ids=lambda case: case.name)
def test_the_cli_and_the_app_scale_up_alike(tmp_path: Path, case: ScaleUpCase) -> None:
    cli_side = through_cli(tmp_path / "cli", case)
    app_side = through_app_service(tmp_path / "app", case)
    assert cli_side.changelog["runs"][-1]["direction"] == "scale_up"
    assert cli_side.saved == app_side.saved
    assert cli_side.changelog == app_side.changelog


def test_the_scale_up_keeps_the_kind_the_roll_back_confirmed(tmp_path: Path) -> None:
    case = SCALE_UP_CASES[0]
    assert (case.demo, case.kind) == (IMAGE_JOB, "video")
    for side in (through_cli(tmp_path / "cli", case), through_app_service(tmp_path / "app", case)):
        rollback, scale_up = side.changelog["runs"][-2:]
        assert rollback["model_kind"] == scale_up["model_kind"] == "video"
