"""SD3 Medium, SD3.5 Large and SD3.5 Medium."""

from __future__ import annotations

from typing import Any

from .base import Family, Module
from .encoders import CLIP_G, CLIP_L, T5_XXL, VAE_SD3
from .inputs import _sd3_inputs

_SD35_SRC = (
    "diffusers scripts/convert_sd3_to_diffusers.py (num_attention_heads = num_layers, "
    "caption_projection_dim = 64 x heads, rms_norm qk norm for 3.5); "
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
FAMILIES: tuple[Family, ...] = (
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
