"""Every attempt of ``run`` in the final change log, and a scale-up that knows what crashed
(issue 33, N-M5).

On an 18 GiB card the stand-in trainer crashes twice with the demo's image job: the full run
in its first steps, then the validation run of the first fix while it draws its first sample.
The lighter samples of the second fix pass, and the full run finishes. The final change log
keeps all four attempts in order, for a config file and for a job of AI Toolkit's web UI;
``history`` shows them, and stops offering the re-add that gives back the samples attempt 2
crashed with; ``scale-up`` warns before it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from oom_wizard.application.history import next_scale_ups, read_history
from oom_wizard.application.saving import SaveResult, ToFile
from oom_wizard.application.scale_up import (
    next_scale_up,
    offered_after_save,
    open_for_scale_up,
    prepare_scale_up,
    save_scale_up,
)
from oom_wizard.cli import main
from oom_wizard.formats.document import load_document
from oom_wizard.request import JobRequest
from oom_wizard.storage.changelog import changelog_path_for, read_changelog
from oom_wizard.storage.jobdb import load_job
from tests.support.aitk_db import add_job, make_db, stringify
from tests.support.autopilot_support import DEMO, FAKE_COMMAND, FLUX, Ran, run_here

#: How the four attempts end, in order.
TIMELINE = [
    ("full", "crashed"),
    ("validation", "crashed"),
    ("validation", "passed_validation"),
    ("full", "finished"),
]
#: What ``history`` says of each, in order. The first crash is in step 4: the bar's last
#: reading, 3/3000, counts the steps done (:func:`oom_wizard.logs.result.crash_step_of`).
ENDINGS = [
    "full run · crashed at step 4 in training (early_steps)",
    "validation run · crashed at step 250 in periodic_sample (sampling)",
    "validation run · passed validation (251 steps)",
    "full run · finished (3000 steps)",
]
JOB = "flux_portrait_lora"


@pytest.fixture
def run_auto(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., Ran]:
    """``oom-wizard run TARGET --auto`` with the stand-in trainer on an 18 GiB card (in this
    process, see ``run_here``; the trainer is a real child)."""

    def run(folder: Path, *target: str) -> Ran:
        args = ["run", *target, "--auto", "--", *FAKE_COMMAND]
        return run_here(monkeypatch, capsys, folder, args, {"FAKE_VRAM_GB": "18"})

    return run


def timeline(text: str) -> list[str]:
    """``history``'s attempt lines, in order."""
    block = text[text.index("Attempts (oom-wizard run)") :].split("\n\n")[0]
    return [line for line in block.splitlines()[1:] if line.strip()]


def test_a_file_job_keeps_every_attempt_and_the_scale_up_knows_the_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], run_auto: Callable[..., Ran]
) -> None:
    source = tmp_path / "portrait.yaml"
    source.write_bytes((DEMO / FLUX).read_bytes())

    done = run_auto(tmp_path, str(source))

    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    final = tmp_path / "portrait.oomfix-3.yaml"
    log = read_changelog(changelog_path_for(final))
    assert [(a.kind, a.outcome) for a in log.attempts] == TIMELINE
    assert [Path(a.config).name for a in log.attempts] == [
        "portrait.yaml",
        "portrait.oomfix.yaml",
        "portrait.oomfix-2.yaml",
        "portrait.oomfix-3.yaml",
    ]
    assert main(["history", str(final)]) == 0
    text = capsys.readouterr().out
    lines = timeline(text)
    assert len(lines) == 4
    for number, (line, ending) in enumerate(zip(lines, ENDINGS, strict=True), start=1):
        assert line.startswith(f"  {number}. ") and ending in line, line
    # The 8-bit weights attempt 2 crashed with in a sample (its fix: 4-bit weights, what
    # lowers every phase at the least loss) are not offered back; the biggest bucket is.
    assert (
        "The scale-up stops before: Full-precision weights [quantize]: this gives back what "
        "attempt 2 crashed with"
    ) in text
    assert "Next scale-up: Re-add the biggest resolution [top_bucket]" in text
    assert text.rstrip().endswith("1. Re-add the biggest resolution\n  2. Larger batch")

    # The app gives the biggest bucket back (its scale-up screen's save): its result screen
    # offers back what history then offers, and stops where it stops (issue 33: the app
    # listed every re-add, the crashed samples among them).
    state = open_for_scale_up(JobRequest(final, probe=False))
    readd = next_scale_up(state)
    assert readd is not None and readd.step == "top_bucket"
    ready = prepare_scale_up(state, readd)
    saved = save_scale_up(state, readd, ToFile(tmp_path / "app-side.yaml"), ready=ready)
    assert isinstance(saved, SaveResult)  # a file destination writes a file
    offered = offered_after_save(saved, ready)
    assert offered == next_scale_ups(read_history(str(saved.config)))
    assert [readd.step for readd in offered.ahead] == ["batch_size"]
    assert offered.stopped is not None
    assert offered.stopped.startswith(
        "Full-precision weights [quantize]: this gives back what attempt 2 crashed with"
    )

    assert main(["scale-up", str(final), "--yes"]) == 0  # the biggest bucket back
    assert main(["scale-up", str(tmp_path / "portrait.oomfix-4.yaml"), "--yes"]) == 0  # batch
    capsys.readouterr()
    assert main(["scale-up", str(tmp_path / "portrait.oomfix-5.yaml")]) == 0
    shown = capsys.readouterr().out
    assert "Next re-add: Full-precision weights [quantize]" in shown
    assert "warning: this gives back what attempt 2 crashed with (" in shown
    assert 'config.process[0].model.qtype "qfloat8"' in shown


def test_a_web_ui_job_keeps_every_attempt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], run_auto: Callable[..., Ran]
) -> None:
    db = make_db(tmp_path / "aitk_db.db")
    add_job(db, JOB, text=stringify(load_document(DEMO / FLUX).tree), status="error")

    done = run_auto(tmp_path, "--db", str(db), "--job", JOB)

    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    log = read_changelog(load_job(db, JOB).changelog_path)
    assert [(a.kind, a.outcome) for a in log.attempts] == TIMELINE
    assert main(["history", "--db", str(db), "--job", JOB]) == 0
    text = capsys.readouterr().out
    assert f"  job '{JOB}' of {db}" in text
    assert "original config" not in text  # no pseudo path for the row
    lines = timeline(text)
    assert len(lines) == 4
    for line, ending in zip(lines, ENDINGS, strict=True):
        assert ending in line, line
    assert "The scale-up stops before: Full-precision weights [quantize]" in text
