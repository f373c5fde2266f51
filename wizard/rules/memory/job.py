"""A job's memory: each phase of its run as a band of GiB on the GPU.

Each phase is a band (low, high) in GiB, not a point: the weights are counted exactly from the
model's parameters, the activations from figures measured on the model's own blocks with AI
Toolkit's adapters in place (per token per block, per latent pixel for a UNet), the VAE's
passes from its own decode and encode figures, and what no CPU can measure as what it is
(:mod:`oom_wizard.rules.memory.overheads`: the CUDA context measured, the libraries'
workspaces, the allocator's slack refitted on the H200 rows of ``tests/fixtures/gpu_peaks.yaml``,
each batch item's own cost). The band is that figure ± a share set by how its activations were
checked (on a GPU, on CPU only, a stand-in: :mod:`oom_wizard.rules.memory.bands`).

The terms of each training process (the weights, the text encoder and the VAE where they live,
the trained weights and the optimizer state, the activations) are
:mod:`oom_wizard.rules.memory.account`'s, one module per term. This module turns them into
bands (:mod:`oom_wizard.rules.memory.parts`), takes the job's figure of a phase as the largest
over its processes, and applies the one calibration (:mod:`oom_wizard.rules.memory.calibration`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from oom_wizard.formats.change import Change
from oom_wizard.formats.document import JobDocument, apply_edits
from oom_wizard.formats.view import JobView, ProcessView, build_view
from oom_wizard.rules.catalog import ArchFacts, Presets, load_presets
from oom_wizard.rules.memory.account import ProcessAccount, Terms
from oom_wizard.rules.memory.bands import CERTAINTY_WORDS, Band, Certainty
from oom_wizard.rules.memory.calibration import (
    DISAGREES_BELOW,
    HOLDS_THE_SAME,
    SCALE_RANGE,
    Calibration,
    calibrated_bands,
    facts_first,
    loaded_before_the_crash,
    measured_words,
    passed_stays_passed,
    scale_for,
)
from oom_wizard.rules.memory.family import FamilyLike
from oom_wizard.rules.memory.overheads import OVERHEADS, Overheads
from oom_wizard.rules.memory.parts import Parts
from oom_wizard.rules.memory.phases import CRASH_PHASE, PHASE_WORDS, PHASES, Phase
from oom_wizard.rules.shape import arch_facts

FamilyLookup = Callable[[ArchFacts | None], FamilyLike | None]


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
        overheads: The terms no CPU measures (default: the shipped
            :data:`~oom_wizard.rules.memory.overheads.OVERHEADS`; the accuracy bench passes a
            refit without one source).
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
        fitted = scale_for(today, calibration, overheads)
    else:
        fitted = scale_for(per_phase, calibration, overheads)
    scale, unexplained = fitted
    phases: dict[Phase, Band | None] = {}
    parts: dict[Phase, Parts] = {}
    for phase in PHASES:
        bands = calibrated_bands(phase, per_phase[phase], fitted, calibration, overheads)
        if not bands:
            phases[phase] = None
            continue
        if phase == "load" and calibration is not None:
            bands = loaded_before_the_crash(
                bands, per_phase[phase], (today or per_phase)[phase], fitted, calibration, overheads
            )
        band, phase_parts = max(bands, key=lambda item: item[0].high)
        phases[phase] = band
        parts[phase] = phase_parts
    if calibration is not None and today is None:
        facts_first(phases, calibration)
    elif calibration is not None and today is not None:
        passed_stays_passed(phases, today, fitted, calibration, overheads)
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
        if calibration.moment == "caching":
            held = "latents' encode while loading (the VAE alone on the card)"
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
