"""Pilot tests: what the review shows is what the save writes (issue 33, N-M4).

Ctrl+S on a step opens the review with the steps not decided yet at their defaults, as the
command palette's "Save now" says. Picking a fix changes the review's headline, its memory bar
and its diff; the bytes saved differ from the source in exactly the lines of the diff on
screen (checked with :mod:`difflib`, not with the wizard's own diff), and the headline and the
bar are those of the saved edit.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import RadioButton

from oom_wizard.application.choosing import Review, memory_peak
from oom_wizard.application.demo import IMAGE_JOB
from oom_wizard.screens.app import create_app
from oom_wizard.screens.changes import DiffView
from oom_wizard.screens.memory_bar import MemoryBar
from oom_wizard.screens.review import ReviewScreen
from oom_wizard.storage.jobdb import load_job
from oom_wizard.storage.save import HEADER
from tests.app.test_app_db import apply_changes
from tests.support.aitk_db import job_row
from tests.support.app_support import (
    REPO,
    UI_JOB,
    demo_app,
    demo_folder,
    press,
    screen_text,
    settle,
    ui_jobs_db,
    wait_for_jobs,
    wait_for_screen,
    wait_for_state,
    wizard,
)

SIZE = (120, 50)
FIXTURES = REPO / "tests" / "fixtures" / "configs"


def flux_example_job(root: Path) -> tuple[Path, Path]:
    """A job shaped as AI Toolkit's FLUX LoRA example (``train_lora_flux_24gb.yaml``: batch
    1, checkpointing on, the transformer quantized, buckets 512/768/1024) and a log where it
    dies now and then: 614 steps fit, then a training step runs out of memory.

    The log is the image demo's, its steps moved past 600 and its job name changed.
    """
    text = (FIXTURES / "flux_portrait_24gb.yaml").read_text(encoding="utf-8")
    assert "batch_size: 2\n" in text
    config = root / "flux_example.yaml"
    config.write_text(text.replace("batch_size: 2\n", "batch_size: 1\n"), encoding="utf-8")
    demo_log = (REPO / "presets" / "demo" / IMAGE_JOB.log).read_text(encoding="utf-8")
    moved = re.sub(
        r"\b(\d+)/3000\b", lambda m: f"{int(m[1]) + 610 if int(m[1]) else 0}/3000", demo_log
    )
    log = root / "flux_example.log"
    log.write_text(moved.replace("flux_portrait_lora", "portrait_flux_v2"), encoding="utf-8")
    return config, log


@dataclass(frozen=True)
class OnScreen:
    """The review as the user saw it before Save: its headline, bar and diff, and the value
    it rendered."""

    headline: str
    bar: str
    diff: str
    review: Review


async def review_with(pilot: Pilot[int], fix: str) -> OnScreen:
    """From launch: the moment as the log says, Ctrl+S on the first step, then ``fix``
    picked on the review with a click, as a user picks it; what the review shows."""
    await wait_for_state(pilot)
    await press(pilot, "enter", "enter", "ctrl+s")
    await wait_for_screen(pilot, "ReviewScreen")
    screen = pilot.app.screen
    assert isinstance(screen, ReviewScreen)
    if not screen.query_one(f"#fix-{fix}", RadioButton).value:
        await pilot.click(f"#fix-{fix}")
        await settle(pilot)
    assert screen.query_one(f"#fix-{fix}", RadioButton).value
    assert screen.shown is not None and screen.shown.fix == fix
    return OnScreen(
        headline=screen_text(pilot, "#summary").split(". ")[0],
        bar=str(screen.query_one("#memory", MemoryBar).render()),
        diff=str(screen.query_one("#diff", DiffView).render()),
        review=screen.shown,
    )


async def save(pilot: Pilot[int]) -> None:
    """Save from the review, to the destination it shows."""
    await press(pilot, "enter")
    await wait_for_screen(pilot, "ResultScreen")


def changed_lines(diff: str) -> list[str]:
    """The changed lines of a unified diff (its ``-`` and ``+`` lines, not the headers)."""
    return [
        line
        for line in diff.splitlines()
        if line[:1] in ("+", "-") and not line.startswith(("---", "+++"))
    ]


def assert_saved_as_shown(pilot: Pilot[int], seen: OnScreen, source: str, saved: str) -> None:
    """The saved text differs from the source in exactly the lines the review's diff showed
    (besides the comment a YAML file starts with, naming its change log); the headline counts
    the saved edit's fields and the bar is its peak."""
    body = saved.removeprefix(f"# {HEADER}\n")
    assert body == seen.review.ready.after.text
    expected = difflib.unified_diff(source.splitlines(), body.splitlines(), lineterm="")
    assert changed_lines(seen.diff) == changed_lines("\n".join(expected))
    count = len(seen.review.ready.entries)
    words = f"{count} field changes" if count == 1 else f"{count} fields change"
    assert seen.headline.startswith(words)
    peak = memory_peak(wizard(pilot).require_state(), seen.review.choices)
    assert peak is not None and peak.words() in seen.bar


