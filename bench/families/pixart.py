"""PixArt-alpha and PixArt-Sigma."""

from __future__ import annotations

from .base import Family, Module
from .encoders import T5_XXL, VAE_SD
from .inputs import _pixart_inputs

FAMILIES: tuple[Family, ...] = (
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
)
