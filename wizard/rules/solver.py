"""What to change so it fits: the one solver every front end asks.

Given a job's plan (its steps, each one rung of one lever AI Toolkit honours for the arch: the
plan leaves out, as ``not_for_this_model``, a lever the arch ignores), the card and the job's
calibration, :func:`solve` answers with the set of steps that fits the card at the least loss
to the user, or, when no set does, the closest config and what it still lacks.

**What the user loses.** Each step loses one of three things (``loses`` in ladders.yaml):
only time (a slower step, a caching pass, system RAM), the preview samples, or quality (fewer
pixels, frames, rank, bits or passes). The levers are tried in that order, and in the plan's order
within a class (the plan puts the moment's ladder first, in the roll-back's order), except
that a lever which slows the step several-fold (``slow``: layer offloading) comes last
of the time class, and says so. Among the steps of a class, those that lower the phase the
crash ran into come first: a fix for a crash while loading starts with what lowers the
load, never with lighter samples.

**Fits.** Every phase's band has its high edge within the card, and its midpoint leaves
:data:`MARGIN_SHARE` of the card free; when no set of levers leaves that room, the least loss
with every high edge within the card (``fit``'s "fits"), which says that its margin is thin.

**Rungs.** A lever may have stronger rungs than its default one (layer offloading's
next percents, a lower rank, no preview samples after lighter ones: the plan step's
``rungs``). When a class's levers at their default rungs leave a phase over the card, the
solver goes up the rungs of the levers it took in that class, to each rung that lowers a phase
still over (one that lowers none is passed over), before it moves on to a lever of more loss.

**The search.** Each lever in turn is taken when it lowers a phase that is still over the
card; the search stops at the first set that fits. Then each step taken is tried without,
the costliest first, and one rung down: a step the set still fits without is left out, a
rung it still fits below is stepped down, until nothing more goes. What is left is the
answer, and it is irreducible: undoing any one of its changes (a step, or one rung of it)
makes it not fit (a property test holds this). A search weighs the job a few times per
lever and rung, through one cached :class:`~oom_wizard.rules.sizing.Weigher`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from oom_wizard.formats.change import Change
from oom_wizard.rules.catalog import Loss, StepId, load_presets
from oom_wizard.rules.memory import Band, JobMemory, Phase

MARGIN_SHARE: Final = 0.10
"""The room a fix leaves on the card, as a share of it (2.4 GiB on a 24 GiB card).

Why this much: PyTorch's message bounds the crashed phase's need from below only (the
allocation that failed need not be the last of the step), an intermittent crash is one whose
peak moves from step to step with the bucket and caption length, and the caching allocator
fragments: a fix sized to the last GiB would crash again on the next unlucky step."""

MIN_SAVING: Final = 0.01
"""GiB: the least a fix must save (a fix lowers the crashed peak, whatever the estimate says)."""

LOSS_ORDER: Final[tuple[Loss, ...]] = ("time", "samples", "quality")

#: What each class of loss is, in words (a proposal says it).
LOSS_WORDS: Final[Mapping[Loss, str]] = {
    "time": "costs time",
    "samples": "costs preview samples",
    "quality": "costs quality",
}


def loss_of(step_id: str) -> Loss:
    """What the step takes from the user: its ``loses`` in ladders.yaml (else quality)."""
    info = load_presets().steps.get(StepId(step_id))
    return info.loses if info is not None and info.loses is not None else "quality"


def slows(step_id: str) -> bool:
    """Whether the step slows every step several-fold (``slow`` in ladders.yaml)."""
    info = load_presets().steps.get(StepId(step_id))
    return info is not None and info.slow


def loss_words(step_id: str) -> str:
    """``costs time``, ``costs time (slows every step several-fold)``..."""
    words = LOSS_WORDS[loss_of(step_id)]
    return f"{words} (slows every step several-fold)" if slows(step_id) else words


@dataclass(frozen=True)
class Solution:
    """The solver's answer.

    Attributes:
        steps: The step ids taken, in the order the levers were tried.
        rungs: The steps taken beyond their default rung: step id → rung (1: the first
            stronger one).
        memory: The job's memory with them.
        fits: Whether every phase fits the card with the margin (False: ``steps`` is the
            closest config, every lever that helps taken, and ``lacks_gib`` says how far).
        lacks_gib: How much the peak's high edge is still over the card (0 when it fits).
        tried: Every lever that was weighed, in the order it was tried.
        margin: The answer leaves the margin free (False: no set does; it fits within the
            card, with less room than :data:`MARGIN_SHARE` of it).
    """

    steps: tuple[str, ...]
    memory: JobMemory
    fits: bool
    lacks_gib: float
    tried: tuple[str, ...]
    margin: bool = True
    rungs: Mapping[str, int] = field(default_factory=dict)


def fits_card(memory: JobMemory, card_gib: float, margin_share: float = MARGIN_SHARE) -> bool:
    """Every phase's high edge within the card, its midpoint with the margin free."""
    margin = margin_share * card_gib
    return all(
        band is None or (band.high <= card_gib and band.mid + margin <= card_gib)
        for band in memory.phases.values()
    )


