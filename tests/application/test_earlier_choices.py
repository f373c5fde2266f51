"""Issue 19, item 13, at the application layer: a step's proposal given the choices of the steps
before it.

A value typed on one step is where a later step that changes the same field starts (its
``before``), and that step's rung is counted from there; the save uses what the screens show.
New answers (another moment, another plan) keep a typed value only where the new plan still
has its field, and the step it was typed on says in one line what was dropped.
"""

from __future__ import annotations

from pathlib import Path

from oom_wizard.application.choosing import (
    answer,
    check_value,
    choose,
    dropped_line,
    effective_choices,
    prepared,
    proposed_step,
    step_prepared,
)
from oom_wizard.application.demo import VIDEO_JOB
from oom_wizard.application.settling import WizardState, start
from oom_wizard.paths import parse_path
from oom_wizard.request import JobRequest
from oom_wizard.rules.diagnosis import Answers
from oom_wizard.rules.plan import StepChoice
from tests.support.app_support import demo_folder

SAMPLE_FRAMES = "config.process[0].sample.num_frames"
CLIP_FRAMES = "config.process[0].datasets[0].num_frames"
WIDTH = "config.process[0].sample.width"


def wan(tmp_path: Path, moment: str | None = None) -> WizardState:
    """The video demo (Wan 2.1, clips of 81 frames, samples of 41), at ``moment``."""
    folder = demo_folder(tmp_path)
    state = start(JobRequest(folder / VIDEO_JOB.config, folder / VIDEO_JOB.log, probe=False))
    return answer(state, Answers(moment=moment)) if moment else state  # type: ignore[arg-type]


def saved_value(state: WizardState, key: str) -> object:
    """The value ``key`` has in the config the state's choices would save."""
    return prepared(state, effective_choices(state)).after.get(parse_path(key))


def rows(state: WizardState, step_id: str) -> dict[str, object]:
    return {f.key: f for f in proposed_step(state, step_id).fields}


def test_a_later_step_starts_from_the_value_typed_on_an_earlier_one(tmp_path: Path) -> None:
    state = wan(tmp_path, "sampling")  # step 1 lighter samples, step 3 fewer frames
    assert [s.id for s in state.rollback_steps()][:3] == [
        "sampling",
        "gradient_checkpointing",
        "num_frames",
    ]
    # Nothing typed: lighter samples (on by default) leaves 21 sample frames, where the row
    # of fewer frames starts.
    untyped = {f.key: f for f in proposed_step(state, "num_frames").fields}[SAMPLE_FRAMES]
    assert (untyped.before, untyped.after, untyped.set_by) == (21, 9, "Lighter samples")
    assert {f.key: f for f in state.step("num_frames").fields}[SAMPLE_FRAMES].before == 41
    state = choose(state, StepChoice("sampling", enabled=True, values={SAMPLE_FRAMES: 33}))
    later = rows(state, "num_frames")
    frames = later[SAMPLE_FRAMES]
    assert (frames.before, frames.after) == (33, 17)  # type: ignore[attr-defined]
    clips = later[CLIP_FRAMES]
    assert (clips.before, clips.after) == (81, 41)  # type: ignore[attr-defined]
    assert proposed_step(state, "sampling") == state.step("sampling")  # earlier: as it was
    # A value typed on the later row is weighed against today's 41, not the 33 it starts from.
    assert not check_value(state, frames, "37").needs_confirmation  # type: ignore[arg-type]
    assert check_value(state, frames, "45").needs_confirmation  # type: ignore[arg-type]
    # The save uses what the screens show: the row off (its default) keeps the typed 33,
    # on it takes the rung counted from there.
    off = choose(state, StepChoice("num_frames", enabled=True))
    assert saved_value(off, SAMPLE_FRAMES) == 33
    assert saved_value(off, CLIP_FRAMES) == 41
    on = choose(state, StepChoice("num_frames", enabled=True, fields={SAMPLE_FRAMES: True}))
    assert saved_value(on, SAMPLE_FRAMES) == 17
    # The step's own diff is counted from the config the steps before it leave.
    alone = step_prepared(on, effective_choices(on, upto=3), "num_frames")
    assert {(e.path, e.before, e.after) for e in alone.entries} == {
        (SAMPLE_FRAMES, 33, 17),
        (CLIP_FRAMES, 81, 41),
    }


