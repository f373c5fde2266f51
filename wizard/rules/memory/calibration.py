"""THE calibration rule: what a crash's (or a run's) own figures say about one phase, and how
every figure of the job follows them.

PyTorch's OOM message is a floor (the crashed phase needed more than allocated + tried, and
more than the card), so that phase's low edge is lifted to it, never lowered (:func:`scale_for`,
:func:`facts_first`); a run's measured peak is a point the band is centred on; either way by
one factor on the varying part of every phase, today's and after any change. The factor stays
within SCALE_RANGE: what a figure needs beyond it is a fixed amount the model cannot name
(``unexplained``), carried by the phases that hold what that phase holds (HOLDS_THE_SAME), not
a tenfold factor on every other phase's activations. The phases the log shows passing are
within the card, and stay so after a change that does not make them heavier
(:func:`passed_stays_passed`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Final, get_args

from oom_wizard.formats.document import JobDocument
from oom_wizard.rules.memory.account import Terms
from oom_wizard.rules.memory.bands import Band
from oom_wizard.rules.memory.overheads import OVERHEADS, Overheads
from oom_wizard.rules.memory.parts import Parts, band_of
from oom_wizard.rules.memory.phases import (
    CRASH_PHASE,
    LOAD_MOMENT,
    MOMENT_PHASE,
    PHASE_WORDS,
    PHASES,
    LoadMoment,
    Phase,
)

if TYPE_CHECKING:
    from oom_wizard.rules.diagnosis import Diagnosis


SCALE_RANGE: Final = (0.05, 2.0)
"""The calibration's factor on the varying part stays within this. A crash's figure far above
the estimate is not activations ten times what the blocks measure: it is something this model
does not see (a text encoder parked on the card, another process's tensors, a regression of
the stack), so what the factor at its upper bound leaves unexplained is a fixed amount
(:data:`HOLDS_THE_SAME`), not a factor on every other phase's activations. Downwards the log's
facts win (a step that ran on the card was within it), as far as the lower bound."""

DISAGREES_BELOW: Final = 0.5
"""A calibration factor below this means the log's figure and the model disagree beyond any
band: said in a note (the Wan demo's log, 81 frames at 1008 x 576 trained on 23.5 GiB, needs
×0.08, below even the block inputs that gradient checkpointing keeps)."""

HOLDS_THE_SAME: Final[Mapping[Phase, tuple[Phase, ...]]] = MappingProxyType(
    {
        "load": ("load", "baseline_sample", "training", "sample"),
        "baseline_sample": ("baseline_sample", "sample"),
        "sample": ("baseline_sample", "sample"),
        "training": ("training",),
    }
)
"""The phases that hold what a calibrated phase holds, and so carry what its figure leaves
unexplained: what the loaded model holds stays through the run; a sample's (its decode, its
pipeline) comes back at every sample; a training step's belongs to the step."""


@dataclass(frozen=True)
class Calibration:
    """What a crash's (or a run's) own figures say about one phase.

    Attributes:
        phase: The phase the figures come from.
        at_least_gib: The phase needed more than this (allocated + tried to allocate).
        measured_gib: A run's measured peak (nvidia-smi) when it succeeded.
        card_gib: The card's capacity, when known.
        source: In words: "PyTorch's OOM message, log line 812".
    """

    phase: Phase
    at_least_gib: float | None
    measured_gib: float | None
    card_gib: float | None
    source: str
    passed: tuple[Phase, ...] = ()
    """The phases the log shows passing on ``card_gib`` before the crash (facts: their peak
    was within the card)."""
    also_ran: bool = False
    """Whether the crashed phase also ran on that card many times before it crashed (an
    intermittent crash): its peak is then at its floor, not far above it."""
    on: JobDocument | None = field(default=None, compare=False, repr=False)
    """The config the figures are about when it is not the one being weighed: an ancestor of
    the lineage (the config that crashed, or that a run measured), whose factor every config
    saved from it carries (:func:`~oom_wizard.rules.memory.job.job_memory` weighs the account
    against it)."""
    measured_at: str | None = None
    """When a run measured the peak (ISO-8601), for "measured on your card on <date>"."""
    moment: LoadMoment | None = None
    """For a load crash, which of the load's moments the log shows it in (while the latents
    were encoded: ``caching``; loading or quantizing the weights: ``loaded``); None when it
    does not say. The figures are fitted on that moment's terms, and what they leave
    unexplained is held by the encode alone after a caching crash."""

    @property
    def floor_gib(self) -> float | None:
        """What the crashed phase needed at least: the message's figure, and never less than
        the card it did not fit on. None for a measured peak."""
        if self.at_least_gib is None:
            return None
        return max(self.at_least_gib, self.card_gib or 0.0)

    def as_json(self) -> dict[str, object]:
        """The change log's and ``fit --json``'s form (``measured_at`` only for a run's peak,
        ``moment`` only where the log names the load's)."""
        dated: dict[str, object] = {"measured_at": self.measured_at} if self.measured_at else {}
        if self.moment is not None:
            dated["moment"] = self.moment
        found: dict[str, object] = {
            "phase": self.phase,
            "passed": list(self.passed),
            "also_ran": self.also_ran,
            "at_least_gib": _round(self.at_least_gib),
            "measured_gib": _round(self.measured_gib),
            "card_gib": _round(self.card_gib),
            "source": self.source,
        }
        return found | dated


