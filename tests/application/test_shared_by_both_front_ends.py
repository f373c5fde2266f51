"""The application functions the screens and the command line share (one truth, one place).

The Pilot tests (``test_app_leaving``, ``test_app_truth``, ``test_app_values``,
``test_app_first_use``) drive them through the app; these pin their rules directly.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from oom_wizard.application.choosing import (
    answer,
    check_value,
    choose,
    default_choice,
    done_before,
    step_status,
)
from oom_wizard.application.demo import IMAGE_JOB, copy_demo
from oom_wizard.application.labels import ui_hint
from oom_wizard.application.leaving import leaving_summary, run_command
from oom_wizard.application.settling import WizardState, advice_for, environment_verdict, start
from oom_wizard.request import JobRequest
from oom_wizard.rules.diagnosis import Answers
from oom_wizard.rules.plan import StepChoice
from oom_wizard.storage.jobdir import run_log_for
from oom_wizard.storage.save import SaveResult


def demo_state(tmp_path: Path, *, log: bool = True) -> WizardState:
    """The image demo, opened as the app opens it (no GPU probe)."""
    folder = copy_demo(tmp_path / "demo")
    return start(
        JobRequest(
            folder / IMAGE_JOB.config, folder / IMAGE_JOB.log if log else None, None, None, False
        )
    )


def test_the_run_log_sits_beside_the_config_with_an_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    log = run_log_for(Path("out dir/my job.oomfix.yaml"))
    assert log.is_absolute()
    assert log == tmp_path / "out dir" / "my job.oomfix.log.txt"


def test_the_run_command_quotes_its_paths(tmp_path: Path) -> None:
    state = demo_state(tmp_path)
    saved = SaveResult(tmp_path / "a b" / "x.oomfix.yaml", tmp_path / "a b" / "x.changelog.json")
    command = run_command(state, saved)
    assert command is not None
    assert shlex.split(command) == [
        "python",
        "run.py",
        str(tmp_path / "a b" / "x.oomfix.yaml"),
        "-l",
        str(tmp_path / "a b" / "x.oomfix.log.txt"),
    ]
    summary = leaving_summary(state, saved)
    assert summary.saved and f"  {command}" in summary.lines


def test_nothing_opened_nothing_saved() -> None:
    summary = leaving_summary(None, None)
    assert not summary.saved and summary.lines == ("oom-wizard: nothing saved.",)


def test_the_environment_title_follows_the_verdict_of_its_reasons(tmp_path: Path) -> None:
    state = demo_state(tmp_path)  # the job filled the card: a reason against
    picked = environment_verdict(answer(state, Answers(moment="environment")))
    assert picked.blamed == "answer" and not picked.title.startswith("It is")
    assert any("it is the config, not the environment" in r for r in picked.reasons)
    no_log = demo_state(tmp_path / "2", log=False)
    suspect = environment_verdict(answer(no_log, Answers("environment", None, True)))
    assert suspect.blamed == "suspected" and suspect.title == "The environment looks suspect"
    alone = environment_verdict(answer(no_log, Answers(moment="environment")))
    assert alone.blamed == "answer" and "it is your call" in alone.reasons[0]


def test_a_typed_value_is_checked_with_the_fields_arch(tmp_path: Path) -> None:
    state = answer(demo_state(tmp_path), Answers(moment="sampling"))
    width = next(f for f in state.step("sampling").fields if f.key.endswith("sample.width"))
    assert not check_value(state, width, "6").ok
    odd = check_value(state, width, "1000")  # FLUX's size step is 32
    assert not odd.ok and odd.reason is not None and "multiple of 32" in odd.reason
    up = check_value(state, width, "4096")
    assert up.ok and up.value == 4096 and up.needs_confirmation
    assert check_value(state, width, "640").reason is None


def test_step_status_and_the_jump_over_done_steps(tmp_path: Path) -> None:
    state = demo_state(tmp_path)
    steps = state.rollback_steps()
    first = steps[0]
    assert step_status(state, first) == "ahead"
    state = choose(state, default_choice(state, first))
    assert step_status(state, first) == "accepted"
    skipped = choose(state, StepChoice(steps[1].id, enabled=False))
    assert step_status(skipped, steps[1]) == "skipped"
    kinds = {step_status(state, s) for s in steps if s.satisfied}
    assert kinds <= {"done", "unavailable", "later"} and "done" in kinds
    assert step_status(state, state.step("smaller_bucket")) == "later"  # 768 stays beside 512
    after = next(
        i for i in range(1, len(steps)) if steps[i - 1].satisfied and not steps[i].satisfied
    )
    jumped = done_before(state, after)
    assert jumped is not None and jumped.last == after
    assert all(steps[n - 1].satisfied for n in range(jumped.first, jumped.last + 1))
    assert done_before(state, 0) is None


def test_the_result_hint_is_the_plan_rows_hint_for_the_jobs_arch(tmp_path: Path) -> None:
    """The result screen's hint (``ui_hint`` with the state) says what the step screen says:
    FLUX's simple form has no Low VRAM box, so both point to Show Advanced."""
    state = demo_state(tmp_path)
    path = "config.process[0].model.low_vram"
    assert ui_hint(path, state.document) == "Show Advanced → model.low_vram"
    assert ui_hint(path) == "Model → Options → Low VRAM"  # no job: the plain location
    resolution = "config.process[0].datasets[0].resolution"
    assert ui_hint(resolution, state.document) == "Datasets → the 'portraits' dataset → Resolutions"


@pytest.mark.parametrize(
    "answers",
    [
        Answers(),
        Answers(worked_before=True),
        Answers(moment="sampling", worked_before=True),
        Answers(moment="environment"),
        Answers(model_kind="video"),
    ],
)
def test_the_moment_screens_advice_is_the_diagnosis_of_those_answers(
    tmp_path: Path, answers: Answers
) -> None:
    state = demo_state(tmp_path)
    settled = answer(state, answers)
    assert advice_for(state, answers) == tuple(item.text for item in settled.diagnosis.advice)
