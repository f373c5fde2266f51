"""Tests of ``oom-wizard history``: runs, changes with reasons, and the next re-add."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.plan_support import cli, job, write_job


def rolled_back(tmp_path: Path) -> Path:
    """A config rolled back with every step; returns the saved config."""
    source = tmp_path / "job.yaml"
    tree = job(train={"batch_size": 4, "steps": 3000}, datasets=[{"resolution": [512, 1024]}])
    write_job(source, tree)
    assert cli("apply", source, "--moment", "early_steps", "--all")[0] == 0
    return tmp_path / "job.oomfix.yaml"


def test_history_of_a_config_shows_each_run_and_what_comes_next(tmp_path: Path) -> None:
    config = rolled_back(tmp_path)
    status, out, _ = cli("history", config)
    assert status == 0
    assert f"original config: {tmp_path / 'job.yaml'}" in out
    assert "roll-back (moment early_steps, image model)" in out
    assert "config.process[0].train.batch_size: 4 → 1" in out
    assert "  host RAM: the " in out  # the saved config's, as the change log recorded it
    assert "why: Batch size to 1: Activation memory grows with every item in the batch." in out
    assert "Next scale-up: Restore the step count [validation_run]" in out
    assert "config.process[0].train.steps: 1001 → 3000" in out  # past the first save


def test_history_of_a_change_log_reads_the_config_it_describes(tmp_path: Path) -> None:
    config = rolled_back(tmp_path)
    assert cli("scale-up", config, "--yes")[0] == 0
    log = tmp_path / "job.oomfix-2.changelog.json"
    status, out, _ = cli("history", log)
    assert status == 0
    assert "Run 1 · " in out and "scale-up (image model)" in out
    assert "steps: validation_run" in out
    assert "Next scale-up: Re-add the biggest resolution [top_bucket]" in out
    # A re-add says why it comes back, not the roll-back's reason again (issue 33).
    scale_up = out[out.index("scale-up (image model)") :].split("\n\n")[0]
    assert "why: Restore the step count: back to the value before the roll-back" in scale_up
    assert "Short validation run" not in scale_up


def test_history_says_when_nothing_is_left(tmp_path: Path) -> None:
    config = rolled_back(tmp_path)
    # validation_run, top_bucket, batch_size, then the memory settings (low_vram, the
    # quantization and the cached text embeddings), one per run.
    latest = config
    for number in range(2, 12):
        status, out, _ = cli("scale-up", latest, "--yes")
        assert status == 0
        if "Nothing left to re-add" in out:
            break
        latest = tmp_path / f"job.oomfix-{number}.yaml"
    status, out, _ = cli("history", latest)
    assert status == 0 and "Next scale-up: nothing left" in out
    assert config.exists()


def test_history_without_a_change_log_is_refused(tmp_path: Path) -> None:
    plain = tmp_path / "job.yaml"
    write_job(plain, job())
    status, _, err = cli("history", plain)
    assert status == 2 and "no change log beside this config" in err
    status, _, err = cli("history", tmp_path / "gone.yaml")
    assert status == 2 and "no such file" in err


# --------------------------------- issue 12: recorded paths are relative to the change log


def test_history_from_another_folder_finds_the_config_beside_the_change_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "jobs"
    folder.mkdir()
    write_job(folder / "job.yaml", job(train={"batch_size": 4, "steps": 2000}))
    monkeypatch.chdir(folder)
    assert cli("apply", "job.yaml", "--moment", "early_steps")[0] == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)

    status, out, err = cli("history", folder / "job.oomfix.changelog.json")

    assert status == 0, err
    assert "Next scale-up: unknown" not in out
    assert "Next scale-up:" in out


# --------------------------------- round 3: history after a killed save (D1)


def test_history_after_a_save_killed_between_its_renames_says_nothing_false(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``--force`` save killed with its new change log in place and the old config still
    there: history read the config before it finished the save, and said it had been "edited
    after oom-wizard saved it". It now finishes the save first, from any folder."""
    import os
    import signal

    from oom_wizard.storage import atomic

    folder = tmp_path / "src"
    folder.mkdir()
    config = rolled_back(folder)
    heavier = folder / "job2.yaml"
    write_job(heavier, job(train={"batch_size": 2, "steps": 3000}))
    monkeypatch.chdir(folder)
    pid = os.fork()
    if pid == 0:
        try:

            def die(step: str, path: Path) -> None:
                if step == "rename" and path.name == config.name:
                    os.kill(os.getpid(), signal.SIGKILL)

            atomic.STEP_HOOK = die
            cli("apply", "job2.yaml", "-o", config.name, "--force", "--steps", "batch_size")
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == -signal.SIGKILL
    monkeypatch.chdir(tmp_path)

    status, out, err = cli("history", Path("src") / config.name)

    assert status == 0, err
    assert "edited" not in out + err
    assert "Run 0 · " in out and "batch_size" in out
