"""How sure the diagnosis says it is, against how often it is right, on every report held.

Every report folder (``job.yaml``, ``log.txt``, ``expected.yaml``) of ``tests/fixtures/reports``
and of ``../shared/cases`` (when it is there, or the folders given with ``--cases``) is
diagnosed as ``diagnose --no-probe`` would. The table gives, per confidence level, how many
reports the diagnosis said it at and how many of those it placed at their labelled moment;
then the share said ``high``, and the same on the reports whose evidence *pins* the moment.

A report's evidence pins the moment when its last run crashed and the log places that crash
by itself: the failing traceback's frames name the phase (not a hint), or an error line (PyTorch's
message, the trainer's OOM banner, a library fault, the host's kill or MemoryError) comes inside
a phase the trainer's lines announced (not the launcher's); and, in a training step, the step's
number is shown. The targets: ``high`` on at least half of the pinned reports, and
right on at least 95 % of the reports said ``high``. It prints figures and asserts nothing.
Usage::

    .venv/bin/python bench/bench_confidence.py [--cases DIR ...] [--list]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from oom_wizard.formats.document import load_document  # noqa: E402
from oom_wizard.logs.result import LogScan, crash_step  # noqa: E402
from oom_wizard.logs.scan import scan_log  # noqa: E402
from oom_wizard.logs.signals import GPU_SIGNALS, HOST_SIGNALS  # noqa: E402
from oom_wizard.rules.diagnosis import diagnose  # noqa: E402
from tests.support.report_table import REPORTS, expected_of, report_dirs  # noqa: E402

SHARED_CASES = ROOT.parent / "shared" / "cases"
LEVELS = ("high", "medium", "low")
TARGET_HIGH_SHARE = 0.5
TARGET_RIGHT = 0.95


@dataclass(frozen=True)
class Outcome:
    """One report: its name, the confidence said, whether the moment is right, pinned."""

    name: str
    confidence: str
    right: bool
    pinned: bool


def pinned(scan: LogScan) -> bool:
    """Whether the log alone places its crash (see the module docstring)."""
    if not scan.crashed:
        return False
    errors = GPU_SIGNALS | HOST_SIGNALS | {"library_fault"}
    placed = scan.frame_phase is not None or (
        scan.marker_phase not in ("unknown", "launch")
        and scan.phase == scan.marker_phase
        and bool(set(scan.signals) & errors)
    )
    if scan.has(*HOST_SIGNALS):
        placed = True
    if scan.phase == "training" and crash_step(scan) is None:
        return False
    return placed


def outcome(folder: Path) -> Outcome:
    label = expected_of(folder)
    moment = label.get("moment", label.get("crash_moment"))
    scan = scan_log(folder / "log.txt")
    result = diagnose(scan, load_document(folder / "job.yaml").view())
    return Outcome(folder.name, result.confidence, result.moment == moment, pinned(scan))


def share(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.0f} %)" if whole else f"{part}/{whole}"


def table(outcomes: list[Outcome]) -> str:
    lines = [f"{'confidence':<11} {'reports':>7}  {'right':>14}  {'pinned':>7}"]
    for level in LEVELS:
        held = [o for o in outcomes if o.confidence == level]
        right = sum(o.right for o in held)
        lines.append(
            f"{level:<11} {len(held):>7}  {share(right, len(held)):>14}  "
            f"{sum(o.pinned for o in held):>7}"
        )
    high = [o for o in outcomes if o.confidence == "high"]
    pins = [o for o in outcomes if o.pinned]
    lines += [
        "",
        f"said high:               {share(len(high), len(outcomes))}",
        f"said high where pinned:  {share(sum(o.confidence == 'high' for o in pins), len(pins))}"
        f"   (target >= {TARGET_HIGH_SHARE:.0%})",
        f"right where said high:   {share(sum(o.right for o in high), len(high))}"
        f"   (target >= {TARGET_RIGHT:.0%})",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--cases", action="append", type=Path, default=[], metavar="DIR")
    parser.add_argument("--list", action="store_true", help="one line per report as well")
    args = parser.parse_args(argv)
    roots = [REPORTS, *(args.cases or ([SHARED_CASES] if SHARED_CASES.is_dir() else []))]
    outcomes = [outcome(folder) for folder in report_dirs(roots)]
    if args.list:
        for o in outcomes:
            mark = " " if o.right else "✗"
            pin = "pinned" if o.pinned else ""
            print(f"{mark} {o.confidence:<7} {pin:<7} {o.name}")
        print()
    print(f"{len(outcomes)} reports from " + ", ".join(str(r) for r in roots))
    print(table(outcomes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
