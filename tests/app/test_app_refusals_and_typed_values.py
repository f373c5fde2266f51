"""The app as a new user tries it: a refused Save as on its row, the retry answer preselected
from the log, the picker, the words of history and counts, typed values kept across steps and
moments."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from textual.pilot import Pilot
from textual.widgets import DirectoryTree, Input, OptionList, Static

from oom_wizard.application.demo import IMAGE_JOB, VIDEO_JOB
from oom_wizard.request import JobRequest
from oom_wizard.screens.step import StepScreen
from oom_wizard.screens.toggles import Tick
from oom_wizard.vocabulary import MOMENTS
from tests.support.app_support import (
    demo_app,
    demo_folder,
    press,
    review_app,
    save_from_review,
    screen_name,
    screen_text,
    settle,
    until,
    video_app,
    wait_for_screen,
    wait_for_state,
)

SIZE = (80, 24)


async def told_the_moment(pilot: Pilot[int], moment: str) -> None:
    """From the load screen, once the job is read: ``moment`` picked on the moment screen."""
    await wait_for_state(pilot)
    await press(pilot, "enter")
    pilot.app.screen.query_one("#moments", OptionList).highlighted = MOMENTS.index(moment)
    await press(pilot, "enter")


def demo_request(folder: Path) -> JobRequest:
    """The demo's image job with its log. The tests of the save-as row open on its review
    (``review_app``): the walk to it has tests of its own (``test_app_flows.py``)."""
    return JobRequest(folder / IMAGE_JOB.config, log=folder / IMAGE_JOB.log)


def row_reason(app: object, selector: str = "#output-reason") -> str:
    return str(app.screen.query_one(selector, Static).render())  # type: ignore[attr-defined]


async def clear_output(pilot: Pilot[int]) -> None:
    output = pilot.app.screen.query_one("#output", Input)
    output.focus()
    await settle(pilot)
    await press(pilot, "end", "ctrl+u")


async def test_an_empty_save_as_is_refused_on_its_row_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    folder = demo_folder(tmp_path)
    before = sorted(path.name for path in folder.iterdir())
    app = review_app(demo_request(folder))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_screen(pilot, "ReviewScreen")
        await clear_output(pilot)
        assert app.screen.query_one("#output", Input).value == ""
        # The change log follows the output: emptied with it, not the last name kept.
        assert app.screen.query_one("#changelog", Input).value == ""
        await press(pilot, "enter")
        assert screen_name(pilot) == "ReviewScreen"
        assert "a file name is needed" in row_reason(app)
        app.screen.query_one("#output", Input).value = str(folder / "again.yaml")
        await pilot.pause()
        assert app.screen.query_one("#changelog", Input).value == str(
            folder / "again.changelog.json"
        )
    assert sorted(path.name for path in folder.iterdir()) == before


async def test_the_source_typed_then_cleared_is_refused_on_the_row(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    source = folder / IMAGE_JOB.config
    before = source.read_bytes()
    app = review_app(demo_request(folder))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_screen(pilot, "ReviewScreen")
        await clear_output(pilot)
        # Typed at once: a path key by key is a hundred presses, each waiting for the screen.
        app.screen.query_one("#output", Input).insert_text_at_cursor(str(source))
        await press(pilot, "enter")
        assert screen_name(pilot) == "ReviewScreen"
        reason = row_reason(app)
        assert "source config" in reason
        assert " -o" not in reason
        await press(pilot, "ctrl+u", "enter")
        assert screen_name(pilot) == "ReviewScreen"
        assert "a file name is needed" in row_reason(app)
    assert source.read_bytes() == before


async def test_a_refused_save_says_what_to_do_in_the_app_not_with_a_flag(tmp_path: Path) -> None:
    """Item 12: the app names its own field; the command line its flag (one source). The
    file in the way and the change log are left as they were."""
    from tests.support.plan_support import cli

    folder = demo_folder(tmp_path)
    taken = folder / "taken.yaml"
    taken.write_text("# mine\n", encoding="utf-8")
    app = review_app(demo_request(folder))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_screen(pilot, "ReviewScreen")
        app.screen.query_one("#output", Input).value = str(taken)
        await press(pilot, "enter")
        await wait_for_screen(pilot, "ReviewScreen")
        error = str(app.screen.query_one("#error", Static).render())
    assert error.startswith(f"{taken}")  # the app's line: no "oom-wizard: error:"
    assert "already exists" in error
    assert "type another name in Save as" in error
    assert " -o" not in error and "--force" not in error
    assert taken.read_text(encoding="utf-8") == "# mine\n"
    assert not (folder / "taken.changelog.json").exists()
    status, _, err = cli(
        "apply", folder / IMAGE_JOB.config, "--log", folder / IMAGE_JOB.log, "--no-probe",
        "-o", taken,
    )  # fmt: skip
    assert status == 2
    assert "pick another name with -o (or pass --force to replace it)" in err


def test_the_service_checks_a_typed_file_destination(tmp_path: Path) -> None:
    from oom_wizard.application.saving import file_target
    from oom_wizard.application.settling import start
    from oom_wizard.request import JobRequest

    folder = demo_folder(tmp_path)
    state = start(JobRequest(folder / IMAGE_JOB.config, folder / IMAGE_JOB.log, probe=False))
    assert file_target(state, "  ", None).reasons()[0] == (
        "a file name is needed for the new config; type a file name in Save as"
    )
    assert file_target(state, str(folder) + "/", None).destination is None
    assert "source config" in (file_target(state, str(folder / IMAGE_JOB.config), None)
                               .reasons()[0] or "")  # fmt: skip
    fine = file_target(state, str(folder / "new.yaml"), "")
    assert fine.destination is None
    assert fine.reasons()[1] == (
        "a file name is needed for the change log; type a file name in Change log"
    )
    good = file_target(state, str(folder / "new.yaml"), None).destination
    assert good is not None and good.changelog == folder / "new.changelog.json"


# --- item 3: "Did the retry run?" is preselected from the log --------------------------------

DEMO_BAR = "flux_portrait_lora: "


def _head(folder: Path) -> str:
    """The image demo's log up to its training bar (loading and the baseline sample)."""
    text = (folder / IMAGE_JOB.log).read_text(encoding="utf-8")
    return text[: text.index(f"\n{DEMO_BAR}  0%") + 1]


