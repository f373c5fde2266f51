"""The published measured peaks of ``tests/fixtures/measured_peaks.yaml``, run through the model.

Shared by ``tests/domain/rules/test_measured_peaks.py`` and ``bench/memory_accuracy.py``.
"""

from __future__ import annotations

import copy
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import yaml

from oom_wizard.rules.catalog import Presets, load_presets
from oom_wizard.rules.memory import (
    BAND_RATE,
    OVERHEADS,
    Band,
    JobMemory,
    Overheads,
    job_memory,
)
from oom_wizard.rules.modelkind import find_model_kind
from oom_wizard.rules.shape import arch_facts
from tests.support import corpus
from tests.support.plan_support import document

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "measured_peaks.yaml"
GPU_FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "gpu_peaks.yaml"
"""The H200 rows of ``../shared/gpu-measurements.md``, as AI Toolkit jobs."""
EXAMPLES: Path | None = corpus.EXAMPLES
"""AI Toolkit's example configs (``../shared/aitk-examples``, or under ``OOM_WIZARD_SHARED``)."""
TOLERANCE = 0.15
"""A point agrees when it lies within its band widened by this share on each side."""
SHARE = 0.15
"""A midpoint is close when the measured peak lies within this share of it."""

Setup = Literal["toolkit", "autocast"]
"""How a point's trainer runs its LoRA, read from that trainer's code (the fixtures'
``lora_setup``), and so which of memory.yaml's block figures the point is compared with:
``toolkit``, AI Toolkit's own (the LoRA in fp32, each adapted Linear's input cast to fp32 with no
autocast: an fp32 copy of the input per Linear; the figures the wizard uses, and the default);
``autocast``, the LoRA under bf16 autocast reading the base's own bf16 input (one bf16 tensor kept
per input the projections share): memory.yaml's ``autocast_*`` figures where the family has them,
AI Toolkit's where it has none."""
SETUPS: tuple[Setup, ...] = ("toolkit", "autocast")
Kind = Literal["allocated", "reserved", "used"]
"""What a published figure is: PyTorch's peak allocation (no allocator slack, no context), its
peak reservation (no context), or the process's memory as nvidia-smi shows it."""
GPU_SOURCE = "../shared/gpu-measurements.md"


_NO_MEMORY: Any = None


@dataclass(frozen=True)
class Point:
    """One published measurement and the band the model gives it."""

    id: str
    source: str
    arch: str
    settings: str
    measured_gib: float
    approximate: bool
    memory: JobMemory
    band: Band
    has_counts: bool
    has_activations: bool
    known_miss: str | None = None
    step_gib: float | None = None
    """A GPU row's step peak above the resident weights (its activations, measured)."""
    offloaded: float = 0.0
    """The share of the transformer's layers ``model.layer_offloading`` moves (0 without it)."""
    kind: Kind = "used"
    """What the figure is, and so what of the band it is compared with."""
    phase: str = "training"
    config: Mapping[str, Any] = field(default_factory=dict, repr=False)
    """The AI Toolkit job the point was run as (to run it again with other overheads)."""
    lora_setup: Setup = "toolkit"
    """The setup its trainer runs the LoRA in (:data:`Setup`)."""
    vae_on_card: bool = True

    @property
    def group(self) -> str:
        """The source the point is left out with: its address; the shared H200 rows by
        family (one session measured them, each family with its own classes)."""
        if self.source.startswith(GPU_SOURCE):
            return self.source.split(",")[0] + ")"
        return self.source

    @property
    def certainty(self) -> str:
        return self.memory.certainty

    @property
    def close(self) -> bool:
        """The measured peak lies within :data:`SHARE` of the band's midpoint."""
        return abs(self.band.mid - self.measured_gib) <= SHARE * self.band.mid

    @property
    def inside(self) -> bool:
        """The measured peak lies inside the band itself (no tolerance)."""
        return self.band.low <= self.measured_gib <= self.band.high

    @property
    def error(self) -> float:
        """(midpoint − measured) / measured."""
        return (self.band.mid - self.measured_gib) / self.measured_gib

    @property
    def within_band(self) -> bool:
        """The measured peak lies within the band widened by :data:`TOLERANCE`."""
        return (
            self.band.low * (1 - TOLERANCE) <= self.measured_gib <= self.band.high * (1 + TOLERANCE)
        )


def _merged(base: Any, over: Any) -> Any:
    if isinstance(base, Mapping) and isinstance(over, Mapping):
        out = dict(base)
        for key, value in over.items():
            out[key] = _merged(base.get(key), value) if key in base else copy.deepcopy(value)
        return out
    if isinstance(base, list) and isinstance(over, list):
        return [_merged(b, o) for b, o in zip(base, over, strict=False)] + over[len(base) :]
    return copy.deepcopy(over)


