"""``run`` supervising a trainer that lies, hangs, resumes or outlives us (real children, real
signals, the project's fake trainer)."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from oom_wizard.application.autopilot import Settings, autopilot
from oom_wizard.application.running import TrainerEnd, stops_as_from_a_terminal
from oom_wizard.formats.document import load_document
from oom_wizard.paths import parse_path
from oom_wizard.storage.changelog import changelog_path_for, read_changelog
from oom_wizard.storage.resume import checkpoint_step
from tests.support.autopilot_support import (
    FAKE,
    FAKE_COMMAND,
    SCENARIOS,
    Ran,
    Scenario,
    fake_runner,
    pid_alive,
    run_here,
    wait_for,
    wait_for_bytes,
    write_config,
)
from tests.support.fake_trainer import write_checkpoint
from tests.support.tmux_support import WIZARD

needs_wizard = pytest.mark.skipif(
    not WIZARD.exists(), reason="the oom-wizard script is not installed"
)
EARLY = next(s for s in SCENARIOS if s.name == "image-early-steps")
SHORT = dataclasses.replace(EARLY, edits={**EARLY.edits, "process.0.train.steps": 600})
"""The early-steps job at a fifth of its steps: a run that fits ends in about a second."""


@pytest.fixture
def run_cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., Ran]:
    """``oom-wizard run`` in this process (see ``run_here``); the signal tests below start
    the script itself."""

    def run(
        tmp_path: Path,
        config: Path,
        trainer: list[str],
        *extra: str,
        env: dict[str, str] | None = None,
    ) -> Ran:
        return run_here(
            monkeypatch, capsys, tmp_path, ["run", str(config), *extra, "--", *trainer], env
        )

    return run


# --- D3: a clean exit without a training step is not a fit -----------------------------------


def test_a_trainer_that_exits_0_without_a_step_is_not_a_finished_run(
    tmp_path: Path, run_cli: Callable[..., Ran]
) -> None:
    config = write_config(tmp_path, EARLY)
    done = run_cli(tmp_path, config, [sys.executable, "-c", "print('all good')"], "--auto")

    assert done.returncode == 2, done.stdout
    assert "The run finished" not in done.stdout
    assert "trained no step (its log shows no training step at all)" in done.stdout
    assert not list(tmp_path.glob("*.oomfix*"))


# --- item 11: an unexplained exit is not a loading OOM ----------------------------------------


def test_an_exit_with_no_sign_of_memory_changes_nothing_and_shows_the_log_tail(
    tmp_path: Path, run_cli: Callable[..., Ran]
) -> None:
    config = write_config(tmp_path, EARLY)
    before = sorted(p.name for p in tmp_path.iterdir())
    trainer = [sys.executable, "-c", "print('boom'); raise SystemExit(3)"]
    done = run_cli(tmp_path, config, trainer, "--auto")

    assert done.returncode == 2, done.stdout
    assert "no sign of running out of memory" in done.stdout
    assert "nothing was changed" in done.stdout
    assert "The verdict: " in done.stdout
    tail = done.stdout.split("The end of its log", 1)[1]
    assert "    boom" in tail
    assert "Job process terminated with exit code 3." in tail
    # Nothing written but the attempt's own log: no config, no change log.
    after = sorted(p.name for p in tmp_path.iterdir())
    assert [name for name in after if name not in before] == ["image-early-steps.run.log"]


# --- issue 31: a failure that is not the config's memory is never rolled back ----------------

HOST_KILL = next(s for s in SCENARIOS if s.name == "video-host-oom-kill")


@pytest.mark.parametrize(
    ("scenario", "env", "verdict"),
    [
        (EARLY, {"FAKE_FAULT": "cudnn_attention"}, "A CUDA library or the driver failed"),
        (EARLY, {"FAKE_FAULT": "cublas"}, "A CUDA library or the driver failed"),
        (EARLY, {"FAKE_FAULT": "illegal_access"}, "A CUDA library or the driver failed"),
        (HOST_KILL, dict(HOST_KILL.env), "the host ran out of RAM"),
    ],
    ids=["cudnn-attention", "cublas", "illegal-access", "host-ram-kill"],
)
def test_run_auto_stops_on_a_failure_that_is_not_memory_with_its_verdict(
    tmp_path: Path,
    run_cli: Callable[..., Ran],
    scenario: Scenario,
    env: dict[str, str],
    verdict: str,
) -> None:
    """One launch, the verdict and what to try shown, nothing saved, exit status 2."""
    config = write_config(tmp_path, scenario)
    before = sorted(p.name for p in tmp_path.iterdir())
    done = run_cli(tmp_path, config, FAKE_COMMAND, "--auto", env=env)

    assert done.returncode == 2, done.stdout
    assert verdict in done.stdout
    launches = [line for line in done.stdout.splitlines() if line == "Running 1 job"]
    assert len(launches) == 1, done.stdout
    assert not list(tmp_path.glob("*.oomfix*"))
    after = sorted(p.name for p in tmp_path.iterdir())
    assert [name for name in after if name not in before] == [f"{scenario.name}.run.log"]
    advice = "enable_cudnn_sdp(False)" if "FAKE_FAULT" in env else "Host RAM, not VRAM"
    assert advice in done.stdout


BASELINE = next(s for s in SCENARIOS if s.name == "image-loading-baseline-sample")


def test_run_auto_rolls_a_capped_process_back_against_its_allowance(
    tmp_path: Path, run_cli: Callable[..., Ran]
) -> None:
    """A process capped at 16 GiB of an 80 GiB card ran out of its allowance in the baseline
    sample: a config OOM, rolled back as on a 16 GiB card, never 'the card was not full'."""
    config = write_config(tmp_path, BASELINE)
    env = {"FAKE_VRAM_GB": "80", "FAKE_ALLOWED_GB": "16"}
    done = run_cli(tmp_path, config, FAKE_COMMAND, "--auto", "--max-retries", "1", env=env)

    assert "16.00 GiB allowed;" in (tmp_path / f"{BASELINE.name}.run.log").read_text()
    assert "verdict is environment" not in done.stdout and "card was not full" not in done.stdout
    assert "crashed in baseline_sample (loading)" in done.stdout, done.stdout
    assert list(tmp_path.glob("*.oomfix*.yaml")), done.stdout


# --- E2: a config that does not parse is refused before the trainer starts -------------------


def test_a_config_that_does_not_parse_is_refused_before_anything_starts(
    tmp_path: Path, run_cli: Callable[..., Ran]
) -> None:
    config = tmp_path / "broken.yaml"
    config.write_text("job: extension\nconfig:\n  name: [unclosed\n", encoding="utf-8")
    marker = tmp_path / "started"
    trainer = [sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"]
    done = run_cli(tmp_path, config, trainer, "--auto")

    assert done.returncode == 2
    assert done.stderr.startswith(f"oom-wizard: error: {config}:")
    assert len(done.stderr.strip().splitlines()) == 1
    assert not marker.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.yaml"]


# --- D5: SIGTERM is "terminated", 143 ----------------------------------------------------------


@needs_wizard
def test_sigterm_of_run_is_terminated_143_and_stops_the_trainer(tmp_path: Path) -> None:
    config = write_config(tmp_path, EARLY)
    pidfile = tmp_path / "pids"
    env = {
        **os.environ,
        "FAKE_VRAM_GB": "24",
        "FAKE_STALL_AT": "1",
        "FAKE_WORKER": "1",
        "FAKE_PIDFILE": str(pidfile),
    }
    proc = subprocess.Popen(
        [str(WIZARD), "run", str(config), "--auto", "--grace", "2", "--",
         sys.executable, str(FAKE), "{config}"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
        preexec_fn=stops_as_from_a_terminal,
    )  # fmt: skip
    pid, _pgid, worker = wait_pids(pidfile)
    wait_for_bytes(tmp_path / "image-early-steps.run.log", b" 1/3000 [")

    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)

    assert proc.returncode == 143, err
    assert b"terminated (SIGTERM)" in out
    assert b"Terminated (SIGTERM); the trainer's processes were stopped." in out
    assert b"Ctrl-C" not in out
    assert not pid_alive(pid) and not pid_alive(worker)


def wait_pids(pidfile: Path) -> tuple[int, int, int]:
    pid, pgid, worker = (int(x) for x in wait_for(pidfile).split())
    return pid, pgid, worker


# --- H2: a trainer that printed the fatal OOM but does not exit -------------------------------


def test_a_trainer_hanging_after_its_fatal_oom_is_ended_and_the_loop_goes_on(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, EARLY)
    pidfile = tmp_path / "pids"
    env = {"FAKE_HANG_AFTER_ERROR": "1", "FAKE_WORKER": "1", "FAKE_PIDFILE": str(pidfile)}
    from oom_wizard.application.running import run_trainer, trainer_argv

    full_env = {**os.environ, "FAKE_VRAM_GB": "24", **env}

    def runner(config: Path, log: Path, env: object = None) -> TrainerEnd:
        argv = trainer_argv([sys.executable, str(FAKE), "{config}"], config)
        return run_trainer(argv, log, env=full_env, grace_s=2.0, silence_s=1.0)

    started = time.monotonic()
    outcome = autopilot(config, runner, settings=Settings(max_retries=0))
    took = time.monotonic() - started

    assert took < 30
    (attempt,) = outcome.attempts
    assert attempt.outcome == "crashed" and attempt.moment == "early_steps"
    assert attempt.hung_after_error is not None and attempt.hung_after_error >= 1.0
    assert "without exiting, so its processes were ended" in attempt.describe()
    pid, _pgid, worker = (int(x) for x in pidfile.read_text().split())
    assert not pid_alive(pid) and not pid_alive(worker)
    assert "--max-retries 0" in outcome.reason


def test_a_silent_trainer_without_a_fatal_error_is_left_to_train(tmp_path: Path) -> None:
    """Silence alone (a slow step, a stall) is no reason to end a trainer: only silence after
    its fatal error is."""
    config = write_config(tmp_path, EARLY)
    from oom_wizard.application.running import run_trainer, trainer_argv

    full_env = {**os.environ, "FAKE_VRAM_GB": "48", "FAKE_STALL_AT": "2", "FAKE_STALL_S": "2"}

    def runner(config: Path, log: Path, env: object = None) -> TrainerEnd:
        argv = trainer_argv([sys.executable, str(FAKE), "{config}"], config)
        return run_trainer(argv, log, env=full_env, grace_s=2.0, silence_s=0.5)

    outcome = autopilot(config, runner)

    (attempt,) = outcome.attempts
    assert attempt.outcome == "finished" and attempt.hung_after_error is None
    assert outcome.exit_status == 0


# --- H4: SIGKILL of run takes the trainer and its workers along --------------------------------


def start_and_kill(tmp_path: Path, wait_for_training: bool = True) -> tuple[int, int]:
    config = write_config(tmp_path, EARLY)
    pidfile = tmp_path / "pids"
    env = {
        **os.environ,
        "FAKE_VRAM_GB": "48",
        "FAKE_STALL_AT": "1",
        "FAKE_WORKER": "1",
        "FAKE_PIDFILE": str(pidfile),
    }
    proc = subprocess.Popen(
        [str(WIZARD), "run", str(config), "--auto", "--", sys.executable, str(FAKE), "{config}"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path,
    )  # fmt: skip
    pid, _pgid, worker = wait_pids(pidfile)
    if wait_for_training:
        wait_for_bytes(tmp_path / "image-early-steps.run.log", b" 1/3000 [")
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    return pid, worker


@needs_wizard
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to see the processes")
def test_sigkill_of_run_leaves_no_trainer_and_no_worker(tmp_path: Path) -> None:
    pid, worker = start_and_kill(tmp_path)
    deadline = time.monotonic() + 5
    while (pid_alive(pid) or pid_alive(worker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [p for p in (pid, worker) if pid_alive(p)]
    for survivor in left:  # a failure must not leave them running for the next test
        os.kill(survivor, signal.SIGKILL)
    assert pid not in left, "the trainer outlived oom-wizard run"
    assert worker not in left, "the trainer's worker outlived oom-wizard run"


# --- item 2 / must show 3: the validation run of a resumed job trains its steps ---------------


def test_the_validation_run_of_a_resumed_job_trains_its_steps_past_the_resume(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, EARLY)
    # An earlier run of the job saved at step 500: AI Toolkit resumes from there.
    earlier = (
        tmp_path / "output" / "flux_portrait_lora" / "flux_portrait_lora_000000500.safetensors"
    )
    write_checkpoint(earlier, 500)
    said: list[str] = []
    outcome = autopilot(config, fake_runner(24, {"FAKE_CHECKPOINTS": "1"}), say=said.append)

    kinds = [(a.kind, a.outcome) for a in outcome.attempts]
    assert kinds == [("full", "crashed"), ("validation", "passed_validation"), ("full", "finished")]
    crash, validation, full = outcome.attempts
    assert crash.resumed_from == 500 and crash.step is not None and crash.step > 500
    assert "Found step 500 in metadata, starting from there" in validation.log.read_text()
    steps = load_document(validation.config).get(parse_path("config.process[0].train.steps"))
    # 100 steps asked, raised past the first save and sample after 500 (both every 250).
    assert steps == 751
    assert validation.resumed_from == 500 and validation.trained == 251
    assert validation.describe() == (
        "passed validation (751 steps), 251 of them trained after resuming at step 500"
    )
    assert (
        "⚠ AI Toolkit resumes this job from step 500"
        in said[said.index(next(line for line in said if line.startswith("Attempt 2:"))) + 1]
    )
    assert any("resumes this job from step 500" in line and "trains 251 steps" in line
               for line in said)  # fmt: skip
    # The full run resumes from the validation run's last save, and trains to 3000.
    assert full.resumed_from == 751 and full.step == 3000 and full.trained == 3000 - 751
    log = read_changelog(changelog_path_for(outcome.config))
    assert [a.outcome for a in log.attempts] == [a.outcome for a in outcome.attempts]


def test_a_validation_run_below_the_resume_step_would_train_nothing_and_is_no_pass(
    tmp_path: Path,
) -> None:
    """Without the resume rule (train.steps 251 on a job at step 500) the trainer trains
    nothing and exits 0: that is never a pass."""
    config = write_config(tmp_path, EARLY)
    text = config.read_text().replace("steps: 3000", "steps: 251")
    config.write_text(text)
    write_checkpoint(
        tmp_path / "output" / "flux_portrait_lora" / "flux_portrait_lora_000000500.safetensors", 500
    )

    said: list[str] = []
    outcome = autopilot(config, fake_runner(48, {"FAKE_CHECKPOINTS": "1"}), say=said.append)

    # Warned before it starts, and stopped after it: a run that trained nothing is no pass.
    assert any(
        line.startswith("⚠ AI Toolkit resumes this job from step 500")
        and "train.steps is 251: this run has nothing left to train" in line
        for line in said
    )
    (attempt,) = outcome.attempts
    assert attempt.outcome == "untrained" and outcome.exit_status == 2
    assert "it resumed at step 500 and train.steps is 251" in outcome.reason


def test_the_checkpoint_header_gives_the_step_without_torch(tmp_path: Path) -> None:
    path = tmp_path / "x_000000500.safetensors"
    write_checkpoint(path, 500)
    assert checkpoint_step(path) == 500
    path.write_bytes(b"\x05\x00\x00\x00\x00\x00\x00\x00{bad}")
    assert checkpoint_step(path) is None
    path.write_bytes(b"\xff" * 8)
    assert checkpoint_step(path) is None


# --- item 9: one rule for the validation length in the app, apply and run ---------------------


def test_the_apps_validation_run_reaches_the_first_sample(tmp_path: Path) -> None:
    from oom_wizard.application.choosing import (
        answer,
        effective_choices,
        prepared,
        validation_choice,
    )
    from oom_wizard.application.settling import start
    from oom_wizard.request import JobRequest
    from oom_wizard.rules.diagnosis import Answers

    config = write_config(tmp_path, EARLY)
    text = config.read_text().replace("sample_every: 250", "sample_every: 500")
    config.write_text(text)
    state = start(JobRequest(target=config, probe=False))
    state = answer(state, Answers(moment="early_steps"))

    chosen = validation_choice(state)
    assert chosen is not None
    # The review screen's toggle switched on, as the screen passes it.
    ticked = dataclasses.replace(chosen, enabled=True)
    ready = prepared(state, effective_choices(state, extra=ticked))
    steps = [e.after for e in ready.entries if e.path == "config.process[0].train.steps"]
    assert steps == [501]  # 100 would never reach the first sample, at step 500


def test_apply_steps_validation_run_counts_from_the_resume(tmp_path: Path) -> None:
    from oom_wizard.cli import main

    config = write_config(tmp_path, EARLY)
    write_checkpoint(
        tmp_path / "output" / "flux_portrait_lora" / "flux_portrait_lora_000000500.safetensors", 500
    )
    out = tmp_path / "out.yaml"
    cwd = Path.cwd()
    os.chdir(tmp_path)
    try:
        status = main(["apply", str(config), "--moment", "early_steps", "--steps",
                       "validation_run", "-o", str(out)])  # fmt: skip
    finally:
        os.chdir(cwd)
    assert status == 0
    assert load_document(out).get(parse_path("config.process[0].train.steps")) == 751


# --- item 16: the summary's changes are those made before each attempt ------------------------


def test_the_summary_names_the_changes_made_before_each_attempt(tmp_path: Path) -> None:
    config = write_config(tmp_path, EARLY)
    outcome = autopilot(config, fake_runner(24))

    first, second, third = outcome.summary()
    assert first.startswith("1. image-early-steps.yaml (full): crashed at step 4")
    assert "after changing" not in first
    assert second.startswith("2. image-early-steps.oomfix.yaml (validation) after changing ")
    assert "config.process[0].train.gradient_checkpointing: false → true" in second
    assert "then changed" not in "".join(outcome.summary())
    assert third.startswith(
        "3. image-early-steps.oomfix-2.yaml (full) after changing "
        "config.process[0].train.steps: 251 → 3000:"
    )


# --- issue 18 item 4: the measured peak from nvidia-smi --------------------------------------


def test_the_attempt_records_the_peak_nvidia_smi_showed(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    script = bin_dir / "nvidia-smi"
    # Each call shows more in use, up to 21000 MiB of 24576.
    script.write_text(
        "#!/bin/sh\n"
        f"n=$(cat {calls} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {calls}\n"
        'case "$1" in\n'
        "  --query-gpu=*) used=$((n*7000)); [ $used -gt 21000 ] && used=21000;\n"
        '     echo "0, Fake RTX, 24576, $used, $((24576-used))";;\n'
        "  *) ;;\n"
        "esac\n"
    )
    script.chmod(0o755)
    config = write_config(tmp_path, SHORT)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "FAKE_STEP_S": "0.002"}
    old_path = os.environ["PATH"]
    os.environ["PATH"] = env["PATH"]
    try:
        outcome = autopilot(config, fake_runner(48, {"FAKE_STEP_S": "0.002"}))
    finally:
        os.environ["PATH"] = old_path

    (attempt,) = outcome.attempts
    assert attempt.card_gib == 24.0
    assert attempt.peak_gib is not None and 6.8 <= attempt.peak_gib <= 20.6
    assert "GiB at most" in outcome.summary()[0]


def test_the_change_log_attempts_carry_the_measured_peak(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "nvidia-smi"
    script.write_text(
        '#!/bin/sh\ncase "$1" in --query-gpu=*) echo "0, Fake RTX, 24576, 20480, 4096";; esac\n'
    )
    script.chmod(0o755)
    config = write_config(tmp_path, EARLY)
    old_path = os.environ["PATH"]
    os.environ["PATH"] = f"{bin_dir}{os.pathsep}{old_path}"
    try:
        outcome = autopilot(config, fake_runner(24))
    finally:
        os.environ["PATH"] = old_path

    raw = json.loads(changelog_path_for(outcome.config).read_text())
    assert len(raw["attempts"]) == 3
    assert all((a["peak_gib"], a["card_gib"]) == (20.0, 24.0) for a in raw["attempts"])
    # history shows it on each attempt's line.
    from oom_wizard.application.attempts import describe_record

    log = read_changelog(changelog_path_for(outcome.config))
    assert all(describe_record(a).endswith(" · 20.0 of 24.0 GiB at most") for a in log.attempts)


def test_the_peak_is_the_trainers_own_when_nvidia_smi_lists_its_processes(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    pidfile = tmp_path / "pids"
    script = bin_dir / "nvidia-smi"
    # The card is busy with another process's 14 GiB; the trainer's own pid holds 5000 MiB.
    script.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        '  --query-gpu=*) echo "0, Fake RTX, 24576, 19336, 5240";;\n'
        f'  *) echo "4242, other, 14336"; [ -f {pidfile} ] && '
        f"echo \"$(cut -d' ' -f1 {pidfile}), python, 5000\";;\n"
        "esac\n"
    )
    script.chmod(0o755)
    # Read every 0.05 s (not every 2 s), so that a short run has readings after the pid file.
    config = write_config(tmp_path, SHORT)
    old_path = os.environ["PATH"]
    os.environ["PATH"] = f"{bin_dir}{os.pathsep}{old_path}"
    try:
        env = {"FAKE_STEP_S": "0.002", "FAKE_PIDFILE": str(pidfile)}
        outcome = autopilot(config, fake_runner(48, env, measure_s=0.05))
    finally:
        os.environ["PATH"] = old_path

    (attempt,) = outcome.attempts
    assert (attempt.peak_gib, attempt.card_gib) == (4.88, 24.0)


def test_without_nvidia_smi_nothing_is_measured_and_the_log_reads(tmp_path: Path) -> None:
    config = write_config(tmp_path, EARLY)
    old_path = os.environ["PATH"]
    os.environ["PATH"] = str(Path(sys.executable).parent)
    try:
        outcome = autopilot(config, fake_runner(24))
    finally:
        os.environ["PATH"] = old_path
    assert all(a.peak_gib is None and a.card_gib is None for a in outcome.attempts)
    raw = json.loads(changelog_path_for(outcome.config).read_text())
    assert all(a.get("peak_gib") is None for a in raw["attempts"])


def test_the_apps_review_says_where_a_resumed_jobs_validation_counts_from(tmp_path: Path) -> None:
    import asyncio

    from oom_wizard.application.choosing import answer
    from oom_wizard.application.settling import start
    from oom_wizard.request import JobRequest
    from oom_wizard.rules.diagnosis import Answers
    from oom_wizard.screens.app import create_app

    config = write_config(tmp_path, EARLY)
    write_checkpoint(
        tmp_path / "output" / "flux_portrait_lora" / "flux_portrait_lora_000000500.safetensors", 500
    )
    state = answer(start(JobRequest(target=config, probe=False)), Answers(moment="early_steps"))

    async def drive() -> tuple[str, str]:
        from textual.widgets import Checkbox, Static

        app = create_app(opened=state, first="review", exit_on_save=True)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            note = app.screen.query_one("#validation-note", Static)
            before = str(note.render())
            app.screen.query_one("#validation", Checkbox).toggle()
            await pilot.pause()
            return before, str(note.render())

    before, after = asyncio.run(drive())
    assert "resumes this job from step 500" in before
    # The words follow the switch to what the save writes (issue 33: "there is none" was
    # worded once, as the screen opened, and stayed beside a switch that saved a run).
    assert "no validation run is saved (it is switched off)" in before
    assert "the validation run's train.steps is 751, so it trains 251 steps past" in after


# --- the trainer hears its stop, however run itself was started -------------------------------

PARENT_WITHOUT_SIGINT = """
import signal, sys
from pathlib import Path
from oom_wizard.application.running import run_trainer

signal.signal(signal.SIGINT, signal.SIG_IGN)  # as for `oom-wizard run ... &` in a script
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
shows = (
    "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler, "
    "sorted(signal.pthread_sigmask(signal.SIG_BLOCK, [])))"
)
run_trainer([sys.executable, "-c", shows], Path(sys.argv[1]))
"""


def test_the_trainer_starts_with_its_stop_signals_heard_even_when_run_ignores_them(
    tmp_path: Path,
) -> None:
    """The stop's first signal is SIGINT, the trainer's own clean stop: a trainer that
    inherited an ignored or blocked SIGINT would never hear it."""
    log = tmp_path / "run.log"
    subprocess.run([sys.executable, "-c", PARENT_WITHOUT_SIGINT, str(log)], check=True, timeout=60)
    assert log.read_text(encoding="utf-8").splitlines()[-1] == "True []"
