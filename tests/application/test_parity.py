"""Parity: for the same job and answers, the command line and the app agree.

Every case of :data:`tests.support.parity_support.CASES` (a config file with its log, a job folder,
a web-UI job; each moment with both kinds, and both demo jobs left to their logs) goes
through ``plan`` + ``apply`` and through the app, and the moment, the kind, the plan, the
saved bytes and the change log must be equal. The tests after them each pin one way the
two front ends used to disagree (issue 10): the model kind of an unknown arch, a broken
change log, the GPU probe, the steps recorded, the spelling of values, the two "save now"
paths, and the next scale-up.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from textual.widgets import Static

from oom_wizard.application.demo import IMAGE_JOB
from oom_wizard.screens.app import create_app
from oom_wizard.screens.result import ResultScreen
from oom_wizard.screens.review import ReviewScreen
from oom_wizard.screens.step import StepScreen
from oom_wizard.screens.toggles import Tick
from oom_wizard.storage.changelog import changelog_path_for
from tests.support.app_support import (
    accept_steps,
    demo_folder,
    save_from_review,
    wait_for_error,
    wait_for_state,
)
from tests.support.parity_support import (
    CASES,
    SIZE,
    Case,
    build,
    compare,
    normal,
    on_screen,
    through_app,
    through_cli,
)
from tests.support.plan_support import cli, job, write_job


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
async def test_cli_and_app_agree(tmp_path: Path, case: Case) -> None:
    cli_side = through_cli(build(tmp_path / "cli", case), case)
    app_side = await through_app(build(tmp_path / "app", case), case)

    checks = compare(cli_side, app_side)

    assert checks == dict.fromkeys(checks, True), (cli_side, app_side)
    if case.moment == "environment":
        assert cli_side.saved is None
    else:
        assert cli_side.saved is not None and cli_side.changelog is not None


# --- one test per way the front ends used to disagree --------------------------------------------


def unknown_arch_video_job(root: Path) -> Path:
    """A config whose arch nobody knows, with a video model path and still images."""
    tree = job(
        arch="nobody_knows",
        model={"name_or_path": "Wan-AI/Wan2.1-T2V-14B-Diffusers"},
        datasets=[{"resolution": [512, 768]}],
        train={"batch_size": 2, "steps": 2000},
    )
    return write_job(root / "mystery.yaml", tree)


async def test_the_model_kind_of_an_unknown_arch_is_one_rule(tmp_path: Path) -> None:
    config = unknown_arch_video_job(tmp_path)
    _, diagnosed, _ = cli("diagnose", config, "--json", "--no-probe")
    _, planned, _ = cli("plan", config, "--json", "--no-probe")
    app = create_app(config, probe=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        in_app = app.require_state().model_kind

    assert json.loads(diagnosed)["model_kind"] == "video"
    assert json.loads(planned)["model_kind"] == "video"
    assert in_app == "video"


async def test_a_broken_change_log_is_refused_the_same_way_everywhere(tmp_path: Path) -> None:
    config = write_job(tmp_path / "job.yaml", job())
    broken = changelog_path_for(config)
    broken.write_text('{"format": "oom-wizard-changelog/1", "runs": [\n', encoding="utf-8")
    lines = set()
    for command in ("diagnose", "plan", "apply"):
        status, out, err = cli(command, config, "--no-probe")
        assert (status, out) == (2, "")
        lines.add(err)
    app = create_app(config, probe=False)
    async with app.run_test(size=SIZE) as pilot:
        in_app = await wait_for_error(pilot)

    assert len(lines) == 1
    line = lines.pop().rstrip("\n")
    assert line.startswith(f"oom-wizard: error: {broken}:")
    assert in_app == line.removeprefix("oom-wizard: error: ")  # the app: the same line, bare
    assert broken.read_text(encoding="utf-8").endswith("[\n")


def busy_gpu(folder: Path) -> None:
    """An ``nvidia-smi`` first on PATH that shows another process holding most of the card."""
    folder.mkdir()
    script = folder / "nvidia-smi"
    script.write_text(
        '#!/bin/sh\ncase "$1" in\n'
        "  --query-gpu=*) echo '0, NVIDIA GeForce RTX 4090, 24564, 22000, 2564' ;;\n"
        "  --query-compute-apps=*) echo '4242, python3, 21500' ;;\nesac\n",
        encoding="utf-8",
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


async def app_moment(config: Path, log: Path, *, probe: bool) -> str:
    app = create_app(config, log=log, probe=probe)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        return app.require_state().moment


async def test_the_gpu_probe_is_honoured_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = demo_folder(tmp_path)
    config, log = folder / IMAGE_JOB.config, folder / IMAGE_JOB.log
    busy_gpu(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    moments: dict[str, set[str]] = {"probe": set(), "no probe": set()}
    for flags, key in (((), "probe"), (("--no-probe",), "no probe")):
        for command in ("diagnose", "plan"):
            status, out, err = cli(command, config, "--log", log, "--json", *flags)
            assert status == 0, err
            moments[key].add(json.loads(out)["moment"])
    moments["probe"].add(await app_moment(config, log, probe=True))
    moments["no probe"].add(await app_moment(config, log, probe=False))

    assert moments == {"probe": {"environment"}, "no probe": {"early_steps"}}


def default_steps(plan: dict[str, object]) -> list[str]:
    steps = plan["steps"]
    assert isinstance(steps, list)
    return [s["id"] for s in steps if s["default_on"] and not s["satisfied"]]


async def test_a_step_that_changes_nothing_is_not_recorded(tmp_path: Path) -> None:
    app_folder, cli_folder = demo_folder(tmp_path / "app"), demo_folder(tmp_path / "cli")
    # Without the log nothing sizes a "just enough" fix: the safe set, several steps, is the
    # default of both front ends.
    _, out, _ = cli("plan", cli_folder / IMAGE_JOB.config, "--json", "--no-probe")
    first, *rest = default_steps(json.loads(out))
    status, _, err = cli(
        "apply",
        cli_folder / IMAGE_JOB.config,
        "--steps",
        ",".join(rest),
        "--no-probe",
    )
    assert status == 0, err
    app = create_app(app_folder / IMAGE_JOB.config, probe=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        await pilot.press("enter", "enter")
        await on_screen(pilot, StepScreen)
        assert isinstance(app.screen, StepScreen) and app.screen.step.id == first
        # the step stays on, but its only field is switched off: it changes nothing
        for tick in app.screen.query(Tick):
            if tick.id != "step-on":
                tick.value = False
        await pilot.pause()
        await accept_steps(pilot)
        await save_from_review(pilot)

    stem = Path(IMAGE_JOB.config).stem
    logs = [
        normal(folder / f"{stem}.oomfix.changelog.json", folder)
        for folder in (cli_folder, app_folder)
    ]
    assert logs[0] == logs[1]
    assert logs[1]["runs"][0]["steps"] == rest
    assert (cli_folder / f"{stem}.oomfix.yaml").read_bytes() == (
        app_folder / f"{stem}.oomfix.yaml"
    ).read_bytes()


async def test_save_now_values_and_the_next_scale_up_agree(tmp_path: Path) -> None:
    """Ctrl+S and the palette's "review and save" on step 1 review the same changes; the
    saved file, the change lines and the next scale-up are those of ``apply --steps`` and
    ``history``."""
    app_folder, cli_folder = demo_folder(tmp_path / "app"), demo_folder(tmp_path / "cli")
    config, log = cli_folder / IMAGE_JOB.config, cli_folder / IMAGE_JOB.log
    _, out, _ = cli("plan", config, "--log", log, "--json", "--no-probe")
    defaults = default_steps(json.loads(out))
    status, applied, err = cli(
        "apply", config, "--log", log, "--steps", ",".join(defaults), "--no-probe"
    )
    assert status == 0, err
    stem = Path(IMAGE_JOB.config).stem
    _, history, _ = cli("history", cli_folder / f"{stem}.oomfix.yaml")

    app = create_app(app_folder / IMAGE_JOB.config, log=app_folder / IMAGE_JOB.log, probe=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        await pilot.press("enter", "enter")
        await on_screen(pilot, StepScreen)
        app.save_now()  # the palette's "review and save"
        await on_screen(pilot, ReviewScreen)
        assert isinstance(app.screen, ReviewScreen)
        from_palette = app.screen.ready
        await pilot.press("escape")
        await on_screen(pilot, StepScreen)
        await pilot.press("ctrl+s")
        await on_screen(pilot, ReviewScreen)
        assert isinstance(app.screen, ReviewScreen)
        from_ctrl_s = app.screen.ready
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await on_screen(pilot, ResultScreen)
        changes = str(app.screen.query_one("#changes", Static).render())
        later = str(app.screen.query_one("#later", Static).render())

    assert from_palette is not None and from_ctrl_s is not None
    assert from_palette.entries == from_ctrl_s.entries
    assert {entry.step for entry in from_ctrl_s.entries} == set(defaults)
    assert (cli_folder / f"{stem}.oomfix.yaml").read_bytes() == (
        app_folder / f"{stem}.oomfix.yaml"
    ).read_bytes()
    cli_lines = [
        line.strip()
        for line in applied.splitlines()
        if " → " in line and not line.startswith("Estimate:")  # the change lines only
    ]
    app_lines = [line.split("  (UI:")[0].strip() for line in changes.splitlines()]
    assert cli_lines == app_lines and cli_lines
    next_up = next(line for line in history.splitlines() if line.startswith("Next scale-up: "))
    title = next_up.removeprefix("Next scale-up: ").rsplit(" [", 1)[0]
    assert later.splitlines()[1].strip() == f"1. {title}"


async def test_memory_figures_are_spelled_alike(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    config, log = folder / IMAGE_JOB.config, folder / IMAGE_JOB.log
    status, report, err = cli("diagnose", config, "--log", log, "--no-probe")
    assert status == 0, err
    app = create_app(config, log=log, probe=False)
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_for_state(pilot)
        summary = str(app.screen.query_one("#summary", Static).render())

    lines = summary.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("GPU "))
    rows = [lines[first]]  # the GPU row, then its continuation rows (no label of their own)
    for line in lines[first + 1 :]:
        if not line.startswith(" " * 12):
            break
        rows.append(line)
    figures = [f for row in rows for f in row.removeprefix("GPU").strip().split(" · ")]
    flat = " ".join(report.split())
    assert "reserved unallocated 0.40 GiB" in figures
    assert all(figure in flat for figure in figures), (figures, flat)
