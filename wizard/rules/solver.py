"""What to change so it fits: the one solver every front end asks.

Given a job's plan (its steps, each one rung of one lever AI Toolkit honours for the arch: the
plan leaves out, as ``not_for_this_model``, a lever the arch ignores), the card and the job's
calibration, :func:`solve` answers with the set of steps that fits the card at the least loss
to the user, or, when no set does, the closest config and what it still lacks.

**What the user loses.** Each step loses one of three things (:data:`LOSS`): only time (a
slower step, a caching pass, system RAM), the preview samples, or quality (fewer pixels,
frames, rank, bits or passes). The levers are tried in that order, and in the plan's order
within a class (the plan puts the moment's ladder first, in the roll-back's order), except
that a lever which slows the step several-fold (:data:`SLOW`: layer offloading) comes last
of the time class, and says so. Among the steps of a class, those that lower the phase the
crash ran into come first: a fix for a crash while loading starts with what lowers the
load, never with lighter samples.

**Fits.** Every phase's band has its high edge within the card, and its midpoint leaves
:data:`MARGIN_SHARE` of the card free; when no set of levers leaves that room, the least loss
with every high edge within the card (``fit``'s "fits"), which says that its margin is thin.

**The search.** Each lever in turn is taken when it lowers a phase that is still over the
card; the search stops at the first set that fits. Then each step taken is tried without,
the costliest first: a step the set still fits without is left out. What is left is the
answer, and it is irreducible: undoing any one of its steps makes it not fit (a property
test holds this). A search weighs the job at most twice per lever, through one cached
:class:`~oom_wizard.rules.sizing.Weigher`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from oom_wizard.formats.change import Change
from oom_wizard.rules.memory import Band, JobMemory, Phase

Loss = Literal["time", "samples", "quality"]

MARGIN_SHARE: Final = 0.10
"""The room a fix leaves on the card, as a share of it (2.4 GiB on a 24 GiB card).

Why this much: PyTorch's message bounds the crashed phase's need from below only (the
allocation that failed need not be the last of the step), an intermittent crash is one whose
peak moves from step to step with the bucket and caption length, and the caching allocator
fragments: a fix sized to the last GiB would crash again on the next unlucky step."""

MIN_SAVING: Final = 0.01
"""GiB: the least a fix must save (a fix lowers the crashed peak, whatever the estimate says)."""

#: What each step of the plan takes from the user, besides memory. Batch size counts as time:
#: the plan keeps the effective batch with gradient accumulation.
LOSS: Final[Mapping[str, Loss]] = {
    "gradient_checkpointing": "time",
    "attention": "time",
    "text_encoder": "time",
    "low_vram": "time",
    "batch_size": "time",
    "placement": "time",
    "layer_offloading": "time",
    "sampling": "samples",
    "quantize": "quality",
    "optimizer_8bit": "quality",
    "extra_passes": "quality",
    "lora_rank": "quality",
    "top_bucket": "quality",
    "num_frames": "quality",
    "smaller_bucket": "quality",
    "control_images": "quality",
}

LOSS_ORDER: Final[tuple[Loss, ...]] = ("time", "samples", "quality")

#: Levers that cost only time but slow every step several-fold: last of the time class.
SLOW: Final[frozenset[str]] = frozenset({"layer_offloading"})

#: What each class of loss is, in words (a proposal says it).
LOSS_WORDS: Final[Mapping[Loss, str]] = {
    "time": "costs time",
    "samples": "costs preview samples",
    "quality": "costs quality",
}


def loss_of(step_id: str) -> Loss:
    """What the step takes from the user (a step the table does not name: quality)."""
    return LOSS.get(step_id, "quality")


def loss_words(step_id: str) -> str:
    """``costs time``, ``costs time (slows every step several-fold)``..."""
    words = LOSS_WORDS[loss_of(step_id)]
    return f"{words} (slows every step several-fold)" if step_id in SLOW else words


@dataclass(frozen=True)
class Solution:
    """The solver's answer.

    Attributes:
        steps: The step ids taken, in the order the levers were tried.
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
        return (LOSS_ORDER.index(loss_of(step)), step in SLOW, crash, position[step])

    return sorted(candidates, key=key)


def solve(
    weigh: Callable[[Sequence[Change]], JobMemory],
    candidates: Sequence[str],
    changes_of: Callable[[Collection[str]], Sequence[Change]],
    card_gib: float,
    *,
    crashed: Collection[Phase] = (),
    given: Sequence[str] = (),
    must_lower: bool = False,
) -> Solution:
    """The least-loss set of ``candidates`` that fits ``card_gib`` (see the module's docstring).

    Args:
        weigh: The job's memory with some changes (its calibration included: the
            :class:`~oom_wizard.rules.sizing.Weigher`'s ``memory``).
        candidates: The step ids that may be taken, in the plan's order.
        changes_of: The changes a set of steps makes with their default toggles.
        card_gib: The card.
        crashed: The phases the crash ran into (their levers go first within a class).
        given: Steps already taken (kept, never pruned).
        must_lower: A fix must also lower one of the ``crashed`` phases by
            :data:`MIN_SAVING` (a crash happened there, whatever the estimate says).
    """

    cache: dict[frozenset[str], JobMemory] = {}

    def memory(ids: Collection[str]) -> JobMemory:
        key = frozenset(ids)
        if key not in cache:
            cache[key] = weigh(tuple(changes_of(key)))
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
    taken = list(given)
    current = base
    for step in order:
        if done(current):
            break
        over = _over(current, card_gib)
        if must_lower and not lowered(current):
            over.update({p: b for p, b in current.phases.items() if p in crashed and b})
        trial = memory([*taken, step])
        if any(_lowers(trial.phases.get(phase), band) for phase, band in over.items()):
            taken.append(step)
            current = trial
    fits = done(current)
    if not fits:
        share = 0.0  # within the card without the margin: the least loss that fits at all
        fits = done(current)
    if fits:
        for step in reversed(taken[len(given) :]):
            without = [s for s in taken if s != step]
            if done(memory(without)):
                taken = without
        current = memory(taken)
    lacks = 0.0 if fits else max(0.0, current.peak().high - card_gib)
    return Solution(tuple(taken), current, fits, lacks, tuple(order), share > 0)


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
