"""FLUX.1, Flex, Chroma, FLUX.2 and FLUX.2 Klein."""

from __future__ import annotations

from .base import Family, Module
from .encoders import CLIP_L, MISTRAL_SMALL_31, QWEN3_4B, QWEN3_8B, T5_XXL, VAE_FLUX, VAE_FLUX2
from .inputs import _chroma_inputs, _flux2_inputs, _flux_inputs

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
)
