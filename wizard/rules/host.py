"""What one training process holds in the host's RAM in each phase, beside the card's account.

Users ask "why is my RAM (or page file) exhausted?" before any GPU error (ai-toolkit#1003, #714):
layer offloading keeps the weights it moves in pinned host memory, a text encoder set aside is
parked there, and the loader holds each model at full precision while it reads it. This module
gives each phase a band of GiB against the machine's RAM, from the same process terms as the
card's account (:class:`~oom_wizard.rules.memory.ProcessAccount`: parameter counts, the
share layer offloading moves) and AI Toolkit's source (27a03a91):

- **load**: the loaders read each model to system RAM at ``train.dtype`` before it is quantized
  (block by block, ``toolkit/util/quantize.py``) or moved to the card; the transformer and the
  text encoder are read one after the other, so the band runs from the larger of them to both
  (a ComfyUI pre-quantized file is read at its own precision).
- **caching** (latents, text embeddings): each cache is filled with its own model alone on the
  card (``set_device_state_preset``, ``dataloader_mixins.py:1962-1965, 2312-2315``), so the
  transformer waits in RAM, and while the latents are encoded the text encoder too.
- **caching** and **training**: the memory manager pins every weight
  it moves (``toolkit/memory_management/manager_modules.py:230-262``: ``pin_memory()`` per
  Linear and Conv2d, a quantized layer's inner buffers at their own bytes); torch's pinned
  (caching host) allocator rounds each allocation up to a power of two, so a layer takes 1 to 2
  times its bytes (:data:`PINNED_ROUNDING`, a band over a model's layer sizes). With text
  embeddings cached the text encoder is freed (``toolkit/unloader.py``, ``MemoryManager.free``;
  before PR #999 it stayed, 15.9 GB measured there); with ``unload_text_encoder`` alone it is
  moved to the CPU and stays (``SDTrainer.py:351-380``); ``te_device: cpu`` keeps it there;
  ``low_vram`` parks it on the CPU between its uses. A full fine-tune under offloading keeps the
  moved weights' gradients and optimizer state in system RAM too (``manager_modules.py``).
- every phase: the process itself (Python, torch, CUDA's libraries), :data:`PROCESS_GIB`.

Latents kept in memory (``cache_latents``; with ``cache_latents_to_disk`` as well they are
saved to disk and kept in memory too, ``config_modules.py:1003-1006``): the dataset keeps each
item's latent on the CPU at ``train.dtype`` once it is encoded or read back
(``toolkit/dataloader_mixins.py:1990-1996, 2083-2088``), so they fill the caching phase and
stay through training (augmentations turn caching off, ``config_modules.py:1021-1024``: not
read). Each file of the folder is an item at each resolution of the list (the dataset is split
by resolution, ``config_modules.py:1097-1111``), ``num_repeats`` times, doubled by each of
``flip_x`` and ``flip_y`` (``data_loader.py:452-592``); an item's latent is ``C × (W / s) ×
(H / s) × latent frames`` values, its bucket about ``resolution²`` pixels (``C``: the
arch's ``latent_channels`` in ``presets/archs.yaml``). The folder's files are counted by the
application where the folder is on this machine (:class:`~oom_wizard.host.media.MediaCount`);
where it is not, the size of the dataset is not known and this is a note. Left out, with a
note: DataLoader workers (each a process of its own), the OS's file cache of the safetensors
files (reclaimable). Windows pins at most about half of the RAM (:data:`WINDOWS_PINNED_SHARE`;
AnimaLoraStudio budgets its block swap so); on a Windows machine the pinned share is weighed
against that cap as well.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Literal

from oom_wizard.rules.catalog import load_presets
from oom_wizard.rules.memory import BILLION, GIB_BYTES, ProcessAccount, view_after
from oom_wizard.rules.shape import Shape, arch_facts, dataset_frames, offloaded_fractions
from oom_wizard.spelling import counted, verdict as verdict_words

if TYPE_CHECKING:
    from oom_wizard.formats.change import Change
    from oom_wizard.formats.document import JobDocument
    from oom_wizard.formats.view import DatasetView, ProcessView
    from oom_wizard.host.media import MediaCount
    from oom_wizard.rules.catalog import ArchFacts, Presets

DatasetKey = tuple[int, int]
"""A dataset of a config: ``(process index, dataset index)``."""

HostPhase = Literal["load", "caching", "training"]
HOST_PHASES: Final[tuple[HostPhase, ...]] = ("load", "caching", "training")
HostVerdict = Literal["fits", "tight", "wont_fit", "unknown"]

PROCESS_GIB: Final = (2.5, 4.0)
"""A training process's own RAM before any model: Python, torch and CUDA's libraries mapped and
touched (an estimate from typical CUDA processes, not measured here)."""
PINNED_ROUNDING: Final = (1.25, 2.0)
"""PyTorch's caching host allocator (``pin_memory()``) rounds each request up to a power of two:
a layer of 18 MiB (3072² in bf16) takes 32, one of 50 MiB (5120²) 64, one of 135 MiB
(5120 × 13824) 256; over a model's layer sizes the factor lies in this band (ai-toolkit's
unmerged PR #948 keeps a ledger of pinned bytes for this reason)."""
WINDOWS_PINNED_SHARE: Final = 0.5
"""The share of RAM Windows lets a process pin, about."""
ASSUMED_LATENT_CHANNELS: Final = 16
"""The usual latent of a current arch (FLUX.1's, Wan 2.1's): what an arch whose
``latent_channels`` ``presets/archs.yaml`` does not give is taken at."""
TIGHT_SHARE: Final = 0.85
"""A phase whose high edge passes this share of the RAM is tight: the OS, the desktop and the
file cache need the rest."""


