"""The memory model: each phase of a job's run as a band of GiB on the GPU.

Four phases peak at different moments: the end of ``load`` (the weights just moved to the
card), the ``baseline_sample`` before step 0, a ``training`` step, and a periodic ``sample``.
Each is a band (low, high) in GiB, not a point: the weights are counted exactly from the
model's parameters, the activations from figures measured on the model's own blocks with AI
Toolkit's adapters in place (per token per block, per latent pixel for a UNet), the VAE's
passes from its own decode and encode figures, and what no CPU can measure as what it is
(:class:`Overheads`: the CUDA context measured, the libraries' workspaces, the allocator's slack
refitted on the H200 rows of ``tests/fixtures/gpu_peaks.yaml``, each batch item's own cost). The
band is that figure ± :data:`CLASS_BAND`, by how its activations were checked (on a GPU, on CPU
only, a stand-in): the size of the held-out errors of that class (each published point of
``tests/fixtures/measured_peaks.yaml`` and GPU row with its source left out of every refit),
so that a band holds the truth 8 times in 10 (:data:`BAND_RATE`).

The terms of each training process (the weights, the text encoder and the VAE where they live,
the trained weights and the optimizer state, the activations) are
:mod:`oom_wizard.rules.accounts`'s: its docstring has the formula. This module turns them into
bands, takes the job's figure of a phase as the largest over its processes, and owns the one
calibration rule.

The figure: the terms (:mod:`oom_wizard.rules.accounts`), the context CUDA_CONTEXT_GIB, the slack
ALLOCATOR_SLACK on the activations and the layers in flight, the workspaces WORKSPACE_GIB; the
band: the figure × (1 ± CLASS_BAND[certainty]).

THE calibration rule (:func:`_scale_for`, :func:`_facts_first`): PyTorch's OOM message is a
floor (the crashed phase needed more than allocated + tried, and more than the card), so that
phase's low edge is lifted to it, never lowered; a run's measured peak is a point the band is
centred on; either way by one factor on the varying part of every phase, today's and after any
change. The factor stays within SCALE_RANGE: what a figure needs beyond it is a fixed amount the
model cannot name (``unexplained``), carried by the phases that hold what that phase holds
(HOLDS_THE_SAME), not a tenfold factor on every other phase's activations. The phases the log
shows passing are within the card, and stay so after a change that does not make them heavier.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Final, Literal

from oom_wizard.formats.change import Change
from oom_wizard.formats.document import JobDocument, apply_edits
from oom_wizard.formats.view import JobView, ProcessView, build_view
from oom_wizard.rules.catalog import (
    ArchFacts,
    Presets,
    load_presets,
)
from oom_wizard.rules.memory.account import (
    GIB_BYTES,
    ITEM_GIB,
    Certainty,
    FamilyLike,
    Phase,
    ProcessAccount,
    Terms,
)
from oom_wizard.rules.shape import arch_facts

if TYPE_CHECKING:
    from oom_wizard.rules.diagnosis import Diagnosis

PHASES: Final[tuple[Phase, ...]] = ("load", "baseline_sample", "training", "sample")
Verdict = Literal["fits", "tight", "wont_fit"]

CERTAINTY_WORDS: Final[Mapping[Certainty, str]] = MappingProxyType(
    {
        "gpu": "checked on a GPU",
        "cpu": "measured on CPU only",
        "stand_in": "a stand-in",
    }
)

CUDA_CONTEXT_GIB: Final = (0.73, 0.76)
"""The CUDA context and libraries beside PyTorch's allocations, whatever the job (used −
reserved on every H200 row of ``../shared/gpu-measurements.md``): measured, not fitted."""
ALLOCATOR_SLACK: Final = 0.0
"""The caching allocator's reserve beyond the peak allocation, as a share of what the
activations, the VAE's pass and the layers in flight leave (reserved − peak allocated grows
with them, not with the resident weights). Refitted by least squares on the shared GPU rows
(``tests/fixtures/gpu_peaks.yaml``), the only points measured the way AI Toolkit trains."""
WORKSPACE_GIB: Final = 0.06
"""The libraries' workspaces, as they allocate them through PyTorch's allocator: cuBLAS's
(4 MiB × 8 on a Hopper card, about 8 MiB before) and cuBLASLt's (32 MiB on a Hopper card, 1-4
MiB before) for the one stream a trainer computes on; attention kernels' are far smaller.
Not a constant earned by other trainers' extras."""

