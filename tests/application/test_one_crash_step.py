"""One crash, one step number (issue 33): the same log, read by ``diagnose`` (text and JSON),
``plan``, ``run``'s attempt line and ``history``, ``watch``'s status and the app's load screen,
names the step it crashed in as :func:`oom_wizard.logs.result.crash_step` has it. Before,
a crash under the bar's ``4/3000`` read "step 5" in the verdict, "last step 4/3000" in the
log's row and "step 4/3000" on the load screen; ``run`` said 5 and 6, ``watch`` 59 and 58."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from oom_wizard.application.attempts import describe_record
from oom_wizard.application.settling import last_run, start
from oom_wizard.cli import main
from oom_wizard.logs.result import crash_step
from oom_wizard.logs.scan import scan_log
from oom_wizard.logs.tail import LiveJob
from oom_wizard.request import JobRequest
from oom_wizard.screens.watch import progress_text
from oom_wizard.storage.changelog import changelog_path_for, read_changelog
from tests.support.autopilot_support import SCENARIOS, play
from tests.support.corpus import OWN_CONFIGS

BAR = "lora:   0%|          | {n}/3000 [00:{n:02d}<3:10:00,  3.91s/it, lr: 1.0e-04 loss: 3.1e-01]"
OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 23.99 GiB of which 100.00 MiB is free. Including non-PyTorch memory, this "
    "process has 23.80 GiB memory in use. Of the allocated memory 22.90 GiB is allocated by "
    "PyTorch, and 300.00 MiB is reserved by PyTorch but unallocated."
)
#: Any step number a front end words (``step 5``, ``steps 4``), not the log's own bar lines.
STEP = re.compile(r"\bstep (\d+)")


def crashed_job(folder: Path, done: int) -> tuple[Path, Path]:
    """A FLUX config and its log: the bar up to ``done``/3000, then PyTorch's OOM."""
    config = folder / "job.yaml"
    shutil.copyfile(OWN_CONFIGS / "flux_portrait_24gb.yaml", config)
    log = folder / "job.log.txt"
    bars = [BAR.format(n=n) for n in range(done + 1)]
    lines = ["Loading Flux model", *bars, "Traceback (most recent call last):", OOM]
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return config, log


def said(text: str) -> set[int]:
    """The step numbers a front end's words say (the log's quoted bar lines left out)."""
    words = [line for line in text.splitlines() if "%|" not in line]
    return {int(n) for n in STEP.findall("\n".join(words))}


@pytest.mark.parametrize("done", [4, 58])
def test_every_front_end_names_the_step_the_log_crashed_in(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], done: int
) -> None:
    config, log = crashed_job(tmp_path, done)
    step = crash_step(scan_log(log))
    assert step == done + 1  # the bar counts the steps done: the one running crashed

    capsys.readouterr()
    assert main(["diagnose", str(config), "--log", str(log), "--no-probe"]) == 0
    assert said(capsys.readouterr().out) == {step}
    assert main(["diagnose", str(config), "--log", str(log), "--no-probe", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["crash_step"] == step
    assert main(["plan", str(config), "--log", str(log), "--no-probe"]) == 0
    plan = capsys.readouterr()
    assert f"it crashed in step {step} of 3000" in plan.out + plan.err

    # The app's load screen renders this row.
    opened = last_run(start(JobRequest(target=config, log=log, probe=False)))
    assert opened is not None and said(opened.where) == {step}

    # watch: its status line once the crash is told.
    live = LiveJob(log, grace_s=0.0)
    status = live.poll().status
    assert status.crashed and status.crash_step == step
    assert said(progress_text(status)) == {step}


def test_run_and_history_name_the_step_the_attempts_log_crashed_in(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The stand-in trainer crashes in its first steps (its bar, like AI Toolkit's, counts
    the steps done): ``run``'s line and ``history``'s say the step ``diagnose`` says."""
    outcome = play(tmp_path, next(s for s in SCENARIOS if s.name == "image-early-steps"))
    crashed = [a for a in outcome.attempts if a.outcome == "crashed"]
    assert crashed
    records = read_changelog(changelog_path_for(outcome.config)).attempts
    for attempt in crashed:
        step = crash_step(scan_log(attempt.log))
        assert step is not None
        assert said(attempt.describe()) == {step}
        record = next(r for r in records if r.log == str(attempt.log))
        assert said(describe_record(record)) == {step}
        capsys.readouterr()
        assert main(["diagnose", str(attempt.config), "--log", str(attempt.log), "--no-probe"]) == 0
        assert step in said(capsys.readouterr().out)
