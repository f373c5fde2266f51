"""Scenarios for the autopilot against the fake trainer, shared by the tests and the bench table.

Each scenario is a real AI Toolkit config shape (the shipped demo configs, with a few fields
changed the way users set them), a card size and the fake trainer's other knobs. ``play``
runs ``oom_wizard.application.autopilot`` on it with real child processes of
``tests/support/fake_trainer.py``.
"""

from __future__ import annotations

import dataclasses
import io
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from oom_wizard.application.autopilot import Outcome, Settings, autopilot
from oom_wizard.application.running import (
    MEASURE_S,
    TrainerEnd,
    run_trainer,
    trainer_argv,
)
from oom_wizard.cli import main

FAKE = Path(__file__).with_name("fake_trainer.py")
DEMO = Path(__file__).resolve().parents[2] / "presets" / "demo"
FAKE_COMMAND = [sys.executable, str(FAKE), "{config}"]
WAIT_S = 60.0
"""How long a test waits for a child to show something: generous, because a loaded two-core
machine starts Python slowly; a test that passes waits only as long as the child takes."""


def wait_for(path: Path, timeout: float = WAIT_S) -> str:
    """The text of ``path`` once it is a complete line (a child's pid file)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and (text := path.read_text()).endswith("\n"):
            return text
        time.sleep(0.025)
    raise AssertionError(f"{path} never appeared")


def wait_for_bytes(path: Path, text: bytes, timeout: float = WAIT_S) -> None:
    """Return once ``text`` is in ``path`` (a log the child writes)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_bytes():
            return
        time.sleep(0.025)
    raise AssertionError(f"{text!r} never in {path}")


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rfind(")") + 2] not in "ZX"


@dataclass(frozen=True)
class Scenario:
    """A starting config, the card, and what the fake trainer is told."""

    name: str
    base: str
    card_gb: float
    edits: Mapping[str, Any] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    scale_up_after: bool = False


