"""``oom-wizard diagnose``: the command line's ``main`` called in-process (its status, stdout and
stderr, with the environment a terminal would give it), and once as users run it,
``python -m oom_wizard diagnose`` in a subprocess."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.aitk_db import add_job, make_db
from tests.support.plan_support import cli

REPO = Path(__file__).resolve().parents[2]

CONFIG = """\
job: extension
config:
  name: my_lora
  process:
    - type: diffusion_trainer
      train:
        batch_size: 1
        steps: 3000
        gradient_checkpointing: true
      model:
        arch: qwen_image  # an image arch
        name_or_path: Qwen/Qwen-Image
      datasets:
        - folder_path: /data
          resolution: [512, 768, 1024]
      sample:
        width: 1024
        height: 1024
        sample_every: 250
"""
OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 5.06 GiB. GPU 0 has a total "
    "capacity of 31.36 GiB of which 336.62 MiB is free. Including non-PyTorch memory, this "
    "process has 30.68 GiB memory in use. Of the allocated memory 27.17 GiB is allocated by "
    "PyTorch, and 2.92 GiB is reserved by PyTorch but unallocated."
)
BASELINE_CRASH = (
    f"Running 1 job\nLoading Qwen Image model\nGenerating baseline samples before training\n{OOM}\n"
)
SAMPLE_CRASH = (
    "Running 1 job\nmy_lora:   8%|#         | 250/3000 [10:00<1:40:00,  2.0s/it, lr: 1.0e-04]\n"
    f"Generating Samples:   0%|          | 0/2 [00:00<?, ?it/s]\n{OOM}\n"
)
RUNNING = "Running 1 job\nmy_lora:   0%|          | 3/3000 [00:10<1:40:00,  2.0s/it]\n"
DESIGN_KEYS = {
    "moment", "phase", "model_kind", "arch", "signals", "environment_suspected", "reasons",
    "evidence", "oom", "last_step", "total_steps", "advice", "log_matches_config", "log_mismatch",
}  # fmt: skip


def run_cli(*args: str, path_dirs: tuple[Path, ...] = ()) -> subprocess.CompletedProcess[str]:
    """``oom-wizard diagnose ARGS`` in-process, 100 columns wide, ``path_dirs`` first on PATH.

    A subprocess would add only the interpreter's start-up: the module entry point has a
    test of its own (:func:`test_python_m_wizard_runs_diagnose`).
    """
    saved = dict(os.environ)
    os.environ["COLUMNS"] = "100"
    os.environ["PATH"] = os.pathsep.join([*map(str, path_dirs), saved.get("PATH", "")])
    try:
        status, out, err = cli("diagnose", *args)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return subprocess.CompletedProcess(["diagnose", *args], status, out, err)


def test_python_m_wizard_runs_diagnose(tmp_path: Path) -> None:
    config = tmp_path / "my_job.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    log = tmp_path / "log.txt"
    log.write_text(BASELINE_CRASH, encoding="utf-8")
    command = [sys.executable, "-m", "oom_wizard", "diagnose", str(config), "--log", str(log)]
    done = subprocess.run(
        [*command, "--no-probe", "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["moment"] == "loading"


def run_json(*args: str, **kwargs: Any) -> dict[str, Any]:
    done = run_cli(*args, "--json", **kwargs)
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


@pytest.fixture
def job(tmp_path: Path) -> tuple[Path, Path]:
    config = tmp_path / "my_job.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    log = tmp_path / "log.txt"
    log.write_text(BASELINE_CRASH, encoding="utf-8")
    return config, log


def test_json_has_the_design_keys(job: tuple[Path, Path]) -> None:
    config, log = job
    data = run_json(str(config), "--log", str(log), "--no-probe")
    assert set(data) >= DESIGN_KEYS
    assert (data["moment"], data["phase"], data["model_kind"], data["arch"]) == (
        "loading",
        "baseline_sample",
        "image",
        "qwen_image",
    )
    assert data["oom"]["tried_gib"] == 5.06
    assert [e["line"] for e in data["evidence"]] == [3, 4]
    # Qwen-Image on a 32 GiB card: every layer offloaded (time only) fits every phase, so the
    # least loss is the default fix, and its first change is that.
    assert data["first_change"].startswith("Offload layers to system RAM")
    assert "layer_offloading_transformer_percent: (absent) → 1.0" in data["first_change"]
    assert data["log"] == str(log)
    assert data["confidence"] == "high" and data["certainty"].startswith("Sure (high): ")


def test_a_log_from_the_run_before_says_so_in_json_and_in_words(tmp_path: Path) -> None:
    config = tmp_path / "my_job.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    log = tmp_path / "log.txt"
    printed = '{\n    "type": "diffusion_trainer",\n    "train": {"batch_size": 2}\n}\n'
    log.write_text(BASELINE_CRASH.replace("Running 1 job\n", "Running 1 job\n" + printed))
    data = run_json(str(config), "--log", str(log), "--no-probe")
    assert data["log_matches_config"] is False
    assert data["log_mismatch"] == [
        {"path": "config.process[0].train.batch_size", "in_log": 2, "in_config": 1}
    ]
    done = run_cli(str(config), "--log", str(log), "--no-probe")
    assert done.returncode == 0 and "batch_size was 2 there, 1 now" in done.stdout


def test_a_log_with_the_same_printed_config_matches(tmp_path: Path) -> None:
    config = tmp_path / "my_job.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    log = tmp_path / "log.txt"
    printed = '{\n    "type": "diffusion_trainer",\n    "train": {"batch_size": 1}\n}\n'
    log.write_text(BASELINE_CRASH.replace("Running 1 job\n", "Running 1 job\n" + printed))
    data = run_json(str(config), "--log", str(log), "--no-probe")
    assert (data["log_matches_config"], data["log_mismatch"]) == (True, [])


def test_a_log_alone_works_and_says_the_kind_is_unknown(job: tuple[Path, Path]) -> None:
    _, log = job
    data = run_json("--log", str(log), "--no-probe")
    assert (data["moment"], data["model_kind"], data["arch"]) == ("loading", None, None)
    assert "model kind unknown" in data["verdict"]


def test_answers_on_the_command_line_win(job: tuple[Path, Path]) -> None:
    config, log = job
    data = run_json(str(config), "--log", str(log), "--moment", "sampling", "--no-probe")
    assert data["moment"] == "sampling"
    assert data["disagreements"] and "'loading'" in data["disagreements"][0]


def test_a_job_folder_is_diagnosed_from_the_newest_crashed_log(tmp_path: Path) -> None:
    folder = tmp_path / "output" / "my_lora"
    (folder / "logs").mkdir(parents=True)
    import yaml

    tree = yaml.safe_load(CONFIG)
    (folder / ".job_config.json").write_text(json.dumps(tree), encoding="utf-8")
    (folder / "log.txt").write_text(RUNNING, encoding="utf-8")
    (folder / "logs" / "0_log.txt").write_text(BASELINE_CRASH, encoding="utf-8")
    (folder / "logs" / "1_log.txt").write_text(SAMPLE_CRASH, encoding="utf-8")
    data = run_json(str(folder), "--no-probe")
    assert data["log"] == str(folder / "logs" / "1_log.txt")
    assert (data["moment"], data["phase"], data["last_step"]) == (
        "sampling",
        "periodic_sample",
        250,
    )
    assert any("logs/1_log.txt: the newest run that crashed" in note for note in data["notes"])


THEIR_CRASH = f"Running 1 job\n####\n# Running job: their_lora\n####\n{SAMPLE_CRASH}"


@pytest.mark.parametrize("where", ["folder", "beside"])
def test_a_log_found_that_names_another_job_is_not_diagnosed(tmp_path: Path, where: str) -> None:
    """The log found for ``my_lora`` (the job folder's ``log.txt``, or ``NAME.log.txt``
    beside the config) was written by job ``their_lora``, as its job banner says: it is not
    read, and the note says whose it looks like (issue 33: another job's log was taken)."""
    if where == "folder":
        folder = tmp_path / "output" / "my_lora"
        folder.mkdir(parents=True)
        config, log = folder / "config.yaml", folder / "log.txt"
    else:
        config, log = tmp_path / "my_lora.yaml", tmp_path / "my_lora.log.txt"
    config.write_text(CONFIG, encoding="utf-8")
    log.write_text(THEIR_CRASH, encoding="utf-8")
    data = run_json(str(config), "--no-probe")
    assert data["log"] is None and data["moment"] is None
    assert any(
        f"{log.name} looks like the log of job 'their_lora' (its job banner names job "
        "'their_lora', and this job is 'my_lora'): not read; pass this job's log with --log" in note
        for note in data["notes"]
    )
    # Given with --log, it is the user's choice: read, and the note says whose it looks like.
    given = run_json(str(config), "--log", str(log), "--no-probe")
    assert given["log"] == str(log)
    assert any(
        f"{log.name} looks like the log of job 'their_lora' (its job banner names job "
        "'their_lora', and this job is 'my_lora'): read as you asked; is it this job's log?" in note
        for note in given["notes"]
    )


def test_a_job_of_the_ui_database_is_diagnosed_from_its_folder(tmp_path: Path) -> None:
    db = make_db(tmp_path / "aitk_db.db")
    add_job(db, "my_lora")
    folder = tmp_path / "output" / "my_lora"
    folder.mkdir(parents=True)
    (folder / "log.txt").write_text(SAMPLE_CRASH, encoding="utf-8")
    listed = run_cli("--db", str(db), "--no-probe")
    assert listed.returncode == 0 and "my_lora" in listed.stdout
    data = run_json("--db", str(db), "--job", "my_lora", "--no-probe")
    assert (data["moment"], data["model_kind"], data["log"]) == (
        "sampling",
        "image",
        str(folder / "log.txt"),
    )


def test_the_human_report(job: tuple[Path, Path]) -> None:
    config, log = job
    done = run_cli(str(config), "--log", str(log), "--no-probe")
    assert done.returncode == 0, done.stderr
    out = " ".join(done.stdout.split())  # words as printed, whatever the wrapping
    assert "during the baseline sample" in out and "moment: loading" in out
    assert "Generating baseline samples before training" in out
    assert "tried 5.06 GiB" in out and "reserved unallocated 2.92 GiB" in out
    assert "First" in out and "Offload layers to system RAM" in out
    assert "expandable_segments:True" in out
    assert "How sure Sure (high): PyTorch's out-of-memory error comes during the baseline" in out


def test_the_probe_reports_the_gpu_now_unless_told_not_to(
    job: tuple[Path, Path], tmp_path: Path
) -> None:
    config, log = job
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "nvidia-smi"
    fake.write_text(
        '#!/bin/sh\ncase "$1" in\n'
        "  --query-gpu=*) echo '0, NVIDIA RTX 5090, 32607, 2000, 30607' ;;\n"
        "  --query-compute-apps=*) echo '321, python, 1500' ;;\nesac\n",
        encoding="utf-8",
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    probed = run_json(str(config), "--log", str(log), path_dirs=(bin_dir,))
    assert probed["gpu_now"]["gpus"][0]["name"] == "NVIDIA RTX 5090"
    assert probed["gpu_now"]["processes"] == [{"pid": 321, "name": "python", "gib": 1.465}]
    skipped = run_json(str(config), "--log", str(log), "--no-probe", path_dirs=(bin_dir,))
    assert skipped["gpu_now"] is None


def test_a_missing_log_is_one_line_and_status_2(job: tuple[Path, Path], tmp_path: Path) -> None:
    config, _ = job
    done = run_cli(str(config), "--log", str(tmp_path / "absent.txt"), "--no-probe")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f"oom-wizard: error: {tmp_path / 'absent.txt'}: no such log file\n"


def test_nothing_to_diagnose_is_one_line_and_status_2() -> None:
    done = run_cli("--no-probe")
    assert done.returncode == 2
    assert done.stderr.startswith("oom-wizard: error: give the job's config")
    assert len(done.stderr.splitlines()) == 1
