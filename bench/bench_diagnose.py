"""Benchmark ``oom-wizard diagnose`` on a large log, and its start-up on a small one.

Generates a realistic AI Toolkit ``log.txt`` of about ``--size-mb`` MB in a temporary folder:
the run header and config dump, model loading with quantization bars, dataset scan and latent
caching with ``\\r`` redraws, text-embedding caching, the baseline sample, then training-bar
redraws (joined by ``\\r`` as tqdm writes them to a file) with a save and a sample pass every
``SAVE_EVERY`` steps, a few OOM skip banners, and a final OOM traceback in a training step.

Then it runs, each as a child process measured with ``os.wait4`` (wall time and peak RSS):

- ``python -m wizard diagnose --log LOG --json --no-probe`` (and checks its answer);
- ``grep -c "out of memory" LOG`` on the same file, for scale;
- start-up: ``diagnose`` on a small log beside ``python -c "import yaml, pydantic"``.

Targets (issue 3): diagnose on 1 GB in <= 10 s and <= 150 MB peak RSS. The machine is
shared: run the 1 GB benchmark sparingly. Usage::

    python bench/bench_diagnose.py [--size-mb 1024] [--startup-runs 5] [--bar-lines] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

REPO = Path(__file__).resolve().parent.parent
TARGET_SECONDS = 10.0
TARGET_RSS_MB = 150.0
JOB = "my_first_lora_v1"
SAVE_EVERY = 2500
TOTAL_STEPS = 9_000_000
OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.27 GiB. GPU 0 has a total "
    "capacity of 23.55 GiB of which 412.31 MiB is free. Including non-PyTorch memory, this "
    "process has 23.13 GiB memory in use. Of the allocated memory 20.84 GiB is allocated by "
    "PyTorch, and 1.83 GiB is reserved by PyTorch but unallocated. If reserved but unallocated "
    "memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
    "fragmentation.  See documentation for Memory Management  "
    "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
)


@dataclass(frozen=True)
class Measure:
    """One child process: wall seconds, peak RSS in MB, exit status, what it printed."""

    seconds: float
    rss_mb: float
    status: int
    stdout: str


def measure(command: list[str]) -> Measure:
    """Run ``command`` as a child and measure it alone (``os.wait4`` gives its own rusage)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        child = subprocess.Popen(command, stdout=out, stderr=subprocess.DEVNULL, cwd=REPO, env=env)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    # ru_maxrss is in KiB on Linux.
    return Measure(seconds, usage.ru_maxrss / 1024, child.returncode, text)


