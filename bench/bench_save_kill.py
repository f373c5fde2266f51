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

``--race N`` instead starts N in-place saves of one web-UI job at once and counts what the
ones that lost the race were told: each must be "another oom-wizard run just saved" it, never
"edited after oom-wizard saved it" nor "changed in AI Toolkit's UI".

Usage::

    python bench/bench_save_kill.py [--only NAME] [--table] [--next plan,scale-up,history]
    python bench/bench_save_kill.py --race 10 [--rounds 3]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.killed_saves import (
    BY_NAME,
    NEXT,
    SCENARIOS,
    WIZARD,
    Scenario,
    count_points,
    kill_and_check,
    quiet_env,
    reference,
)


def race(saves: int, rounds: int) -> int:
    """``saves`` in-place saves of one job at once, ``rounds`` times: what the losers hear."""
    told: dict[str, int] = {}
    winners = 0
    scenario = BY_NAME["database, in place"]
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as folder:
            root = Path(folder)
            scenario.prepare(root)
            children = [
                subprocess.Popen(
                    [*WIZARD, *scenario.save],
                    cwd=root / scenario.folder,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    env=quiet_env(),
                )
                for _ in range(saves)
            ]
            for child in children:
                _, err = child.communicate(timeout=120)
                if child.returncode == 0:
                    winners += 1
                    continue
                text = err.decode("utf-8", "replace")
                kind = next(
                    (
                        words
                        for words in (
                            "just saved by another oom-wizard run",
                            "edited after oom-wizard saved it",
                            "changed in AI Toolkit's UI",
                            "stayed locked",
                        )
                        if words in text
                    ),
                    text.strip()[-120:],
                )
                told[kind] = told.get(kind, 0) + 1
    losers = sum(told.values())
    print(f"{saves * rounds} saves ({rounds} rounds of {saves} at once): {winners} saved")
    print("(the first of a round, and any that opened the job after it was saved), ")
    print(f"{losers} lost the race and were told:")
    for words, count in sorted(told.items(), key=lambda item: -item[1]):
        print(f"  {count}: {words}")
    right = told.get("just saved by another oom-wizard run", 0)
    return 0 if right == losers else 1


def _variants(args: argparse.Namespace, scenario: Scenario) -> tuple[str, ...]:
    """The next commands asked for that differ on this kind of save (history is the default
    on a file pair)."""
    asked = tuple(name.strip() for name in args.next.split(",") if name.strip())
    unknown = [name for name in asked if name not in NEXT]
    if unknown:
        raise SystemExit(f"unknown --next: {', '.join(unknown)} (of {', '.join(NEXT)})")
    if not scenario.database:
        asked = tuple(dict.fromkeys("default" if name == "history" else name for name in asked))
    return asked


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="one scenario, by name")
    parser.add_argument("--table", action="store_true", help="a row for every point")
    parser.add_argument(
        "--next",
        default="default",
        help="the next commands, comma-separated, of: " + ", ".join(NEXT) + " (default: "
        "history on a file pair, diagnose --db on a database job); history is history --db "
        "on a database job",
    )
    parser.add_argument("--race", type=int, metavar="N", help="N concurrent in-place saves")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of --race")
    args = parser.parse_args()
    if args.race:
        return race(args.race, args.rounds)
    if shutil.which("strace") is None:
        print("strace is not installed")
        return 2
    started = time.perf_counter()
    total = held = points_total = 0
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
                killed, outcomes = kill_and_check(
                    root / f"p{index}", scenario, call, when, new, _variants(args, scenario)
                )
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
        points_total += len(points)
        total += mine
        held += kept
    took = time.perf_counter() - started
    print(f"\n{points_total} kill points, each followed by the next command from two folders:")
    print(f"{held} of {total} left the pair old or new with nothing false said ({took:.0f} s)")
    for failure in failures:
        print(f"  FAILED {failure}")
    return 0 if held == total else 1


if __name__ == "__main__":
    raise SystemExit(main())
