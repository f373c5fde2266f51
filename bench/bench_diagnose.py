"""Benchmark ``oom-wizard diagnose`` on large logs, and its start-up on a small one.

Three kinds of log are generated in a temporary folder (deleted afterwards):

- a *bar* log of about ``--size-mb`` MB: the run header and config dump, model loading with
  quantization bars, dataset scan and latent caching with ``\\r`` redraws, text-embedding
  caching, the baseline sample, then training-bar redraws (joined by ``\\r`` as tqdm writes
  them to a file) with a save and a sample pass every ``SAVE_EVERY`` steps, a few OOM skip
  banners, and a final OOM traceback in a training step;
- *mixed* logs of each ``--mixed-mb`` size (default 300 and 1024): the same run, but about
  60 % of its bytes are ordinary text and warning lines (shapes of real reports: library
  warnings and their source lines, launcher and logger chatter, dataset notes, a printed dict),
  in bursts between runs of training-bar redraws joined by ``\\r``, with a caught traceback
  (a bad image, skipped) every ``TRACEBACK_EVERY`` steps;
- *dense* mixed logs of each ``--dense-mb`` size (default 300): the same, but one training-bar
  redraw between every few text lines (a library that warns at every step).

Each command runs as a child process measured with ``os.wait4`` (wall time, CPU time and peak
RSS):

- ``python -m oom_wizard diagnose --log LOG --json --no-probe`` (and its answer is checked);
- on the bar log, ``grep -c "out of memory" LOG`` for scale;
- on each mixed and dense log, Python itself reading the same file line by line, in text mode
  (``for line in open(LOG, encoding="utf-8", errors="replace")``, the baseline of the target)
  and in binary mode, and the ratio of ``diagnose`` to each: the three alternated
  ``REPEATS`` times once the log is flushed to disk, each figure the median run;
- start-up: ``--version``, ``diagnose`` on a small log and ``apply`` on a small config (a save),
  beside ``python -c "import yaml, pydantic"``, alternated, wall and CPU time.

The children run with Python's default bytecode caching, into the bench's own temporary
folder (``PYTHONPYCACHEPREFIX``), after one warm-up run: as an installed copy runs, whose
``.pyc`` files pip writes at install time. (A ``PYTHONDONTWRITEBYTECODE`` in the caller's
environment would otherwise make every child compile the project's sources again, about
0.15 s that no user pays.)

Targets: the bar log of 1 GB in <= 10 s; on the mixed logs, diagnose at most 3x the
text-mode line read; <= 150 MB peak RSS everywhere. The machine is shared: run the
1 GB logs sparingly. Usage::

    python bench/bench_diagnose.py [--size-mb 1024] [--mixed-mb 300,1024] [--dense-mb 300]
                                   [--startup-runs 5] [--bar-lines] [--keep]

``--size-mb 0``, ``--mixed-mb ''`` or ``--dense-mb ''`` leaves that kind out.
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
TARGET_RATIO = 3.0
"""diagnose on a mixed log, at most this many times Python's text-mode line read."""
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
    """One child process: wall seconds, peak RSS in MB, exit status, what it printed, and the
    CPU seconds it used (user + system: steadier than wall time on a shared machine)."""

    seconds: float
    rss_mb: float
    status: int
    stdout: str
    cpu: float = 0.0


#: The children's environment, set by :func:`main` (see the module docstring).
CHILD_ENV: dict[str, str] = {}


