"""Fixes sized by the numbers: "just enough" beside the seed's "safe" set (issue 18 item 6).

Two default fixes are offered for a roll-back, both in the seed's order (the plan's order):

- **safe**: the steps that cost no quality for the moment (``ladders.yaml``'s
  ``no_quality_cost``: checkpointing for a training step, cached text embeddings, lighter
  samples for a sampling crash, the low-memory path for loading), then all the moment's first
  rungs (and, when they leave the crashed peak where it was, the next step down that lowers it).
- **just enough**: the same free steps, then the *fewest* rungs that cost quality whose
  estimated saving covers the deficit with :data:`MARGIN_SHARE` of the card to spare.

The deficit is what the crashed phase needed beyond the card: from the crash's own figures
(PyTorch's OOM message: allocated + tried to allocate, against the card's capacity) when they
are there, else from the estimate of today's config against the card (the probe's). A fix's
saving is the drop of the phase's band midpoint (:func:`oom_wizard.rules.memory.job_memory` of
today's config and of the fixed one). With the crash's figures, the estimate's activations
and overhead (the parts a CPU cannot measure exactly; the weights are counted) are scaled by
the one factor that puts today's midpoint on the crash's figure, in both directions (the
message is the best measurement of this job there is): the savings and the predicted peaks
are in those GiB, and the same factor weighs every fix, by its band's midpoint. Without them,
the band's high edge is weighed (a covered fix then also "fits" as ``oom-wizard fit`` says).
A fix covers the deficit when its saving is at least the deficit plus :data:`MARGIN_SHARE` of
the card.

"Just enough" is the default only when the crash's own figures calibrate the deficit
(:attr:`FixSizing.calibrated`); otherwise the safe set stays the default, and "just enough"
is still offered where a card is known.

"Fewest": every combination of one, two, then three rungs is tried in the plan's order (a
combination whose steps' savings, each alone, add up to less than the need is skipped: the
savings of combined rungs never add up to more than that); past three, the rungs are taken in
the plan's order until the saving covers the need.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Final, Literal

from oom_wizard.formats.change import Change
from oom_wizard.formats.document import JobDocument
from oom_wizard.rules.catalog import Presets
from oom_wizard.rules.memory import (
    MOMENT_PHASE,
    PHASES,
    Band,
    Calibration,
    JobMemory,
    Parts,
    Phase,
    Verdict,
    job_memory,
    verdict,
)

FixName = Literal["just_enough", "safe"]
FIX_NAMES: Final[tuple[FixName, ...]] = ("just_enough", "safe")

MARGIN_SHARE: Final = 0.10
"""The room a "just enough" fix leaves on the card, as a share of it (2.4 GiB on a 24 GiB card).

Why this much: PyTorch's message bounds the crashed phase's need from below only (the
allocation that failed need not be the last of the step), an intermittent crash is one whose
peak moves from step to step with the bucket and caption length, and the caching allocator
fragments: a fix sized to the last GiB would crash again on the next unlucky step."""

MIN_SCALE: Final = 0.05
"""The smallest factor the crash's figures may put on activations and overhead (the same floor
as :mod:`oom_wizard.rules.memory`'s own calibration)."""

MIN_SAVING: Final = 0.01
"""GiB: the least a fix must save (a fix lowers the crashed peak, whatever the estimate says)."""

EXHAUSTIVE_UP_TO: Final = 3
"""Combinations of up to this many rungs are searched for the fewest; past it, plan order."""

FIX_WORDS: Final[Mapping[FixName, str]] = {
    "just_enough": "just enough",
    "safe": "safe",
}


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
        savings: Each fix's estimated saving at the phase, in GiB.
        bands: Each fix's predicted band at the phase.
        covered: Whether "just enough" covers the deficit with the margin (False: no
            combination of rungs is predicted to, and it is the whole ladder's best try).
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

    @property
    def needed_gib(self) -> float:
        """The saving a fix has to make: the deficit plus the margin (at least a little: a fix
        lowers the peak the crash ran into, even where the estimate says today fits)."""
        return max(self.deficit_gib + self.margin_gib, MIN_SAVING)

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
            "predicted_gib": {fix: self.predicted(fix).rounded() for fix in self.savings},
        }


