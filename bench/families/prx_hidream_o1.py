"""PRX pixel and HiDream-O1."""

from __future__ import annotations

from .base import Family, Module
from .encoders import QWEN3_VL_2B_TEXT, QWEN3_VL_8B
from .inputs import _llm_inputs

FAMILIES: tuple[Family, ...] = (
    Family(
        id="prx_pixel",
        transformer=Module(
            "diffusers",
            "PRXTransformer2DModel",
            {
                "in_channels": 3,
                "patch_size": 16,
                "context_in_dim": 2048,
                "hidden_size": 3584,
                "mlp_ratio": 3.5,
                "num_heads": 28,
                "depth": 24,
                "axes_dim": [64, 64],
                "bottleneck_size": 768,
                "resolution_embeds": True,
            },
            "PRXPixel-7B transformer",
            "AI Toolkit prx_pixel_t2i/README.md: the released checkpoint's architecture",
        ),
        text_encoders=(QWEN3_VL_2B_TEXT,),
        vae=(),
        unknown="not measured: AI Toolkit vendors its own PRX transformer (the diffusers class is "
        "the latent PRX), so the block code would not be the trained one",
    ),
    Family(
        id="hidream_o1",
        transformer=Module(
            "transformers",
            "Qwen3VLForConditionalGeneration:Qwen3VLConfig",
            QWEN3_VL_8B.config,
            "HiDream-O1 (a Qwen3-VL-8B that generates pixels)",
            "AI Toolkit hidream/src/hidream_o1/model_config.py",
        ),
        text_encoders=(),
        vae=(),
        text_tokens=128,
        text_tokens_source="a short caption beside the image patches in one sequence",
        measured=Module(
            "transformers",
            "Qwen3VLTextModel:Qwen3VLTextConfig",
            QWEN3_VL_8B.config["text_config"],
            "Qwen3-VL-8B language model",
            "",
        ),
        blocks=("layers",),
        reduce={"num_hidden_layers": 1},
        inputs=_llm_inputs,
        params_note="pixel space: no text encoder (the prompt is part of the sequence), no VAE",
        note="pixel patches of 32: a 1024x1024 image is 32 x 32 = 1,024 tokens",
    ),
)
