"""What ``watch`` reads of the card while it follows a run is a point of the one calibration:
kept in the change log of a config oom-wizard saved, phase by phase, and used and said by
``fit`` and ``plan`` of that job and of the configs saved from it; not kept (and said so) for
a config oom-wizard never saved.

The run is the fake trainer's (a real child writing AI Toolkit's log shapes); its log is fed
to the live reader a line at a time on an injected clock, and a fake ``nvidia-smi`` shows
what the card holds in each phase, as the live screen reads it on each phase change.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from oom_wizard.application.attempts import describe_record
from oom_wizard.application.follow import WatchTarget, watch_db_target
from oom_wizard.application.watching import Readings, keep_readings, look_at_machine
from oom_wizard.logs.tail import SETTLE_S, LiveJob, LiveStatus
from oom_wizard.storage.changelog import (
    AttemptRecord,
    changelog_path_for,
    read_changelog,
)
from tests.support.aitk_db import add_job, make_db
from tests.support.autopilot_support import DEMO, FAKE
from tests.support.plan_support import cli

#: What the fake card holds in each phase (MiB of 24576): 9.0, 12.5, 17.8 and 15.0 GiB.
HELD_MIB = {"load": 9216, "baseline_sample": 12800, "training": 18227, "sample": 15360}


def fake_card(folder: Path, total_mib: int = 24576) -> tuple[str, Path]:
    """A fake ``nvidia-smi`` showing one card of ``total_mib`` whose use is the file's figure
    (MiB); the PATH that finds it, and the file."""
    held = folder / "held_mib"
    held.write_text("0")
    bin_dir = folder / f"bin{total_mib}"
    bin_dir.mkdir()
    script = bin_dir / "nvidia-smi"
    script.write_text(
        '#!/bin/sh\ncase "$1" in --query-gpu=*) '
        f'used=$(cat "{held}"); echo "0, Fake RTX, {total_mib}, $used, $(({total_mib} - used))";; '
        "esac\n"
    )
    script.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ['PATH']}", held


def train(config: Path, card_gb: int) -> bytes:
    """The fake trainer's log of a run of ``config`` on a card of ``card_gb`` (a real child)."""
    done = subprocess.run(
        [sys.executable, str(FAKE), str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "FAKE_VRAM_GB": str(card_gb)},
        cwd=config.parent,
        check=False,
        timeout=60,
    )
    return done.stdout


def saved_job(folder: Path) -> tuple[Path, Path]:
    """The FLUX demo (30 steps, a sample every 10) and the fix oom-wizard saved from its crash
    on a 24 GiB card: the source and the saved config."""
    tree = yaml.safe_load((DEMO / "flux_portrait_lora.yaml").read_text(encoding="utf-8"))
    process = tree["config"]["process"][0]
    process["train"]["steps"] = 30
    process["sample"]["sample_every"] = 10
    process["save"]["save_every"] = 10
    source = folder / "portrait.yaml"
    source.write_text(yaml.safe_dump(tree, sort_keys=False), encoding="utf-8")
    crash = folder / "crash.log"
    crash.write_bytes(train(source, 24))
    status, _out, err = cli("apply", source, "--log", crash, "--no-probe")
    assert status in (0, 3, 4), err
    return source, folder / "portrait.oomfix.yaml"


def watch(log: Path, text: bytes, held: Path) -> tuple[Readings, LiveStatus]:
    """Follow ``log`` while ``text`` is written to it a line at a time, reading the card on
    every phase change as the live screen does; the readings and the last status."""
    now = [0.0]
    live = LiveJob(log, clock=lambda: now[0])
    readings = Readings()
    status = live.poll().status
    for line in text.splitlines(keepends=True):
        with log.open("ab") as out:
            out.write(line)
        now[0] += 0.01
        status = live.poll().status
        phase = readings.phase
        readings = readings.saw(status)
        if readings.phase is not None and readings.phase != phase:
            held.write_text(str(HELD_MIB[readings.phase]))
            readings = readings.read(look_at_machine())
    now[0] += SETTLE_S + 1
    status = live.poll().status
    return readings.saw(status), status


