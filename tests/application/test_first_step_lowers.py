"""The first step offered lowers what crashed (issue 40): a crash while quantizing the model
during load is not offered lighter samples first."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.plan_support import cli

REPORT = Path(__file__).resolve().parents[1] / "fixtures" / "reports"
QUANTIZE = REPORT / "aitk-872-flux2-mistral-quantize"


def test_a_crash_while_quantizing_is_first_offered_what_lowers_the_load() -> None:
    status, out, err = cli(
        "diagnose", QUANTIZE / "job.yaml", "--log", QUANTIZE / "log.txt", "--no-probe", "--json"
    )
    assert status == 0, err
    found = json.loads(out)
    assert found["moment"] == "loading" and found["phase"] == "quantize"
    first = found["first_change"]
    assert not first.startswith("Lighter samples") and "skip_first_sample" not in first
    assert first.startswith("Quantized weights")
