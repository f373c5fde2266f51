"""The autopilot end to end against the fake trainer (real child processes, real files)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from oom_wizard.application.autopilot import Settings, autopilot
from oom_wizard.application.running import group_alive, stops_as_from_a_terminal
from oom_wizard.application.settling import WizardState
from oom_wizard.cli import main
from oom_wizard.formats.document import load_document
from oom_wizard.paths import parse_path
from oom_wizard.storage.changelog import ChangeLog, changelog_path_for, read_changelog
from tests.support.autopilot_support import (
    DEMO,
    FAKE,
    FAKE_COMMAND,
    FLUX,
    SCENARIOS,
    Scenario,
    fake_runner,
    pid_alive,
    play,
    run_here,
    wait_for,
    wait_for_bytes,
    write_config,
)
from tests.support.tmux_support import HOLD, WIZARD, in_a_real_terminal, terminal


def scenario(name: str) -> Scenario:
    return next(s for s in SCENARIOS if s.name == name)


def value(config: Path, dotted: str) -> object:
    return load_document(config).get(parse_path(dotted))


def test_early_steps_crash_on_24_gb_fits_after_one_roll_back_and_a_validation_run(
    tmp_path: Path,
) -> None:
    outcome = play(tmp_path, scenario("image-early-steps"))

    assert outcome.status == "finished" and outcome.exit_status == 0
    assert [(a.kind, a.outcome) for a in outcome.attempts] == [
        ("full", "crashed"),
        ("validation", "passed_validation"),
        ("full", "finished"),
    ]
    first = outcome.attempts[0]
    assert (first.moment, first.phase, first.step) == ("early_steps", "training", 3)
    validation = outcome.attempts[1].config
    # 100 steps (--validation-steps) would not reach the config's first save and sample
    # (save_every and sample_every are 250): the validation run goes one step past them.
    assert value(validation, "config.process[0].train.steps") == 251
    validation_log = outcome.attempts[1].log.read_text()
    assert "Saving at step 250" in validation_log
    periodic = validation_log.index("Saving at step 250")
    last_save = validation_log.index("flux_portrait_lora.safetensors")
    assert "Generating Samples" in validation_log[periodic:last_save]  # the sample after that save
    assert value(validation, "config.process[0].train.gradient_checkpointing") is True
    final = outcome.config
    assert value(final, "config.process[0].train.steps") == 3000
    assert value(final, "config.process[0].train.batch_size") == 1
    # The change log of the final config tells each attempt and each run of the tool.
    log = read_changelog(changelog_path_for(final))
    assert [run.direction for run in log.runs] == ["rollback", "scale_up"]
    assert [(a.config, a.kind, a.outcome) for a in log.attempts] == [
        (str(a.config), a.kind, a.outcome) for a in outcome.attempts
    ]
    assert log.attempts[0].step == 3 and log.attempts[0].moment == "early_steps"
    assert all(a.duration_s > 0 for a in log.attempts)
    # The source is never written.
    source = tmp_path / "image-early-steps.yaml"
    assert source.read_bytes() == (DEMO / FLUX).read_bytes()


@pytest.mark.parametrize(
    ("name", "off"),
    [("image-loading-baseline-sample", True), ("video-loading-baseline-sample", False)],
)
def test_before_a_full_run_without_samples_it_says_so(tmp_path: Path, name: str, off: bool) -> None:
    """The roll-back of a crash while loading switches samples off with the short validation
    run; the full run after it keeps them off, and run --auto says so before it starts
    (issue 38 item 7). A fix that keeps samples says nothing of the kind."""
    case = scenario(name)
    said: list[str] = []
    outcome = autopilot(
        write_config(tmp_path, case), fake_runner(case.card_gb, case.env), say=said.append
    )
    assert outcome.status == "finished"
    final = value(outcome.config, "config.process[0].train.disable_sampling") is True
    notes = [line for line in said if line.startswith("Note: samples stay off")]
    assert final is off and bool(notes) is off
    if off:  # said before the full run starts
        full = said.index(next(s for s in said if "full run of" in s and "oomfix" in s))
        assert said.index(notes[0]) < full


def test_no_config_is_launched_twice(tmp_path: Path) -> None:
    outcome = play(tmp_path, scenario("image-ladder-exhausted"))

    texts = [a.config.read_bytes() for a in outcome.attempts]
    assert len(set(texts)) == len(texts)
    assert outcome.status == "stopped" and outcome.exit_status == 2
    assert outcome.reason.startswith("Stopped: 5 roll-backs tried (--max-retries 5)")
    assert all(a.outcome == "crashed" for a in outcome.attempts)
    # The first roll-back lowers what crashed, the load (4-bit weights), not only the samples
    # and the buckets (issue 40): the next attempt loads and crashes in a training step.
    assert outcome.attempts[0].phase == "model_load"
    assert "uint4" in " ".join(outcome.attempts[1].changed)
    assert all(a.phase != "model_load" for a in outcome.attempts[1:])


def test_a_config_with_every_step_taken_stops_with_the_ladder_exhausted(tmp_path: Path) -> None:
    outcome = play(tmp_path, scenario("image-already-minimal"))

    assert outcome.exit_status == 2 and len(outcome.attempts) == 1
    assert outcome.reason.startswith(
        "Stopped: the roll-back ladder for loading is exhausted: every step is already in the "
        "config, and the config is not relaunched unchanged. No roll-back was tried. "
        "What is left: a card with more memory"
    )
    # the demo's transformer is quantized already: a lower qtype, not quantizing (issue 33)
    assert "a smaller model, or a lower qtype (model.qtype" in outcome.reason
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in outcome.reason
    assert outcome.saved == ()


def test_environment_verdict_stops_at_once_and_saves_nothing(tmp_path: Path) -> None:
    outcome = play(tmp_path, scenario("image-environment"))

    assert outcome.status == "stopped" and outcome.exit_status == 2
    assert len(outcome.attempts) == 1
    assert outcome.attempts[0].moment == "environment"
    assert "environment" in outcome.reason
    assert outcome.saved == ()
    assert not list(tmp_path.glob("*.oomfix*"))


def test_a_host_oom_kill_is_written_into_the_log_and_stops_the_loop(tmp_path: Path) -> None:
    outcome = play(tmp_path, scenario("video-host-oom-kill"))

    (attempt,) = outcome.attempts
    assert attempt.exit_code == -signal.SIGKILL
    assert (attempt.moment, attempt.phase) == ("environment", "cache_latents")
    assert outcome.exit_status == 2 and "OOM killer" in outcome.reason
    lines = attempt.log.read_text().splitlines()
    assert lines[-1] == "Job process terminated with signal SIGKILL."
    assert lines[-2].startswith("Caching latents to disk:  40%")


def test_max_retries_stops_the_loop(tmp_path: Path) -> None:
    outcome = play(tmp_path, scenario("image-ladder-exhausted"), Settings(max_retries=1))

    assert len(outcome.attempts) == 2
    assert outcome.exit_status == 2
    assert "--max-retries 1" in outcome.reason
    # The next step: what was tried, and what is left besides more roll-backs.
    tried = outcome.reason.split("Tried: ", 1)[1].split(". What is left: ", 1)[0]
    fix = [line for line in outcome.attempts[1].changed if ".train.steps:" not in line]
    assert fix and tried.split("; ") == fix  # the validation's step count is no roll-back
    assert "a higher --max-retries" in outcome.reason
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in outcome.reason


def test_a_no_to_the_question_stops_without_saving(tmp_path: Path) -> None:
    config = write_config(tmp_path, scenario("image-early-steps"))
    asked: list[tuple[str, ...]] = []

    def ask(state: WizardState, fix: Sequence[str]) -> bool:
        asked.append(tuple(fix))
        return False

    outcome = autopilot(config, fake_runner(24), ask=ask)

    assert outcome.exit_status == 2 and len(outcome.attempts) == 1
    assert any("gradient_checkpointing: false → true" in line for line in asked[0])
    assert not list(tmp_path.glob("*.oomfix*"))


def test_a_scale_up_that_crashes_is_rolled_back_to_the_stable_config(tmp_path: Path) -> None:
    outcome = play(tmp_path, scenario("image-scale-up-crash"))

    crashed = outcome.attempts[-1]
    assert crashed.outcome == "crashed"
    assert crashed.changed == ("config.process[0].train.gradient_checkpointing: true → false",)
    finished = [a for a in outcome.attempts if a.outcome == "finished"]
    stable = finished[-1].config
    assert outcome.exit_status == 0
    assert "rolled back" in outcome.reason
    for field in ("gradient_checkpointing", "batch_size", "steps"):
        path = f"config.process[0].train.{field}"
        assert value(outcome.config, path) == value(stable, path)
    runs = read_changelog(changelog_path_for(outcome.config)).runs
    assert [r.direction for r in runs][-2:] == ["scale_up", "rollback"]
    # the scale-up and its undo are saved as the command line and the app save a re-add:
    # the kind the roll-back confirmed, and the saved config's memory figure
    assert {r.model_kind for r in runs} == {"image"}
    assert all(r.memory is not None for r in runs[-2:])


def test_a_crashed_validation_run_is_validated_again_before_the_full_run(tmp_path: Path) -> None:
    outcome = play(tmp_path, scenario("video-early-steps"))

    kinds = [(a.kind, a.outcome) for a in outcome.attempts]
    assert kinds[-1] == ("full", "finished")
    assert ("validation", "crashed") in kinds
    # A full run happens only with the original step count.
    for attempt in outcome.attempts:
        steps = value(attempt.config, "config.process[0].train.steps")
        assert (steps == 2000) == (attempt.kind == "full")


def test_an_old_change_log_without_attempts_still_reads_and_keeps_its_shape() -> None:
    raw = {
        "format": "oom-wizard-changelog/1",
        "source": {"path": "a.yaml", "sha256": None},
        "output": {"path": "a.oomfix.yaml", "sha256": None},
        "runs": [],
        "changes": [],
    }
    log = ChangeLog.model_validate(raw)
    assert log.attempts == ()
    assert "attempts" not in json.loads(log.to_json())


# --- the command, and Ctrl-C ---------------------------------------------------------------------


def start_run(
    tmp_path: Path, env: dict[str, str], *extra: str
) -> tuple[subprocess.Popen[bytes], Path]:
    config = write_config(tmp_path, scenario("image-early-steps"))
    pidfile = tmp_path / "pids"
    full_env = {
        **os.environ,
        "FAKE_VRAM_GB": "24",
        "FAKE_PIDFILE": str(pidfile),
        **env,
    }
    proc = subprocess.Popen(
        [
            str(WIZARD),
            "run",
            str(config),
            "--auto",
            *extra,
            "--",
            sys.executable,
            str(FAKE),
            "{config}",
        ],
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=stops_as_from_a_terminal,
        cwd=tmp_path,
    )
    return proc, pidfile


@pytest.mark.skipif(not WIZARD.exists(), reason="the oom-wizard script is not installed")
@pytest.mark.parametrize(
    ("env", "grace"),
    [
        ({}, "5"),
        ({"FAKE_IGNORE_SIGINT": "1", "FAKE_IGNORE_SIGTERM": "1"}, "0.3"),
    ],
    ids=["stops-on-sigint", "needs-sigkill"],
)
def test_ctrl_c_stops_the_trainers_whole_group(
    tmp_path: Path, env: dict[str, str], grace: str
) -> None:
    proc, pidfile = start_run(
        tmp_path, {"FAKE_STALL_AT": "1", "FAKE_WORKER": "1", **env}, "--grace", grace
    )
    pid, pgid, worker = (int(x) for x in wait_for(pidfile).split())
    assert pgid == pid and pgid != os.getpgrp()
    assert group_alive(pgid) and pid_alive(worker)
    wait_for_bytes(tmp_path / "image-early-steps.run.log", b" 1/3000 [")  # it trains

    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)

    assert proc.returncode == 130, err
    assert not group_alive(pgid)
    assert not pid_alive(pid) and not pid_alive(worker)
    assert b"interrupted (Ctrl-C)" in out
    log = (tmp_path / "image-early-steps.run.log").read_text()
    # A trainer that heard SIGINT says so; one that had to be killed gets the epilogue line.
    assert "Job stopped" in log or "Job process terminated with signal SIGKILL." in log
    assert not list(tmp_path.glob("*.oomfix*"))


@pytest.mark.skipif(not WIZARD.exists(), reason="the oom-wizard script is not installed")
def test_the_command_runs_to_a_finished_config(tmp_path: Path) -> None:
    proc, _ = start_run(tmp_path, {})
    out, err = proc.communicate(timeout=60)

    assert proc.returncode == 0, err
    text = out.decode()
    assert "[oom-wizard] The run finished" in text
    # The trainer's own output reaches the terminal too, bars and all.
    assert "# OOM during training step, skipping batch 1/3 #" in text
    # ... and the log is watched: each skip is told with its step.
    assert "[oom-wizard] ⚠ OOM at step 1: the toolkit skipped the batch (1/3 in a row)" in text
    assert "\r" in text
    assert (tmp_path / "image-early-steps.oomfix-2.yaml").is_file()


def test_an_unknown_trainer_is_one_line_and_status_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, scenario("image-early-steps"))
    done = run_here(
        monkeypatch,
        capsys,
        tmp_path,
        ["run", str(config), "--", str(tmp_path / "nope"), "{config}"],
    )
    assert done.returncode == 2
    assert done.stderr.startswith("oom-wizard: error: cannot start the trainer")
    assert len(done.stderr.strip().splitlines()) == 1


def test_history_shows_the_attempts_as_a_timeline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outcome = play(tmp_path, scenario("image-intermittent"))
    capsys.readouterr()

    assert main(["history", str(outcome.config)]) == 0

    text = capsys.readouterr().out
    attempts = text[text.index("Attempts (oom-wizard run)") :].split("\n\n")[0]
    lines = [line for line in attempts.splitlines() if " run · " in line]
    assert len(lines) == len(outcome.attempts) == 3
    assert (
        "image-intermittent.yaml · full run · crashed at step 44 in training (intermittent)"
        in lines[0]
    )
    assert "validation run · passed validation (251 steps)" in lines[1]
    assert "image-intermittent.oomfix-2.yaml · full run · finished (3000 steps)" in lines[2]


def test_a_stall_is_told_while_the_trainer_lives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, scenario("image-early-steps"))
    env = {"FAKE_VRAM_GB": "48", "FAKE_STALL_AT": "5", "FAKE_STALL_S": "2.5"}
    args = ["run", str(config), "--auto", "--stall-minutes", "0.01", "--", *FAKE_COMMAND]
    done = run_here(monkeypatch, capsys, tmp_path, args, env)
    assert done.returncode == 0, done.stderr
    assert "[oom-wizard] ⚠ Stalled: no new step for 0 min after step 5" in done.stdout


def test_run_scale_up_from_a_finished_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    finished = play(tmp_path, scenario("image-early-steps")).config
    args = ["run", str(finished), "--scale-up", "--auto", "--", *FAKE_COMMAND]
    done = run_here(monkeypatch, capsys, tmp_path, args, {"FAKE_VRAM_GB": "24"})
    assert done.returncode == 0, done.stderr
    assert "Scale-up: Re-add the biggest resolution" in done.stdout
    assert "crashed at step 4 in training (early_steps)" in done.stdout
    assert "that is the stable config" in done.stdout


def test_a_trainer_stopped_from_outside_is_not_a_crash(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    env = {"FAKE_STALL_AT": "2", "FAKE_STALL_S": "30", "FAKE_PIDFILE": str(pidfile)}
    config = write_config(tmp_path, scenario("image-early-steps"))

    def stop_it() -> None:  # the UI's stop button: SIGINT to the trainer itself
        pid = int(wait_for(pidfile).split()[0])
        wait_for_bytes(tmp_path / "image-early-steps.run.log", b" 2/3000 [")  # it trains
        os.kill(pid, signal.SIGINT)

    failed: list[BaseException] = []

    def stop_it_or_say_why() -> None:
        try:
            stop_it()
        except BaseException as exc:  # the test fails with it, not with what follows
            failed.append(exc)

    stopper = threading.Thread(target=stop_it_or_say_why)
    stopper.start()
    outcome = autopilot(config, fake_runner(48, env))
    stopper.join()
    if failed:
        raise failed[0]

    assert outcome.exit_status == 2
    assert [a.outcome for a in outcome.attempts] == ["stopped"]
    assert "stopped" in outcome.reason
    assert not list(tmp_path.glob("*.oomfix*"))


def test_without_auto_and_no_terminal_to_ask_in_it_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, scenario("image-early-steps"))
    args = ["run", str(config), "--", *FAKE_COMMAND]  # stdin is empty, not a terminal
    done = run_here(monkeypatch, capsys, tmp_path, args, {"FAKE_VRAM_GB": "24"})
    assert done.returncode == 2
    assert "gradient_checkpointing: false → true" in done.stdout
    # It says what happened: nobody to ask, so it stops; and how to go on.
    assert "there is no terminal to ask in" in done.stdout
    assert "run it again with --auto" in done.stdout
    assert "you chose not to retry" not in done.stdout
    assert not list(tmp_path.glob("*.oomfix*"))


@in_a_real_terminal
def test_ctrl_c_in_a_real_terminal_leaves_no_process(tmp_path: Path) -> None:
    config = write_config(tmp_path, scenario("image-early-steps"))
    pidfile = tmp_path / "pids"
    command = (
        f"env FAKE_VRAM_GB=24 FAKE_STALL_AT=1 FAKE_WORKER=1 FAKE_PIDFILE={pidfile} "
        f"{WIZARD} run {config} --auto --grace 2 -- {sys.executable} {FAKE} {{config}}; "
        f"echo EXIT=$?; {HOLD}"
    )
    with terminal(command, cwd=tmp_path, width=120) as pane:
        pid, pgid, worker = (int(x) for x in wait_for(pidfile).split())
        assert group_alive(pgid)
        pane.send("C-c")
        shown = pane.wait_for("EXIT=")
        assert "EXIT=130" in shown, shown
        assert not group_alive(pgid)
        assert not pid_alive(pid) and not pid_alive(worker)