def scale_for(
    per_phase: Mapping[Phase, Sequence[tuple[Terms, bool]]],
    calibration: Calibration | None,
    overheads: Overheads = OVERHEADS,
) -> tuple[float, float]:
    """The factor on the varying part (activations, the VAE's pass, their slack and the
    trainer's workspaces) that makes the calibrated phase agree, and the GiB it leaves
    unexplained at its bound: THE calibration rule.

    A crash's figure is a floor: the phase needed more than it (and more than the card it
    crashed on), so the band's low edge is lifted to it, never lowered. A phase that crashed
    only now and then also ran on that card before, so its low edge is put on the floor from
    either side. A run's measured peak is a point: the band's midpoint is put on it. The
    factor stays within :data:`SCALE_RANGE`; what a floor or a point above the band needs
    beyond it is a fixed amount (the second value, GiB), never a larger factor; so is all
    of it where nothing in the phase varies (a load that holds only weights).
    """
    if calibration is None or not per_phase[calibration.phase]:
        return 1.0, 0.0
    found = per_phase[calibration.phase]
    if calibration.moment is not None:  # the load's moment the log shows the crash in
        found = [(t, q) for t, q in found if t.moment == calibration.moment] or found

    def band(scale: float) -> Band:
        return max(
            (band_of(t, q, scale, 0.0, overheads)[0] for t, q in found), key=lambda b: b.high
        )

    target: Callable[[Band], float]
    floor = calibration.floor_gib
    if floor is not None:
        goal = floor
        if band(1.0).low >= goal and not calibration.also_ran:
            return 1.0, 0.0

        def target(b: Band) -> float:
            return b.low

    elif calibration.measured_gib is not None:
        goal = calibration.measured_gib

        def target(b: Band) -> float:
            return b.mid

    else:
        return 1.0, 0.0
    low, high = SCALE_RANGE
    if target(band(high)) == target(band(1.0)):
        # nothing in the phase varies (a load that only holds weights): no factor explains
        # the figure, and one would only weigh on the other phases' activations
        return 1.0, max(goal - target(band(1.0)), 0.0)
    if target(band(high)) < goal:
        return high, goal - target(band(high))
    if target(band(low)) > goal:
        return low, 0.0
    for _ in range(60):
        middle = (low + high) / 2.0
        if target(band(middle)) < goal:
            low = middle
        else:
            high = middle
    return high, 0.0


def facts_first(phases: dict[Phase, Band | None], calibration: Calibration) -> None:
    """What the log says about today's config wins over the estimate: the phase that crashed
    is at or above its floor (and so never under the card), and a phase the log shows passing
    on that card was within it."""
    floor = calibration.floor_gib
    band = phases.get(calibration.phase)
    if floor is not None and band is not None and band.low < floor:
        phases[calibration.phase] = Band(floor, max(band.high, floor))
    card = calibration.card_gib
    if card is None:
        return
    for phase in calibration.passed:
        band = phases.get(phase)
        if phase != calibration.phase and band is not None and band.high > card:
            phases[phase] = Band(min(band.low, card), card)


def passed_stays_passed(
    phases: dict[Phase, Band | None],
    today: Mapping[Phase, Sequence[tuple[Terms, bool]]],
    fitted: tuple[float, float],
    calibration: Calibration,
    overheads: Overheads = OVERHEADS,
) -> None:
    """A phase that passed on today's config and that the changes do not make heavier still
    passes: it keeps the card as its ceiling."""
    card = calibration.card_gib
    if card is None:
        return
    for phase in calibration.passed:
        band = phases.get(phase)
        found = calibrated_bands(phase, today[phase], fitted, calibration, overheads)
        if band is None or not found or phase == calibration.phase:
            continue
        phases[phase] = within_card(band, max(b.high for b, _ in found), card)


