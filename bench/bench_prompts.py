"""Benchmark ``plan`` and ``apply`` on configs with many sample prompts.

Planning used to walk every sample's overrides once per sample (quadratic): 1,000 prompts took
6.6 s and 10,000 minutes. This writes a sampling-heavy AI Toolkit job with N prompts (every
tenth with ``--w``/``--h`` flags, so the overrides are not empty) into a temporary folder and
runs ``python -m oom_wizard plan --moment sampling --json`` and ``python -m oom_wizard apply
--moment sampling`` on it as child processes, printing the wall time of each. Target: under 2 s for
10,000 prompts. Usage::

    python bench/bench_prompts.py [--prompts 1000 10000] [--runs 1]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGET_SECONDS = 2.0


def write_config(path: Path, prompts: int) -> Path:
    """An AI Toolkit LoRA job with ``prompts`` sample prompts; returns ``path``."""
    lines = [
        "job: extension",
        "config:",
        "  name: many_prompts",
        "  process:",
        "    - type: sd_trainer",
        "      training_folder: output",
        "      device: cuda:0",
        "      network:",
        "        type: lora",
        "        linear: 16",
        "        linear_alpha: 16",
        "      train:",
        "        batch_size: 1",
        "        steps: 2000",
        "        gradient_checkpointing: true",
        "        lr: 1e-4",
        "      model:",
        "        name_or_path: black-forest-labs/FLUX.1-dev",
        "        arch: flux",
        "        quantize: true",
        "      datasets:",
        "        - folder_path: /data/images",
        "          resolution: [512, 768, 1024]",
        "      sample:",
        "        sampler: flowmatch",
        "        sample_every: 250",
        "        width: 1024",
        "        height: 1024",
        "        sample_steps: 20",
        "        prompts:",
    ]
    for index in range(prompts):
        flags = " --w 1280 --h 768" if index % 10 == 0 else ""
        lines.append(f'          - "a photo of subject {index} in a garden{flags}"')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def timed(args: list[str]) -> tuple[float, int]:
    """Wall seconds and exit status of ``python -m oom_wizard ARGS``."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "oom_wizard", *args],
        cwd=REPO,
        capture_output=True,
        check=False,
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        print(done.stderr.decode(errors="replace"), file=sys.stderr)
    return seconds, done.returncode


def main() -> int:
    """Run the benchmark and print one line per size and command."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--runs", type=int, default=1)
    options = parser.parse_args()
    worst = 0.0
    with tempfile.TemporaryDirectory() as folder:
        for count in options.prompts:
            config = write_config(Path(folder) / f"job_{count}.yaml", count)
            size_kb = config.stat().st_size / 1024
            for name, args in (
                ("plan", ["plan", str(config), "--moment", "sampling", "--json"]),
                ("apply", ["apply", str(config), "--moment", "sampling", "--all"]),
            ):
                times = []
                for run in range(options.runs):
                    out = Path(folder) / f"out_{count}_{name}_{run}.yaml"
                    extra = ["-o", str(out)] if name == "apply" else []
                    seconds, status = timed([*args, *extra])
                    if status != 0:
                        print(f"{name} {count}: exit status {status}")
                        return 1
                    times.append(seconds)
                best = min(times)
                if count >= 10000:
                    worst = max(worst, best)
                print(f"{count:>6} prompts ({size_kb:,.0f} KB)  {name:<5}  {best:6.2f} s")
    verdict = "ok" if worst < TARGET_SECONDS else "SLOWER than"
    print(f"10,000 prompts: worst {worst:.2f} s ({verdict} the {TARGET_SECONDS:.0f} s target)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
