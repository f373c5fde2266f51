"""The UNets: SDXL, SD 1.5, SD 2, SSD-1B and Vega."""

from __future__ import annotations

from .base import Family, Module
from .encoders import CLIP_G, CLIP_H, CLIP_L, VAE_SD

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
FAMILIES: tuple[Family, ...] = (
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
)
