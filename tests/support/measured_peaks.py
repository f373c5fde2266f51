"""The published measured peaks of ``tests/fixtures/measured_peaks.yaml``, run through the model.

Shared by ``tests/domain/rules/test_measured_peaks.py`` and ``bench/memory_accuracy.py``.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from oom_wizard.rules.catalog import Presets, load_presets
from oom_wizard.rules.memory import Band, JobMemory, job_memory
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


def gpu_setup(presets: Presets) -> Any:
    """A family lookup with each family's figures in the setup of the shared H200 rows (the
    LoRA under bf16 autocast, its input kept in bf16; SDXL's LoRA on the attention blocks'
    Linears): memory.yaml's ``autocast_*`` block figures and the UNet's ``gpu_setup``. AI
    Toolkit itself casts the LoRA's input to fp32 (the figures the wizard uses), so the rows
    are checked against the same measurement in their own setup."""

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
    presets: Presets | None = None, fixture: Path = FIXTURE, *, rows_setup: bool = False
) -> list[Point]:
    """Every point of the fixture with its band (a GPU row measured without a VAE on the card
    has the VAE's bytes taken off its band)."""
    presets = presets or load_presets()
    data = yaml.safe_load(fixture.read_text(encoding="utf-8"))
    found = []
    for raw in data["points"]:
        config = job_tree(data["defaults"], raw["process"])
        doc = document(config)
        families = gpu_setup(presets) if rows_setup else None
        memory = job_memory(doc, [], "image", presets=presets, families=families)
        phase = raw.get("phase", "training")
        band = memory.phases[phase]
        assert band is not None, raw["id"]
        if raw.get("vae_on_card", True) is False:
            vae = memory.parts[phase].vae
            band = Band(band.low - vae, band.high - vae)
        process = doc.view().processes[0]
        family = presets.memory_of(arch_facts(process, presets))
        found.append(
            Point(
                id=raw["id"],
                source=raw["source"],
                arch=raw["arch"],
                settings=raw["settings"],
                measured_gib=float(raw["measured_gib"]),
                approximate=bool(raw.get("approximate", False)),
                memory=memory,
                band=band,
                has_counts=family is not None,
                has_activations=family is not None and family.activations is not None,
                known_miss=raw.get("known_miss"),
                offloaded=_offloaded(raw["process"]),
                step_gib=raw.get("step_gib"),
            )
        )
    return found


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
    """Every measured difference of the fixture with the model's."""
    presets = presets or load_presets()
    data = yaml.safe_load(FIXTURE.read_text(encoding="utf-8"))
    found = []
    for raw in data.get("deltas", ()):
        phase, kind = raw.get("phase", "training"), raw.get("kind", "image")
        bands = []
        for side in ("from", "to"):
            config = job_tree(data["defaults"], raw[side])
            band = job_memory(document(config), [], kind, presets=presets).phases[phase]
            assert band is not None, raw["id"]
            bands.append(band)
        before, after = bands
        found.append(
            Delta(
                id=raw["id"],
                source=raw["source"],
                settings=raw["settings"],
                measured_gib=float(raw["measured_delta_gib"]),
                low=after.low - before.low,
                high=after.high - before.high,
            )
        )
    return found


def example_card(path: Path) -> float | None:
    """The card in an AI Toolkit example config's name (``..._24gb.yaml``, ``..._48.yaml``)."""
    match = re.search(r"_(\d+)(?:gb)?\.ya?ml$", path.name)
    return float(match.group(1)) if match else None
