"""Where the tests find their inputs: the project's own fixtures, and ``../shared`` if there.

This is the one place that computes the ``../shared`` path. A fresh clone has nothing beside
it, and the suite is complete without it: every behaviour is covered by the fixtures under
``tests/fixtures/``. What ``../shared`` adds (AI Toolkit's own example configs, the design's
real OOM cases, the independent ``verify_change.py``) is an extra check, skipped cleanly when
absent. ``OOM_WIZARD_SHARED`` points elsewhere, or to nothing (``OOM_WIZARD_SHARED=``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
#: Job configs written for this project in AI Toolkit's shapes (YAML, pretty and one-line JSON).
OWN_CONFIGS = FIXTURES / "configs"
#: Real OOM reports rewritten as fixtures (``job.yaml``, ``log.txt``, ``expected.yaml``).
REPORTS = FIXTURES / "reports"

_override = os.environ.get("OOM_WIZARD_SHARED")
SHARED: Path | None = (
    (Path(_override) if _override else None) if _override is not None else REPO.parent / "shared"
)
EXAMPLES = SHARED / "aitk-examples" if SHARED else None
CASES = SHARED / "cases" if SHARED else None
VERIFY_SCRIPT = SHARED / "checks" / "verify_change.py" if SHARED else None

CONFIG_SUFFIXES = (".yaml", ".yml", ".json", ".jsonc")


def _configs_in(folder: Path | None) -> list[Path]:
    if folder is None or not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in CONFIG_SUFFIXES)


def own_configs() -> list[Path]:
    """The project's own fixture configs."""
    return _configs_in(OWN_CONFIGS)


FLOOR_CONFIG = "floor_everything.yaml"
"""The own config already at the ladder's floor: nothing is left to roll back in it."""


def rollable_configs() -> list[Path]:
    """The own configs that have something left to roll back (all but :data:`FLOOR_CONFIG`)."""
    return [path for path in own_configs() if path.name != FLOOR_CONFIG]


def shared_examples() -> list[Path]:
    """AI Toolkit's example configs from ``../shared`` (empty when it is not there)."""
    return _configs_in(EXAMPLES)


def shared_cases() -> list[Path]:
    """The case folders of ``../shared/cases`` that have an ``expected.yaml``."""
    if CASES is None or not CASES.is_dir():
        return []
    return sorted(p for p in CASES.iterdir() if (p / "expected.yaml").is_file())


def verify_script() -> Path | None:
    """``../shared/checks/verify_change.py`` when it is there."""
    return VERIFY_SCRIPT if VERIFY_SCRIPT is not None and VERIFY_SCRIPT.is_file() else None


#: Marks a test that needs AI Toolkit's example configs from ``../shared``.
needs_examples = pytest.mark.skipif(
    not shared_examples(), reason="AI Toolkit's examples are not beside the checkout"
)


def shared_example(name: str) -> Path:
    """One of AI Toolkit's example configs by its file name (under ``needs_examples``)."""
    assert EXAMPLES is not None, "mark the test with needs_examples"
    return EXAMPLES / name


#: Marks a test that needs ``../shared``: skipped, with the reason, when it is absent.
needs_shared = pytest.mark.skipif(
    SHARED is None or not SHARED.is_dir(), reason="../shared is not beside the checkout"
)
