"""The bands: a phase's figure ± a share set by how its activations were checked (its certainty
class: on a GPU, on CPU only, a stand-in), and a band's verdict against a card.

Each class's share is the 80th percentile of the size of that class's held-out errors (each
published point of ``tests/fixtures/measured_peaks.yaml`` and GPU row with its source left out
of every refit), sized to hold those errors 8 times in 10 (:data:`BAND_RATE`). A point's band
with its own source left out of the widths too holds it about 3 times in 4
(``bench/memory_accuracy.py``; MEMORY.md has the count).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal

Certainty = Literal["gpu", "cpu", "stand_in"]
"""How the activation figures of a process were checked: on a real GPU (the shared H200
rows), measured on CPU only (``bench/calibrate_memory.py``), or a stand-in (another family's
figures, or nominal ones)."""


Verdict = Literal["fits", "tight", "wont_fit"]


CERTAINTY_WORDS: Final[Mapping[Certainty, str]] = MappingProxyType(
    {
        "gpu": "checked on a GPU",
        "cpu": "measured on CPU only",
        "stand_in": "a stand-in",
    }
)


CLASS_BAND: Final[Mapping[Certainty, tuple[float, float]]] = MappingProxyType(
    {
        "gpu": (-0.108, 0.108),
        "cpu": (-0.151, 0.151),
        "stand_in": (-0.302, 0.302),
    }
)
"""A phase's band around the model's figure (± a share of it), by how its varying part was
checked: the 80th percentile of the size of the held-out errors (measured / figure − 1, each
published point and GPU row with its source left out of every refit) of that certainty class,
sized to hold 8 in 10 of them. A stand-in has no held-out point of its own:
the CPU class's width doubled. ``bench/memory_accuracy.py`` prints them; a test keeps these
at them."""

BAND_RATE: Final = 0.8
"""The share of held-out points a band is made to contain (:data:`CLASS_BAND`)."""


@dataclass(frozen=True)
class Band:
    """A range of GiB the real peak is expected in."""

    low: float
    high: float

    @property
    def mid(self) -> float:
        """The band's midpoint."""
        return (self.low + self.high) / 2.0

    def rounded(self) -> dict[str, float]:
        """``{"low", "high"}`` rounded to 0.1 GiB (for JSON)."""
        return {"low": round(self.low, 1), "high": round(self.high, 1)}


def verdict(band: Band, card_gib: float) -> Verdict:
    """``fits`` (high ≤ card), ``tight`` (low ≤ card < high) or ``wont_fit`` (low > card)."""
    if band.high <= card_gib:
        return "fits"
    if band.low <= card_gib:
        return "tight"
    return "wont_fit"
