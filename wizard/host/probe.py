"""A look at this machine's GPUs and host memory, for when the wizard runs where the job ran.

``nvidia-smi`` tells how full each card is right now and which processes hold memory on it;
the host's RAM comes from ``/proc/meminfo`` on Linux, ``GlobalMemoryStatusEx`` on Windows and
the page counts of ``sysconf`` elsewhere (macOS: the total only; :func:`read_host_memory`).
The job that crashed is gone by then, so a process still holding a large share of the card
is competition (another job, a stuck worker), which the diagnosis reports as an environment
problem.

Nothing here is required: without ``nvidia-smi`` (a laptop, a Mac, a machine other than the
trainer's), or when it fails or hangs, :func:`probe_gpu` returns None without a word. An answer
that is not what ``nvidia-smi`` prints (more than :data:`MAX_ANSWER_BYTES`, bytes that are not
UTF-8) is read no further and ignored; :func:`read_probe` says why.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

PROBE_TIMEOUT_S: Final = 3.0
"""How long ``nvidia-smi`` may take (it can hang on a wedged driver)."""
GPU_QUERY: Final = "index,name,memory.total,memory.used,memory.free"
APPS_QUERY: Final = "pid,process_name,used_memory"
MEMINFO: Final = Path("/proc/meminfo")
WINDOWS: Final = sys.platform == "win32"
GIB: Final = 1024.0**3
MAX_ANSWER_BYTES: Final = 1024 * 1024
"""The most of one answer read: a row is under 200 bytes, so this is thousands of cards or
processes; anything longer is not ``nvidia-smi``'s answer and is not read to its end."""
_MIB_PER_GIB: Final = 1024.0


@dataclass(frozen=True)
class GpuInfo:
    """One card as ``nvidia-smi`` sees it (GiB)."""

    index: int
    name: str
    total_gib: float
    used_gib: float
    free_gib: float


@dataclass(frozen=True)
class GpuProcess:
    """A process holding memory on a card; ``used_gib`` is None where the driver hides it
    (Windows' WDDM mode reports ``[N/A]``)."""

    pid: int
    name: str
    used_gib: float | None


@dataclass(frozen=True)
class ProbeResult:
    """The GPUs, the processes on them and the host's memory, at the time of the probe."""

    gpus: tuple[GpuInfo, ...]
    processes: tuple[GpuProcess, ...]
    host_total_gib: float | None = None
    host_available_gib: float | None = None

    @property
    def processes_gib(self) -> float:
        """GiB held by the listed processes (those whose use is reported)."""
        return sum(p.used_gib for p in self.processes if p.used_gib is not None)

    @property
    def total_gib(self) -> float:
        """Capacity of all cards together."""
        return sum(g.total_gib for g in self.gpus)

    @property
    def used_gib(self) -> float:
        """Memory in use on all cards together."""
        return sum(g.used_gib for g in self.gpus)


def probe_gpu(*, timeout: float = PROBE_TIMEOUT_S, meminfo: Path = MEMINFO) -> ProbeResult | None:
    """Ask ``nvidia-smi`` about the cards and their processes; None when it cannot answer
    (or its answer is ignored: :func:`read_probe`)."""
    return read_probe(timeout=timeout, meminfo=meminfo)[0]


def read_probe(
    *, timeout: float = PROBE_TIMEOUT_S, meminfo: Path = MEMINFO
) -> tuple[ProbeResult | None, str | None]:
    """Ask ``nvidia-smi`` about the cards and their processes: the result (None: no answer),
    and why an answer was ignored (None: it was not).

    Args:
        timeout: Seconds each ``nvidia-smi`` call may take.
        meminfo: Where to read the host's memory (Linux); absent elsewhere.
    """
    executable = shutil.which("nvidia-smi")
    if executable is None:
        return None, None
    gpu_text = _query(executable, f"--query-gpu={GPU_QUERY}", timeout)
    if isinstance(gpu_text, Ignored):
        return None, gpu_text.why
    gpus = parse_gpus(gpu_text) if gpu_text is not None else ()
    if not gpus:
        return None, None
    apps_text = _query(executable, f"--query-compute-apps={APPS_QUERY}", timeout)
    if isinstance(apps_text, Ignored):
        return None, apps_text.why
    total, available = read_host_memory(meminfo)
    result = ProbeResult(
        gpus=gpus,
        processes=parse_processes(apps_text or ""),
        host_total_gib=total,
        host_available_gib=available,
    )
    return result, None


@dataclass(frozen=True)
class Ignored:
    """An answer that is not ``nvidia-smi``'s, and why."""

    why: str