def bar(step: int, total: int = TOTAL_STEPS) -> str:
    pct = step * 100 // total
    filled = "█" * (pct // 10)
    rest = f"{total - step:d}"[-4:]
    return (
        f"\r{JOB}: {pct:3d}%|{filled:<10}| {step}/{total} [07:12<{rest[:2]}:{rest[2:]}:20,  "
        f"1.73s/it, lr: 1.0e-04 loss: 4.{step % 1000:03d}e-01]"
    )


def small_bar(desc: str, i: int, n: int) -> str:
    pct = i * 100 // n
    label = f"{desc}: " if desc else ""
    return f"\r{label}{pct:3d}%|{'#' * (pct // 10):<10}| {i}/{n} [00:{i % 60:02d}<00:30,  2.50it/s]"


def write_start(out: TextIO) -> None:
    config = {"type": "ui_trainer", "training_folder": "/ai-toolkit/output", "device": "cuda"}
    out.write("Running 1 job\n" + json.dumps(config, indent=4) + "\n")
    out.write('Using SQLite database at /ai-toolkit/aitk_db.db\nJob ID: "0b1c"\n')
    out.write("#" * 45 + f"\n# Running job: {JOB}\n" + "#" * 45 + "\nRunning  1 process\n")
    out.write("Loading Flux model\nLoading transformer\nQuantizing transformer\n")
    out.write(" - quantizing 57 transformer blocks\n")
    out.write("".join(small_bar("", i, 57) for i in range(58)) + "\n")
    out.write("Loading T5\nQuantizing T5\nLoading CLIP\nMaking pipe\nPreparing Model\n")
    out.write("create LoRA network. base dim (rank): 16, alpha: 16\n")
    out.write("Dataset: /datasets/me\n  -  Preprocessing image dimensions\n")
    out.write("".join(small_bar("", i, 400) for i in range(401)) + "\n")
    out.write("  -  Found 400 images\nBucket sizes for /datasets/me:\n")
    out.write("512x512: 120 files\n768x512: 140 files\n1024x1024: 140 files\n3 buckets made\n")
    out.write("Caching latents for /datasets/me\n - Saving latents to disk\n")
    out.write("".join(small_bar("Caching latents to disk", i, 400) for i in range(401)) + "\n")
    out.write("Caching text_embeddings for /datasets/me\n - Saving text embeddings to disk\n")
    text_bar = "Caching text embeddings to disk"
    out.write("".join(small_bar(text_bar, i, 400) for i in range(401)) + "\n")
    out.write("Generating baseline samples before training\n")
    write_sample_pass(out)


def write_sample_pass(out: TextIO) -> None:
    for sample in range(2):
        out.write(small_bar("Generating Images", sample, 2))
        out.write("".join(small_bar("", i, 25) for i in range(26)))
    out.write(small_bar("Generating Images", 2, 2) + "\n\n")


def write_log(path: Path, size_bytes: int, *, bar_lines: bool = False) -> int:
    """Write the log; return the step the final OOM happened at.

    Args:
        path: Where.
        size_bytes: About how large.
        bar_lines: End every training-bar redraw with a newline (a terminal capture, or a
            pasted log) instead of joining them with carriage returns as in ``log.txt``.
    """
    joiner = "\n" if bar_lines else ""
    with path.open("w", encoding="utf-8", newline="") as out:
        write_start(out)
        step = 0
        while out.tell() < size_bytes:
            block = [bar(s) for s in range(step, step + SAVE_EVERY)]
            out.write(joiner.join(block))
            step += SAVE_EVERY
            if step % (SAVE_EVERY * 40) == 0:
                out.write(
                    "\n\n" + "#" * 48 + "\n# OOM during training step, skipping batch 1/3 #\n"
                )
                out.write("#" * 48 + "\n\n")
            out.write(f"\nSaving at step {step}\n")
            out.write(
                f"Saved checkpoint to /ai-toolkit/output/{JOB}/{JOB}_{step:09d}.safetensors\n"
            )
            write_sample_pass(out)
        out.write(bar(step) + "\n")
        out.write(
            f"Error running job: CUDA out of memory. Tried to allocate 1.27 GiB.\n\n{'=' * 40}\n"
        )
        out.write(f"Result:\n - 0 completed jobs\n - 1 failure\n{'=' * 40}\n")
        out.write("Traceback (most recent call last):\n")
        out.write('  File "/ai-toolkit/run.py", line 120, in <module>\n    main()\n')
        out.write('  File "/ai-toolkit/jobs/process/BaseSDTrainProcess.py", line 2128, in run\n')
        out.write('  File "/ai-toolkit/extensions_built_in/sd_trainer/SDTrainer.py", line 1927, ')
        out.write("in hook_train_loop\n")
        out.write(f"{OOM}\nJob process terminated with exit code 1.\n")
    return step


def startup(runs: int, log: Path) -> tuple[float, float]:
    """Median seconds of ``diagnose`` on a small log and of importing yaml and pydantic."""
    diagnose = [sys.executable, "-m", "wizard", "diagnose", "--log", str(log), "--no-probe"]
    baseline = [sys.executable, "-c", "import yaml, pydantic"]
    ours = statistics.median(measure(diagnose).seconds for _ in range(runs))
    theirs = statistics.median(measure(baseline).seconds for _ in range(runs))
    return ours, theirs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024, help="log size (default 1024)")
    parser.add_argument("--startup-runs", type=int, default=5, help="start-up repetitions")
    parser.add_argument("--keep", action="store_true", help="keep the generated log")
    parser.add_argument(
        "--bar-lines",
        action="store_true",
        help="every training-bar redraw on its own line (a terminal capture), not joined by \\r",
    )
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="oomwiz-bench-"))
    try:
        log = folder / "log.txt"
        started = time.perf_counter()
        final_step = write_log(log, args.size_mb * 1024 * 1024, bar_lines=args.bar_lines)
        size_mb = log.stat().st_size / 1e6
        print(f"log: {log} ({size_mb:,.0f} MB, written in {time.perf_counter() - started:.1f} s)")

        ours = measure(
            [sys.executable, "-m", "wizard", "diagnose", "--log", str(log), "--json", "--no-probe"]
        )
        grep = measure(["grep", "-c", "out of memory", str(log)])
        result = json.loads(ours.stdout) if ours.status == 0 else {}
        right = (result.get("moment"), result.get("last_step")) == ("intermittent", final_step)
        print(
            f"diagnose: {ours.seconds:6.2f} s  peak RSS {ours.rss_mb:6.1f} MB  status {ours.status}"
        )
        matches = grep.stdout.strip()
        print(f"grep -c : {grep.seconds:6.2f} s  peak RSS {grep.rss_mb:6.1f} MB  ({matches} lines)")
        print(f"ratio   : {ours.seconds / grep.seconds:6.1f}x grep's wall time")
        print(
            f"answer  : moment {result.get('moment')}, last step {result.get('last_step')}, "
            f"signals {result.get('signals')} ({'right' if right else 'WRONG'})"
        )

        small = folder / "small.txt"
        small.write_text(
            "Generating baseline samples before training\n" + OOM + "\n", encoding="utf-8"
        )
        ours_start, import_start = startup(args.startup_runs, small)
        print(
            f"start-up: diagnose on a small log {ours_start:.3f} s (median of "
            f"{args.startup_runs}); python -c 'import yaml, pydantic' {import_start:.3f} s"
        )

        met = ours.seconds <= TARGET_SECONDS and ours.rss_mb <= TARGET_RSS_MB and right
        print(
            f"target (<= {TARGET_SECONDS:.0f} s, <= {TARGET_RSS_MB:.0f} MB, right answer): "
            f"{'met' if met else 'MISSED'}"
        )
        return 0 if met else 1
    finally:
        if args.keep:
            print(f"kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