def _bars(upto: int, total: int = 3000) -> str:
    steps = [f"{DEMO_BAR}{n * 100 // total:3d}%|   | {n}/{total} [00:{n:02d}<00:00, 2.00s/it]"
             for n in range(0, upto + 1, max(1, upto // 5))]  # fmt: skip
    return "\r".join(steps) + "\n"


def finished_log(folder: Path, name: str = "finished.log") -> Path:
    """The image demo's job trained to its last step, the final sample drawn, and done."""
    tail = (
        _bars(3000)
        + "Saving at step 3000\n"
        + "Generating Images:   0%|          | 0/3 [00:00<?, ?it/s]\r"
        + "Generating Images: 100%|██████████| 3/3 [01:04<00:00, 21.50s/it]\n"
        + "\n========================================\nResult:\n - 1 completed job\n"
        + "========================================\n"
    )
    path = folder / name
    path.write_text(_head(folder) + tail, encoding="utf-8")
    return path


def training_log(folder: Path, name: str = "training.log") -> Path:
    """The image demo's job still training at step 40 (the log of a run under way)."""
    path = folder / name
    path.write_text(_head(folder) + _bars(40).rstrip("\n"), encoding="utf-8")
    return path


def crashed_log(folder: Path, name: str = "crashed.log") -> Path:
    """The image demo's own log (it ends in CUDA out of memory), written now."""
    path = folder / name
    path.write_bytes((folder / IMAGE_JOB.log).read_bytes())
    return path


def rolled_back(folder: Path) -> Path:
    """The image demo rolled back with every default; the saved config."""
    from oom_wizard.application.choosing import effective_choices
    from oom_wizard.application.saving import ToFile, save
    from oom_wizard.application.settling import start
    from oom_wizard.request import JobRequest
    from oom_wizard.storage.save import SaveResult

    state = start(JobRequest(folder / IMAGE_JOB.config, folder / IMAGE_JOB.log, probe=False))
    result = save(state, effective_choices(state), ToFile())
    assert isinstance(result, SaveResult)
    return result.config


async def _coming_back(app: object) -> tuple[str | None, str]:
    """Open the coming-back screen; the highlighted answer's id and the screen's note."""
    async with app.run_test(size=SIZE) as pilot:  # type: ignore[attr-defined]
        await wait_for_state(pilot)
        await press(pilot, "enter")
        assert screen_name(pilot) == "ComingBackScreen"
        highlighted = app.screen.query_one("#answer-list").highlighted_option  # type: ignore[attr-defined]
        notes = app.screen.query("#evidence").results(Static)  # type: ignore[attr-defined]
        note = "".join(str(shown.render()) for shown in notes)
        await press(pilot, "enter")
        after = screen_name(pilot)
    return (highlighted.id if highlighted else None), note + "\n" + after


async def test_a_crash_after_the_save_preselects_no_with_its_evidence(tmp_path: Path) -> None:
    from oom_wizard.screens.app import create_app

    folder = demo_folder(tmp_path)
    saved = rolled_back(folder)
    log = crashed_log(folder)
    chosen, shown = await _coming_back(create_app(saved, log=log, probe=False))
    assert chosen == "crashed"
    assert f"{log.name}:" in shown and "OOM during training step" in shown
    assert shown.endswith("MomentScreen")  # Enter: a new diagnosis, not a heavier config


async def test_a_finished_or_training_retry_preselects_yes(tmp_path: Path) -> None:
    from oom_wizard.screens.app import create_app

    folder = demo_folder(tmp_path)
    saved = rolled_back(folder)
    for log in (finished_log(folder), training_log(folder)):
        chosen, shown = await _coming_back(create_app(saved, log=log, probe=False))
        assert chosen == "ran", shown
        assert f"{log.name}:" in shown
        assert shown.endswith("ScaleUpScreen")


def test_a_clean_finish_is_not_labelled_a_crash(tmp_path: Path) -> None:
    """Item 8: the load screen's row says how the run ended, as ``diagnose`` does."""
    from oom_wizard.application.settling import start
    from oom_wizard.request import JobRequest
    from oom_wizard.screens.load import summary

    folder = demo_folder(tmp_path)
    state = start(JobRequest(folder / IMAGE_JOB.config, finished_log(folder), probe=False))
    assert state.diagnosis.crashed is False
    text = str(summary(state))
    assert "Crash" not in text
    assert "Finished" in text and "step 3000/3000" in text
    crashed = start(JobRequest(folder / IMAGE_JOB.config, folder / IMAGE_JOB.log, probe=False))
    assert "Crash " in str(summary(crashed))


def test_the_summary_says_why_the_gpu_probe_was_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ``nvidia-smi`` answer that is not its answer is ignored, and the app says so, as
    ``plan`` does."""
    from oom_wizard.application.settling import start
    from oom_wizard.request import JobRequest
    from oom_wizard.screens.load import summary

    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text("#!/bin/sh\nprintf '0, NVIDIA \\377, 24564, 0, 24564\\n'\n", encoding="utf-8")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{smi.parent}{os.pathsep}{os.environ['PATH']}")
    folder = demo_folder(tmp_path)

    state = start(JobRequest(folder / IMAGE_JOB.config, folder / IMAGE_JOB.log, probe=True))

    assert state.job.probe_note is not None
    assert f"GPU probe   {state.job.probe_note}" in str(summary(state))
    assert "the GPU probe is ignored" in state.job.probe_note


# --- item 5 and the picker's log -------------------------------------------------------------


async def test_a_folder_without_a_config_opens_the_picker_in_that_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from oom_wizard.screens.app import create_app
    from tests.support.app_support import wait_for_error

    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "notes.md").write_text("nothing to open\n", encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    app = create_app(jobs, probe=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_error(pilot)
        tree = app.screen.query_one("#tree", DirectoryTree)
        assert Path(tree.path) == jobs


async def test_the_picker_chooses_the_log_as_well_as_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from oom_wizard.screens.app import create_app

    folder = demo_folder(tmp_path)
    log = crashed_log(folder, "my_run.txt")
    monkeypatch.chdir(folder)
    app = create_app(probe=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()  # the tree loads its folder in workers of its own: no settle()
        tree = app.screen.query_one("#tree", DirectoryTree)
        tree.post_message(DirectoryTree.FileSelected(tree.root, log))  # a click on the log
        await pilot.pause()
        assert app.screen.query_one("#log-path", Input).value == str(log)
        app.screen.query_one("#path", Input).value = str(folder / IMAGE_JOB.config)
        app.screen.query_one("#path", Input).focus()
        await pilot.press("enter")
        await until(pilot, lambda: app.state is not None, idle=False)
        assert app.require_state().log_path == log


# --- item 16: wording ---------------------------------------------------------------------------


def test_history_says_why_not_only_which_field(tmp_path: Path) -> None:
    from tests.support.plan_support import cli

    folder = demo_folder(tmp_path)
    config = folder / IMAGE_JOB.config
    status, _, err = cli("apply", config, "--log", folder / IMAGE_JOB.log, "--no-probe")
    assert status == 0, err
    status, out, err = cli("history", folder / "flux_portrait_lora.oomfix.yaml")
    assert status == 0, err
    whys = [line.strip() for line in out.splitlines() if line.strip().startswith("why:")]
    assert whys
    for why in whys:
        assert not why.endswith(": train.gradient_checkpointing"), why
        assert not why.endswith(": train.batch_size"), why
    assert any("Activations are recomputed in the backward pass" in why for why in whys), whys


def test_counts_and_orders_read_as_english(tmp_path: Path) -> None:
    from oom_wizard.spelling import field_changes

    assert field_changes(1) == "1 field changes"
    assert field_changes(4) == "4 fields change"
    from oom_wizard.application.choosing import effective_choices
    from oom_wizard.application.saving import ToFile, save
    from oom_wizard.application.scale_up import next_scale_up
    from oom_wizard.application.settling import start
    from oom_wizard.request import JobRequest

    folder = demo_folder(tmp_path)
    state = start(JobRequest(folder / IMAGE_JOB.config, folder / IMAGE_JOB.log, probe=False))
    saved = save(state, effective_choices(state, fix="safe"), ToFile())
    again = start(JobRequest(saved.config, probe=False))  # type: ignore[union-attr]
    scale_up = next_scale_up(again)
    assert scale_up is not None
    assert "The order is Re-add" not in scale_up.why
    assert "re-add the biggest resolution, then" in scale_up.why.lower()


async def test_the_footer_of_the_last_scale_up_says_what_enter_does(tmp_path: Path) -> None:
    """A scale-up screen with nothing left says "Enter closes": its footer must not say Save."""
    from oom_wizard.screens.scale_up import ScaleUpScreen

    bindings = {b.key: b.description for b in ScaleUpScreen.BINDINGS}  # type: ignore[union-attr]
    assert "enter" in bindings
    from tests.support.app_support import wait_for_state

    folder = demo_folder(tmp_path)
    app = demo_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        screen = ScaleUpScreen()
        screen.next_up = None  # what the screen shows when nothing is left to re-add
        await pilot.app.push_screen(screen)
        await pilot.pause()
        footer = " ".join(str(w.render()) for w in screen.query("KeyBar *").results())
        shown = " ".join(str(w.render()) for w in screen.query(Static).results(Static))
    assert "Enter closes" in shown
    assert "Save" not in footer


# --- also expected: the run command after apply and scale-up on the command line ----------------


def test_apply_and_scale_up_print_the_run_command_the_app_gives(tmp_path: Path) -> None:
    from oom_wizard.application.leaving import run_command_for
    from tests.support.plan_support import cli

    folder = demo_folder(tmp_path)
    status, out, err = cli(
        "apply", folder / IMAGE_JOB.config, "--log", folder / IMAGE_JOB.log, "--no-probe"
    )
    assert status == 0, err
    saved = (folder / "flux_portrait_lora.oomfix.yaml").resolve()
    log = saved.with_name("flux_portrait_lora.oomfix.log.txt")
    assert f"  python run.py {saved} -l {log}" in out
    assert run_command_for(saved) == f"python run.py {saved} -l {log}"
    status, out, err = cli("scale-up", saved, "--yes")
    assert status == 0, err
    again = saved.with_name("flux_portrait_lora.oomfix-2.yaml")
    assert f"  {run_command_for(again)}" in out


# --- item 14: a typed batch keeps the effective batch ------------------------------------------


async def test_a_typed_batch_keeps_the_effective_batch(tmp_path: Path) -> None:
    from oom_wizard.screens.step import FieldRow, StepScreen
    from tests.support.app_support import wait_for_state

    folder = demo_folder(tmp_path)  # batch 2, accumulation 1: an effective batch of 2
    app = demo_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        await press(pilot, "enter", "enter")
        while isinstance(app.screen, StepScreen) and app.screen.step.id != "batch_size":
            await press(pilot, "enter")
        screen = app.screen
        assert isinstance(screen, StepScreen)
        rows = {row.proposal.path[-1]: row for row in screen.query(FieldRow)}
        batch, accumulation = rows["batch_size"], rows["gradient_accumulation"]
        assert accumulation.value_input.value == "2"
        batch.value_input.value = "2"  # a larger batch than proposed
        await settle(pilot)
        assert accumulation.value_input.value == "1"
        values = screen.choice().values
        assert values["config.process[0].train.batch_size"] == 2
        assert values.get("config.process[0].train.gradient_accumulation", 1) == 1
        batch.value_input.value = "1"
        await settle(pilot)
        assert accumulation.value_input.value == "2"


# --- item 6: a step whose rung is still ahead is not "done" -------------------------------------

THREE_BUCKETS = (
    Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "flux_three_buckets.yaml"
)


def test_the_next_bucket_down_is_not_done_while_768_stays_beside_512() -> None:
    from oom_wizard.application.choosing import step_status
    from oom_wizard.application.settling import start
    from oom_wizard.request import JobRequest
    from tests.support.plan_support import cli

    status, out, err = cli("plan", THREE_BUCKETS, "--no-probe")
    assert status == 0, err
    line = next(text for text in out.splitlines() if "[smaller_bucket]" in text)
    assert not line.endswith(": done"), line
    assert "later retry" in line
    state = start(JobRequest(THREE_BUCKETS, probe=False))
    assert step_status(state, state.step("smaller_bucket")) == "later"
    assert step_status(state, state.step("batch_size")) == "done"


# --- item 13: typed values survive going back to the moment when the plan is the same ----------


async def test_going_back_past_the_moment_keeps_typed_values(tmp_path: Path) -> None:
    from oom_wizard.screens.step import FieldRow, StepScreen
    from tests.support.app_support import wait_for_screen, wait_for_state

    folder = demo_folder(tmp_path)
    app = demo_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        await press(pilot, "enter", "enter")  # the moment as the log says; step 1
        await press(pilot, "enter")  # step 2, the batch
        screen = app.screen
        assert isinstance(screen, StepScreen) and screen.step.id == "batch_size"
        row = next(r for r in screen.query(FieldRow) if r.proposal.path[-1] == "batch_size")
        row.value_input.value = "2"
        await settle(pilot)
        await press(pilot, "enter")  # accepted with the typed batch
        await press(pilot, "escape", "escape", "escape", "escape")  # back to the load screen
        await wait_for_screen(pilot, "LoadScreen")
        await press(pilot, "enter")  # on to the moment again
        await wait_for_screen(pilot, "MomentScreen")
        await press(pilot, "enter")  # the same answer: the same plan
        assert app.require_state().choices["batch_size"].values == {
            "config.process[0].train.batch_size": 2,
            "config.process[0].train.gradient_accumulation": 1,
        }


SAMPLE_FRAMES = "config.process[0].sample.num_frames"
CLIP_FRAMES = "config.process[0].datasets[0].num_frames"
SAMPLE_WIDTH = "config.process[0].sample.width"


def field_rows(app: object) -> dict[str, object]:
    """The rows of the step on screen, by field key."""
    from oom_wizard.screens.step import FieldRow

    return {row.proposal.key: row for row in app.screen.query(FieldRow)}  # type: ignore[attr-defined]


async def type_into(pilot: Pilot[int], row: object, text: str) -> None:
    row.value_input.value = text  # type: ignore[attr-defined]
    await settle(pilot)


async def test_a_later_step_starts_from_a_value_typed_on_an_earlier_step(tmp_path: Path) -> None:
    """The issue's case: the Wan job, 33 sample frames typed on step 1 (the crash while
    sampling); step 3, fewer frames, starts its sample row from 33, and the save uses 33."""
    folder = demo_folder(tmp_path)
    app = video_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await told_the_moment(pilot, "sampling")
        assert isinstance(app.screen, StepScreen) and app.screen.step.id == "sampling"
        await type_into(pilot, field_rows(app)[SAMPLE_FRAMES], "33")
        await press(pilot, "enter")
        screen = app.screen
        assert isinstance(screen, StepScreen) and screen.step.id == "num_frames"
        assert screen_text(pilot, "#step-title").startswith("Step 3 of ")
        frames = field_rows(app)[SAMPLE_FRAMES]
        label = str(frames.query_one(Tick).label)  # type: ignore[attr-defined]
        assert label == "sample.num_frames: 33 →", label
        assert frames.value_input.value == "17"  # type: ignore[attr-defined]
        clips = field_rows(app)[CLIP_FRAMES]
        assert str(clips.query_one(Tick).label) == "datasets[0].num_frames: 81 →"  # type: ignore[attr-defined]
        await press(pilot, "ctrl+s")
        await save_from_review(pilot)
    saved = yaml.safe_load((folder / "wan_dance_lora.oomfix.yaml").read_text(encoding="utf-8"))
    process = saved["config"]["process"][0]
    assert process["sample"]["num_frames"] == 33  # step 3 left off (its default): the typed 33
    assert process["datasets"][0]["num_frames"] == 81
    assert (folder / VIDEO_JOB.config).read_bytes() == (
        Path(__file__).resolve().parents[2] / "presets" / "demo" / VIDEO_JOB.config
    ).read_bytes()


async def test_another_moment_keeps_typed_values_where_they_apply_and_says_what_went(
    tmp_path: Path,
) -> None:
    """Back to the moment, another answer, another plan: the typed clip length stays (the
    new plan has that row), the typed sample width goes, in one line on its step."""
    folder = demo_folder(tmp_path)
    app = video_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        await press(pilot, "enter", "enter")  # intermittent, as the log says
        assert isinstance(app.screen, StepScreen) and app.screen.step.id == "num_frames"
        await type_into(pilot, field_rows(app)[CLIP_FRAMES], "49")
        await press(pilot, "enter")
        while isinstance(app.screen, StepScreen) and app.screen.step.id != "sampling":
            await press(pilot, "enter")
        await type_into(pilot, field_rows(app)[SAMPLE_WIDTH], "448")
        await press(pilot, "enter")
        while screen_name(pilot) != "MomentScreen":
            await press(pilot, "escape")
        await wait_for_screen(pilot, "MomentScreen")
        app.screen.query_one("#moments", OptionList).highlighted = MOMENTS.index("loading")
        await press(pilot, "enter")
        screen = app.screen
        assert isinstance(screen, StepScreen) and screen.step.id == "sampling"
        assert screen_text(pilot, "#dropped-note") == (
            "Typed before, dropped with the new answers: sample.width 448 "
            "(this step no longer changes it)."
        )
        while isinstance(app.screen, StepScreen) and app.screen.step.id != "num_frames":
            await press(pilot, "enter")
        assert isinstance(app.screen, StepScreen)
        assert field_rows(app)[CLIP_FRAMES].value_input.value == "49"  # type: ignore[attr-defined]
        assert not app.screen.query("#dropped-note")


async def test_the_review_counts_the_validation_run_on_the_config_the_steps_leave(
    tmp_path: Path,
) -> None:
    """Lighter samples sample every 500 steps instead of 250: the short validation run the
    review switches on trains to step 501, through the first sample of the new config."""
    folder = demo_folder(tmp_path)
    app = video_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await told_the_moment(pilot, "sampling")
        app.save_now()  # every step at its default: lighter samples on
        await wait_for_screen(pilot, "ReviewScreen")
        app.screen.query_one("#validation", Tick).value = True
        await settle(pilot)
        await save_from_review(pilot)
    saved = yaml.safe_load((folder / "wan_dance_lora.oomfix.yaml").read_text(encoding="utf-8"))
    process = saved["config"]["process"][0]
    assert process["sample"]["sample_every"] == 500
    assert process["train"]["steps"] == 501


# --- also expected: the s/it chart of watch has labelled axes ----------------------------------


def test_the_rate_chart_names_its_axes() -> None:
    from oom_wizard.spelling import rate_axes

    y, x = rate_axes((1.7, 1.8, 1.95), step=250)
    assert y == "s/it (vertical): 1.70 at the bottom, 1.95 at the top"
    assert x == "time (across): the last 3 readings, oldest left, step 250 right"
    assert rate_axes((), step=None) == ("", "")


def test_a_row_of_fields_breaks_between_fields_never_inside_one() -> None:
    from oom_wizard.screens.load import FIELD_ROW_WIDTH, _field_rows

    fields = [
        "tried 2.25 GiB",
        "card 23.54 GiB",
        "free 1.12 GiB",
        "this process 22.40 GiB",
        "allocated 21.63 GiB",
        "reserved unallocated 0.40 GiB",
    ]
    rows = [str(row.plain) for row in _field_rows("GPU", fields)]
    assert rows[0].startswith("GPU ") and all(r.startswith(" " * 12) for r in rows[1:])
    values = [row[12:] for row in rows]
    assert all(len(value) <= FIELD_ROW_WIDTH for value in values)
    assert [f for value in values for f in value.split(" · ")] == fields