def job_tree(defaults: Mapping[str, Any], process: Mapping[str, Any]) -> dict[str, Any]:
    """An AI Toolkit job with one ``sd_trainer`` process: ``defaults`` with ``process`` over."""
    merged = _merged(defaults, process)
    return {
        "job": "extension",
        "config": {"name": "measured", "process": [{"type": "sd_trainer", **merged}]},
    }


def setup_of(raw: Mapping[str, Any]) -> Setup:
    """A fixture entry's ``lora_setup`` (``{setup, source}``; AI Toolkit's when it has none).
    A setup is read from the trainer's code, so it comes with the source it was read from."""
    found = raw.get("lora_setup")
    if found is None:
        return "toolkit"
    setup, source = found.get("setup"), found.get("source")
    if setup not in SETUPS or not str(source or "").strip():
        choices = ", ".join(SETUPS)
        raise ValueError(f"{raw['id']}: lora_setup needs a setup ({choices}) and a source")
    return setup  # type: ignore[no-any-return]


def families_in(setup: Setup, presets: Presets) -> Any:
    """The family lookup a point in ``setup`` is compared with (None: the presets' own)."""
    return autocast_setup(presets) if setup == "autocast" else None


def autocast_setup(presets: Presets) -> Any:
    """A family lookup with each family's figures in the autocast setup (the LoRA under bf16
    autocast, its input kept in bf16 and shared with the base; SDXL's LoRA on the attention
    blocks' Linears, as the shared H200 rows have it): memory.yaml's ``autocast_*`` block
    figures and the UNet's ``gpu_setup``, AI Toolkit's where a family has none. AI Toolkit
    itself casts the LoRA's input to fp32 (the figures the wizard uses), so a point taken in
    that setup is checked against the same measurement in its own setup."""

    def lookup(facts: Any) -> Any:
        family = presets.memory_of(facts)
        if family is None:
            return None
        update: dict[str, Any] = {}
        if family.activations is not None:
            blocks = tuple(
                block.model_copy(
                    update={
                        "saved_bytes_per_token": block.autocast_saved_bytes_per_token
                        or block.saved_bytes_per_token,
                        "checkpointed_peak_bytes_per_token": (
                            block.autocast_checkpointed_peak_bytes_per_token
                            or block.checkpointed_peak_bytes_per_token
                        ),
                    }
                )
                for block in family.activations.blocks
            )
            update["activations"] = family.activations.model_copy(update={"blocks": blocks})
        if family.unet is not None and family.unet.gpu_setup is not None:
            networks = {**family.unet.networks, "lora": family.unet.gpu_setup}
            update["unet"] = family.unet.model_copy(update={"networks": networks})
        return family.model_copy(update=update)

    return lookup


def _offloaded(process: Mapping[str, Any]) -> float:
    """The transformer's layer-offloading share a point's process sets (AI Toolkit's default
    percent, 1.0, when it only turns offloading on)."""
    model = process.get("model") or {}
    if model.get("layer_offloading") is not True:
        return 0.0
    return float(model.get("layer_offloading_transformer_percent", 1.0))


def points(
    presets: Presets | None = None,
    fixture: Path = FIXTURE,
    *,
    overheads: Overheads = OVERHEADS,
) -> list[Point]:
    """Every point of the fixture with its band, in its trainer's LoRA setup (a GPU row measured
    without a VAE on the card has the VAE's bytes taken off its band; a figure published as
    PyTorch's allocation or reservation is compared with the band less what it does not hold)."""
    presets = presets or load_presets()
    data = yaml.safe_load(fixture.read_text(encoding="utf-8"))
    found = []
    for raw in data["points"]:
        config = job_tree(data["defaults"], raw["process"])
        process = document(config).view().processes[0]
        family = presets.memory_of(arch_facts(process, presets))
        point = Point(
            id=raw["id"],
            source=raw["source"],
            arch=raw["arch"],
            settings=raw["settings"],
            measured_gib=float(raw["measured_gib"]),
            approximate=bool(raw.get("approximate", False)),
            memory=_NO_MEMORY,
            band=Band(0.0, 0.0),
            has_counts=family is not None,
            has_activations=family is not None and family.activations is not None,
            known_miss=raw.get("known_miss"),
            offloaded=_offloaded(raw["process"]),
            step_gib=raw.get("step_gib"),
            kind=raw.get("kind", "used"),
            phase=raw.get("phase", "training"),
            config=config,
            lora_setup=setup_of(raw),
            vae_on_card=raw.get("vae_on_card", True) is not False,
        )
        found.append(evaluate(point, presets, overheads))
    return found