def set_path(tree: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``process.0.train.batch_size``-style paths under ``config``."""
    node: Any = tree["config"]
    parts = dotted.split(".")
    for part in parts[:-1]:
        node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
    last = parts[-1]
    if value is None:
        node.pop(last, None)
    else:
        node[last] = value


def write_config(folder: Path, scenario: Scenario) -> Path:
    """The scenario's config as a YAML file in ``folder`` (the demo's text, edited)."""
    tree = yaml.safe_load((DEMO / scenario.base).read_text(encoding="utf-8"))
    for dotted, value in scenario.edits.items():
        set_path(tree, dotted, value)
    path = folder / f"{scenario.name}.yaml"
    if scenario.edits:
        path.write_text(yaml.safe_dump(tree, sort_keys=False), encoding="utf-8")
    else:
        path.write_text((DEMO / scenario.base).read_text(encoding="utf-8"), encoding="utf-8")
    return path


def fake_runner(
    card_gb: float,
    env: Mapping[str, str] | None = None,
    *,
    grace_s: float = 2.0,
    measure_s: float = MEASURE_S,
):
    """A runner that starts the fake trainer as a real child on a card of ``card_gb``
    (``measure_s``: how often the card's memory is read)."""
    full_env = {**os.environ, "FAKE_VRAM_GB": str(card_gb), **(env or {})}

    def runner(config: Path, log: Path, extra: Mapping[str, str] | None = None) -> TrainerEnd:
        argv = trainer_argv(FAKE_COMMAND, config)
        given = {**full_env, **(extra or {})}
        return run_trainer(argv, log, env=given, grace_s=grace_s, measure_s=measure_s)

    return runner


def play(folder: Path, scenario: Scenario, settings: Settings | None = None) -> Outcome:
    """Run the autopilot on the scenario; with ``scale_up_after`` go upward after it."""
    config = write_config(folder, scenario)
    runner = fake_runner(scenario.card_gb, scenario.env)
    outcome = autopilot(config, runner, settings=settings)
    if scenario.scale_up_after and outcome.status == "finished":
        up = autopilot(outcome.config, runner, settings=Settings(scale_up=True))
        later = tuple(
            dataclasses.replace(a, number=a.number + len(outcome.attempts)) for a in up.attempts
        )
        return Outcome(
            up.status,
            up.reason,
            (*outcome.attempts, *later),
            up.config,
            (*outcome.saved, *up.saved),
        )
    return outcome


FLUX = "flux_portrait_lora.yaml"
WAN = "wan_dance_lora.yaml"

SCENARIOS: tuple[Scenario, ...] = (
    Scenario("image-early-steps", FLUX, 24),
    Scenario(
        "image-loading-baseline-sample",
        FLUX,
        16,
        {"process.0.sample.width": 1536, "process.0.sample.height": 1536},
    ),
    Scenario(
        "image-sampling",
        FLUX,
        24,
        {
            "process.0.train.batch_size": 1,
            "process.0.train.gradient_checkpointing": True,
            "process.0.train.skip_first_sample": True,
            "process.0.sample.width": 1536,
            "process.0.sample.height": 1536,
            "process.0.train.cache_text_embeddings": False,
        },
    ),
    Scenario(
        "image-intermittent",
        FLUX,
        24,
        {
            "process.0.train.batch_size": 2,
            "process.0.train.gradient_checkpointing": True,
            "process.0.datasets.0.resolution": [512, 768, 1024, 1536],
        },
        {"FAKE_BIG_BUCKET_FROM": "40"},
    ),
    Scenario("video-loading-baseline-sample", WAN, 24),
    Scenario("video-early-steps", WAN, 24, {"process.0.train.cache_text_embeddings": True}),
    Scenario(
        "video-sampling",
        WAN,
        32,
        {
            "process.0.train.skip_first_sample": True,
            "process.0.datasets.0.num_frames": 41,
            "process.0.sample.num_frames": 81,
        },
    ),
    Scenario("image-environment", FLUX, 24, {}, {"FAKE_OTHER_GB": "14"}),
    Scenario(
        "video-host-oom-kill",
        WAN,
        24,
        {
            "process.0.model.layer_offloading": True,
            "process.0.model.layer_offloading_transformer_percent": 0.9,
            "process.0.datasets.0.cache_latents_to_disk": False,
            "process.0.datasets.0.cache_latents": True,
        },
        {"FAKE_HOST_RAM_GB": "16"},
    ),
    Scenario("image-ladder-exhausted", FLUX, 8),
    Scenario(
        "image-already-minimal",
        FLUX,
        6,
        {
            "process.0.train.batch_size": 1,
            "process.0.train.gradient_checkpointing": True,
            "process.0.datasets.0.resolution": [512],
            "process.0.train.disable_sampling": True,
            "process.0.train.skip_first_sample": True,
            "process.0.model.qtype": "uint4",
            "process.0.train.steps": 100,
        },
    ),
    Scenario("image-scale-up-crash", FLUX, 24, scale_up_after=True),
)


def table_rows(outcome: Outcome, scenario: Scenario) -> list[str]:
    """One line per attempt: config, how it ended, what the next config changed."""
    rows = []
    for attempt in outcome.attempts:
        changed = "; ".join(line.replace("config.process[0].", "") for line in attempt.changed)
        rows.append(
            f"| {scenario.name} | {scenario.card_gb:g} GB | {attempt.number} | "
            f"{attempt.config.name} ({attempt.kind}) | {attempt.describe()} | {changed or '-'} |"
        )
    return rows


TAG = "OOM_WIZARD_BENCH_TAG"


def tagged(tag: str) -> list[int]:
    """Live processes (not zombies) whose environment carries ``TAG=tag``: what a bench's
    trainer started, ``run`` and its watchdog excepted (bench_run_kill, bench_run_helper)."""
    found = []
    wanted = f"{TAG}={tag}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if wanted not in environ.split(b"\0") or stat[stat.rfind(")") + 2] in "ZX":
            continue
        if b"oom-wizard" in cmdline or b"-I\0-S\0-c" in cmdline:
            continue  # run itself (killed) or its watchdog: not a trainer process
        found.append(int(entry.name))
    return found


@dataclass(frozen=True)
class Ran:
    """What ``oom-wizard`` returned and printed."""

    returncode: int
    stdout: str
    stderr: str


def run_here(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    folder: Path,
    args: list[str],
    env: Mapping[str, str] | None = None,
) -> Ran:
    """``oom-wizard ARGS`` in this process: ``oom_wizard.cli.main``, which the script returns
    from, run in ``folder`` with ``env`` added and an empty stdin (no terminal to ask in).
    A trainer it starts is still a real child. For what only the real process shows (its
    signals, its end by a kill), start the script itself."""
    monkeypatch.chdir(folder)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    capsys.readouterr()
    status = main(args)
    out, err = capsys.readouterr()
    return Ran(status, out, err)
