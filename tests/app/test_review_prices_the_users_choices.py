"""Pilot tests: the review prices each fix as the user left the walk (issue 38 items 5 and 6).

The demo image job walked as a user walks it, a step skipped with Ctrl+N on its own screen:
the fixes the review offers no longer list or price that step; the fix picked saves exactly
the steps its line lists; the peak shown, on the fix's line and on the memory bar, is
``fit``'s on the saved bytes (read back through the application layer, as ``fit`` reads a
file, on the same card); a fix above the card says so; and when the user's choices make both
fixes the same set, one is offered.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import RadioButton, Static

from oom_wizard.application.demo import IMAGE_JOB
from oom_wizard.application.fitting import fit
from oom_wizard.application.settling import JobCard, start
from oom_wizard.request import JobRequest
from oom_wizard.screens.memory_bar import MemoryBar
from oom_wizard.screens.review import ReviewScreen
from oom_wizard.screens.step import StepScreen
from oom_wizard.screens.toggles import Tick
from tests.support.app_support import (
    demo_app,
    demo_folder,
    press,
    save_from_review,
    settle,
    wait_for_screen,
    wait_for_state,
    wizard,
)

SIZE = (120, 50)
#: The save beside the demo job and its change log, by the default output names.
SAVED = f"{Path(IMAGE_JOB.config).stem}.oomfix.yaml"
CHANGELOG = f"{Path(IMAGE_JOB.config).stem}.oomfix.changelog.json"


@dataclass(frozen=True)
class Offered:
    """The review as the user read it: each fix's line, the steps each lists (by title), the
    memory bar, and the card the figures are weighed against."""

    lines: dict[str, str]
    steps: dict[str, list[str]]
    bar: str
    card_gib: float


async def walk(pilot: Pilot[int], *, skip: str = "", switch_on: str = "") -> list[str]:
    """From launch: the moment as the log says, then every step accepted as shown, except
    ``skip``, left out with Ctrl+N on its own screen, and ``switch_on``, whose switch is
    clicked on first; the step ids seen."""
    await wait_for_state(pilot)
    await press(pilot, "enter", "enter")
    seen: list[str] = []
    while isinstance(screen := pilot.app.screen, StepScreen):
        seen.append(screen.step.id)
        if screen.step.id == switch_on:
            assert not screen.query_one("#step-on", Tick).value
            await pilot.click("#step-on")
            await settle(pilot)
            assert screen.query_one("#step-on", Tick).value
        await press(pilot, "ctrl+n" if screen.step.id == skip else "enter")
    await wait_for_screen(pilot, "ReviewScreen")
    return seen


def offered(pilot: Pilot[int]) -> Offered:
    """What the review on top shows of its fixes and its peak."""
    screen = pilot.app.screen
    assert isinstance(screen, ReviewScreen)
    lines = {
        (button.id or "").removeprefix("fix-"): str(button.label)
        for button in screen.query(RadioButton)
        if (button.id or "").startswith("fix-")
    }
    steps: dict[str, list[str]] = {}
    for hint in screen.query("#fixes Static.field-hint").results(Static):
        for line in str(hint.render()).splitlines():
            for name, words in lines.items():
                label = words.split(":")[0]
                if line.startswith(f"{label}: "):
                    listed = line.removeprefix(f"{label}: ")
                    steps[name] = [] if listed == "no step" else listed.split(", ")
    assert screen.shown is not None and screen.shown.peak is not None
    card = screen.shown.peak.card_gib
    assert card is not None
    return Offered(lines, steps, str(screen.query_one("#memory", MemoryBar).render()), card)


async def pick(pilot: Pilot[int], fix: str) -> None:
    """Pick ``fix`` on the review with a click, as a user picks it."""
    screen = pilot.app.screen
    if not screen.query_one(f"#fix-{fix}", RadioButton).value:
        await pilot.click(f"#fix-{fix}")
        await settle(pilot)
    assert screen.query_one(f"#fix-{fix}", RadioButton).value


def fitted_band(saved: Path, card_gib: float) -> str:
    """``fit``'s peak band of the saved config on the card, as the review writes a band."""
    report = fit(start(JobRequest(target=saved, probe=False)), JobCard(card_gib, "--gpu"))
    band = report.memory.peak()
    return f"({band.low:.1f}–{band.high:.1f})"


