"""Names that point somewhere: the modules a preset file says read it exist, and every test
file is named for what it tests (never an issue number)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: A project path in a comment: ``wizard/rules/catalog.py``, ``bench/calibrate_memory.py``.
NAMED = re.compile(r"\b((?:wizard|screens|presets|bench|tests)/[\w/]+\.py)\b")


def test_every_module_a_preset_names_exists() -> None:
    missing = [
        f"{preset.name}: {named}"
        for preset in sorted((REPO / "presets").glob("*.yaml"))
        for named in NAMED.findall(preset.read_text(encoding="utf-8"))
        if not (REPO / named).is_file()
    ]
    assert not missing


def test_a_preset_header_names_the_module_that_reads_it() -> None:
    catalog = (REPO / "wizard" / "rules" / "catalog.py").read_text(encoding="utf-8")
    header = (REPO / "presets" / "ladders.yaml").read_text(encoding="utf-8").splitlines()[0]
    assert "wizard/rules/catalog.py" in header and '"ladders.yaml"' in catalog


#: A test file named after an issue, a round of findings or a number, not after what it tests.
BY_EVENT = re.compile(r"issue|minors?_|round|_\d+\b")


def test_every_test_file_is_named_for_what_it_tests() -> None:
    named = [
        str(path.relative_to(REPO))
        for path in sorted((REPO / "tests").rglob("test_*.py"))
        if BY_EVENT.search(path.stem)
    ]
    assert not named