def test_watchs_readings_are_kept_then_fit_and_plan_say_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _source, saved = saved_job(tmp_path)
    path, held = fake_card(tmp_path)
    monkeypatch.setenv("PATH", path)
    log = tmp_path / "watched.log"
    readings, status = watch(log, train(saved, 80), held)
    assert status.ended and not status.crashed
    assert set(readings.through) == {"load", "baseline_sample", "training", "sample"}

    line = keep_readings(WatchTarget(log, saved, "portrait"), readings, status)
    changelog = changelog_path_for(saved)
    assert readings.first_at is not None
    assert line == (
        "nvidia-smi read 17.8 GiB in the training step, 9.0 GiB in the loading, 12.5 GiB in "
        "the first sample, 15.0 GiB in the periodic sample; kept in "
        f"{changelog}: fit and plan of this job, and of the configs saved from it on this "
        f"card, are weighed by 17.8 GiB measured on your card on {readings.first_at[:10]}."
    )
    (attempt,) = read_changelog(changelog).attempts
    assert attempt.watched and attempt.outcome == "finished"
    assert (attempt.peak_gib, attempt.peak_phase, attempt.card_gib) == (17.8, "training", 24.0)
    assert attempt.peaks_gib == {
        "load": 9.0,
        "baseline_sample": 12.5,
        "training": 17.8,
        "sample": 15.0,
    }
    # history: every phase read, against what the model said of the config before
    told = describe_record(attempt)
    assert "a run followed by watch · finished (30 steps)" in told
    assert "training step: estimated " in told and "read 17.8 GiB (" in told
    assert "loading: estimated " in told and "read 9.0 GiB (" in told

    status_history, out, err = cli("history", saved)
    assert status_history == 0, err
    assert "Attempts (oom-wizard run and watch)" in out and told in out

    monkeypatch.setenv("PATH", os.defpath)  # no nvidia-smi now: --gpu names the card
    day = attempt.at[:10]
    note = (
        f"Measured on your card on {day}: 17.8 GiB in the training step (attempt 1, read by "
        "watch from nvidia-smi)."
    )
    status_fit, text, err = cli("fit", saved, "--gpu", "24", "--no-probe")
    assert status_fit in (0, 3, 4), err
    assert note in text
    status_fit, out, err = cli("fit", saved, "--gpu", "24", "--no-probe", "--json")
    found = json.loads(out)
    assert found["calibrated_by"]["measured_gib"] == 17.8
    assert found["calibrated_by"]["measured_at"] == attempt.at
    band = found["phases"]["training"]
    assert (band["low"] + band["high"]) / 2 == pytest.approx(17.8, abs=0.15)
    status_plan, out, err = cli("plan", saved, "--no-probe", "--json")
    assert status_plan == 0, err
    today = json.loads(out)["estimate"]["gib"]["before"]["training"]
    assert (today["low"], today["high"]) == (band["low"], band["high"])

    # a config saved from it (a scale-up) on the same card rests on the same point
    status_up, _out, err = cli("scale-up", saved, "-o", tmp_path / "next.yaml")
    assert status_up == 0, err
    status_fit, text, err = cli("fit", tmp_path / "next.yaml", "--gpu", "24", "--no-probe")
    assert f"Measured on your card on {day}: 17.8 GiB in the training step (attempt 1" in text
    # on another card (nvidia-smi shows a 48 GiB one), the reading says nothing
    monkeypatch.setenv("PATH", fake_card(tmp_path, 49152)[0])
    status_fit, text, err = cli("fit", saved)
    assert status_fit in (0, 3, 4), err
    assert "48.0 GiB" in text and "Measured on your card" not in text


def test_readings_of_a_config_oom_wizard_never_saved_are_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, _saved = saved_job(tmp_path)
    path, held = fake_card(tmp_path)
    monkeypatch.setenv("PATH", path)
    log = tmp_path / "watched.log"
    readings, status = watch(log, train(source, 80), held)
    before = sorted(tmp_path.iterdir())

    line = keep_readings(WatchTarget(log, source, "portrait"), readings, status)
    assert line is not None
    assert line.startswith("nvidia-smi read 17.8 GiB in the training step")
    assert line.endswith(
        f"not kept: {source} has no change log of oom-wizard's (only a config oom-wizard "
        "saved has one; 'oom-wizard run' keeps its readings with the next fix it saves)."
    )
    assert sorted(tmp_path.iterdir()) == before  # nothing written
    alone = keep_readings(WatchTarget(log, None, "watched"), readings, status)
    assert alone is not None and alone.endswith(
        "not kept: there is no config beside this log to keep them for."
    )


