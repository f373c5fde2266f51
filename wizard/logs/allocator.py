"""PyTorch's allocator message, old and new: the figures it gives, in GiB.

``CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.65 GiB of
which 1.2 GiB is free. Process 1234 has 20.1 GiB memory in use ...`` bounds the real peak at the
failing phase. Its formats stay here as code, because reading their numbers is code; the lines
that carry them are found by the marker table.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from oom_wizard.logs.result import OomFigures, OtherProcess

CUDA_CONTEXT_MAX_GIB: Final = 2.5
"""What a process holds on the card beyond PyTorch's own memory (CUDA's context, cuBLAS and
cuDNN workspaces), at most: how far a listed process may exceed what PyTorch held and still be
the job itself (:func:`own_process`)."""


_SIZE = r"(?P<{0}>\d+(?:\.\d+)?)\s*(?P<{0}_unit>bytes|[KMGT]i?B|B)\b"
_UNIT_GIB: Final[Mapping[str, float]] = {
    "bytes": 2.0**-30,
    "B": 2.0**-30,
    "KiB": 2.0**-20,
    "KB": 2.0**-20,
    "MiB": 2.0**-10,
    "MB": 2.0**-10,
    "GiB": 1.0,
    "GB": 1.0,
    "TiB": 1024.0,
    "TB": 1024.0,
}

TRIED = re.compile(r"Tried to allocate " + _SIZE.format("v"))
"""Both forms: the allocation that failed."""
CURRENT_CAPACITY = re.compile(
    r"GPU (?:(?P<gpu>\d+) )?\s*has a total capac(?:ity|ty) of "
    + _SIZE.format("total")
    + r" of which "
    + _SIZE.format("free")
    + r" is free"
)
"""Current form: ``GPU 0 has a total capacity of 31.36 GiB of which 336.62 MiB is free`` (some
builds leave the index out: ``GPU  has a total capacity of 95.00 GiB ...``)."""
OTHER_PROCESS = re.compile(
    r"(?<![Tt]his )\bProcess (?:(?P<pid>\d+) )?has " + _SIZE.format("v") + r" memory in use"
)
"""Current form, once per other process: ``Process 4242 has 2.00 GiB memory in use``."""
THIS_PROCESS = re.compile(r"this process has " + _SIZE.format("v") + r" memory in use")
ALLOWED = re.compile(_SIZE.format("v") + r" allowed;")
"""Current form, when the process is capped (``torch.cuda.set_per_process_memory_fraction``):
``... this process has 23.52 GiB memory in use. 24.00 GiB allowed; Of the allocated ...``."""
ALLOCATED = re.compile(
    r"Of the allocated memory " + _SIZE.format("v") + r" is allocated by PyTorch"
)
RESERVED_UNALLOCATED = re.compile(_SIZE.format("v") + r" is reserved by PyTorch but unallocated")
LEGACY_GPU = re.compile(r"\(GPU (?P<gpu>\d+);")
LEGACY_TOTAL = re.compile(_SIZE.format("v") + r" total capac(?:ity|ty)")
"""Legacy form, with the ``capacty`` misspelling of some torch versions."""
LEGACY_ALLOCATED = re.compile(_SIZE.format("v") + r" already allocated")
LEGACY_FREE = re.compile(_SIZE.format("v") + r" free\b")
LEGACY_RESERVED = re.compile(_SIZE.format("v") + r" reserved in total by PyTorch")


def _gib(match: re.Match[str], name: str) -> float:
    return float(match[name]) * _UNIT_GIB[match[f"{name}_unit"]]


def parse_allocator_message(text: str) -> dict[str, Any]:
    """The numbers found in one line of PyTorch's out-of-memory message (GiB).

    Keys (only those found): ``form``, ``gpu``, ``tried``, ``total``, ``free``,
    ``this_process``, ``allowed``, ``allocated``, ``reserved``, ``reserved_unallocated``,
    ``other_processes`` (a list of ``(pid, gib)``).
    """
    found: dict[str, Any] = {}
    if match := TRIED.search(text):
        found["tried"] = _gib(match, "v")
    if match := CURRENT_CAPACITY.search(text):
        found.update(form="current", gpu=int(match["gpu"]) if match["gpu"] else None)
        found.update(total=_gib(match, "total"), free=_gib(match, "free"))
    others = [
        (int(m["pid"]) if m["pid"] else None, _gib(m, "v")) for m in OTHER_PROCESS.finditer(text)
    ]
    if others:
        found["other_processes"] = others
    for key, pattern in (
        ("this_process", THIS_PROCESS),
        ("allowed", ALLOWED),
        ("allocated", ALLOCATED),
        ("reserved_unallocated", RESERVED_UNALLOCATED),
    ):
        if match := pattern.search(text):
            found[key] = _gib(match, "v")
    if match := LEGACY_TOTAL.search(text):
        found.update(form="legacy", total=_gib(match, "v"))
        if gpu := LEGACY_GPU.search(text):
            found["gpu"] = int(gpu["gpu"])
        for key, pattern in (
            ("allocated", LEGACY_ALLOCATED),
            ("free", LEGACY_FREE),
            ("reserved", LEGACY_RESERVED),
        ):
            if match := pattern.search(text):
                found[key] = _gib(match, "v")
    return found


def own_process(
    listed: Sequence[tuple[int | None, float]], allocated: float, unallocated: float
) -> int | None:
    """Which listed process is the job itself, when the message names none "this process".

    PyTorch names its own process by PID; in a container (another PID namespace) it cannot, and
    lists every process alike. The job's own entry is then the one whose memory covers what
    PyTorch held (allocated plus reserved-but-unallocated) by no more than CUDA's own share
    (``CUDA_CONTEXT_MAX_GIB``); of several, the closest. None when no entry fits.
    """
    held = allocated + unallocated
    fits = [
        (gib - held, index)
        for index, (_, gib) in enumerate(listed)
        if 0.0 <= gib - held <= CUDA_CONTEXT_MAX_GIB
    ]
    return min(fits)[1] if fits else None


def oom_figures(found: Mapping[str, Any], line: int) -> OomFigures:
    """Assemble the figures; the legacy form's fragmentation is reserved minus allocated, and a
    message without "this process" has it picked out of the listed ones (:func:`own_process`)."""
    unallocated = found.get("reserved_unallocated")
    reserved, allocated = found.get("reserved"), found.get("allocated")
    if unallocated is None and reserved is not None and allocated is not None:
        unallocated = max(reserved - allocated, 0.0)
    listed: list[tuple[int | None, float]] = list(found.get("other_processes", []))
    this_process = found.get("this_process")
    inferred = False
    if this_process is None and listed and allocated is not None:
        own = own_process(listed, allocated, unallocated or 0.0)
        if own is not None:
            this_process, inferred = listed.pop(own)[1], True
    total, free, capacity = found.get("total"), found.get("free"), None
    allowed = found.get("allowed")
    if allowed is not None and total is not None and allowed < total:
        # A capped process: its allowance is the card it has. What it may still take is the
        # allowance less what it holds, however much of the physical card is free.
        held = this_process if this_process is not None else (allocated or 0.0)
        capacity, total = total, allowed
        free = max(allowed - held, 0.0) if free is None else min(free, max(allowed - held, 0.0))
    return OomFigures(
        form=found.get("form", "current"),
        gpu=found.get("gpu"),
        tried=found.get("tried"),
        total=total,
        free=free,
        capacity=capacity,
        this_process=this_process,
        allocated=allocated,
        reserved=reserved,
        reserved_unallocated=unallocated,
        other_processes=tuple(OtherProcess(pid, gib) for pid, gib in listed),
        line=line,
        this_process_inferred=inferred,
    )
