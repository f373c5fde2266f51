"""HiDream-I1 and Lumina 2."""

from __future__ import annotations

from .base import Family, Module
from .encoders import CLIP_G, CLIP_L, GEMMA2_2B, LLAMA31_8B, T5_XXL, VAE_FLUX
from .inputs import _hidream_inputs, _hidream_toolkit_moe, _lumina2_inputs

_HIDREAM = {
    "patch_size": 2,
    "in_channels": 16,
    "out_channels": 16,
    "num_layers": 16,
    "num_single_layers": 32,
    "attention_head_dim": 128,
    "num_attention_heads": 20,
    "caption_channels": [4096, 4096],
    "text_emb_dim": 2048,
    "num_routed_experts": 4,
    "num_activated_experts": 2,
    "axes_dims_rope": [64, 32, 32],
    "max_resolution": [128, 128],
    "llama_layers": list(range(32)) + [31] * 16,
}
_MOE = (
    "its mixture-of-experts layers route tokens with data-dependent shapes, which the shape-only "
    "(fake tensor) measurement cannot follow"
)
FAMILIES: tuple[Family, ...] = (
    Family(
        id="hidream",
        transformer=Module(
            "diffusers",
            "HiDreamImageTransformer2DModel",
            _HIDREAM,
            "HiDream-I1 transformer",
            "HiDream-ai/HiDream-I1-Full transformer config",
        ),
        text_encoders=(LLAMA31_8B, T5_XXL, CLIP_L, CLIP_G),
        vae=(VAE_FLUX,),
        text_tokens=384,
        text_tokens_source=(
            "AI Toolkit hidream_model.py get_prompt_embeds max_sequence_length 128: each block "
            "sees the T5 and the last Llama layer's 128 tokens and its own Llama layer's 128"
        ),
        blocks=("double_stream_blocks", "single_stream_blocks"),
        # one block of each kind; the caption projections follow the Llama layers it reads
        reduce={"num_layers": 1, "num_single_layers": 1, "llama_layers": [0, 1]},
        inputs=_hidream_inputs,
        real=_MOE,
        square=True,  # patchify pads a non-square latent to max_resolution's 4096 tokens
        prepare=_hidream_toolkit_moe,
    ),
    Family(
        id="lumina2",
        transformer=Module(
            "diffusers",
            "Lumina2Transformer2DModel",
            {
                "hidden_size": 2304,
                "num_layers": 26,
                "num_refiner_layers": 2,
                "num_attention_heads": 24,
                "num_kv_heads": 8,
                "cap_feat_dim": 2304,
                "in_channels": 16,
                "patch_size": 2,
                "multiple_of": 256,
                "axes_dim_rope": [32, 32, 32],
                "axes_lens": [300, 512, 512],
            },
            "Lumina-Image-2.0 transformer",
            "Alpha-VLLM/Lumina-Image-2.0 transformer config",
        ),
        text_encoders=(GEMMA2_2B,),
        vae=(VAE_FLUX,),
        text_tokens=256,
        text_tokens_source=(
            "AI Toolkit stable_diffusion_model.py encode_prompt max_sequence_length 256 (the "
            "joint blocks see the caption's unmasked tokens: an upper bound)"
        ),
        # the context_refiner blocks see the text only (their bytes do not grow with the image)
        blocks=("noise_refiner", "layers"),
        reduce={"num_layers": 1, "num_refiner_layers": 1},
        inputs=_lumina2_inputs,
        real="its forward reads the text mask's values (.tolist()), which the shape-only "
        "(fake tensor) measurement cannot give",
    ),
)
