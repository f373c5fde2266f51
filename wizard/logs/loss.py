"""The training loss a run's bar reported, read in bounded memory.

AI Toolkit's training bar carries the loss in its postfix (``… 2.16s/it, lr: 1e-04 loss:
4.512e-01]``), redrawn with ``\\r`` after every step, so a run's log holds one reading per step.
Whether the loss moved is one of the two signs that a run trained (the other is the adapter it
saved, :mod:`oom_wizard.storage.adapter`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

LOSS: Final = re.compile(rb"\bloss[:=]\s*([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf))")
"""A bar postfix's loss (``loss: 4.512e-01``, ``loss=0.12``); ``avr_loss`` is left out."""
CHUNK_BYTES: Final = 1024 * 1024
FLAT_MIN_READINGS: Final = 10
"""Readings at least this many, all the same, make a loss that did not move (a handful of
identical values may be a short run's rounding)."""


@dataclass(frozen=True)
class LossTrace:
    """The loss readings of one log.

    Attributes:
        count: Readings found.
        first: The first reading.
        last: The last reading.
        low: The lowest reading.
        high: The highest reading.
        finite: Whether every reading was a number (no ``nan``, no ``inf``).
    """

    count: int = 0
    first: float | None = None
    last: float | None = None
    low: float | None = None
    high: float | None = None
    finite: bool = True

    @property
    def moved(self) -> bool | None:
        """True: the loss took more than one value; False: it sat on one (or was never a
        number) over at least :data:`FLAT_MIN_READINGS` readings; None: too few to say."""
        if self.count == 0:
            return None
        if not self.finite and self.count >= FLAT_MIN_READINGS:
            return False
        if self.low is not None and self.high is not None and self.low != self.high:
            return True
        return False if self.count >= FLAT_MIN_READINGS else None

    def words(self) -> str:
        """The readings in a phrase."""
        if self.count == 0:
            return "the log shows no loss"
        if not self.finite:
            return f"the loss was not a number in {self.count} readings"
        return (
            f"the loss went from {self.first:.4g} to {self.last:.4g} "
            f"({self.low:.4g} to {self.high:.4g} over {self.count} readings)"
        )


def loss_trace(log: Path) -> LossTrace:
    """The loss readings of ``log`` (an empty trace when it cannot be read)."""
    count, first, last, low, high, finite = 0, None, None, math.inf, -math.inf, True
    carry = b""
    try:
        with log.open("rb") as stream:
            while True:
                chunk = stream.read(CHUNK_BYTES)
                data = carry + chunk
                cut = max(data.rfind(b"\r"), data.rfind(b"\n")) if chunk else len(data)
                whole, carry = (data[: cut + 1], data[cut + 1 :]) if cut >= 0 else (b"", data)
                for match in LOSS.finditer(whole):
                    value = float(match[1])
                    count += 1
                    first = value if first is None else first
                    last = value
                    if math.isfinite(value):
                        low, high = min(low, value), max(high, value)
                    else:
                        finite = False
                if not chunk:
                    break
    except OSError:
        return LossTrace()
    if count == 0:
        return LossTrace()
    return LossTrace(
        count,
        first,
        last,
        low if math.isfinite(low) else None,
        high if math.isfinite(high) else None,
        finite,
    )