def _over(memory: JobMemory, card_gib: float) -> dict[Phase, Band]:
    margin = MARGIN_SHARE * card_gib
    return {
        phase: band
        for phase, band in memory.phases.items()
        if band is not None and (band.high > card_gib or band.mid + margin > card_gib)
    }


def _lowers(after: Band | None, before: Band) -> bool:
    return after is None or after.high < before.high - 1e-6


def lever_order(
    candidates: Sequence[str],
    lowers_crash: Callable[[str], bool] | None = None,
) -> list[str]:
    """The candidates in the order the solver tries them: by loss (time, samples, quality),
    within a class those that lower the crashed phase first, the slow levers last of the time
    class, else the plan's order."""
    position = {step: index for index, step in enumerate(candidates)}

    def key(step: str) -> tuple[int, int, int, int]:
        crash = 0 if lowers_crash is None or lowers_crash(step) else 1
        return (LOSS_ORDER.index(loss_of(step)), slows(step), crash, position[step])

    return sorted(candidates, key=key)


def solve(
    weigh: Callable[[Sequence[Change]], JobMemory],
    candidates: Sequence[str],
    changes_of: Callable[[Mapping[str, int]], Sequence[Change]],
    card_gib: float,
    *,
    crashed: Collection[Phase] = (),
    given: Sequence[str] = (),
    must_lower: bool = False,
    rungs: Mapping[str, int] | None = None,
) -> Solution:
    """The least-loss set of ``candidates`` that fits ``card_gib`` (see the module's docstring).

    Args:
        weigh: The job's memory with some changes (its calibration included: the
            :class:`~oom_wizard.rules.sizing.Weigher`'s ``memory``).
        candidates: The step ids that may be taken, in the plan's order.
        changes_of: The changes a set of steps makes, each at its rung (step id → rung, 0:
            its default toggles and values).
        card_gib: The card.
        crashed: The phases the crash ran into (their levers go first within a class).
        given: Steps already taken (kept, never pruned).
        must_lower: A fix must also lower one of the ``crashed`` phases by
            :data:`MIN_SAVING` (a crash happened there, whatever the estimate says).
        rungs: How many stronger rungs each candidate has beyond its default one (a step
            not named has none).
    """

    further = dict(rungs or {})
    cache: dict[frozenset[tuple[str, int]], JobMemory] = {}

    def memory(ids: Collection[str] | Mapping[str, int]) -> JobMemory:
        levels = dict(ids) if isinstance(ids, Mapping) else dict.fromkeys(ids, 0)
        key = frozenset(levels.items())
        if key not in cache:
            cache[key] = weigh(tuple(changes_of(levels)))
        return cache[key]

    base = memory(given)

    def lowered(after: JobMemory) -> bool:
        for phase in crashed:
            before_band, after_band = base.phases.get(phase), after.phases.get(phase)
            if before_band is not None and (
                after_band is None or after_band.high <= before_band.high - MIN_SAVING
            ):
                return True
        return False

    share = MARGIN_SHARE

    def done(after: JobMemory) -> bool:
        return fits_card(after, card_gib, share) and (not must_lower or lowered(after))

    def lowers_crash(step: str) -> bool:
        return lowered(memory([*given, step]))

    order = lever_order(
        [c for c in candidates if c not in given], lowers_crash if crashed else None
    )
    taken: dict[str, int] = dict.fromkeys(given, 0)
    current = base

    def helps(trial: JobMemory) -> bool:
        over = _over(current, card_gib)
        if must_lower and not lowered(current):
            over.update({p: b for p, b in current.phases.items() if p in crashed and b})
        return any(_lowers(trial.phases.get(phase), band) for phase, band in over.items())

    for index, step in enumerate(order):
        if done(current):
            break
        trial = memory({**taken, step: 0})
        if helps(trial):
            taken[step] = 0
            current = trial
        last = index + 1 == len(order) or loss_of(order[index + 1]) != loss_of(step)
        if not last:
            continue
        # The class is spent at its default rungs: up the rungs of its levers taken.
        for lever in [s for s in taken if s not in given and loss_of(s) == loss_of(step)]:
            for rung in range(taken[lever] + 1, further.get(lever, 0) + 1):
                if done(current):
                    break
                trial = memory({**taken, lever: rung})
                if helps(trial):  # a rung that lowers nothing still over is passed over
                    taken[lever] = rung
                    current = trial
    fits = done(current)
    if not fits:
        share = 0.0  # within the card without the margin: the least loss that fits at all
        fits = done(current)
    if fits:
        taken = _reduced(taken, given, lambda levels: done(memory(levels)))
        current = memory(taken)
    lacks = 0.0 if fits else max(0.0, current.peak().high - card_gib)
    chosen = tuple(taken)
    up = {step: rung for step, rung in taken.items() if rung > 0}
    return Solution(chosen, current, fits, lacks, tuple(order), share > 0, up)


