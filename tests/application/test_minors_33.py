"""The application layer's share of issue 33's minors: each a statement the user reads that
must be true."""

from __future__ import annotations

from pathlib import Path

from oom_wizard.application.autopilot import NEXT_STEPS, what_is_left
from oom_wizard.formats.document import load_document
from tests.support.autopilot_support import DEMO, FLUX


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
