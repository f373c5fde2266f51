"""The one spelling of counts, titles inside sentences and memory verdicts, and a check that
no front end or rule spells them again on its own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from oom_wizard.spelling import counted, mid_sentence, verdict

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("count", "words", "expected"),
    [
        (1, ("skipped batch", "skipped batches"), "1 skipped batch"),
        (2, ("skipped batch", "skipped batches"), "2 skipped batches"),
        (0, ("step",), "0 steps"),
        (1, ("process", "processes"), "1 process"),
        (3, ("process", "processes"), "3 processes"),
    ],
)
def test_a_count_agrees_with_its_noun(count: int, words: tuple[str, ...], expected: str) -> None:
    assert counted(count, *words) == expected


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        ("LoRA rank as it was", "LoRA rank as it was"),
        ("Larger batch", "larger batch"),
        ("OOM skips", "OOM skips"),
        ("Re-add the biggest resolution", "re-add the biggest resolution"),
    ],
)
def test_a_title_inside_a_sentence_keeps_its_acronym(title: str, expected: str) -> None:
    assert mid_sentence(title) == expected


def test_a_verdict_in_words() -> None:
    assert [verdict(v) for v in ("fits", "tight", "wont_fit")] == ["fits", "tight", "won't fit"]


def test_no_module_lowers_a_title_by_hand() -> None:
    by_hand = re.compile(r"\[:1\]\.lower\(\)|\[0\]\.lower\(\)")
    found = [
        f"{path.relative_to(REPO)}:{number}"
        for folder in ("wizard", "screens")
        for path in sorted((REPO / folder).rglob("*.py"))
        if path.name != "spelling.py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if by_hand.search(line)
    ]
    assert not found, "use oom_wizard.spelling.mid_sentence: " + ", ".join(found)


#: Plurals and verdicts spelt by hand: ``{n} skip(s)``, ``step{'s' if n != 1 else ''}``,
#: ``verdict.replace("_", " ")``.
HAND_SPELT = re.compile(
    r"""\}\s?[A-Za-z -]+\((s|es)\)|\{'e?s' if|\{"e?s" if"""
    r"""|verdict.{0,24}\.replace\(["']_["'], ["'] ["']\)"""
)


def test_no_module_spells_a_plural_or_a_verdict_by_hand() -> None:
    found = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for folder in ("wizard", "screens")
        for path in sorted((REPO / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if HAND_SPELT.search(line)
    ]
    assert not found, "use oom_wizard.spelling.counted or .verdict:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "line",
    [
        """f"{count} OOM skip(s)\"""",
        """f"{n} step{'s' if n != 1 else ''}\"""",
        """f"{n} process{'es' if n > 1 else ''}\"""",
        """f"skipped {count} batch(es) for lack\"""",
        """f"of {ram:.1f} GiB: {self.verdict.replace('_', ' ')}\"""",
        """verdict = host.verdict.replace("_", " ")""",
    ],
)
def test_the_check_catches_a_hand_spelt_plural(line: str) -> None:
    assert HAND_SPELT.search(line)
