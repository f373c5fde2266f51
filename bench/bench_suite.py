"""Where the README's test command spends its time, part by part, and the suite's CPU floor.

The command is read from the README (the line that runs ``pytest -q``) and each of its parts
runs on its own, timed: the install (with ``--install``, into a new virtual environment, as
on a fresh machine; without it, the parts run with this interpreter's tools), ruff, mypy
with an empty cache (as in a fresh clone) and pytest. pytest runs with ``suite_cpu`` (the
plugin beside this file), which records every test's wall and CPU time; the summary splits
the tests that drive the Textual app (Pilot and snapshots) from the others and gives the
floor: the suite's CPU time over the workers' cores, the least wall time any scheduling
could reach.

Usage::

    python bench/bench_suite.py [--install] [--default-gc] [--top 12]

``--default-gc``: the tests run with Python's default collector thresholds, not the suite's.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent


def readme_command() -> list[list[str]]:
    """The README's test command, split into its ``&&`` parts."""
    for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines():
        if "pytest -q" in line:
            return [shlex.split(part) for part in line.split("&&")]
    raise SystemExit("bench_suite: the README has no test command (no line with 'pytest -q')")


def timed(argv: list[str], env: dict[str, str]) -> float:
    """Run ``argv`` in the checkout; its wall seconds (exits if it fails)."""
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"bench_suite: {shlex.join(argv)} failed ({done.returncode})")
    return time.perf_counter() - start


def summary(rows: list[dict[str, Any]], cores: int, top: int) -> None:
    """The CPU time of the tests, app tests apart, the floor, and the costliest files."""
    cpu = sum(row["cpu"] + row["children"] for row in rows)
    app = sum(row["cpu"] + row["children"] for row in rows if row["app"])
    waiting = sum(max(row["wall"] - row["cpu"] - row["children"], 0.0) for row in rows)
    print(f"tests: {len(rows)}, CPU {cpu:.0f} s (of it in child processes:", end=" ")
    print(f"{sum(row['children'] for row in rows):.0f} s)")
    print(f"  driving the app (Pilot, snapshots): {app:.0f} s; the others: {cpu - app:.0f} s")
    print(f"  waiting (wall beyond CPU, summed over the tests): {waiting:.0f} s")
    print(f"  floor on {cores} cores: {cpu / cores:.0f} s of wall time")
    by_file: defaultdict[str, float] = defaultdict(float)
    for row in rows:
        by_file[row["test"].split("::")[0]] += row["cpu"] + row["children"]
    print(f"costliest files (CPU s), the first {top}:")
    for name, seconds in sorted(by_file.items(), key=lambda item: -item[1])[:top]:
        print(f"  {seconds:6.1f}  {name}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--install", action="store_true", help="time the install, in a new venv")
    parser.add_argument(
        "--default-gc", action="store_true", help="Python's collector thresholds, not the suite's"
    )
    parser.add_argument("--top", type=int, default=12, help="files listed (default 12)")
    args = parser.parse_args()

    parts = readme_command()
    with tempfile.TemporaryDirectory() as scratch:
        env = {**os.environ, "PYTHONPATH": str(BENCH), "OOMW_SUITE_CPU": scratch}
        if args.default_gc:
            env["OOMW_SUITE_DEFAULT_GC"] = "1"
        tools = Path(sys.executable).parent
        figures: list[tuple[str, float]] = []
        if args.install:
            venv = Path(scratch) / "venv"
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            tools = venv / "bin"
        for part in parts:
            name, argv = part[0], part
            if name == "pip":
                if not args.install:
                    continue
                argv = [str(tools / "python"), "-m", *argv]
            else:
                argv = [str(tools / name), *argv[1:]]
            if name == "mypy":
                argv += ["--cache-dir", str(Path(scratch) / "mypy-cache")]
            if name == "pytest":
                argv += ["-p", "suite_cpu", "-p", "no:cacheprovider"]
            figures.append((shlex.join(part), timed(argv, env)))
        rows: list[dict[str, Any]] = []
        for path in Path(scratch).glob("*.json"):
            rows += json.loads(path.read_text(encoding="utf-8"))

    print("\nthe README's test command, part by part (wall s):")
    for name, seconds in figures:
        print(f"  {seconds:7.1f}  {name}")
    print(f"  {sum(seconds for _, seconds in figures):7.1f}  in all")
    summary(rows, len(os.sched_getaffinity(0)), args.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
