"""AuraFlow and CogView4."""

from __future__ import annotations

from .base import Family, Module
from .encoders import GLM4_9B, UMT5_PILE_XL, VAE_FLUX, VAE_SD
from .inputs import _auraflow_inputs, _cogview4_inputs

FAMILIES: tuple[Family, ...] = (
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
)