def loaded_before_the_crash(
    bands: Sequence[tuple[Band, Parts]],
    terms: Sequence[tuple[Terms, bool]],
    today: Sequence[tuple[Terms, bool]],
    fitted: tuple[float, float],
    calibration: Calibration,
    overheads: Overheads = OVERHEADS,
) -> list[tuple[Band, Parts]]:
    """The load's moments' bands (``bands``, of ``terms``) after a crash while the latents
    were encoded: the loaded weights came before it, on that card, so that moment passed and
    keeps the card as its ceiling as a passed phase does (:func:`within_card`)."""
    card = calibration.card_gib
    if calibration.moment != "caching" or card is None:
        return list(bands)
    before = [
        band.high
        for (band, _), (t, _) in zip(
            calibrated_bands("load", today, fitted, calibration, overheads), today, strict=True
        )
        if t.moment == "loaded"
    ]
    return [
        (within_card(band, max(before, default=0.0), card) if t.moment == "loaded" else band, parts)
        for (band, parts), (t, _) in zip(bands, terms, strict=True)
    ]


def calibrated_bands(
    phase: Phase,
    terms: Sequence[tuple[Terms, bool]],
    fitted: tuple[float, float],
    calibration: Calibration | None,
    overheads: Overheads = OVERHEADS,
) -> list[tuple[Band, Parts]]:
    """Each of ``phase``'s terms as a band under the fitted factor, with what the calibration
    left unexplained where that phase (or moment) holds it."""
    scale, unexplained = fitted
    return [
        band_of(t, quantized, scale, unexplained_in(phase, calibration, unexplained, t), overheads)
        for t, quantized in terms
    ]


def within_card(band: Band, today_high: float, card: float) -> Band:
    """A band that passed on the card today keeps the card as its ceiling, unless the changes
    made it heavier than today's (``today_high``)."""
    if card < band.high <= today_high + 1e-9:
        return Band(min(band.low, card), card)
    return band


def unexplained_in(
    phase: Phase, calibration: Calibration | None, unexplained: float, terms: Terms | None = None
) -> float:
    """The GiB of the calibration's figure left unexplained that ``phase`` (its ``terms``,
    where a phase has more than one moment) holds too: after a crash while the latents were
    encoded, only that moment."""
    if calibration is None or phase not in HOLDS_THE_SAME[calibration.phase]:
        return 0.0
    if calibration.moment == "caching" and (terms is None or terms.moment != "caching"):
        return 0.0
    return unexplained


def phase_of(diagnosis: Diagnosis) -> Phase | None:
    """The memory phase a diagnosis points at: the log's finer phase, else the moment."""
    found = CRASH_PHASE.get(diagnosis.phase)
    if found is not None:
        return found
    return MOMENT_PHASE.get(diagnosis.moment) if diagnosis.moment else None


def passed_phases(diagnosis: Diagnosis, crashed: Phase | None) -> tuple[Phase, ...]:
    """The phases the log shows passing: those before the one that crashed (the model loaded
    before a first sample, both came before a training step, training steps before a periodic
    sample), and every phase of a run that trained without crashing."""
    if diagnosis.crashed is False and (diagnosis.last_step or 0) > 0:
        return PHASES
    if crashed is None:
        return ()
    return PHASES[: PHASES.index(crashed)]


def calibration_from(diagnosis: Diagnosis, phase_of_crash: Phase | None) -> Calibration | None:
    """What the log says about the job's phases, as one :class:`Calibration`.

    PyTorch's OOM message: the job held ``allocated`` in live tensors and asked for ``tried``
    more, so the phase that crashed needed more than their sum (a floor), on the card the
    message names. The phases before it passed on that card (or on the probe's card). None
    when the log says nothing about any phase.
    """
    oom = diagnosis.oom
    phase = phase_of_crash or phase_of(diagnosis)
    probe = diagnosis.probe
    probed = probe.gpus[0].total_gib if probe is not None and probe.gpus else None
    card = oom.total if oom is not None and oom.total else probed
    held = None
    if oom is not None and oom.tried is not None:
        held = oom.allocated if oom.allocated is not None else oom.this_process
    line = f", log line {oom.line}" if oom is not None and oom.line else ""
    if phase is not None and held is not None and oom is not None and oom.tried is not None:
        return Calibration(
            phase=phase,
            at_least_gib=held + oom.tried,
            measured_gib=None,
            card_gib=card,
            source=f"PyTorch's OOM message{line}",
            passed=passed_phases(diagnosis, phase),
            also_ran=diagnosis.moment == "intermittent",
            moment=LOAD_MOMENT.get(diagnosis.phase) if phase == "load" else None,
        )
    crashed = phase if diagnosis.crashed else None
    passed = passed_phases(diagnosis, crashed)
    if not passed or card is None:
        return None
    return Calibration(
        phase=passed[-1],
        at_least_gib=None,
        measured_gib=None,
        card_gib=card,
        source="the log: " + ", ".join(PHASE_WORDS[p] for p in passed) + " passed",
        passed=passed,
    )


