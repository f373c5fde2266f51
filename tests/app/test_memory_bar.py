"""The memory bar of the load and step screens: the peak against the card, in GiB, with the
phase that sets it (issue 18 item 5, issue 19 item 7)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.app import App, ComposeResult

from oom_wizard.application.choosing import walk_steps
from oom_wizard.application.settling import JobCard
from oom_wizard.rules.memory import Band
from oom_wizard.rules.sizing import MemoryPeak
from oom_wizard.screens.memory_bar import MemoryBar, bar_content
from oom_wizard.screens.step import StepScreen
from tests.support.app_support import demo_app, demo_folder, press, screen_text, wait_for_state

CHECKED = "figures checked on a GPU, calibrated by PyTorch's OOM message, log line 173"
LOGGED = JobCard(23.54, "oom-message").words
FITS = MemoryPeak(Band(17.1, 22.5), "training", 23.54, LOGGED, True, True, CHECKED)
WONT = MemoryPeak(
    Band(30.2, 41.0), "sample", 23.54, "nvidia-smi", False, False, "figures a stand-in"
)
UNKNOWN_CARD = MemoryPeak(
    Band(12.0, 14.0), "load", None, None, False, True, "figures measured on CPU only"
)


def test_the_bar_says_the_peak_against_the_card_in_words() -> None:
    assert str(bar_content(FITS)).splitlines() == [
        "Memory ▕█████████████░░░▏ 19.8 of 23.5 GiB (17.1–22.5), fits",
        f"in a training step · {CHECKED} · card from PyTorch's OOM message in the log",
    ]
    assert str(bar_content(WONT)).splitlines() == [
        "Memory ▕████████████████▏ 35.6 of 23.5 GiB (30.2–41.0), won't fit",
        "in a periodic sample · figures a stand-in · card from nvidia-smi",
    ]
    assert str(bar_content(UNKNOWN_CARD)).splitlines() == [
        "Memory peak 13.0 GiB (12.0–14.0), card size unknown",
        "in loading the model · figures measured on CPU only",
    ]
    not_covered = MemoryPeak(
        Band(1.0, 2.0), "training", 24.0, None, False, True, "", "not estimated: this job type"
    )
    assert str(bar_content(not_covered)) == "Memory: not estimated: this job type."


class Bars(App[None]):
    def compose(self) -> ComposeResult:
        for number in range(3):
            yield MemoryBar(id=f"bar-{number}")

    def on_mount(self) -> None:
        for number, peak in enumerate((FITS, WONT, UNKNOWN_CARD)):
            self.query_one(f"#bar-{number}", MemoryBar).show(peak)


def test_the_bars_snapshot(snap_compare: Any) -> None:
    assert snap_compare(Bars(), terminal_size=(80, 8))


async def test_the_load_and_every_step_screen_show_the_peak_in_gib(tmp_path: Path) -> None:
    app = demo_app(demo_folder(tmp_path))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for_state(pilot)
        await pilot.pause()
        today = screen_text(pilot, "#memory")
        assert "of 23.5 GiB" in today and "in a training step" in today
        await press(pilot, "enter", "enter")
        seen = 0
        while isinstance(app.screen, StepScreen):
            shown = screen_text(pilot, "#memory")
            assert "of 23.5 GiB" in shown and "in " in shown, app.screen.step.id
            seen += 1
            await press(pilot, "enter")
        assert seen == len(walk_steps(app.require_state())) >= 3  # every screen of the walk


async def test_without_a_card_the_peak_is_shown_alone(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    from oom_wizard.screens.app import create_app

    app = create_app(folder / "flux_portrait_lora.yaml", probe=False)  # no log: no OOM message
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for_state(pilot)
        await pilot.pause()
        shown = screen_text(pilot, "#memory")
        assert "card size unknown" in shown and " of " not in shown.splitlines()[0]


async def test_a_job_without_counts_shows_why_and_no_figure(tmp_path: Path) -> None:
    """Ming-Image has no parameter counts a source gives: the load screen's bar and every
    step say "not estimated" and why, with no GiB and no percentage of today's."""
    from oom_wizard.screens.app import create_app

    folder = demo_folder(tmp_path)
    config = folder / "ming.yaml"
    text = (folder / "flux_portrait_lora.yaml").read_text(encoding="utf-8")
    config.write_text(text.replace('arch: "flux"', 'arch: "ming_image"'), encoding="utf-8")
    app = create_app(config, log=folder / "flux_portrait_lora.log", probe=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for_state(pilot)
        await pilot.pause()
        today = screen_text(pilot, "#memory")
        assert today.startswith("Memory: not estimated: the parameter counts of Ming-Image")
        await press(pilot, "enter", "enter")
        assert isinstance(app.screen, StepScreen)
        assert screen_text(pilot, "#memory") == today
        estimate = screen_text(pilot, "#estimate")
        assert estimate.startswith("No GiB from the memory model") and "%" not in estimate
