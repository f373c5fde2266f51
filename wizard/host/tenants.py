"""The card's other tenants: which processes hold memory on the card a job will use.

Read from the GPU probe (:mod:`oom_wizard.host.probe`: ``nvidia-smi``'s cards and compute
processes). ``nvidia-smi``'s process list does not say which card a process is on in the query
the probe makes, so the processes are placed on the job's card only where the machine has one
card; with several, :attr:`CardTenants.placed` is False and the card's own figures (memory in
use, memory free) are all that is said of it.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from oom_wizard.host.probe import GpuProcess, ProbeResult


@dataclass(frozen=True)
class CardTenants:
    """One card and the processes that hold memory on it (GiB), the job's own left out.

    Attributes:
        index: The card's index (``nvidia-smi``'s; the job's ``cuda:0`` is the first).
        total_gib: Its memory.
        used_gib: In use on it now, by anything.
        free_gib: Free on it now.
        tenants: The processes on it (with their memory where the driver says it).
        placed: Whether the processes are known to be on this card (one card on the machine).
    """

    index: int
    total_gib: float
    used_gib: float
    free_gib: float
    tenants: tuple[GpuProcess, ...] = ()
    placed: bool = True

    @property
    def held_gib(self) -> float:
        """What is held on the card now: the card's own figure of memory in use (it counts
        what the driver hides from the process list, a desktop's share included)."""
        return self.used_gib

    def named(self) -> str:
        """``pid 4242 python 6.00 GiB, pid 77 Xorg 0.40 GiB`` (an empty text: none listed)."""
        return ", ".join(
            f"pid {p.pid} {p.name} "
            + (f"{p.used_gib:.2f} GiB" if p.used_gib is not None else "(its memory not shown)")
            for p in self.tenants
        )


def card_tenants(
    probe: ProbeResult | None, index: int = 0, *, own: Collection[int] = ()
) -> CardTenants | None:
    """The card ``index`` of the probe and what holds memory on it, the processes in ``own``
    (the job's) left out; None without a probe or such a card."""
    if probe is None:
        return None
    card = next((gpu for gpu in probe.gpus if gpu.index == index), None)
    if card is None:
        return None
    placed = len(probe.gpus) == 1
    tenants = tuple(p for p in probe.processes if p.pid not in own) if placed else ()
    return CardTenants(card.index, card.total_gib, card.used_gib, card.free_gib, tenants, placed)