CLASS_BAND: Final[Mapping[Certainty, tuple[float, float]]] = MappingProxyType(
    {
        "gpu": (-0.108, 0.108),
        "cpu": (-0.165, 0.165),
        "stand_in": (-0.33, 0.33),
    }
)
"""A phase's band around the model's figure (± a share of it), by how its varying part was
checked: the 80th percentile of the size of the held-out errors (measured / figure − 1, each
published point and GPU row with its source left out of every refit) of that certainty class,
so that a band holds the truth 8 times in 10. A stand-in has no held-out point of its own:
the CPU class's width doubled. ``bench/memory_accuracy.py`` prints them; a test keeps these
at them."""

BAND_RATE: Final = 0.8
"""The share of held-out points a band is made to contain (:data:`CLASS_BAND`)."""


@dataclass(frozen=True)
class Overheads:
    """What no CPU measures, beside the terms, and the bands' widths: the CUDA context (GiB),
    the allocator's slack (a share), the libraries' workspaces outside loading (GiB), each
    batch item's own cost in a training step (GiB; ``Terms.items``), and each certainty class's
    band around the figure.

    :data:`OVERHEADS` is what the model ships; ``bench/memory_accuracy.py`` refits them with
    each source of the fixtures left out (``tests/support/measured_peaks.py``) to judge the
    model on what it was not fitted to."""

    context_gib: float = sum(CUDA_CONTEXT_GIB) / 2.0
    slack: float = ALLOCATOR_SLACK
    workspace_gib: float = WORKSPACE_GIB
    item_gib: float = ITEM_GIB
    band: Mapping[Certainty, tuple[float, float]] = field(default_factory=lambda: CLASS_BAND)


OVERHEADS: Final = Overheads()
"""The overheads the model uses unless told otherwise."""

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

CRASH_PHASE: Final[Mapping[str, Phase]] = MappingProxyType(
    {
        "model_load": "load",
        "quantize": "load",
        "cache_latents": "load",
        "cache_text": "load",
        "baseline_sample": "baseline_sample",
        "training": "training",
        "periodic_sample": "sample",
    }
)
"""The memory phase of the log's finer phases."""

MOMENT_PHASE: Final[Mapping[str, Phase]] = MappingProxyType(
    {
        "loading": "load",
        "early_steps": "training",
        "intermittent": "training",
        "sampling": "sample",
    }
)
"""The memory phase of a crash moment, when the log says nothing finer."""

PHASE_MOMENT: Final[Mapping[Phase, str]] = MappingProxyType(
    {
        "load": "loading",
        "baseline_sample": "loading",
        "training": "early_steps",
        "sample": "sampling",
    }
)
"""The plan's moment whose ladder lowers a phase's peak."""


FamilyLookup = Callable[[ArchFacts | None], FamilyLike | None]


# --------------------------------------------------------------------------- the values


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


