"""Ideogram 4 and Z-Image."""

from __future__ import annotations

from .base import Family, Module
from .encoders import QWEN3_4B, QWEN3_VL_8B, VAE_FLUX
from .inputs import _ideogram4_inputs, _zimage_inputs

FAMILIES: tuple[Family, ...] = (
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
)