def test_a_later_step_with_nothing_left_says_where_the_value_comes_from(
    tmp_path: Path,
) -> None:
    state = wan(tmp_path, "sampling")
    state = choose(state, StepChoice("sampling", enabled=True, values={SAMPLE_FRAMES: 5}))
    later = proposed_step(state, "num_frames")  # 5 is the floor of Wan's grid: no rung below
    assert SAMPLE_FRAMES not in {f.key for f in later.fields}
    assert later.note is not None and "sample.num_frames stays at 5 (Lighter samples)" in later.note
    assert saved_value(choose(state, StepChoice("num_frames", enabled=True)), SAMPLE_FRAMES) == 5


def test_new_answers_keep_a_typed_value_only_where_the_new_plan_has_its_field(
    tmp_path: Path,
) -> None:
    state = wan(tmp_path)  # intermittent: fewer frames first, lighter samples later
    assert state.moment == "intermittent"
    state = choose(state, StepChoice("num_frames", enabled=True, values={CLIP_FRAMES: 49}))
    state = choose(state, StepChoice("sampling", enabled=True, values={WIDTH: 448}))
    assert check_value(state, state.step("sampling").fields[0], "448").ok
    loading = answer(state, Answers(moment="loading"))  # samples now only skipped or off
    assert loading.plan.step("sampling") is not None
    assert WIDTH not in {f.key for f in loading.step("sampling").fields}
    assert loading.choices["num_frames"].values == {CLIP_FRAMES: 49}
    kept = loading.choices.get("sampling")
    assert kept is None or WIDTH not in kept.values
    assert dropped_line(loading, "sampling") == (
        "Typed before, dropped with the new answers: sample.width 448 "
        "(this step no longer changes it)."
    )
    assert dropped_line(loading, "num_frames") is None
    assert saved_value(loading, CLIP_FRAMES) == 49
    # Deciding the step again puts the line away.
    decided = choose(loading, StepChoice("sampling", enabled=True))
    assert dropped_line(decided, "sampling") is None


def test_the_same_answers_keep_every_choice(tmp_path: Path) -> None:
    state = wan(tmp_path)
    state = choose(state, StepChoice("num_frames", enabled=True, values={CLIP_FRAMES: 49}))
    assert answer(state, state.answers) is state


def test_a_value_typed_on_a_step_the_new_plan_lacks_is_named_on_its_first_step(
    tmp_path: Path,
) -> None:
    rank = "config.process[0].network.linear"
    state = wan(tmp_path)  # a training-step crash: the LoRA rank is offered
    state = choose(state, StepChoice("lora_rank", enabled=True, values={rank: 8}))
    loading = answer(state, Answers(moment="loading"))  # training-only steps are not
    assert loading.plan.step("lora_rank") is None
    assert "lora_rank" not in loading.choices
    first = loading.rollback_steps()[0].id
    assert dropped_line(loading, first) == (
        "Typed before, dropped with the new answers: network.linear 8 "
        "(Lower LoRA rank is not in this plan)."
    )


def test_the_validation_run_reaches_the_first_sample_the_earlier_steps_leave(
    tmp_path: Path,
) -> None:
    """A proposal that depends on an earlier choice: the short validation run goes through
    the first periodic sample, and lighter samples (on by default for a crash while
    sampling) moves it from step 250 to step 500."""
    from oom_wizard.application.choosing import validation_choice

    steps = "config.process[0].train.steps"
    state = wan(tmp_path, "sampling")
    assert {f.key: f.after for f in state.step("sampling").fields}[
        "config.process[0].sample.sample_every"
    ] == 500
    chosen = validation_choice(state)
    assert chosen is not None and chosen.values[steps] == 501
    every = "config.process[0].sample.sample_every"
    typed = choose(state, StepChoice("sampling", enabled=True, values={every: 750}))
    counted = validation_choice(typed)
    assert counted is not None and counted.values[steps] == 751
    skipped = choose(state, StepChoice("sampling", enabled=False))
    counted = validation_choice(skipped)
    assert counted is not None and counted.values[steps] == 251  # today's save and sample
    on = choose(typed, StepChoice("validation_run", enabled=True))
    assert saved_value(on, steps) == 751
