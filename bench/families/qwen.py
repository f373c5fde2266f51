"""Qwen-Image and Krea 2."""

from __future__ import annotations

from .base import Family, Module
from .encoders import QWEN3_VL_4B, QWEN25_VL_7B, VAE_QWEN
from .inputs import _krea2_inputs, _qwen_inputs

FAMILIES: tuple[Family, ...] = (
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