def evaluate(point: Point, presets: Presets, overheads: Overheads = OVERHEADS) -> Point:
    """``point`` with the model's memory and band under ``overheads``."""
    families = families_in(point.lora_setup, presets)
    job = document(dict(point.config))
    memory = job_memory(
        job,
        [],
        find_model_kind(job.view().primary).kind or "image",  # a clip's frames count
        presets=presets,
        families=families,
        overheads=overheads,
    )
    band = memory.phases[point.phase]  # type: ignore[index]
    assert band is not None, point.id
    parts = memory.parts[point.phase]  # type: ignore[index]
    off = 0.0 if point.vae_on_card else parts.vae
    if point.kind in ("reserved", "allocated"):
        off += parts.context
    if point.kind == "allocated":
        off += parts.slack
    return replace(point, memory=memory, band=Band(band.low - off, band.high - off))


# --------------------------------------------------------------------------- held out


@dataclass(frozen=True)
class _Terms:
    """A point's figures as the refit sees them (GiB)."""

    measured: float
    fixed: float
    varying: float
    """The activations without the items' own cost, and the VAE's pass."""
    in_flight: float
    items: int
    slack: bool
    context: float
    gpu: bool
    key: str


def _terms_of(point: Point, overheads: Overheads) -> _Terms:
    parts = point.memory.parts[point.phase]  # type: ignore[index]
    fixed = parts.weights - parts.in_flight - (0.0 if point.vae_on_card else parts.vae)
    train = dict(point.config["config"]["process"][0].get("train") or {})
    train.pop("batch_size", None)
    process = {**point.config["config"]["process"][0], "train": train}
    return _Terms(
        measured=point.measured_gib,
        fixed=fixed,
        varying=parts.activations - parts.items * overheads.item_gib + parts.vae_pass,
        in_flight=parts.in_flight,
        items=parts.items,
        slack=point.kind != "allocated",
        context=parts.context if point.kind == "used" else 0.0,
        gpu=point.source.startswith(GPU_SOURCE),
        key=point.group + repr(sorted(process.items(), key=lambda kv: kv[0])),
    )


def refit(found: Sequence[Point], base: Overheads = OVERHEADS) -> Overheads:
    """The overheads refitted on ``found`` (each evaluated with ``base``):

    - each batch item's own cost from the differences within one source between runs that
      differ only in the batch size (a trainer's own extras cancel out there);
    - the allocator's slack (a share of the activations, the VAE's pass and the layers in
      flight) by least squares through 0 on the shared GPU rows among ``found``, the only
      points measured the way AI Toolkit trains;
    - the context (measured) and the workspaces (the libraries' sizes) are not refitted, nor
      the bands' widths (:func:`class_bands` makes those from held-out errors).

    Each stays at or above 0; a term with nothing to fit on keeps ``base``'s value."""
    terms = [_terms_of(p, base) for p in found if p.phase == "training"]
    item, k = base.item_gib, base.slack
    for _ in range(3):
        ones = [t for t in terms if t.items == 1]
        num = den = 0.0
        for t in terms:
            for one in (o for o in ones if t.items > 1 and o.key == t.key):
                gain = 1.0 + (k if t.slack else 0.0)
                dn = (t.items - one.items) * gain
                dy = (t.measured - one.measured) - (t.varying - one.varying) * gain
                num += dy * dn
                den += dn * dn
        if den > 0.0:
            item = max(num / den, 0.0)
        rows = [t for t in terms if t.gpu]
        xs = [t.varying + t.items * item + t.in_flight for t in rows]
        ys = [
            t.measured - t.fixed - (t.varying + t.items * item) - base.workspace_gib - t.context
            for t in rows
        ]
        sxx = sum(x * x for x in xs)
        if sxx > 0.0:
            k = max(sum(x * y for x, y in zip(xs, ys, strict=True)) / sxx, 0.0)
    return replace(base, slack=k, item_gib=item)


NO_WIDTH: Mapping[Any, tuple[float, float]] = {
    "gpu": (0.0, 0.0),
    "cpu": (0.0, 0.0),
    "stand_in": (0.0, 0.0),
}
"""Every class's band of zero width: the band is then the model's figure itself."""


def class_bands(errors: Sequence[tuple[str, float]], rate: float = BAND_RATE) -> dict[Any, Any]:
    """Each certainty class's band around the figure (± a share of it) from its points'
    held-out errors (``(class, measured / figure − 1)``): the ``rate`` quantile of their size,
    so that a band holds that share of them. A class with fewer than 3 points takes every
    point's; a stand-in has none of its own: the CPU class's width doubled."""
    out: dict[str, tuple[float, float]] = {}
    for certainty in ("gpu", "cpu"):
        found = sorted(abs(e) for c, e in errors if c == certainty)
        if len(found) < 3:
            found = sorted(abs(e) for _c, e in errors)
        width = statistics.quantiles(found, n=100, method="inclusive")[round(rate * 100) - 1]
        out[certainty] = (-round(width, 3), round(width, 3))
    out["stand_in"] = (2 * out["cpu"][0], 2 * out["cpu"][1])
    return out


