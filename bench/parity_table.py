"""The parity table: every case of ``tests/test_parity.py`` through the CLI and the app.

For each case (a config file with its log, a job folder, a web-UI job; every moment, both
kinds, and jobs left to their logs) it runs ``plan --json`` + ``apply`` and the app, and
prints one row: whether the moment, the kind, the plan, the saved bytes and the change log
are equal. It prints figures and asserts nothing; the tests assert. Usage::

    .venv/bin/python bench/parity_table.py
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.parity_support import CASES, CHECKS, build, compare, through_app, through_cli

#: The checks that have nothing to compare when an environment verdict saves nothing.
SAVED = ("saved bytes", "change log")


def cell(equal: bool, nothing: bool) -> str:
    """One cell: ``equal``, ``DIFFER``, or ``none`` when neither side saved anything."""
    if nothing:
        return "none"
    return "equal" if equal else "DIFFER"


def _cell(check: str) -> int:
    """A column's width: its name, or the widest cell (``DIFFER``)."""
    return max(len(check), len("DIFFER"))


async def table() -> int:
    """Run every case; print the table and how long each took; the number of differences."""
    width = max(len(case.name) for case in CASES)
    print(
        f"{'case':<{width}}  "
        + "  ".join(f"{check:<{_cell(check)}}" for check in CHECKS)
        + "  seconds"
    )
    differences = 0
    with tempfile.TemporaryDirectory() as temp:
        for number, case in enumerate(CASES):
            root = Path(temp) / str(number)
            started = time.perf_counter()
            cli_side = through_cli(build(root / "cli", case), case)
            app_side = await through_app(build(root / "app", case), case)
            checks = compare(cli_side, app_side)
            seconds = time.perf_counter() - started
            differences += sum(not equal for equal in checks.values())
            nothing_saved = cli_side.saved is None and app_side.saved is None
            cells = "  ".join(
                f"{cell(checks[check], nothing_saved and check in SAVED):<{_cell(check)}}"
                for check in CHECKS
            )
            print(f"{case.name:<{width}}  {cells}  {seconds:7.1f}")
    print(f"{len(CASES)} cases x {len(CHECKS)} checks, {differences} differences")
    return differences


if __name__ == "__main__":
    sys.exit(1 if asyncio.run(table()) else 0)
