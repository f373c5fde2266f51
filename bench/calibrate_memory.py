"""Measure parameter counts, training activations and VAE passes from the models' own code.

This is the one script that writes ``presets/memory.yaml``. For each memory family it

* counts the parameters of the transformer (or UNet), the text encoder(s) and the VAE exactly,
  by building diffusers' and transformers' classes with the published configuration on
  PyTorch's ``meta`` device (no weights are read or downloaded);
* measures the training step's activations with AI Toolkit's adapters in place, as
  ``toolkit/lora_special.py`` and ``toolkit/network_mixins.py`` build them (``TOOLKIT_ADAPTERS``
  says which modules, per family, and where the toolkit's code says so): an fp32 rank-16
  down/up pair beside every adapted Linear (and 1x1 convolution; 3x3 ones too for LoCon), the
  module's input cast to fp32 for it, no autocast. Each adapted module therefore keeps an fp32
  copy of its input for the adapter's weight gradient, which frozen blocks do not;
  - a transformer at its real width with ONE block of each kind, forward and backward of one
    block at several token counts, with and without checkpointing, also frozen, with LoKr, and
    (for families with shared GPU rows) in the rows' own setup: the adapter under bf16 autocast
    with CUDA's float32 ops (``GPU_ROWS``): bytes per token per block;
  - a UNet whole, at 512 and 1024 px: a fixed part and a slope per latent pixel, for LoRA (and
    LoCon for the families ``LOCON_UNETS`` names), with and without diffusers' gradient
    checkpointing, and (SDXL) in the GPU rows' setup;
* measures each VAE's decode and encode peak (no gradients), images by pixel, a frame-by-frame
  video VAE by frame pixel and clip pixel, times its architecture's GPU factor (the shared GPU
  rows of a reference VAE over the same measurement: what cuDNN allocates beside the tensors);
* writes the figures, with the package versions, into ``presets/memory.yaml``.

Everything runs under PyTorch's FakeTensorMode on the CPU: the real model code with the real
kernels' shape and dtype rules (the CPU flash attention's meta functions) but no values, so a
6144-wide block costs neither RAM nor minutes on a shared 2-core machine. The bytes saved for
backward come from ``torch.autograd.graph.saved_tensors_hooks`` (each storage once; parameter
storages and the inputs every block shares left out); the transient peak from a dispatch mode
that follows every storage the region allocates. FLUX.1's double block gives 126.5 and 379.4
MiB at 1,024 and 4,096 image tokens + 512 text tokens frozen, as a real bf16 CPU run did.

Two families need values, not shapes (``Family.real`` says why): HiDream-I1 routes each token to
its experts by the gate's scores, and Lumina 2 reads its text mask's values. Their blocks run with
real bf16 tensors on the CPU instead, the same hooks counting, at small token counts (a block of
each kind built once at its real width, its frozen weights shared by the adapters' copies, fixed
seeds): the bytes are linear in the tokens with a flash kernel, so the slope between two small
grids is the figure and a third grid checks it. A bf16 matrix product on a CPU without bf16
units takes PyTorch's scalar path, so each is computed in fp32 and rounded to bf16 once
(``_fp32_matmuls``: the same output tensor, nothing else counted); a family then takes minutes.
The method checks out: ``--check --real zimage`` (Z-Image's blocks with real tensors at 256 and
512 image tokens) agrees with its fake-tensor figures within 2 %, and HiDream's figures are the
same to the byte from 144/256/400 and 256/400/576 image tokens, whichever experts the gate chose.

Usage (torch, diffusers and transformers come from the ``measure`` extra, in a venv of their own;
each family is written as soon as it is measured, so a run can be stopped and resumed by naming
the families left)::

    python bench/calibrate_memory.py                    # every family, everything (hours)
    python bench/calibrate_memory.py flux wan21_14b     # some families (or arch ids: krea2)
    python bench/calibrate_memory.py --kind activations sdxl   # blocks or UNet only
    python bench/calibrate_memory.py --kind vae flux    # the VAE passes only
    python bench/calibrate_memory.py --kind params      # parameter counts only (seconds)
    python bench/calibrate_memory.py --check flux       # measure, compare, exit 1 if they differ
    python bench/calibrate_memory.py --table            # the markdown table of memory.yaml
    python bench/calibrate_memory.py --sync-archs       # archs.yaml's counts from memory.yaml

The figures are deterministic: fixed seeds, fixed shapes, sorted output.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import platform
import sys
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
MEMORY_YAML = ROOT / "presets" / "memory.yaml"
ARCHS_YAML = ROOT / "presets" / "archs.yaml"

# Token counts of one measurement: two image-token counts for the slope, a third to check the fit,
# and a second text-token count for the text slope. Small, so that a family takes seconds.
IMAGE_GRIDS = ((32, 32), (32, 64), (64, 64))  # latent tokens (after patching): 1024, 2048, 4096
FORMAT = 2  # memory.yaml's format (catalog.MemoryFile)
BYTES_TOLERANCE = 0.02  # --check: relative difference accepted (allocation sizes round)

Inputs = dict[str, Any]
# The top-level inputs a LoRA's gradient flows through (latents and text embeddings); the rest
# (timesteps, positions, masks) do not need one.
GRAD_INPUTS = (
    "hidden_states",
    "encoder_hidden_states",
    "audio_hidden_states",
    "x",
    "cap_feats",
    "encoder_hidden_states_t5",
    "encoder_hidden_states_llama3",
    "inputs_embeds",
)


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


# --- published configurations ---------------------------------------------------------------
# Text encoders (transformers classes; the values are those of the published config.json).

T5_XXL = Module(
    "transformers",
    "T5EncoderModel:T5Config",
    {
        "d_model": 4096,
        "d_ff": 10240,
        "d_kv": 64,
        "num_heads": 64,
        "num_layers": 24,
        "vocab_size": 32128,
        "feed_forward_proj": "gated-gelu",
    },
    "T5-XXL encoder",
    "google/t5-v1_1-xxl config",
)
UMT5_XXL = Module(
    "transformers",
    "UMT5EncoderModel:UMT5Config",
    {
        "d_model": 4096,
        "d_ff": 10240,
        "d_kv": 64,
        "num_heads": 64,
        "num_layers": 24,
        "vocab_size": 256384,
        "feed_forward_proj": "gated-gelu",
    },
    "umT5-XXL encoder",
    "google/umt5-xxl config",
)
CLIP_L = Module(
    "transformers",
    "CLIPTextModel:CLIPTextConfig",
    {
        "hidden_size": 768,
        "intermediate_size": 3072,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "projection_dim": 768,
        "vocab_size": 49408,
        "max_position_embeddings": 77,
    },
    "CLIP-L text",
    "openai/clip-vit-large-patch14 config",
)
CLIP_G = Module(
    "transformers",
    "CLIPTextModelWithProjection:CLIPTextConfig",
    {
        "hidden_size": 1280,
        "intermediate_size": 5120,
        "num_hidden_layers": 32,
        "num_attention_heads": 20,
        "projection_dim": 1280,
        "vocab_size": 49408,
        "max_position_embeddings": 77,
        "hidden_act": "gelu",
    },
    "OpenCLIP-bigG text",
    "SDXL text_encoder_2 config",
)
CLIP_H = Module(
    "transformers",
    "CLIPTextModel:CLIPTextConfig",
    {
        "hidden_size": 1024,
        "intermediate_size": 4096,
        "num_hidden_layers": 23,
        "num_attention_heads": 16,
        "projection_dim": 512,
        "vocab_size": 49408,
        "max_position_embeddings": 77,
        "hidden_act": "gelu",
    },
    "OpenCLIP-H text",
    "stabilityai/stable-diffusion-2-1 text_encoder config",
)


def _qwen3(label: str, hidden: int, inter: int, layers: int, heads: int, tied: bool) -> Module:
    return Module(
        "transformers",
        "Qwen3ForCausalLM:Qwen3Config",
        {
            "hidden_size": hidden,
            "intermediate_size": inter,
            "num_hidden_layers": layers,
            "num_attention_heads": heads,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "vocab_size": 151936,
            "tie_word_embeddings": tied,
        },
        label,
        f"Qwen/{label} config",
    )


QWEN3_06B = _qwen3("Qwen3-0.6B-Base", 1024, 3072, 28, 16, True)
QWEN3_4B = _qwen3("Qwen3-4B", 2560, 9728, 36, 32, True)
QWEN3_8B = _qwen3("Qwen3-8B", 4096, 12288, 36, 32, False)


def _qwen3_vl(
    label: str,
    hidden: int,
    inter: int,
    layers: int,
    heads: int,
    tied: bool,
    vision: Mapping[str, Any],
) -> Module:
    return Module(
        "transformers",
        "Qwen3VLForConditionalGeneration:Qwen3VLConfig",
        {
            "text_config": {
                "hidden_size": hidden,
                "intermediate_size": inter,
                "num_hidden_layers": layers,
                "num_attention_heads": heads,
                "num_key_value_heads": 8,
                "head_dim": 128,
                "vocab_size": 151936,
            },
            "vision_config": {**vision, "out_hidden_size": hidden},
            "tie_word_embeddings": tied,
        },
        label,
        f"Qwen/{label} config",
    )


_VL_VISION_SMALL = {
    "depth": 24,
    "hidden_size": 1024,
    "intermediate_size": 4096,
    "num_heads": 16,
    "deepstack_visual_indexes": [5, 11, 17],
}
_VL_VISION_LARGE = {
    "depth": 27,
    "hidden_size": 1152,
    "intermediate_size": 4304,
    "num_heads": 16,
    "deepstack_visual_indexes": [8, 16, 24],
}
QWEN3_VL_4B = _qwen3_vl("Qwen3-VL-4B-Instruct", 2560, 9728, 36, 32, True, _VL_VISION_SMALL)
QWEN3_VL_8B = _qwen3_vl("Qwen3-VL-8B-Instruct", 4096, 12288, 36, 32, False, _VL_VISION_LARGE)
QWEN3_VL_32B = _qwen3_vl("Qwen3-VL-32B-Instruct", 5120, 25600, 64, 64, False, _VL_VISION_LARGE)
QWEN25_VL_7B = Module(
    "transformers",
    "Qwen2_5_VLForConditionalGeneration:Qwen2_5_VLConfig",
    {
        "text_config": {
            "hidden_size": 3584,
            "intermediate_size": 18944,
            "num_hidden_layers": 28,
            "num_attention_heads": 28,
            "num_key_value_heads": 4,
            "vocab_size": 152064,
        },
        "vision_config": {
            "depth": 32,
            "hidden_size": 1280,
            "intermediate_size": 3420,
            "num_heads": 16,
            "out_hidden_size": 3584,
        },
        "tie_word_embeddings": False,
    },
    "Qwen2.5-VL-7B-Instruct",
    "Qwen/Qwen2.5-VL-7B-Instruct config",
)
MISTRAL_SMALL_31 = Module(
    "transformers",
    "Mistral3ForConditionalGeneration:Mistral3Config",
    {
        "text_config": {
            "model_type": "mistral",
            "hidden_size": 5120,
            "intermediate_size": 32768,
            "num_hidden_layers": 40,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "vocab_size": 131072,
        },
        "vision_config": {
            "model_type": "pixtral",
            "hidden_size": 1024,
            "intermediate_size": 4096,
            "num_hidden_layers": 24,
            "num_attention_heads": 16,
            "patch_size": 14,
            "image_size": 1540,
        },
        "spatial_merge_size": 2,
        "tie_word_embeddings": False,
    },
    "Mistral-Small-3.1-24B",
    "mistralai/Mistral-Small-3.1-24B-Instruct-2503 config",
)
GEMMA2_2B = Module(
    "transformers",
    "Gemma2Model:Gemma2Config",
    {
        "hidden_size": 2304,
        "intermediate_size": 9216,
        "num_hidden_layers": 26,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "vocab_size": 256000,
    },
    "Gemma-2-2B",
    "google/gemma-2-2b config",
)
GEMMA3_12B = Module(
    "transformers",
    "Gemma3ForConditionalGeneration:Gemma3Config",
    {
        "text_config": {
            "hidden_size": 3840,
            "intermediate_size": 15360,
            "num_hidden_layers": 48,
            "num_attention_heads": 16,
            "num_key_value_heads": 8,
            "head_dim": 256,
            "vocab_size": 262208,
        },
        "vision_config": {
            "hidden_size": 1152,
            "intermediate_size": 4304,
            "num_hidden_layers": 27,
            "num_attention_heads": 16,
            "image_size": 896,
            "patch_size": 14,
        },
    },
    "Gemma-3-12B",
    "google/gemma-3-12b-it config",
)
LLAMA31_8B = Module(
    "transformers",
    "LlamaForCausalLM:LlamaConfig",
    {
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
    },
    "Llama-3.1-8B-Instruct",
    "meta-llama/Llama-3.1-8B-Instruct config",
)
SMOLLM3_3B = Module(
    "transformers",
    "SmolLM3ForCausalLM:SmolLM3Config",
    {
        "hidden_size": 2048,
        "intermediate_size": 11008,
        "num_hidden_layers": 36,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "vocab_size": 128256,
        "tie_word_embeddings": True,
    },
    "SmolLM3-3B",
    "HuggingFaceTB/SmolLM3-3B config (no tie_word_embeddings key: SmolLM3Config's default, "
    "tied: its two safetensors files hold 6.15 GB, about 3.075 B bf16 weights)",
)

# VAEs (diffusers classes)
VAE_FLUX = Module(
    "diffusers",
    "AutoencoderKL",
    {
        "in_channels": 3,
        "out_channels": 3,
        "latent_channels": 16,
        "block_out_channels": [128, 256, 512, 512],
        "down_block_types": ["DownEncoderBlock2D"] * 4,
        "up_block_types": ["UpDecoderBlock2D"] * 4,
        "layers_per_block": 2,
        "use_quant_conv": False,
        "use_post_quant_conv": False,
    },
    "FLUX.1 VAE",
    "black-forest-labs/FLUX.1-dev vae config",
)
VAE_SD = Module(
    "diffusers",
    "AutoencoderKL",
    {
        "in_channels": 3,
        "out_channels": 3,
        "latent_channels": 4,
        "block_out_channels": [128, 256, 512, 512],
        "down_block_types": ["DownEncoderBlock2D"] * 4,
        "up_block_types": ["UpDecoderBlock2D"] * 4,
        "layers_per_block": 2,
    },
    "SD VAE",
    "stable-diffusion-v1-5 / SDXL vae config",
)
VAE_SD3 = Module(
    "diffusers",
    "AutoencoderKL",
    {**VAE_SD.config, "latent_channels": 16, "use_quant_conv": False, "use_post_quant_conv": False},
    "SD3 VAE",
    "stabilityai/stable-diffusion-3-medium vae config",
)
VAE_WAN21 = Module("diffusers", "AutoencoderKLWan", {}, "Wan 2.1 VAE", "class defaults = Wan2.1")
VAE_WAN22 = Module(
    "diffusers",
    "AutoencoderKLWan",
    {
        "base_dim": 160,
        "decoder_base_dim": 256,
        "z_dim": 48,
        "in_channels": 12,
        "out_channels": 12,
        "is_residual": True,
        "patch_size": 2,
        "scale_factor_spatial": 16,
        "scale_factor_temporal": 4,
        "dim_mult": [1, 2, 4, 4],
        "num_res_blocks": 2,
        "temperal_downsample": [False, True, True],
    },
    "Wan 2.2 VAE",
    "Wan-AI/Wan2.2-TI2V-5B-Diffusers vae config",
)
VAE_QWEN = Module("diffusers", "AutoencoderKLQwenImage", {}, "Qwen-Image VAE", "class defaults")
VAE_FLUX2 = Module("diffusers", "AutoencoderKLFlux2", {}, "FLUX.2 VAE", "class defaults")
VAE_LTX2 = Module("diffusers", "AutoencoderKLLTX2Video", {}, "LTX-2 video VAE", "class defaults")
VAE_LTX2_AUDIO = Module("diffusers", "AutoencoderKLLTX2Audio", {}, "LTX-2 audio VAE", "defaults")


# --- top-level inputs per model class ----------------------------------------------------------


def _randn(torch: Any, *shape: int) -> Any:
    return torch.randn(*shape, dtype=torch.bfloat16)


def _flux_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    n = grid.image_tokens
    ids = torch.zeros(n, 3)
    ids[:, 1] = torch.arange(grid.height).repeat_interleave(grid.width).repeat(grid.frames)
    ids[:, 2] = torch.arange(grid.width).repeat(grid.height * grid.frames)
    inputs: Inputs = {
        "hidden_states": _randn(torch, 1, n, config.get("in_channels", 64)),
        "encoder_hidden_states": _randn(
            torch, 1, grid.text, config.get("joint_attention_dim", 4096)
        ),
        "img_ids": ids,
        "txt_ids": torch.zeros(grid.text, 3),
        "timestep": torch.tensor([0.5], dtype=torch.bfloat16),
    }
    if "pooled_projection_dim" in config or config.get("_class") == "FluxTransformer2DModel":
        inputs["pooled_projections"] = _randn(torch, 1, config.get("pooled_projection_dim", 768))
    if config.get("guidance_embeds"):
        inputs["guidance"] = torch.tensor([3.5], dtype=torch.bfloat16)
    return inputs


def _chroma_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    inputs = _flux_inputs(torch, config, grid)
    inputs.pop("pooled_projections", None)
    return inputs


def _fibo_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    # FLUX's inputs without the pooled projection (the class has the key, set to None), and
    # DimFusion's per-block text: one hidden state of the text encoder for every block (AI
    # Toolkit fibo_model.py get_noise_prediction repeats the last one where the encoder has
    # fewer layers than the transformer has blocks).
    flux = {key: value for key, value in config.items() if key != "pooled_projection_dim"}
    inputs = _flux_inputs(torch, flux, grid)
    blocks = config["num_layers"] + config["num_single_layers"]
    inputs["text_encoder_layers"] = [
        _randn(torch, 1, grid.text, config["text_encoder_dim"]) for _ in range(blocks)
    ]
    return inputs


def _flux2_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    n = grid.image_tokens
    img_ids = torch.cartesian_prod(
        torch.arange(grid.frames),
        torch.arange(grid.height),
        torch.arange(grid.width),
        torch.arange(1),
    ).unsqueeze(0)
    txt_ids = torch.cartesian_prod(
        torch.arange(1), torch.arange(1), torch.arange(1), torch.arange(grid.text)
    ).unsqueeze(0)
    inputs: Inputs = {
        "hidden_states": _randn(torch, 1, n, config["in_channels"]),
        "encoder_hidden_states": _randn(torch, 1, grid.text, config["joint_attention_dim"]),
        "img_ids": img_ids,
        "txt_ids": txt_ids,
        "timestep": torch.tensor([0.5], dtype=torch.bfloat16),
    }
    if config.get("guidance_embeds", True):
        inputs["guidance"] = torch.tensor([3.5], dtype=torch.bfloat16)
    return inputs


def _qwen_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    return {
        "hidden_states": _randn(torch, 1, grid.image_tokens, config.get("in_channels", 64)),
        "encoder_hidden_states": _randn(
            torch, 1, grid.text, config.get("joint_attention_dim", 3584)
        ),
        "encoder_hidden_states_mask": torch.ones(1, grid.text, dtype=torch.long),
        "timestep": torch.tensor([0.5], dtype=torch.bfloat16),
        "img_shapes": [(grid.frames, grid.height, grid.width)],
    }


def _wan_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    # Wan patches the latent 1x2x2: the latent is twice the token grid on each side.
    return {
        "hidden_states": _randn(
            torch, 1, config["in_channels"], grid.frames, grid.height * 2, grid.width * 2
        ),
        "encoder_hidden_states": _randn(torch, 1, grid.text, config.get("text_dim", 4096)),
        "timestep": torch.tensor([500]),
    }


def _krea2_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    n = grid.image_tokens
    position_ids = torch.zeros(grid.text + n, 3)
    position_ids[grid.text :, 1] = torch.arange(grid.height).repeat_interleave(grid.width)
    position_ids[grid.text :, 2] = torch.arange(grid.width).repeat(grid.height)
    return {
        "hidden_states": _randn(torch, 1, n, config["in_channels"]),
        "encoder_hidden_states": _randn(
            torch, 1, grid.text, config["num_text_layers"], config["text_hidden_dim"]
        ),
        "timestep": torch.tensor([0.5], dtype=torch.bfloat16),
        "position_ids": position_ids,
        "encoder_attention_mask": torch.ones(1, grid.text, dtype=torch.bool),
    }


def _ltx2_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    audio_frames = 32  # about 1.3 s of audio latents; a constant beside the video tokens
    text_dim = config["caption_channels"] if config.get("use_prompt_embeddings", True) else None
    video_text = text_dim or config["cross_attention_dim"]
    audio_text = text_dim or config["audio_cross_attention_dim"]
    newer: Inputs = {}
    if config.get("cross_attn_mod"):
        # LTX-2.3: AI Toolkit passes the sigma beside the timestep and the cross timestep
        step = torch.tensor([500.0], dtype=torch.bfloat16)
        newer = {"audio_timestep": step, "sigma": step / 1000, "audio_sigma": step / 1000}
        newer["use_cross_timestep"] = True
    return {
        **newer,
        "hidden_states": _randn(torch, 1, grid.image_tokens, config["in_channels"]),
        "audio_hidden_states": _randn(torch, 1, audio_frames, config["audio_in_channels"]),
        "encoder_hidden_states": _randn(torch, 1, grid.text, video_text),
        "audio_encoder_hidden_states": _randn(torch, 1, grid.text, audio_text),
        "timestep": torch.tensor([500.0], dtype=torch.bfloat16),
        "encoder_attention_mask": torch.ones(1, grid.text, dtype=torch.bool),
        "num_frames": grid.frames,
        "height": grid.height,
        "width": grid.width,
        "audio_num_frames": audio_frames,
        "fps": 24.0,
    }


def _minimax_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    audio = 16  # a constant beside the video tokens
    video = grid.image_tokens
    total = grid.text + audio + video
    text_idx = torch.arange(grid.text)
    audio_idx = torch.arange(grid.text, grid.text + audio)
    video_idx = torch.arange(grid.text + audio, total)
    tags = torch.zeros(total, dtype=torch.long)
    tags[text_idx] = 1
    tags[audio_idx] = 2
    steps = torch.zeros(total, dtype=torch.long)
    steps[audio_idx] = 1
    positions = torch.zeros(total, 3)
    positions[:, 0] = torch.arange(total, dtype=torch.float32)
    hw = grid.height * grid.width
    positions[video_idx, 1] = (torch.arange(video) % hw // grid.width).float()
    positions[video_idx, 2] = (torch.arange(video) % grid.width).float()
    patch = config.get("patch_size", (1, 2, 2))
    return {
        "hidden_states": _randn(
            torch, 1, video, config["in_channels"] * patch[0] * patch[1] * patch[2]
        ),
        "audio_hidden_states": _randn(torch, 1, audio, config["audio_in_channels"]),
        "encoder_hidden_states": _randn(torch, 1, grid.text, config["text_dim"]),
        "timestep": torch.tensor([0.7, 0.3]),
        "timestep_indices": steps,
        "token_tags": tags,
        "position_ids": positions,
        "video_indices": video_idx,
        "audio_indices": audio_idx,
        "text_indices": text_idx,
    }


def _ideogram4_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    from diffusers.models.transformers import transformer_ideogram4 as ideo

    text, n = grid.text, grid.image_tokens
    total = text + n
    hidden = torch.zeros(1, total, config["in_channels"], dtype=torch.bfloat16)
    hidden[:, text:] = _randn(torch, 1, n, config["in_channels"])
    features = torch.zeros(1, total, config["llm_features_dim"], dtype=torch.bfloat16)
    features[:, :text] = _randn(torch, 1, text, config["llm_features_dim"])
    positions = torch.zeros(1, total, 3, dtype=torch.long)
    for axis in range(3):
        positions[:, :text, axis] = torch.arange(text)
    offset = ideo.IMAGE_POSITION_OFFSET
    positions[:, text:, 0] = offset
    positions[:, text:, 1] = torch.arange(grid.height).repeat_interleave(grid.width) + offset
    positions[:, text:, 2] = torch.arange(grid.width).repeat(grid.height) + offset
    indicator = torch.empty(1, total, dtype=torch.long)
    indicator[:, :text] = ideo.LLM_TOKEN_INDICATOR
    indicator[:, text:] = ideo.OUTPUT_IMAGE_INDICATOR
    return {
        "hidden_states": hidden,
        "timestep": torch.tensor([0.5], dtype=torch.bfloat16),
        "encoder_hidden_states": features,
        "position_ids": positions,
        "segment_ids": torch.ones(1, total, dtype=torch.long),
        "indicator": indicator,
    }


def _zimage_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    return {
        "x": [_randn(torch, config["in_channels"], grid.frames, grid.height * 2, grid.width * 2)],
        "cap_feats": [_randn(torch, grid.text, config["cap_feat_dim"])],
        "t": torch.tensor([0.5]),
    }


def _sd3_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    return {
        "hidden_states": _randn(torch, 1, config["in_channels"], grid.height * 2, grid.width * 2),
        "encoder_hidden_states": _randn(torch, 1, grid.text, config["joint_attention_dim"]),
        "pooled_projections": _randn(torch, 1, config["pooled_projection_dim"]),
        "timestep": torch.tensor([500.0], dtype=torch.bfloat16),
    }


def _cosmos_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    # The padding mask the model concatenates is one more input channel (reduce: in_channels 17,
    # concat_padding_mask off: its resize needs torchvision); the blocks see the same shapes.
    return {
        "hidden_states": _randn(
            torch, 1, config["in_channels"], grid.frames, grid.height * 2, grid.width * 2
        ),
        "timestep": torch.tensor([500.0], dtype=torch.bfloat16),
        "encoder_hidden_states": _randn(torch, 1, grid.text, config["text_embed_dim"]),
    }


def _llm_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    total = grid.text + grid.image_tokens
    return {
        "inputs_embeds": _randn(torch, 1, total, config["hidden_size"]),
        "position_ids": torch.arange(total).view(1, 1, total).expand(3, 1, total),
        "use_cache": False,
    }


def _hidream_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    # A block's text is three equal sequences (AI Toolkit hidream_model.py get_prompt_embeds:
    # max_sequence_length 128 for each encoder): the T5 one and the last Llama layer's, which
    # every block carries on, and the Llama layer of the block itself.
    assert grid.text % 3 == 0, grid
    text = grid.text // 3
    return {
        "hidden_states": _randn(torch, 1, config["in_channels"], grid.height * 2, grid.width * 2),
        "timesteps": torch.tensor([500.0]),
        "encoder_hidden_states_t5": _randn(torch, 1, text, config["caption_channels"][0]),
        "encoder_hidden_states_llama3": [
            _randn(torch, 1, text, config["caption_channels"][1])
            for _ in range(max(config["llama_layers"]) + 1)
        ],
        "pooled_embeds": _randn(torch, 1, config["text_emb_dim"]),
    }


def _hidream_toolkit_moe(model: Any) -> None:
    """Route each mixture-of-experts layer as AI Toolkit's HiDream code does in training.

    diffusers' MOEFeedForwardSwiGLU trains through its reference path (every token repeated
    top-k times); AI Toolkit's own copy (hidream/src/models/moe.py) always takes the sorted
    dispatch (``moe_infer``: each expert runs on the tokens routed to it, the results are
    scattered back), with gradients and without the auxiliary loss. diffusers has that path
    too, as ``moe_infer`` under ``torch.no_grad``, taken with ``force_inference_output``: this
    takes it with gradients, as the toolkit does.
    """
    from diffusers.models.transformers.transformer_hidream_image import MOEFeedForwardSwiGLU

    dispatch = MOEFeedForwardSwiGLU.moe_infer.__wrapped__  # the method without torch.no_grad
    for module in model.modules():
        if isinstance(module, MOEFeedForwardSwiGLU):
            module._force_inference_output = True
            module.gate._force_inference_output = True  # no auxiliary loss, as in the toolkit
            module.moe_infer = dispatch.__get__(module)


def _lumina2_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    # AI Toolkit (stable_diffusion_model.py predict_noise) passes the Gemma mask as int64; the
    # joint blocks see the caption's unmasked tokens only (the model counts them with .tolist()):
    # every text token is unmasked here, the longest caption.
    return {
        "hidden_states": _randn(torch, 1, config["in_channels"], grid.height * 2, grid.width * 2),
        "timestep": torch.tensor([0.5], dtype=torch.bfloat16),
        "encoder_hidden_states": _randn(torch, 1, grid.text, config["cap_feat_dim"]),
        "encoder_attention_mask": torch.ones(1, grid.text, dtype=torch.int64),
    }


def _pixart_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    added = {}
    if config.get("use_additional_conditions"):
        added = {
            "resolution": torch.tensor([[grid.height * 16.0, grid.width * 16.0]]),
            "aspect_ratio": torch.tensor([[grid.height / grid.width]]),
        }
    return {
        "hidden_states": _randn(torch, 1, config["in_channels"], grid.height * 2, grid.width * 2),
        "encoder_hidden_states": _randn(torch, 1, grid.text, config["caption_channels"]),
        "timestep": torch.tensor([500]),
        "added_cond_kwargs": added,
    }


def _auraflow_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    return {
        "hidden_states": _randn(torch, 1, config["in_channels"], grid.height * 2, grid.width * 2),
        "encoder_hidden_states": _randn(torch, 1, grid.text, config["joint_attention_dim"]),
        "timestep": torch.tensor([500.0], dtype=torch.bfloat16),
    }


def _cogview4_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    side = [[grid.height * 16.0, grid.width * 16.0]]
    return {
        "hidden_states": _randn(torch, 1, config["in_channels"], grid.height * 2, grid.width * 2),
        "encoder_hidden_states": _randn(torch, 1, grid.text, config["text_embed_dim"]),
        "timestep": torch.tensor([500.0], dtype=torch.bfloat16),
        "original_size": torch.tensor(side, dtype=torch.bfloat16),
        "target_size": torch.tensor(side, dtype=torch.bfloat16),
        "crop_coords": torch.tensor([[0.0, 0.0]], dtype=torch.bfloat16),
    }


# --- the families ---------------------------------------------------------------------------

FLUX1_DEV = {
    "patch_size": 1,
    "in_channels": 64,
    "num_layers": 19,
    "num_single_layers": 38,
    "attention_head_dim": 128,
    "num_attention_heads": 24,
    "joint_attention_dim": 4096,
    "pooled_projection_dim": 768,
    "guidance_embeds": True,
    "axes_dims_rope": [16, 56, 56],
}
FLUX2_DEV = {
    "in_channels": 128,
    "num_layers": 8,
    "num_single_layers": 48,
    "attention_head_dim": 128,
    "num_attention_heads": 48,
    "joint_attention_dim": 15360,
    "mlp_ratio": 3.0,
    "axes_dims_rope": [32, 32, 32, 32],
    "guidance_embeds": True,
}

_SD35_SRC = (
    "diffusers scripts/convert_sd3_to_diffusers.py (num_attention_heads = num_layers, "
    "caption_projection_dim = 64 x heads, rms_norm qk norm for 3.5); "
)

_FAMILIES: tuple[Family, ...] = (
    Family(
        id="flux",
        transformer=Module(
            "diffusers",
            "FluxTransformer2DModel",
            FLUX1_DEV,
            "FLUX.1-dev transformer",
            "black-forest-labs/FLUX.1-dev transformer config",
        ),
        text_encoders=(T5_XXL, CLIP_L),
        vae=(VAE_FLUX,),
        text_tokens=512,
        text_tokens_source="AI Toolkit pads T5 to 512 tokens for FLUX.1 (max_sequence_length 512)",
        blocks=("transformer_blocks", "single_transformer_blocks"),
        reduce={"num_layers": 1, "num_single_layers": 1},
        inputs=_flux_inputs,
    ),
    Family(
        id="flex",
        transformer=Module(
            "diffusers",
            "FluxTransformer2DModel",
            {**FLUX1_DEV, "num_layers": 8, "guidance_embeds": True},
            "Flex.1-alpha transformer",
            "ostris/Flex.1-alpha transformer config: FLUX.1 with 8 double blocks",
        ),
        text_encoders=(T5_XXL, CLIP_L),
        vae=(VAE_FLUX,),
        text_tokens=512,
        text_tokens_source="as FLUX.1 (T5 at 512 tokens)",
        blocks=("transformer_blocks", "single_transformer_blocks"),
        reduce={"num_layers": 1, "num_single_layers": 1},
        inputs=_flux_inputs,
    ),
    Family(
        id="chroma",
        transformer=Module(
            "diffusers",
            "ChromaTransformer2DModel",
            {
                k: v
                for k, v in FLUX1_DEV.items()
                if k not in ("pooled_projection_dim", "guidance_embeds")
            },
            "Chroma transformer",
            "lodestones/Chroma1-HD transformer config (FLUX.1 layout, no modulation layers)",
        ),
        text_encoders=(T5_XXL,),
        vae=(VAE_FLUX,),
        text_tokens=512,
        text_tokens_source="T5 at 512 tokens as FLUX.1",
        blocks=("transformer_blocks", "single_transformer_blocks"),
        reduce={"num_layers": 1, "num_single_layers": 1},
        inputs=_chroma_inputs,
    ),
    Family(
        id="flux2",
        transformer=Module(
            "diffusers",
            "Flux2Transformer2DModel",
            FLUX2_DEV,
            "FLUX.2-dev transformer",
            "AI Toolkit's Flux2Params (flux2/src/model.py) = black-forest-labs/FLUX.2-dev config",
        ),
        text_encoders=(MISTRAL_SMALL_31,),
        vae=(VAE_FLUX2,),
        text_tokens=512,
        text_tokens_source="FLUX.2 pipeline max_sequence_length 512",
        blocks=("transformer_blocks", "single_transformer_blocks"),
        reduce={"num_layers": 1, "num_single_layers": 1},
        inputs=_flux2_inputs,
    ),
    Family(
        id="flux2_klein_4b",
        transformer=Module(
            "diffusers",
            "Flux2Transformer2DModel",
            {
                **FLUX2_DEV,
                "num_layers": 5,
                "num_single_layers": 20,
                "num_attention_heads": 24,
                "joint_attention_dim": 7680,
                "guidance_embeds": False,
            },
            "FLUX.2-klein-base-4B transformer",
            "AI Toolkit's Klein4BParams (flux2/src/model.py)",
        ),
        text_encoders=(QWEN3_4B,),
        vae=(VAE_FLUX2,),
        text_tokens=512,
        text_tokens_source="FLUX.2 pipeline max_sequence_length 512",
        blocks=("transformer_blocks", "single_transformer_blocks"),
        reduce={"num_layers": 1, "num_single_layers": 1},
        inputs=_flux2_inputs,
    ),
    Family(
        id="flux2_klein_9b",
        transformer=Module(
            "diffusers",
            "Flux2Transformer2DModel",
            {
                **FLUX2_DEV,
                "num_layers": 8,
                "num_single_layers": 24,
                "num_attention_heads": 32,
                "joint_attention_dim": 12288,
                "guidance_embeds": False,
            },
            "FLUX.2-klein-base-9B transformer",
            "AI Toolkit's Klein9BParams (flux2/src/model.py)",
        ),
        text_encoders=(QWEN3_8B,),
        vae=(VAE_FLUX2,),
        text_tokens=512,
        text_tokens_source="FLUX.2 pipeline max_sequence_length 512",
        blocks=("transformer_blocks", "single_transformer_blocks"),
        reduce={"num_layers": 1, "num_single_layers": 1},
        inputs=_flux2_inputs,
    ),
    Family(
        id="qwen_image",
        transformer=Module(
            "diffusers",
            "QwenImageTransformer2DModel",
            {
                "patch_size": 2,
                "in_channels": 64,
                "out_channels": 16,
                "num_layers": 60,
                "attention_head_dim": 128,
                "num_attention_heads": 24,
                "joint_attention_dim": 3584,
                "axes_dims_rope": [16, 56, 56],
            },
            "Qwen-Image transformer",
            "Qwen/Qwen-Image transformer config",
        ),
        text_encoders=(QWEN25_VL_7B,),
        vae=(VAE_QWEN,),
        text_tokens=512,
        text_tokens_source="a typical caption; Qwen-Image's prompt is not padded (max 1024)",
        blocks=("transformer_blocks",),
        reduce={"num_layers": 1},
        inputs=_qwen_inputs,
    ),
    Family(
        id="krea2",
        transformer=Module(
            "diffusers",
            "Krea2Transformer2DModel",
            {},
            "Krea 2 transformer",
            "class defaults, the released Krea 2 config per diffusers' docstring",
        ),
        text_encoders=(QWEN3_VL_4B,),
        vae=(VAE_QWEN,),
        text_tokens=512,
        text_tokens_source="AI Toolkit krea2.py max_text_length",
        blocks=("transformer_blocks",),
        reduce={"num_layers": 1},
        inputs=_krea2_inputs,
    ),
)


# Wan: one class, four published configs.
_WAN_BASE = {
    "patch_size": [1, 2, 2],
    "attention_head_dim": 128,
    "in_channels": 16,
    "out_channels": 16,
    "text_dim": 4096,
    "freq_dim": 256,
    "cross_attn_norm": True,
    "qk_norm": "rms_norm_across_heads",
    "eps": 1e-6,
}
_WAN_SRC = "diffusers scripts/convert_wan_to_diffusers.py config"
_WAN_TEXT = "Wan's umT5 text_len 512 (AI Toolkit wan21.py)"
_WAN_NOTE = "a 480x832 81-frame clip is 21 latent frames x 30 x 52 tokens = 32,760 tokens"
_FAMILIES += (
    Family(
        id="wan21_14b",
        transformer=Module(
            "diffusers",
            "WanTransformer3DModel",
            {**_WAN_BASE, "num_attention_heads": 40, "ffn_dim": 13824, "num_layers": 40},
            "Wan2.1-T2V-14B transformer",
            f"{_WAN_SRC} Wan-T2V-14B (the I2V variants add an image projection)",
        ),
        text_encoders=(UMT5_XXL,),
        vae=(VAE_WAN21,),
        text_tokens=512,
        text_tokens_source=_WAN_TEXT,
        blocks=("blocks",),
        reduce={"num_layers": 1},
        inputs=_wan_inputs,
        video=True,
        note=_WAN_NOTE,
    ),
    Family(
        id="wan21_1b",
        transformer=Module(
            "diffusers",
            "WanTransformer3DModel",
            {**_WAN_BASE, "num_attention_heads": 12, "ffn_dim": 8960, "num_layers": 30},
            "Wan2.1-T2V-1.3B transformer",
            f"{_WAN_SRC} Wan-T2V-1.3B",
        ),
        text_encoders=(UMT5_XXL,),
        vae=(VAE_WAN21,),
        text_tokens=512,
        text_tokens_source=_WAN_TEXT,
        blocks=("blocks",),
        reduce={"num_layers": 1},
        inputs=_wan_inputs,
        video=True,
        note=_WAN_NOTE,
    ),
    Family(
        id="wan22_14b",
        transformer=Module(
            "diffusers",
            "WanTransformer3DModel",
            {**_WAN_BASE, "num_attention_heads": 40, "ffn_dim": 13824, "num_layers": 40},
            "Wan2.2-T2V-A14B transformer (each expert)",
            f"{_WAN_SRC} Wan2.2-T2V-A14B",
        ),
        text_encoders=(UMT5_XXL,),
        vae=(VAE_WAN21,),
        experts=2,
        text_tokens=512,
        text_tokens_source=_WAN_TEXT,
        blocks=("blocks",),
        reduce={"num_layers": 1},
        inputs=_wan_inputs,
        video=True,
        note=_WAN_NOTE,
    ),
    Family(
        id="wan22_5b",
        transformer=Module(
            "diffusers",
            "WanTransformer3DModel",
            {
                **_WAN_BASE,
                "num_attention_heads": 24,
                "ffn_dim": 14336,
                "num_layers": 30,
                "in_channels": 48,
                "out_channels": 48,
            },
            "Wan2.2-TI2V-5B transformer",
            f"{_WAN_SRC} Wan2.2-TI2V-5B",
        ),
        text_encoders=(UMT5_XXL,),
        vae=(VAE_WAN22,),
        text_tokens=512,
        text_tokens_source=_WAN_TEXT,
        blocks=("blocks",),
        reduce={"num_layers": 1},
        inputs=_wan_inputs,
        video=True,
        note="VAE 16x16 spatial, 4x temporal: a 704x1280 121-frame clip is 31 x 22 x 40 tokens",
    ),
)

_LTX_20 = {
    "in_channels": 128,
    "out_channels": 128,
    "num_attention_heads": 32,
    "attention_head_dim": 128,
    "cross_attention_dim": 4096,
    "audio_in_channels": 128,
    "audio_out_channels": 128,
    "audio_num_attention_heads": 32,
    "audio_attention_head_dim": 64,
    "audio_cross_attention_dim": 2048,
    "num_layers": 48,
    "caption_channels": 3840,
    "rope_type": "split",
    "use_prompt_embeddings": True,
    "perturbed_attn": False,
    "gated_attn": False,
    "cross_attn_mod": False,
    "audio_gated_attn": False,
    "audio_cross_attn_mod": False,
}
_LTX_23 = {
    **_LTX_20,
    "gated_attn": True,
    "cross_attn_mod": True,
    "audio_gated_attn": True,
    "audio_cross_attn_mod": True,
    "use_prompt_embeddings": False,
    "perturbed_attn": True,
}
_LTX_SRC = "AI Toolkit ltx2/convert_ltx2_to_diffusers.py config"
_LTX_NOTE = (
    "VAE 32x32 spatial, 8x temporal, patch 1: a 768x512 121-frame clip is 16 x 24 x 16 = "
    "6,144 video tokens; the audio stream's tokens are a constant beside them"
)
#: SD3 Medium's transformer (stabilityai/stable-diffusion-3-medium-diffusers); the SD3.5 sizes
#: differ from it in the keys their entries set.
SD3_MEDIUM: dict[str, Any] = {
    "num_layers": 24,
    "attention_head_dim": 64,
    "num_attention_heads": 24,
    "joint_attention_dim": 4096,
    "caption_projection_dim": 1536,
    "pooled_projection_dim": 2048,
    "pos_embed_max_size": 192,
    "in_channels": 16,
    "out_channels": 16,
    "patch_size": 2,
    "sample_size": 128,
}

_FAMILIES += (
    Family(
        id="ltx2",
        transformer=Module(
            "diffusers",
            "LTX2VideoTransformer3DModel",
            _LTX_20,
            "LTX-2 audio-video transformer",
            f"{_LTX_SRC} 2.0 (Lightricks/LTX-2)",
        ),
        text_encoders=(GEMMA3_12B,),
        vae=(VAE_LTX2, VAE_LTX2_AUDIO),
        text_tokens=1024,
        text_tokens_source="LTX-2 pipeline max_sequence_length 1024",
        blocks=("transformer_blocks",),
        reduce={"num_layers": 1},
        inputs=_ltx2_inputs,
        video=True,
        note=_LTX_NOTE,
    ),
    Family(
        id="ltx23",
        transformer=Module(
            "diffusers",
            "LTX2VideoTransformer3DModel",
            _LTX_23,
            "LTX-2.3 audio-video transformer",
            f"{_LTX_SRC} 2.3; LTX-2.5 keeps this transformer config (same file), but its text "
            "encoder is Gemma 4 12B with projections, not counted here: Gemma-3-12B stands in",
        ),
        text_encoders=(GEMMA3_12B,),
        vae=(VAE_LTX2, VAE_LTX2_AUDIO),
        text_tokens=1024,
        text_tokens_source="LTX-2 pipeline max_sequence_length 1024",
        blocks=("transformer_blocks",),
        reduce={"num_layers": 1},
        inputs=_ltx2_inputs,
        video=True,
        note=_LTX_NOTE,
    ),
    Family(
        id="minimax_h3",
        transformer=Module(
            "diffusers",
            "MiniMaxH3Transformer3DModel",
            {},
            "MiniMax-H3 transformer",
            "class defaults (diffusers: 'as in the released checkpoint')",
        ),
        text_encoders=(QWEN3_VL_32B,),
        vae=(),
        params_note="video and audio VAEs not counted: AI Toolkit's own minimax_h3/src code",
        text_tokens=512,
        text_tokens_source="a typical caption (the prompt is not padded)",
        blocks=("transformer_blocks",),
        reduce={"num_layers": 1, "num_refiner_layers": 1},
        inputs=_minimax_inputs,
        video=True,
        note="VAE 16x16 spatial, 17 frames -> 5 latent frames, patch 2: 480x832 x 107 frames is "
        "31 latent frames x 15 x 26 tokens",
    ),
    Family(
        id="ideogram4",
        transformer=Module(
            "diffusers",
            "Ideogram4Transformer2DModel",
            {},
            "Ideogram 4 transformer",
            "class defaults = AI Toolkit ideogram4/src/transformer.py Ideogram4Config",
        ),
        text_encoders=(QWEN3_VL_8B,),
        vae=(),
        params_note="VAE not counted: AI Toolkit's own ideogram4/src/vae.py, no diffusers class",
        text_tokens=512,
        text_tokens_source="a typical caption (the prompt is not padded)",
        blocks=("layers",),
        reduce={"num_layers": 1},
        inputs=_ideogram4_inputs,
    ),
    Family(
        id="zimage",
        transformer=Module(
            "diffusers",
            "ZImageTransformer2DModel",
            {
                "dim": 3840,
                "n_layers": 30,
                "n_refiner_layers": 2,
                "n_heads": 30,
                "n_kv_heads": 30,
                "in_channels": 16,
                "cap_feat_dim": 2560,
            },
            "Z-Image transformer",
            "Tongyi-MAI/Z-Image-Turbo transformer config (= the class defaults)",
        ),
        text_encoders=(QWEN3_4B,),
        vae=(VAE_FLUX,),
        text_tokens=512,
        text_tokens_source="Z-Image pipeline max_sequence_length 512",
        blocks=("noise_refiner", "layers"),
        reduce={"n_layers": 1, "n_refiner_layers": 1},
        inputs=_zimage_inputs,
    ),
    Family(
        id="sd3",
        transformer=Module(
            "diffusers",
            "SD3Transformer2DModel",
            SD3_MEDIUM,
            "SD3-medium transformer",
            "stabilityai/stable-diffusion-3-medium-diffusers transformer config",
        ),
        text_encoders=(CLIP_L, CLIP_G, T5_XXL),
        vae=(VAE_SD3,),
        text_tokens=333,
        text_tokens_source="SD3 pipeline: 77 CLIP + 256 T5 tokens",
        blocks=("transformer_blocks",),
        reduce={"num_layers": 2},  # the last block is context_pre_only: measure the first
        inputs=_sd3_inputs,
    ),
    Family(
        id="sd35_large",
        transformer=Module(
            "diffusers",
            "SD3Transformer2DModel",
            {
                **SD3_MEDIUM,
                "num_layers": 38,
                "num_attention_heads": 38,
                "caption_projection_dim": 2432,
                "qk_norm": "rms_norm",
            },
            "SD3.5-large transformer",
            _SD35_SRC + "stabilityai/stable-diffusion-3.5-large: 38 layers, pos_embed_max_size 192",
        ),
        text_encoders=(CLIP_L, CLIP_G, T5_XXL),
        vae=(VAE_SD3,),
        text_tokens=333,
        text_tokens_source="SD3 pipeline: 77 CLIP + 256 T5 tokens",
        blocks=("transformer_blocks",),
        reduce={"num_layers": 2},
        inputs=_sd3_inputs,
    ),
    Family(
        id="sd35_medium",
        transformer=Module(
            "diffusers",
            "SD3Transformer2DModel",
            {
                **SD3_MEDIUM,
                "pos_embed_max_size": 384,
                "dual_attention_layers": tuple(range(13)),
                "qk_norm": "rms_norm",
            },
            "SD3.5-medium transformer",
            _SD35_SRC
            + "stabilityai/stable-diffusion-3.5-medium: 24 layers, pos_embed_max_size 384, dual "
            "attention (MMDiT-X) in layers 0-12",
        ),
        text_encoders=(CLIP_L, CLIP_G, T5_XXL),
        vae=(VAE_SD3,),
        text_tokens=333,
        text_tokens_source="SD3 pipeline: 77 CLIP + 256 T5 tokens",
        blocks=("transformer_blocks",),
        reduce={"num_layers": 2, "dual_attention_layers": (0,)},
        inputs=_sd3_inputs,
        note="layers 0-12 of 24 have a second attention (MMDiT-X); the measured block is one",
    ),
)

UMT5_PILE_XL = Module(
    "transformers",
    "UMT5EncoderModel:UMT5Config",
    {
        "d_model": 2048,
        "d_ff": 5120,
        "d_kv": 64,
        "num_heads": 32,
        "num_layers": 24,
        "vocab_size": 32128,
        "feed_forward_proj": "gated-gelu",
    },
    "Pile-T5-XL encoder",
    "fal/AuraFlow text_encoder config",
)
GLM4_9B = Module(
    "transformers",
    "GlmModel:GlmConfig",
    {
        "hidden_size": 4096,
        "intermediate_size": 13696,
        "num_hidden_layers": 40,
        "num_attention_heads": 32,
        "num_key_value_heads": 2,
        "head_dim": 128,
        "vocab_size": 151552,
        "attention_bias": True,
    },
    "GLM-4-9B",
    "THUDM/CogView4-6B text_encoder config",
)
QWEN3_VL_2B_TEXT = Module(
    "transformers",
    "Qwen3VLTextModel:Qwen3VLTextConfig",
    {
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 151936,
    },
    "Qwen3-VL-2B text tower",
    "Qwen/Qwen3-VL-2B-Instruct text_config (AI Toolkit prx_pixel_t2i README: hidden 2048)",
)
_SDXL_UNET = {
    "sample_size": 128,
    "cross_attention_dim": 2048,
    "transformer_layers_per_block": [1, 2, 10],
    "block_out_channels": [320, 640, 1280],
    "down_block_types": ["DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"],
    "up_block_types": ["CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"],
    "attention_head_dim": [5, 10, 20],
    "use_linear_projection": True,
    "addition_embed_type": "text_time",
    "addition_time_embed_dim": 256,
    "projection_class_embeddings_input_dim": 2816,
}
_HIDREAM = {
    "patch_size": 2,
    "in_channels": 16,
    "out_channels": 16,
    "num_layers": 16,
    "num_single_layers": 32,
    "attention_head_dim": 128,
    "num_attention_heads": 20,
    "caption_channels": [4096, 4096],
    "text_emb_dim": 2048,
    "num_routed_experts": 4,
    "num_activated_experts": 2,
    "axes_dims_rope": [64, 32, 32],
    "max_resolution": [128, 128],
    "llama_layers": list(range(32)) + [31] * 16,
}
_MOE = (
    "its mixture-of-experts layers route tokens with data-dependent shapes, which the shape-only "
    "(fake tensor) measurement cannot follow"
)
_FAMILIES += (
    Family(
        id="hidream",
        transformer=Module(
            "diffusers",
            "HiDreamImageTransformer2DModel",
            _HIDREAM,
            "HiDream-I1 transformer",
            "HiDream-ai/HiDream-I1-Full transformer config",
        ),
        text_encoders=(LLAMA31_8B, T5_XXL, CLIP_L, CLIP_G),
        vae=(VAE_FLUX,),
        text_tokens=384,
        text_tokens_source=(
            "AI Toolkit hidream_model.py get_prompt_embeds max_sequence_length 128: each block "
            "sees the T5 and the last Llama layer's 128 tokens and its own Llama layer's 128"
        ),
        blocks=("double_stream_blocks", "single_stream_blocks"),
        # one block of each kind; the caption projections follow the Llama layers it reads
        reduce={"num_layers": 1, "num_single_layers": 1, "llama_layers": [0, 1]},
        inputs=_hidream_inputs,
        real=_MOE,
        square=True,  # patchify pads a non-square latent to max_resolution's 4096 tokens
        prepare=_hidream_toolkit_moe,
    ),
    Family(
        id="lumina2",
        transformer=Module(
            "diffusers",
            "Lumina2Transformer2DModel",
            {
                "hidden_size": 2304,
                "num_layers": 26,
                "num_refiner_layers": 2,
                "num_attention_heads": 24,
                "num_kv_heads": 8,
                "cap_feat_dim": 2304,
                "in_channels": 16,
                "patch_size": 2,
                "multiple_of": 256,
                "axes_dim_rope": [32, 32, 32],
                "axes_lens": [300, 512, 512],
            },
            "Lumina-Image-2.0 transformer",
            "Alpha-VLLM/Lumina-Image-2.0 transformer config",
        ),
        text_encoders=(GEMMA2_2B,),
        vae=(VAE_FLUX,),
        text_tokens=256,
        text_tokens_source=(
            "AI Toolkit stable_diffusion_model.py encode_prompt max_sequence_length 256 (the "
            "joint blocks see the caption's unmasked tokens: an upper bound)"
        ),
        # the context_refiner blocks see the text only (their bytes do not grow with the image)
        blocks=("noise_refiner", "layers"),
        reduce={"num_layers": 1, "num_refiner_layers": 1},
        inputs=_lumina2_inputs,
        real="its forward reads the text mask's values (.tolist()), which the shape-only "
        "(fake tensor) measurement cannot give",
    ),
    Family(
        id="sdxl",
        transformer=Module(
            "diffusers",
            "UNet2DConditionModel",
            _SDXL_UNET,
            "SDXL UNet",
            "stabilityai/stable-diffusion-xl-base-1.0 unet config",
        ),
        text_encoders=(CLIP_L, CLIP_G),
        vae=(VAE_SD,),
        unet=True,
    ),
    Family(
        id="sd15",
        transformer=Module(
            "diffusers",
            "UNet2DConditionModel",
            {"cross_attention_dim": 768, "sample_size": 64},
            "SD 1.5 UNet",
            "stable-diffusion-v1-5 unet config",
        ),
        text_encoders=(CLIP_L,),
        vae=(VAE_SD,),
        unet=True,
    ),
    Family(
        id="sd2",
        transformer=Module(
            "diffusers",
            "UNet2DConditionModel",
            {
                "cross_attention_dim": 1024,
                "sample_size": 96,
                "attention_head_dim": [5, 10, 20, 20],
                "use_linear_projection": True,
            },
            "SD 2.1 UNet",
            "stabilityai/stable-diffusion-2-1 unet config",
        ),
        text_encoders=(CLIP_H,),
        vae=(VAE_SD,),
        unet=True,
    ),
    Family(
        id="ssd",
        transformer=Module(
            "diffusers",
            "UNet2DConditionModel",
            {**_SDXL_UNET, "transformer_layers_per_block": [1, 2, 4]},
            "SSD-1B UNet",
            "inferred: ComfyUI's SSD1B detection (transformer_depth 0,0,2,2,4,4 on the way down) "
            "mirrored on the way up with SDXL's mid block, which gives the model card's 1.3B",
        ),
        text_encoders=(CLIP_L, CLIP_G),
        vae=(VAE_SD,),
        unet=True,
    ),
    Family(
        id="vega",
        transformer=Module(
            "diffusers",
            "UNet2DConditionModel",
            {
                **_SDXL_UNET,
                "transformer_layers_per_block": [1, 1, 2],
                "mid_block_type": "UNetMidBlock2D",
            },
            "Segmind Vega UNet",
            "inferred: ComfyUI's Segmind_Vega detection (transformer_depth 0,0,1,1,2,2 on the way "
            "down) mirrored on the way up, a mid block without attention, which gives the model "
            "card's 745M",
        ),
        text_encoders=(CLIP_L, CLIP_G),
        vae=(VAE_SD,),
        unet=True,
    ),
    Family(
        id="pixart",
        transformer=Module(
            "diffusers",
            "PixArtTransformer2DModel",
            {
                "sample_size": 128,
                "num_layers": 28,
                "num_attention_heads": 16,
                "attention_head_dim": 72,
                "in_channels": 4,
                "out_channels": 8,
                "caption_channels": 4096,
                "cross_attention_dim": 1152,
                "use_additional_conditions": True,
            },
            "PixArt-XL-2-1024-MS transformer",
            "PixArt-alpha/PixArt-XL-2-1024-MS transformer config",
        ),
        text_encoders=(T5_XXL,),
        vae=(VAE_SD,),
        text_tokens=120,
        text_tokens_source="PixArt-alpha pipeline max_sequence_length 120",
        blocks=("transformer_blocks",),
        reduce={"num_layers": 1},
        inputs=_pixart_inputs,
    ),
    Family(
        id="pixart_sigma",
        transformer=Module(
            "diffusers",
            "PixArtTransformer2DModel",
            {
                "sample_size": 128,
                "num_layers": 28,
                "num_attention_heads": 16,
                "attention_head_dim": 72,
                "in_channels": 4,
                "out_channels": 8,
                "caption_channels": 4096,
                "cross_attention_dim": 1152,
                "use_additional_conditions": False,
            },
            "PixArt-Sigma-XL-2-1024-MS transformer",
            "PixArt-alpha/PixArt-Sigma-XL-2-1024-MS transformer config",
        ),
        text_encoders=(T5_XXL,),
        vae=(VAE_SD,),
        text_tokens=300,
        text_tokens_source="PixArt-Sigma pipeline max_sequence_length 300",
        blocks=("transformer_blocks",),
        reduce={"num_layers": 1},
        inputs=_pixart_inputs,
    ),
    Family(
        id="auraflow",
        transformer=Module(
            "diffusers",
            "AuraFlowTransformer2DModel",
            {
                "sample_size": 64,
                "patch_size": 2,
                "in_channels": 4,
                "num_mmdit_layers": 4,
                "num_single_dit_layers": 32,
                "attention_head_dim": 256,
                "num_attention_heads": 12,
                "joint_attention_dim": 2048,
                "caption_projection_dim": 3072,
                "out_channels": 4,
                "pos_embed_max_size": 9216,
            },
            "AuraFlow v0.3 transformer",
            "fal/AuraFlow-v0.3 transformer config",
        ),
        text_encoders=(UMT5_PILE_XL,),
        vae=(VAE_SD,),
        text_tokens=256,
        text_tokens_source="AuraFlow pipeline max_sequence_length 256",
        blocks=("joint_transformer_blocks", "single_transformer_blocks"),
        reduce={"num_mmdit_layers": 1, "num_single_dit_layers": 1},
        inputs=_auraflow_inputs,
    ),
    Family(
        id="cogview4",
        transformer=Module(
            "diffusers",
            "CogView4Transformer2DModel",
            {
                "num_layers": 28,
                "attention_head_dim": 128,
                "num_attention_heads": 32,
                "text_embed_dim": 4096,
                "time_embed_dim": 512,
                "condition_dim": 256,
                "in_channels": 16,
                "out_channels": 16,
                "patch_size": 2,
                "rope_axes_dim": [256, 256],
            },
            "CogView4-6B transformer",
            "THUDM/CogView4-6B transformer config",
        ),
        text_encoders=(GLM4_9B,),
        vae=(VAE_FLUX,),
        text_tokens=1024,
        text_tokens_source="CogView4 pipeline max_sequence_length 1024",
        blocks=("transformer_blocks",),
        reduce={"num_layers": 1},
        inputs=_cogview4_inputs,
    ),
    Family(
        id="prx_pixel",
        transformer=Module(
            "diffusers",
            "PRXTransformer2DModel",
            {
                "in_channels": 3,
                "patch_size": 16,
                "context_in_dim": 2048,
                "hidden_size": 3584,
                "mlp_ratio": 3.5,
                "num_heads": 28,
                "depth": 24,
                "axes_dim": [64, 64],
                "bottleneck_size": 768,
                "resolution_embeds": True,
            },
            "PRXPixel-7B transformer",
            "AI Toolkit prx_pixel_t2i/README.md: the released checkpoint's architecture",
        ),
        text_encoders=(QWEN3_VL_2B_TEXT,),
        vae=(),
        unknown="not measured: AI Toolkit vendors its own PRX transformer (the diffusers class is "
        "the latent PRX), so the block code would not be the trained one",
    ),
    Family(
        id="hidream_o1",
        transformer=Module(
            "transformers",
            "Qwen3VLForConditionalGeneration:Qwen3VLConfig",
            QWEN3_VL_8B.config,
            "HiDream-O1 (a Qwen3-VL-8B that generates pixels)",
            "AI Toolkit hidream/src/hidream_o1/model_config.py",
        ),
        text_encoders=(),
        vae=(),
        text_tokens=128,
        text_tokens_source="a short caption beside the image patches in one sequence",
        measured=Module(
            "transformers",
            "Qwen3VLTextModel:Qwen3VLTextConfig",
            QWEN3_VL_8B.config["text_config"],
            "Qwen3-VL-8B language model",
            "",
        ),
        blocks=("layers",),
        reduce={"num_hidden_layers": 1},
        inputs=_llm_inputs,
        params_note="pixel space: no text encoder (the prompt is part of the sequence), no VAE",
        note="pixel patches of 32: a 1024x1024 image is 32 x 32 = 1,024 tokens",
    ),
)


# Anima: a Cosmos-Predict2 2B transformer, a Qwen3-0.6B-Base text encoder with a text conditioner
# (diffusers' Anima pipeline docs), the Qwen-Image VAE.
_FAMILIES += (
    Family(
        id="anima",
        transformer=Module(
            "diffusers",
            "CosmosTransformer3DModel",
            {
                "in_channels": 16,
                "out_channels": 16,
                "num_attention_heads": 16,
                "attention_head_dim": 128,
                "num_layers": 28,
                "mlp_ratio": 4.0,
                "text_embed_dim": 1024,
                "adaln_lora_dim": 256,
                "max_size": (128, 240, 240),
                "patch_size": (1, 2, 2),
                "rope_scale": (1.0, 4.0, 4.0),
                "concat_padding_mask": True,
                "extra_pos_embed_type": None,
            },
            "Anima transformer",
            "diffusers scripts/convert_cosmos_to_diffusers.py Cosmos-2.0-Diffusion-2B-Text2Image: "
            "Anima is a Cosmos-Predict2 2B fine-tune (AI Toolkit anima/anima.py loads a "
            "CosmosTransformer3DModel)",
        ),
        text_encoders=(
            QWEN3_06B,
            Module(
                "diffusers",
                "AnimaTextConditioner",
                {},
                "Anima text conditioner",
                "class defaults (diffusers condition_embedder_anima.py)",
            ),
        ),
        vae=(VAE_QWEN,),
        text_tokens=512,
        text_tokens_source="AI Toolkit anima.py max_sequence_length 512",
        blocks=("transformer_blocks",),
        reduce={"num_layers": 1, "in_channels": 17, "concat_padding_mask": False},
        inputs=_cosmos_inputs,
    ),
)


# Iris-3B (AI Toolkit 2fa0bd87 extensions_built_in/diffusion_models/iris3b): its own pixel-space
# DiT, vendored in iris3b/src/dit.py, whose IrisConfig defaults are the release's ("defaults =
# Iris-3B"; the checkpoint's config.yaml overrides them when present). No diffusers or
# transformers class builds it, so the transformer is counted from those defaults layer by layer
# (IRIS3B_TRANSFORMER below); the text encoder is Qwen3-VL-4B-Instruct with its vision tower
# dropped (iris3b.py _load_text_encoder: drop_vision_tower), counted on the meta device.
QWEN3_VL_4B_TEXT = Module(
    "transformers",
    "Qwen3VLTextModel:Qwen3VLTextConfig",
    QWEN3_VL_4B.config["text_config"],
    "Qwen3-VL-4B-Instruct language model",
    "Qwen/Qwen3-VL-4B-Instruct config; AI Toolkit iris3b.py drops the vision tower",
)


def _iris3b_transformer() -> int:
    """Iris-3B's parameters from IrisConfig's defaults (iris3b/src/dit.py): 8 dual-stream and 16
    single-stream blocks of width 2560 (20 query heads, 5 KV heads, gated attention, sandwich
    norms, SwiGLU of 6826, shared-bias adaLN), the patch and timestep embedders, the
    layerwise text adapter over 12 encoder layers with its 2-block refiner, the text position
    table (300), two shared adaLN cores, and the 4-block per-pixel head."""
    d, head, kv = 2560, 128, 640
    swiglu = 3 * d * int(2 * int(d * 4.0) / 3)

    def linear(i: int, o: int, bias: bool = True) -> int:
        return i * o + (o if bias else 0)

    gqa = linear(d, d, False) + 2 * linear(d, kv, False)
    dual = 4 * d + 2 * gqa + 4 * head + 2 * linear(d, d) + 2 * d * d + 4 * d + 2 * swiglu + 12 * d
    single = 2 * d + gqa + 2 * head + d * d + linear(d, d) + 2 * d + swiglu + 6 * d
    layer_block = 2 * d + linear(d, 3 * d, False) + linear(d, d) + linear(d, 3328) + linear(3328, d)
    refiner_block = 2 * d + linear(d, 3 * d, False) + 2 * head + linear(d, d) + swiglu
    text = 2 * layer_block + linear(12, 1) + linear(d, d) + 2 * refiner_block + d
    pixel_block = (
        2 * 16
        + linear(d, 4 * 16 * 256)
        + linear(4096, 1280)
        + linear(1280, 4096)
        + linear(1280, 3 * 1280, False)
        + 2 * head
        + linear(1280, 1280)
        + linear(16, 64)
        + linear(64, 16)
    )
    embedders = linear(16 * 16 * 3, d) + linear(256, d) + linear(d, d)
    pixel = linear(3, 16) + 4 * pixel_block + 16 + linear(16, 3)
    return 8 * dual + 16 * single + embedders + text + 300 * d + 2 * linear(d, 6 * d) + pixel


_FAMILIES += (
    Family(
        id="iris3b",
        transformer=Module("none", "IrisDiT", {}, "Iris-3B pixel-space DiT", ""),
        text_encoders=(QWEN3_VL_4B_TEXT,),
        vae=(),
        card={
            "transformer": round(_iris3b_transformer() / 1e9, 3),
            "text_encoder": round(4_022_468_096 / 1e9, 3),
            "vae": 0.0,
            "source": f"Iris-3B transformer: AI Toolkit 2fa0bd87 iris3b/src/dit.py IrisConfig "
            f"defaults (= the release, README), counted layer by layer = "
            f"{_iris3b_transformer():,}; Qwen3-VL-4B-Instruct language model (vision tower "
            "dropped by iris3b.py): transformers Qwen3VLTextModel on the meta device = "
            "4,022,468,096; pixel space: no VAE",
        },
        unknown="not measured: AI Toolkit runs its own Iris DiT (iris3b/src/dit.py), which no "
        "library class builds, so there is no block to measure the same way",
    ),
)

# FIBO (Bria; AI Toolkit's fibo arch loads diffusers' BriaFiboPipeline from briaai/FIBO): a
# FLUX-layout DiT whose blocks also take one text-encoder layer each (DimFusion), SmolLM3-3B as
# that encoder, the Wan 2.2 VAE at patch 1. diffusers' BriaFiboTransformer2DModel defaults are
# FLUX.1's (19 double blocks, 64 input channels), not the release's: the paper's architecture
# table gives the blocks and heads, mflux's port of the release the input and text widths.
FIBO = {
    "patch_size": 1,
    "in_channels": 48,
    "num_layers": 8,
    "num_single_layers": 38,
    "attention_head_dim": 128,
    "num_attention_heads": 24,
    "joint_attention_dim": 4096,
    "text_encoder_dim": 2048,
    "axes_dims_rope": [16, 56, 56],
    "guidance_embeds": False,
}
_FAMILIES += (
    Family(
        id="fibo",
        transformer=Module(
            "diffusers",
            "BriaFiboTransformer2DModel",
            FIBO,
            "FIBO transformer",
            "the FIBO paper (arXiv 2511.06876) table tab:model_arch: 8 dual-stream and 38 "
            "single-stream blocks, FFN 12288, 24 heads of 128, RoPE axes (16, 56, 56); "
            "in_channels 48 (the Wan 2.2 VAE's latents at patch 1), joint_attention_dim 4096 "
            "(the encoder's last two layers side by side), text_encoder_dim 2048, no guidance "
            "embedding: filipstrand/mflux src/mflux/models/fibo/model/fibo_transformer/"
            "transformer.py, its port of the release",
        ),
        text_encoders=(SMOLLM3_3B,),
        vae=(VAE_WAN22,),
        text_tokens=1176,
        text_tokens_source="the median structured caption of the FIBO paper's table "
        "tab:caption_stats (1,176 tokens; mean 1,160, max 1,800): AI Toolkit fibo_model.py pads "
        "to the batch's longest caption (max_length 2048), no fixed length",
        blocks=("transformer_blocks", "single_transformer_blocks"),
        reduce={"num_layers": 1, "num_single_layers": 1},
        inputs=_fibo_inputs,
        note="VAE 16x16 spatial, patch 1: a 1024x1024 image is 64 x 64 = 4,096 tokens",
    ),
)

# --- counted by arithmetic: the archs whose transformer no library class builds ---------------
#
# AI Toolkit runs its own code for these (or loads a config only the hub holds); their released
# shapes are in the stored sources named below, so each is counted layer by layer from the code
# AI Toolkit runs (27a03a91) at those shapes. No block is measured: their activations are a
# FLUX-sized stand-in, and fit says so. The counting helpers reproduce the meta-device counts of
# the families they share a layout with (tests/domain/rules/test_memory_presets.py checks
# Chroma, Z-Image, Qwen2.5-VL-7B and Mistral-Small-3.1 to the parameter).

# Meta-device counts already in memory.yaml, reused where the same module is loaded.
COUNTED = {
    "T5-XXL encoder": 4_762_310_656,  # family flux
    "Qwen3-4B": 4_022_468_096,  # family zimage
    "Qwen3-VL-8B-Instruct": 8_767_123_696,  # family ideogram4
    "FLUX.1 VAE": 83_819_683,  # family flux
    "FLUX.2 VAE": 84_046_115,  # family flux2
}
_AITK = "AI Toolkit 27a03a91 extensions_built_in/diffusion_models"


def _linear(inputs: int, outputs: int, bias: bool = True) -> int:
    return inputs * outputs + (outputs if bias else 0)


def _flux_layout_trunk(width: int = 3072) -> int:
    """Chroma's 19 double and 38 single blocks (no modulation layers: the distilled guidance
    approximator gives every block its vectors), the approximator (64 -> 5120, 5 residual
    MLPs, -> width) and the T5 projection, as chroma/src/layers.py builds them."""
    head, mlp = 128, 4 * width
    double = 2 * (
        _linear(width, 3 * width)
        + 2 * head
        + _linear(width, width)
        + _linear(width, mlp)
        + _linear(mlp, width)
    )
    single = _linear(width, 3 * width + mlp) + _linear(width + mlp, width) + 2 * head
    approximator = _linear(64, 5120) + 5 * (2 * _linear(5120, 5120) + 5120) + _linear(5120, width)
    return 19 * double + 38 * single + approximator + _linear(4096, width)


def chroma_transformer() -> int:
    """Chroma (latent): the trunk, its 64-channel input and output linears."""
    return _flux_layout_trunk() + _linear(64, 3072) + _linear(3072, 64)


def chroma_radiance_transformer() -> int:
    """Chroma Radiance (chroma/src/radiance.py chroma_params): the trunk, a 16 px patch conv
    from RGB, and the NeRF head: an embedder of the pixel and 8x8 DCT features (67 -> 64), 4
    blocks whose MLP weights a linear makes from the token (3072 -> 3 x 64 x 256 each), a 3x3
    output conv."""
    d = 3072
    nerf = _linear(3 + 8 * 8, 64) + 4 * (_linear(d, 3 * 64 * 64 * 4) + 64) + 64 + 64 * 3 * 9 + 3
    return _flux_layout_trunk() + 3 * d * 16 * 16 + d + nerf


def f_lite_transformer() -> int:
    """F Lite's DiT (f_light/src/model.py) at the release's shape: 40 blocks of width 3072
    (self-attention with residual value, cross-attention to T5's 4096, GELU MLP x4, adaLN of 9
    vectors; no biases on the attention, no norm weights: train_bias_and_rms false), patch 2
    over 16 latent channels, 16 register tokens, the time MLP, the final modulation."""
    d, m = 3072, 4 * 3072
    block = (
        _linear(d, 3 * d, False)
        + _linear(d, d, False)
        + 1
        + _linear(d, d, False)
        + _linear(4096, 2 * d, False)
        + _linear(d, d, False)
        + _linear(d, m)
        + _linear(m, d)
        + _linear(d, 9 * d)
    )
    rest = 16 * d * 2 * 2 + d + 16 * d + _linear(d, m) + _linear(m, d) + _linear(d, 2 * d)
    return 40 * block + rest + _linear(d, 2 * 2 * 16)


def _zimage_trunk() -> int:
    """Z-Image's trunk (diffusers ZImageTransformer2DModel, Z-Image-Turbo's config): 30
    modulated blocks and 2 noise refiners of width 3840 (SwiGLU 10240, adaLN from 256), 2
    context refiners without modulation, the timestep MLP, the caption embedder, two pad
    tokens; without the patch embedder and the final layer."""
    d, head = 3840, 128
    core = 4 * _linear(d, d, False) + 2 * head + 3 * _linear(d, int(d / 3 * 8), False) + 4 * d
    modulated = core + _linear(256, 4 * d)
    timestep = _linear(256, 1024) + _linear(1024, 256)
    return 32 * modulated + 2 * core + timestep + 2560 + _linear(2560, d) + 2 * d


def zimage_transformer() -> int:
    """Z-Image: the trunk, the 2x2 patch embedder over 16 channels, the final layer."""
    return _zimage_trunk() + _linear(64, 3840) + _linear(3840, 64) + _linear(256, 3840)


def zimage_l2p_transformer() -> int:
    """Z-Image L2P (z_image/z_image_l2p_model.py): the trunk with a 16 px RGB patch embedder
    (768 -> 3840), its final layer deleted, and the pixel U-Net decoder (MicroDiffusionModel:
    convs 3-64-128-256-512, a 1x1 bottleneck over 512 + 3840, the mirrored decoder)."""

    def conv3(inputs: int, outputs: int) -> int:
        return inputs * outputs * 9 + outputs

    decoder = (
        conv3(3, 64)
        + conv3(64, 128)
        + conv3(128, 256)
        + conv3(256, 512)
        + (512 + 3840) * 512
        + 512
        + conv3(512, 512)
        + conv3(1024, 256)
        + conv3(256, 256)
        + conv3(512, 128)
        + conv3(128, 128)
        + conv3(256, 64)
        + conv3(64, 64)
        + conv3(128, 64)
        + 64 * 3
        + 3
    )
    return _zimage_trunk() + _linear(768, 3840) + decoder


def zeta_chroma_transformer() -> int:
    """Zeta-Chroma (zeta_chroma/zeta_chroma_transformer.py ZImageDCTParams, in_channels 32 x 32
    x 3 at patch 1, as zeta_chroma_model.py builds it): the Z-Image trunk, a 3072 -> 3840 patch
    embedder, and the DCT decoder (the condition linear, an embedder of the 3072 pixels and 64
    DCT features, 4 adaLN residual MLPs of 3840, the output linear)."""
    d, pixels = 3840, 32 * 32 * 3
    decoder = (
        _linear(d, d)
        + _linear(pixels + 8 * 8, d)
        + 4 * (2 * d + 2 * _linear(d, d) + _linear(d, 3 * d))
        + _linear(d, pixels)
    )
    return _zimage_trunk() + _linear(pixels, d) + decoder


def ernie_image_transformer() -> int:
    """ERNIE-Image (AI Toolkit ernie_image/transformer.py ErnieImageTransformer2DModel) at the
    release's shape: 36 shared-adaLN blocks of width 4096 (32 heads of 128, q/k RMS norms,
    gated GELU MLP of 12288, no biases), the 1x1 patch embedder over 128 channels, the text
    projection from 3072, the timestep MLP, the shared adaLN (6 vectors), the final layer."""
    d, ffn = 4096, 12288
    block = 2 * d + 4 * _linear(d, d, False) + 2 * 128 + 3 * _linear(d, ffn, False)
    rest = (
        128 * d
        + d
        + _linear(3072, d, False)
        + 2 * _linear(d, d)
        + _linear(d, 6 * d)
        + _linear(d, 2 * d)
        + _linear(d, 128)
    )
    return 36 * block + rest


def _mistral_lm(hidden: int, inter: int, layers: int, vocab: int, head: bool) -> int:
    """A Mistral language model (32 query heads and 8 KV heads of 128, SwiGLU, no biases)."""
    attention = _linear(hidden, 4096, False) + 2 * _linear(hidden, 1024, False)
    block = attention + _linear(4096, hidden, False) + 3 * _linear(hidden, inter, False)
    return vocab * hidden * (2 if head else 1) + layers * (block + 2 * hidden) + hidden


def _pixtral_with_projector(text_hidden: int) -> int:
    """Mistral 3's Pixtral vision tower (24 layers of 1024, SwiGLU 4096, patch 14, no biases)
    and its projector (a norm, the 2x2 patch merger, two linears to the text width)."""
    tower = (
        3 * 1024 * 14 * 14
        + 1024
        + 24 * (4 * _linear(1024, 1024, False) + 3 * _linear(1024, 4096, False) + 2 * 1024)
    )
    projector = (
        1024
        + _linear(4 * 1024, 1024, False)
        + _linear(1024, text_hidden, False)
        + _linear(text_hidden, text_hidden, False)
    )
    return tower + projector


def mistral_small_31() -> int:
    """Mistral-Small-3.1-24B as Mistral3ForConditionalGeneration (untied head)."""
    return _mistral_lm(5120, 32768, 40, 131072, True) + _pixtral_with_projector(5120)


def ernie_text_encoder() -> int:
    """ERNIE-Image's text encoder as AutoModel builds it (Mistral3Model: no LM head): a
    Ministral-3-3B-shaped language model (mflux's port: 26 layers of 3072, SwiGLU 9216, vocab
    131072) and the Mistral 3 vision tower and projector."""
    return _mistral_lm(3072, 9216, 26, 131072, False) + _pixtral_with_projector(3072)


def _qwen25_vl(
    hidden: int, inter: int, layers: int, heads: int, kv: int, vocab: int, tied: bool
) -> int:
    """Qwen2_5_VLForConditionalGeneration: the Qwen2 language model (q/k/v biases), its head
    unless tied, and the 32-layer vision tower of 1280 with its 2x2 merger."""
    head_dim = hidden // heads
    attention = _linear(hidden, hidden) + 2 * _linear(hidden, kv * head_dim) + hidden * hidden
    lm = vocab * hidden + layers * (attention + 3 * hidden * inter + 2 * hidden) + hidden
    vision = 3 * 2 * 14 * 14 * 1280 + 32 * (
        2 * 1280
        + _linear(1280, 3840)
        + _linear(1280, 1280)
        + 2 * _linear(1280, 3420)
        + _linear(3420, 1280)
    )
    merger = 1280 + _linear(5120, 5120) + _linear(5120, hidden)
    return lm + (0 if tied else vocab * hidden) + vision + merger


def qwen25_vl_7b() -> int:
    return _qwen25_vl(3584, 18944, 28, 28, 4, 152064, False)


def qwen25_vl_3b() -> int:
    return _qwen25_vl(2048, 11008, 36, 16, 2, 151936, True)


def _lumina_block(width: int, heads: int, kv_heads: int, modulated: bool) -> int:
    """An OmniGen2 / Boogu block (block_lumina2.py): GQA attention with q/k RMS norms, a SwiGLU
    of 4 x width rounded up to 256, RMS norms, and LuminaRMSNormZero (1024 -> 4 x width)."""
    head = width // heads
    inner = 256 * ((4 * width + 255) // 256)
    attention = 2 * _linear(width, width, False) + 2 * _linear(width, kv_heads * head, False)
    core = attention + 2 * head + 3 * _linear(width, inner, False)
    if modulated:
        return core + _linear(1024, 4 * width) + width + 3 * width
    return core + 4 * width


def _lumina_rest(width: int, text: int) -> int:
    """Their embedders and head: the 2x2 patch embedders of the target and the reference
    images (16 channels), the timestep MLP (256 -> 1024), the caption norm and projection,
    the output norm's modulation and projection, 5 image-index embeddings."""
    return (
        2 * _linear(64, width)
        + _linear(256, 1024)
        + _linear(1024, 1024)
        + text
        + _linear(text, width)
        + _linear(1024, width)
        + _linear(width, 64)
        + 5 * width
    )


