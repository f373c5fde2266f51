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

Flood (``--flood-mb-per-s``, default 50, for ``--flood-seconds``, default 10): a writer process
grows a log with mixed lines (``bench_diagnose``'s mixed shape: text and warning lines between
training-bar redraws) at that rate, then writes AI Toolkit's OOM failure block; the headless
screen follows it. Printed: the delay from the block written (the writer's clock) to the screen
showing the crash, then to the screen leaving for the wizard with the crash diagnosed; and the
key latency meanwhile, the time Pilot's ``press`` of a key with no binding takes, every 0.2 s
while the log is read (median, 95th percentile, max).

Usage::

    python bench/bench_watch.py [--runs 10] [--mb-per-s 1] [--seconds 10] [--tmux]
                                [--flood-mb-per-s 50] [--flood-seconds 10] [--flood-only]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import ClassVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from textual import events
from textual.css.query import NoMatches
from textual.widgets import Log

from oom_wizard.application.follow import WatchTarget
from oom_wizard.logs.tail import LiveJob, LiveUpdate
from oom_wizard.screens.app import create_app
from oom_wizard.screens.step import StepScreen
from oom_wizard.screens.watch import POLL_S, WatchApp
from tests.support.autopilot_support import FAKE, SCENARIOS, write_config


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
    from tests.support.tmux_support import TMUX, WIZARD, terminal  # the end-to-end tests' terminal

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


FAILURE = (
    b"\nError running job: CUDA out of memory. Tried to allocate 1.27 GiB.\n\n"
    + b"=" * 40
    + b"\nResult:\n - 0 completed jobs\n - 1 failure\n"
    + b"=" * 40
    + b"\nTraceback (most recent call last):\n"
    + b'  File "/ai-toolkit/run.py", line 120, in <module>\n    main()\n'
    + b'  File "/ai-toolkit/extensions_built_in/sd_trainer/SDTrainer.py", line 1927, '
    + b"in hook_train_loop\n"
    + b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.27 GiB. GPU 0 has a "
    + b"total capacity of 23.55 GiB of which 412.31 MiB is free.\n"
)


def writer(log: Path, mb_s: float, seconds: float) -> None:
    """Grow ``log`` with mixed lines at ``mb_s`` for ``seconds``, then write the failure
    block; print the wall clock (``time.time()``) right after it was written."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_diagnose import write_mixed_log

    seed = log.with_suffix(".seed")
    write_mixed_log(seed, 4 << 20)
    data = seed.read_bytes()
    seed.unlink()
    start = data.index(b"\n", len(data) // 4) + 1
    piece = data[start : data.rindex(b"\n", 0, len(data) * 3 // 4) + 1]
    head = data[:start]
    fd = os.open(log, os.O_WRONLY | os.O_APPEND)
    os.write(fd, head)
    written, began = len(head), time.monotonic()
    while (now := time.monotonic() - began) < seconds:
        due = int(now * mb_s * 1_000_000)
        while written < due:
            written += os.write(fd, piece)
        time.sleep(0.01)
    os.write(fd, FAILURE)
    print(time.time(), written, flush=True)
    os.close(fd)


class TimedWatchApp(WatchApp):
    """The live screen, noting when each key event reaches it."""

    keys_at: ClassVar[list[float]] = []
    crash_shown_at: ClassVar[float | None] = None

    def show_update(self, update: LiveUpdate) -> None:
        super().show_update(update)
        if update.status.crashed and TimedWatchApp.crash_shown_at is None:
            TimedWatchApp.crash_shown_at = time.time()  # the screen shows "crashed" now

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key):
            TimedWatchApp.keys_at.append(time.perf_counter())
        await super().on_event(event)


async def key_latency(app: TimedWatchApp) -> float:
    """Seconds from a key posted to the app to the app handling it (Pilot's ``press`` also
    waits for the process to be idle, up to a second or two while the log is read)."""
    seen = len(TimedWatchApp.keys_at)
    began = time.perf_counter()
    app.post_message(events.Key("x", "x"))
    while len(TimedWatchApp.keys_at) == seen:
        await asyncio.sleep(0.001)
    return TimedWatchApp.keys_at[seen] - began


async def flood(folder: Path, config: Path, mb_s: float, seconds: float) -> None:
    """The flood measure (see the module docstring)."""
    log = folder / "flood.txt"
    log.write_bytes(b"")
    app = TimedWatchApp(WatchTarget(log, config, "bench"), probe=False)
    presses: list[float] = []
    keys: list[float] = []
    warnings: list[str] = []
    shown_at = left_at = None
    idle: list[float] = []
    async with app.run_test(size=(100, 30)) as pilot:
        for _ in range(10):  # the same presses on the idle screen, for scale
            began = time.perf_counter()
            await pilot.press("x")
            idle.append(time.perf_counter() - began)
            await asyncio.sleep(0.2)
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--child",
            "writer",
            str(log),
            str(mb_s),
            str(seconds),
            stdout=asyncio.subprocess.PIPE,
        )
        deadline = time.time() + seconds + 300
        while app.return_value is None and time.time() < deadline:
            shown_at = TimedWatchApp.crash_shown_at
            with contextlib.suppress(NoMatches):
                warnings = list(app.query_one("#warnings", Log).lines)
            if shown_at is None:
                keys.append(await key_latency(app))
                began = time.perf_counter()
                await pilot.press("x")
                presses.append(time.perf_counter() - began)
            await asyncio.sleep(0.2 if shown_at is None else 0.01)
        left_at = time.time() if app.return_value is not None else None
        out, _ = await proc.communicate()
    written_at, size = out.decode().split()
    wrote = float(written_at)
    presses.sort()
    print(
        f"flood: {float(size) / 1e6:,.0f} MB of mixed lines at {mb_s:g} MB/s for {seconds:g} s, "
        "then the OOM failure block"
    )
    print(
        "  the crash on screen  : "
        + (f"{shown_at - wrote:.2f} s after it was written" if shown_at else "NOT SHOWN")
    )
    print(
        "  left for the wizard  : "
        + (f"{left_at - wrote:.2f} s after (the crash diagnosed)" if left_at else "NOT LEFT")
    )
    if keys:
        keys.sort()
        p95 = keys[min(len(keys) - 1, int(len(keys) * 0.95))]
        print(
            f"  key latency          : median {statistics.median(keys) * 1000:.1f} ms, "
            f"95th percentile {p95 * 1000:.1f} ms, max {keys[-1] * 1000:.1f} ms "
            f"(a key event posted -> handled by the app, {len(keys)} while it read)"
        )
    if presses:
        p95 = presses[min(len(presses) - 1, int(len(presses) * 0.95))]
        print(
            f"  Pilot press          : median {statistics.median(presses) * 1000:.0f} ms, "
            f"95th percentile {p95 * 1000:.0f} ms, max {presses[-1] * 1000:.0f} ms "
            f"({len(presses)} presses while it read; it waits for an idle process); "
            f"idle screen: median "
            f"{statistics.median(idle) * 1000:.0f} ms, max {max(idle) * 1000:.0f} ms"
        )
    skipped = sum("Fell behind" in line for line in warnings)
    print(f"  fell behind, told    : {skipped} time(s) (at most once per 5 s)")


def main() -> int:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--mb-per-s", type=float, default=1.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--tmux", action="store_true", help="time it in a real terminal too")
    parser.add_argument("--flood-mb-per-s", type=float, default=50.0)
    parser.add_argument("--flood-seconds", type=float, default=10.0)
    parser.add_argument("--flood-only", action="store_true", help="only the flood measure")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        mode, log, config, seconds = args.child
        if mode == "writer":
            writer(Path(log), float(config), float(seconds))
        else:
            child(mode, Path(log), Path(config), float(seconds))
        return 0
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        config, data = fake_log(folder)
        if args.flood_mb_per_s:
            asyncio.run(flood(folder, config, args.flood_mb_per_s, args.flood_seconds))
        if args.flood_only:
            return 0
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
