"""``fit`` with the one solver on every AI Toolkit example config at 8, 12, 16, 24 and 48 GiB.

For each config and card: today's verdict, what ``fit`` proposes (the steps and the values
beyond their default rungs, or the closest config when nothing fits), the peak with them, and
``fit`` on the config that proposal saves (``fit``'s own ``apply`` line, run on a copy of the
config in a temporary folder); then the CPU seconds of
``fit`` itself (the job opened and settled once, outside the timing). It checks what the solver
promises of every answer: it fits, or its proposal's own ``fit`` fits, or it says nothing fits with
the closest config; never a lever the arch ignores. Exit status 1 when one does not hold.

Run it against another checkout's code to compare (its ``oom_wizard`` first on the path)::

    python bench/bench_solver.py                 # this checkout
    python bench/bench_solver.py --timing-only   # only the CPU seconds of fit

Needs ``../shared/aitk-examples`` beside the checkout.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from oom_wizard.application.fitting import fit
from oom_wizard.application.settling import JobCard, start
from oom_wizard.errors import WizardError
from oom_wizard.request import JobRequest

EXAMPLES = Path(__file__).resolve().parents[2] / "shared" / "aitk-examples"
CARDS = (8.0, 12.0, 16.0, 24.0, 48.0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timing-only", action="store_true", help="only time fit")
    args = parser.parse_args()
    if not EXAMPLES.is_dir():
        print(f"no {EXAMPLES}: nothing to run")
        return 0
    configs = sorted(EXAMPLES.glob("*.yaml"))
    times: list[float] = []
    failures = 0
    for config in configs:
        try:
            state = start(JobRequest(target=config, probe=False))
        except WizardError as error:  # an example AI Toolkit ships broken
            print(f"{config.stem[:40]:40}       does not load: {str(error).splitlines()[0]}")
            continue
        for card in CARDS:
            begin = time.process_time()
            report = fit(state, JobCard(card, "--gpu"))
            times.append(time.process_time() - begin)
            if args.timing_only:
                continue
            said, ok = _row(report, config, card)
            failures += not ok
            print(f"{config.stem[:40]:40} {card:4.0f}  {said}")
    print(
        f"fit on {len(configs)} configs x {len(CARDS)} cards: CPU s per fit median "
        f"{statistics.median(times):.3f}, max {max(times):.3f}, total {sum(times):.1f}"
    )
    if not args.timing_only:
        print(f"{failures} answers do not hold")
    return 1 if failures else 0


def _row(report: object, config: Path, card: float) -> tuple[str, bool]:
    from oom_wizard.application.fitting import FitReport

    assert isinstance(report, FitReport)
    verdict = report.verdict
    fix = report.fix
    if fix is None:
        return f"{verdict}: no change", verdict != "wont_fit"
    steps = ",".join(step.id for step in fix.steps) or "-"
    ignored = [s.id for s in fix.steps if not s.available]
    peak = fix.memory.peak()
    if not fix.reaches:
        return (
            f"{verdict}: nothing fits; closest {steps} at {peak.low:.1f}-{peak.high:.1f} "
            f"({fix.lacks_gib:.1f} over)",
            not ignored and report.apply_args is None,
        )
    saved = _fit_of_saved(config, report.apply_args or [], card)
    return (
        f"{verdict}: {steps}{_values(report.apply_args or [])} -> {peak.low:.1f}-{peak.high:.1f}; "
        f"saved: {saved}",
        not ignored and saved == "fits",
    )


def _values(line: list[str]) -> str:
    """The ``--set`` values of an ``apply`` line, as `` [field=value ...]``."""
    pairs = [line[i + 1].partition("=") for i, word in enumerate(line) if word == "--set"]
    values = [f"{name.rsplit('.', 1)[-1]}={value}" for name, _, value in pairs]
    return f" [{' '.join(values)}]" if values else ""


def _fit_of_saved(config: Path, line: list[str], card: float) -> str:
    """``fit``'s verdict on the config that ``fit``'s own ``apply`` line saves (run as it is,
    on a copy of the config)."""
    import contextlib
    import io

    from oom_wizard.cli import main as cli

    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / config.name
        shutil.copyfile(config, source)
        args = [str(source) if word == str(config) else word for word in line[1:]]
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            status = cli([*args, "--no-probe"])
        saved = sorted(Path(folder).glob("*.oomfix.yaml"))
        if status not in (0, 3, 4) or not saved:
            return f"apply failed ({status})"
        again = start(JobRequest(target=saved[0], probe=False))
        return fit(again, JobCard(card, "--gpu")).verdict


if __name__ == "__main__":
    sys.exit(main())