@dataclass(frozen=True)
class Parts:
    """What one phase holds, in GiB (the band's midpoints)."""

    transformer: float
    text_encoder: float
    vae: float
    trainable: float
    optimizer: float
    activations: float
    overhead: float
    in_flight: float = 0.0
    """Copies of the transformer's weights made for the pass: under layer offloading the
    staging rings' copies of the layers in flight (the moved layers themselves live in system
    RAM), and the dequantized copies of a layer of AI Toolkit's own quantizers that autograd
    keeps until backward; ``transformer`` holds what stays resident."""
    vae_pass: float = 0.0
    """The VAE's decode (a sample) or encode (latents not cached, or while caching them),
    where it, not the denoiser's pass, sets the phase's peak."""
    context: float = 0.0
    """The CUDA context, part of ``overhead``."""
    slack: float = 0.0
    """The allocator's slack, part of ``overhead`` (reserved but not allocated): a figure
    published as PyTorch's peak allocation holds neither it nor the context."""
    items: int = 0
    """The batch items whose own cost (``Overheads.item_gib``) is in ``activations``."""
    unexplained: float = 0.0
    """What the log's figure says the phase held beyond this model's estimate with its
    factor at :data:`SCALE_RANGE`'s bound: a fixed amount, not any named part."""

    def as_dict(self) -> dict[str, float]:
        """The parts rounded to 0.01 GiB, in the contract's order (``overhead`` holds the CUDA
        context, ``context`` says how much of it that is)."""
        return {
            "transformer": round(self.transformer, 2),
            "in_flight": round(self.in_flight, 2),
            "text_encoder": round(self.text_encoder, 2),
            "vae": round(self.vae, 2),
            "trainable": round(self.trainable, 2),
            "optimizer": round(self.optimizer, 2),
            "activations": round(self.activations, 2),
            "vae_pass": round(self.vae_pass, 2),
            "overhead": round(self.overhead, 2),
            "context": round(self.context, 2),
            "unexplained": round(self.unexplained, 2),
        }

    @property
    def weights(self) -> float:
        """What the phase holds beside its activations and overhead: the weights, the
        trained state and the optimizer's."""
        return (
            self.transformer
            + self.in_flight
            + self.text_encoder
            + self.vae
            + self.trainable
            + self.optimizer
        )


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
    saved from it carries (:func:`job_memory` weighs the account against it)."""
    measured_at: str | None = None
    """When a run measured the peak (ISO-8601), for "measured on your card on <date>"."""

    @property
    def floor_gib(self) -> float | None:
        """What the crashed phase needed at least: the message's figure, and never less than
        the card it did not fit on. None for a measured peak."""
        if self.at_least_gib is None:
            return None
        return max(self.at_least_gib, self.card_gib or 0.0)

    def as_json(self) -> dict[str, object]:
        """The change log's and ``fit --json``'s form (``measured_at`` only for a run's peak)."""
        dated: dict[str, object] = {"measured_at": self.measured_at} if self.measured_at else {}
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


@dataclass(frozen=True)
class JobMemory:
    """A job's memory at each phase.

    Attributes:
        phases: Each phase's band; None where the phase does not happen.
        parts: Each happening phase's parts.
        peak_phase: The phase with the highest band.
        known: Every part had real figures (no nominal fallback).
        calibrated_by: The figures that corrected the estimate, if any.
        scale: The factor the calibration put on activations and overhead (1.0 without).
        notes: What the figures leave out or assume, in words.
    """

    phases: Mapping[Phase, Band | None]
    parts: Mapping[Phase, Parts]
    peak_phase: Phase
    known: bool
    calibrated_by: Calibration | None
    notes: tuple[str, ...]
    scale: float = 1.0
    cards: int = 1
    """The most cards a process's model is split over (``split_model_over_gpus``)."""
    certainty: Certainty = "cpu"
    """How the activation figures were checked (the least sure of the job's processes)."""
    not_estimated: str | None = None
    """Why the job gets no GiB figure and no verdict (a process type the model does not
    cover, an arch AI Toolkit does not know or whose counts are unknown), in words; None when
    it is estimated. Its bands then only tell which way a change moves a phase."""

    def basis(self) -> str:
        """What the band rests on, in words: its figures and its calibration."""
        words = f"figures {CERTAINTY_WORDS[self.certainty]}"
        calibration = self.calibrated_by
        if calibration is not None and self.scale != 1.0:
            words += f", calibrated by {calibration.source}"
        return words

    def peak(self) -> Band:
        """The band of the peak phase."""
        band = self.phases[self.peak_phase]
        assert band is not None
        return band

    def phases_json(self) -> dict[str, dict[str, float] | None]:
        """``{"load": {"low", "high"} | None, ...}`` as ``fit --json`` gives them (every phase
        None for a job that is not estimated)."""
        return {
            phase: (band.rounded() if band is not None and self.not_estimated is None else None)
            for phase, band in self.phases.items()
        }


def verdict(band: Band, card_gib: float) -> Verdict:
    """``fits`` (high ≤ card), ``tight`` (low ≤ card < high) or ``wont_fit`` (low > card)."""
    if band.high <= card_gib:
        return "fits"
    if band.low <= card_gib:
        return "tight"
    return "wont_fit"


def job_memory(
    document: JobDocument,
    changes: Sequence[Change],
    model_kind: str,
    *,
    presets: Presets | None = None,
    calibration: Calibration | None = None,
    families: FamilyLookup | None = None,
    calibrated_on: JobDocument | None = None,
    gpus: int = 1,
    overheads: Overheads = OVERHEADS,
) -> JobMemory:
    """Each phase's band for ``document`` with ``changes`` applied.

    Args:
        document: Today's config.
        changes: The changes to weigh (none: today's config).
        model_kind: ``video`` counts frames; ``image`` one frame per item.
        presets: The preset data (default: the shipped presets).
        calibration: A crash's or a run's own figures; they scale the activations and the
            overhead so that their phase agrees (the same factor applies after changes).
        families: The memory family of an arch (default: the presets' ``memory.yaml``).
        calibrated_on: The config the calibration's figures come from, when it is not
            ``document`` (a saved fix is estimated with its source's crash figures).
        gpus: How many GPUs the probe sees (1 without a probe): with
            ``model.split_model_over_gpus`` on, each phase is its fullest card's.
        overheads: The terms no CPU measures (default: the shipped :data:`OVERHEADS`; the
            accuracy bench passes a refit without one source).
    """
    presets = presets or load_presets()
    lookup = families or _presets_families(presets)
    video = model_kind == "video"
    view = view_after(document, changes)
    found = _accounts(view, presets, lookup, video, gpus)
    per_phase, known, notes, cards = found.per_phase, found.known, found.notes, found.cards
    today: dict[Phase, list[tuple[Terms, bool]]] | None = None
    if calibration is not None and calibration.on is not None:
        calibrated_on = calibration.on  # the lineage's config, whatever the caller weighs
    if calibration is not None and (changes or calibrated_on is not None):
        # The figures are about today's config: its scale carries over to the changed one.
        base = (calibrated_on or document).view()
        today = _accounts(base, presets, lookup, video, gpus).per_phase
        fitted = _scale_for(today, calibration, overheads)
    else:
        fitted = _scale_for(per_phase, calibration, overheads)
    scale, unexplained = fitted
    phases: dict[Phase, Band | None] = {}
    parts: dict[Phase, Parts] = {}
    for phase in PHASES:
        bands = [
            _band_of(
                terms,
                quantized,
                scale,
                _unexplained_in(phase, calibration, unexplained),
                overheads,
            )
            for terms, quantized in per_phase[phase]
        ]
        if not bands:
            phases[phase] = None
            continue
        band, phase_parts = max(bands, key=lambda item: item[0].high)
        phases[phase] = band
        parts[phase] = phase_parts
    if calibration is not None and today is None:
        _facts_first(phases, calibration)
    elif calibration is not None and today is not None:
        _passed_stays_passed(phases, today, fitted, calibration, overheads)
    happening = [phase for phase in PHASES if phases[phase] is not None]
    peak_phase: Phase = max(
        happening or ["load"],
        key=lambda p: (phases[p] or Band(0.0, 0.0)).high,
    )
    if not happening:
        phases["load"] = Band(0.0, 0.0)
        parts["load"] = Parts(0, 0, 0, 0, 0, 0, 0)
    if calibration is not None and calibration.measured_gib is not None:
        notes.append(measured_words(calibration))
    if calibration is not None and scale != 1.0:
        notes.append(f"Calibrated by {calibration.source}: activations and overhead × {scale:.2f}.")
    if calibration is not None and scale < DISAGREES_BELOW:
        notes.append(
            f"{calibration.source} says this phase held far less than the model's figures "
            f"(activations × {scale:.2f}): the log and the config disagree (was the config the "
            "one that ran, at these sizes?), so every figure of this job carries that factor "
            "and is less sure than its band says."
        )
    if calibration is not None and unexplained > 0.0:
        named = [PHASE_WORDS[p] for p in HOLDS_THE_SAME[calibration.phase]]
        held = " and ".join([", ".join(named[:-1]), named[-1]] if len(named) > 1 else named)
        notes.append(
            f"The figure of {calibration.source} is {unexplained:.1f} GiB above what this model "
            "explains even "
            f"with the activations × {SCALE_RANGE[1]:g}: something it does not see held that "
            f"much, so it is counted as a fixed amount in the {held}, after any change too."
        )
    return JobMemory(
        phases=MappingProxyType(phases),
        parts=MappingProxyType(parts),
        peak_phase=peak_phase,
        known=known,
        calibrated_by=calibration,
        notes=tuple(dict.fromkeys(notes)),
        scale=scale,
        cards=cards,
        certainty=found.certainty,
        not_estimated=found.not_estimated,
    )


ESTIMATED_TYPES: Final = frozenset({"sd_trainer", "diffusion_trainer", "ui_trainer"})
"""Process types the model covers: AI Toolkit's LoRA and fine-tune trainers."""

_LEAST_SURE: Final[tuple[Certainty, ...]] = ("stand_in", "cpu", "gpu")


@dataclass
class _Found:
    """What :func:`_accounts` found: each phase's terms per process (per card of a split
    model), whether every figure was real, the notes, the most cards a process is split
    over, the least sure figures, and why the job is not estimated (if it is not)."""

    per_phase: dict[Phase, list[tuple[Terms, bool]]]
    known: bool
    notes: list[str]
    cards: int
    certainty: Certainty
    not_estimated: str | None


def _not_estimated(
    process: ProcessView, facts: ArchFacts | None, family: FamilyLike | None
) -> str | None:
    """Why a process gets no GiB figure, in words (None: it gets them): a job type the model
    does not cover, an arch AI Toolkit does not know, or one whose parameter counts no source
    gives. Its bands are still weighed, with nominal counts, for the direction a change
    moves them (which step lowers which phase), never shown as GiB."""
    if process.type not in ESTIMATED_TYPES:
        return (
            f"not estimated: this job type ({process.type}) is not one of AI Toolkit's "
            "LoRA or fine-tune trainers the memory model covers"
        )
    if facts is None:
        return (
            f"not estimated: model.arch {process.model.arch!r} is not an arch AI Toolkit "
            "knows, so the job stops with an error while loading"
        )
    if family is not None or facts.params is not None:
        return None
    if facts.memory_by_name:
        name = process.model.name_or_path
        named = f"model.name_or_path {name!r} names none" if name else "no model.name_or_path"
        return f"not estimated: model.arch {facts.id}: {facts.memory_unknown}, and {named}"
    return (
        f"not estimated: the parameter counts of {facts.label} (model.arch {facts.id}) are "
        "not known to this tool (no stored source gives its released config), so a GiB "
        "figure would be a guess"
    )


def _accounts(
    view: JobView, presets: Presets, lookup: FamilyLookup, video: bool, gpus: int = 1
) -> _Found:
    """Each phase's terms for every training process of the job (see :class:`_Found`)."""
    notes: list[str] = []
    known = True
    per_phase: dict[Phase, list[tuple[Terms, bool]]] = {phase: [] for phase in PHASES}
    cards = 1
    certainty: Certainty = "gpu"
    refused: str | None = None
    for process in view.processes:
        facts = arch_facts(process, presets)
        if not process.model.arch_keys():
            notes.append(
                "No model.arch (and no is_* flag): AI Toolkit takes it as sd1 (SD 1.x), and so "
                "does this estimate."
            )
        family = lookup(facts)
        if family is None and facts is not None and facts.memory_by_name:
            family = presets.memory_of(facts, process.model.name_or_path)
            if family is not None:
                notes.append(
                    f"model.arch {facts.id}: the size comes from model.name_or_path "
                    f"({family.id}'s figures)."
                )
        refused = refused or _not_estimated(process, facts, family)
        account = ProcessAccount(process, facts, family, presets, video, gpus)
        cards = max(cards, len(account.split or ()) or 1)
        for phase in PHASES:
            for terms in account.cards(phase):
                per_phase[phase].append((terms, account.quantized))
        known = known and account.known
        certainty = min(certainty, account.certainty, key=_LEAST_SURE.index)
        notes.extend(account.notes)
    return _Found(per_phase, known, notes, cards, certainty, refused)


def _facts_first(phases: dict[Phase, Band | None], calibration: Calibration) -> None:
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


def _passed_stays_passed(
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
    scale, unexplained = fitted
    for phase in calibration.passed:
        band = phases.get(phase)
        extra = _unexplained_in(phase, calibration, unexplained)
        found = [
            _band_of(terms, quantized, scale, extra, overheads)[0]
            for terms, quantized in today[phase]
        ]
        if band is None or not found or phase == calibration.phase:
            continue
        if band.high <= max(b.high for b in found) + 1e-9 and band.high > card:
            phases[phase] = Band(min(band.low, card), card)


def view_after(document: JobDocument, changes: Sequence[Change]) -> JobView:
    """The config's view with ``changes`` applied (none: today's view)."""
    if not changes:
        return document.view()
    tree = apply_edits(document.tree, [change.edit() for change in changes])
    return build_view(tree, file=str(document.source), locate=lambda _path: None)


def _presets_families(presets: Presets) -> FamilyLookup:
    def lookup(facts: ArchFacts | None) -> FamilyLike | None:
        return presets.memory_of(facts)

    return lookup


def _unexplained_in(phase: Phase, calibration: Calibration | None, unexplained: float) -> float:
    """The GiB of the calibration's figure left unexplained that ``phase`` holds too."""
    if calibration is None or phase not in HOLDS_THE_SAME[calibration.phase]:
        return 0.0
    return unexplained


def _band_of(
    terms: Terms,
    quantized: bool,
    scale: float,
    unexplained: float = 0.0,
    overheads: Overheads = OVERHEADS,
) -> tuple[Band, Parts]:
    """The band and parts (GiB) of one phase of one process.

    The figure: ``weights + varying × scale + slack + workspaces + context``, the varying part
    the activations with each batch item's own cost (or the VAE's pass), the slack a share of
    it and of the layers in flight; ``scale`` is the job's calibration (1 without one). The
    band: the figure × (1 + the certainty class's :data:`CLASS_BAND`), then ``unexplained``
    (the GiB of a calibration's figure the factor at its bound does not reach) on both edges.
    """
    del quantized  # its slack is in the transformer's edges already

    def mid(pair: tuple[float, float]) -> float:
        return (pair[0] + pair[1]) / 2.0 / GIB_BYTES

    fixed = mid(terms.fixed())
    items = terms.items * overheads.item_gib
    act = (mid(terms.activations) + items) * scale
    vae = mid(terms.vae_pass) * scale
    in_flight = mid(terms.in_flight)
    slack = overheads.slack * (act + vae + in_flight)
    work = 0.0 if terms.loading else overheads.workspace_gib
    context = overheads.context_gib
    figure = fixed + act + vae + slack + work + context
    low, high = overheads.band[terms.certainty]
    band = Band(figure * (1.0 + low) + unexplained, figure * (1.0 + high) + unexplained)
    parts = Parts(
        transformer=mid(terms.transformer),
        in_flight=in_flight,
        text_encoder=mid(terms.text_encoder),
        vae=mid(terms.vae),
        trainable=mid(terms.trainable),
        optimizer=mid(terms.optimizer),
        activations=act,
        overhead=slack + work + context,
        vae_pass=vae,
        context=context,
        slack=slack,
        items=terms.items,
        unexplained=unexplained,
    )
    return band, parts


def _scale_for(
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
    beyond it is a fixed amount (the second value, GiB), never a larger factor.
    """
    if calibration is None or not per_phase[calibration.phase]:
        return 1.0, 0.0
    found = per_phase[calibration.phase]

    def band(scale: float) -> Band:
        return max(
            (_band_of(t, q, scale, 0.0, overheads)[0] for t, q in found), key=lambda b: b.high
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


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


# --------------------------------------------------------------------------- calibration


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


def measured_phase(ended_in: str | None, finished: bool, memory: JobMemory) -> Phase:
    """The phase a run's measured peak (nvidia-smi's highest reading while it ran) is a point
    of: of the phases the run went through (every phase that happens when it trained through;
    else those up to the one it ended in), the one ``memory`` estimates highest."""
    last = CRASH_PHASE.get(ended_in or "", "training")
    reached = PHASES if finished else PHASES[: PHASES.index(last) + 1]
    happening = [p for p in reached if memory.phases.get(p) is not None]
    if not happening:
        return last
    return max(happening, key=lambda p: (memory.phases[p] or Band(0.0, 0.0)).high)


def measured_words(calibration: Calibration) -> str:
    """A run's measured peak in one sentence: "Measured on your card on 2026-12-07: 17.8 GiB
    in the training step (attempt 2's measured peak (nvidia-smi))." """
    day = f" on {calibration.measured_at[:10]}" if calibration.measured_at else ""
    gib = calibration.measured_gib or 0.0
    where = PHASE_WORDS[calibration.phase]
    return f"Measured on your card{day}: {gib:.1f} GiB in the {where} ({calibration.source})."


def with_changes_note(memory: JobMemory, note: str) -> JobMemory:
    """``memory`` with one more note."""
    return replace(memory, notes=(*memory.notes, note))


# --------------------------------------------------------------------------- re-adds


PHASE_WORDS: Final[Mapping[Phase, str]] = MappingProxyType(
    {
        "load": "loading",
        "baseline_sample": "first sample",
        "training": "training step",
        "sample": "periodic sample",
    }
)
"""How a phase is named in a sentence."""


@dataclass(frozen=True)
class Prediction:
    """Whether a re-add is predicted to fit, and the sentence that says so.

    Attributes:
        verdict: Of the peak phase with the re-add.
        memory: The config's memory with the re-add.
        card_gib: The card measured against.
        words: One sentence for the user (the re-add stays allowed whatever it says).
    """

    verdict: Verdict
    memory: JobMemory
    card_gib: float
    words: str


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
    )


def predict_readd(
    document: JobDocument,
    changes: Sequence[Change],
    model_kind: str,
    *,
    card_gib: float | None,
    calibration: Calibration | None,
    calibrated_on: JobDocument | None = None,
    presets: Presets | None = None,
    gpus: int = 1,
) -> Prediction | None:
    """Whether ``changes`` (a re-add) are predicted to fit, from the known headroom.

    The card is ``card_gib`` (the probe), else the calibration's. None when neither is known,
    or when the job is not estimated (no GiB to predict with). ``gpus``: how many GPUs the
    probe sees (a split model is weighed per card).
    """
    card = card_gib if card_gib is not None else (calibration.card_gib if calibration else None)
    if card is None:
        return None
    after = job_memory(
        document,
        changes,
        model_kind,
        presets=presets,
        calibration=calibration,
        calibrated_on=calibrated_on,
        gpus=gpus,
    )
    if after.not_estimated is not None:
        return None
    return readd_prediction(after, card, calibration)


def readd_prediction(after: JobMemory, card: float, calibration: Calibration | None) -> Prediction:
    """The prediction of a re-add whose config weighs ``after``, on a ``card`` GiB card."""
    peak = after.peak()
    found = verdict(peak, card)
    where = (
        f"the {PHASE_WORDS[after.peak_phase]} peaks at {peak.low:.1f}–{peak.high:.1f} of "
        f"{card:.1f} GiB"
    )
    basis = f" (calibrated by {calibration.source})" if calibration is not None else ""
    if found == "fits":
        words = f"Predicted to fit: {where}{basis}."
    elif found == "tight":
        words = (
            f"Predicted tight: {where}{basis}; it may run out of memory again. You can still "
            "re-add it."
        )
    else:
        words = (
            f"Predicted not to fit: {where}{basis}. You can still re-add it; a new crash's "
            "figures will calibrate the estimate."
        )
    return Prediction(found, after, card, words)