@dataclass(frozen=True)
class HostBand:
    """A phase's host RAM in GiB, and what makes it up (``parts``: name → (low, high))."""

    low: float
    high: float
    parts: tuple[tuple[str, float, float], ...] = ()

    def as_json(self) -> dict[str, float]:
        return {"low": round(self.low, 2), "high": round(self.high, 2)}


@dataclass(frozen=True)
class HostMemory:
    """The job's host RAM per phase against the machine's RAM.

    Attributes:
        phases: Each phase's band.
        pinned: The pinned share of the training step (layer offloading's copies).
        ram_gib: The machine's RAM (None: not known).
        windows: Whether the machine is Windows (its pinned cap applies).
        verdict: ``fits``, ``tight``, ``wont_fit``, or ``unknown`` without the RAM.
        notes: What is left out or assumed.
        levers: What lowers the host's share, when the host is the limit.
    """

    phases: dict[HostPhase, HostBand]
    pinned: HostBand
    ram_gib: float | None
    windows: bool
    verdict: HostVerdict
    notes: tuple[str, ...] = ()
    levers: tuple[str, ...] = field(default=())

    @property
    def peak_phase(self) -> HostPhase:
        return max(HOST_PHASES, key=lambda phase: self.phases[phase].high)

    def words(self) -> str | None:
        """The host's verdict in a sentence when the host is the limit or close to it (None:
        it fits, or the RAM is not known)."""
        if self.verdict not in ("tight", "wont_fit"):
            return None
        phase = self.peak_phase
        band = self.phases[phase]
        pinned = (
            f", {self.pinned.low:.1f}–{self.pinned.high:.1f} GiB of it pinned"
            if self.pinned.high > 0 and phase != "load"
            else ""
        )
        lever = f"; to lower it: {self.levers[0]}" if self.levers else ""
        return (
            f"host RAM: the {phase} phase needs {band.low:.1f}–{band.high:.1f} GiB{pinned} of "
            f"{self.ram_gib:.1f} GiB: {verdict_words(self.verdict)}{lever}"
        )

    def to_json(self) -> dict[str, object]:
        """``fit --json``'s ``host``."""
        return {
            "phases": {phase: band.as_json() for phase, band in self.phases.items()},
            "ram_gib": None if self.ram_gib is None else round(self.ram_gib, 2),
            "verdict": self.verdict,
            "peak_phase": self.peak_phase,
            "pinned_gib": self.pinned.as_json(),
            "windows": self.windows,
            "parts_gib": {
                phase: {name: [round(lo, 2), round(hi, 2)] for name, lo, hi in band.parts}
                for phase, band in self.phases.items()
            },
            "notes": list(self.notes),
            "levers": list(self.levers),
        }


def _band(parts: list[tuple[str, float, float]]) -> HostBand:
    kept = tuple((name, lo, hi) for name, lo, hi in parts if hi > 0.0)
    return HostBand(sum(p[1] for p in kept), sum(p[2] for p in kept), kept)


