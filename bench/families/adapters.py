"""Which modules AI Toolkit adapts, per family."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Which modules AI Toolkit adapts, per family: the model class its `target_lora_modules` (or
# lora_special.py's is_* flag) names, the block names `transformer_only` keeps (the model's
# get_transformer_block_names(), else lora_special.py's fallbacks), and whether the toolkit's own
# class fuses the projections that read one tensor (one fp32 copy of it, not one per projection).
_LS = "toolkit/lora_special.py LoRASpecialNetwork.create_modules"
_EXT = "extensions_built_in/diffusion_models"


def _linears(where: str, blocks: str, source: str) -> str:
    return f"every Linear of {blocks}{where} ({source})"


TOOLKIT_ADAPTERS: Mapping[str, Mapping[str, Any]] = {
    "flux": {
        "adapted": _linears(
            "",
            "transformer_blocks and single_transformer_blocks",
            f"{_LS}: is_flux targets FluxTransformer2DModel; transformer_only keeps the names "
            "with transformer_blocks",
        )
    },
    "flex": {
        "adapted": _linears(
            "",
            "transformer_blocks and single_transformer_blocks",
            f"{_EXT}/../flex2/flex2.py target_lora_modules FluxTransformer2DModel; {_LS}: "
            "transformer_only keeps the names with transformer_blocks",
        )
    },
    "chroma": {
        "adapted": _linears(
            " of the toolkit's own Chroma class (fused qkv and linear1)",
            "double_blocks and single_blocks",
            f"{_EXT}/chroma/chroma_model.py target_lora_modules Chroma; {_LS}: transformer_only "
            "keeps single_blocks and double_blocks; chroma/src/layers.py fuses qkv",
        ),
        "fused": True,
    },
    "flux2": {
        "adapted": _linears(
            " of the toolkit's own Flux2 class (fused qkv)",
            "double_blocks and single_blocks",
            f"{_EXT}/flux2/flux2_model.py target_lora_modules Flux2, "
            "get_transformer_block_names; flux2/src/model.py fuses qkv and linear1",
        ),
        "fused": True,
    },
    "qwen_image": {
        "adapted": _linears(
            "",
            "transformer_blocks",
            f"{_EXT}/qwen_image/qwen_image.py target_lora_modules QwenImageTransformer2DModel, "
            "get_transformer_block_names",
        )
    },
    "krea2": {
        "adapted": _linears(
            " of the toolkit's own SingleStreamDiT (separate wq, wk, wv, gate as in diffusers)",
            "blocks",
            f"{_EXT}/krea2/krea2.py target_lora_modules SingleStreamDiT, "
            "get_transformer_block_names",
        )
    },
    "wan21_14b": {
        "adapted": _linears(
            "",
            "blocks",
            "toolkit/models/wan21/wan21.py target_lora_modules WanTransformer3DModel, "
            "get_transformer_block_names",
        )
    },
    "wan22_14b": {
        "adapted": _linears(
            " of both experts",
            "blocks",
            f"{_EXT}/wan22/wan22_14b_model.py target_lora_modules DualWanTransformer3DModel; "
            "Wan21.get_transformer_block_names",
        )
    },
    "ltx2": {
        "adapted": _linears(
            " (video and audio streams)",
            "transformer_blocks",
            f"{_EXT}/ltx2/ltx2.py target_lora_modules LTX2VideoTransformer3DModel, "
            "get_transformer_block_names",
        )
    },
    "minimax_h3": {
        "adapted": _linears(
            " of the toolkit's own MiniMaxH3Transformer (fused qkv_proj)",
            "blocks",
            f"{_EXT}/minimax_h3/minimax_h3.py target_lora_modules MiniMaxH3Transformer, "
            "get_transformer_block_names; minimax_h3/src/transformer.py fuses qkv_proj",
        ),
        "fused": True,
    },
    "ideogram4": {
        "adapted": _linears(
            "",
            "layers",
            f"{_EXT}/ideogram4/ideogram4.py target_lora_modules Ideogram4Transformer2DModel, "
            "get_transformer_block_names",
        )
    },
    "zimage": {
        "adapted": _linears(
            "; the noise_refiner and context_refiner blocks stay frozen",
            "layers",
            f"{_EXT}/z_image/z_image.py target_lora_modules ZImageTransformer2DModel, "
            "get_transformer_block_names = layers",
        ),
        "adapted_blocks": ("layers",),
    },
    "sd3": {
        "adapted": _linears(
            "",
            "transformer_blocks",
            f"{_LS}: is_v3 targets SD3Transformer2DModel; transformer_only keeps the names with "
            "transformer_blocks",
        )
    },
    "anima": {
        "adapted": _linears(
            "; the text conditioner only with model_kwargs.train_text_conditioner",
            "transformer_blocks",
            f"{_EXT}/anima/anima.py target_lora_modules CosmosTransformer3DModel, "
            "get_transformer_block_names",
        )
    },
    "pixart": {
        "adapted": _linears(
            "",
            "transformer_blocks",
            f"{_LS}: is_pixart targets PixArtTransformer2DModel; transformer_only keeps the names "
            "with transformer_blocks",
        )
    },
    "auraflow": {
        "adapted": _linears(
            " (and every other Linear of the model: no fallback name matches AuraFlow's)",
            "joint_transformer_blocks and single_transformer_blocks",
            f"{_LS}: is_auraflow targets AuraFlowTransformer2DModel; transformer_only has no "
            "block names for it",
        )
    },
    "cogview4": {
        "adapted": _linears(
            "",
            "transformer_blocks",
            f"toolkit/models/cogview4.py target_lora_modules CogView4Transformer2DModel; {_LS}: "
            "transformer_only keeps the names with transformer_blocks",
        )
    },
    "fibo": {
        "adapted": _linears(
            "",
            "transformer_blocks and single_transformer_blocks",
            f"AI Toolkit PR 732 (16566f51) {_EXT}/fibo/fibo_model.py target_lora_modules "
            f"BriaFiboTransformer2DModel, no get_transformer_block_names; {_LS}: "
            "transformer_only keeps the names with transformer_blocks (the model has that "
            "attribute), so caption_projection and the embedders stay frozen",
        )
    },
    "hidream": {
        "adapted": _linears(
            " (the attention, every expert and the shared experts; the router is no Linear)",
            "double_stream_blocks and single_stream_blocks",
            f"{_EXT}/hidream/hidream_model.py target_lora_modules HiDreamImageTransformer2DModel, "
            "get_transformer_block_names",
        )
    },
    "lumina2": {
        "adapted": _linears(
            "",
            "layers, noise_refiner and context_refiner",
            f"{_LS}: is_lumina2 targets Lumina2Transformer2DModel; transformer_only keeps the "
            "names with layers, noise_refiner or context_refiner",
        )
    },
    "hidream_o1": {
        "adapted": _linears(
            "",
            "model.language_model.layers",
            f"{_EXT}/hidream/hidream_o1_model.py target_lora_modules "
            "Qwen3VLForConditionalGeneration, get_transformer_block_names",
        )
    },
}
for _same, _as in (
    ("flux2_klein_4b", "flux2"),
    ("flux2_klein_9b", "flux2"),
    ("wan21_1b", "wan21_14b"),
    ("wan22_5b", "wan21_14b"),
    ("ltx23", "ltx2"),
    ("pixart_sigma", "pixart"),
    ("sd35_large", "sd3"),
    ("sd35_medium", "sd3"),
):
    TOOLKIT_ADAPTERS = {**TOOLKIT_ADAPTERS, _same: TOOLKIT_ADAPTERS[_as]}