def calibration_from_attempts(
    attempts: Sequence[Mapping[str, object]],
    phase: Phase = "training",
    *,
    config: str | None = None,
) -> Calibration | None:
    """A run's measured peak (``attempts[].peak_gib``, nvidia-smi while it trained): the last
    attempt that carries one (of the config file named ``config``, when given)."""
    for index in range(len(attempts) - 1, -1, -1):
        attempt = attempts[index]
        ran = attempt.get("config")
        if config is not None and (not isinstance(ran, str) or Path(ran).name != config):
            continue
        peak = attempt.get("peak_gib")
        if isinstance(peak, int | float) and not isinstance(peak, bool) and peak > 0:
            card = attempt.get("card_gib")
            at = attempt.get("at")
            recorded = next((p for p in PHASES if p == attempt.get("peak_phase")), None)
            return Calibration(
                phase=recorded or phase,
                at_least_gib=None,
                measured_gib=float(peak),
                card_gib=float(card) if isinstance(card, int | float) else None,
                source=f"attempt {index + 1}'s measured peak (nvidia-smi)",
                measured_at=at if isinstance(at, str) else None,
            )
    return None


def measured_words(calibration: Calibration) -> str:
    """A run's measured peak in one sentence: "Measured on your card on 2026-12-07: 17.8 GiB
    in the training step (attempt 2's measured peak (nvidia-smi))." """
    day = f" on {calibration.measured_at[:10]}" if calibration.measured_at else ""
    gib = calibration.measured_gib or 0.0
    where = PHASE_WORDS[calibration.phase]
    return f"Measured on your card{day}: {gib:.1f} GiB in the {where} ({calibration.source})."


def calibration_from_record(
    diagnosis: Mapping[str, object] | None, phase: Phase | None = None
) -> Calibration | None:
    """A change log run's recorded diagnosis (``runs[].diagnosis``) as a calibration."""
    if not diagnosis:
        return None
    oom = diagnosis.get("oom")
    if not isinstance(oom, Mapping):
        return None
    tried, held = oom.get("tried_gib"), oom.get("allocated_gib", oom.get("this_process_gib"))
    if not isinstance(tried, int | float) or not isinstance(held, int | float):
        return None
    recorded_phase = diagnosis.get("phase")
    moment = diagnosis.get("moment")
    found = phase or (CRASH_PHASE.get(recorded_phase) if isinstance(recorded_phase, str) else None)
    if found is None and isinstance(moment, str):
        found = MOMENT_PHASE.get(moment)
    if found is None:
        return None
    total = oom.get("total_gib")
    return Calibration(
        phase=found,
        at_least_gib=float(held) + float(tried),
        measured_gib=None,
        card_gib=float(total) if isinstance(total, int | float) else None,
        source="the crash's OOM message recorded in the change log",
        also_ran=moment == "intermittent",
        moment=(
            LOAD_MOMENT.get(recorded_phase)
            if found == "load" and isinstance(recorded_phase, str)
            else None
        ),
    )


def calibration_from_json(recorded: Mapping[str, object]) -> Calibration | None:
    """A change log's ``memory.calibrated_by`` (:meth:`Calibration.as_json`) read back; None
    when it names no phase."""
    phase = next((p for p in PHASES if p == recorded.get("phase")), None)
    if phase is None:
        return None

    def gib(key: str) -> float | None:
        value = recorded.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        return None

    passed = recorded.get("passed")
    named = passed if isinstance(passed, list) else []
    return Calibration(
        phase=phase,
        at_least_gib=gib("at_least_gib"),
        measured_gib=gib("measured_gib"),
        card_gib=gib("card_gib"),
        source=str(recorded.get("source") or "the change log's calibration"),
        passed=tuple(p for p in PHASES if p in named),
        also_ran=recorded.get("also_ran") is True,
        measured_at=at if isinstance(at := recorded.get("measured_at"), str) else None,
        moment=next((m for m in get_args(LoadMoment) if m == recorded.get("moment")), None),
    )


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)
