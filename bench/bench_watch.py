"""``watch``'s latency and CPU cost.

Latency: the live screen (``oom_wizard.screens.watch.WatchApp``, headless, its default poll
interval) follows a log the fake trainer wrote up to its last skip banner; then the failure
block (the ``Error running job: OOM…`` line, the result block and the traceback) is appended
at once, and the clock runs until the wizard shows that crash: the live screen diagnoses it
and leaves with the settled state, and the wizard, started on that state as ``watch`` starts
it, has its first step screen (the first change) mounted. Median, min and max over
``--runs`` runs. Headless: a real terminal adds the two apps' screen switch, so with ``--tmux``
the same is timed in a real terminal too: ``oom-wizard watch`` runs in a tmux pane, and the
clock runs from the failure block written until the pane shows the wizard's first step
(``Step 1 of``; the pane is captured every few milliseconds).

CPU: a child process follows a log that grows at ``--mb-per-s`` (training-bar redraws joined
by ``\\r``, skip banners, saves, as the fake trainer prints them) for ``--seconds``, polling as
the screen does; its user+system CPU time over the wall time is the share of one core. Once
with the follower alone (``LiveJob``), once with the whole headless screen.

Usage::

    python bench/bench_watch.py [--runs 10] [--mb-per-s 1] [--seconds 10] [--tmux]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from oom_wizard.follow import LiveJob, WatchTarget
from oom_wizard.screens.app import create_app
from oom_wizard.screens.step import StepScreen
from oom_wizard.screens.watch import POLL_S, WatchApp
from tests.autopilot_support import FAKE, SCENARIOS, write_config


def fake_log(folder: Path, vram: str = "24") -> tuple[Path, bytes]:
    """The fake trainer's log of the early-steps scenario, and its config."""
    config = write_config(folder, SCENARIOS[0])
    done = subprocess.run(
        [sys.executable, str(FAKE), str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "FAKE_VRAM_GB": vram},
        check=False,
    )
    return config, done.stdout


async def one_latency(folder: Path, config: Path, data: bytes) -> float:
    """Seconds from the failure block written to the wizard's first step shown."""
    log = folder / f"log-{time.monotonic_ns()}.txt"
    cut = data.index(b"Error running job: ")
    log.write_bytes(data[:cut])
    app = WatchApp(WatchTarget(log, config, "bench"), probe=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.5)
        with log.open("ab") as stream:
            start = time.perf_counter()
            stream.write(data[cut:])
        while app.return_value is None:
            await asyncio.sleep(0.002)
    result = app.return_value
    assert result.state is not None, "the crash did not open the wizard"
    wizard = create_app(opened=result.state)
    async with wizard.run_test(size=(100, 30)) as pilot:
        while not (isinstance(wizard.screen, StepScreen) and wizard.screen.query(".title")):
            await asyncio.sleep(0.002)
        took = time.perf_counter() - start
        await pilot.press("ctrl+q")
    return took


def tmux_latency(folder: Path, config: Path, data: bytes) -> float:
    """Seconds from the failure block written to a real terminal showing the first step."""
    from tests.tmux_support import TMUX, WIZARD, terminal  # the end-to-end tests' terminal

    assert TMUX is not None and WIZARD.exists(), "needs tmux and the installed oom-wizard"
    log = folder / f"tmux-{time.monotonic_ns()}.txt"
    cut = data.index(b"Error running job: ")
    log.write_bytes(data[:cut])
    command = f"{WIZARD} watch {config} --log {log} --no-probe; sleep 30"
    with terminal(command, cwd=folder) as pane:
        pane.wait_for("Phase training")
        time.sleep(0.3)
        with log.open("ab") as stream:
            start = time.perf_counter()
            stream.write(data[cut:])
        while "Step 1 of" not in pane.screen():
            time.sleep(0.002)  # wait_for polls every 0.1 s: too coarse for a latency
        return time.perf_counter() - start


def growing_chunk(data: bytes) -> bytes:
    """A piece of training output: bar redraws, a skip banner, a save (about 100 KB)."""
    start = data.index(b"flux_portrait_lora:   0%")
    end = data.index(b"Saved checkpoint to output/flux_portrait_lora/flux_portrait_lora.safe")
    body = data[start:end]
    reps = max(1, 100_000 // max(len(body), 1))
    return body * reps


def child(mode: str, log: Path, config: Path, seconds: float) -> None:
    """Follow ``log`` for ``seconds``; print the CPU seconds used."""
    if mode == "follow":
        job = LiveJob(log)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            job.poll()
            time.sleep(POLL_S)
    else:

        async def run_app() -> None:
            app = WatchApp(WatchTarget(log, config, "bench"), probe=False)
            async with app.run_test(size=(100, 30)) as pilot:
                await pilot.pause(seconds)

        asyncio.run(run_app())
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(usage.ru_utime + usage.ru_stime)


def cpu_share(
    folder: Path, config: Path, data: bytes, mode: str, mb_s: float, seconds: float
) -> tuple[float, int]:
    """(share of one core, bytes written) while the log grows at ``mb_s``."""
    log = folder / f"grow-{mode}.txt"
    log.write_bytes(b"")
    chunk = growing_chunk(data)
    idle = subprocess.run(
        [sys.executable, __file__, "--child", mode, str(log), str(config), "0"],
        capture_output=True,
        text=True,
        check=True,
    )
    startup = float(idle.stdout.strip().splitlines()[-1])
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child", mode, str(log), str(config), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    written = 0
    start = time.monotonic()
    with log.open("ab") as stream:
        while proc.poll() is None:
            due = int((time.monotonic() - start) * mb_s * 1_000_000)
            while written < due:
                piece = chunk[: due - written]
                stream.write(piece)
                written += len(piece)
            stream.flush()
            time.sleep(0.05)
    out, _ = proc.communicate()
    used = float(out.strip().splitlines()[-1]) - startup
    return used / seconds, written


def main() -> int:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--mb-per-s", type=float, default=1.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--tmux", action="store_true", help="time it in a real terminal too")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        mode, log, config, seconds = args.child
        child(mode, Path(log), Path(config), float(seconds))
        return 0
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        config, data = fake_log(folder)
        times = [asyncio.run(one_latency(folder, config, data)) for _ in range(args.runs)]
        print(
            f"watch latency, OOM failure block written -> the wizard's first step on it shown "
            f"(poll every {POLL_S:.2f} s), {args.runs} runs: "
            f"median {statistics.median(times) * 1000:.0f} ms, "
            f"min {min(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms"
        )
        if args.tmux:
            real = [tmux_latency(folder, config, data) for _ in range(args.runs)]
            print(
                f"watch latency in a real terminal (tmux), OOM failure block written -> the "
                f"pane shows the wizard's first step, {args.runs} runs: "
                f"median {statistics.median(real) * 1000:.0f} ms, "
                f"min {min(real) * 1000:.0f} ms, max {max(real) * 1000:.0f} ms"
            )
        _, finished = fake_log(folder, vram="48")
        for mode in ("follow", "app"):
            share, written = cpu_share(folder, config, finished, mode, args.mb_per_s, args.seconds)
            what = "LiveJob alone" if mode == "follow" else "the whole headless watch screen"
            print(
                f"CPU while following a log growing at {args.mb_per_s:g} MB/s "
                f"for {args.seconds:g} s "
                f"({written / 1e6:.1f} MB), {what}: {share * 100:.1f} % of one core "
                "(start-up excluded)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
