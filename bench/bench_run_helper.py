"""``run`` and a trainer whose helper holds its output open from a session of its own.

Each round starts ``oom-wizard run --auto`` on the demo's early-steps job with the fake trainer
(``tests/support/fake_trainer.py``) told to start a helper with ``setsid`` semantics
(``FAKE_SETSID_HELPER``: a new session, the trainer's stdout and stderr inherited, a 600 s
sleep) and a dataloader-like worker in its group. Three ways to end:

- ``exit``: the trainer finishes by itself (a card big enough); measured from the moment its
  process is gone to ``run``'s exit;
- ``ctrl-c``: one SIGINT to ``run`` while the trainer stalls at step 1 (as a terminal's Ctrl-C
  reaches ``run`` alone: the trainer has a session of its own); measured from the signal;
- ``sigterm``: the same with one SIGTERM;
- ``sigkill``: the same with SIGKILL, after ``run`` had 1.5 s to find the helper (the
  watchdog it names the helper to ends it then).

``--after`` seconds after ``run`` ended it counts the live processes that carry the round's tag
in their environment (the trainer, its worker, its helper inherit it); all must be gone.

Usage::

    python bench/bench_run_helper.py [--rounds 3] [--after 5]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from oom_wizard.application.running import stops_as_from_a_terminal
from tests.support.autopilot_support import (
    FAKE,
    SCENARIOS,
    TAG,
    pid_alive,
    tagged,
    wait_for,
    write_config,
)

WIZARD = Path(sys.executable).with_name("oom-wizard")
RUN_LIMIT_S = 120.0
WAYS = ("exit", "ctrl-c", "sigterm", "sigkill")
SIGNALS = {"ctrl-c": signal.SIGINT, "sigterm": signal.SIGTERM, "sigkill": signal.SIGKILL}


def one_round(folder: Path, way: str, after: float) -> tuple[float, int, int]:
    """(seconds from the trainer's end or the signal to ``run``'s exit, ``run``'s exit
    status, tagged processes alive ``after`` s later)."""
    from tests.support.autopilot_support import wait_for_bytes

    scenario = next(s for s in SCENARIOS if s.name == "image-early-steps")
    config = write_config(folder, scenario)
    tag = uuid.uuid4().hex
    pidfile, helperfile = folder / "pids", folder / "helper"
    env = {
        **os.environ,
        TAG: tag,
        "FAKE_VRAM_GB": "48",
        "FAKE_WORKER": "1",
        "FAKE_PIDFILE": str(pidfile),
        "FAKE_SETSID_HELPER": str(helperfile),
    }
    if way != "exit":
        env["FAKE_STALL_AT"] = "1"
    argv = [str(WIZARD), "run", str(config), "--auto", "--validation-steps", "0", "--",
            sys.executable, str(FAKE), "{config}"]  # fmt: skip
    proc = subprocess.Popen(
        argv,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=folder,
        preexec_fn=stops_as_from_a_terminal,  # a bench started with & would ignore SIGINT
    )
    trainer = int(wait_for(pidfile, RUN_LIMIT_S).split()[0])
    wait_for(helperfile, RUN_LIMIT_S)
    if way == "exit":
        while pid_alive(trainer):
            time.sleep(0.005)
    else:
        wait_for_bytes(folder / f"{scenario.name}.run.log", b" 1/3000 [", RUN_LIMIT_S)
        if way == "sigkill":
            time.sleep(1.5)  # run looks for processes outside the group once a second
        proc.send_signal(SIGNALS[way])
    since = time.monotonic()
    try:
        status = proc.wait(RUN_LIMIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        status = proc.wait()
    took = time.monotonic() - since
    time.sleep(after)
    left = tagged(tag)
    for pid in left:  # leave the machine as it was
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return took, status, len(left)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each way to end (3)")
    parser.add_argument("--after", type=float, default=5.0, help="seconds before counting (5)")
    args = parser.parse_args()
    if not Path("/proc").is_dir():
        print("needs /proc (Linux)")
        return 1
    after = f"left after {args.after:g} s"
    print(f"| how it ends | round | run ended after (s) | exit status | {after} |")
    print("|---|---|---|---|---|")
    worst: dict[str, float] = {}
    total_left = 0
    for way in WAYS:
        for n in range(1, args.rounds + 1):
            with tempfile.TemporaryDirectory() as folder:
                took, status, left = one_round(Path(folder), way, args.after)
            worst[way] = max(worst.get(way, 0.0), took)
            total_left += left
            print(f"| {way} | {n} | {took:.2f} | {status} | {left} |")
    print()
    for way in WAYS:
        print(f"{way}: run ended within {worst[way]:.2f} s (worst of {args.rounds})")
    print(f"processes left {args.after:g} s after run ended, all rounds: {total_left}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
