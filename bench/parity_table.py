"""The parity table: every case of ``tests/application/test_parity.py`` through the CLI and the app.

For each case (a config file with its log, a job folder, a web-UI job; every moment, both
kinds, and jobs left to their logs) it runs ``plan --json`` + ``apply`` and the app, and
prints one row: whether the moment, the kind, the plan, the saved bytes and the change log
are equal. Then the scale-up rows (``tests/application/test_parity_scale_up.py``): a rolled-back
job scaled up once by ``scale-up`` and by the app's save (a file and a web-UI job), the saved
bytes and the change log compared. It prints figures and asserts nothing; the tests assert. Usage::

    .venv/bin/python bench/parity_table.py
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.parity_support import CASES, CHECKS, build, compare, through_app, through_cli
from tests.support.scale_up_parity import (
    SCALE_UP_CASES,
    through_app_service,
    through_cli as scale_up_through_cli,
)

#: The checks that have nothing to compare when an environment verdict saves nothing.
SAVED = ("saved bytes", "change log")


def cell(equal: bool, nothing: bool) -> str:
    """One cell: ``equal``, ``DIFFER``, or ``none`` when neither side saved anything."""
    if nothing:
        return "none"
    return "equal" if equal else "DIFFER"


def asked(equal: bool | None) -> str:
    """A scale-up row's cell: ``-`` for a check the scale-up does not ask (moment, plan)."""
    return "-" if equal is None else cell(equal, False)


def _cell(check: str) -> int:
    """A column's width: its name, or the widest cell (``DIFFER``)."""
    return max(len(check), len("DIFFER"))


async def table() -> int:
    """Run every case; print the table and how long each took; the number of differences."""
    width = max(len(name) for name in [c.name for c in CASES] + [c.name for c in SCALE_UP_CASES])
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
        for number, scale_case in enumerate(SCALE_UP_CASES):
            root = Path(temp) / f"up{number}"
            started = time.perf_counter()
            cli_up = scale_up_through_cli(root / "cli", scale_case)
            app_up = through_app_service(root / "app", scale_case)
            seconds = time.perf_counter() - started
            up: dict[str, bool | None] = {
                "moment": None,
                "kind": cli_up.changelog["runs"][-1]["model_kind"]
                == app_up.changelog["runs"][-1]["model_kind"],
                "plan": None,
                "saved bytes": cli_up.saved == app_up.saved,
                "change log": cli_up.changelog == app_up.changelog,
            }
            differences += sum(equal is False for equal in up.values())
            cells = "  ".join(f"{asked(up[check]):<{_cell(check)}}" for check in CHECKS)
            print(f"{scale_case.name:<{width}}  {cells}  {seconds:7.1f}")
    rows = len(CASES) + len(SCALE_UP_CASES)
    print(f"{rows} cases ({len(SCALE_UP_CASES)} scale-ups, whose moment and plan are not asked: -)")
    print(f"{differences} differences")
    return differences


if __name__ == "__main__":
    sys.exit(1 if asyncio.run(table()) else 0)
