"""The load-edit-save fidelity check of ``tests/support/fidelity.py``, run under pytest.

The project's own fixture configs are always checked, with the project's own exactness
checker. AI Toolkit's example configs in ``../shared/aitk-examples`` are checked too when they
are beside the checkout, with the independent ``../shared/checks/verify_change.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.corpus import EXAMPLES, OWN_CONFIGS, shared_examples, verify_script
from tests.support.fidelity import Outcome, configs_in, load_verifier, run_fidelity


def _assert_all_passed(outcomes: list[Outcome], folder: Path) -> None:
    failures = [outcome.line() for outcome in outcomes if not outcome.ok]
    assert failures == []
    # every config, plus its CRLF, BOM, CRLF+BOM, fields-missing and two JSON copies
    assert len(outcomes) == len(configs_in(folder)) + 6
    # the variants were really edited (a file is "refused" only when AI Toolkit's own
    # loader rejects it too, as it does one upstream example with an unclosed quote)
    variants = [outcome for outcome in outcomes if "[" in outcome.name]
    assert variants and not any(outcome.refused for outcome in variants)


def test_every_own_config_survives_set_and_passes_the_exactness_check(tmp_path: Path) -> None:
    outcomes = run_fidelity(OWN_CONFIGS, tmp_path)
    _assert_all_passed(outcomes, OWN_CONFIGS)
    assert not any(outcome.refused for outcome in outcomes)


@pytest.mark.skipif(
    not shared_examples() or verify_script() is None,
    reason="../shared/aitk-examples or ../shared/checks/verify_change.py is absent",
)
def test_every_example_config_survives_set_and_passes_verify_change(tmp_path: Path) -> None:
    script = verify_script()
    assert script is not None and EXAMPLES is not None
    _assert_all_passed(run_fidelity(EXAMPLES, tmp_path, load_verifier(script)), EXAMPLES)
