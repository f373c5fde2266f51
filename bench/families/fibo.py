"""FIBO."""

from __future__ import annotations

from .base import Family, Module
from .encoders import SMOLLM3_3B, VAE_WAN22
from .inputs import _fibo_inputs

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
FAMILIES: tuple[Family, ...] = (
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
