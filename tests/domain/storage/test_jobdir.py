"""Tests of finding a job's config and the right log in an AI Toolkit job folder."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from oom_wizard.errors import ConfigError
from oom_wizard.logs.scan import scan_text
from oom_wizard.storage.jobdir import JobIdentity, locate_job

CONFIG = {
    "job": "extension",
    "config": {
        "name": "my_lora",
        "process": [
            {
                "type": "ui_trainer",
                "train": {"batch_size": 1, "steps": 3000},
                "model": {"arch": "wan22_14b:t2v", "name_or_path": "ai-toolkit/Wan2.2"},
                "datasets": [{"folder_path": "/d", "resolution": [512], "num_frames": 41}],
            }
        ],
    },
}
RUNNING = "Running 1 job\nLoading Wan model\nmy_lora:   1%|          | 30/3000 [01:00<1:40:00]\n"
CRASHED_AT_SAMPLE = (
    "Running 1 job\nmy_lora:   8%|#         | 250/3000 [10:00<1:40:00]\n"
    "Generating Samples:   0%|          | 0/2 [00:00<?, ?it/s]\n"
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.00 GiB.\n"
)
CRASHED_AT_LOAD = "Running 1 job\nLoading Wan model\ntorch.OutOfMemoryError: CUDA out of memory.\n"
STOPPED = "Running 1 job\nmy_lora:   0%|          | 2/3000 [00:10<1:40:00]\nJob stopped\n"


def job_folder(root: Path, log: str | None, old: dict[int, str]) -> Path:
    folder = root / "output" / "my_lora"
    (folder / "logs").mkdir(parents=True)
    (folder / ".job_config.json").write_text(json.dumps(CONFIG), encoding="utf-8")
    if log is not None:
        (folder / "log.txt").write_text(log, encoding="utf-8")
    for n, text in old.items():
        (folder / "logs" / f"{n}_log.txt").write_text(text, encoding="utf-8")
    return folder


def test_a_crashed_log_txt_is_the_log(tmp_path: Path) -> None:
    folder = job_folder(tmp_path, CRASHED_AT_SAMPLE, {0: CRASHED_AT_LOAD, 1: STOPPED})
    found = locate_job(folder)
    assert found.config == folder / ".job_config.json" and found.ui_job
    assert found.log == folder / "log.txt"
    assert found.log_note == "log.txt (the latest run)"
    assert found.log_scan is not None and found.log_scan.phase == "periodic_sample"


def test_a_running_retry_does_not_hide_the_newest_crash(tmp_path: Path) -> None:
    folder = job_folder(tmp_path, RUNNING, {0: CRASHED_AT_LOAD, 1: CRASHED_AT_SAMPLE, 2: STOPPED})
    found = locate_job(folder)
    assert found.log == folder / "logs" / "1_log.txt"
    assert found.log_note == "logs/1_log.txt: the newest run that crashed (log.txt shows no crash)"
    assert found.log_scan is not None and found.log_scan.phase == "periodic_sample"


def age(path: Path, seconds: float) -> None:
    """Make ``path`` look last written ``seconds`` ago."""
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_a_newest_log_that_stopped_writing_mid_run_is_the_log(tmp_path: Path) -> None:
    """The newest run stalled or was killed an hour ago: that, not the crash before it, is
    what the user is looking at."""
    folder = job_folder(tmp_path, RUNNING, {0: CRASHED_AT_LOAD, 1: CRASHED_AT_SAMPLE})
    age(folder / "log.txt", 3600)
    found = locate_job(folder)
    assert found.log == folder / "log.txt"
    assert found.log_note == "log.txt (the latest run)"
    assert found.log_scan is not None and found.log_scan.ends_open


def test_a_running_retry_leaves_an_older_stalled_run_as_the_log(tmp_path: Path) -> None:
    folder = job_folder(tmp_path, RUNNING, {0: CRASHED_AT_LOAD, 1: RUNNING})
    age(folder / "logs" / "1_log.txt", 3600)
    found = locate_job(folder)
    assert found.log == folder / "logs" / "1_log.txt"
    assert found.log_note == (
        "logs/1_log.txt: the newest run that stopped without finishing (log.txt shows no crash)"
    )


def test_numbers_are_compared_as_numbers(tmp_path: Path) -> None:
    folder = job_folder(tmp_path, None, {9: CRASHED_AT_LOAD, 10: CRASHED_AT_SAMPLE})
    assert locate_job(folder).log == folder / "logs" / "10_log.txt"


def test_without_any_crash_the_newest_log_is_read_and_said_so(tmp_path: Path) -> None:
    folder = job_folder(tmp_path, RUNNING, {0: STOPPED})
    found = locate_job(folder)
    assert found.log == folder / "log.txt"
    assert found.log_note is not None and "no log in this folder shows a crash" in found.log_note


def test_a_folder_without_logs(tmp_path: Path) -> None:
    folder = job_folder(tmp_path, None, {})
    found = locate_job(folder)
    assert found.log is None and found.log_note is not None and "--log" in found.log_note


def test_a_cli_run_folder_has_config_yaml(tmp_path: Path) -> None:
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "config.yaml").write_text("job: extension\n", encoding="utf-8")
    (folder / "log.txt").write_text(CRASHED_AT_LOAD, encoding="utf-8")
    found = locate_job(folder)
    assert (found.config.name, found.ui_job, found.log) == (
        "config.yaml",
        False,
        folder / "log.txt",
    )


def test_the_ui_config_file_itself_finds_the_logs_beside_it(tmp_path: Path) -> None:
    folder = job_folder(tmp_path, CRASHED_AT_LOAD, {})
    found = locate_job(folder / ".job_config.json")
    assert found.log == folder / "log.txt" and found.ui_job


def test_any_other_config_file_has_no_log(tmp_path: Path) -> None:
    config = tmp_path / "my_job.yaml"
    config.write_text("job: extension\n", encoding="utf-8")
    (tmp_path / "log.txt").write_text(CRASHED_AT_LOAD, encoding="utf-8")
    found = locate_job(config)
    assert (found.config, found.log, found.log_note, found.ui_job) == (config, None, None, False)


def test_a_folder_with_no_config_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        locate_job(tmp_path)
    assert caught.value.one_line() == (
        f"{tmp_path}: no .job_config.json or config.yaml in this folder; pass the config file"
    )


def test_a_missing_path_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file or folder"):
        locate_job(tmp_path / "absent")


# --- a log that names another job is never taken for this one -----------------------------------


def banner(name: str, job_id: str | None = None) -> str:
    """AI Toolkit's start of a run: a web-UI job's id, then the job banner with its name."""
    printed_id = f'Job ID: "{job_id}"\n' if job_id is not None else ""
    return f"Running 1 job\n{printed_id}####\n# Running job: {name}\n####\n"


def test_a_log_whose_banner_names_another_job_is_passed_over(tmp_path: Path) -> None:
    """log.txt crashed, but its banner names job 'their_lora': the newest crash of this job,
    logs/1_log.txt, is read, and the note says which log was left out and why."""
    folder = job_folder(
        tmp_path,
        banner("their_lora") + CRASHED_AT_LOAD,
        {1: banner("my_lora") + CRASHED_AT_SAMPLE},
    )
    found = locate_job(folder, JobIdentity("my_lora"))
    assert found.log == folder / "logs" / "1_log.txt"
    assert found.log_note is not None
    assert "left out: log.txt looks like the log of job 'their_lora'" in found.log_note
    # Without knowing the job, the newest crash is taken, as before.
    assert locate_job(folder).log == folder / "log.txt"


def test_a_folder_of_another_jobs_logs_gives_no_log_and_says_whose(tmp_path: Path) -> None:
    folder = job_folder(tmp_path, banner("their_lora") + CRASHED_AT_LOAD, {})
    found = locate_job(folder, JobIdentity("my_lora"))
    assert found.log is None and found.log_scan is None
    assert found.log_note == (
        "log.txt looks like the log of job 'their_lora' (its job banner names job 'their_lora', "
        "and this job is 'my_lora'): not read; pass this job's log with --log"
    )


@pytest.mark.parametrize(
    ("printed", "job", "other"),
    [
        (banner("my_lora"), JobIdentity("my_lora"), False),
        (banner("their_lora"), JobIdentity("my_lora"), True),
        ("Running 1 job\nLoading Wan model\n", JobIdentity("my_lora"), False),  # says nothing
        (banner("their_lora"), JobIdentity(None), False),  # a config without a name
        # A web-UI job's id decides: a job renamed in the UI keeps its id and its logs ...
        (banner("old_name", "id-1"), JobIdentity("my_lora", "id-1"), False),
        # ... and a deleted job's logs, in the folder of a new job of the same name, are not
        # the new job's.
        (banner("my_lora", "id-0"), JobIdentity("my_lora", "id-1"), True),
        (banner("their_lora"), JobIdentity("my_lora", "id-1"), True),  # no id printed: the name
    ],
)
def test_whose_log_it_is_by_what_the_log_prints(
    printed: str, job: JobIdentity, other: bool
) -> None:
    scan = scan_text(printed + CRASHED_AT_LOAD)
    assert (job.other_job(scan) is not None) is other
