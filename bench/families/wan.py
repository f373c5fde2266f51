"""Wan 2.1 and Wan 2.2."""

from __future__ import annotations

from .base import Family, Module
from .encoders import UMT5_XXL, VAE_WAN21, VAE_WAN22
from .inputs import _wan_inputs

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
FAMILIES: tuple[Family, ...] = (
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
