"""Count the cases of the ladder property and how many end "ladder exhausted".

For every config (the test fixtures, the demo jobs, and the ``*.yaml`` of ``--examples`` when
the folder exists) and every moment but ``environment``: build the plan, check that its
default fix lowers the estimate of the crashed peak or that the plan is exhausted (the same
check as ``tests/domain/rules/test_plan_ladder.py``), and print the counts. Usage::

    python bench/ladder_cases.py [--examples ../shared/aitk-examples]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from oom_wizard.errors import ConfigError
from oom_wizard.formats.document import load_document
from tests.domain.rules.test_plan_ladder import (
    assert_fix_lowers_or_exhausted,
    cases,
    fixture_configs,
    plan_for,
)
from tests.support.corpus import EXAMPLES


def loadable(folder: Path) -> list[Path]:
    """The configs of ``folder`` that load (AI Toolkit ships one that is not valid YAML)."""
    found = []
    for path in sorted(folder.glob("*.yaml")):
        try:
            load_document(path)
        except ConfigError:
            continue
        found.append(path)
    return found


def count(label: str, configs: list[Path]) -> None:
    """Check every case and print the totals, and which cases end exhausted."""
    total = exhausted = 0
    for config, moment in cases(configs):
        document = load_document(config)
        plan = plan_for(document, moment)
        assert_fix_lowers_or_exhausted(document, plan)
        total += 1
        if plan.exhausted:
            exhausted += 1
            print(f"  exhausted: {config.name} {moment}")
    print(f"{label}: {len(configs)} configs, {total} cases, {exhausted} ladder exhausted")


def main() -> None:
    """Parse the arguments and print the counts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=Path, default=EXAMPLES)
    args = parser.parse_args()
    count("fixtures and demo jobs", fixture_configs())
    if args.examples is not None and args.examples.is_dir():
        count(f"examples ({args.examples})", loadable(args.examples))
    else:
        print(f"examples: {args.examples} not found, skipped")


if __name__ == "__main__":
    main()