def child_env(folder: Path) -> dict[str, str]:
    """This environment, with the repository importable and bytecode cached in ``folder``."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPATH": str(REPO), "PYTHONPYCACHEPREFIX": str(folder / "pycache")}


def measure(command: list[str]) -> Measure:
    """Run ``command`` as a child and measure it alone (``os.wait4`` gives its own rusage)."""
    env = CHILD_ENV or {**os.environ, "PYTHONPATH": str(REPO)}
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        child = subprocess.Popen(command, stdout=out, stderr=subprocess.DEVNULL, cwd=REPO, env=env)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    # ru_maxrss is in KiB on Linux.
    cpu = usage.ru_utime + usage.ru_stime
    return Measure(seconds, usage.ru_maxrss / 1024, child.returncode, text, cpu)


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
        write_end(out, step)
    return step


def write_end(out: TextIO, step: int) -> None:
    """The last bar redraw and the OOM traceback of a training step."""
    out.write(bar(step) + "\n")
    out.write(f"Error running job: CUDA out of memory. Tried to allocate 1.27 GiB.\n\n{'=' * 40}\n")
    out.write(f"Result:\n - 0 completed jobs\n - 1 failure\n{'=' * 40}\n")
    out.write("Traceback (most recent call last):\n")
    out.write('  File "/ai-toolkit/run.py", line 120, in <module>\n    main()\n')
    out.write('  File "/ai-toolkit/jobs/process/BaseSDTrainProcess.py", line 2128, in run\n')
    out.write('  File "/ai-toolkit/extensions_built_in/sd_trainer/SDTrainer.py", line 1927, ')
    out.write("in hook_train_loop\n")
    out.write(f"{OOM}\nJob process terminated with exit code 1.\n")


# --- the mixed log: ordinary text and warnings, redraws, a caught traceback now and then ------

#: Ordinary lines a long job prints between its bars: library warnings (and the source line
#: Python prints under them), launcher and logger chatter, dataset notes. None of them is a
#: marker; several hold words the markers use ("Loading", "error", "memory", "sample").
ORDINARY = (
    "/venv/lib/python3.10/site-packages/torch/utils/checkpoint.py:91: UserWarning: None of the "
    "inputs have requires_grad=True. Gradients will be None",
    "  warnings.warn(",
    "/venv/lib/python3.10/site-packages/diffusers/models/attention_processor.py:1476: "
    "FutureWarning: `scale` is deprecated and will be removed in version 1.0.0.",
    "W1009 22:44:38.061000 48028 torch/distributed/elastic/multiprocessing/redirects.py:29] "
    "NOTE: Redirects are currently not supported in Windows or MacOs.",
    "[2025-03-14 10:49:12,004] [INFO] [logging.py:128:log_dist] [Rank 0] step={step}, "
    "skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]",
    "Token indices sequence length is longer than the specified maximum sequence length for "
    "this model (93 > 77). Running this sequence through the model will result in indexing "
    "errors",
    "The following part of your input was truncated because CLIP can only handle sequences up "
    "to 77 tokens: ['soft window light, shallow depth of field']",
    "skipping image /datasets/me/IMG_{step}.png: cannot identify image file",
    "epoch {step}/1000, average loss 0.1432, peak memory 21.3 GB",
    "INFO:root:bucket 768x1024 has 37 images, 2 repeats",
    "You are using a model of type t5 to instantiate a model of type . This is not supported "
    "for all configurations of models and can yield errors.",
    "{{'loss/lr': 0.0001, 'loss/avg': 0.1532, 'step': {step}}}",
    "  return F.linear(input, self.weight, self.bias)",
    "WARNING: low disk space on /workspace (12.4 GB free); consider deleting old samples",
)
CAUGHT_TRACEBACK = (
    "Error loading image /datasets/me/IMG_{step}.png, skipping it",
    "Traceback (most recent call last):",
    '  File "/ai-toolkit/toolkit/data_loader.py", line 512, in __getitem__',
    "    img = exif_transpose(Image.open(path))",
    '  File "/venv/lib/python3.10/site-packages/PIL/Image.py", line 3339, in open',
    "    raise UnidentifiedImageError(msg)",
    "PIL.UnidentifiedImageError: cannot identify image file '/datasets/me/IMG_{step}.png'",
)
TEXT_SHARE = 0.6
"""Share of the mixed log's bytes in ordinary text and warning lines."""
REDRAWS = 20
"""Training-bar redraws joined by ``\\r`` between two bursts of text lines."""
DENSE_REDRAWS = 1
DENSE_TEXT_SHARE = 0.7
"""The dense mixed log: one redraw, then two or three text lines (a library that warns at every
step), so that every few text lines hold a bar line."""
TRACEBACK_EVERY = 50_000
"""Steps between two caught tracebacks in the mixed log."""


def write_mixed_log(
    path: Path, size_bytes: int, *, redraws: int = REDRAWS, text_share: float = TEXT_SHARE
) -> int:
    """Write a mixed log (about 60 % text lines); return the step of the final OOM.

    Each step is one training-bar redraw (joined by ``\\r``); every ``redraws`` redraws, a
    burst of ordinary lines keeps the text share at ``text_share`` (the *dense* shape:
    ``DENSE_REDRAWS`` and ``DENSE_TEXT_SHARE``, a bar line between every few text lines). A save
    and a sample pass come every ``SAVE_EVERY`` steps, a caught traceback (a bad image, skipped)
    every ``TRACEBACK_EVERY``, and the run ends in the same OOM traceback as ``write_log``.
    """
    with path.open("w", encoding="utf-8", newline="") as out:
        write_start(out)
        step = 0
        text_bytes = bar_bytes = written = 0
        kinds = len(ORDINARY)
        while out.tell() < size_bytes:
            lines: list[str] = []
            for s in range(step, step + SAVE_EVERY):
                redraw = bar(s)
                lines.append(redraw)
                bar_bytes += len(redraw)
                while s % redraws == 0 and text_bytes < bar_bytes * text_share / (1 - text_share):
                    text = "\n" + ORDINARY[written % kinds].format(step=s)
                    written += 1
                    lines.append(text)
                    text_bytes += len(text)
                if s % TRACEBACK_EVERY == TRACEBACK_EVERY - 1:
                    lines.append("\n" + "\n".join(CAUGHT_TRACEBACK).format(step=s))
            out.write("".join(lines))
            step += SAVE_EVERY
            out.write(f"\nSaving at step {step}\n")
            out.write(
                f"Saved checkpoint to /ai-toolkit/output/{JOB}/{JOB}_{step:09d}.safetensors\n"
            )
            write_sample_pass(out)
        write_end(out, step)
    return step


