"""One set of value limits (issue 32, R4-4): ``set``'s check and every reader ask the same
rule, and the figures a card or a run records are held to it too."""

from __future__ import annotations

import pytest

from oom_wizard.errors import WizardError
from oom_wizard.rules.limits import card_problem, check_changelog, value_problem
from oom_wizard.rules.values import validate_value
from oom_wizard.storage.changelog import AttemptRecord, ChangeEntry, ChangeLog, FileRef

FIELD = "config.process[0].train.batch_size"


@pytest.mark.parametrize("value", [0, 1, 256, 257, 10**50, 2.5, float("nan"), float("inf")])
def test_set_and_the_readers_draw_the_same_line(value: float) -> None:
    typed = validate_value(FIELD, value, None)
    read = value_problem(FIELD, value)
    assert typed.ok == (read is None), (typed, read)


def test_sample_every_0_is_a_real_config_value() -> None:
    """Real configs turn periodic samples off with 0; a reader must not refuse them."""
    assert value_problem("config.process[0].sample.sample_every", 0) is None


@pytest.mark.parametrize(("gib", "ok"), [(1.0, True), (141.0, True), (0.5, False), (1e308, False)])
def test_a_card_is_between_1_and_1024_gib(gib: float, ok: bool) -> None:
    assert (card_problem(gib) is None) == ok


def attempt(peak: float | None, card: float | None) -> AttemptRecord:
    return AttemptRecord(
        at="2026-01-01T00:00:00+00:00", config="a.yaml", outcome="finished", peak_gib=peak,
        card_gib=card,
    )  # fmt: skip


LOG = ChangeLog(
    source=FileRef(path="a.yaml"),
    output=FileRef(path="b.yaml"),
    changes=(ChangeEntry(run=0, path=FIELD, before=4, after=2),),
)


@pytest.mark.parametrize("peak", [None, 0.0, 0.4, 23.9])
def test_a_recorded_small_peak_is_a_real_figure(peak: float | None) -> None:
    check_changelog(LOG.with_attempts([attempt(peak, 24.0)]), "b.changelog.json")


@pytest.mark.parametrize(("peak", "card"), [(-1.0, 24.0), (float("inf"), 24.0), (1.0, 1e9)])
def test_a_recorded_figure_no_card_has_is_a_hand_edit(peak: float, card: float) -> None:
    with pytest.raises(WizardError, match="the change log was edited"):
        check_changelog(LOG.with_attempts([attempt(peak, card)]), "b.changelog.json")
