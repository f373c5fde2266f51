"""The two example sweeps on every config we have: ``apply --all`` at every moment, and the
round trip of a full roll-back and every scale-up back (``tests/support/sweeps.py``).

The suite runs both on a fixed sample (``tests/cli/test_apply.py``,
``tests/domain/rules/test_scaleup.py``); this runs them on the project's own configs and on
AI Toolkit's examples when ``../shared`` is beside the checkout, one row per config, and exits
1 when either property fails on any of them. Usage::

    python bench/sweep_examples.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.corpus import FLOOR_CONFIG
from tests.support.plan_support import examples
from tests.support.sweeps import apply_every_moment, round_trip, sample


def _run(check: object, example: Path) -> tuple[str, float]:
    """What ``check`` gave on ``example`` (or why it failed) and its CPU seconds."""
    assert callable(check)
    start = time.process_time()
    with tempfile.TemporaryDirectory() as folder:
        try:
            found = check(example, Path(folder))
        except AssertionError as failure:
            first = str(failure).splitlines()[0] if str(failure) else "assertion failed"
            return f"FAILED: {first}", time.process_time() - start
    return (
        ", ".join(f"{k}: {v}" for k, v in found.items())
        if isinstance(found, dict)
        else f"{len(found)} steps back"
    ), time.process_time() - start


def main() -> int:
    in_suite = {path.name for path in sample()}
    failures = 0
    total = 0.0
    print(f"{'config':44} {'suite':5} {'cpu s':>6}  apply --all / round trip")
    for example in examples():
        rows = [_run(apply_every_moment, example)]
        if example.name != FLOOR_CONFIG:  # nothing to roll back in it
            rows.append(_run(round_trip, example))
        for i, (said, cpu) in enumerate(rows):
            failures += said.startswith("FAILED")
            total += cpu
            name = example.name if i == 0 else ""
            mark = ("yes" if example.name in in_suite else "") if i == 0 else ""
            print(f"{name:44} {mark:5} {cpu:6.2f}  {said}")
    print(f"{len(examples())} configs, {total:.1f} s CPU, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