@dataclass(frozen=True)
class SizedFixes:
    """The two fixes (step ids, in plan order), the default one, and how they were sized."""

    fixes: Mapping[FixName, tuple[str, ...]]
    default: FixName
    sizing: FixSizing | None
    weigher: Weigher | None = None
    """The weigher in the crash's GiB, when the crash's figures sized the fixes: the plan's
    estimate weighs through it too, so that it and the fixes' peaks are one figure."""


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
    """A job's memory at each phase with some changes, in the GiB of the crash's own figures.

    :func:`oom_wizard.rules.memory.job_memory` weighs the config; with a calibration (PyTorch's
    OOM message for one phase), the activations and overhead of every phase, today's and
    after any changes, are scaled by the one factor that puts today's midpoint of that phase
    on the message's figure. The fixes, the step screens and the load screen all weigh
    through this, so they show the same GiB.
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
        self.calibration: Calibration | None = None
        self.scale = 1.0
        self._cache: dict[str, JobMemory] = {}
        today = self.memory(())
        if calibration is None or calibration.at_least_gib is None:
            return
        parts = today.parts.get(calibration.phase)
        if parts is None or today.phases.get(calibration.phase) is None:
            return
        varying = parts.activations + parts.overhead
        if varying > 0:
            self.scale = max((calibration.at_least_gib - _fixed(parts)) / varying, MIN_SCALE)
        self.calibration = calibration

    def memory(self, changes: Sequence[Change]) -> JobMemory:
        """``job_memory`` of the config with ``changes`` (uncalibrated), kept for reuse."""
        key = repr(tuple(changes))  # a change's value may be a list: its repr is the key
        if key not in self._cache:
            self._cache[key] = job_memory(
                self.document,
                tuple(changes),
                self.model_kind,
                presets=self.presets,
                gpus=self.gpus,
            )
        return self._cache[key]

    def band(self, changes: Sequence[Change], phase: Phase) -> Band | None:
        """The phase's band with ``changes``, scaled (None where the phase does not happen)."""
        memory = self.memory(changes)
        found, parts = memory.phases.get(phase), memory.parts.get(phase)
        if found is None or parts is None:
            return None
        if self.scale == 1.0:
            return found
        # What lies above the counted part (weights, trainable state, optimizer) is the
        # activations and overhead: both edges keep the counted part and scale the rest.
        fixed = _fixed(parts)
        return Band(
            fixed + max(found.low - fixed, 0.0) * self.scale,
            fixed + max(found.high - fixed, 0.0) * self.scale,
        )

    def scaled(self, changes: Sequence[Change]) -> JobMemory:
        """The whole :class:`JobMemory` with ``changes`` in the crash's GiB: every phase's band
        as :meth:`band` gives it, the parts' activations and overhead scaled, and a note that
        says so (unchanged without a calibration)."""
        memory = self.memory(changes)
        calibration = self.calibration
        if calibration is None:
            return memory
        phases = {phase: self.band(changes, phase) for phase in PHASES}
        parts = {
            phase: replace(
                found,
                activations=found.activations * self.scale,
                overhead=found.overhead * self.scale,
            )
            for phase, found in memory.parts.items()
        }
        happening = [phase for phase in PHASES if phases[phase] is not None]
        peak_phase = max(
            happening or [memory.peak_phase],
            key=lambda p: (phases[p] or Band(0.0, 0.0)).high,
        )
        note = (
            f"Calibrated by the crash ({calibration.source}): activations and overhead "
            f"× {self.scale:.2f}, so that the {calibration.phase} midpoint is the "
            f"{calibration.at_least_gib:.2f} GiB it needed."
        )
        return replace(
            memory,
            phases=MappingProxyType(phases if happening else dict(memory.phases)),
            parts=MappingProxyType(parts),
            peak_phase=peak_phase,
            calibrated_by=calibration,
            scale=self.scale,
            notes=(*memory.notes, note),
        )

    def peak(self, changes: Sequence[Change]) -> tuple[Phase, Band] | None:
        """The phase with the highest scaled band, and that band."""
        bands = [
            (phase, band) for phase in PHASES if (band := self.band(changes, phase)) is not None
        ]
        return max(bands, key=lambda item: item[1].high) if bands else None


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
    """

    band: Band
    phase: Phase
    card_gib: float | None
    card_source: str | None
    calibrated: bool
    known: bool

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
        """``19.8 of 23.5 GiB`` (or ``19.8 GiB`` without a card)."""
        if self.card_gib:
            return f"{self.gib:.1f} of {self.card_gib:.1f} GiB"
        return f"{self.gib:.1f} GiB"


def peak_of(
    weigher: Weigher, changes: Sequence[Change], card_gib: float | None, source: str | None
) -> MemoryPeak | None:
    """The peak of the config with ``changes`` as :class:`MemoryPeak` (None: nothing weighs)."""
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
        known=weigher.memory(changes).known,
    )


def _fixed(parts: Parts) -> float:
    """The counted part of a phase: weights, trainable state and optimizer, in GiB."""
    return parts.transformer + parts.text_encoder + parts.vae + parts.trainable + parts.optimizer


def size_fixes(
    document: JobDocument,
    order: Sequence[str],
    free: Sequence[str],
    safe: Sequence[str],
    candidates: Sequence[str],
    changes_of: Callable[[Collection[str]], Sequence[Change]],
    moment: str,
    model_kind: str,
    *,
    presets: Presets,
    calibration: Calibration | None,
    card_gib: float | None,
    gpus: int = 1,
) -> SizedFixes:
    """The safe and the just-enough fixes for a crash at ``moment``.

    Args:
        document: Today's config.
        order: Every step id of the plan, in its order (the fixes keep it).
        free: The steps that cost no quality and lower the crashed peak (taken first).
        safe: The seed's safe set (free steps included).
        candidates: The rungs that cost quality, in plan order.
        changes_of: The changes a set of steps makes with their default toggles.
        moment: The crash moment.
        model_kind: ``image`` or ``video``.
        presets: The preset data.
        calibration: The crash's own figures (PyTorch's OOM message), if any.
        card_gib: The card's capacity when known (the message's, else the probe's).
        gpus: How many GPUs the probe sees (a model split over them is weighed per card).
    """
    in_order = {step: index for index, step in enumerate(order)}

    def ordered(ids: Collection[str]) -> tuple[str, ...]:
        return tuple(sorted(set(ids), key=in_order.__getitem__))

    safe_fix = ordered(safe)
    usable = (
        calibration
        if calibration is not None
        and calibration.phase in phases_of_moment(moment)
        and calibration.at_least_gib is not None
        else None
    )
    phase = usable.phase if usable is not None else phase_of_moment(moment)
    card = card_gib if card_gib is not None else (usable.card_gib if usable else None)
    if phase is None or card is None or card <= 0:
        return SizedFixes({"safe": safe_fix}, "safe", None)
    weigher = Weigher(document, model_kind, presets, usable, gpus)
    cache: dict[frozenset[str], Band | None] = {}

    def band(ids: Collection[str]) -> Band | None:
        key = frozenset(ids)
        if key not in cache:
            cache[key] = weigher.band(changes_of(key), phase)
        return cache[key]

    today = band(())
    if today is None or today.mid <= 0:
        return SizedFixes({"safe": safe_fix}, "safe", None)
    # With the crash's figures the midpoint sits on the measured need; without them the
    # band's high edge is weighed, so that a covered fix also "fits" as ``fit`` says it.
    edge: Callable[[Band], float] = lambda b: b.high  # noqa: E731
    if weigher.calibration is not None and usable is not None and usable.at_least_gib:
        edge = lambda b: b.mid  # noqa: E731
        deficit = usable.at_least_gib - card
        source = f"{usable.source}: it needed more than {usable.at_least_gib:.2f} GiB"
    else:
        deficit = today.high - card
        source = "the high edge of today's estimate against the card"

    def saving(ids: Collection[str]) -> float:
        after = band(ids)
        return edge(today) - edge(after) if after is not None else 0.0

    margin = MARGIN_SHARE * card
    need = max(deficit + margin, MIN_SAVING)
    chosen, covered = _fewest(list(free), list(candidates), need, saving)
    fixes: dict[FixName, tuple[str, ...]] = {"just_enough": ordered(chosen), "safe": safe_fix}
    calibrated = weigher.calibration is not None
    sizing = FixSizing(
        phase=phase,
        card_gib=card,
        deficit_gib=deficit,
        margin_gib=margin,
        source=source,
        calibrated=calibrated,
        today=today,
        savings={name: saving(ids) for name, ids in fixes.items()},
        bands={name: band(ids) or Band(0.0, 0.0) for name, ids in fixes.items()},
        covered=covered,
    )
    default: FixName = "just_enough" if calibrated and covered else "safe"
    return SizedFixes(fixes, default, sizing, weigher if calibrated else None)


def _fewest(
    free: list[str], candidates: list[str], need: float, saving: Callable[[Collection[str]], float]
) -> tuple[list[str], bool]:
    """The free steps and the fewest candidates whose saving covers ``need``; whether it does."""
    if saving(free) >= need:
        return free, True
    alone = {step: saving([*free, step]) - saving(free) for step in candidates}
    useful = [step for step in candidates if alone[step] > 1e-9]
    base = saving(free)
    for size in range(1, min(EXHAUSTIVE_UP_TO, len(useful)) + 1):
        for combination in itertools.combinations(useful, size):
            if base + sum(alone[step] for step in combination) < need - 1e-9:
                continue
            if saving([*free, *combination]) >= need:
                return [*free, *combination], True
    taken = list(free)
    for step in useful:
        taken.append(step)
        if len(taken) - len(free) > EXHAUSTIVE_UP_TO and saving(taken) >= need:
            return taken, True
    return taken, False
