"""End to end in a real terminal: tmux runs ``oom-wizard demo`` and Enter accepts every default."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

TMUX = shutil.which("tmux")
WIZARD = Path(sys.executable).with_name("oom-wizard")

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(TMUX is None, reason="tmux is not installed"),
    pytest.mark.skipif(not WIZARD.exists(), reason="the oom-wizard script is not installed"),
]

#: What each stage shows, in the order Enter walks through them.
STAGES = [
    "Read. Enter: when did it crash?",
    "When did it crash?",
    "Step 1 of",
    "Review and save",
    "python run.py",
]


def tmux(*args: str) -> str:
    """Run one tmux command; its output."""
    assert TMUX is not None
    done = subprocess.run([TMUX, *args], capture_output=True, text=True, check=True)
    return done.stdout


@pytest.fixture
def session(tmp_path: Path) -> Iterator[str]:
    """A detached 80x24 tmux session running ``oom-wizard demo`` in a fresh folder."""
    name = f"oomwiz-{uuid.uuid4().hex[:8]}"
    tmux(
        "new-session",
        "-d",
        "-s",
        name,
        "-x",
        "80",
        "-y",
        "24",
        "-c",
        str(tmp_path),
        f"{WIZARD} demo; sleep 30",
    )
    try:
        yield name
    finally:
        tmux("kill-session", "-t", name)


def wait_for(name: str, text: str, timeout: float = 20.0) -> str:
    """Capture the pane until it shows ``text``."""
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = tmux("capture-pane", "-p", "-t", name)
        if text in screen:
            return screen
        time.sleep(0.2)
    raise AssertionError(f"{text!r} never appeared; the pane shows:\n{screen}")


def test_demo_through_every_default_in_tmux(session: str, tmp_path: Path) -> None:
    wait_for(session, STAGES[0])
    presses = 0
    for stage in STAGES[1:]:
        while stage not in tmux("capture-pane", "-p", "-t", session):
            tmux("send-keys", "-t", session, "Enter")
            presses += 1
            assert presses <= 8, f"{stage!r} not reached in 8 presses"
            time.sleep(0.6)
        wait_for(session, stage)
    demo = tmp_path / "oom-wizard-demo"
    assert (demo / "flux_portrait_lora.oomfix.yaml").is_file()
    assert (demo / "flux_portrait_lora.oomfix.changelog.json").is_file()
    tmux("send-keys", "-t", session, "Enter")
    # The app is closed: the terminal keeps the summary, the run command with its log.
    wait_for(session, "If it runs out of memory again")
    screen = tmux("capture-pane", "-p", "-J", "-t", session)  # -J: wrapped lines joined
    assert "oom-wizard saved a new config (the original is unchanged)" in screen
    log = demo.resolve() / "flux_portrait_lora.oomfix.log.txt"
    assert (
        f"  python run.py {(demo / 'flux_portrait_lora.oomfix.yaml').resolve()} -l {log}" in screen
    )
