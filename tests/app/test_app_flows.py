"""Pilot tests of whole wizard flows, at 80x24, on the bundled demo jobs and variants."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from textual.widgets import Input, OptionList, Static

from oom_wizard.application.demo import IMAGE_JOB, VIDEO_JOB
from oom_wizard.formats.document import load_document
from oom_wizard.request import JobRequest
from oom_wizard.screens.app import OomWizardApp, create_app
from oom_wizard.screens.environment import EnvironmentScreen
from oom_wizard.screens.step import StepScreen
from oom_wizard.screens.toggles import Choice, Tick
from oom_wizard.screens.widgets import MARKER, MarkedOptionList
from tests.support.app_support import (
    accept_steps,
    baseline_sample_log,
    demo_app,
    demo_folder,
    press,
    review_app,
    review_first_step,
    rolled_back_demo,
    save_from_review,
    screen_name,
    screen_text,
    settle,
    video_app,
    wait_for_error,
    wait_for_screen,
    wait_for_state,
)

SIZE = (80, 24)


def saved(folder: Path, job_config: str) -> tuple[dict[str, object], dict[str, object]]:
    """The tree of the saved config and its change log, beside the demo job."""
    stem = Path(job_config).stem
    config = yaml.safe_load((folder / f"{stem}.oomfix.yaml").read_text(encoding="utf-8"))
    log = json.loads((folder / f"{stem}.oomfix.changelog.json").read_text(encoding="utf-8"))
    return config, log


def process(tree: dict[str, object]) -> dict[str, object]:
    """``config.process[0]`` of a loaded tree."""
    return tree["config"]["process"][0]  # type: ignore[index, no-any-return]


def step_id(app: OomWizardApp) -> str:
    """The id of the step on screen."""
    screen = app.screen
    assert isinstance(screen, StepScreen)
    return screen.step.id


async def test_image_job_crashing_in_the_first_steps(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    app = demo_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_screen(pilot, "LoadScreen")
        await wait_for_state(pilot)
        await press(pilot, "enter")
        assert screen_name(pilot) == "MomentScreen"
        assert app.require_state().moment == "early_steps"
        assert app.require_state().model_kind == "image"
        await press(pilot, "enter")
        seen = await accept_steps(pilot)
        assert seen[:3] == ["gradient_checkpointing", "batch_size", "top_bucket"]
        await save_from_review(pilot)
    config, log = saved(folder, IMAGE_JOB.config)
    train = process(config)["train"]
    # The crash's own OOM figures size the fix: checkpointing alone (it costs no quality) is
    # still tight on the 23.5 GiB card, so just enough is checkpointing and a batch of one,
    # the effective batch kept by accumulation.
    assert train["gradient_checkpointing"] is True  # type: ignore[index]
    assert train["batch_size"] == 1  # type: ignore[index]
    assert train["gradient_accumulation"] == 2  # type: ignore[index]
    assert log["runs"][0]["moment"] == "early_steps"  # type: ignore[index]
    assert (folder / IMAGE_JOB.config).read_bytes() == (
        Path(__file__).resolve().parents[2] / "presets" / "demo" / IMAGE_JOB.config
    ).read_bytes()


async def test_video_job_crashing_intermittently(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    app = video_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        await press(pilot, "enter")
        state = app.require_state()
        assert state.moment == "intermittent"
        assert state.model_kind == "video"
        await press(pilot, "enter")
        seen = await accept_steps(pilot)
        assert seen[0] == "num_frames"
        await save_from_review(pilot)
    config, _ = saved(folder, VIDEO_JOB.config)
    # The step crashed only now and then, at its floor, with checkpointing on and the text
    # embeddings cached already: half the frames are just enough.
    assert process(config)["train"]["gradient_checkpointing"] is True  # type: ignore[index]
    dataset = process(config)["datasets"][0]  # type: ignore[index]
    assert dataset["num_frames"] == 41


async def test_crash_at_loading_disables_sampling(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    app = demo_app(folder, log=baseline_sample_log(folder))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        await press(pilot, "enter")
        assert app.require_state().moment == "loading"
        await press(pilot, "enter")
        assert step_id(app) == "sampling"
        seen = await accept_steps(pilot)
        assert seen[0] == "sampling"
        await save_from_review(pilot)
    config, log = saved(folder, IMAGE_JOB.config)
    assert process(config)["train"]["disable_sampling"] is True  # type: ignore[index]
    assert "sampling" in log["runs"][0]["steps"]  # type: ignore[index]


async def test_environment_verdict(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    app = demo_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        await press(pilot, "enter")
        moments = app.screen.query_one("#moments", OptionList)
        moments.highlighted = 4
        await press(pilot, "enter")
        assert isinstance(app.screen, EnvironmentScreen)
        checks = screen_text(pilot, "#checks")
        assert checks.strip()
        assert app.require_state().plan.steps == ()
        await press(pilot, "enter")
        assert isinstance(app.screen, StepScreen)
        assert app.require_state().moment == "early_steps"


async def test_the_log_keeps_its_own_verdict_beside_the_users_answer(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    app = demo_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        await press(pilot, "enter")
        detected = screen_text(pilot, "#detected")
        first, sure = detected.splitlines()
        assert first == "The log points to: In the first training steps · image model"
        assert sure.startswith("Sure (high): ")
        assert not app.screen.query_one("#disagreement", Static).display
        app.screen.query_one("#moments", OptionList).highlighted = 2
        await press(pilot, "ctrl+t")
        disagreement = screen_text(pilot, "#disagreement")
        assert disagreement == (
            "You picked: While generating samples · video model. Your answer is used."
        )
        await press(pilot, "enter")
        assert app.require_state().moment == "sampling"
        app.show_moment()
        await settle(pilot)
        assert screen_text(pilot, "#detected") == detected
        again = screen_text(pilot, "#disagreement")
        assert again == disagreement


def read(box: Tick | Choice) -> str:
    """A box as a plain-text capture shows it."""
    return str(box.render()).rstrip()


async def test_every_toggle_reads_on_or_off_without_colour(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    app = demo_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        await press(pilot, "enter")
        shown = [read(box) for box in app.screen.query(Choice)]
        assert shown == ["(•) image model", "( ) video model"]
        worked = app.screen.query_one("#worked", Tick)
        assert read(worked) == "[ ] This exact config worked before"
        worked.focus()
        await press(pilot, "space")
        assert read(worked) == "[x] This exact config worked before"
        await press(pilot, "enter", "enter", "enter")
        assert step_id(app) == "top_bucket"
        boxes = {read(box) for box in app.screen.query(Tick)}
        assert boxes == {
            "[ ] Apply this step",  # not in the just-enough fix the crash's figures size
            "[ ] drop bucket 768 (dataset portraits)",
            "[x] drop bucket 1024 (dataset portraits)",
        }


async def test_going_back_and_changing_a_toggle(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    app = demo_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        await press(pilot, "enter", "enter")
        assert step_id(app) == "gradient_checkpointing"
        await press(pilot, "enter")
        assert step_id(app) == "batch_size"
        await press(pilot, "escape")
        assert step_id(app) == "gradient_checkpointing"
        app.screen.query_one("#step-on", Tick).value = False
        await press(pilot, "enter")
        assert app.require_state().choices["gradient_checkpointing"].enabled is False
        await accept_steps(pilot)
        await wait_for_screen(pilot, "ReviewScreen")
        # The safe set on the review: the steps accepted as they were follow it, the one
        # changed stays as the user left it.
        app.screen.query_one("#fix-safe", Choice).value = True
        await pilot.pause()
        await save_from_review(pilot)
    config, _ = saved(folder, IMAGE_JOB.config)
    assert process(config)["train"]["gradient_checkpointing"] is False  # type: ignore[index]
    assert process(config)["train"]["batch_size"] == 1  # type: ignore[index]


async def test_the_run_command_names_the_saved_file_by_its_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    demo_folder(tmp_path)
    app = demo_app(Path("oom-wizard-demo"))
    async with app.run_test(size=SIZE) as pilot:
        await review_first_step(pilot)
        assert not Path(app.screen.query_one("#output", Input).value).is_absolute()
        await press(pilot, "enter")
        await wait_for_screen(pilot, "ResultScreen")
        how = screen_text(pilot, "#run")
        await press(pilot, "c")
        copied = app.clipboard
    saved_file = Path.cwd() / "oom-wizard-demo" / "flux_portrait_lora.oomfix.yaml"
    run_log = saved_file.with_name("flux_portrait_lora.oomfix.log.txt")
    assert saved_file.is_file()
    assert f"python run.py {saved_file} -l {run_log}" in how
    assert copied == f"python run.py {saved_file} -l {run_log}"


async def test_coming_back_and_scaling_up_one_step(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    again = create_app(rolled_back_demo(folder))
    async with again.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        await press(pilot, "enter")
        assert screen_name(pilot) == "ComingBackScreen"
        last = screen_text(pilot, "#last")
        assert last.startswith("Last time (roll-back, ")  # words, not the id "rollback"
        assert "(Gradient checkpointing on" not in last and "rollback" not in last
        await press(pilot, "down", "enter")  # Yes: no log says it (none preselected)
        assert screen_name(pilot) == "ScaleUpScreen"
        await press(pilot, "enter")
        await wait_for_screen(pilot, "ResultScreen")
    log = json.loads((folder / "flux_portrait_lora.oomfix-2.changelog.json").read_text())
    assert [run["direction"] for run in log["runs"]] == ["rollback", "scale_up"]
    assert len(log["runs"][1]["steps"]) == 1


async def test_a_config_that_cannot_be_loaded_shows_one_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("config:\n  process: [\n", encoding="utf-8")
    app = create_app(broken)
    async with app.run_test(size=SIZE) as pilot:
        error = await wait_for_error(pilot)
        assert error.startswith(f"{broken}:")  # the app's line: no "oom-wizard: error:"
        assert "\n" not in error.strip()
        assert "Traceback" not in error


async def test_a_web_ui_job_folder_says_what_to_do_in_the_ui(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    job = tmp_path / "output" / "flux_portrait_lora"
    job.mkdir(parents=True)
    tree = load_document(folder / IMAGE_JOB.config).tree
    (job / ".job_config.json").write_text(json.dumps(tree, indent=2), encoding="utf-8")
    (job / "log.txt").write_bytes((folder / IMAGE_JOB.log).read_bytes())
    app = review_app(JobRequest(target=job))  # the walk to the review: the parity tests
    async with app.run_test(size=SIZE) as pilot:
        assert app.require_state().log_path == job / "log.txt"
        await save_from_review(pilot)
        how = screen_text(pilot, "#run")
        assert "web UI" in how
        assert "python run.py" not in how
    assert (job / ".job_config.oomfix.json").is_file()


async def test_an_invalid_number_keeps_the_step_open(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    app = demo_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        await press(pilot, "enter", "enter", "enter")
        assert step_id(app) == "batch_size"
        app.screen.query_one("#step-on", Tick).value = True  # off in the just-enough fix
        field = app.screen.query_one("#value-0", Input)
        field.value = "two"
        await press(pilot, "enter")
        assert step_id(app) == "batch_size"
        assert "batch_size" not in app.require_state().choices
        field.value = "1"
        await press(pilot, "enter")
        assert step_id(app) == "top_bucket"


async def test_coming_back_after_another_crash_goes_one_rung_further(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    again = create_app(rolled_back_demo(folder))
    async with again.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        await press(pilot, "enter", "down", "down", "enter")  # none preselected: No
        assert screen_name(pilot) == "MomentScreen"
        assert again.require_state().crashed_again is True
        await press(pilot, "enter")
        assert isinstance(again.screen, StepScreen)


async def test_the_command_palette_offers_the_stages(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    app = demo_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        titles = {command.title for command in app.get_system_commands(app.screen)}
        assert {"Help", "Stage: when did it crash?", "Stage: review and save"} <= titles
        assert any("theme" in title.lower() for title in titles)


async def test_the_highlighted_row_reads_without_colour(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    app = demo_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        await press(pilot, "enter")
        moments = app.screen.query_one("#moments", MarkedOptionList)

        def marked() -> list[str]:
            lines = (moments.render_line(y).text for y in range(moments.size.height))
            return [line for line in lines if not line.startswith(" " * len(MARKER))]

        assert [line.split(" — ")[0] for line in marked()] == ["▶ In the first training steps"]
        await press(pilot, "down")
        assert [line.split(" — ")[0] for line in marked()] == ["▶ While generating samples"]
