"""What a memory family is: the modules built for their counts, the token grid of a measured point,
and the family itself."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Inputs = dict[str, Any]


@dataclass(frozen=True)
class Module:
    """A class built on the meta device for its parameter count."""

    library: str  # "diffusers" | "transformers"
    name: str  # the class; for transformers also the config class after a colon
    config: Mapping[str, Any]
    label: str  # what it is ("T5-XXL encoder")
    source: str = ""  # where the configuration comes from

    def describe(self) -> str:
        return f"{self.label}: {self.library} {self.name.split(':')[0]}" + (
            f" ({self.source})" if self.source else ""
        )


@dataclass(frozen=True)
class Grid:
    """The latent token grid of one measured point."""

    frames: int
    height: int
    width: int
    text: int

    @property
    def image_tokens(self) -> int:
        return self.frames * self.height * self.width


@dataclass(frozen=True)
class Family:
    """How to count and measure one memory family."""

    id: str
    transformer: Module
    text_encoders: tuple[Module, ...]
    vae: tuple[Module, ...]
    experts: int = 1
    text_tokens: int = 512
    text_tokens_source: str = ""
    # Values per text token of the embeddings a training step holds on the card beside the
    # blocks, where they are far wider than a block's input (None: no wider), and where the
    # toolkit's code says so
    text_embedding_width: int | None = None
    text_embedding_source: str = ""
    blocks: tuple[str, ...] = ()  # the ModuleList attributes that hold the stacked blocks
    reduce: Mapping[str, Any] = field(default_factory=dict)  # config overrides: one block each
    inputs: Callable[[Any, Mapping[str, Any], Grid], Inputs] | None = None
    video: bool = False
    unknown: str | None = None  # why the activations are not measured
    note: str | None = None
    card: Mapping[str, Any] | None = None  # counts from a model card where no class is built
    params_note: str | None = None  # what the counts leave out
    measured: Module | None = None  # the module whose blocks are measured, when not `transformer`
    adapted: str = ""  # which modules AI Toolkit adapts, and where its code says so
    adapted_blocks: tuple[str, ...] | None = None  # the block lists it adapts (None: all)
    fused: bool = False  # the toolkit's own class fuses the projections that read one tensor
    unet: bool = False  # a UNet: measured whole, per latent pixel
    real: str | None = None  # why fake tensors cannot measure the blocks: real ones, fewer tokens
    square: bool = False  # the class pads a non-square latent: measure square grids only
    prepare: Callable[[Any], None] | None = None  # the built model set to AI Toolkit's code path

    def width(self, config: Mapping[str, Any]) -> int:
        """The hidden width, from the full configuration (class defaults filled in)."""
        for key in ("hidden_size", "dim"):
            if key in config:
                return int(config[key])
        return int(config["num_attention_heads"]) * int(config["attention_head_dim"])
