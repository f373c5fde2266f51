"""``run`` without ``--auto``: the wizard opens on the crash with the fix preselected.

Real child processes of the fake trainer, the real app driven headless by Pilot (the same
:func:`oom_wizard.commands.run.ask_in_wizard` the command calls on a terminal), and once in a
real terminal (tmux). Also the short validation run's step count against the config's
periodic save and sample.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from oom_wizard.application.autopilot import Outcome, Settings, UserSave, autopilot
from oom_wizard.application.choosing import effective_choices, prepared, preselect_fix
from oom_wizard.application.settling import WizardState, start
from oom_wizard.commands.run import ask_in_wizard
from oom_wizard.formats.document import MISSING, load_document
from oom_wizard.formats.view import ProcessView
from oom_wizard.paths import parse_path
from oom_wizard.request import JobRequest
from oom_wizard.rules.plan import validation_run_steps
from oom_wizard.screens.app import OomWizardApp
from oom_wizard.screens.review import ReviewScreen
from oom_wizard.screens.toggles import Tick
from oom_wizard.storage.changelog import changelog_path_for, read_changelog
from tests.support.app_support import settle, wait_for_screen
from tests.support.autopilot_support import FAKE, SCENARIOS, Scenario, fake_runner, write_config
from tests.support.tmux_support import (
    HOLD,
    SCREEN_WAIT_S,
    WIZARD,
    in_a_real_terminal,
    terminal,
)

STEPS = "config.process[0].train.steps"


def scenario(name: str) -> Scenario:
    return next(s for s in SCENARIOS if s.name == name)


def value(config: Path, dotted: str) -> object:
    return load_document(config).get(parse_path(dotted))


#: What the user does on the review (the app's Pilot in hand).
Keys = Callable[[Pilot[int]], Awaitable[None]]


def headless(seen: list[dict[str, object]], keys: Keys) -> Callable[[OomWizardApp], None]:
    """Drive the app headless: wait for the review, note what it shows, then ``keys``."""

    def drive(app: OomWizardApp) -> None:
        async def run() -> None:
            async with app.run_test(size=(100, 40)) as pilot:
                await wait_for_screen(pilot, "ReviewScreen")
                review = app.screen
                assert isinstance(review, ReviewScreen) and review.ready is not None
                seen.append(
                    {
                        "verdict": app.require_state().diagnosis.verdict,
                        "changes": {e.path: e.after for e in review.ready.entries},
                        "validation": review.query_one("#validation", Tick).value,
                    }
                )
                await keys(pilot)
                for _ in range(50):
                    if app.finished is not None or not app.is_running:
                        break
                    await settle(pilot)

        asyncio.run(run())

    return drive


async def save(pilot: Pilot[int]) -> None:
    await pilot.press("enter")


def play(tmp_path: Path, name: str, keys: Keys) -> tuple[Outcome, list[dict[str, object]]]:
    config = write_config(tmp_path, scenario(name))
    seen: list[dict[str, object]] = []

    def ask(state: WizardState, fix: Sequence[str]) -> bool | UserSave:
        return ask_in_wizard(state, drive=headless(seen, keys))

    outcome = autopilot(config, fake_runner(scenario(name).card_gb), ask=ask)
    return outcome, seen


def test_the_wizard_opens_on_the_crash_diagnosed_and_its_save_is_what_runs_next(
    tmp_path: Path,
) -> None:
    outcome, seen = play(tmp_path, "image-early-steps", save)

    assert len(seen) == 1
    shown = seen[0]
    assert "training step 4" in str(shown["verdict"])  # diagnosed before the wizard opened
    changes = shown["changes"]
    assert isinstance(changes, dict)
    assert changes["config.process[0].train.gradient_checkpointing"] is True
    assert changes[STEPS] == 251  # --validation-steps 100, raised past the save/sample at 250
    assert shown["validation"] is True
    assert [(a.kind, a.outcome) for a in outcome.attempts] == [
        ("full", "crashed"),
        ("validation", "passed_validation"),
        ("full", "finished"),
    ]
    user_saved = outcome.attempts[1].config
    assert user_saved == outcome.saved[0]
    assert value(user_saved, STEPS) == 251
    changed = outcome.attempts[1].changed
    assert {line.split(":")[0] for line in changed} == set(changes)  # what the review showed
    assert "config.process[0].train.gradient_checkpointing: false → true" in changed
    assert f"{STEPS}: 3000 → 251" in changed
    # The attempt before the save is in the change log the wizard's save wrote.
    log = read_changelog(changelog_path_for(user_saved))
    assert [(a.kind, a.outcome) for a in log.attempts][:1] == [("full", "crashed")]
    assert log.runs[0].direction == "rollback" and log.runs[0].moment == "early_steps"


async def untick_the_validation_run_and_save(pilot: Pilot[int]) -> None:
    await pilot.click("#validation")
    await settle(pilot)
    await pilot.press("enter")


def test_what_the_user_changes_in_the_wizard_is_what_runs(tmp_path: Path) -> None:
    outcome, _ = play(tmp_path, "image-early-steps", untick_the_validation_run_and_save)

    assert [(a.kind, a.outcome) for a in outcome.attempts] == [
        ("full", "crashed"),
        ("full", "finished"),
    ]
    assert value(outcome.attempts[1].config, STEPS) == 3000
    assert value(outcome.attempts[1].config, "config.process[0].train.gradient_checkpointing")


async def quit_without_saving(pilot: Pilot[int]) -> None:
    await pilot.press("ctrl+q")


def test_leaving_the_wizard_without_a_save_stops_the_loop(tmp_path: Path) -> None:
    outcome, seen = play(tmp_path, "image-early-steps", quit_without_saving)

    assert len(seen) == 1
    assert outcome.exit_status == 2 and len(outcome.attempts) == 1
    assert "no fix was saved" in outcome.reason
    assert not list(tmp_path.glob("*.oomfix*"))


# --- the validation run's step count ------------------------------------------------------


def process_of(tmp_path: Path, name: str, edits: dict[str, object]) -> tuple[ProcessView, Any]:
    base = scenario("image-early-steps")
    config = write_config(tmp_path, Scenario(name, base.base, 24, edits))
    document = load_document(config)
    process = document.view().processes[0]
    return process, document.get(process.path("save", "save_every"))


@pytest.mark.parametrize(
    ("edits", "wanted", "steps"),
    [
        ({}, 100, 251),  # save_every and sample_every 250
        ({"process.0.save.save_every": 1000, "process.0.sample.sample_every": 300}, 100, 1001),
        ({"process.0.save.save_every": 50, "process.0.sample.sample_every": 300}, 100, 301),
        ({"process.0.save.save_every": 50, "process.0.sample.sample_every": 30}, 100, 100),
        (
            {
                "process.0.save.save_every": 50,
                "process.0.sample.sample_every": 250,
                "process.0.sample.sample_start_step": 600,
            },
            100,
            751,
        ),
        ({"process.0.save.save_every": 50, "process.0.train.disable_sampling": True}, 10, 51),
        ({"process.0.save.save_every": 0, "process.0.sample.sample_every": 0}, 100, 100),
        ({"process.0.save": None, "process.0.sample.sample_every": 0}, 100, 1001),
        ({}, 400, 400),
    ],
)
def test_the_validation_run_reaches_the_first_periodic_save_and_sample(
    tmp_path: Path, edits: dict[str, object], wanted: int, steps: int
) -> None:
    process, save_every = process_of(tmp_path, "case", edits)
    if "process.0.save" in edits:
        assert save_every is MISSING  # no save section: the toolkit's default, 1000
    assert validation_run_steps(process, save_every, wanted) == steps


def test_a_validation_run_that_would_not_be_shorter_is_left_off(tmp_path: Path) -> None:
    base = scenario("image-early-steps")
    config = write_config(
        tmp_path, Scenario("short", base.base, 24, {"process.0.train.steps": 200})
    )
    runner = fake_runner(24)
    first = tmp_path / "first.log"
    runner(config, first)
    state = preselect_fix(start(JobRequest(target=config, log=first, probe=False)), 100)
    ready = prepared(state, effective_choices(state))
    assert STEPS not in {e.path for e in ready.entries}  # 251 would not be shorter than 200
    outcome = autopilot(config, runner, settings=Settings())
    assert [(a.kind, a.outcome) for a in outcome.attempts] == [
        ("full", "crashed"),
        ("full", "finished"),
    ]


# --- in a real terminal ---------------------------------------------------------------------


@in_a_real_terminal
def test_run_asks_in_the_wizard_in_a_real_terminal(tmp_path: Path) -> None:
    config = write_config(tmp_path, scenario("image-early-steps"))
    command = (
        f"env FAKE_VRAM_GB=24 {WIZARD} run {config} -- {sys.executable} {FAKE} {{config}}; "
        f"echo EXIT=$?; {HOLD}"
    )
    with terminal(command, cwd=tmp_path) as pane:
        pane.wait_for("Review and save")
        pane.wait_for("Gradient checkpointing on")  # the review names its steps by title
        pane.send("Enter")
        shown = pane.wait_for("EXIT=")
        assert "EXIT=0" in shown, shown
    saved = tmp_path / "image-early-steps.oomfix.yaml"
    assert value(saved, STEPS) == 251
    attempts = read_changelog(changelog_path_for(saved)).attempts
    assert [a.outcome for a in attempts][:1] == ["crashed"]


@in_a_real_terminal
def test_with_the_output_piped_it_asks_y_n_in_the_terminal(tmp_path: Path) -> None:
    config = write_config(tmp_path, scenario("image-early-steps"))
    command = (
        f"env FAKE_VRAM_GB=24 {WIZARD} run {config} -- {sys.executable} {FAKE} {{config}} "
        f"| tail -n 3; echo EXIT=${{PIPESTATUS[0]}}; {HOLD}"
    )
    run_log = tmp_path / "image-early-steps.run.log"
    with terminal(f"bash -c '{command}'", cwd=tmp_path) as pane:
        deadline = time.monotonic() + SCREEN_WAIT_S
        while not (run_log.is_file() and "Error running job" in run_log.read_text()):
            assert time.monotonic() < deadline, "the trainer never crashed"
            time.sleep(0.1)
        time.sleep(1.0)  # the question is asked into the pipe; the answer comes from the tty
        pane.send("Enter")
        shown = pane.wait_for("EXIT=")
        assert "EXIT=0" in shown, shown
    assert value(tmp_path / "image-early-steps.oomfix.yaml", STEPS) == 251


def test_run_s_validation_count_outlives_a_new_answer_in_the_wizard(tmp_path: Path) -> None:
    from oom_wizard.application.choosing import answer
    from oom_wizard.rules.diagnosis import Answers

    config = write_config(tmp_path, scenario("image-early-steps"))
    log = tmp_path / "first.log"
    fake_runner(24)(config, log)
    state = preselect_fix(start(JobRequest(target=config, log=log, probe=False)), 100)
    again = answer(state, Answers(moment="sampling"))  # the user changes the moment
    assert again.plan.moment == "sampling" and not again.choices
    ready = prepared(again, effective_choices(again))
    after = {e.path: e.after for e in ready.entries}
    # Lighter samples (on for a crash while sampling) sample every 500 steps, not 250: the
    # validation run goes on to the first sample of the config it runs.
    assert after["config.process[0].sample.sample_every"] == 500
    assert after[STEPS] == 501
    # Without run's count, the plan's own optional validation run is what the wizard offers:
    # off by default, so the step count is left as it is.
    plain = start(JobRequest(target=config, log=log, probe=False))
    offered = plain.validation_step()
    assert offered is not None and not offered.default_on
    plain_ready = prepared(plain, effective_choices(plain))
    assert STEPS not in {e.path for e in plain_ready.entries}
