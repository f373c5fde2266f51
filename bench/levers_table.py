"""Each lever or term on a config that uses it.

For every rung (a plan step's field) and every term (a setting the estimate counts), built from
the project's demo FLUX job (``tests/support/lever_cases.py`` says how), the config is opened
through the application layer and planned; the table gives the field, its value before → after, the
phase it
weighs on, that phase's GiB (band midpoint) today and after, the change, and where the field is
in AI Toolkit's web UI ("Show Advanced → ..." where the simple form has no control). Usage::

    python bench/levers_table.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.lever_cases import RUNGS, rows


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="oom-wizard-levers-") as folder:
        found = rows(Path(folder))
    print(
        f"{'lever':<26} {'field':<42} {'before → after':<26} {'phase':<9} "
        f"{'GiB today → after':>19} {'change':>7}  UI"
    )
    for index, row in enumerate(found):
        if index == len(RUNGS):
            print("terms (a setting the estimate counts; 'before' is the config without it):")
        change = f"{row.before} → {row.after}"
        gib = f"{row.gib_before:.2f} → {row.gib_after:.2f}"
        print(
            f"{row.name:<26} {row.field:<42} {change:<26} {row.phase:<9} {gib:>19} "
            f"{row.gib_change:+7.2f}  {row.where}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
