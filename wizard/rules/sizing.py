"""Fixes sized by the numbers: "just enough" beside the seed's "safe" set.

Two default fixes are offered for a roll-back, both in the seed's order (the plan's order):

- **safe**: the steps that cost no quality for the moment (``ladders.yaml``'s
  ``no_quality_cost``: checkpointing for a training step, cached text embeddings, lighter
  samples for a sampling crash, the low-memory path for loading), then all the moment's first
  rungs (and, when they leave the crashed peak where it was, the next step down that lowers it);
  a step of them that lowers the crashed peak neither alone nor beside the others is left out.
- **just enough**: the one solver's answer (:func:`oom_wizard.rules.solver.solve`): the plan's
  levers by what the user loses (time, samples, quality), the least loss at which every phase
  fits the card with :data:`MARGIN_SHARE` of it to spare and the crashed phase is lower; when
  no set does, the closest one (``covered`` is then False).

Every figure is the one memory model's (:func:`oom_wizard.rules.memory.job_memory`, through
:class:`Weigher`), with the job's own calibration: the crash's figure is a floor of the phase
that crashed, so today's band there is never under it. The deficit is what that phase needed
beyond the card: the crash's floor against the card when PyTorch's message is there (a floor,
so "more than"), else the high edge of today's band.

"Just enough" is the default when it fits and the crash's own figures say the phase crashed on
this card (:attr:`FixSizing.calibrated`), or the safe set is predicted not to fit; otherwise
the safe set stays the default, and "just enough" is still offered where a card is known.
``fit`` reads the plan's "just enough" as its fix, so both say the same steps for the same job
and card.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from oom_wizard.formats.change import Change
from oom_wizard.formats.document import JobDocument
from oom_wizard.rules.catalog import Presets
from oom_wizard.rules.memory import (
    MOMENT_PHASE,
    Band,
    Calibration,
    JobMemory,
    Phase,
    Verdict,
    job_memory,
    verdict,
)
from oom_wizard.rules.solver import MARGIN_SHARE as MARGIN_SHARE, solve

FixName = Literal["just_enough", "safe"]
FIX_NAMES: Final[tuple[FixName, ...]] = ("just_enough", "safe")

FIX_WORDS: Final[Mapping[FixName, str]] = {
    "just_enough": "least loss",
    "safe": "usual changes",
}
"""How each fix is named where the user reads it, by what it is (:func:`fix_label` says
more where the fixes were sized); the JSON keys stay ``just_enough`` and ``safe``."""


def fix_label(name: FixName, sizing: FixSizing | None) -> str:
    """A fix named by what it is: the solver's answer is the least loss (the
    closest to fitting when nothing does); the moment's usual changes are "more margin"
    only where they are predicted to fit and leave more room than the least loss."""

    if name == "just_enough":
        return FIX_WORDS[name] if sizing is None or sizing.covered else "closest to fitting"
    if sizing is not None and "just_enough" in sizing.bands and "safe" in sizing.bands:
        usual, least = sizing.bands["safe"], sizing.bands["just_enough"]
        if usual.high <= sizing.card_gib and usual.mid < least.mid - 0.05:
            return "more margin"
    return FIX_WORDS[name]


@dataclass(frozen=True)
class FixSizing:
    """How the fixes were sized against the card.

    Attributes:
        phase: The memory phase the crash ran into.
        card_gib: The card's capacity.
        deficit_gib: What the phase needed beyond the card (≤ 0: it should have fitted).
        margin_gib: The room left on top (:data:`MARGIN_SHARE` of the card).
        source: Where the deficit comes from, in words.
        calibrated: The deficit comes from the crash's own figures (then "just enough" is the
            default fix).
        today: Today's band at the phase (calibrated by the crash when it can be).
        savings: Each fix's estimated saving at the phase (the band's midpoint), in GiB.
        bands: Each fix's predicted band at the phase.
        covered: Whether "just enough" fits the card (False: no combination of rungs is
            predicted to, and it is the closest config the ladder reaches).
        margin_kept: Whether it leaves the margin free (False: no set does; it fits with
            less room).
    """

    phase: Phase
    card_gib: float
    deficit_gib: float
    margin_gib: float
    source: str
    calibrated: bool
    today: Band
    savings: Mapping[FixName, float]
    bands: Mapping[FixName, Band]
    covered: bool
    margin_kept: bool = True

    def predicted(self, fix: FixName) -> Band:
        """The fix's predicted band at the phase."""
        return self.bands[fix]

    def to_json(self) -> dict[str, object]:
        """``plan --json``'s ``sizing``."""
        return {
            "phase": self.phase,
            "card_gib": round(self.card_gib, 2),
            "deficit_gib": round(self.deficit_gib, 2),
            "margin_gib": round(self.margin_gib, 2),
            "source": self.source,
            "calibrated": self.calibrated,
            "covered": self.covered,
            "margin_kept": self.margin_kept,
            "predicted_gib": {fix: self.predicted(fix).rounded() for fix in self.savings},
        }


