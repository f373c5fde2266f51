"""The one rule for a config's model kind (image or video), for every command and the app.

The arch's kind first (an edit arch counts as image, an audio arch as an image model without
frames, said in a note), then the legacy ``is_*`` flags (through the arch they name), then any
dataset or sample with more than one frame, then the model path (``VIDEO_PATH_HINT``). When
nothing says, the kind is unknown (``kind`` None) and the caller assumes ``image`` and says so
(:data:`ASSUMED_KIND`). The user's answer wins over all of this.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from oom_wizard.rules.catalog import ArchFacts, load_presets
from oom_wizard.vocabulary import ModelKind

if TYPE_CHECKING:
    from oom_wizard.formats.view import ProcessView  # a type only: no config, no config models

VIDEO_PATH_HINT: Final = re.compile(
    r"(?<![a-z])(?:wan\d|ltx|hunyuan[\W_]?video|mochi|cogvideo|minimax|skyreels|video|[ti]2v)",
    re.IGNORECASE,
)
"""Model repositories or files whose name says video: the last hint for the model kind."""

ASSUMED_KIND: Final[ModelKind] = "image"
"""The kind used when nothing in the config says (and nobody answered): most LoRAs are image
LoRAs, and the image ladder never proposes a frame change that a video job would need."""


@dataclass(frozen=True)
class KindFinding:
    """The model kind found in the config, where it came from, and what to say about it.

    Attributes:
        kind: ``image`` or ``video``; None when nothing in the config says.
        arch: The arch the config names (or the one its legacy flags name).
        label: The arch's human name, when it is one the presets know.
        source: Where the kind comes from, in words ("the arch flux (FLUX.1)").
        notes: Anything the user should know about it (an unknown or audio arch).
    """

    kind: ModelKind | None
    arch: str | None
    label: str | None
    source: str
    notes: tuple[str, ...] = ()

    @property
    def settled(self) -> ModelKind:
        """The kind to plan for: the one found, else :data:`ASSUMED_KIND`."""
        return self.kind if self.kind is not None else ASSUMED_KIND


def find_model_kind(process: ProcessView | None) -> KindFinding:
    """The model kind of a training process (the config's first), and where it comes from."""
    if process is None:
        return KindFinding(None, None, None, "no config: the model kind is unknown")
    model = process.model
    facts = load_presets().arch_from_model(model.arch_keys())
    arch = model.arch or (facts.id if facts is not None else None)
    if facts is not None:
        return _kind_of_arch(facts, arch)
    notes = (f"The arch '{model.arch}' is not one this wizard knows.",) if model.arch else ()
    if _frames_above_one(process):
        return KindFinding("video", arch, None, "frames above 1 in the config", notes)
    path = model.name_or_path
    if path:
        kind: ModelKind = "video" if VIDEO_PATH_HINT.search(path) else "image"
        return KindFinding(kind, arch, None, f"the model path {path}", notes)
    return KindFinding(None, arch, None, "nothing in the config says", notes)


def _kind_of_arch(facts: ArchFacts, arch: str | None) -> KindFinding:
    source = f"the arch {arch} ({facts.label})"
    if facts.kind == "audio":
        note = (
            f"{facts.label} is an audio model: the roll-back covers image and video models; "
            "it is treated here as an image model without frames."
        )
        return KindFinding("image", arch, facts.label, source, (note,))
    return KindFinding(facts.ladder_kind, arch, facts.label, source)


def _frames_above_one(process: ProcessView) -> bool:
    """Any dataset, sample section or single sample with more than one frame."""
    if any(dataset.is_video for dataset in process.datasets):
        return True
    for sample in (process.sample, process.first_sample):
        if sample is None:
            continue
        if (sample.num_frames or 1) > 1:
            return True
        if any(o.field == "num_frames" and o.value > 1 for o in sample.overrides()):
            return True
    return False