@dataclass(frozen=True)
class HeldOut:
    """Every point held out (in the order given), and each one's error."""

    points: list[Point]
    errors: list[tuple[str, float]]
    """``(certainty class, measured / the held-out figure − 1)`` for each point."""


def held_out_errors(found: Sequence[Point], presets: Presets | None = None) -> HeldOut:
    """Every point, and its error, as the model gives it when its source's points are left
    out of every refit (leave-one-source-out), in ``found``'s order: its figure from the
    overheads refitted without them, its band's width from the held-out errors of the other
    sources' points of its class."""
    presets = presets or load_presets()
    figure: dict[str, Point] = {}
    for group in dict.fromkeys(p.group for p in found):
        fitted = replace(refit([p for p in found if p.group != group]), band=NO_WIDTH)
        for p in found:
            if p.group == group:
                figure[p.id] = evaluate(p, presets, fitted)
    errors = {p.id: (p.certainty, p.measured_gib / p.band.low - 1.0) for p in figure.values()}
    out: dict[str, Point] = {}
    for group in dict.fromkeys(p.group for p in found):
        widths = class_bands([errors[p.id] for p in found if p.group != group])
        for p in found:
            if p.group == group:
                held = figure[p.id]
                low, high = widths[held.certainty]
                mid = held.band.low
                out[p.id] = replace(held, band=Band(mid * (1 + low), mid * (1 + high)))
    return HeldOut([out[p.id] for p in found], [errors[p.id] for p in found])


@dataclass(frozen=True)
class Delta:
    """A published difference between two runs, and the model's difference of their bands."""

    id: str
    source: str
    settings: str
    measured_gib: float
    low: float
    """The difference of the bands' low edges (the model's least)."""
    high: float
    """The difference of the high edges (the model's most)."""
    lora_setup: Setup = "toolkit"
    kind: str = "image"
    """The model kind the jobs are estimated as (``video`` counts frames)."""
    phase: str = "training"
    configs: tuple[Mapping[str, Any], Mapping[str, Any]] = field(default=({}, {}), repr=False)
    """The two AI Toolkit jobs (``from``, ``to``), to compare them again in another setup."""

    @property
    def mid(self) -> float:
        return (self.low + self.high) / 2.0

    @property
    def error(self) -> float:
        """(the midpoints' difference − measured) / measured."""
        return (self.mid - self.measured_gib) / self.measured_gib

    @property
    def within_band(self) -> bool:
        """The measured difference lies within the model's, widened by :data:`TOLERANCE` of
        each edge's size (a difference may be negative: the second run held less)."""
        low, high = sorted((self.low, self.high))
        return low - TOLERANCE * abs(low) <= self.measured_gib <= high + TOLERANCE * abs(high)


def deltas(presets: Presets | None = None) -> list[Delta]:
    """Every measured difference of the fixture with the model's, in its trainer's setup."""
    presets = presets or load_presets()
    data = yaml.safe_load(FIXTURE.read_text(encoding="utf-8"))
    found = []
    for raw in data.get("deltas", ()):
        delta = Delta(
            id=raw["id"],
            source=raw["source"],
            settings=raw["settings"],
            measured_gib=float(raw["measured_delta_gib"]),
            low=0.0,
            high=0.0,
            lora_setup=setup_of(raw),
            kind=raw.get("kind", "image"),
            phase=raw.get("phase", "training"),
            configs=(
                job_tree(data["defaults"], raw["from"]),
                job_tree(data["defaults"], raw["to"]),
            ),
        )
        found.append(evaluate_delta(delta, presets))
    return found


def evaluate_delta(delta: Delta, presets: Presets) -> Delta:
    """``delta`` with the model's difference of the two jobs' bands in ``delta.lora_setup``."""
    families = families_in(delta.lora_setup, presets)
    bands = []
    for config in delta.configs:
        memory = job_memory(
            document(dict(config)), [], delta.kind, presets=presets, families=families
        )
        band = memory.phases[delta.phase]  # type: ignore[index]
        assert band is not None, delta.id
        bands.append(band)
    before, after = bands
    return replace(delta, low=after.low - before.low, high=after.high - before.high)


def example_card(path: Path) -> float | None:
    """The card in an AI Toolkit example config's name (``..._24gb.yaml``, ``..._48.yaml``)."""
    match = re.search(r"_(\d+)(?:gb)?\.ya?ml$", path.name)
    return float(match.group(1)) if match else None
