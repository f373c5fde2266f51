"""Iris-3B."""

from __future__ import annotations

from .base import Family, Module
from .encoders import QWEN3_VL_4B

# Iris-3B (AI Toolkit 2fa0bd87 extensions_built_in/diffusion_models/iris3b): its own pixel-space
# DiT, vendored in iris3b/src/dit.py, whose IrisConfig defaults are the release's ("defaults =
# Iris-3B"; the checkpoint's config.yaml overrides them when present). No diffusers or
# transformers class builds it, so the transformer is counted from those defaults layer by layer
# (IRIS3B_TRANSFORMER below); the text encoder is Qwen3-VL-4B-Instruct with its vision tower
# dropped (iris3b.py _load_text_encoder: drop_vision_tower), counted on the meta device.
QWEN3_VL_4B_TEXT = Module(
    "transformers",
    "Qwen3VLTextModel:Qwen3VLTextConfig",
    QWEN3_VL_4B.config["text_config"],
    "Qwen3-VL-4B-Instruct language model",
    "Qwen/Qwen3-VL-4B-Instruct config; AI Toolkit iris3b.py drops the vision tower",
)


def _iris3b_transformer() -> int:
    """Iris-3B's parameters from IrisConfig's defaults (iris3b/src/dit.py): 8 dual-stream and 16
    single-stream blocks of width 2560 (20 query heads, 5 KV heads, gated attention, sandwich
    norms, SwiGLU of 6826, shared-bias adaLN), the patch and timestep embedders, the
    layerwise text adapter over 12 encoder layers with its 2-block refiner, the text position
    table (300), two shared adaLN cores, and the 4-block per-pixel head."""
    d, head, kv = 2560, 128, 640
    swiglu = 3 * d * int(2 * int(d * 4.0) / 3)

    def linear(i: int, o: int, bias: bool = True) -> int:
        return i * o + (o if bias else 0)

    gqa = linear(d, d, False) + 2 * linear(d, kv, False)
    dual = 4 * d + 2 * gqa + 4 * head + 2 * linear(d, d) + 2 * d * d + 4 * d + 2 * swiglu + 12 * d
    single = 2 * d + gqa + 2 * head + d * d + linear(d, d) + 2 * d + swiglu + 6 * d
    layer_block = 2 * d + linear(d, 3 * d, False) + linear(d, d) + linear(d, 3328) + linear(3328, d)
    refiner_block = 2 * d + linear(d, 3 * d, False) + 2 * head + linear(d, d) + swiglu
    text = 2 * layer_block + linear(12, 1) + linear(d, d) + 2 * refiner_block + d
    pixel_block = (
        2 * 16
        + linear(d, 4 * 16 * 256)
        + linear(4096, 1280)
        + linear(1280, 4096)
        + linear(1280, 3 * 1280, False)
        + 2 * head
        + linear(1280, 1280)
        + linear(16, 64)
        + linear(64, 16)
    )
    embedders = linear(16 * 16 * 3, d) + linear(256, d) + linear(d, d)
    pixel = linear(3, 16) + 4 * pixel_block + 16 + linear(16, 3)
    return 8 * dual + 16 * single + embedders + text + 300 * d + 2 * linear(d, 6 * d) + pixel


FAMILIES: tuple[Family, ...] = (
    Family(
        id="iris3b",
        transformer=Module("none", "IrisDiT", {}, "Iris-3B pixel-space DiT", ""),
        text_encoders=(QWEN3_VL_4B_TEXT,),
        vae=(),
        card={
            "transformer": round(_iris3b_transformer() / 1e9, 3),
            "text_encoder": round(4_022_468_096 / 1e9, 3),
            "vae": 0.0,
            "source": f"Iris-3B transformer: AI Toolkit 2fa0bd87 iris3b/src/dit.py IrisConfig "
            f"defaults (= the release, README), counted layer by layer = "
            f"{_iris3b_transformer():,}; Qwen3-VL-4B-Instruct language model (vision tower "
            "dropped by iris3b.py): transformers Qwen3VLTextModel on the meta device = "
            "4,022,468,096; pixel space: no VAE",
        },
        unknown="not measured: AI Toolkit runs its own Iris DiT (iris3b/src/dit.py), which no "
        "library class builds, so there is no block to measure the same way",
    ),
)
