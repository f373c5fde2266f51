"""The diagnosis on real OOM reports: every case in ``../shared/cases/`` (skipped when absent).

Each case folder holds the job config (``job.yaml``), the log the user posted (``log.txt``) and
the label (``expected.yaml``: ``crash_moment``, ``model_kind``). The config is read through
the real job document and its view, exactly as the command does.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from oom_wizard.formats.document import load_document
from oom_wizard.logs.scan import scan_log
from oom_wizard.rules.diagnosis import diagnose
from tests.support.corpus import shared_cases

CASE_DIRS = shared_cases()


@pytest.mark.skipif(not CASE_DIRS, reason="../shared/cases is not beside the checkout")
@pytest.mark.parametrize("case", CASE_DIRS, ids=[p.name[:40] for p in CASE_DIRS])
def test_case_moment_and_model_kind(case: Path) -> None:
    expected = yaml.safe_load((case / "expected.yaml").read_text(encoding="utf-8"))
    view = load_document(case / "job.yaml").view()
    result = diagnose(scan_log(case / "log.txt"), view)
    assert (result.moment, result.model_kind) == (
        expected["crash_moment"],
        expected["model_kind"],
    ), result.verdict
    assert result.evidence, "a diagnosis shows the lines it rests on"


@pytest.mark.skipif(not CASE_DIRS, reason="../shared/cases is not beside the checkout")
@pytest.mark.parametrize("case", CASE_DIRS, ids=[p.name[:40] for p in CASE_DIRS])
def test_case_log_alone_still_finds_the_moment(case: Path) -> None:
    """Without the config the moment is the same, except where the config is the evidence
    (a conservative config, several buckets), and the kind is unknown."""
    expected = yaml.safe_load((case / "expected.yaml").read_text(encoding="utf-8"))
    result = diagnose(scan_log(case / "log.txt"), None)
    assert result.model_kind is None
    assert result.moment is not None
    if expected["crash_moment"] in ("loading", "sampling", "early_steps", "environment"):
        assert result.moment == expected["crash_moment"], result.verdict
