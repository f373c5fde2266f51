"""SIGKILL at every system call of a save, then the next command from two folders.

For each kind of save (a config and its change log, ``--force`` over an earlier pair in one
folder and in two, a web-UI job saved in place and as a new job, ``restore``), the calls that
touch the save's folder are counted from a traced save, and the save is killed at each of
them in turn (``strace -e inject=CALL:signal=KILL:when=N``). The killed folder is copied, and
the next command runs on each copy: from the save's own folder, and from a folder beside it.
A point holds when the pair is the old one or the new one, nothing of the tool is left over,
the next command says nothing false (no "edited after oom-wizard saved it", no note of a
journal left unresolved, no traceback), and a web-UI job can still be restored to its original
config. The machinery is ``tests/support/killed_saves.py``; the suite runs a fixed sample of
these points (``tests/domain/storage/test_killed_pairs.py``).

Usage::

    python bench/bench_save_kill.py [--only NAME] [--table]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.killed_saves import SCENARIOS, count_points, kill_and_check, reference


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="one scenario, by name")
    parser.add_argument("--table", action="store_true", help="a row for every point")
    args = parser.parse_args()
    if shutil.which("strace") is None:
        print("strace is not installed")
        return 2
    started = time.perf_counter()
    total = held = 0
    failures: list[str] = []
    print("| save | points | next commands | held |")
    print("|---|---|---|---|")
    for scenario in SCENARIOS:
        if args.only and scenario.name != args.only:
            continue
        with tempfile.TemporaryDirectory() as folder:
            root = Path(folder)
            points = count_points(root / "count", scenario)
            new = reference(root / "reference", scenario)
            mine = kept = 0
            for index, (call, when) in enumerate(points):
                killed, outcomes = kill_and_check(root / f"p{index}", scenario, call, when, new)
                for where, outcome in outcomes.items():
                    mine += 1
                    kept += outcome.held
                    row = f"{scenario.name} | {call} #{when} ({killed}) | from {where}"
                    if args.table:
                        print(f"|   {row} | {outcome.detail()} |", flush=True)
                    if not outcome.held:
                        failures.append(f"{row}: {outcome.detail()}")
                shutil.rmtree(root / f"p{index}")
        print(f"| {scenario.name} | {len(points)} | {mine} | {kept} |", flush=True)
        total += mine
        held += kept
    took = time.perf_counter() - started
    print(f"\n{total // 2} kill points, each followed by the next command from two folders:")
    print(f"{held} of {total} left the pair old or new with nothing false said ({took:.0f} s)")
    for failure in failures:
        print(f"  FAILED {failure}")
    return 0 if held == total else 1


if __name__ == "__main__":
    raise SystemExit(main())