def _process_phases(
    process: ProcessView,
    presets: Presets,
    notes: list[str],
    media: Mapping[DatasetKey, MediaCount | None],
) -> tuple[dict[HostPhase, HostBand], HostBand]:
    facts = arch_facts(process, presets)
    family = presets.memory_of(facts)
    if family is None and facts is not None and facts.memory_by_name:
        family = presets.memory_of(facts, process.model.name_or_path)
    account = ProcessAccount(process, facts, family, presets, video=False)
    levers = presets.levers
    model, train = process.model, process.train
    full = account.full
    b_t = min(full, levers.quantized_bytes(model.qtype)) if account.quantized else full
    b_te = full
    quantize_te = model.quantize_te if "quantize_te" in model.present else model.quantize
    if quantize_te is True:
        b_te = min(b_te, levers.quantized_bytes(model.qtype_te))
    gib = 1.0 / GIB_BYTES
    t_params = account.p_t * BILLION * account.experts
    te_params = account.p_te * BILLION
    comfy = model.model_kwargs is not None and model.model_kwargs.use_comfy_weights is True
    t_read = t_params * (b_t if comfy else full) * gib
    te_read = te_params * full * gib
    base = ("process", *PROCESS_GIB)
    load = _band([base, ("models read", max(t_read, te_read), t_read + te_read)])

    _, o_te = offloaded_fractions(process, facts)
    rounding_low, rounding_high = PINNED_ROUNDING
    pinned_t = t_params * account.moved_share * b_t * gib
    te_freed = train.cache_text_embeddings is True or any(
        d.cache_text_embeddings is True for d in process.datasets
    )
    pinned_te = 0.0 if te_freed else te_params * o_te * b_te * gib
    pinned = _band(
        [
            ("pinned transformer layers", pinned_t * rounding_low, pinned_t * rounding_high),
            ("pinned text-encoder layers", pinned_te * rounding_low, pinned_te * rounding_high),
        ]
    )
    te_device_cpu = (model.te_device or "").strip().lower().startswith("cpu")
    parked = 0.0
    why = ""
    if not te_freed:
        if train.unload_text_encoder is True or te_device_cpu:
            parked, why = te_params * (1.0 - o_te) * b_te * gib, "text encoder on the CPU"
        elif model.low_vram is True:
            parked, why = te_params * (1.0 - o_te) * b_te * gib, "text encoder parked (low_vram)"
    trained: list[tuple[str, float, float]] = []
    if process.network is None and account.moved_share > 0:
        info = levers.optimizer(train.optimizer)
        state = info.state_bytes if info is not None else levers.unknown_optimizer_state_bytes
        moved = t_params * account.moved_share * gib
        ema = full if train.use_ema is True else 0.0
        held = moved * (full + state + ema)
        trained.append(("moved weights' gradients and optimizer state", held, held))
    latents = _latents_in_ram(process, facts, presets, full, media, notes)
    caching_parts = [base, *pinned.parts, latents]
    resident = t_params * (1.0 - account.moved_share) * b_t * gib
    parks = account.caching_parks_models
    encodes = any(d.caches_latents for d in process.datasets)
    if parks and (encodes or te_freed):
        # each cache is filled with its own model alone on the card (set_device_state_preset
        # 'cache_latents', then 'cache_text_encoder'): the transformer waits here
        caching_parts.append(("transformer parked while caching", resident, resident))
    elif model.low_vram is True:
        caching_parts.append(("transformer parked (low_vram)", resident, resident))
    if parks and encodes:  # and the text encoder while the latents are encoded, before freed
        te_held = te_params * b_te * gib * (1.0 if te_freed else 1.0 - o_te)
        caching_parts.append(("text encoder parked while caching", te_held, te_held))
    caching = _band(caching_parts)
    idle = 0.0
    if model.low_vram is True and account.experts > 1:  # the expert not in use waits on the CPU
        idle = t_params * (account.experts - 1) / account.experts * b_t * gib
    training = _band(
        [
            base,
            *pinned.parts,
            (why, parked, parked),
            ("idle expert (low_vram)", idle, idle),
            *trained,
            latents,
        ]
    )
    return {"load": load, "caching": caching, "training": training}, pinned