#: The demo image job after Enter, Enter, Ctrl+S on its first step (checkpointing): each fix
#: as its headline reads.
DEMO = {
    "just_enough": "3 fields change (Gradient checkpointing on, Batch size to 1)",
    "safe": (
        "4 fields change (Gradient checkpointing on, Batch size to 1, Drop the biggest resolution)"
    ),
}


@pytest.mark.parametrize("fix", list(DEMO))
async def test_the_demo_saves_the_fix_its_review_shows(tmp_path: Path, fix: str) -> None:
    folder = demo_folder(tmp_path)
    app = demo_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        seen = await review_with(pilot, fix)
        assert seen.headline == DEMO[fix]
        await save(pilot)
        source = (folder / IMAGE_JOB.config).read_text(encoding="utf-8")
        saved = (folder / "flux_portrait_lora.oomfix.yaml").read_text(encoding="utf-8")
        assert_saved_as_shown(pilot, seen, source, saved)


#: AI Toolkit's FLUX example dying now and then, after Ctrl+S on its first step (the biggest
#: resolution, which "just enough" leaves on): each fix as its headline reads.
FLUX = {
    "just_enough": "1 field changes (Cached text embeddings)",
    "safe": "2 fields change (Drop the biggest resolution, Cached text embeddings)",
}


@pytest.mark.parametrize("fix", list(FLUX))
async def test_the_flux_example_saves_the_fix_its_review_shows(tmp_path: Path, fix: str) -> None:
    config, log = flux_example_job(tmp_path)
    app = create_app(config, log=log)
    async with app.run_test(size=SIZE) as pilot:
        seen = await review_with(pilot, fix)
        assert wizard(pilot).require_state().moment == "intermittent"
        assert seen.headline == FLUX[fix]
        await save(pilot)
        saved = (tmp_path / "flux_example.oomfix.yaml").read_text(encoding="utf-8")
        assert_saved_as_shown(pilot, seen, config.read_text(encoding="utf-8"), saved)


async def test_a_web_ui_job_saves_the_fix_its_review_shows(tmp_path: Path) -> None:
    """The same for a job of AI Toolkit's web UI, saved into its own row: the "safe" set."""
    db = ui_jobs_db(tmp_path)
    before = job_row(db, UI_JOB)
    assert before is not None
    app = create_app(db=db)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_jobs(pilot)
        await press(pilot, "enter")
        seen = await review_with(pilot, "safe")
        assert seen.headline == (
            "5 fields change (Gradient checkpointing on, Batch size to 1, "
            "Drop the biggest resolution, Cached text embeddings)"
        )
        await save(pilot)
        after = job_row(db, UI_JOB)
        assert after is not None
        # The row's config is one line of JSON: the review lists it field by field.
        assert after["job_config"] == seen.review.ready.after.text
        assert json.loads(after["job_config"]) == apply_changes(
            json.loads(before["job_config"]),
            [{"path": e.path, "after": e.after} for e in seen.review.ready.entries],
        )
        for entry in seen.review.ready.entries:
            assert f"+ {entry.path}: " in seen.diff
        peak = memory_peak(wizard(pilot).require_state(), seen.review.choices)
        assert peak is not None and peak.words() in seen.bar
        log = json.loads(load_job(db, UI_JOB).changelog_path.read_text(encoding="utf-8"))
        assert {c["path"] for c in log["changes"]} == {e.path for e in seen.review.ready.entries}
