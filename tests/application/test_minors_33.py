"""The application layer's share of issue 33's minors: each a statement the user reads that
must be true."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from oom_wizard.application.autopilot import NEXT_STEPS, what_is_left
from oom_wizard.cli import main
from oom_wizard.formats.document import load_document
from tests.support.autopilot_support import DEMO, FLUX, SCENARIOS, play


def test_run_does_not_suggest_quantizing_a_model_that_is_quantized_already(
    tmp_path: Path,
) -> None:
    quantized = load_document(DEMO / FLUX)
    assert all(p.model.quantize for p in quantized.view().processes)
    words = " ".join(what_is_left(quantized))
    assert "a quantized one" not in words
    assert "a lower qtype (model.qtype: model.quantize is on already)" in words
    text = (DEMO / FLUX).read_text(encoding="utf-8")
    plain_file = tmp_path / "plain.yaml"
    plain_file.write_text(text.replace("quantize: true\n", "quantize: false\n", 1), "utf-8")
    plain = load_document(plain_file)
    assert not any(p.model.quantize for p in plain.view().processes)
    assert what_is_left(plain) == NEXT_STEPS


def test_history_and_scale_up_offer_no_re_add_after_the_last_attempt_crashed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On an 8 GiB card the job crashes at loading twice and ``run`` stops: the last attempt
    crashed with the saved config's own settings, so ``history`` offers no re-add and
    ``scale-up`` warns before one (issue 33, left from the last round)."""
    outcome = play(tmp_path, next(s for s in SCENARIOS if s.name == "image-ladder-exhausted"))
    assert outcome.status == "stopped" and outcome.attempts[-1].outcome == "crashed"
    capsys.readouterr()
    assert main(["history", str(outcome.config)]) == 0
    text = capsys.readouterr().out
    assert "Next scale-up: none offered; " in text
    assert re.search(r"the last attempt, \d+, crashed with this config's own settings", text)
    assert "Later, one setting back per retry" not in text
    assert main(["scale-up", str(outcome.config)]) == 0
    assert re.search(
        r"warning: the last attempt, \d+, crashed with this config's own settings",
        capsys.readouterr().out,
    )