def _query(executable: str, query: str, timeout: float) -> str | Ignored | None:
    """One ``nvidia-smi`` query as CSV without header and units; None if it fails, or
    :class:`Ignored` when the answer is too long or not UTF-8 (read at most
    :data:`MAX_ANSWER_BYTES` + 1 bytes, for at most ``timeout`` seconds)."""
    try:
        child = subprocess.Popen(
            [executable, query, "--format=csv,noheader,nounits"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    assert child.stdout is not None
    answer = bytearray()
    deadline = time.monotonic() + timeout
    if WINDOWS:  # no select on a pipe there: one read of the whole answer, in time or not
        try:
            out, _ = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            return None  # it hangs (a wedged driver)
        answer += out[: MAX_ANSWER_BYTES + 1]
    try:
        fd = child.stdout.fileno()
        while not WINDOWS and len(answer) <= MAX_ANSWER_BYTES:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None  # it hangs (a wedged driver)
            chunk = os.read(fd, 64 * 1024)
            if not chunk:
                break
            answer += chunk
    except OSError:
        return None
    finally:
        child.stdout.close()
        try:  # at the end of its answer it exits; cut short, it is ended
            child.wait(
                max(deadline - time.monotonic(), 0.0) if len(answer) <= MAX_ANSWER_BYTES else 0
            )
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                child.kill()
            child.wait()
    if len(answer) > MAX_ANSWER_BYTES:
        return Ignored(
            f"nvidia-smi answered with more than {MAX_ANSWER_BYTES // 1024} KiB, which is not "
            "its answer; the GPU probe is ignored"
        )
    if child.returncode != 0:
        return None
    try:
        return answer.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Ignored(
            f"nvidia-smi's answer is not UTF-8 text (byte 0x{answer[exc.start]:02x}); the GPU "
            "probe is ignored"
        )


def _mib(text: str) -> float | None:
    """A MiB figure as GiB; None for ``[N/A]`` and the like."""
    try:
        return float(text.strip()) / _MIB_PER_GIB
    except ValueError:
        return None


def parse_gpus(text: str) -> tuple[GpuInfo, ...]:
    """Rows of ``index, name, total, used, free`` (MiB); malformed rows are skipped."""
    gpus: list[GpuInfo] = []
    for row in text.splitlines():
        index, _, rest = row.partition(",")
        name, *sizes = rest.rsplit(",", 3)
        total, used, free = (_mib(value) for value in sizes) if len(sizes) == 3 else (None,) * 3
        if not index.strip().isdigit() or total is None or used is None or free is None:
            continue
        gpus.append(GpuInfo(int(index), name.strip(), total, used, free))
    return tuple(gpus)


def parse_processes(text: str) -> tuple[GpuProcess, ...]:
    """Rows of ``pid, process name, used memory`` (MiB); the name may hold commas."""
    processes: list[GpuProcess] = []
    for row in text.splitlines():
        pid, _, rest = row.partition(",")
        name, _, used = rest.rpartition(",")
        if not pid.strip().isdigit() or not name.strip():
            continue
        processes.append(GpuProcess(int(pid), name.strip(), _mib(used)))
    return tuple(processes)


def read_host_memory(
    meminfo: Path = MEMINFO,
    *,
    platform: str = sys.platform,
    windows_status: Callable[[], tuple[int, int] | None] | None = None,
    pages: Callable[[str], int] | None = None,
) -> tuple[float | None, float | None]:
    """(total, available) host RAM in GiB: ``/proc/meminfo`` on Linux; on Windows
    ``GlobalMemoryStatusEx`` (``windows_status``: its total and available bytes); elsewhere
    (macOS, the BSDs) the total from ``sysconf``'s page counts, the available unknown. None
    for what cannot be read."""
    if platform == "win32":
        status = (windows_status or _global_memory_status)()
        return (status[0] / GIB, status[1] / GIB) if status is not None else (None, None)
    try:
        text = meminfo.read_text(encoding="ascii", errors="replace")
    except OSError:
        count = pages if pages is not None else getattr(os, "sysconf", None)
        if count is None:
            return None, None
        try:
            total = count("SC_PHYS_PAGES") * count("SC_PAGE_SIZE")
        except (OSError, ValueError):
            return None, None
        return (total / GIB if total > 0 else None), None
    values: dict[str, float] = {}
    for row in text.splitlines():
        key, _, rest = row.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            values[key] = int(parts[0]) / (1024.0 * 1024.0)  # kB → GiB
    return values.get("MemTotal"), values.get("MemAvailable")


def _global_memory_status() -> tuple[int, int] | None:
    """Windows' ``GlobalMemoryStatusEx``: (total, available) physical bytes; None if it fails."""
    try:
        import ctypes

        class Status(ctypes.Structure):
            _fields_ = [
                ("length", ctypes.c_ulong),
                ("load", ctypes.c_ulong),
                ("total_phys", ctypes.c_ulonglong),
                ("avail_phys", ctypes.c_ulonglong),
                ("total_page", ctypes.c_ulonglong),
                ("avail_page", ctypes.c_ulonglong),
                ("total_virtual", ctypes.c_ulonglong),
                ("avail_virtual", ctypes.c_ulonglong),
                ("avail_extended", ctypes.c_ulonglong),
            ]

        status = Status()
        status.length = ctypes.sizeof(Status)
        kernel32 = ctypes.windll.kernel32  # type: ignore[attr-defined]
        if not kernel32.GlobalMemoryStatusEx(ctypes.byref(status)):
            return None
    except (OSError, AttributeError):
        return None
    return int(status.total_phys), int(status.avail_phys)
