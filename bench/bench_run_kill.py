"""SIGKILL of ``oom-wizard run`` at random moments: how many trainer processes are left.

Each round starts ``oom-wizard run --auto`` on the demo's early-steps job with the fake trainer
(``tests/support/fake_trainer.py``, a dataloader-like worker in its group, a little sleep per step
so that a round spans model load, training, the crash, the roll-back and the next attempts),
sends SIGKILL to ``run`` itself at a random moment, waits, and counts the processes that carry
the round's tag in their environment (the trainer and its worker inherit it; ``run`` and its
watchdog do not count). Nothing but the kill stops them: the trainer's ``PR_SET_PDEATHSIG``
and the watchdog that ends the group when ``run``'s pipe closes.

Usage::

    python bench/bench_run_kill.py [--rounds 20] [--after 5] [--seed N]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.autopilot_support import FAKE, SCENARIOS, TAG, tagged, write_config

WIZARD = Path(sys.executable).with_name("oom-wizard")


def one_round(folder: Path, moment: float, after: float) -> tuple[int, int]:
    """Kill ``run`` ``moment`` s after its first trainer appeared (its start is slow on a busy
    machine); (trainer processes seen at the kill, left ``after`` s later)."""
    scenario = next(s for s in SCENARIOS if s.name == "image-early-steps")
    config = write_config(folder, scenario)
    tag = uuid.uuid4().hex
    env = {
        **os.environ,
        TAG: tag,
        "FAKE_VRAM_GB": "24",
        "FAKE_WORKER": "1",
        "FAKE_STEP_S": "0.01",
    }
    proc = subprocess.Popen(
        [str(WIZARD), "run", str(config), "--auto", "--", sys.executable, str(FAKE), "{config}"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=folder,
    )
    deadline = time.monotonic() + 30
    while not tagged(tag) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(moment)
    seen = len(tagged(tag))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    time.sleep(after)
    left = tagged(tag)
    for pid in left:  # leave the machine as it was
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return seen, len(left)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--after", type=float, default=5.0, help="seconds before counting (5)")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    if not Path("/proc").is_dir():
        print("needs /proc (Linux)")
        return 1
    rng = random.Random(args.seed)
    total_left = 0
    print("| round | kill after the first trainer (s) | trainer processes at the kill | left after "
          f"{args.after:g} s |")  # fmt: skip
    print("|---|---|---|---|")
    for n in range(1, args.rounds + 1):
        moment = rng.uniform(0.0, 5.0)
        with tempfile.TemporaryDirectory() as folder:
            seen, left = one_round(Path(folder), moment, args.after)
        total_left += left
        print(f"| {n} | {moment:.2f} | {seen} | {left} |")
    print(f"\n{args.rounds} SIGKILLs of run: {total_left} trainer processes left after "
          f"{args.after:g} s")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
