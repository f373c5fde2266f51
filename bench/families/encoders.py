"""Published configurations of the text encoders and VAEs the families load (the values of their
config.json)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import Module

# --- published configurations ---------------------------------------------------------------
# Text encoders (transformers classes; the values are those of the published config.json).

T5_XXL = Module(
    "transformers",
    "T5EncoderModel:T5Config",
    {
        "d_model": 4096,
        "d_ff": 10240,
        "d_kv": 64,
        "num_heads": 64,
        "num_layers": 24,
        "vocab_size": 32128,
        "feed_forward_proj": "gated-gelu",
    },
    "T5-XXL encoder",
    "google/t5-v1_1-xxl config",
)
UMT5_XXL = Module(
    "transformers",
    "UMT5EncoderModel:UMT5Config",
    {
        "d_model": 4096,
        "d_ff": 10240,
        "d_kv": 64,
        "num_heads": 64,
        "num_layers": 24,
        "vocab_size": 256384,
        "feed_forward_proj": "gated-gelu",
    },
    "umT5-XXL encoder",
    "google/umt5-xxl config",
)
CLIP_L = Module(
    "transformers",
    "CLIPTextModel:CLIPTextConfig",
    {
        "hidden_size": 768,
        "intermediate_size": 3072,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "projection_dim": 768,
        "vocab_size": 49408,
        "max_position_embeddings": 77,
    },
    "CLIP-L text",
    "openai/clip-vit-large-patch14 config",
)
CLIP_G = Module(
    "transformers",
    "CLIPTextModelWithProjection:CLIPTextConfig",
    {
        "hidden_size": 1280,
        "intermediate_size": 5120,
        "num_hidden_layers": 32,
        "num_attention_heads": 20,
        "projection_dim": 1280,
        "vocab_size": 49408,
        "max_position_embeddings": 77,
        "hidden_act": "gelu",
    },
    "OpenCLIP-bigG text",
    "SDXL text_encoder_2 config",
)
CLIP_H = Module(
    "transformers",
    "CLIPTextModel:CLIPTextConfig",
    {
        "hidden_size": 1024,
        "intermediate_size": 4096,
        "num_hidden_layers": 23,
        "num_attention_heads": 16,
        "projection_dim": 512,
        "vocab_size": 49408,
        "max_position_embeddings": 77,
        "hidden_act": "gelu",
    },
    "OpenCLIP-H text",
    "stabilityai/stable-diffusion-2-1 text_encoder config",
)


def _qwen3(label: str, hidden: int, inter: int, layers: int, heads: int, tied: bool) -> Module:
    return Module(
        "transformers",
        "Qwen3ForCausalLM:Qwen3Config",
        {
            "hidden_size": hidden,
            "intermediate_size": inter,
            "num_hidden_layers": layers,
            "num_attention_heads": heads,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "vocab_size": 151936,
            "tie_word_embeddings": tied,
        },
        label,
        f"Qwen/{label} config",
    )


QWEN3_06B = _qwen3("Qwen3-0.6B-Base", 1024, 3072, 28, 16, True)
QWEN3_4B = _qwen3("Qwen3-4B", 2560, 9728, 36, 32, True)
QWEN3_8B = _qwen3("Qwen3-8B", 4096, 12288, 36, 32, False)


def _qwen3_vl(
    label: str,
    hidden: int,
    inter: int,
    layers: int,
    heads: int,
    tied: bool,
    vision: Mapping[str, Any],
) -> Module:
    return Module(
        "transformers",
        "Qwen3VLForConditionalGeneration:Qwen3VLConfig",
        {
            "text_config": {
                "hidden_size": hidden,
                "intermediate_size": inter,
                "num_hidden_layers": layers,
                "num_attention_heads": heads,
                "num_key_value_heads": 8,
                "head_dim": 128,
                "vocab_size": 151936,
            },
            "vision_config": {**vision, "out_hidden_size": hidden},
            "tie_word_embeddings": tied,
        },
        label,
        f"Qwen/{label} config",
    )


_VL_VISION_SMALL = {
    "depth": 24,
    "hidden_size": 1024,
    "intermediate_size": 4096,
    "num_heads": 16,
    "deepstack_visual_indexes": [5, 11, 17],
}
_VL_VISION_LARGE = {
    "depth": 27,
    "hidden_size": 1152,
    "intermediate_size": 4304,
    "num_heads": 16,
    "deepstack_visual_indexes": [8, 16, 24],
}
QWEN3_VL_4B = _qwen3_vl("Qwen3-VL-4B-Instruct", 2560, 9728, 36, 32, True, _VL_VISION_SMALL)
QWEN3_VL_8B = _qwen3_vl("Qwen3-VL-8B-Instruct", 4096, 12288, 36, 32, False, _VL_VISION_LARGE)
QWEN3_VL_32B = _qwen3_vl("Qwen3-VL-32B-Instruct", 5120, 25600, 64, 64, False, _VL_VISION_LARGE)
QWEN25_VL_7B = Module(
    "transformers",
    "Qwen2_5_VLForConditionalGeneration:Qwen2_5_VLConfig",
    {
        "text_config": {
            "hidden_size": 3584,
            "intermediate_size": 18944,
            "num_hidden_layers": 28,
            "num_attention_heads": 28,
            "num_key_value_heads": 4,
            "vocab_size": 152064,
        },
        "vision_config": {
            "depth": 32,
            "hidden_size": 1280,
            "intermediate_size": 3420,
            "num_heads": 16,
            "out_hidden_size": 3584,
        },
        "tie_word_embeddings": False,
    },
    "Qwen2.5-VL-7B-Instruct",
    "Qwen/Qwen2.5-VL-7B-Instruct config",
)
MISTRAL_SMALL_31 = Module(
    "transformers",
    "Mistral3ForConditionalGeneration:Mistral3Config",
    {
        "text_config": {
            "model_type": "mistral",
            "hidden_size": 5120,
            "intermediate_size": 32768,
            "num_hidden_layers": 40,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "vocab_size": 131072,
        },
        "vision_config": {
            "model_type": "pixtral",
            "hidden_size": 1024,
            "intermediate_size": 4096,
            "num_hidden_layers": 24,
            "num_attention_heads": 16,
            "patch_size": 14,
            "image_size": 1540,
        },
        "spatial_merge_size": 2,
        "tie_word_embeddings": False,
    },
    "Mistral-Small-3.1-24B",
    "mistralai/Mistral-Small-3.1-24B-Instruct-2503 config",
)
GEMMA2_2B = Module(
    "transformers",
    "Gemma2Model:Gemma2Config",
    {
        "hidden_size": 2304,
        "intermediate_size": 9216,
        "num_hidden_layers": 26,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "vocab_size": 256000,
    },
    "Gemma-2-2B",
    "google/gemma-2-2b config",
)
GEMMA3_12B = Module(
    "transformers",
    "Gemma3ForConditionalGeneration:Gemma3Config",
    {
        "text_config": {
            "hidden_size": 3840,
            "intermediate_size": 15360,
            "num_hidden_layers": 48,
            "num_attention_heads": 16,
            "num_key_value_heads": 8,
            "head_dim": 256,
            "vocab_size": 262208,
        },
        "vision_config": {
            "hidden_size": 1152,
            "intermediate_size": 4304,
            "num_hidden_layers": 27,
            "num_attention_heads": 16,
            "image_size": 896,
            "patch_size": 14,
        },
    },
    "Gemma-3-12B",
    "google/gemma-3-12b-it config",
)
LLAMA31_8B = Module(
    "transformers",
    "LlamaForCausalLM:LlamaConfig",
    {
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
    },
    "Llama-3.1-8B-Instruct",
    "meta-llama/Llama-3.1-8B-Instruct config",
)
SMOLLM3_3B = Module(
    "transformers",
    "SmolLM3ForCausalLM:SmolLM3Config",
    {
        "hidden_size": 2048,
        "intermediate_size": 11008,
        "num_hidden_layers": 36,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "vocab_size": 128256,
        "tie_word_embeddings": True,
    },
    "SmolLM3-3B",
    "HuggingFaceTB/SmolLM3-3B config (no tie_word_embeddings key: SmolLM3Config's default, "
    "tied: its two safetensors files hold 6.15 GB, about 3.075 B bf16 weights)",
)

# VAEs (diffusers classes)
VAE_FLUX = Module(
    "diffusers",
    "AutoencoderKL",
    {
        "in_channels": 3,
        "out_channels": 3,
        "latent_channels": 16,
        "block_out_channels": [128, 256, 512, 512],
        "down_block_types": ["DownEncoderBlock2D"] * 4,
        "up_block_types": ["UpDecoderBlock2D"] * 4,
        "layers_per_block": 2,
        "use_quant_conv": False,
        "use_post_quant_conv": False,
    },
    "FLUX.1 VAE",
    "black-forest-labs/FLUX.1-dev vae config",
)
VAE_SD = Module(
    "diffusers",
    "AutoencoderKL",
    {
        "in_channels": 3,
        "out_channels": 3,
        "latent_channels": 4,
        "block_out_channels": [128, 256, 512, 512],
        "down_block_types": ["DownEncoderBlock2D"] * 4,
        "up_block_types": ["UpDecoderBlock2D"] * 4,
        "layers_per_block": 2,
    },
    "SD VAE",
    "stable-diffusion-v1-5 / SDXL vae config",
)
VAE_SD3 = Module(
    "diffusers",
    "AutoencoderKL",
    {**VAE_SD.config, "latent_channels": 16, "use_quant_conv": False, "use_post_quant_conv": False},
    "SD3 VAE",
    "stabilityai/stable-diffusion-3-medium vae config",
)
VAE_WAN21 = Module("diffusers", "AutoencoderKLWan", {}, "Wan 2.1 VAE", "class defaults = Wan2.1")
VAE_WAN22 = Module(
    "diffusers",
    "AutoencoderKLWan",
    {
        "base_dim": 160,
        "decoder_base_dim": 256,
        "z_dim": 48,
        "in_channels": 12,
        "out_channels": 12,
        "is_residual": True,
        "patch_size": 2,
        "scale_factor_spatial": 16,
        "scale_factor_temporal": 4,
        "dim_mult": [1, 2, 4, 4],
        "num_res_blocks": 2,
        "temperal_downsample": [False, True, True],
    },
    "Wan 2.2 VAE",
    "Wan-AI/Wan2.2-TI2V-5B-Diffusers vae config",
)
VAE_QWEN = Module("diffusers", "AutoencoderKLQwenImage", {}, "Qwen-Image VAE", "class defaults")
VAE_FLUX2 = Module("diffusers", "AutoencoderKLFlux2", {}, "FLUX.2 VAE", "class defaults")
VAE_LTX2 = Module("diffusers", "AutoencoderKLLTX2Video", {}, "LTX-2 video VAE", "class defaults")
VAE_LTX2_AUDIO = Module("diffusers", "AutoencoderKLLTX2Audio", {}, "LTX-2 audio VAE", "defaults")

UMT5_PILE_XL = Module(
    "transformers",
    "UMT5EncoderModel:UMT5Config",
    {
        "d_model": 2048,
        "d_ff": 5120,
        "d_kv": 64,
        "num_heads": 32,
        "num_layers": 24,
        "vocab_size": 32128,
        "feed_forward_proj": "gated-gelu",
    },
    "Pile-T5-XL encoder",
    "fal/AuraFlow text_encoder config",
)
GLM4_9B = Module(
    "transformers",
    "GlmModel:GlmConfig",
    {
        "hidden_size": 4096,
        "intermediate_size": 13696,
        "num_hidden_layers": 40,
        "num_attention_heads": 32,
        "num_key_value_heads": 2,
        "head_dim": 128,
        "vocab_size": 151552,
        "attention_bias": True,
    },
    "GLM-4-9B",
    "THUDM/CogView4-6B text_encoder config",
)
QWEN3_VL_2B_TEXT = Module(
    "transformers",
    "Qwen3VLTextModel:Qwen3VLTextConfig",
    {
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 151936,
    },
    "Qwen3-VL-2B text tower",
    "Qwen/Qwen3-VL-2B-Instruct text_config (AI Toolkit prx_pixel_t2i README: hidden 2048)",
)