def latent_channels(facts: ArchFacts | None) -> tuple[int, bool]:
    """The channels of the arch's latent (its ``latent_channels`` in ``presets/archs.yaml``; a
    pixel-space arch keeps its 3 colour channels), and whether they are the arch's own (False:
    :data:`ASSUMED_LATENT_CHANNELS`)."""
    if facts is None:
        return ASSUMED_LATENT_CHANNELS, False
    if facts.spatial_compression == 1:
        return 3, True
    if facts.latent_channels is None:
        return ASSUMED_LATENT_CHANNELS, False
    return facts.latent_channels, True


def _latents_in_ram(
    process: ProcessView,
    facts: ArchFacts | None,
    presets: Presets,
    item_bytes: float,
    media: Mapping[DatasetKey, MediaCount | None],
    notes: list[str],
) -> tuple[str, float, float]:
    """The latents ``cache_latents`` keeps in RAM, over the datasets whose folder was counted
    (module doc); a note for each, and for each whose folder was not."""
    total = 0.0
    shape = Shape.of(facts, presets)
    spatial = (facts and facts.spatial_compression) or presets.unknown_arch.spatial_compression
    channels, known = latent_channels(facts)
    audio = facts is not None and facts.kind == "audio"
    for dataset in process.datasets:
        if dataset.cache_latents is not True:  # with _to_disk as well: on disk and in RAM
            continue
        count = None if audio else media.get((process.index, dataset.index))
        if count is None:
            notes.append(
                f"cache_latents keeps every latent of dataset {dataset.name} in RAM: that grows "
                "with the dataset, whose folder is not on this machine (not counted; "
                "with cache_latents off, cache_latents_to_disk keeps them on disk only)"
            )
            continue
        gib, words = _dataset_latents(dataset, count, shape, spatial, channels, item_bytes)
        total += gib
        assumed = "" if known else ", assumed: the arch's own is not known here"
        notes.append(
            f"cache_latents keeps every latent of dataset {dataset.name} in RAM: {words} "
            f"({channels} latent channels{assumed}, at 1/{spatial} of each side, "
            f"{item_bytes:g} bytes a value, each bucket about resolution² pixels): {gib:.2f} GiB "
            "in the caching and training phases (with cache_latents off, cache_latents_to_disk "
            "keeps them on disk only)"
        )
    return ("latents kept in RAM", total, total)


def _dataset_latents(
    dataset: DatasetView,
    count: MediaCount,
    shape: Shape,
    spatial: int,
    channels: int,
    item_bytes: float,
) -> tuple[float, str]:
    """One dataset's latents in RAM in GiB, and the count and sizes it rests on in words."""
    video = dataset.is_video
    frames = dataset_frames(dataset, shape) if video else 1
    clips = count.videos if video else 0
    copies = max(dataset.num_repeats or 1, 1)
    copies *= 2 if dataset.flip_x is True else 1
    copies *= 2 if dataset.flip_y is True else 1
    total = 0.0
    sizes: list[str] = []
    resolutions = dataset.resolution or ()
    for side in resolutions:
        pixel = channels * (side / spatial) ** 2 * item_bytes
        image, clip = pixel, pixel * shape.latent_frames(frames)
        total += copies * (count.images * image + clips * clip)
        each = f"{image / 2**20:.2f} MiB an image"
        if clips:
            each += f", {clip / 2**20:.1f} MiB a clip of {frames} frames"
        sizes.append(f"{each} at {side}²")
    found = " and ".join(
        [counted(count.images, "image")] * bool(count.images or not clips)
        + [counted(clips, "video")] * bool(clips)
    )
    times = []
    if copies > 1:
        times.append(f"{copies} copies each (num_repeats, flips)")
    if len(resolutions) > 1:
        times.append(f"once per resolution of {list(resolutions)}")
    extra = f", {', '.join(times)}" if times else ""
    return total / GIB_BYTES, f"{found} counted in {count.folder}{extra}; {'; '.join(sizes)}"


