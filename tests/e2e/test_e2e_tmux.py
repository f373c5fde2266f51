"""End to end in a real terminal: tmux runs ``oom-wizard demo`` and Enter accepts every default."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.tmux_support import HOLD, WIZARD, Pane, in_a_real_terminal, terminal

#: What each stage shows, in the order Enter walks through them.
STAGES = [
    "Read. Enter: when did it crash?",
    "When did it crash?",
    "Step 1 of",
    "Review and save",
    "python run.py",
]


@pytest.fixture
def pane(tmp_path: Path) -> Iterator[Pane]:
    """An 80x24 terminal running ``oom-wizard demo`` in a fresh folder."""
    with terminal(f"{WIZARD} demo; {HOLD}", cwd=tmp_path, width=80, height=24) as pane:
        yield pane


@in_a_real_terminal
def test_demo_through_every_default_in_tmux(pane: Pane, tmp_path: Path) -> None:
    shown = pane.wait_for(STAGES[0])
    presses = 0
    for stage in STAGES[1:]:
        while stage not in shown:
            pane.send("Enter")
            presses += 1
            assert presses <= 8, f"{stage!r} not reached in 8 presses"
            # One press, one new screen, however slow: its title line (the second) is what
            # changes. A screen whose body outgrows the pane rewraps once its scrollbar shows,
            # which under load can come after the screen looked still; that is no new stage.
            shown = pane.wait_for_change(shown, top=2)
    demo = tmp_path / "oom-wizard-demo"
    assert (demo / "flux_portrait_lora.oomfix.yaml").is_file()
    assert (demo / "flux_portrait_lora.oomfix.changelog.json").is_file()
    pane.send("Enter")
    # The app is closed: the terminal keeps the summary, the run command with its log.
    pane.wait_for("If it runs out of memory again")
    screen = pane.screen(joined=True)
    assert "oom-wizard saved a new config (the original is unchanged)" in screen
    log = demo.resolve() / "flux_portrait_lora.oomfix.log.txt"
    assert (
        f"  python run.py {(demo / 'flux_portrait_lora.oomfix.yaml').resolve()} -l {log}" in screen
    )


@in_a_real_terminal
def test_an_emptied_save_as_is_refused_on_its_row_in_tmux(tmp_path: Path) -> None:
    """Issue 19, item 1: Tab into "Save as", Ctrl+U, Enter: no traceback, the reason on
    the row, the app still on the review, nothing written."""
    with terminal(f"{WIZARD} demo; echo EXIT=$?; {HOLD}", cwd=tmp_path) as pane:
        shown = pane.wait_for(STAGES[0])
        presses = 0
        while "Review and save" not in shown:
            pane.send("Enter")
            presses += 1
            assert presses <= 12, "the review was not reached in 12 presses"
            # Still for half a second: a screen that reflows once after its first paint is
            # not a new one.
            shown = pane.wait_for_change(shown, still_s=0.3)
        pane.send("Tab")
        pane.send("C-u")
        shown = pane.wait_for("✗ a file name is needed for the new config")
        pane.send("Enter")
        # Enter on a refused Save as: the review stays, the reason on the row. Keys are
        # handled in order: once the help that F1 opens after it has come and gone, the
        # Enter has been handled, however slow the machine.
        pane.send("F1")
        pane.wait_for("closes this help")
        pane.send("Escape")
        shown = pane.wait_until(lambda now: "closes this help" not in now, "the help stayed")
    assert "Traceback" not in shown and "EXIT=" not in shown
    assert "Review and save" in shown
    lines = shown.splitlines()
    row = next(i for i, line in enumerate(lines) if line.strip().startswith("Save as"))
    assert lines[row + 1].strip() == (
        "✗ a file name is needed for the new config; type a file name in Save as"
    )
    demo = tmp_path / "oom-wizard-demo"
    assert sorted(p.name for p in demo.iterdir()) == [
        "flux_portrait_lora.log",
        "flux_portrait_lora.yaml",
        "wan_dance_lora.log",
        "wan_dance_lora.yaml",
    ]
