"""Anima."""

from __future__ import annotations

from .base import Family, Module
from .encoders import QWEN3_06B, VAE_QWEN
from .inputs import _cosmos_inputs

# Anima: a Cosmos-Predict2 2B transformer, a Qwen3-0.6B-Base text encoder with a text conditioner
# (diffusers' Anima pipeline docs), the Qwen-Image VAE.
FAMILIES: tuple[Family, ...] = (
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
