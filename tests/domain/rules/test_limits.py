"""One set of value limits (issue 32, R4-4): ``set``'s check and every reader ask the same
rule, and the figures a card or a run records are held to it too."""

from __future__ import annotations

from pathlib import Path

import pytest

from oom_wizard.cli import main
from oom_wizard.errors import WizardError
from oom_wizard.rules.limits import card_problem, check_changelog, value_problem
from oom_wizard.rules.values import validate_value
from oom_wizard.storage.changelog import AttemptRecord, ChangeEntry, ChangeLog, FileRef

FIELD = "config.process[0].train.batch_size"
FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "configs" / "flux_portrait_24gb.yaml"


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


HUGE = 10**400  # past a float's range: math.isfinite and float() raise OverflowError on it


@pytest.mark.parametrize(
    "field",
    [
        "config.process[0].train.steps",
        "config.process[0].sample.sample_every",
        "config.process[0].train.batch_size",
        "config.process[0].network.linear_alpha",  # no rule of its own: the float's range
        "config.process[0].datasets[0].resolution[1]",
    ],
)
@pytest.mark.parametrize("value", [HUGE, -HUGE])
def test_a_number_of_hundreds_of_digits_is_refused_in_one_short_line(
    field: str, value: int
) -> None:
    """R5-4: a ``steps`` of a few hundred digits was an OverflowError in every command."""
    problem = value_problem(field, value)
    assert problem is not None and len(problem) < 120, problem
    if "linear_alpha" not in field and "resolution" not in field:
        assert not validate_value(field, value, None).ok


def test_a_huge_step_count_in_a_config_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = FIXTURE.read_text(encoding="utf-8").replace("steps: 3000", f"steps: {HUGE}")
    config = tmp_path / "job.yaml"
    config.write_text(text, encoding="utf-8")

    status = main(["plan", str(config), "--no-probe"])

    err = capsys.readouterr().err
    assert status == 2 and "train.steps" in err and len(err.splitlines()) == 1, err
