"""Two saves under the default name at the same moment: both succeed, one takes ``-2``.

Real concurrent processes. The first test forks two children that both pick the first free
name and then wait for each other (a pipe each, at the save's first write step, through the
save's ``STEP_HOOK`` seam): the race every time, not 1 run in 20, so two rounds say all it
can. The second runs two plain ``oom-wizard set`` processes at once, a few times: the same
race as a user meets it, where it may or may not happen.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

from oom_wizard.cli import main
from oom_wizard.storage import atomic
from oom_wizard.storage.changelog import sha256_of

FORCED_ROUNDS = 2
PLAIN_ROUNDS = 3
EDIT = "config.process[0].train.batch_size=2"


def write_job(folder: Path) -> Path:
    source = folder / "job.yaml"
    source.write_text(
        "job: extension\nconfig:\n  name: race\n  process:\n    - type: sd_trainer\n"
        "      train: {batch_size: 4, steps: 100}\n"
        "      model: {name_or_path: black-forest-labs/FLUX.1-dev, arch: flux}\n"
        "      datasets: [{folder_path: /d, resolution: [512]}]\n",
        encoding="utf-8",
    )
    return source


def pairs_are_whole(folder: Path) -> list[str]:
    """The saved configs, each checked against the change log beside it."""
    configs = sorted(p.name for p in folder.glob("job.oomfix*.yaml"))
    for name in configs:
        config = folder / name
        log = json.loads(config.with_name(config.stem + ".changelog.json").read_text("utf-8"))
        assert log["output"]["sha256"] == sha256_of(config.read_bytes()), name
    assert not [p for p in os.listdir(folder) if ".oomw-" in p]
    return configs


def fork_save(source: Path, ready_w: int, go_r: int) -> int:
    """A child that saves under the default name, pausing at its first write step until
    the other child has chosen its name too."""
    gc.freeze()
    pid = os.fork()
    if pid != 0:
        gc.unfreeze()
        return pid
    status = 99
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        waited: list[bool] = []

        def hook(step: str, path: Path) -> None:
            if not waited:
                waited.append(True)
                os.write(ready_w, b"r")
                os.read(go_r, 1)

        atomic.STEP_HOOK = hook
        status = main(["set", str(source), EDIT])
    finally:
        os._exit(status)


def test_two_saves_that_pick_the_same_default_name_both_succeed(tmp_path: Path) -> None:
    for round_ in range(FORCED_ROUNDS):
        folder = tmp_path / f"round{round_}"
        folder.mkdir()
        source = write_job(folder)
        ready_r, ready_w = os.pipe()
        go_r, go_w = os.pipe()
        children = [fork_save(source, ready_w, go_r) for _ in range(2)]
        assert os.read(ready_r, 1) + os.read(ready_r, 1) == b"rr"  # both chose a name
        os.write(go_w, b"gg")
        statuses = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children]
        for fd in (ready_r, ready_w, go_r, go_w):
            os.close(fd)
        assert statuses == [0, 0]
        assert pairs_are_whole(folder) == ["job.oomfix-2.yaml", "job.oomfix.yaml"]


def test_two_plain_concurrent_saves_both_succeed(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "oom_wizard", "set"]
    for round_ in range(PLAIN_ROUNDS):
        folder = tmp_path / f"round{round_}"
        folder.mkdir()
        source = write_job(folder)
        runs = [
            subprocess.Popen(
                [*command, str(source), EDIT],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        results = [(run.wait(), run.stderr.read() if run.stderr else "") for run in runs]
        assert [status for status, _ in results] == [0, 0], results
        assert pairs_are_whole(folder) == ["job.oomfix-2.yaml", "job.oomfix.yaml"]
