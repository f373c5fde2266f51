"""The autopilot's end-to-end table: every scenario of ``tests/support/autopilot_support.py``,
run for real.

Each scenario starts from a real AI Toolkit config shape (the shipped demo configs, a few
fields changed), a card size, and the fake trainer (``tests/support/fake_trainer.py``, its own
memory model) as the trainer; ``oom_wizard.application.autopilot`` runs it as
``oom-wizard run --auto`` does, with real child processes. One row per attempt: the config it
ran, how it ended, and what that config changed from the one before; then where the loop
stopped and why.

Usage::

    python bench/bench_autopilot.py [--only NAME]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.autopilot_support import SCENARIOS, play, table_rows


def main() -> int:
    """Run the scenarios and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run only the scenario with this name")
    args = parser.parse_args()
    print("| scenario | card | attempt | config (run) | how it ended | what this config changed |")
    print("|---|---|---|---|---|---|")
    endings: list[str] = []
    for scenario in SCENARIOS:
        if args.only and scenario.name != args.only:
            continue
        with tempfile.TemporaryDirectory() as folder:
            start = time.perf_counter()
            outcome = play(Path(folder), scenario)
            took = time.perf_counter() - start
            for row in table_rows(outcome, scenario):
                print(row)
            reason = outcome.reason.replace(folder + "/", "")
            endings.append(
                f"- {scenario.name}: exit {outcome.exit_status}, {len(outcome.attempts)} "
                f"attempt(s), final config {outcome.config.name}, {took:.1f} s. {reason}"
            )
    print()
    print("\n".join(endings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