def _reduced(
    taken: Mapping[str, int],
    given: Collection[str],
    fits: Callable[[Mapping[str, int]], bool],
) -> dict[str, int]:
    """``taken`` with every rung it still fits below stepped down and every step it still fits
    without left out, the costliest step first (its rungs before a cheaper step goes), until
    nothing more goes: then undoing any one change (a step, or one rung of it) makes it not
    fit."""
    levels = dict(taken)
    changed = True
    while changed:
        changed = False
        for step in reversed([s for s in levels if s not in given]):
            while levels[step] > 0 and fits({**levels, step: levels[step] - 1}):
                levels[step] -= 1
                changed = True
            without = {s: r for s, r in levels.items() if s != step}
            if fits(without):
                levels, changed = without, True
    return levels


@dataclass(frozen=True)
class GivenBack:
    """What a job that fits with room could get back: the solver's question turned round.

    Attributes:
        steps: The candidates taken, in the order they were weighed.
        memory: The job's memory with all of them (the job as it is when ``steps`` is empty).
        held: The first candidate left out because the job would then not fit with the
            margin (None: every candidate fits).
        held_memory: The job's memory with that candidate added to ``steps``.
    """

    steps: tuple[str, ...]
    memory: JobMemory
    held: str | None = None
    held_memory: JobMemory | None = None


def give_back(
    weigh: Callable[[Sequence[Change]], JobMemory],
    candidates: Sequence[tuple[str, Sequence[Change]]],
    card_gib: float,
    *,
    in_order: bool = False,
) -> GivenBack:
    """The most of ``candidates`` (each a name and its changes, the most valuable to the user
    first) that the job takes back while every phase still fits ``card_gib`` with the margin
    (:func:`fits_card`, the solver's own test).

    Each candidate is weighed on top of those taken before it; one that would not fit is left
    out and the next is tried, or, with ``in_order`` (the scale-up's re-adds, which come back
    one after another in a fixed order), the walk stops there.
    """

    taken: list[str] = []
    changes: list[Change] = []
    current = weigh(())
    held: str | None = None
    held_memory: JobMemory | None = None
    for name, more in candidates:
        trial = weigh((*changes, *more))
        if trial.not_estimated is None and fits_card(trial, card_gib):
            taken.append(name)
            changes.extend(more)
            current = trial
            continue
        if held is None:
            held, held_memory = name, trial
        if in_order:
            break
    return GivenBack(tuple(taken), current, held, held_memory)
