"""The one wording of the log's verdict on the moment
(:func:`oom_wizard.application.labels.log_claim`):
a sure verdict points to its moment, an unsure one asks, and neither borrows the other's words."""

from __future__ import annotations

import copy
import io
from pathlib import Path
from typing import Any

import pytest
import yaml

from oom_wizard.application.labels import log_claim
from oom_wizard.formats.view import build_view
from oom_wizard.logs.scan import scan_text
from oom_wizard.rules.diagnosis import Diagnosis, diagnose

JOB: dict[str, Any] = {
    "job": "extension",
    "config": {
        "name": "lora",
        "process": [
            {
                "type": "sd_trainer",
                "datasets": [{"folder_path": "/data", "resolution": [1024]}],
                "train": {"batch_size": 1, "steps": 2000},
                "model": {"name_or_path": "black-forest-labs/FLUX.1-dev", "is_flux": True},
            }
        ],
    },
}
OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 23.99 GiB of which 100.00 MiB is free. Including non-PyTorch memory, this "
    "process has 23.80 GiB memory in use. Of the allocated memory 22.90 GiB is allocated by "
    "PyTorch, and 300.00 MiB is reserved by PyTorch but unallocated."
)


def diagnosed(*lines: str) -> Diagnosis:
    view = build_view(copy.deepcopy(JOB), file="job.yaml", locate=lambda path: None)
    return diagnose(scan_text("\n".join(lines) + "\n"), view)


def test_a_sure_verdict_points_to_its_moment() -> None:
    bar = "my_lora:   0%|          | 3/2000 [00:12<2:10:00,  3.91s/it, lr: 1.0e-04 loss: 0.31]"
    claim = log_claim(diagnosed("Loading Flux model", bar, OOM))
    assert claim.sure and claim.likeliest == "early_steps"
    assert claim.headline == "The log points to: In the first training steps"


def test_an_unsure_verdict_asks_and_never_says_the_log_points_to() -> None:
    result = diagnosed(OOM)
    claim = log_claim(result)
    assert result.confidence == "low" and not claim.sure and claim.likeliest == "loading"
    assert "points to" not in claim.headline
    assert claim.headline.startswith("Not sure: the log does not settle when it crashed (")
    assert result.basis in claim.headline and claim.headline.endswith("pick what you saw.")


def test_no_log_and_no_moment_ask_without_a_guess() -> None:
    assert not log_claim(None).sure and log_claim(None).likeliest is None
    cudnn = (
        "RuntimeError: Expected mha_graph.execute(h, v, w.get()).is_good() to be true, but got "
        "false."
    )
    claim = log_claim(diagnosed("Loading Flux model", "Traceback (most recent call last):", cudnn))
    assert (claim.sure, claim.likeliest) == (False, None)
    assert claim.headline == "The log does not say when it crashed: pick what you saw."


def test_run_without_auto_says_the_log_does_not_settle_it_before_it_asks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run``'s asker prints the verdict and the claim; with no terminal it then stops."""
    from oom_wizard.application.autopilot import NO_TERMINAL
    from oom_wizard.application.settling import start
    from oom_wizard.commands.run import _ask
    from oom_wizard.request import JobRequest

    config = tmp_path / "job.yaml"
    config.write_text(yaml.safe_dump(JOB), encoding="utf-8")
    log = tmp_path / "log.txt"
    log.write_text(OOM + "\n", encoding="utf-8")
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    state = start(JobRequest(config, log, probe=False))

    assert _ask(state, ("Lighter batches: train.batch_size 2 → 1",)) is NO_TERMINAL
    shown = capsys.readouterr().out
    assert "likeliest moment: loading, not sure" in shown
    assert "Not sure: the log does not settle when it crashed" in shown
    assert "points to" not in shown


def test_watch_s_crash_report_says_how_sure_in_the_same_words(tmp_path: Path) -> None:
    """A library fault (sure, not memory) and an OOM line alone (not sure), as ``watch`` reads
    them: the crash panel's second line is the diagnosis's certainty or the unsure claim."""
    from oom_wizard.application.follow import WatchTarget
    from oom_wizard.application.watching import diagnose_crash

    config = tmp_path / "job.yaml"
    config.write_text(yaml.safe_dump(JOB), encoding="utf-8")
    log = tmp_path / "log.txt"
    log.write_text(
        "Loading Flux model\nTraceback (most recent call last):\n"
        "torch.AcceleratorError: CUDA error: an illegal memory access was encountered\n",
        encoding="utf-8",
    )
    fault = diagnose_crash(WatchTarget(log=log, config=config, name="lora"))
    assert fault.moment is None and fault.certainty.startswith("Sure (high): ")
    log.write_text(OOM + "\n", encoding="utf-8")
    unsure = diagnose_crash(WatchTarget(log=log, config=None, name="lora"))
    assert unsure.certainty.startswith("Not sure: the log does not settle when it crashed")