def omnigen2_transformer() -> int:
    """OmniGen2 (omnigen2/src/models/transformers/transformer_omnigen2.py) at the release's
    config: 32 blocks of 2520 (21 heads, 7 KV heads), 2 noise, 2 reference and 2 context
    refiners, text features of 2048 (Qwen2.5-VL-3B's width)."""
    d = 2520
    refiners = 4 * _lumina_block(d, 21, 7, True) + 2 * _lumina_block(d, 21, 7, False)
    return 32 * _lumina_block(d, 21, 7, True) + refiners + _lumina_rest(d, 2048)


def boogu_transformer() -> int:
    """Boogu-Image (boogu_image/src/transformer.py BooguImageTransformer2DModel defaults = the
    release's): 8 double-stream blocks (a joint attention whose processor holds separate image
    and instruction q/k/v/out, an image self-attention, two SwiGLUs, five LuminaRMSNormZero,
    seven RMS norms) and 32 single-stream blocks of 3360 (28 heads, 7 KV heads), 2 noise, 2
    reference and 2 context refiners, instruction features of 4096."""
    d, head, kv = 3360, 120, 7 * 120
    inner = 256 * ((4 * d + 255) // 256)
    streams = 2 * (2 * _linear(d, d, False) + 2 * _linear(d, kv, False))
    double = (
        2 * head
        + _linear(d, d, False)
        + streams
        + 2 * _linear(d, d, False)
        + 2 * _linear(d, kv, False)
        + 2 * head
        + 2 * 3 * _linear(d, inner, False)
        + 5 * (_linear(1024, 4 * d) + d)
        + 7 * d
    )
    refiners = 4 * _lumina_block(d, 28, 7, True) + 2 * _lumina_block(d, 28, 7, False)
    return 8 * double + 32 * _lumina_block(d, 28, 7, True) + refiners + _lumina_rest(d, 4096)


def _card(transformer: int, text: int, vae: int, source: str) -> dict[str, Any]:
    return {
        "transformer": round(transformer / 1e9, 3),
        "text_encoder": round(text / 1e9, 3),
        "vae": round(vae / 1e9, 3),
        "source": source,
    }


_STAND_IN = (
    "not measured: AI Toolkit runs its own {} code for it, which no library class builds, so "
    "there is no block to measure the same way"
)
_FAMILIES += (
    Family(
        id="chroma_radiance",
        transformer=Module("none", "ChromaRadiance", {}, "Chroma Radiance transformer", ""),
        text_encoders=(T5_XXL,),
        vae=(),
        card=_card(
            chroma_radiance_transformer(),
            COUNTED["T5-XXL encoder"],
            0,
            f"Chroma Radiance transformer: {_AITK}/chroma/src/radiance.py chroma_params (19 "
            "double and 38 single blocks of 3072, the loader reads the depths from the "
            "checkpoint; Chroma1's), counted layer by layer = "
            f"{chroma_radiance_transformer():,}; T5-XXL encoder (ostris/Flex.1-alpha "
            f"text_encoder_2, chroma_radiance_model.py): the flux family's meta-device count = "
            f"{COUNTED['T5-XXL encoder']:,}; pixel space: no VAE",
        ),
        unknown=_STAND_IN.format("Chroma Radiance (chroma/src/radiance.py)"),
    ),
    Family(
        id="f_lite",
        transformer=Module("none", "FLiteDiT", {}, "F Lite transformer", ""),
        text_encoders=(T5_XXL,),
        vae=(VAE_FLUX,),
        card=_card(
            f_lite_transformer(),
            COUNTED["T5-XXL encoder"],
            COUNTED["FLUX.1 VAE"],
            f"F Lite transformer: {_AITK}/f_light/src/model.py DiT at the release's shape (the "
            "F Lite technical report: 40 layers, hidden 3072, 10B; its release code, "
            "sippycoder/f-lite 84664e9 f_lite/pt.py: heads of 256, MLP x4, cross-attention "
            "from 4096, residual value, train_bias_and_rms false, 16 channels at patch 2), "
            f"counted layer by layer = {f_lite_transformer():,}; T5-XXL encoder (the release "
            "pairs FLUX.1-schnell's text_encoder_2): the flux family's meta-device count = "
            f"{COUNTED['T5-XXL encoder']:,}; FLUX.1 VAE = {COUNTED['FLUX.1 VAE']:,}; F Lite "
            "7B (Freepik/F-Lite-7B) has fewer blocks, which no stored source gives: this "
            "counts the 10B",
        ),
        unknown=_STAND_IN.format("F Lite (f_light/src/model.py)"),
    ),
    Family(
        id="zimage_l2p",
        transformer=Module("none", "ZImageL2P", {}, "Z-Image L2P transformer", ""),
        text_encoders=(QWEN3_4B,),
        vae=(),
        card=_card(
            zimage_l2p_transformer(),
            COUNTED["Qwen3-4B"],
            0,
            f"Z-Image L2P transformer: {_AITK}/z_image/z_image_l2p_model.py "
            "(ZIMAGE_DEFAULT_CONFIG = Z-Image-Turbo's, in_channels 3 at patch 16, the final "
            "layer deleted, the MicroDiffusionModel pixel decoder), counted layer by layer = "
            f"{zimage_l2p_transformer():,}; Qwen3-4B (Tongyi-MAI/Z-Image-Turbo text_encoder, the "
            "UI's extras_name_or_path): the zimage family's meta-device count = "
            f"{COUNTED['Qwen3-4B']:,}; pixel space: no VAE",
        ),
        unknown=_STAND_IN.format("Z-Image L2P (z_image/z_image_l2p_model.py)"),
    ),
    Family(
        id="zeta_chroma",
        transformer=Module("none", "ZImageDCT", {}, "Zeta-Chroma transformer", ""),
        text_encoders=(QWEN3_4B,),
        vae=(),
        card=_card(
            zeta_chroma_transformer(),
            COUNTED["Qwen3-4B"],
            0,
            f"Zeta-Chroma transformer: {_AITK}/zeta_chroma/zeta_chroma_transformer.py "
            "ZImageDCTParams defaults with in_channels 32 x 32 x 3 at patch 1 "
            "(zeta_chroma_model.py builds it so and loads the checkpoint strictly), counted "
            f"layer by layer = {zeta_chroma_transformer():,}; Qwen3-4B "
            "(Tongyi-MAI/Z-Image-Turbo text_encoder, the UI's extras_name_or_path): the zimage "
            f"family's meta-device count = {COUNTED['Qwen3-4B']:,}; pixel space: no VAE",
        ),
        unknown=_STAND_IN.format("Zeta-Chroma (zeta_chroma/zeta_chroma_transformer.py)"),
    ),
    Family(
        id="ernie_image",
        transformer=Module("none", "ErnieImage", {}, "ERNIE-Image transformer", ""),
        text_encoders=(),
        vae=(VAE_FLUX2,),
        card=_card(
            ernie_image_transformer(),
            ernie_text_encoder(),
            COUNTED["FLUX.2 VAE"],
            f"ERNIE-Image transformer: {_AITK}/ernie_image/transformer.py at the release's "
            "shape (sgl-project/sglang multimodal_gen/configs/models/dits/ernie_image.py and "
            "filipstrand/mflux 97ac5e6 models/ernie_image: 36 layers of 4096, 32 heads, FFN "
            "12288, 128 channels at patch 1, text 3072), counted layer by layer = "
            f"{ernie_image_transformer():,}; text encoder: AutoModel of the release's "
            "text_encoder (a Mistral 3 checkpoint: mflux reads its language_model.model. "
            "weights), a Ministral-3-3B-shaped language model (mflux: 26 layers of 3072, "
            "SwiGLU 9216, vocab 131072) = "
            f"{_mistral_lm(3072, 9216, 26, 131072, False):,} and the Mistral 3 Pixtral tower "
            "and projector (Mistral-Small-3.1's vision config: an assumption, the Ministral 3 "
            f"family's own ~0.4 B) = {_pixtral_with_projector(3072):,}; FLUX.2 VAE "
            f"(ernie_image.py AutoencoderKLFlux2) = {COUNTED['FLUX.2 VAE']:,}",
        ),
        unknown=_STAND_IN.format("ERNIE-Image (ernie_image/transformer.py)"),
    ),
    Family(
        id="boogu_image",
        transformer=Module("none", "BooguImage", {}, "Boogu-Image transformer", ""),
        text_encoders=(QWEN3_VL_8B,),
        vae=(VAE_FLUX,),
        card=_card(
            boogu_transformer(),
            COUNTED["Qwen3-VL-8B-Instruct"] - 151936 * 4096,
            COUNTED["FLUX.1 VAE"],
            f"Boogu-Image transformer: {_AITK}/boogu_image/src/transformer.py "
            "BooguImageTransformer2DModel defaults (= sgl-project/sglang multimodal_gen/"
            "configs/models/dits/boogu_image.py; the release README: 10B), counted layer by "
            f"layer = {boogu_transformer():,}; text encoder: AutoModel of the release's mllm "
            "(Qwen3VLModel, no LM head), instruction features of 4096: Qwen3-VL-8B's width, "
            "the ideogram4 family's meta-device count less its untied head (151,936 x 4,096) = "
            f"{COUNTED['Qwen3-VL-8B-Instruct'] - 151936 * 4096:,}; FLUX.1 VAE "
            f"(boogu_image.py) = {COUNTED['FLUX.1 VAE']:,}",
        ),
        unknown=_STAND_IN.format("Boogu-Image (boogu_image/src/transformer.py)"),
    ),
    Family(
        id="omnigen2",
        transformer=Module("none", "OmniGen2", {}, "OmniGen2 transformer", ""),
        text_encoders=(),
        vae=(VAE_FLUX,),
        card=_card(
            omnigen2_transformer(),
            qwen25_vl_3b(),
            COUNTED["FLUX.1 VAE"],
            f"OmniGen2 transformer: {_AITK}/omnigen2/src/models/transformers/"
            "transformer_omnigen2.py at the release's config (vllm-project/vllm-omni's "
            "OmniGen2 pipeline test and the DFloat11 OmniGen2 loaders: 32 layers of 2520, 21 "
            "heads, 7 KV heads, text 2048; the OmniGen2 README: a 4B diffusion model), counted "
            f"layer by layer = {omnigen2_transformer():,}; Qwen2.5-VL-3B-Instruct (the "
            "README's 3B VLM, text features 2048; its published config: 36 layers of 2048, "
            "SwiGLU 11008, 16 heads, 2 KV heads, tied), Qwen2_5_VLForConditionalGeneration "
            f"counted layer by layer = {qwen25_vl_3b():,}; VAE: a 16-channel AutoencoderKL "
            f"(the transformer's in_channels), FLUX.1's assumed = {COUNTED['FLUX.1 VAE']:,}",
        ),
        unknown=_STAND_IN.format(
            "OmniGen2 (omnigen2/src/models/transformers/transformer_omnigen2.py)"
        ),
    ),
)


# Which modules AI Toolkit adapts, per family: the model class its `target_lora_modules` (or
# lora_special.py's is_* flag) names, the block names `transformer_only` keeps (the model's
# get_transformer_block_names(), else lora_special.py's fallbacks), and whether the toolkit's own
# class fuses the projections that read one tensor (one fp32 copy of it, not one per projection).
_LS = "toolkit/lora_special.py LoRASpecialNetwork.create_modules"
_EXT = "extensions_built_in/diffusion_models"


def _linears(where: str, blocks: str, source: str) -> str:
    return f"every Linear of {blocks}{where} ({source})"


TOOLKIT_ADAPTERS: Mapping[str, Mapping[str, Any]] = {
    "flux": {
        "adapted": _linears(
            "",
            "transformer_blocks and single_transformer_blocks",
            f"{_LS}: is_flux targets FluxTransformer2DModel; transformer_only keeps the names "
            "with transformer_blocks",
        )
    },
    "flex": {
        "adapted": _linears(
            "",
            "transformer_blocks and single_transformer_blocks",
            f"{_EXT}/../flex2/flex2.py target_lora_modules FluxTransformer2DModel; {_LS}: "
            "transformer_only keeps the names with transformer_blocks",
        )
    },
    "chroma": {
        "adapted": _linears(
            " of the toolkit's own Chroma class (fused qkv and linear1)",
            "double_blocks and single_blocks",
            f"{_EXT}/chroma/chroma_model.py target_lora_modules Chroma; {_LS}: transformer_only "
            "keeps single_blocks and double_blocks; chroma/src/layers.py fuses qkv",
        ),
        "fused": True,
    },
    "flux2": {
        "adapted": _linears(
            " of the toolkit's own Flux2 class (fused qkv)",
            "double_blocks and single_blocks",
            f"{_EXT}/flux2/flux2_model.py target_lora_modules Flux2, "
            "get_transformer_block_names; flux2/src/model.py fuses qkv and linear1",
        ),
        "fused": True,
    },
    "qwen_image": {
        "adapted": _linears(
            "",
            "transformer_blocks",
            f"{_EXT}/qwen_image/qwen_image.py target_lora_modules QwenImageTransformer2DModel, "
            "get_transformer_block_names",
        )
    },
    "krea2": {
        "adapted": _linears(
            " of the toolkit's own SingleStreamDiT (separate wq, wk, wv, gate as in diffusers)",
            "blocks",
            f"{_EXT}/krea2/krea2.py target_lora_modules SingleStreamDiT, "
            "get_transformer_block_names",
        )
    },
    "wan21_14b": {
        "adapted": _linears(
            "",
            "blocks",
            "toolkit/models/wan21/wan21.py target_lora_modules WanTransformer3DModel, "
            "get_transformer_block_names",
        )
    },
    "wan22_14b": {
        "adapted": _linears(
            " of both experts",
            "blocks",
            f"{_EXT}/wan22/wan22_14b_model.py target_lora_modules DualWanTransformer3DModel; "
            "Wan21.get_transformer_block_names",
        )
    },
    "ltx2": {
        "adapted": _linears(
            " (video and audio streams)",
            "transformer_blocks",
            f"{_EXT}/ltx2/ltx2.py target_lora_modules LTX2VideoTransformer3DModel, "
            "get_transformer_block_names",
        )
    },
    "minimax_h3": {
        "adapted": _linears(
            " of the toolkit's own MiniMaxH3Transformer (fused qkv_proj)",
            "blocks",
            f"{_EXT}/minimax_h3/minimax_h3.py target_lora_modules MiniMaxH3Transformer, "
            "get_transformer_block_names; minimax_h3/src/transformer.py fuses qkv_proj",
        ),
        "fused": True,
    },
    "ideogram4": {
        "adapted": _linears(
            "",
            "layers",
            f"{_EXT}/ideogram4/ideogram4.py target_lora_modules Ideogram4Transformer2DModel, "
            "get_transformer_block_names",
        )
    },
    "zimage": {
        "adapted": _linears(
            "; the noise_refiner and context_refiner blocks stay frozen",
            "layers",
            f"{_EXT}/z_image/z_image.py target_lora_modules ZImageTransformer2DModel, "
            "get_transformer_block_names = layers",
        ),
        "adapted_blocks": ("layers",),
    },
    "sd3": {
        "adapted": _linears(
            "",
            "transformer_blocks",
            f"{_LS}: is_v3 targets SD3Transformer2DModel; transformer_only keeps the names with "
            "transformer_blocks",
        )
    },
    "anima": {
        "adapted": _linears(
            "; the text conditioner only with model_kwargs.train_text_conditioner",
            "transformer_blocks",
            f"{_EXT}/anima/anima.py target_lora_modules CosmosTransformer3DModel, "
            "get_transformer_block_names",
        )
    },
    "pixart": {
        "adapted": _linears(
            "",
            "transformer_blocks",
            f"{_LS}: is_pixart targets PixArtTransformer2DModel; transformer_only keeps the names "
            "with transformer_blocks",
        )
    },
    "auraflow": {
        "adapted": _linears(
            " (and every other Linear of the model: no fallback name matches AuraFlow's)",
            "joint_transformer_blocks and single_transformer_blocks",
            f"{_LS}: is_auraflow targets AuraFlowTransformer2DModel; transformer_only has no "
            "block names for it",
        )
    },
    "cogview4": {
        "adapted": _linears(
            "",
            "transformer_blocks",
            f"toolkit/models/cogview4.py target_lora_modules CogView4Transformer2DModel; {_LS}: "
            "transformer_only keeps the names with transformer_blocks",
        )
    },
    "fibo": {
        "adapted": _linears(
            "",
            "transformer_blocks and single_transformer_blocks",
            f"AI Toolkit PR 732 (16566f51) {_EXT}/fibo/fibo_model.py target_lora_modules "
            f"BriaFiboTransformer2DModel, no get_transformer_block_names; {_LS}: "
            "transformer_only keeps the names with transformer_blocks (the model has that "
            "attribute), so caption_projection and the embedders stay frozen",
        )
    },
    "hidream": {
        "adapted": _linears(
            " (the attention, every expert and the shared experts; the router is no Linear)",
            "double_stream_blocks and single_stream_blocks",
            f"{_EXT}/hidream/hidream_model.py target_lora_modules HiDreamImageTransformer2DModel, "
            "get_transformer_block_names",
        )
    },
    "lumina2": {
        "adapted": _linears(
            "",
            "layers, noise_refiner and context_refiner",
            f"{_LS}: is_lumina2 targets Lumina2Transformer2DModel; transformer_only keeps the "
            "names with layers, noise_refiner or context_refiner",
        )
    },
    "hidream_o1": {
        "adapted": _linears(
            "",
            "model.language_model.layers",
            f"{_EXT}/hidream/hidream_o1_model.py target_lora_modules "
            "Qwen3VLForConditionalGeneration, get_transformer_block_names",
        )
    },
}
for _same, _as in (
    ("flux2_klein_4b", "flux2"),
    ("flux2_klein_9b", "flux2"),
    ("wan21_1b", "wan21_14b"),
    ("wan22_5b", "wan21_14b"),
    ("ltx23", "ltx2"),
    ("pixart_sigma", "pixart"),
    ("sd35_large", "sd3"),
    ("sd35_medium", "sd3"),
):
    TOOLKIT_ADAPTERS = {**TOOLKIT_ADAPTERS, _same: TOOLKIT_ADAPTERS[_as]}

FAMILIES: tuple[Family, ...] = tuple(
    replace(family, **TOOLKIT_ADAPTERS.get(family.id, {})) for family in _FAMILIES
)


# --- counting --------------------------------------------------------------------------------


def _class(module: Module) -> tuple[Any, Any]:
    name, _, config_name = module.name.partition(":")
    library = __import__(module.library)
    return getattr(library, name), getattr(library, config_name) if config_name else None


def build_meta(module: Module) -> Any:
    """The module's class with its configuration, on the meta device."""
    import torch

    cls, config_cls = _class(module)
    with torch.device("meta"):
        if config_cls is None:
            return cls(**module.config)
        config = config_cls(**module.config)
        if hasattr(cls, "_from_config"):
            return cls._from_config(config)
        return cls(config)


def count(module: Module) -> int:
    """Exact parameter count (shared weights once)."""
    model = build_meta(module)
    return sum(p.numel() for p in model.parameters())


def billions(n: int) -> float:
    return round(n / 1e9, 3)


# --- adapters as AI Toolkit builds them ----------------------------------------------------------
#
# toolkit/lora_special.py (LoRASpecialNetwork.create_modules) puts a module beside every Linear
# (LINEAR_MODULES) and 1x1 Conv2d of the model class the arch names in `target_lora_modules`;
# with `transformer_only` (NetworkConfig's default) only inside the names the model's
# `get_transformer_block_names()` gives; 3x3 convolutions only with `network.conv` (LoCon).
# BaseSDTrainProcess casts the network to float32 (`network.force_to(..., dtype=torch.float32)`)
# and trains without autocast, and toolkit/network_mixins.py (ToolkitModuleMixin.forward) casts
# each adapted module's input to the adapter's dtype ("always cast to float32") before
# `lora_down`: every adapted module keeps its own fp32 copy of its input for the adapter's weight
# gradient. toolkit/models/lokr.py (LokrModule._call_forward_fast_linear) instead keeps the
# input in the base's dtype and folds the Kronecker factors through it.

LORA_RANK = 16  # AI Toolkit's example configs: linear 16 (the rank barely moves the saved bytes)
ADAPTERS = ("none", "lora", "lora_autocast", "lokr")
"""What a block is measured with: none (frozen), lora (AI Toolkit's fp32 path), lora_autocast
(the adapter under bf16 autocast, as the shared GPU rows were taken), lokr (its fast path)."""


def _factor(dimension: int) -> tuple[int, int]:
    """LyCORIS' factorization with factor -1: m <= n, m * n = dimension, m + n smallest."""
    m, n = 1, dimension
    for candidate in range(2, math.isqrt(dimension) + 1):
        if dimension % candidate == 0:
            m, n = candidate, dimension // candidate
    return m, n


class _Copies:
    """The fp32 copies of one forward, by input: a class that fuses the projections reading one
    tensor (one Linear for q, k and v) casts that tensor once, not once per projection."""

    def __init__(self) -> None:
        self.by_input: dict[int, tuple[Any, Any]] = {}

    def of(self, x: Any, dtype: Any) -> Any:
        key = id(x)
        found = self.by_input.get(key)
        if found is None or found[0] is not x:
            found = (x, x.to(dtype))
            self.by_input[key] = found
        return found[1]

    def clear(self) -> None:
        self.by_input.clear()


def attach(
    block: Any, adapter: str, conv3x3: bool = False, fused: bool = False, where: str = ""
) -> _Copies:
    """Put ``adapter`` beside every Linear and 1x1 Conv2d of ``block`` (3x3 ones too with
    ``conv3x3``), as AI Toolkit does; the adapters' weights are the block's only trainable ones.
    ``fused``: the toolkit's own class of this arch fuses the projections that share an input;
    ``where``: only the modules with this in their name (the GPU rows' SDXL: ``attentions``)."""
    import torch

    copies = _Copies()
    if adapter == "none":
        return copies

    def adapted(module: Any) -> bool:
        if isinstance(module, torch.nn.Conv2d):
            return module.kernel_size == (1, 1) or conv3x3
        return isinstance(module, torch.nn.Linear)

    targets = [
        module for name, module in block.named_modules() if where in name and adapted(module)
    ]
    for module in targets:
        _adapt(module, adapter, copies, fused)
    return copies


def _adapt(module: Any, adapter: str, copies: _Copies, fused: bool) -> None:
    import torch

    fp32 = torch.float32
    original = module.forward
    conv = isinstance(module, torch.nn.Conv2d)
    if adapter == "lokr" and not conv:
        in_m, in_n = _factor(module.in_features)
        out_l, out_k = _factor(module.out_features)
        module.lokr_w1 = torch.nn.Parameter(torch.zeros(out_l, in_m, dtype=fp32))
        module.lokr_w2_a = torch.nn.Parameter(torch.zeros(out_k, LORA_RANK, dtype=fp32))
        module.lokr_w2_b = torch.nn.Parameter(torch.zeros(LORA_RANK, in_n, dtype=fp32))

        def lokr_forward(x: Any) -> Any:
            base = original(x)
            dtype = base.dtype
            factors = (module.lokr_w1, module.lokr_w2_a, module.lokr_w2_b)
            a, w2a, w2b = (factor.to(dtype) for factor in factors)
            grid = x.to(dtype).unflatten(-1, (in_m, in_n))
            tmp = torch.einsum("...qs,rs->...qr", grid, w2b)
            tmp = torch.einsum("...qr,or->...qo", tmp, w2a)
            delta = torch.einsum("...qo,pq->...po", tmp, a).flatten(-2, -1)
            return (base + delta).to(x.dtype)

        module.forward = lokr_forward
        return
    if conv:
        module.lora_down = torch.nn.Conv2d(
            module.in_channels,
            LORA_RANK,
            module.kernel_size,
            module.stride,
            module.padding,
            bias=False,
            dtype=fp32,
        )
        module.lora_up = torch.nn.Conv2d(LORA_RANK, module.out_channels, 1, bias=False, dtype=fp32)
    else:
        module.lora_down = torch.nn.Linear(module.in_features, LORA_RANK, bias=False, dtype=fp32)
        module.lora_up = torch.nn.Linear(LORA_RANK, module.out_features, bias=False, dtype=fp32)
    multiplier = torch.ones(1, dtype=fp32)

    def lora_forward(x: Any) -> Any:
        base = original(x)
        if adapter == "lora_autocast":  # the whole forward runs under bf16 autocast
            return base + module.lora_up(module.lora_down(x))
        lora_input = copies.of(x, fp32) if fused else x.to(fp32)
        out = module.lora_up(module.lora_down(lora_input))
        shape = (-1,) + (1,) * (out.dim() - 1)
        return base + (out * multiplier.view(shape)).to(base.dtype)

    module.forward = lora_forward


# CUDA autocast runs these in float32 (aten's autocast_mode.cpp, the fp32 and fp32_set_opt_dtype
# lists, the ones a diffusion block calls); CPU autocast does not, so the GPU rows' setup is
# reproduced on the CPU by upcasting their low-precision inputs.
_CUDA_AUTOCAST_FP32 = frozenset(
    {
        "layer_norm",
        "group_norm",
        "pow",
        "__pow__",
        "rsqrt",
        "exp",
        "log",
        "softmax",
        "log_softmax",
        "sum",
        "cumsum",
    }
)


def _autocast(adapter: str) -> Any:
    """The forward's autocast: none on AI Toolkit's own path, bf16 for the GPU rows' setup."""
    import torch

    if adapter != "lora_autocast":
        return contextlib.nullcontext()
    return torch.autocast("cpu", dtype=torch.bfloat16)


def _cuda_policy(adapter: str) -> Any:
    """For the GPU rows' setup: while autocast is on (the forward, and a checkpointed block's
    recomputation), the ops CUDA's autocast runs in float32 get float32 inputs."""
    import torch
    from torch.overrides import TorchFunctionMode

    if adapter != "lora_autocast":
        return contextlib.nullcontext()

    def up(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.dtype in (torch.bfloat16, torch.float16):
            return value.float()
        return value

    class CudaPolicy(TorchFunctionMode):  # type: ignore[misc]
        def __torch_function__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            if name in _CUDA_AUTOCAST_FP32 and torch.is_autocast_enabled("cpu"):
                args = tuple(up(a) for a in args)
                kwargs = {k: up(v) for k, v in kwargs.items()}
            return func(*args, **kwargs)

    return CudaPolicy()


# --- measuring -------------------------------------------------------------------------------


@dataclass
class Point:
    grid: Grid
    saved: int  # bytes saved for backward, no checkpointing
    peak: int  # the transient peak above them
    inputs: int  # bytes of the inputs the gradient flows through (what checkpointing keeps)
    ckpt_peak: int  # the peak of forward + recomputation + backward under checkpointing


def _tensors(value: Any) -> Iterator[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)


def _clone(value: Any, grads: set[str], path: str = "") -> Any:
    """A fresh copy of captured block inputs, with requires_grad where it was."""
    import torch

    if isinstance(value, torch.Tensor):
        copy = value.detach().clone()
        if path in grads:
            copy.requires_grad_(True)
        return copy
    if isinstance(value, tuple):
        return tuple(_clone(v, grads, f"{path}.{i}") for i, v in enumerate(value))
    if isinstance(value, list):
        return [_clone(v, grads, f"{path}.{i}") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {k: _clone(v, grads, f"{path}.{k}") for k, v in value.items()}
    return value


def _grad_paths(value: Any, path: str = "") -> set[str]:
    import torch

    if isinstance(value, torch.Tensor):
        return {path} if value.requires_grad else set()
    found: set[str] = set()
    if isinstance(value, tuple | list):
        for i, v in enumerate(value):
            found |= _grad_paths(v, f"{path}.{i}")
    elif isinstance(value, dict):
        for k, v in value.items():
            found |= _grad_paths(v, f"{path}.{k}")
    return found


def _ptr(tensor: Any) -> int:
    """The identity of a tensor's storage (its C++ StorageImpl; fake tensors have one too)."""
    return int(tensor.untyped_storage()._cdata)


def _fp32_matmuls() -> Any:
    """With real tensors: each bf16 matrix product computed in fp32 and rounded to bf16 once.

    A CPU without bf16 units multiplies bf16 matrices through PyTorch's scalar fallback, ten and
    more times slower than fp32 (a HiDream block took an hour). The product's output is the
    bf16 tensor the kernel would give, of the same shape and strides (a GPU's bf16 GEMM also
    accumulates in fp32 and rounds once); the fp32 operands exist only inside this mode's own
    call, where neither the saved-tensor hooks nor ``_LiveBytes`` (a mode entered inside this
    one) see them, so what is counted is unchanged.
    """
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    aten = torch.ops.aten
    products = {aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default}

    def up(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.dtype == torch.bfloat16:
            return value.float()
        return value

    class Fp32Matmuls(TorchDispatchMode):  # type: ignore[misc]
        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            kwargs = kwargs or {}
            if func in products and any(
                isinstance(a, torch.Tensor) and a.dtype == torch.bfloat16 for a in args
            ):
                return func(*(up(a) for a in args), **kwargs).to(torch.bfloat16)
            return func(*args, **kwargs)

    return Fp32Matmuls()


class _LiveBytes:
    """Follows every storage created inside the region: live bytes now and at their peak."""

    def __init__(self, exclude: set[int]) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode

        tracker = self

        class Mode(TorchDispatchMode):  # type: ignore[misc]
            def __torch_dispatch__(
                self, func: Any, types: Any, args: Any = (), kwargs: Any = None
            ) -> Any:
                out = func(*args, **(kwargs or {}))
                if "scaled_dot_product" in str(func):
                    tracker.attention.add(str(func).split(".")[1])
                for tensor in _tensors(out):
                    tracker.add(tensor)
                return out

        self.exclude = exclude
        self.live = 0
        self.peak = 0
        self.known: dict[int, int] = {}
        self.attention: set[str] = set()  # the attention kernels that ran
        self.mode = Mode()

    def add(self, tensor: Any) -> None:
        storage = tensor.untyped_storage()
        ptr = int(storage._cdata)
        if ptr in self.known or ptr in self.exclude or not storage.nbytes():
            return
        size = storage.nbytes()
        self.known[ptr] = size
        self.live += size
        self.peak = max(self.peak, self.live)
        weakref.finalize(storage, self.free, ptr)

    def free(self, ptr: int) -> None:
        size = self.known.pop(ptr, 0)
        self.live -= size

    def __enter__(self) -> _LiveBytes:
        self.mode.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.mode.__exit__(*exc)


ATTENTION_SEEN: set[str] = set()


def _run_block(
    block: Any,
    args: Any,
    kwargs: Any,
    grads: set[str],
    checkpoint: bool,
    adapter: str = "none",
    copies: _Copies | None = None,
    recomputes: bool = False,
) -> tuple[int, int]:
    """Forward and backward of one block: bytes saved for backward, and the peak above them.
    ``recomputes``: the block checkpoints inside itself (a UNet after
    enable_gradient_checkpointing)."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.checkpoint import checkpoint as run_checkpointed

    call_args = _clone(args, grads, "a")
    call_kwargs = _clone(kwargs, grads, "k")
    exclude = {_ptr(p) for p in block.parameters()} | {_ptr(b) for b in block.buffers()}
    shared = {_ptr(t) for t in _tensors((call_args, call_kwargs)) if not t.requires_grad}
    saved: dict[int, int] = {}
    forward = True

    def pack(tensor: Any) -> Any:
        if forward:
            storage = tensor.untyped_storage()
            ptr = int(storage._cdata)
            if ptr not in exclude and ptr not in shared:
                saved.setdefault(ptr, storage.nbytes())
        return tensor

    inputs = {_ptr(t) for t in _tensors((call_args, call_kwargs))}
    with (
        sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]),
        torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t),
        _LiveBytes(exclude | inputs) as live,
        # (not under checkpointing: its recomputation runs outside the policy)
        contextlib.nullcontext() if checkpoint or recomputes else _cuda_policy(adapter),
    ):
        with _autocast(adapter):
            if checkpoint:
                out = run_checkpointed(block, *call_args, use_reentrant=False, **call_kwargs)
            else:
                out = block(*call_args, **call_kwargs)
        forward = False
        outs = [t for t in _tensors(out) if t.requires_grad]
        torch.autograd.backward(outs, [torch.ones_like(t) for t in outs])
        del out, outs
        if copies is not None:
            copies.clear()
    total = sum(saved.values())
    ATTENTION_SEEN.update(live.attention)
    return total, max(0, live.peak - total)


def _capture(
    model: Any, names: Sequence[str], inputs: Inputs
) -> dict[str, tuple[Any, Any, set[str]]]:
    """Run the reduced model once; the inputs of the first block of each list."""
    import torch

    captured: dict[str, tuple[Any, Any, set[str]]] = {}
    handles = []
    for name in names:
        block = getattr(model, name)[0]

        def hook(module: Any, args: Any, kwargs: Any, name: str = name) -> None:
            if name not in captured:
                grads = _grad_paths(args, "a") | _grad_paths(kwargs, "k")
                captured[name] = (_clone(args, set()), _clone(kwargs, set()), grads)

        handles.append(block.register_forward_pre_hook(hook, with_kwargs=True))
    for key in GRAD_INPUTS:
        value = inputs.get(key)
        if isinstance(value, torch.Tensor):
            value.requires_grad_(True)
        elif isinstance(value, list):
            for item in value:
                item.requires_grad_(True)
    try:
        model(**inputs)
    finally:
        for handle in handles:
            handle.remove()
    return captured


def _config(family: Family) -> dict[str, Any]:
    """The reduced model's configuration with the class defaults filled in."""
    import inspect

    module = family.measured or family.transformer
    cls, config_cls = _class(module)
    if config_cls is not None:
        return {**config_cls(**module.config).to_dict(), **family.reduce}
    defaults = {
        name: p.default
        for name, p in inspect.signature(cls.__init__).parameters.items()
        if p.default is not inspect.Parameter.empty
    }
    return {**defaults, **family.transformer.config, **family.reduce}


def _reduced(family: Family) -> Any:
    import torch

    module = family.measured or family.transformer
    cls, config_cls = _class(module)
    config = {**module.config, **family.reduce}
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        if config_cls is None:
            model = cls(**config)
        else:
            model = cls._from_config(config_cls(**config), attn_implementation="sdpa")
    finally:
        torch.set_default_dtype(previous)
    for param in model.parameters():
        if param.is_floating_point() and param.dtype != torch.bfloat16:
            param.data = param.data.to(torch.bfloat16)
    model.requires_grad_(False)
    model.train()
    return model


# The square latent token grids of a family measured with real tensors that pads non-square
# ones (``Family.square``): two for the slope, a third for the check (256, 400 and 576 tokens).
REAL_SQUARE_SIDES = (16, 20, 24)
REAL_TEXT_TOKENS = 96


def _grids(family: Family, real: bool = False) -> list[Grid]:
    """Two image-token counts for the slope, a third for the check, half the text for its slope.

    ``real``: a quarter of the tokens and 96 text tokens (HiDream's three text sequences of 32),
    so that real tensors stay affordable.
    """
    text = REAL_TEXT_TOKENS if real else family.text_tokens
    side = 16 if real else 32
    if family.square:
        sides = REAL_SQUARE_SIDES if real else (32, 40, 48)
        points = [Grid(1, s, s, text) for s in sides]
    elif family.video:
        # 1, 2 and 4 latent frames of side x side tokens: the same counts, along the time axis
        points = [Grid(f, side, side, text) for f in (1, 2, 4)]
    else:
        points = [Grid(1, h * side // 32, w * side // 32, text) for h, w in IMAGE_GRIDS]
    return [*points, Grid(points[0].frames, points[0].height, points[0].width, text // 2)]


# The shared GPU rows (../shared/gpu-measurements.md, one H200, 2026-12-04) a family's blocks are
# checked against, per token per block over the whole model (the slopes over the rows' tokens):
# LoRA without checkpointing (its adapter under bf16 autocast), frozen, and the checkpointed
# step's peak above what it keeps.
GPU_ROWS: Mapping[str, Mapping[str, float]] = {
    "flux": {"lora_autocast": 152.8 * 1024, "none": 76.5 * 1024, "checkpointed_peak": 195478},
}
GPU_ROW_FAMILIES = frozenset(GPU_ROWS)
"""Families with shared GPU rows of a LoRA: their blocks are measured in the rows' setup too."""


def gpu_check(family: Family, blocks: Sequence[Mapping[str, Any]]) -> str:
    """How the family's figures in the GPU rows' setup compare with the rows (for `source`)."""
    rows = GPU_ROWS[family.id]
    total: int = sum(block["count"] for block in blocks)

    def mean(key: str) -> float:
        weighted: float = sum(block[key] * block["count"] for block in blocks)
        return weighted / total

    found = {
        "lora_autocast": mean("autocast_saved_bytes_per_token"),
        "none": mean("frozen_saved_bytes_per_token"),
        "checkpointed_peak": max(b["autocast_checkpointed_peak_bytes_per_token"] for b in blocks),
    }
    words = {
        "lora_autocast": "LoRA under bf16 autocast (CUDA's float32 ops emulated), no ckpt",
        "none": "frozen",
        "checkpointed_peak": "checkpointed step's peak (CPU autocast)",
    }
    return "; ".join(
        f"{words[key]}: {found[key] / 1024:.1f} KiB per token per block vs "
        f"{rows[key] / 1024:.1f} measured ({(found[key] / rows[key] - 1) * 100:+.0f} %)"
        for key in rows
    )


def _adapters(family: Family) -> tuple[str, ...]:
    extra = ("lora_autocast",) if family.id in GPU_ROW_FAMILIES else ()
    return ("none", "lora", "lokr", *extra)


def _models(family: Family, adapters: Sequence[str], real: bool) -> dict[str, Any]:
    """One reduced model per adapter (each gets its own adapters attached). With real tensors
    they share one set of frozen weights, initialised once: the weights are excluded from what
    is counted, and building a block at its real width is most of a real run's setup."""
    import copy

    if not real:
        models = {adapter: _reduced(family) for adapter in adapters}
    else:
        base = _reduced(family)
        shared = {id(t): t for t in (*base.parameters(), *base.buffers())}
        models = {adapter: copy.deepcopy(base, dict(shared)) for adapter in adapters}
    if family.prepare is not None:
        for model in models.values():
            family.prepare(model)
    return models


def _routing(model: Any) -> str:
    """For a mixture-of-experts model: how its tokens were routed while measuring."""
    gates = [m for m in model.modules() if hasattr(m, "top_k") and hasattr(m, "n_routed_experts")]
    if not gates:
        return ""
    gate = gates[0]
    return (
        f"; each token routed by the real gate to {gate.top_k} of {gate.n_routed_experts} experts "
        "besides the shared ones: the saved bytes are the sum over the routing, whichever "
        "experts the tokens reach"
    )


def _slope(a: int, b: int, d: int) -> float:
    return (b - a) / d


def measure(family: Family, real: bool = False) -> dict[str, Any]:
    """The activation figures of one family (see the module docstring); ``real`` computes with
    real bf16 tensors at fewer tokens instead of fake ones (slow: a cross-check of the method)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    assert family.inputs is not None
    ATTENTION_SEEN.clear()
    full = build_meta(family.measured or family.transformer)
    width = family.width(_config(family))
    adapters = _adapters(family)
    adapted = family.adapted_blocks or family.blocks
    results: dict[tuple[str, str], list[Point]] = {
        (adapter, name): [] for adapter in adapters for name in family.blocks
    }
    # Fake tensors: the real model code and the real kernels' shapes and dtypes (the CPU flash
    # attention's meta functions), without computing values; what is saved for backward and
    # allocated depends on the shapes only. (Checked against a real bf16 run of FLUX.1's double
    # block: 127 and 379 MiB saved at 1,024 and 4,096 image tokens + 512 text tokens.) A family
    # whose forward needs values (``Family.real``) computes with real bf16 tensors.
    real = real or family.real is not None
    with _fp32_matmuls() if real else FakeTensorMode():
        models = _models(family, adapters, real)
        copies = {
            (adapter, name): attach(getattr(models[adapter], name)[0], adapter, fused=family.fused)
            if name in adapted
            else _Copies()
            for adapter in adapters
            for name in family.blocks
        }
        for index, grid in enumerate(_grids(family, real)):
            # the other adapters at the slope's two points only (the fit's check and the text
            # slope are the LoRA's)
            running = adapters if index < 2 else ("lora",)
            torch.manual_seed(1)
            inputs = family.inputs(torch, _config(family), grid)
            captured = _capture(models["none"], family.blocks, inputs)
            for name in family.blocks:
                args, kwargs, grads = captured[name]
                kept = sum(
                    t.untyped_storage().nbytes()
                    for t in _tensors((_clone(args, grads, "a"), _clone(kwargs, grads, "k")))
                    if t.requires_grad
                )
                for adapter in running:
                    block = getattr(models[adapter], name)[0]
                    run = (block, args, kwargs, grads)
                    saved, peak = _run_block(*run, False, adapter, copies[adapter, name])
                    ckpt_peak = 0
                    if adapter in ("lora", "lora_autocast"):
                        _, ckpt_peak = _run_block(*run, True, adapter, copies[adapter, name])
                    results[adapter, name].append(Point(grid, saved, peak, kept, ckpt_peak))
            del captured, inputs
    blocks = []
    misses = []
    for name in family.blocks:
        a, b, c, t = results["lora", name]
        d_img = b.grid.image_tokens - a.grid.image_tokens
        slope = _slope(a.saved, b.saved, d_img)
        predicted = a.saved + slope * (c.grid.image_tokens - a.grid.image_tokens)
        misses.append(abs(predicted - c.saved) / c.saved)
        text_slope = (t.saved - a.saved) / (t.grid.text - a.grid.text)
        joint = text_slope >= 0.5 * slope
        kind = type(getattr(full, name)[0]).__name__
        kinds = [type(getattr(full, other)[0]).__name__ for other in family.blocks]

        def per_token(adapter: str, name: str = name, d_img: int = d_img) -> int:
            first, second = results[adapter, name][:2]
            return round(_slope(first.saved, second.saved, d_img))

        entry: dict[str, Any] = {
            "name": kind if kinds.count(kind) == 1 else f"{kind} ({name})",
            "count": len(getattr(full, name)),
            "saved_bytes_per_token": round(slope),
            "frozen_saved_bytes_per_token": per_token("none"),
            "input_bytes_per_token": round((b.inputs - a.inputs) / d_img),
            "peak_bytes_per_token": max(0, round((b.peak - a.peak) / d_img)),
            "checkpointed_peak_bytes_per_token": max(0, round((b.ckpt_peak - a.ckpt_peak) / d_img)),
        }
        lokr = per_token("lokr")
        if not math.isclose(lokr, slope, rel_tol=BYTES_TOLERANCE):
            entry["lokr_saved_bytes_per_token"] = lokr
        if "lora_autocast" in adapters:
            entry["autocast_saved_bytes_per_token"] = per_token("lora_autocast")
            first, second = results["lora_autocast", name][:2]
            entry["autocast_checkpointed_peak_bytes_per_token"] = max(
                0, round((second.ckpt_peak - first.ckpt_peak) / d_img)
            )
        if not joint:
            entry["tokens"] = "image"
            entry["text_bytes_per_token"] = max(0, round(text_slope))
        blocks.append(entry)
    module = family.measured or family.transformer
    points = results["lora", family.blocks[0]]
    tensors = "fake tensors"
    if real:
        tensors = (
            f"real tensors (each matrix product computed in fp32 and rounded to bf16 once) at "
            f"{points[0].grid.text} and {points[3].grid.text} text tokens "
            f"(fixed seeds{_routing(full)})"
        )
    source = (
        f"bench/calibrate_memory.py {family.id}: {module.library} "
        f"{module.name.split(':')[0]} at its real width ({width}), one block of each kind, bf16 "
        f"{tensors} on CPU, flash SDPA, AI Toolkit's LoRA (rank {LORA_RANK}, fp32, input "
        "cast to fp32, no autocast) on "
        + ("every block" if adapted == family.blocks else f"the {', '.join(adapted)} blocks")
        + ("; projections that read one tensor share its fp32 copy (fused)" if family.fused else "")
        + "; frozen: no adapter; lokr: its fast linear path (factor -1); "
        f"slope between {points[0].grid.image_tokens} and {points[1].grid.image_tokens} image "
        "tokens"
        + (" (1 and 2 latent frames)" if family.video else "")
        + (f", checked at {points[2].grid.image_tokens}" if real else "")
        + f"; text tokens: {family.text_tokens_source}"
        + (f"; real tensors because {family.real}" if family.real else "")
    )
    if family.id in GPU_ROWS:
        source += f"; against the shared GPU rows in their setup: {gpu_check(family, blocks)}"
    activations: dict[str, Any] = {
        "width": width,
        "text_tokens": family.text_tokens,
        "adapter": "lora",
        "adapted": family.adapted,
        "blocks": blocks,
    }
    if family.note:
        activations["tokens_per_frame_note"] = family.note
    activations["linearity"] = round(max(misses), 4)
    activations["attention"] = ", ".join(sorted(ATTENTION_SEEN)) or "none seen"
    activations["source"] = source
    return activations


# --- UNets ---------------------------------------------------------------------------------------
#
# A UNet is not a stack of equal blocks: the whole UNet2DConditionModel (its published config, bf16
# fake tensors on the CPU) runs forward and backward at three resolutions, batch 1, with AI
# Toolkit's adapters over the whole UNet, and a line is fitted per latent pixel.

UNET_RESOLUTIONS = (512, 1024)  # px; latent pixels (px / 8)^2 (a whole UNet takes minutes a pass)
UNET_TEXT_TOKENS = 77
SKIP_GPU_SETUP = False  # --skip-gpu-setup: keep memory.yaml's gpu_setup (a UNet pass is minutes)
# The UNets whose LoCon (3x3 convolutions adapted too) is measured besides the LoRA: none in the
# shipped memory.yaml yet (each UNet pass takes minutes of a shared CPU); name them to add it.
LOCON_UNETS: frozenset[str] = frozenset()
# The SDXL rows of ../shared/gpu-measurements.md (batch 1; GiB at 512, 768, 1024 px): LoRA on the
# Linears of the attention blocks under bf16 autocast.
UNET_GPU_ROWS: Mapping[str, Mapping[str, tuple[float, float, float]]] = {
    "sdxl": {
        "saved": (2.07, 4.62, 7.89),
        "step": (2.09, 4.66, 7.96),
        "checkpointed_saved": (0.15, 0.33, 0.58),
        "checkpointed_step": (0.32, 0.47, 0.76),
    }
}
UNET_ADAPTED = (
    "every Linear and 1x1 Conv2d of the UNet; with network.conv (LoCon) every 3x3 Conv2d too "
    "(toolkit/lora_special.py LoRASpecialNetwork: UNET_TARGET_REPLACE_MODULE = "
    "UNet2DConditionModel; transformer_only finds no transformer block names on a UNet and "
    "skips nothing; create_modules gives Linear and 1x1 Conv2d the linear rank, 3x3 Conv2d only "
    "conv_lora_dim)"
)


def _unet_inputs(torch: Any, config: Mapping[str, Any], side: int) -> Inputs:
    latent = side // 8
    inputs: Inputs = {
        "sample": _randn(torch, 1, config["in_channels"], latent, latent),
        "timestep": torch.tensor([500]),
        "encoder_hidden_states": _randn(torch, 1, UNET_TEXT_TOKENS, config["cross_attention_dim"]),
    }
    if config.get("addition_embed_type") == "text_time":
        inputs["added_cond_kwargs"] = {
            "text_embeds": _randn(torch, 1, 1280),
            "time_ids": _randn(torch, 1, 6),
        }
    return inputs


def _fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float, float]:
    """Least-squares line: intercept, slope, and the largest relative miss."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )
    fixed = my - slope * mx
    miss = max(abs(fixed + slope * x - y) / y for x, y in zip(xs, ys, strict=True) if y)
    return fixed, slope, miss


def _unet_passes(
    family: Family, adapter: str, conv3x3: bool, sides: Sequence[int], where: str = ""
) -> dict[str, list[int]]:
    """Saved and peak-above bytes, without and with checkpointing, at each side in px."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    found: dict[str, list[int]] = {
        "saved": [],
        "peak": [],
        "checkpointed_saved": [],
        "checkpointed_peak": [],
    }
    with FakeTensorMode():
        for checkpointed in (False, True):
            unet = _reduced(replace(family, reduce={}))
            if checkpointed:
                unet.enable_gradient_checkpointing()
            copies = attach(unet, adapter, conv3x3=conv3x3, where=where)
            config = _config(family)
            for side in sides:
                torch.manual_seed(1)
                inputs = _unet_inputs(torch, config, side)
                saved, peak = _run_block(
                    unet, (), inputs, set(), False, adapter, copies, recomputes=checkpointed
                )
                prefix = "checkpointed_" if checkpointed else ""
                found[prefix + "saved"].append(saved)
                found[prefix + "peak"].append(peak)
    return found


def measure_unet(family: Family, old: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The UNet's fits per latent pixel, for AI Toolkit's LoRA and LoCon; the GPU rows' setup
    too unless ``SKIP_GPU_SETUP`` (then ``old``'s, the UNet entry memory.yaml has, is kept)."""
    ATTENTION_SEEN.clear()
    networks: dict[str, Any] = {}
    misses: list[float] = []
    for network, conv3x3, sides in (
        ("lora", False, UNET_RESOLUTIONS),
        ("locon", True, UNET_RESOLUTIONS if family.id in LOCON_UNETS else ()),
    ):
        if not sides:
            continue
        found = _unet_passes(family, "lora", conv3x3, sides)
        pixels = [(side // 8) ** 2 for side in sides]
        fits = {}
        for key, values in found.items():
            fixed, slope, miss = _fit(pixels, values)
            if key.endswith("saved") and len(sides) > 2:
                misses.append(miss)
            fits[key] = {"fixed_bytes": round(fixed), "bytes_per_latent_pixel": round(slope, 1)}
        networks[network] = fits
    source = (
        f"bench/calibrate_memory.py {family.id}: diffusers UNet2DConditionModel "
        f"({family.transformer.source}), the whole UNet, bf16 fake tensors on CPU, flash SDPA, "
        f"batch 1, {UNET_TEXT_TOKENS} text tokens, AI Toolkit's LoRA (rank {LORA_RANK}, fp32, "
        "input cast to fp32, no autocast); gradient checkpointing by diffusers' "
        "enable_gradient_checkpointing(); least-squares line over "
        + ", ".join(f"{side}" for side in UNET_RESOLUTIONS)
        + " px (a line through two points: linearity is not checked)"
    )
    gpu_setup = None
    if family.id in UNET_GPU_ROWS and not SKIP_GPU_SETUP:
        gpu_setup, words = unet_gpu_check(family)
        source += f"; gpu_setup, against the shared GPU rows: {words}"
    elif old and old.get("gpu_setup"):
        gpu_setup = old["gpu_setup"]
        source += (
            "; gpu_setup (kept from memory.yaml): the least-squares line of the shared GPU rows "
            "themselves (LoRA on the attention blocks' Linears under bf16 autocast, batch 1, "
            "512, 768, 1024 px), measured on the H200"
        )
    unet: dict[str, Any] = {
        "text_tokens": UNET_TEXT_TOKENS,
        "adapted": UNET_ADAPTED,
        "networks": networks,
    }
    if gpu_setup is not None:
        unet["gpu_setup"] = gpu_setup
    if misses:
        unet["linearity"] = round(max(misses), 4)
    unet["attention"] = ", ".join(sorted(ATTENTION_SEEN)) or "none seen"
    unet["source"] = source
    return unet


def unet_gpu_check(family: Family) -> tuple[dict[str, Any], str]:
    """The UNet in the GPU rows' setup (LoRA on the attention blocks' Linears under bf16
    autocast, CUDA's float32 ops emulated): its fits, and how they compare with the rows."""
    rows = UNET_GPU_ROWS[family.id]
    sides = UNET_RESOLUTIONS
    found = _unet_passes(family, "lora_autocast", False, sides, where="attentions")
    pixels = [(side // 8) ** 2 for side in sides]
    fits = {}
    for key, values in found.items():
        fixed, slope, _ = _fit(pixels, values)
        fits[key] = {"fixed_bytes": round(fixed), "bytes_per_latent_pixel": round(slope, 1)}
    gib = 2.0**30
    measured = {
        "saved": found["saved"],
        "step": [s + p for s, p in zip(found["saved"], found["peak"], strict=True)],
        "checkpointed_saved": found["checkpointed_saved"],
        "checkpointed_step": [
            s + p
            for s, p in zip(found["checkpointed_saved"], found["checkpointed_peak"], strict=True)
        ],
    }
    parts = []
    for key, values in measured.items():
        for side, value, row in zip(sides, values, rows[key][::2], strict=True):
            error = (value / gib / row - 1) * 100
            parts.append(f"{key} {side} px {value / gib:.2f} GiB vs {row:.2f} ({error:+.0f} %)")
    return fits, ", ".join(parts)


# --- VAE passes ----------------------------------------------------------------------------------
#
# The peak of one decode and one encode above the VAE's weights (no gradients, bf16, batch 1), as
# the live storages a dispatch mode follows on fake tensors: what max_memory_allocated shows above
# the memory allocated before the pass (its input included there).

VAE_SIDES = (512, 1024)  # images: the line through two sizes
VAE_FRAMES = ((9, 240, 416), (9, 480, 832), (33, 480, 832))  # video: (frames, height, width)
# The shared GPU rows (GiB): FLUX VAE at 1024 and 1536 px, Wan 2.1 VAE at 33 and 81 frames.
VAE_GPU_ROWS: Mapping[str, Mapping[str, Sequence[tuple[tuple[int, int, int], float]]]] = {
    "FLUX.1 VAE": {
        "decode": (((1, 1024, 1024), 3.38), ((1, 1536, 1536), 7.60)),
        "encode": (((1, 1024, 1024), 2.00), ((1, 1536, 1536), 4.50)),
    },
    "Wan 2.1 VAE": {
        "decode": (((33, 480, 832), 4.27), ((81, 480, 832), 4.38)),
        "encode": (((33, 480, 832), 3.20), ((81, 480, 832), 3.20)),
    },
}
# VAEs that decode and encode a video chunk by chunk with a cache (diffusers' AutoencoderKLWan and
# its Qwen-Image descendant loop over the latent frames).
FRAME_BY_FRAME = frozenset({"AutoencoderKLWan"})
# VAEs that take (batch, channels, frames, height, width), images as one frame.
FIVE_D = frozenset({"AutoencoderKLWan", "AutoencoderKLQwenImage", "AutoencoderKLLTX2Video"})


_PEAKS: dict[tuple[str, str, int, int, int], int] = {}


def _vae_peak(module: Module, direction: str, frames: int, height: int, width: int) -> int:
    """The peak bytes of one pass (kept: the reference VAEs are measured once a run)."""
    key = (module.label, direction, frames, height, width)
    if key not in _PEAKS:
        _PEAKS[key] = _vae_pass(module, direction, frames, height, width)
    return _PEAKS[key]


def _vae_pass(module: Module, direction: str, frames: int, height: int, width: int) -> int:
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with FakeTensorMode():
        vae = _reduced(Family(module.label, module, (), ()))
        vae.eval()
        config = vae.config
        name = module.name.split(":")[0]
        video = name in FIVE_D
        levels = config.get("block_out_channels") or config.get("dim_mult")
        spatial = int(config.get("scale_factor_spatial") or 2 ** (len(levels) - 1))
        temporal = int(config.get("scale_factor_temporal") or 4)
        if direction == "decode":
            channels = int(config.get("latent_channels") or config.get("z_dim"))
            size: tuple[int, ...] = (height // spatial, width // spatial)
            if video:
                size = ((frames - 1) // temporal + 1, *size)
        else:
            channels = 3
            size = (frames, height, width) if video else (height, width)
        shape = (1, channels, *size)
        x = _randn(torch, *shape)
        exclude = {_ptr(p) for p in vae.parameters()} | {_ptr(b) for b in vae.buffers()}
        with (
            torch.no_grad(),
            sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]),
            _LiveBytes(exclude | {_ptr(x)}) as live,
        ):
            if direction == "decode":
                out = vae.decode(x).sample
            else:
                out = vae.encode(x).latent_dist.sample()
            del out
        return live.peak


def _vae_fits(module: Module, frame_by_frame: bool) -> dict[str, Any]:
    """A fit of each pass: images by pixel; a frame-by-frame video VAE by frame and clip pixel."""
    passes: dict[str, Any] = {}
    for direction in ("decode", "encode"):
        if frame_by_frame:
            (f1, h1, w1), (_, h2, w2), (f2, _, _) = VAE_FRAMES
            small, large, longer = (_vae_peak(module, direction, *p) for p in VAE_FRAMES)
            a1, a2 = h1 * w1, h2 * w2
            per_clip = (longer - large) / ((f2 - f1) * a2)
            per_frame = (large - small) / (a2 - a1) - per_clip * f1
            fixed = large - per_frame * a2 - per_clip * f1 * a2
            passes[direction] = {
                "fixed_bytes": round(fixed),
                "bytes_per_pixel": round(per_frame, 1),
                "bytes_per_clip_pixel": round(max(per_clip, 0.0), 2),
            }
        else:
            small, large = (_vae_peak(module, direction, 1, s, s) for s in VAE_SIDES)
            a1, a2 = VAE_SIDES[0] ** 2, VAE_SIDES[1] ** 2
            slope = (large - small) / (a2 - a1)
            passes[direction] = {
                "fixed_bytes": round(small - slope * a1),
                "bytes_per_pixel": round(slope, 1),
            }
    return {"frame_by_frame": frame_by_frame, **passes}


def _at(fit: Mapping[str, float], frames: int, height: int, width: int) -> float:
    pixels = height * width
    return (
        fit["fixed_bytes"]
        + fit["bytes_per_pixel"] * pixels
        + fit.get("bytes_per_clip_pixel", 0.0) * pixels * frames
    )


# Each VAE architecture's GPU factor comes from the GPU rows of one of its members: the live
# storages on fake tensors leave out what the GPU's kernels allocate beside them (cuDNN's
# workspaces and layout copies), which the rows show in proportion to the activations.
VAE_REFERENCE = {
    "AutoencoderKL": VAE_FLUX,
    "AutoencoderKLFlux2": VAE_FLUX,
    "AutoencoderKLWan": VAE_WAN21,
    "AutoencoderKLQwenImage": VAE_WAN21,
}
_VAE_CACHE: dict[tuple[str, bool], dict[str, Any]] = {}


def vae_factor(module: Module) -> tuple[dict[str, float], str]:
    """Per direction, the GPU rows of the module's reference VAE over the same measurement."""
    reference = VAE_REFERENCE[module.name.split(":")[0]]
    rows = VAE_GPU_ROWS[reference.label]
    factors = {}
    words = []
    for direction, points in rows.items():
        ratios = [gib * 2**30 / _vae_peak(reference, direction, *point) for point, gib in points]
        factors[direction] = round(sum(ratios) / len(ratios), 3)
        words.append(
            f"{direction} x {factors[direction]} (the {reference.label}'s GPU rows over its "
            "measurement: " + ", ".join(f"{r:.3f}" for r in ratios) + ")"
        )
    return factors, "; ".join(words)


def measure_vae(family: Family) -> dict[str, Any] | None:
    """The family's VAE passes (its first VAE: the image or video one), or None without one or
    without a GPU reference for its architecture. A video VAE serving an image family (FIBO's
    Wan 2.2 VAE) is measured on one frame: its first chunk decodes one frame, where each later
    chunk of a clip decodes four, so a clip's per-frame figures would overstate an image."""
    if not family.vae or family.vae[0].name.split(":")[0] not in VAE_REFERENCE:
        return None
    module = family.vae[0]
    video_vae = module.name.split(":")[0] in FRAME_BY_FRAME
    frame_by_frame = video_vae and family.video
    key = (module.label, frame_by_frame)
    if key in _VAE_CACHE:
        return _VAE_CACHE[key]
    fits = _vae_fits(module, frame_by_frame)
    factors, factor_words = vae_factor(module)
    for direction in ("decode", "encode"):
        fits[direction] = {
            key: round(value * factors[direction], 2 if key == "bytes_per_clip_pixel" else 1)
            for key, value in fits[direction].items()
        }
    points = (
        f"{VAE_FRAMES[0][0]} and {VAE_FRAMES[2][0]} frames at {VAE_FRAMES[0][1]}x"
        f"{VAE_FRAMES[0][2]} and {VAE_FRAMES[1][1]}x{VAE_FRAMES[1][2]}"
        if fits["frame_by_frame"]
        else f"{VAE_SIDES[0]} and {VAE_SIDES[1]} px squares"
        + (" of one frame (an image family)" if video_vae and not family.video else "")
    )
    source = (
        f"bench/calibrate_memory.py {family.id} --kind vae: {module.describe()}, bf16 fake tensors "
        f"on CPU, no gradients, batch 1, flash SDPA; the peak of the live storages a pass "
        f"creates (its output included, its input and weights not), fitted over {points}, "
        f"times the GPU factor of its architecture: {factor_words}"
    )
    checked = "cpu"
    rows = VAE_GPU_ROWS.get(module.label)
    if rows is not None:
        checks = []
        worst = 0.0
        for direction, points_gib in rows.items():
            for (frames, height, width), gib in points_gib:
                found = _at(fits[direction], frames, height, width) / 2**30
                error = found / gib - 1
                worst = max(worst, abs(error))
                checks.append(
                    f"{direction} {frames}x{height}x{width} {found:.2f} GiB vs {gib:.2f} "
                    f"({error * 100:+.0f} %)"
                )
        checked = "gpu" if worst <= 0.15 else "cpu"
        source += "; the fit against those rows: " + ", ".join(checks)
    _VAE_CACHE[key] = {"checked": checked, **fits, "source": source}
    return _VAE_CACHE[key]


def params_of(family: Family) -> dict[str, Any]:
    if family.card is not None:
        return {**family.card, "experts": family.experts}
    transformer = count(family.transformer)
    text = [(m, count(m)) for m in family.text_encoders]
    vae = [(m, count(m)) for m in family.vae]
    parts = [f"{family.transformer.describe()} = {transformer:,}"]
    parts += [f"{m.describe()} = {n:,}" for m, n in text]
    parts += [f"{m.describe()} = {n:,}" for m, n in vae]
    return {
        "transformer": billions(transformer),
        "text_encoder": billions(sum(n for _, n in text)),
        "vae": billions(sum(n for _, n in vae)),
        "experts": family.experts,
        "source": "exact counts on the meta device: "
        + "; ".join(parts)
        + (f"; {family.params_note}" if family.params_note else ""),
    }


# --- what layer offloading leaves on the card ------------------------------------------------
#
# toolkit/memory_management/manager.py (MemoryManager.attach, ai-toolkit 27a03a91 and the
# 2026-08-28 versions alike) walks the WHOLE module, blocks or not, and hands every Linear and
# Conv2d (LINEAR_MODULES, CONV_MODULES) to a layer manager with the probability of the offload
# percent: its weight lives in system RAM and is copied to the card when the layer runs. Norms,
# embeddings, Conv3d, rotary tables (UNMANAGED_MODULES) and the model's
# get_offload_ignore_modules() pins stay on the card. manager_modules.py stages the copies in a
# ring of PIPELINE_DEPTH slots (AI_TOOLKIT_OFFLOAD_DEPTH, default 4) for the forward and another
# for the backward, each a whole weight at the compute dtype (a quantized weight is dequantized
# on the card), and _BouncingLinearFn keeps each layer's input for its backward.

OFFLOADED_CLASSES = ("Linear", "Conv2d")


def _split_of(model: Any) -> tuple[int, int]:
    """(the parameters layer offloading leaves on the card, the largest offloaded layer's) of
    one model built on the meta device. A parameter stays when any module that holds it is not
    offloaded: a text encoder whose output head shares its token embedding (tie_word_embeddings)
    keeps that weight on the card, as MemoryManager.memory_managed_to moves the Embedding there
    after the head's manager pinned it in system RAM."""
    staying: set[int] = set()
    moved: set[int] = set()
    largest = 0
    for layer in model.modules():
        own = list(layer.parameters(recurse=False))
        if type(layer).__name__ in OFFLOADED_CLASSES:
            size = sum(p.numel() for p in own if id(p) not in moved)
            moved.update(id(p) for p in own)
            largest = max(largest, size)
        else:
            staying.update(id(p) for p in own)
    resident = sum(p.numel() for p in model.parameters() if id(p) not in moved or id(p) in staying)
    return resident, largest


def offload_of(module: Module, text_encoders: Sequence[Module] = ()) -> dict[str, Any]:
    """What layer offloading leaves on the card of one transformer (the parameters outside every
    Linear and Conv2d, and the largest offloaded layer's) and of its text encoders (the same
    count, summed), each built on the meta device."""
    resident, largest = _split_of(build_meta(module))
    found: dict[str, Any] = {"resident_params": resident, "largest_layer_params": largest}
    if text_encoders:
        found["text_encoder_resident_params"] = sum(
            _split_of(build_meta(encoder))[0] for encoder in text_encoders
        )
    words = " and ".join(m.describe() for m in (module, *text_encoders))
    found["source"] = (
        f"{words} on the meta device: the parameters outside every Linear and Conv2d (AI "
        "Toolkit 27a03a91 toolkit/memory_management/manager.py MemoryManager.attach offloads "
        "those two classes, model-wide, and moves the rest to the card: norms, embeddings, "
        "Conv3d, tables), and the transformer's largest such layer"
    )
    return found


# --- memory.yaml -------------------------------------------------------------------------------


def versions() -> dict[str, str]:
    import diffusers
    import torch
    import transformers

    return {
        "torch": str(torch.__version__),
        "diffusers": str(diffusers.__version__),
        "transformers": str(transformers.__version__),
        "python": platform.python_version(),
        "device": "cpu",
        "dtype": "bfloat16",
        "sdpa": "flash or efficient requested (sdpa_kernel); activations.attention names the "
        "kernels that ran",
        "tensors": "fake (FakeTensorMode on CPU: the real code and kernels' shapes and dtypes, no "
        "values); FLUX.1's double block agrees with a real bf16 run (127 and 379 MiB); real bf16 "
        "where an activations source says so (a forward that needs values)",
    }


HEADER = """\
# Parameter counts and measured memory per memory family. Written by bench/calibrate_memory.py
# (see its docstring: it is the one writer of this file); each arch of archs.yaml names its family
# with `memory:` or says why it has none with `memory_unknown:`.
#
#   checked       how the training figures are checked: gpu = the same measurement, run in the
#                 setup of the GPU rows (../shared/gpu-measurements.md), agrees with them; cpu =
#                 measured on the CPU only. A family with no figures is a stand-in.
#   params        billions of parameters: one transformer (experts: how many it holds), all
#                 text encoders together, the VAE; `source` says how they were counted
#   activations   per block kind, bytes per token of one block in bf16 at batch 1, with the
#                 `adapter` in place: lora = AI Toolkit's LoRA on the modules `adapted` names,
#                 built as the toolkit builds it (fp32 down/up pair, the input cast to fp32, no
#                 autocast), so each adapted Linear keeps its input; none = frozen blocks:
#                   saved_bytes_per_token   saved for backward, no gradient checkpointing
#                   frozen_saved_bytes_per_token   the same with no adapter at all
#                   input_bytes_per_token   kept with checkpointing (the block's input)
#                   peak_bytes_per_token    the block's transient peak in forward+backward,
#                                           above its saved bytes
#                   checkpointed_peak_bytes_per_token   with checkpointing, the block's peak
#                                           while it is recomputed and back-propagated
#                   tokens                  joint: per image+text token; image: per image token
#                                           (then text_bytes_per_token is per text token)
#                 linearity: the fit's relative miss at a further token count;
#                 null with `unknown: why` where the blocks could not be measured
#   unet          a UNet's activations per batch item, each a fit: fixed_bytes plus
#                 bytes_per_latent_pixel x (height/8 x width/8), per network (lora, locon):
#                 saved (no checkpointing) and the step's peak above it; checkpointed_saved and
#                 checkpointed_peak likewise with diffusers' gradient checkpointing
#   vae           the peak of a decode and an encode above the VAE's weights, no gradients, bf16,
#                 one image: fixed_bytes + bytes_per_pixel x pixels; a frame_by_frame video VAE:
#                 bytes_per_pixel per pixel of one frame, + bytes_per_clip_pixel x frames x pixels
#   offload       what AI Toolkit's layer offloading leaves on the card: the transformer's
#                 parameters outside every Linear and Conv2d (resident_params: norms, embeddings,
#                 Conv3d, modulation tables) and its largest Linear or Conv2d
#                 (largest_layer_params), whose copies fill the manager's staging ring; and
#                 the same count of its text encoders (text_encoder_resident_params: their
#                 token embeddings above all), which stay on the card under text-encoder
#                 offloading
"""

# A family's keys in the order they are written (the nested ones keep the order they are built
# in); a mapping of scalars without a `source` is written on one line ({...}), as is each block.
_FAMILY_ORDER = ("checked", "params", "offload", "activations", "unet", "vae", "unknown")


def _scalar(value: Any) -> str:
    return (
        yaml.safe_dump(value, default_flow_style=True, width=10_000)
        .strip()
        .removesuffix("\n...")
        .removesuffix(" ...")
    )


def _flow(mapping: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {_scalar(v)}" for k, v in mapping.items()) + "}"


def _lines(mapping: Mapping[str, Any], indent: int) -> list[str]:
    pad = " " * indent
    out: list[str] = []
    for key, value in mapping.items():
        if isinstance(value, Mapping) and value:
            if "source" not in value and not any(
                isinstance(v, Mapping | list) for v in value.values()
            ):
                out.append(f"{pad}{key}: {_flow(value)}")
            else:
                out.append(f"{pad}{key}:")
                out += _lines(value, indent + 2)
        elif isinstance(value, list):
            out.append(f"{pad}{key}:")
            out += [f"{pad}  - {_flow(item)}" for item in value]
        else:
            out.append(f"{pad}{key}: {_scalar(value)}")
    return out


def dump(measured_with: Mapping[str, str], families: Mapping[str, Mapping[str, Any]]) -> str:
    lines = [HEADER.rstrip("\n"), f"format: {FORMAT}", "measured_with:"]
    lines += [f"  {k}: {_scalar(v)}" for k, v in measured_with.items()]
    lines.append("families:")
    for fid in sorted(families):
        lines.append(f"  {fid}:")
        entry = dict(families[fid])
        if entry.get("unet") is not None:
            entry.pop("activations", None)
        elif entry.get("activations") is None:
            entry["activations"] = None
        order = {key: i for i, key in enumerate(_FAMILY_ORDER)}
        lines += _lines(dict(sorted(entry.items(), key=lambda kv: order[kv[0]])), 4)
    return "\n".join(lines) + "\n"


def load_memory() -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    data = yaml.safe_load(MEMORY_YAML.read_text(encoding="utf-8"))
    return dict(data.get("measured_with", {})), dict(data.get("families", {}))


def resolve(names: Sequence[str]) -> list[Family]:
    """Families by id, or by an arch id of archs.yaml (its `memory:` family)."""
    by_id = {f.id: f for f in FAMILIES}
    if not names:
        return list(FAMILIES)
    archs = {a["id"]: a for a in yaml.safe_load(ARCHS_YAML.read_text(encoding="utf-8"))["archs"]}
    chosen: list[Family] = []
    for name in names:
        fid = name if name in by_id else archs.get(name, {}).get("memory")
        if fid not in by_id:
            raise SystemExit(f"calibrate_memory: error: no measured family for {name!r}")
        if by_id[fid] not in chosen:
            chosen.append(by_id[fid])
    return chosen


# --- archs.yaml's counts ---------------------------------------------------------------------


def sync_archs(families: Mapping[str, Mapping[str, Any]]) -> str:
    """archs.yaml with its `weights:` anchors rewritten from memory.yaml (one per family) and
    every arch that names a family pointing its `params:` at that family's anchor."""
    text = ARCHS_YAML.read_text(encoding="utf-8")
    head, rest = text.split("\nweights:\n", 1)
    _, archs = rest.split("\narchs:\n", 1)
    lines = ["weights:"]
    for fid in sorted(families):
        p = families[fid]["params"]
        lines.append(f"  {fid}: &w_{fid}")
        lines.append(f"    transformer: {p['transformer']}")
        lines.append(f"    text_encoder: {p['text_encoder']}")
        if p["experts"] != 1:
            lines.append(f"    experts: {p['experts']}")
        lines.append(f'    source: "memory.yaml family {fid} (bench/calibrate_memory.py)"')
    out: list[str] = []
    family = None
    for line in archs.split("\n"):
        if line.startswith("  - id: "):
            family = None
        if line.startswith("    params: "):
            continue
        out.append(line)
        if line.startswith("    memory: "):
            family = line.split(": ", 1)[1].strip()
            out.append(f"    params: *w_{family}")
    return head + "\n" + "\n".join(lines) + "\n\narchs:\n" + "\n".join(out)


# --- the table -----------------------------------------------------------------------------------


def _unet_cell(unet: Mapping[str, Any]) -> str:
    """A UNet's fits in KiB per latent pixel (and the fixed part in MiB)."""
    parts = []
    for network, fits in unet["networks"].items():
        shown = ", ".join(
            f"{name} {fit['fixed_bytes'] / 2**20:.0f} MiB"
            f" + {fit['bytes_per_latent_pixel'] / 1024:.1f}"
            for name, fit in fits.items()
        )
        parts.append(f"{network}: {shown} KiB per latent pixel")
    return "UNet; " + "; ".join(parts)


def _vae_cell(vae: Mapping[str, Any] | None) -> str:
    """A VAE's decode and encode at 1024x1024 (one frame; 81 frames of 480x832 for video)."""
    if vae is None:
        return "stand-in: not measured"
    size = (81, 480, 832) if vae.get("frame_by_frame") else (1, 1024, 1024)
    decode, encode = (_at(vae[d], *size) / 2**30 for d in ("decode", "encode"))
    where = "81x480x832" if vae.get("frame_by_frame") else "1024x1024"
    return f"{decode:.2f} / {encode:.2f} GiB at {where} ({vae['checked']})"


def table(families: Mapping[str, Mapping[str, Any]], sources: bool = True) -> str:
    """Markdown: each family, how it is checked, its counts, its activation figures (KiB per
    token per block: with the adapter / frozen / kept with checkpointing / peak; or a UNet's
    fits), its VAE's passes, and (with ``sources``) where the counts come from."""
    rows = [
        "| family | checked | transformer B | text enc. B | VAE B | experts"
        " | activations: LoRA saved / frozen / ckpt input / peak"
        " KiB per token per block | VAE decode / encode" + (" | source |" if sources else " |"),
        "|---|---|---:|---:|---:|---:|---|---|" + ("---|" if sources else ""),
    ]
    for fid in sorted(families):
        entry = families[fid]
        p = entry["params"]
        acts = entry.get("activations")
        checked = entry.get("checked") or "stand-in"
        if entry.get("unet") is not None:
            blocks = _unet_cell(entry["unet"])
        elif acts is None:
            blocks = f"unknown: {entry['unknown']}"
        else:
            parts = []
            for b in acts["blocks"]:
                keys = ("saved_bytes_per_token", "frozen_saved_bytes_per_token")
                kib = [(b.get(k) or 0) / 1024 for k in keys]
                kib += [b[k] / 1024 for k in ("input_bytes_per_token", "peak_bytes_per_token")]
                per = ""
                if b.get("tokens") == "image":
                    text = b.get("text_bytes_per_token") or 0
                    per = f" per image token (+{text / 1024:.1f} saved per text token)"
                shown = " / ".join(f"{k:.1f}" for k in kib)
                parts.append(f"{b['count']}x {b['name']}: {shown}{per}")
            adapter = "" if acts.get("adapter") == "lora" else " (frozen: no adapter measured)"
            blocks = (
                f"width {acts['width']}, {acts['text_tokens']} text tokens{adapter}; "
                + "; ".join(parts)
            )
        row = (
            f"| {fid} | {checked} | {p['transformer']:.3f} | {p['text_encoder']:.3f} | "
            f"{p['vae']:.3f} | {p['experts']} | {blocks} | {_vae_cell(entry.get('vae'))} |"
        )
        if sources:
            row += f" {p['source'].replace('|', '/')} |"
        rows.append(row)
    return "\n".join(rows)


# --- main ------------------------------------------------------------------------------------


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        return math.isclose(a, b, rel_tol=BYTES_TOLERANCE, abs_tol=1)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


KINDS = ("all", "params", "activations", "vae")
_TRAINING = ("checked", "activations", "unet", "unknown")
KEPT: Mapping[str, tuple[str, ...]] = {
    "all": (),
    "params": (*_TRAINING, "vae"),
    "activations": ("vae",),
    "vae": _TRAINING,
}
"""Per kind, the parts of a family a run keeps as memory.yaml has them when it writes."""


def measure_family(
    family: Family, old: Mapping[str, Any], kind: str, real: bool = False
) -> dict[str, Any]:
    """One family's entry of memory.yaml: ``kind`` measured anew, the rest as ``old`` has it
    (``real``: the blocks with real tensors, for --check --real)."""
    entry: dict[str, Any] = {"params": params_of(family)}
    beside = (old.get("params") or {}).get("beside")
    if beside:  # counted from AI Toolkit's connector config, not built here: kept as it is
        source = str(old["params"]["source"])
        tail = source[source.index("; text connectors") :] if "; text connectors" in source else ""
        params = dict(entry["params"])
        params["source"] = str(params.get("source", "")) + tail
        entry["params"] = {**params, "beside": beside}
    if family.card is None:
        entry["offload"] = offload_of(family.transformer, family.text_encoders)
    elif "offload" in old:
        entry["offload"] = old["offload"]
    kept = ("checked", "activations", "unet", "unknown")
    if kind in ("all", "activations"):
        if family.unet:
            entry["unet"] = measure_unet(family, old.get("unet"))
            # gpu: the same measurement in the rows' setup ran and is in the source
            checked = family.id in UNET_GPU_ROWS and not SKIP_GPU_SETUP
            entry["checked"] = "gpu" if checked else "cpu"
        elif family.inputs is None or family.unknown:
            entry["activations"] = None
            entry["unknown"] = family.unknown
        else:
            entry["activations"] = measure(family, real=real)
            entry["checked"] = "gpu" if family.id in GPU_ROWS else "cpu"
    else:
        entry.update({key: old[key] for key in kept if key in old})
    if kind in ("all", "vae"):
        vae = measure_vae(family)
        if vae is not None:
            entry["vae"] = vae
    elif "vae" in old:
        entry["vae"] = old["vae"]
    return entry


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="family ids or arch ids (default: all)")
    parser.add_argument(
        "--check", action="store_true", help="compare with memory.yaml, write nothing"
    )
    parser.add_argument(
        "--table", action="store_true", help="print memory.yaml as a markdown table"
    )
    parser.add_argument(
        "--no-sources", action="store_true", help="with --table: leave the sources out"
    )
    parser.add_argument(
        "--kind",
        choices=KINDS,
        default="all",
        help="what to measure (the rest of each family is kept as memory.yaml has it)",
    )
    parser.add_argument("--params-only", action="store_true", help="the same as --kind params")
    parser.add_argument(
        "--skip-gpu-setup",
        action="store_true",
        help="UNets: keep memory.yaml's figures in the GPU rows' setup instead of measuring them",
    )
    parser.add_argument(
        "--real",
        action="store_true",
        help="with --check: compute with real bf16 tensors at fewer tokens (slow cross-check)",
    )
    parser.add_argument(
        "--sync-archs", action="store_true", help="rewrite archs.yaml's counts from memory.yaml"
    )
    args = parser.parse_args(argv)
    if args.real and not args.check:
        parser.error("--real only checks the figures (its token counts differ): add --check")

    global SKIP_GPU_SETUP
    SKIP_GPU_SETUP = args.skip_gpu_setup
    _, stored = load_memory()
    if args.table:
        print(table(stored, sources=not args.no_sources))
        return 0
    if args.sync_archs:
        ARCHS_YAML.write_text(sync_archs(stored), encoding="utf-8")
        return 0

    differ: list[str] = []
    failed: list[str] = []
    for family in resolve(args.names):
        start = time.monotonic()
        old = stored.get(family.id, {})
        try:
            kind = "params" if args.params_only else args.kind
            entry = measure_family(family, old, kind, real=args.real)
        except Exception as exc:  # one family's failure must not lose the others
            failed.append(family.id)
            print(f"{family.id}: measuring failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        took = time.monotonic() - start
        p = entry["params"]
        print(
            f"{family.id}: transformer {p['transformer']} B, text {p['text_encoder']} B, "
            f"vae {p['vae']} B ({took:.1f} s)",
            file=sys.stderr,
        )
        if args.check:
            now, was = entry, old
            if args.real:  # the per-token figures only: the token counts differ
                now = {"blocks": (entry.get("activations") or {}).get("blocks")}
                was = {"blocks": (old.get("activations") or {}).get("blocks")}
            if not _close(now, was):
                differ.append(family.id)
                print(f"{family.id}: differs from memory.yaml\n  now: {now}\n  was: {was}")
        else:  # read again: another run may have written this family's other parts meanwhile
            _, current = load_memory()
            fresh = current.get(family.id, {})
            for key in KEPT[kind]:
                entry.pop(key, None)
                if key in fresh:
                    entry[key] = fresh[key]
            current[family.id] = entry
            MEMORY_YAML.write_text(dump(versions(), current), encoding="utf-8")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    if args.check:
        print("memory.yaml matches" if not differ else f"differ: {', '.join(differ)}")
        return 1 if differ or failed else 0
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