@dataclass(frozen=True)
class SizedFixes:
    """The two fixes (step ids, in plan order), the default one, and how they were sized;
    ``rungs``: each fix's steps taken beyond their default rung (step id → rung)."""

    fixes: Mapping[FixName, tuple[str, ...]]
    default: FixName
    sizing: FixSizing | None
    rungs: Mapping[FixName, Mapping[str, int]] = field(default_factory=dict)


def phase_of_moment(moment: str) -> Phase | None:
    """The memory phase a crash at ``moment`` ran into (None for ``environment``)."""
    return MOMENT_PHASE.get(moment)


def phases_of_moment(moment: str) -> frozenset[Phase]:
    """Every memory phase a crash at ``moment`` may have run into: a ``loading`` crash is the
    load or the baseline sample."""
    if moment == "loading":
        return frozenset({"load", "baseline_sample"})
    phase = MOMENT_PHASE.get(moment)
    return frozenset({phase}) if phase is not None else frozenset()


class Weigher:
    """A job's memory with some changes, each weighed once by the one model.

    :func:`oom_wizard.rules.memory.job_memory` with the job's calibration: the fixes, the
    step screens and the load screen all weigh through this, so they show the same GiB as
    ``fit``, ``plan`` and the change log.
    """

    def __init__(
        self,
        document: JobDocument,
        model_kind: str,
        presets: Presets,
        calibration: Calibration | None,
        gpus: int = 1,
    ) -> None:
        self.document = document
        self.model_kind = model_kind
        self.presets = presets
        self.gpus = gpus
        self.calibration = calibration
        self._cache: dict[str, JobMemory] = {}

    def memory(self, changes: Sequence[Change]) -> JobMemory:
        """``job_memory`` of the config with ``changes``, calibrated, kept for reuse."""
        key = repr(tuple(changes))  # a change's value may be a list: its repr is the key
        if key not in self._cache:
            self._cache[key] = job_memory(
                self.document,
                tuple(changes),
                self.model_kind,
                presets=self.presets,
                calibration=self.calibration,
                calibrated_on=self.document if changes else None,
                gpus=self.gpus,
            )
        return self._cache[key]

    def band(self, changes: Sequence[Change], phase: Phase) -> Band | None:
        """The phase's band with ``changes`` (None where the phase does not happen)."""
        return self.memory(changes).phases.get(phase)

    def peak(self, changes: Sequence[Change]) -> tuple[Phase, Band] | None:
        """The phase with the highest band, and that band."""
        memory = self.memory(changes)
        if all(band is None for band in memory.phases.values()):
            return None
        return memory.peak_phase, memory.peak()


#: How the bar names the phase that sets the peak.
PHASE_WORDS: Final[Mapping[Phase, str]] = {
    "load": "loading the model",
    "baseline_sample": "the first sample",
    "training": "a training step",
    "sample": "a periodic sample",
}


@dataclass(frozen=True)
class MemoryPeak:
    """A config's peak in GiB against the card, and the phase that sets it.

    Attributes:
        band: The peak phase's band (its midpoint is the figure shown).
        phase: The phase that sets the peak.
        card_gib: The card's capacity (None: unknown; then the peak is shown alone).
        card_source: Where the card's size comes from ("PyTorch's OOM message", "nvidia-smi").
        calibrated: The crash's own figures scale the estimate.
        known: Every part of the estimate had real figures (False: a nominal stand-in).
        basis: What the band rests on, in words (how its figures were checked, and what
            calibrated it).
        not_estimated: Why the job gets no figure (None: it does); its band is then only
            for the direction of a change, never shown.
    """

    band: Band
    phase: Phase
    card_gib: float | None
    card_source: str | None
    calibrated: bool
    known: bool
    basis: str = ""
    not_estimated: str | None = None

    @property
    def gib(self) -> float:
        """The figure shown: the band's midpoint."""
        return self.band.mid

    @property
    def phase_words(self) -> str:
        """The phase in words (``a training step``)."""
        return PHASE_WORDS[self.phase]

    @property
    def verdict(self) -> Verdict | None:
        """fits / tight / wont_fit against the card (None: the card is unknown)."""
        return verdict(self.band, self.card_gib) if self.card_gib else None

    def words(self) -> str:
        """``19.8 of 23.5 GiB (18.9–20.6)`` (or ``19.8 GiB (18.9–20.6)`` without a card): the
        midpoint, and the band it is sure of."""
        band = f"({self.band.low:.1f}–{self.band.high:.1f})"
        if self.card_gib:
            return f"{self.gib:.1f} of {self.card_gib:.1f} GiB {band}"
        return f"{self.gib:.1f} GiB {band}"


