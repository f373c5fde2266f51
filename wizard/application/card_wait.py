"""Before each attempt of ``run``: the card's other tenants named, and the last trainer's
memory waited for.

A trainer that has exited may hold the card a little longer (the driver frees its memory as
its processes are reaped; a DataLoader worker or a helper may linger). Starting the next
attempt then weighs it against a card that is not all there, and the attempt crashes, or
crawls, for a reason that is not its config. So before each attempt after the first, ``run``
reads the card (``nvidia-smi``) and, while more is in use than before the first attempt (by
more than :data:`SLACK_GIB`), waits, saying so, for at most :data:`WAIT_S` seconds; then it
starts either way and says with how much in use. Before the first attempt it names what else
holds memory on the card (:func:`~oom_wizard.rules.tenants.tenants_words`). Without
``nvidia-smi`` nothing is said and nothing waits.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from oom_wizard.host.probe import ProbeResult, probe_gpu
from oom_wizard.host.tenants import CardTenants, card_tenants
from oom_wizard.rules.tenants import tenants_words
from oom_wizard.spelling import gib

WAIT_S: Final = 60.0
"""Seconds at most that ``run`` waits for the last trainer's memory before the next attempt."""
POLL_S: Final = 1.0
"""Seconds between two looks at the card while it waits."""
SLACK_GIB: Final = 0.5
"""In use above the level before the first attempt by at most this much is the card back (a
desktop's share moves by a few hundred MiB)."""


@dataclass
class CardWait:
    """The card as ``run`` found it before its first attempt, and the wait before the others.

    ``probe``, ``sleep`` and ``clock`` are the machine's (a test passes its own).
    """

    probe: Callable[[], ProbeResult | None] = probe_gpu
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    limit_s: float = WAIT_S
    poll_s: float = POLL_S
    baseline_gib: float | None = None
    """In use on the card before the first attempt."""
    first: ProbeResult | None = None
    """The reading before the first attempt (no trainer of ``run``'s on the card): each
    roll-back is sized against it
    (:attr:`~oom_wizard.application.opening.OpenedJob.card_read`), as the wait below brings
    the card back to it before the next attempt."""

    def _card(self) -> CardTenants | None:
        found = self.probe()
        if found is None or not found.gpus:
            return None
        if self.baseline_gib is None:
            self.first = found
        return card_tenants(found, found.gpus[0].index)

    def before_attempt(self, say: Callable[[str], None]) -> None:
        """Name the card's tenants (first attempt), or wait for the last trainer's memory."""
        card = self._card()
        if card is None:
            return
        if self.baseline_gib is None:
            self.baseline_gib = card.used_gib
            words = tenants_words(card)
            if words is not None:
                say(f"On the card: {words}.")
            return
        back = self.baseline_gib + SLACK_GIB
        if card.used_gib <= back:
            return
        say(
            f"Waiting up to {self.limit_s:g} s for the last trainer's memory to come back: "
            f"{gib(card.used_gib)} of {gib(card.total_gib)} is in use, "
            f"{gib(self.baseline_gib)} was before the first attempt."
        )
        started = self.clock()
        while self.clock() - started < self.limit_s:
            self.sleep(self.poll_s)
            now = self._card()
            if now is None or now.used_gib <= back:
                say(f"The card's memory is back after {self.clock() - started:.0f} s.")
                return
            card = now
        held = f" ({card.named()})" if card.named() else ""
        say(
            f"After {self.limit_s:g} s the card still has {gib(card.used_gib)} in use{held}, "
            f"{gib(self.baseline_gib)} before the first attempt; the next attempt starts anyway, "
            "with that much less of the card."
        )