def host_memory(
    document: JobDocument,
    ram_gib: float | None,
    *,
    windows: bool = False,
    presets: Presets | None = None,
    changes: Sequence[Change] = (),
    media: Mapping[DatasetKey, MediaCount | None] | None = None,
) -> HostMemory:
    """Each phase's host RAM for ``document`` with ``changes`` (none: today's config) against
    ``ram_gib`` (module doc); ``media``: the folders of the datasets that keep their latents
    in RAM, as counted on this machine (None where a folder is not here)."""
    presets = presets or load_presets()
    notes: list[str] = []
    phases: dict[HostPhase, HostBand] = {}
    pinned = HostBand(0.0, 0.0)
    for process in view_after(document, changes).processes:
        found, pins = _process_phases(process, presets, notes, media or {})
        for phase in HOST_PHASES:
            if phase not in phases or found[phase].high > phases[phase].high:
                phases[phase] = found[phase]
        if pins.high > pinned.high:
            pinned = pins
    if not phases:
        empty = _band([("process", *PROCESS_GIB)])
        phases = {phase: empty for phase in HOST_PHASES}
    notes.append(
        "left out: DataLoader workers (a process each), the OS's file cache of the model files "
        "(reclaimable); the process's own share is an estimate, not a measurement; loading "
        "counts each model copied into RAM at train.dtype, and beyond the RAM it goes to swap "
        "or the page file (slow) before the kernel kills it"
    )
    verdict = _verdict(phases, pinned, ram_gib, windows)
    levers = _levers(phases, pinned) if verdict in ("tight", "wont_fit") else ()
    return HostMemory(phases, pinned, ram_gib, windows, verdict, tuple(notes), levers)


def _verdict(
    phases: dict[HostPhase, HostBand], pinned: HostBand, ram: float | None, windows: bool
) -> HostVerdict:
    if ram is None:
        return "unknown"
    peak = max(phases.values(), key=lambda band: band.high)
    cap = ram * WINDOWS_PINNED_SHARE if windows else None
    if peak.low > ram or (cap is not None and pinned.low > cap):
        return "wont_fit"
    if peak.high > ram * TIGHT_SHARE or (cap is not None and pinned.high > cap):
        return "tight"
    return "fits"


def _levers(phases: dict[HostPhase, HostBand], pinned: HostBand) -> tuple[str, ...]:
    """What lowers the host's share, by the phase that sets it."""
    found: list[str] = []
    if pinned.high > 0:
        found.append(
            "a lower model.layer_offloading_transformer_percent (or _text_encoder_percent): "
            "fewer pinned copies in RAM, more of the model on the card"
        )
        found.append(
            "a lower qtype (model.quantize): the pinned copies are stored at the qtype's bytes"
        )
    training = dict((name, hi) for name, _, hi in phases["training"].parts)
    if any(name.startswith("text encoder") for name in training):
        found.append(
            "train.cache_text_embeddings: true frees the text encoder after caching instead "
            "of keeping it in RAM"
        )
    load = phases["load"]
    if load.high >= max(phases["caching"].high, phases["training"].high):
        found.append(
            "a pre-quantized transformer (model_kwargs.use_comfy_weights where the arch has "
            "one) or more RAM (or a larger page file): loading reads each model at full "
            "precision"
        )
    return tuple(found)


def lowering_steps(
    document: JobDocument,
    ram_gib: float | None,
    candidates: Mapping[str, Sequence[Change]],
    *,
    windows: bool = False,
    presets: Presets | None = None,
    media: Mapping[DatasetKey, MediaCount | None] | None = None,
) -> tuple[str, ...]:
    """The ids of ``candidates`` (step id → the changes it makes alone) that lower the host's
    peak, weighed by this account before and after: a step counts only when the peak phase's
    high edge falls by a tenth of a GiB or more and no phase's high edge rises (layer
    offloading and ``low_vram`` move weights into RAM: they are never named)."""
    presets = presets or load_presets()
    today = host_memory(document, ram_gib, windows=windows, presets=presets, media=media)
    peak = today.peak_phase
    found: list[str] = []
    for step_id, changes in candidates.items():
        if not changes:
            continue
        after = host_memory(
            document, ram_gib, windows=windows, presets=presets, changes=changes, media=media
        )
        rises = any(
            after.phases[phase].high > today.phases[phase].high + 0.005 for phase in HOST_PHASES
        )
        lowered = after.phases[peak].high <= today.phases[peak].high - 0.1
        pinned_lowered = after.pinned.high <= today.pinned.high - 0.1
        if not rises and (lowered or (windows and pinned_lowered)):
            found.append(step_id)
    return tuple(found)