#: A real config shape for the start-up of ``apply`` (a save: the whole pipeline).
APPLY_CONFIG = REPO / "tests" / "fixtures" / "configs" / "flux_portrait_24gb.yaml"


def startup_commands(folder: Path, log: Path) -> dict[str, list[str]]:
    """The child processes whose start-up is measured, by name."""
    ours = [sys.executable, "-m", "oom_wizard"]
    apply = [*ours, "apply", str(APPLY_CONFIG), "--moment", "early_steps", "--no-probe"]
    apply += ["-o", str(folder / "apply-out.yaml"), "--force"]
    return {
        "--version": [*ours, "--version"],
        "diagnose": [*ours, "diagnose", "--log", str(log), "--no-probe"],
        "apply": apply,
        "import yaml, pydantic": [sys.executable, "-c", "import yaml, pydantic"],
    }


def startup(runs: int, folder: Path, log: Path) -> None:
    """Print each start-up command's wall and CPU time (median, and the CPU's minimum: the
    figure the machine's other load disturbs least), the commands alternated ``runs`` times."""
    commands = startup_commands(folder, log)
    measures: dict[str, list[Measure]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, command in commands.items():
            measures[name].append(measure(command))
    for name, runs_of in measures.items():
        wall = statistics.median(m.seconds for m in runs_of)
        cpu = [m.cpu for m in runs_of]
        status = ", ".join(sorted({str(m.status) for m in runs_of}))
        print(
            f"start-up: {name:22s} wall {wall:.3f} s, cpu {statistics.median(cpu):.3f} s "
            f"(min {min(cpu):.3f}; medians of {len(runs_of)}; status {status})"
        )


def diagnose_command(log: Path) -> list[str]:
    """``diagnose`` on ``log``, as JSON, without probing the GPU."""
    return [
        sys.executable,
        "-m",
        "oom_wizard",
        "diagnose",
        "--log",
        str(log),
        "--json",
        "--no-probe",
    ]


def line_read_command(log: Path, *, binary: bool) -> list[str]:
    """Python reading ``log`` line by line and doing nothing else (text or binary mode)."""
    mode = (
        "open(sys.argv[1], 'rb')"
        if binary
        else ("open(sys.argv[1], encoding='utf-8', errors='replace')")
    )
    return [sys.executable, "-c", f"import sys\nfor line in {mode}:\n    pass", str(log)]


def answer(ours: Measure, final_step: int) -> tuple[dict[str, object], bool]:
    """The JSON diagnose printed, and whether it names the final OOM at its step."""
    result = json.loads(ours.stdout) if ours.status == 0 else {}
    right = (result.get("moment"), result.get("last_step")) == ("intermittent", final_step)
    return result, right


def print_answer(result: dict[str, object], right: bool) -> None:
    print(
        f"answer  : moment {result.get('moment')}, last step {result.get('last_step')}, "
        f"signals {result.get('signals')} ({'right' if right else 'WRONG'})"
    )


def bench_bars(folder: Path, size_mb: int, *, bar_lines: bool) -> bool:
    """The bar log: diagnose beside grep; whether the 10 s / 150 MB target is met."""
    log = folder / "log.txt"
    started = time.perf_counter()
    final_step = write_log(log, size_mb * 1024 * 1024, bar_lines=bar_lines)
    print(f"bar log: {log.stat().st_size / 1e6:,.0f} MB, written in ", end="")
    print(f"{time.perf_counter() - started:.1f} s")
    ours = measure(diagnose_command(log))
    grep = measure(["grep", "-c", "out of memory", str(log)])
    result, right = answer(ours, final_step)
    print(f"diagnose: {ours.seconds:6.2f} s  peak RSS {ours.rss_mb:6.1f} MB  status {ours.status}")
    matches = grep.stdout.strip()
    print(f"grep -c : {grep.seconds:6.2f} s  peak RSS {grep.rss_mb:6.1f} MB  ({matches} lines)")
    print(f"ratio   : {ours.seconds / grep.seconds:6.1f}x grep's wall time")
    print_answer(result, right)
    log.unlink()
    met = ours.seconds <= TARGET_SECONDS and ours.rss_mb <= TARGET_RSS_MB and right
    print(
        f"target (<= {TARGET_SECONDS:.0f} s, <= {TARGET_RSS_MB:.0f} MB, right answer): "
        f"{'met' if met else 'MISSED'}"
    )
    return met


#: Timed runs of each command on a mixed log, alternated; the median is reported.
REPEATS = 3


def median_run(measures: list[Measure]) -> Measure:
    """The run of median wall time."""
    return sorted(measures, key=lambda measure: measure.seconds)[len(measures) // 2]


def bench_mixed(folder: Path, size_mb: int, *, dense: bool = False) -> bool:
    """One mixed log (``dense``: the dense shape): diagnose beside Python's line reads;
    whether the 3x target is met."""
    shape = "dense" if dense else "mixed"
    log = folder / f"{shape}-{size_mb}.txt"
    started = time.perf_counter()
    if dense:
        final_step = write_mixed_log(
            log, size_mb * 1024 * 1024, redraws=DENSE_REDRAWS, text_share=DENSE_TEXT_SHARE
        )
    else:
        final_step = write_mixed_log(log, size_mb * 1024 * 1024)
    print(f"{shape} log: {log.stat().st_size / 1e6:,.0f} MB, written in ", end="")
    print(f"{time.perf_counter() - started:.1f} s")
    os.sync()  # the log's write-back must not run during the timings
    try:
        # Alternated, median of each: the machine's speed drifts from one run to the next.
        texts, binaries, runs = [], [], []
        for _ in range(REPEATS):
            texts.append(measure(line_read_command(log, binary=False)))
            binaries.append(measure(line_read_command(log, binary=True)))
            runs.append(measure(diagnose_command(log)))
        text, binary, ours = (median_run(measures) for measures in (texts, binaries, runs))
    finally:
        log.unlink()
    result, right = answer(ours, final_step)
    print(f"diagnose       : {ours.seconds:6.2f} s  peak RSS {ours.rss_mb:6.1f} MB")
    print(f"python, text   : {text.seconds:6.2f} s  peak RSS {text.rss_mb:6.1f} MB  (line read)")
    print(
        f"python, binary : {binary.seconds:6.2f} s  peak RSS {binary.rss_mb:6.1f} MB  (line read)"
    )
    ratio = ours.seconds / text.seconds
    print(
        f"ratio          : {ratio:6.1f}x the text read, "
        f"{ours.seconds / binary.seconds:.1f}x the binary read"
    )
    each = ", ".join(f"{d.seconds / t.seconds:.1f}x" for d, t in zip(runs, texts, strict=True))
    print(f"each run       : {each} the text read of the same round")
    print(
        f"cpu            : diagnose {ours.cpu:.2f} s, text read {text.cpu:.2f} s "
        f"({ours.cpu / max(text.cpu, 1e-9):.1f}x)"
    )
    print_answer(result, right)
    met = ratio <= TARGET_RATIO and ours.rss_mb <= TARGET_RSS_MB and right and text.status == 0
    print(
        f"target (<= {TARGET_RATIO:.0f}x the text read, <= {TARGET_RSS_MB:.0f} MB, right answer): "
        f"{'met' if met else 'MISSED'}"
    )
    return met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024, help="bar log size (default 1024)")
    parser.add_argument(
        "--mixed-mb", default="300,1024", help="mixed log sizes, comma-separated (300,1024)"
    )
    parser.add_argument(
        "--dense-mb",
        default="300",
        help="dense mixed log sizes (a bar line every few text lines), comma-separated (300)",
    )
    parser.add_argument("--startup-runs", type=int, default=5, help="start-up repetitions")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    parser.add_argument(
        "--bar-lines",
        action="store_true",
        help="every training-bar redraw on its own line (a terminal capture), not joined by \\r",
    )
    args = parser.parse_args()
    mixed = [int(size) for size in args.mixed_mb.split(",") if size.strip()]
    dense = [int(size) for size in args.dense_mb.split(",") if size.strip()]

    folder = Path(tempfile.mkdtemp(prefix="oomwiz-bench-"))
    CHILD_ENV.update(child_env(folder))
    met = True
    try:
        small = folder / "small.txt"
        small.write_text(
            "Generating baseline samples before training\n" + OOM + "\n", encoding="utf-8"
        )
        measure(diagnose_command(small))  # the warm-up: writes the bytecode cache
        if args.size_mb:
            met &= bench_bars(folder, args.size_mb, bar_lines=args.bar_lines)
        for size_mb in mixed:
            met &= bench_mixed(folder, size_mb)
        for size_mb in dense:
            met &= bench_mixed(folder, size_mb, dense=True)

        startup(args.startup_runs, folder, small)
        return 0 if met else 1
    finally:
        if args.keep:
            print(f"kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