def peak_of(
    weigher: Weigher, changes: Sequence[Change], card_gib: float | None, source: str | None
) -> MemoryPeak | None:
    """The peak of the config with ``changes`` as :class:`MemoryPeak` (None: nothing weighs)."""
    memory = weigher.memory(changes)
    found = weigher.peak(changes)
    if found is None:
        return None
    phase, band = found
    return MemoryPeak(
        band=band,
        phase=phase,
        card_gib=card_gib,
        card_source=source if card_gib else None,
        calibrated=weigher.calibration is not None,
        known=memory.known,
        basis=memory.basis(),
        not_estimated=memory.not_estimated,
    )


def size_fixes(
    document: JobDocument,
    order: Sequence[str],
    free: Sequence[str],
    safe: Sequence[str],
    candidates: Sequence[str],
    changes_of: Callable[[Mapping[str, int]], Sequence[Change]],
    moment: str,
    model_kind: str,
    *,
    presets: Presets,
    calibration: Calibration | None,
    card_gib: float | None,
    gpus: int = 1,
    rungs: Mapping[str, int] | None = None,
) -> SizedFixes:
    """The safe and the just-enough fixes for a crash at ``moment``.

    Args:
        document: Today's config.
        order: Every step id of the plan, in its order (the fixes keep it).
        free: The steps that cost no quality and lower the crashed peak (taken first).
        safe: The seed's safe set (free steps included).
        candidates: The rungs that cost quality, in plan order.
        changes_of: The changes a set of steps makes, each at its rung (0: its default).
        moment: The crash moment.
        rungs: How many stronger rungs each candidate has (:attr:`StepProposal.rungs`).
        model_kind: ``image`` or ``video``.
        presets: The preset data.
        calibration: The job's own figures (a crash's floor, a run's measured peak), if any.
        card_gib: The card's capacity when known (the message's, else the probe's).
        gpus: How many GPUs the probe sees (a model split over them is weighed per card).
    """
    in_order = {step: index for index, step in enumerate(order)}

    def ordered(ids: Collection[str]) -> tuple[str, ...]:
        return tuple(sorted(set(ids), key=in_order.__getitem__))

    safe_fix = ordered(safe)
    floor = (
        calibration
        if calibration is not None
        and calibration.phase in phases_of_moment(moment)
        and calibration.at_least_gib is not None
        and calibration.on is None  # an ancestor's floor is not this config's
        else None
    )
    phase = floor.phase if floor is not None else phase_of_moment(moment)
    card = card_gib if card_gib is not None else (floor.card_gib if floor else None)
    if phase is None or card is None or card <= 0:
        return SizedFixes({"safe": safe_fix}, "safe", None)
    weigher = Weigher(document, model_kind, presets, calibration, gpus)
    if weigher.memory(()).not_estimated is not None:
        return SizedFixes({"safe": safe_fix}, "safe", None)
    cache: dict[frozenset[tuple[str, int]], Band | None] = {}

    def band(ids: Collection[str], up: Mapping[str, int] | None = None) -> Band | None:
        levels = dict.fromkeys(ids, 0) | dict(up or {})
        key = frozenset(levels.items())
        if key not in cache:
            cache[key] = weigher.band(changes_of(levels), phase)
        return cache[key]

    today = band(())
    if today is None or today.mid <= 0:
        return SizedFixes({"safe": safe_fix}, "safe", None)
    if floor is not None and floor.at_least_gib is not None:
        deficit = floor.at_least_gib - card
        source = f"{floor.source}: it needed more than {floor.at_least_gib:.2f} GiB"
    else:
        deficit = today.high - card
        source = "the high edge of today's estimate against the card"
    margin = MARGIN_SHARE * card

    solution = solve(
        weigher.memory,
        [*free, *(step for step in candidates if step not in free)],
        changes_of,
        card,
        crashed=(phase,) if floor is not None else tuple(phases_of_moment(moment)),
        must_lower=True,
        rungs=rungs,
    )
    chosen, covered = list(solution.steps), solution.fits
    fixes: dict[FixName, tuple[str, ...]] = {"just_enough": ordered(chosen), "safe": safe_fix}
    up: dict[FixName, Mapping[str, int]] = {"just_enough": dict(solution.rungs)}
    sizing = FixSizing(
        phase=phase,
        card_gib=card,
        deficit_gib=deficit,
        margin_gib=margin,
        source=source,
        calibrated=floor is not None,
        today=today,
        savings={
            name: today.mid - (band(ids, up.get(name)) or Band(0.0, 0.0)).mid
            for name, ids in fixes.items()
        },
        bands={name: band(ids, up.get(name)) or Band(0.0, 0.0) for name, ids in fixes.items()},
        covered=covered,
        margin_kept=solution.margin,
    )
    safe_band = sizing.bands["safe"]
    safe_over = safe_band.high > card and safe_band.mid > 0
    default: FixName = "just_enough" if covered and (floor is not None or safe_over) else "safe"
    return SizedFixes(fixes, default, sizing, up)
