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

from oom_wizard.application.choosing import review
from oom_wizard.application.demo import IMAGE_JOB, VIDEO_JOB, DemoJob, copy_demo
from oom_wizard.application.history import next_scale_ups, read_history
from oom_wizard.application.saving import SaveResult, ToFile, save
from oom_wizard.application.scale_up import offered_after_save
from oom_wizard.application.settling import start
from oom_wizard.cli import main
from oom_wizard.request import JobRequest
from oom_wizard.rules.diagnosis import Answers
from oom_wizard.vocabulary import Moment
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


@pytest.mark.parametrize(
    ("demo", "moment", "validation", "uncached"),
    [
        (IMAGE_JOB, "early_steps", None, False),
        (VIDEO_JOB, "early_steps", None, True),
        (IMAGE_JOB, "loading", True, False),
    ],
    ids=["image", "video", "image-loading-with-validation"],
)
def test_the_app_offers_back_in_the_order_scale_up_gives_them(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    demo: DemoJob,
    moment: Moment,
    validation: bool | None,
    uncached: bool,
) -> None:
    """The app saves the safe fix and lists what the scale-up gives back
    (:func:`~oom_wizard.application.scale_up.offered_after_save`, its result screen's list);
    ``history`` lists the same, and ``scale-up --yes`` run again and again gives exactly
    those settings back, in that order: one order, owned by
    :func:`~oom_wizard.application.history.offered_scale_ups`. (The video demo without its
    cached text embeddings, so that its safe fix has two steps to give back.)"""
    folder = copy_demo(tmp_path / "demo")
    if uncached:
        config = folder / demo.config
        text = config.read_text(encoding="utf-8")
        config.write_text(text.replace("        cache_text_embeddings: true\n", ""), "utf-8")
    request = JobRequest(folder / demo.config, folder / demo.log, probe=False)
    state = start(request, Answers(moment=moment))
    shown = review(state, "safe", validation=validation)
    saved = save(state, shown.choices, ToFile(), ready=shown.ready)
    assert isinstance(saved, SaveResult)  # a file destination writes a file
    offered = offered_after_save(saved, shown.ready)
    assert len(offered.ahead) >= 2 and offered.stopped is None
    history = read_history(str(saved.config))
    assert next_scale_ups(history) == offered

    given_back: list[str] = []
    config = saved.config
    while True:
        capsys.readouterr()
        assert main(["scale-up", str(config), "--yes"]) == 0
        out = capsys.readouterr().out
        if out.startswith("Nothing left to re-add"):
            break
        given_back.append(out.splitlines()[0].removeprefix("Next re-add: "))
        config = Path(
            next(line for line in out.splitlines() if line.startswith("Wrote ")).split()[1]
        )
    assert given_back == [f"{up.title} [{up.step}]" for up in offered.ahead]