def test_a_crashed_phase_is_no_point_and_a_training_step_left_behind_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Readings in the phase a run crashed in are below what it needed, whatever steps of it
    ran before (PyTorch's message is that phase's figure); a run still training when watch
    leaves went through its training step once steps went by while it was read."""
    _source, saved = saved_job(tmp_path)
    path, held = fake_card(tmp_path)
    monkeypatch.setenv("PATH", path)
    changelog = changelog_path_for(saved)
    log = tmp_path / "crashed.log"
    crashed, status = watch(log, (tmp_path / "crash.log").read_bytes(), held)
    assert status.crashed and status.step == 3  # three steps ran before the crash
    line = keep_readings(WatchTarget(log, saved, "portrait"), crashed, status)
    assert line is not None and f"kept in {changelog}" in line
    last = read_changelog(changelog).attempts[-1]
    assert (last.outcome, last.peak_phase, last.peak_gib) == ("crashed", "baseline_sample", 12.5)
    assert last.peaks_gib is not None and last.peaks_gib["training"] == 17.8

    text = train(saved, 80)
    cut = text.index(b"| 5/30 [")  # watch left while it trained its sixth step
    log = tmp_path / "running.log"
    running, status = watch(log, text[:cut], held)
    assert not status.ended and status.phase == "training"
    assert keep_readings(WatchTarget(log, saved, "portrait"), running, status) is not None
    last = read_changelog(changelog).attempts[-1]
    assert (last.outcome, last.peak_phase, last.peak_gib) == ("running", "training", 17.8)
    assert "still running at step 4 in training when watch left it" in describe_record(last)


def test_history_says_estimate_against_measured_for_every_attempt() -> None:
    """An attempt recorded without an estimate says so beside what was measured; one whose
    config the model does not estimate says why."""
    bare = AttemptRecord(
        at="2026-12-07T10:00:00+00:00",
        config="job.yaml",
        outcome="finished",
        step=30,
        peak_gib=17.8,
        card_gib=24.0,
    )
    assert describe_record(bare).endswith(
        " · no estimate was recorded before it ran · 17.8 of 24.0 GiB at most"
    )
    unknown = bare.model_copy(update={"estimate": {"not_estimated": "no counts for this arch"}})
    assert " · not estimated (no counts for this arch) · 17.8 of 24.0" in describe_record(unknown)


def test_the_watch_command_prints_what_became_of_the_readings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``oom-wizard watch`` keeps the readings the live screen leaves with, and says so (the
    screen itself stands aside: it needs a terminal, and its own tests run it)."""
    import oom_wizard.commands.watch as command
    import oom_wizard.screens.watch as screen

    _source, saved = saved_job(tmp_path)
    path, held = fake_card(tmp_path)
    monkeypatch.setenv("PATH", path)
    log = tmp_path / "watched.log"
    readings, status = watch(log, train(saved, 80), held)

    class LiveScreen:
        def __init__(self, target: WatchTarget, **_options: object) -> None:
            assert (target.config, target.log) == (saved, log)

        def run(self) -> screen.WatchResult:
            return screen.WatchResult(False, None, readings, status)

    monkeypatch.setattr(screen, "WatchApp", LiveScreen)
    monkeypatch.setattr(command, "need_terminal", lambda *_args: None)
    code, out, err = cli("watch", saved, "--log", log)
    assert code == 0, err
    assert out.startswith("nvidia-smi read 17.8 GiB in the training step")
    assert f"kept in {changelog_path_for(saved)}" in out
    assert read_changelog(changelog_path_for(saved)).attempts[-1].watched


def test_a_web_ui_jobs_readings_go_into_its_change_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A web-UI job oom-wizard saved in place: watch keeps its readings in the job's change
    log, and fit --db on the job says them."""
    tree = yaml.safe_load((DEMO / "flux_portrait_lora.yaml").read_text(encoding="utf-8"))
    tree["config"]["name"] = "portrait"
    process = tree["config"]["process"][0]
    process["train"].update({"steps": 30, "lr": 1e-4})
    process["sample"]["sample_every"] = 10
    process["training_folder"] = str(tmp_path / "output")
    db = make_db(tmp_path / "aitk_db.db")
    add_job(db, "portrait", config=tree, step=3, info="CUDA out of memory.")
    folder = tmp_path / "output" / "portrait"
    folder.mkdir(parents=True)
    config = tmp_path / "portrait.yaml"
    config.write_text(yaml.safe_dump(tree, sort_keys=False), encoding="utf-8")
    crash = folder / "log.txt"
    crash.write_bytes(train(config, 24))
    crashed = time.time() - 600  # the crash came before the fix
    os.utime(crash, (crashed, crashed))
    job = ("--db", db, "--job", "portrait")
    status, out, err = cli("apply", *job, "--in-place", "--no-probe")
    assert status in (0, 3, 4), err
    changelog = Path(next(ln for ln in out.splitlines() if ln.startswith("Change log "))[11:])

    path, held = fake_card(tmp_path)
    monkeypatch.setenv("PATH", path)
    log = tmp_path / "watched.log"  # the retry's log (the fake trains the job's shape)
    readings, status_log = watch(log, train(config, 80), held)
    target = watch_db_target(db, "portrait", log)
    line = keep_readings(target, readings, status_log)
    assert line is not None and f"kept in {changelog}" in line, line
    assert read_changelog(changelog).attempts[-1].peak_gib == 17.8

    monkeypatch.setenv("PATH", os.defpath)
    status, text, err = cli("fit", *job, "--gpu", "24", "--no-probe")
    assert status in (0, 3, 4), err
    assert "Measured on your card on " in text and "17.8 GiB in the training step" in text
