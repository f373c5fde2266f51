"""``diagnose`` on the shared mixed log, against Python reading the same file.

The yardstick is ``../shared/bench/make_mixed_log.py``'s log (300 MB by default: a training
bar redrawn three times per line, its percentage moving at every step, three ordinary lines per
step, a caught traceback every 400 steps, AI Toolkit's OOM banner and PyTorch's message at the
end) and the line read its docstring names (``open(..., errors="replace", newline="")``, ``for
line in f: pass``). Both run as child processes measured with ``os.wait4``, alternated
``--runs`` times in one run of this script (the machine is shared: compare within a run): wall
and CPU seconds, peak RSS, and the ratio of ``diagnose`` to the line read in each run. The
target: ``diagnose CONFIG --log LOG --json --no-probe`` within 4x the line read, in bounded
memory (the answer is checked: the OOM in a training step). Usage::

    .venv/bin/python bench/bench_yardstick.py [--size-mb 300] [--runs 3] [--log LOG] [--keep]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_diagnose
from bench_diagnose import REPO, Measure, child_env, measure

RECIPE = REPO.parent / "shared" / "bench" / "make_mixed_log.py"
TARGET_RATIO = 4.0
CONFIG = """\
job: extension
config:
  name: big
  process:
    - type: sd_trainer
      network: {type: lora, linear: 16, linear_alpha: 16}
      train: {batch_size: 1, steps: 3000, gradient_checkpointing: true}
      model: {name_or_path: black-forest-labs/FLUX.1-dev, is_flux: true, quantize: true}
      datasets: [{folder_path: /data, resolution: [512, 768, 1024]}]
"""


def line_read(log: Path) -> list[str]:
    """The recipe's yardstick: Python reading ``log`` line by line in text mode."""
    code = "import sys\nfor line in open(sys.argv[1], errors='replace', newline=''):\n    pass"
    return [sys.executable, "-c", code, str(log)]


def diagnose(config: Path, log: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "oom_wizard",
        "diagnose",
        str(config),
        "--log",
        str(log),
        "--json",
        "--no-probe",
    ]


def row(name: str, m: Measure) -> str:
    return (
        f"  {name:<10} wall {m.seconds:6.2f} s   cpu {m.cpu:6.2f} s   peak RSS {m.rss_mb:6.1f} MB"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--size-mb", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--log", type=Path, help="an existing mixed log (default: write one)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="oom-wizard-yardstick-"))
    bench_diagnose.CHILD_ENV.update(child_env(folder))
    log = args.log
    if log is None:
        if not RECIPE.is_file():
            print(f"no {RECIPE}: give --log")
            return 1
        log = folder / "mixed.txt"
        subprocess.run([sys.executable, str(RECIPE), str(log), str(args.size_mb)], check=True)
    config = folder / "job.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    print(f"log: {log} ({log.stat().st_size / 1e6:,.0f} MB)")
    measure(diagnose(config, log))  # warm-up: the bytecode, the page cache
    measure(line_read(log))
    ratios: list[tuple[float, float]] = []
    right = True
    peak = 0.0
    for run in range(1, args.runs + 1):
        base = measure(line_read(log))
        ours = measure(diagnose(config, log))
        result = json.loads(ours.stdout) if ours.status == 0 else {}
        right = (
            right and result.get("phase") == "training" and "cuda_oom" in result.get("signals", [])
        )
        ratios.append((ours.cpu / base.cpu, ours.seconds / base.seconds))
        peak = max(peak, ours.rss_mb)
        print(f"run {run}")
        print(row("line read", base))
        print(row("diagnose", ours))
        print(f"  ratio      cpu {ratios[-1][0]:.2f}x   wall {ratios[-1][1]:.2f}x")
    cpu = statistics.median(r[0] for r in ratios)
    wall = statistics.median(r[1] for r in ratios)
    print(
        f"median ratio: cpu {cpu:.2f}x, wall {wall:.2f}x (target <= {TARGET_RATIO:g}x); "
        f"diagnose's peak RSS {peak:.1f} MB; answer {'right' if right else 'WRONG'}"
    )
    if not args.keep:
        for path in sorted(folder.rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        folder.rmdir()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
