"""Measure parameter counts and per-token activation memory from the models' own code.

For each memory family of ``presets/memory.yaml`` this script

* counts the parameters of the transformer, the text encoder(s) and the VAE exactly, by building
  diffusers' and transformers' classes with the published configuration on PyTorch's ``meta``
  device (no weights are read or downloaded);
* builds the transformer at its real width with ONE block of each kind (bf16, weights frozen as
  for a LoRA) under PyTorch's FakeTensorMode on the CPU device: the real model code runs with
  the real kernels' shape and dtype rules (the CPU flash attention's meta functions) but without
  computing values, so a 6144-wide FLUX.2 block costs neither RAM nor minutes on a shared
  2-core machine (bf16 matmuls run about 6x slower than fp32 on its AVX2 CPU, too slow for real
  runs). Saved bytes depend on shapes only: FLUX.1's double block gives 126.5 and 379.4 MiB at
  1,024 and 4,096 image tokens + 512 text tokens, as a real bf16 CPU run did (127 and 379 MiB).
  It runs the reduced model's forward once to catch each block's real inputs, then forward and
  backward of that block alone with the flash/efficient SDPA backends requested, at several
  token counts, with and without checkpointing. It counts the bytes saved for backward with
  ``torch.autograd.graph.saved_tensors_hooks`` (each storage once; parameter storages and the
  inputs every block shares, such as rotary tables, left out) and the transient peak of the
  block's live tensors (a dispatch mode that follows every storage the block allocates);
* fits bytes per token per block (the slope between two image-token counts), checks the fit at a
  further count (``linearity``) and measures the slope over text tokens too;
* writes the figures, with the package versions, into ``presets/memory.yaml``.

Usage (torch, diffusers and transformers come from the ``measure`` extra, in a venv of their own)::

    python bench/calibrate_memory.py                 # every family, rewrite memory.yaml
    python bench/calibrate_memory.py flux wan21_14b  # some families (or arch ids: krea2, ltx2.3)
    python bench/calibrate_memory.py --params-only   # parameter counts only (seconds)
    python bench/calibrate_memory.py --check flux    # measure, compare, exit 1 if they differ
    python bench/calibrate_memory.py --table         # the markdown table of memory.yaml (no torch)

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
from dataclasses import dataclass, field
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


def _llm_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    total = grid.text + grid.image_tokens
    return {
        "inputs_embeds": _randn(torch, 1, total, config["hidden_size"]),
        "position_ids": torch.arange(total).view(1, 1, total).expand(3, 1, total),
        "use_cache": False,
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

FAMILIES: tuple[Family, ...] = (
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
FAMILIES += (
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
FAMILIES += (
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
            {
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
            },
            "SD3-medium transformer",
            "stabilityai/stable-diffusion-3-medium-diffusers transformer config",
        ),
        text_encoders=(CLIP_L, CLIP_G, T5_XXL),
        vae=(VAE_SD3,),
        text_tokens=333,
        text_tokens_source="SD3 pipeline: 77 CLIP + 256 T5 tokens",
        blocks=("transformer_blocks",),
        reduce={"num_layers": 1},
        inputs=_sd3_inputs,
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
_UNET_TEXT = (
    "UNets are not token-uniform (four resolutions, convolutions); per-token block figures do "
    "not apply"
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
    "a mixture-of-experts block routes tokens with data-dependent shapes, which the shape-only "
    "(fake tensor) measurement cannot follow, and a real bf16 run is too slow on this CPU"
)
FAMILIES += (
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
        unknown=_MOE,
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
        unknown="its forward reads the text mask's values (.tolist()), which the shape-only "
        "(fake tensor) measurement cannot give, and a real bf16 run is too slow on this CPU",
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
        unknown=_UNET_TEXT,
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
        unknown=_UNET_TEXT,
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
        unknown=_UNET_TEXT,
    ),
    Family(
        id="ssd",
        transformer=Module("diffusers", "UNet2DConditionModel", {}, "", ""),
        text_encoders=(),
        vae=(),
        card={
            "transformer": 1.3,
            "text_encoder": 0.817,
            "vae": 0.084,
            "source": "Segmind SSD-1B model card: 1.3B UNet (SDXL distilled); SDXL's text "
            "encoders (CLIP-L 123,060,480 + OpenCLIP-bigG 694,659,840) and VAE",
        },
        unknown=_UNET_TEXT,
    ),
    Family(
        id="vega",
        transformer=Module("diffusers", "UNet2DConditionModel", {}, "", ""),
        text_encoders=(),
        vae=(),
        card={
            "transformer": 0.745,
            "text_encoder": 0.817,
            "vae": 0.084,
            "source": "Segmind Vega model card: 745M UNet (SDXL distilled); SDXL's text "
            "encoders (CLIP-L 123,060,480 + OpenCLIP-bigG 694,659,840) and VAE",
        },
        unknown=_UNET_TEXT,
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
    block: Any, args: Any, kwargs: Any, grads: set[str], checkpoint: bool
) -> tuple[int, int]:
    """Forward and backward of one block: bytes saved for backward, and the peak above them."""
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
    ):
        if checkpoint:
            out = run_checkpointed(block, *call_args, use_reentrant=False, **call_kwargs)
        else:
            out = block(*call_args, **call_kwargs)
        forward = False
        outs = [t for t in _tensors(out) if t.requires_grad]
        torch.autograd.backward(outs, [torch.ones_like(t) for t in outs])
        del out, outs
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


def _grids(family: Family, real: bool = False) -> list[Grid]:
    """Two image-token counts for the slope, a third for the check, half the text for its slope.

    ``real``: a quarter of the tokens and 64 text tokens, so that real tensors stay affordable.
    """
    text = 64 if real else family.text_tokens
    side = 16 if real else 32
    if family.video:
        # 1, 2 and 4 latent frames of side x side tokens: the same counts, along the time axis
        points = [Grid(f, side, side, text) for f in (1, 2, 4)]
    else:
        points = [Grid(1, h * side // 32, w * side // 32, text) for h, w in IMAGE_GRIDS]
    return [*points, Grid(points[0].frames, points[0].height, points[0].width, text // 2)]


def measure(family: Family, real: bool = False) -> dict[str, Any]:
    """The activation figures of one family (see the module docstring); ``real`` computes with
    real bf16 tensors at fewer tokens instead of fake ones (slow: a cross-check of the method)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    assert family.inputs is not None
    ATTENTION_SEEN.clear()
    full = build_meta(family.measured or family.transformer)
    width = family.width(_config(family))
    results: dict[str, list[Point]] = {name: [] for name in family.blocks}
    # Fake tensors: the real model code and the real kernels' shapes and dtypes (the CPU flash
    # attention's meta functions), without computing values; what is saved for backward and
    # allocated depends on the shapes only. (Checked against a real bf16 run of FLUX.1's double
    # block: 127 and 379 MiB saved at 1,024 and 4,096 image tokens + 512 text tokens.)
    with contextlib.nullcontext() if real else FakeTensorMode():
        model = _reduced(family)
        for grid in _grids(family, real):
            torch.manual_seed(1)
            inputs = family.inputs(torch, _config(family), grid)
            captured = _capture(model, family.blocks, inputs)
            for name in family.blocks:
                block = getattr(model, name)[0]
                args, kwargs, grads = captured[name]
                kept = sum(
                    t.untyped_storage().nbytes()
                    for t in _tensors((_clone(args, grads, "a"), _clone(kwargs, grads, "k")))
                    if t.requires_grad
                )
                saved, peak = _run_block(block, args, kwargs, grads, checkpoint=False)
                _, ckpt_peak = _run_block(block, args, kwargs, grads, checkpoint=True)
                results[name].append(Point(grid, saved, peak, kept, ckpt_peak))
            del captured, inputs
    blocks = []
    misses = []
    for name in family.blocks:
        a, b, c, t = results[name]
        d_img = b.grid.image_tokens - a.grid.image_tokens
        slope = (b.saved - a.saved) / d_img
        predicted = a.saved + slope * (c.grid.image_tokens - a.grid.image_tokens)
        misses.append(abs(predicted - c.saved) / c.saved)
        text_slope = (t.saved - a.saved) / (t.grid.text - a.grid.text)
        joint = text_slope >= 0.5 * slope
        kind = type(getattr(full, name)[0]).__name__
        kinds = [type(getattr(full, other)[0]).__name__ for other in family.blocks]
        entry: dict[str, Any] = {
            "name": kind if kinds.count(kind) == 1 else f"{kind} ({name})",
            "count": len(getattr(full, name)),
            "saved_bytes_per_token": round(slope),
            "input_bytes_per_token": round((b.inputs - a.inputs) / d_img),
            "peak_bytes_per_token": max(0, round((b.peak - a.peak) / d_img)),
            "checkpointed_peak_bytes_per_token": max(0, round((b.ckpt_peak - a.ckpt_peak) / d_img)),
        }
        if not joint:
            entry["tokens"] = "image"
            entry["text_bytes_per_token"] = max(0, round(text_slope))
        blocks.append(entry)
    source = (
        f"bench/calibrate_memory.py {family.id}: {(family.measured or family.transformer).library} "
        f"{(family.measured or family.transformer).name.split(':')[0]} at its real "
        f"width ({width}), one block of each kind, bf16 fake tensors on CPU, frozen "
        "weights, flash SDPA; "
        f"slope between {results[family.blocks[0]][0].grid.image_tokens} and "
        f"{results[family.blocks[0]][1].grid.image_tokens} image tokens"
        + (" (1 and 2 latent frames)" if family.video else "")
        + f"; text tokens: {family.text_tokens_source}"
    )
    activations: dict[str, Any] = {
        "width": width,
        "text_tokens": family.text_tokens,
        "adapter": "none",
        "blocks": blocks,
    }
    if family.note:
        activations["tokens_per_frame_note"] = family.note
    activations["linearity"] = round(max(misses), 4)
    activations["attention"] = ", ".join(sorted(ATTENTION_SEEN)) or "none seen"
    activations["source"] = source
    return activations


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
        "values); FLUX.1's double block agrees with a real bf16 run (127 and 379 MiB)",
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
"""

# A family's keys in the order they are written (the nested ones keep the order they are built
# in); a mapping of scalars without a `source` is written on one line ({...}), as is each block.
_FAMILY_ORDER = ("checked", "params", "activations", "unet", "vae", "unknown")


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


def table(families: Mapping[str, Mapping[str, Any]]) -> str:
    """Markdown: each family, its counts and source, its per-token figures (KiB per token)."""
    rows = [
        "| family | transformer B | text enc. B | VAE B | experts"
        " | blocks: saved / ckpt input / peak"
        " KiB per token per block | source |",
        "|---|---:|---:|---:|---:|---|---|",
    ]
    for fid in sorted(families):
        entry = families[fid]
        p = entry["params"]
        acts = entry.get("activations")
        if entry.get("unet") is not None:
            blocks = _unet_cell(entry["unet"])
        elif acts is None:
            blocks = f"unknown: {entry['unknown']}"
        else:
            parts = []
            for b in acts["blocks"]:
                kib = [b[k] / 1024 for k in ("saved_bytes_per_token", "input_bytes_per_token")]
                kib.append(b["peak_bytes_per_token"] / 1024)
                per = ""
                if b.get("tokens") == "image":
                    text = b.get("text_bytes_per_token") or 0
                    per = f" per image token (+{text / 1024:.1f} saved per text token)"
                parts.append(
                    f"{b['count']}x {b['name']}: {kib[0]:.1f} / {kib[1]:.1f} / {kib[2]:.1f}{per}"
                )
            blocks = f"width {acts['width']}, {acts['text_tokens']} text tokens; " + "; ".join(
                parts
            )
        source = p["source"].replace("|", "/")
        rows.append(
            f"| {fid} | {p['transformer']:.3f} | {p['text_encoder']:.3f} | {p['vae']:.3f} | "
            f"{p['experts']} | {blocks} | {source} |"
        )
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="family ids or arch ids (default: all)")
    parser.add_argument(
        "--check", action="store_true", help="compare with memory.yaml, write nothing"
    )
    parser.add_argument(
        "--table", action="store_true", help="print memory.yaml as a markdown table"
    )
    parser.add_argument("--params-only", action="store_true", help="count parameters only")
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

    _, stored = load_memory()
    if args.table:
        print(table(stored))
        return 0
    if args.sync_archs:
        ARCHS_YAML.write_text(sync_archs(stored), encoding="utf-8")
        return 0

    differ: list[str] = []
    failed: list[str] = []
    for family in resolve(args.names):
        start = time.monotonic()
        old = stored.get(family.id, {})
        entry: dict[str, Any] = {
            **{key: old[key] for key in ("checked", "unet", "vae") if key in old},
            "params": params_of(family),
        }
        if args.params_only:
            entry["activations"] = old.get("activations")
            if entry["activations"] is None:
                entry["unknown"] = old.get("unknown") or "not measured yet"
        elif family.inputs is None or family.unknown:
            entry.pop("checked", None)
            entry["activations"] = None
            entry["unknown"] = family.unknown
        else:
            try:
                entry["activations"] = measure(family, real=args.real)
                entry["checked"] = "cpu"
            except Exception as exc:  # one family's failure must not lose the others
                failed.append(family.id)
                print(
                    f"{family.id}: measuring failed: {type(exc).__name__}: {exc}", file=sys.stderr
                )
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
        else:
            stored[family.id] = entry
            MEMORY_YAML.write_text(dump(versions(), stored), encoding="utf-8")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    if args.check:
        print("memory.yaml matches" if not differ else f"differ: {', '.join(differ)}")
        return 1 if differ or failed else 0
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