def saved_steps(folder: Path) -> set[str]:
    """The steps the saved change log records."""
    log = json.loads((folder / CHANGELOG).read_text(encoding="utf-8"))
    return {change["step"] for change in log["changes"]}


def titles(pilot: Pilot[int], steps: set[str]) -> set[str]:
    """The steps ``steps`` by the titles the review lists them with."""
    plan = wizard(pilot).require_state().plan
    return {step.title for step in plan.steps if step.id in steps}


async def test_a_skipped_step_is_neither_listed_nor_priced_in_the_default_fix(
    tmp_path: Path,
) -> None:
    """The demo, batch size skipped: the preselected fix is checkpointing alone, priced as
    saved, above the card and saying so; the save writes that and nothing more."""
    folder = demo_folder(tmp_path)
    async with demo_app(folder).run_test(size=SIZE) as pilot:
        assert "batch_size" in await walk(pilot, skip="batch_size")
        shown = offered(pilot)
        default = next(name for name, line in shown.lines.items() if line.endswith("(default)"))
        assert default == "just_enough"
        assert shown.lines[default].startswith("least loss: 1 step, peak ≈ ")
        assert "(predicted not to fit)" in shown.lines[default]
        batch = titles(pilot, {"batch_size"})
        assert not batch & {title for listed in shown.steps.values() for title in listed}
        await save_from_review(pilot)
        assert saved_steps(folder) == {"gradient_checkpointing"}
        assert set(shown.steps[default]) == titles(pilot, saved_steps(folder))
        band = fitted_band(folder / SAVED, shown.card_gib)
        assert band in shown.lines[default]
        assert band in shown.bar


async def test_the_fix_picked_saves_exactly_the_steps_it_lists(tmp_path: Path) -> None:
    """Batch size skipped, "more margin" picked: it saves the steps its line lists (not the
    skipped one), and its line and the bar show ``fit``'s peak of the saved file."""
    folder = demo_folder(tmp_path)
    async with demo_app(folder).run_test(size=SIZE) as pilot:
        await walk(pilot, skip="batch_size")
        await pick(pilot, "safe")
        shown = offered(pilot)
        assert shown.lines["safe"].startswith("more margin: 2 steps, peak ≈ ")
        assert "predicted not to fit" not in shown.lines["safe"]
        await save_from_review(pilot)
        assert saved_steps(folder) == {"gradient_checkpointing", "top_bucket"}
        assert set(shown.steps["safe"]) == titles(pilot, saved_steps(folder))
        band = fitted_band(folder / SAVED, shown.card_gib)
        assert band in shown.lines["safe"]
        assert band in shown.bar


async def test_one_fix_is_offered_when_the_users_choices_make_both_the_same(
    tmp_path: Path,
) -> None:
    """The biggest resolution (the one step "more margin" adds) switched on by the user: both
    fixes save the same steps, so the review offers no choice; the bar is ``fit``'s peak of
    the save."""
    folder = demo_folder(tmp_path)
    async with demo_app(folder).run_test(size=SIZE) as pilot:
        await walk(pilot, switch_on="top_bucket")
        shown = offered(pilot)
        assert shown.lines == {}
        assert not pilot.app.screen.query("#fix")
        await save_from_review(pilot)
        assert saved_steps(folder) == {"gradient_checkpointing", "batch_size", "top_bucket"}
        assert fitted_band(folder / SAVED, shown.card_gib) in shown.bar


async def test_a_skipped_step_off_by_default_stays_out_of_every_fix(tmp_path: Path) -> None:
    """The biggest resolution, off in the preselected fix, skipped with Ctrl+N: "more margin"
    no longer lists it, so both fixes are the same set and one is offered; the save leaves
    it out and the bar is ``fit``'s peak of the save."""
    folder = demo_folder(tmp_path)
    async with demo_app(folder).run_test(size=SIZE) as pilot:
        await walk(pilot, skip="top_bucket")
        shown = offered(pilot)
        skipped = titles(pilot, {"top_bucket"})
        assert not skipped & {title for listed in shown.steps.values() for title in listed}
        assert shown.lines == {}
        await save_from_review(pilot)
        assert saved_steps(folder) == {"gradient_checkpointing", "batch_size"}
        assert fitted_band(folder / SAVED, shown.card_gib) in shown.bar
