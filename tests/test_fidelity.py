"""The load-edit-save fidelity check of ``tests/fidelity.py``, run under pytest.

Skipped when ``../shared/aitk-examples`` (AI Toolkit's own example configs) or the
independent checker ``../shared/checks/verify_change.py`` is not beside the checkout.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fidelity import EXAMPLES, VERIFY_SCRIPT, configs_in, load_verifier, run_fidelity

pytestmark = pytest.mark.skipif(
    not (EXAMPLES.is_dir() and VERIFY_SCRIPT.is_file()),
    reason="../shared/aitk-examples or ../shared/checks/verify_change.py is absent",
)


def test_every_example_config_survives_set_and_passes_verify_change(tmp_path: Path) -> None:
    outcomes = run_fidelity(EXAMPLES, tmp_path, load_verifier())

    failures = [outcome.line() for outcome in outcomes if not outcome.ok]
    assert failures == []
    # every example, plus its CRLF, BOM, CRLF+BOM, fields-missing and two JSON copies
    assert len(outcomes) == len(configs_in(EXAMPLES)) + 6
    # the variants were really edited (a file is "refused" only when AI Toolkit's own
    # loader rejects it too, as it does one upstream example with an unclosed quote)
    variants = [outcome for outcome in outcomes if "[" in outcome.name]
    assert variants and not any(outcome.refused for outcome in variants)
