"""The archs whose transformer no library class builds, counted layer by layer."""

from __future__ import annotations

from typing import Any

from .base import Family, Module
from .encoders import QWEN3_4B, QWEN3_VL_8B, T5_XXL, VAE_FLUX, VAE_FLUX2

# --- counted by arithmetic: the archs whose transformer no library class builds ---------------
#
# AI Toolkit runs its own code for these (or loads a config only the hub holds); their released
# shapes are in the stored sources named below, so each is counted layer by layer from the code
# AI Toolkit runs (27a03a91) at those shapes. No block is measured: their activations are a
# FLUX-sized stand-in, and fit says so. The counting helpers reproduce the meta-device counts of
# the families they share a layout with (tests/domain/rules/test_memory_presets.py checks
# Chroma, Z-Image, Qwen2.5-VL-7B and Mistral-Small-3.1 to the parameter).

# Meta-device counts already in memory.yaml, reused where the same module is loaded.
COUNTED = {
    "T5-XXL encoder": 4_762_310_656,  # family flux
    "Qwen3-4B": 4_022_468_096,  # family zimage
    "Qwen3-VL-8B-Instruct": 8_767_123_696,  # family ideogram4
    "FLUX.1 VAE": 83_819_683,  # family flux
    "FLUX.2 VAE": 84_046_115,  # family flux2
}
_AITK = "AI Toolkit 27a03a91 extensions_built_in/diffusion_models"


def _linear(inputs: int, outputs: int, bias: bool = True) -> int:
    return inputs * outputs + (outputs if bias else 0)


def _flux_layout_trunk(width: int = 3072) -> int:
    """Chroma's 19 double and 38 single blocks (no modulation layers: the distilled guidance
    approximator gives every block its vectors), the approximator (64 -> 5120, 5 residual
    MLPs, -> width) and the T5 projection, as chroma/src/layers.py builds them."""
    head, mlp = 128, 4 * width
    double = 2 * (
        _linear(width, 3 * width)
        + 2 * head
        + _linear(width, width)
        + _linear(width, mlp)
        + _linear(mlp, width)
    )
    single = _linear(width, 3 * width + mlp) + _linear(width + mlp, width) + 2 * head
    approximator = _linear(64, 5120) + 5 * (2 * _linear(5120, 5120) + 5120) + _linear(5120, width)
    return 19 * double + 38 * single + approximator + _linear(4096, width)


def chroma_transformer() -> int:
    """Chroma (latent): the trunk, its 64-channel input and output linears."""
    return _flux_layout_trunk() + _linear(64, 3072) + _linear(3072, 64)


def chroma_radiance_transformer() -> int:
    """Chroma Radiance (chroma/src/radiance.py chroma_params): the trunk, a 16 px patch conv
    from RGB, and the NeRF head: an embedder of the pixel and 8x8 DCT features (67 -> 64), 4
    blocks whose MLP weights a linear makes from the token (3072 -> 3 x 64 x 256 each), a 3x3
    output conv."""
    d = 3072
    nerf = _linear(3 + 8 * 8, 64) + 4 * (_linear(d, 3 * 64 * 64 * 4) + 64) + 64 + 64 * 3 * 9 + 3
    return _flux_layout_trunk() + 3 * d * 16 * 16 + d + nerf


def f_lite_transformer() -> int:
    """F Lite's DiT (f_light/src/model.py) at the release's shape: 40 blocks of width 3072
    (self-attention with residual value, cross-attention to T5's 4096, GELU MLP x4, adaLN of 9
    vectors; no biases on the attention, no norm weights: train_bias_and_rms false), patch 2
    over 16 latent channels, 16 register tokens, the time MLP, the final modulation."""
    d, m = 3072, 4 * 3072
    block = (
        _linear(d, 3 * d, False)
        + _linear(d, d, False)
        + 1
        + _linear(d, d, False)
        + _linear(4096, 2 * d, False)
        + _linear(d, d, False)
        + _linear(d, m)
        + _linear(m, d)
        + _linear(d, 9 * d)
    )
    rest = 16 * d * 2 * 2 + d + 16 * d + _linear(d, m) + _linear(m, d) + _linear(d, 2 * d)
    return 40 * block + rest + _linear(d, 2 * 2 * 16)


def _zimage_trunk() -> int:
    """Z-Image's trunk (diffusers ZImageTransformer2DModel, Z-Image-Turbo's config): 30
    modulated blocks and 2 noise refiners of width 3840 (SwiGLU 10240, adaLN from 256), 2
    context refiners without modulation, the timestep MLP, the caption embedder, two pad
    tokens; without the patch embedder and the final layer."""
    d, head = 3840, 128
    core = 4 * _linear(d, d, False) + 2 * head + 3 * _linear(d, int(d / 3 * 8), False) + 4 * d
    modulated = core + _linear(256, 4 * d)
    timestep = _linear(256, 1024) + _linear(1024, 256)
    return 32 * modulated + 2 * core + timestep + 2560 + _linear(2560, d) + 2 * d


def zimage_transformer() -> int:
    """Z-Image: the trunk, the 2x2 patch embedder over 16 channels, the final layer."""
    return _zimage_trunk() + _linear(64, 3840) + _linear(3840, 64) + _linear(256, 3840)


def zimage_l2p_transformer() -> int:
    """Z-Image L2P (z_image/z_image_l2p_model.py): the trunk with a 16 px RGB patch embedder
    (768 -> 3840), its final layer deleted, and the pixel U-Net decoder (MicroDiffusionModel:
    convs 3-64-128-256-512, a 1x1 bottleneck over 512 + 3840, the mirrored decoder)."""

    def conv3(inputs: int, outputs: int) -> int:
        return inputs * outputs * 9 + outputs

    decoder = (
        conv3(3, 64)
        + conv3(64, 128)
        + conv3(128, 256)
        + conv3(256, 512)
        + (512 + 3840) * 512
        + 512
        + conv3(512, 512)
        + conv3(1024, 256)
        + conv3(256, 256)
        + conv3(512, 128)
        + conv3(128, 128)
        + conv3(256, 64)
        + conv3(64, 64)
        + conv3(128, 64)
        + 64 * 3
        + 3
    )
    return _zimage_trunk() + _linear(768, 3840) + decoder


def zeta_chroma_transformer() -> int:
    """Zeta-Chroma (zeta_chroma/zeta_chroma_transformer.py ZImageDCTParams, in_channels 32 x 32
    x 3 at patch 1, as zeta_chroma_model.py builds it): the Z-Image trunk, a 3072 -> 3840 patch
    embedder, and the DCT decoder (the condition linear, an embedder of the 3072 pixels and 64
    DCT features, 4 adaLN residual MLPs of 3840, the output linear)."""
    d, pixels = 3840, 32 * 32 * 3
    decoder = (
        _linear(d, d)
        + _linear(pixels + 8 * 8, d)
        + 4 * (2 * d + 2 * _linear(d, d) + _linear(d, 3 * d))
        + _linear(d, pixels)
    )
    return _zimage_trunk() + _linear(pixels, d) + decoder


def ernie_image_transformer() -> int:
    """ERNIE-Image (AI Toolkit ernie_image/transformer.py ErnieImageTransformer2DModel) at the
    release's shape: 36 shared-adaLN blocks of width 4096 (32 heads of 128, q/k RMS norms,
    gated GELU MLP of 12288, no biases), the 1x1 patch embedder over 128 channels, the text
    projection from 3072, the timestep MLP, the shared adaLN (6 vectors), the final layer."""
    d, ffn = 4096, 12288
    block = 2 * d + 4 * _linear(d, d, False) + 2 * 128 + 3 * _linear(d, ffn, False)
    rest = (
        128 * d
        + d
        + _linear(3072, d, False)
        + 2 * _linear(d, d)
        + _linear(d, 6 * d)
        + _linear(d, 2 * d)
        + _linear(d, 128)
    )
    return 36 * block + rest


def _mistral_lm(hidden: int, inter: int, layers: int, vocab: int, head: bool) -> int:
    """A Mistral language model (32 query heads and 8 KV heads of 128, SwiGLU, no biases)."""
    attention = _linear(hidden, 4096, False) + 2 * _linear(hidden, 1024, False)
    block = attention + _linear(4096, hidden, False) + 3 * _linear(hidden, inter, False)
    return vocab * hidden * (2 if head else 1) + layers * (block + 2 * hidden) + hidden


def _pixtral_with_projector(text_hidden: int) -> int:
    """Mistral 3's Pixtral vision tower (24 layers of 1024, SwiGLU 4096, patch 14, no biases)
    and its projector (a norm, the 2x2 patch merger, two linears to the text width)."""
    tower = (
        3 * 1024 * 14 * 14
        + 1024
        + 24 * (4 * _linear(1024, 1024, False) + 3 * _linear(1024, 4096, False) + 2 * 1024)
    )
    projector = (
        1024
        + _linear(4 * 1024, 1024, False)
        + _linear(1024, text_hidden, False)
        + _linear(text_hidden, text_hidden, False)
    )
    return tower + projector


def mistral_small_31() -> int:
    """Mistral-Small-3.1-24B as Mistral3ForConditionalGeneration (untied head)."""
    return _mistral_lm(5120, 32768, 40, 131072, True) + _pixtral_with_projector(5120)


def ernie_text_encoder() -> int:
    """ERNIE-Image's text encoder as AutoModel builds it (Mistral3Model: no LM head): a
    Ministral-3-3B-shaped language model (mflux's port: 26 layers of 3072, SwiGLU 9216, vocab
    131072) and the Mistral 3 vision tower and projector."""
    return _mistral_lm(3072, 9216, 26, 131072, False) + _pixtral_with_projector(3072)


def _qwen25_vl(
    hidden: int, inter: int, layers: int, heads: int, kv: int, vocab: int, tied: bool
) -> int:
    """Qwen2_5_VLForConditionalGeneration: the Qwen2 language model (q/k/v biases), its head
    unless tied, and the 32-layer vision tower of 1280 with its 2x2 merger."""
    head_dim = hidden // heads
    attention = _linear(hidden, hidden) + 2 * _linear(hidden, kv * head_dim) + hidden * hidden
    lm = vocab * hidden + layers * (attention + 3 * hidden * inter + 2 * hidden) + hidden
    vision = 3 * 2 * 14 * 14 * 1280 + 32 * (
        2 * 1280
        + _linear(1280, 3840)
        + _linear(1280, 1280)
        + 2 * _linear(1280, 3420)
        + _linear(3420, 1280)
    )
    merger = 1280 + _linear(5120, 5120) + _linear(5120, hidden)
    return lm + (0 if tied else vocab * hidden) + vision + merger


def qwen25_vl_7b() -> int:
    return _qwen25_vl(3584, 18944, 28, 28, 4, 152064, False)


def qwen25_vl_3b() -> int:
    return _qwen25_vl(2048, 11008, 36, 16, 2, 151936, True)


def _lumina_block(width: int, heads: int, kv_heads: int, modulated: bool) -> int:
    """An OmniGen2 / Boogu block (block_lumina2.py): GQA attention with q/k RMS norms, a SwiGLU
    of 4 x width rounded up to 256, RMS norms, and LuminaRMSNormZero (1024 -> 4 x width)."""
    head = width // heads
    inner = 256 * ((4 * width + 255) // 256)
    attention = 2 * _linear(width, width, False) + 2 * _linear(width, kv_heads * head, False)
    core = attention + 2 * head + 3 * _linear(width, inner, False)
    if modulated:
        return core + _linear(1024, 4 * width) + width + 3 * width
    return core + 4 * width


def _lumina_rest(width: int, text: int) -> int:
    """Their embedders and head: the 2x2 patch embedders of the target and the reference
    images (16 channels), the timestep MLP (256 -> 1024), the caption norm and projection,
    the output norm's modulation and projection, 5 image-index embeddings."""
    return (
        2 * _linear(64, width)
        + _linear(256, 1024)
        + _linear(1024, 1024)
        + text
        + _linear(text, width)
        + _linear(1024, width)
        + _linear(width, 64)
        + 5 * width
    )


def omnigen2_transformer() -> int:
    """OmniGen2 (omnigen2/src/models/transformers/transformer_omnigen2.py) at the release's
    config: 32 blocks of 2520 (21 heads, 7 KV heads), 2 noise, 2 reference and 2 context
    refiners, text features of 2048 (Qwen2.5-VL-3B's width)."""
    d = 2520
    refiners = 4 * _lumina_block(d, 21, 7, True) + 2 * _lumina_block(d, 21, 7, False)
    return 32 * _lumina_block(d, 21, 7, True) + refiners + _lumina_rest(d, 2048)


def boogu_transformer() -> int:
    """Boogu-Image (boogu_image/src/transformer.py BooguImageTransformer2DModel defaults = the
    release's): 8 double-stream blocks (a joint attention whose processor holds separate image
    and instruction q/k/v/out, an image self-attention, two SwiGLUs, five LuminaRMSNormZero,
    seven RMS norms) and 32 single-stream blocks of 3360 (28 heads, 7 KV heads), 2 noise, 2
    reference and 2 context refiners, instruction features of 4096."""
    d, head, kv = 3360, 120, 7 * 120
    inner = 256 * ((4 * d + 255) // 256)
    streams = 2 * (2 * _linear(d, d, False) + 2 * _linear(d, kv, False))
    double = (
        2 * head
        + _linear(d, d, False)
        + streams
        + 2 * _linear(d, d, False)
        + 2 * _linear(d, kv, False)
        + 2 * head
        + 2 * 3 * _linear(d, inner, False)
        + 5 * (_linear(1024, 4 * d) + d)
        + 7 * d
    )
    refiners = 4 * _lumina_block(d, 28, 7, True) + 2 * _lumina_block(d, 28, 7, False)
    return 8 * double + 32 * _lumina_block(d, 28, 7, True) + refiners + _lumina_rest(d, 4096)


def _card(transformer: int, text: int, vae: int, source: str) -> dict[str, Any]:
    return {
        "transformer": round(transformer / 1e9, 3),
        "text_encoder": round(text / 1e9, 3),
        "vae": round(vae / 1e9, 3),
        "source": source,
    }


_STAND_IN = (
    "not measured: AI Toolkit runs its own {} code for it, which no library class builds, so "
    "there is no block to measure the same way"
)
FAMILIES: tuple[Family, ...] = (
    Family(
        id="chroma_radiance",
        transformer=Module("none", "ChromaRadiance", {}, "Chroma Radiance transformer", ""),
        text_encoders=(T5_XXL,),
        vae=(),
        card=_card(
            chroma_radiance_transformer(),
            COUNTED["T5-XXL encoder"],
            0,
            f"Chroma Radiance transformer: {_AITK}/chroma/src/radiance.py chroma_params (19 "
            "double and 38 single blocks of 3072, the loader reads the depths from the "
            "checkpoint; Chroma1's), counted layer by layer = "
            f"{chroma_radiance_transformer():,}; T5-XXL encoder (ostris/Flex.1-alpha "
            f"text_encoder_2, chroma_radiance_model.py): the flux family's meta-device count = "
            f"{COUNTED['T5-XXL encoder']:,}; pixel space: no VAE",
        ),
        unknown=_STAND_IN.format("Chroma Radiance (chroma/src/radiance.py)"),
    ),
    Family(
        id="f_lite",
        transformer=Module("none", "FLiteDiT", {}, "F Lite transformer", ""),
        text_encoders=(T5_XXL,),
        vae=(VAE_FLUX,),
        card=_card(
            f_lite_transformer(),
            COUNTED["T5-XXL encoder"],
            COUNTED["FLUX.1 VAE"],
            f"F Lite transformer: {_AITK}/f_light/src/model.py DiT at the release's shape (the "
            "F Lite technical report: 40 layers, hidden 3072, 10B; its release code, "
            "sippycoder/f-lite 84664e9 f_lite/pt.py: heads of 256, MLP x4, cross-attention "
            "from 4096, residual value, train_bias_and_rms false, 16 channels at patch 2), "
            f"counted layer by layer = {f_lite_transformer():,}; T5-XXL encoder (the release "
            "pairs FLUX.1-schnell's text_encoder_2): the flux family's meta-device count = "
            f"{COUNTED['T5-XXL encoder']:,}; FLUX.1 VAE = {COUNTED['FLUX.1 VAE']:,}; F Lite "
            "7B (Freepik/F-Lite-7B) has fewer blocks, which no stored source gives: this "
            "counts the 10B",
        ),
        unknown=_STAND_IN.format("F Lite (f_light/src/model.py)"),
    ),
    Family(
        id="zimage_l2p",
        transformer=Module("none", "ZImageL2P", {}, "Z-Image L2P transformer", ""),
        text_encoders=(QWEN3_4B,),
        vae=(),
        card=_card(
            zimage_l2p_transformer(),
            COUNTED["Qwen3-4B"],
            0,
            f"Z-Image L2P transformer: {_AITK}/z_image/z_image_l2p_model.py "
            "(ZIMAGE_DEFAULT_CONFIG = Z-Image-Turbo's, in_channels 3 at patch 16, the final "
            "layer deleted, the MicroDiffusionModel pixel decoder), counted layer by layer = "
            f"{zimage_l2p_transformer():,}; Qwen3-4B (Tongyi-MAI/Z-Image-Turbo text_encoder, the "
            "UI's extras_name_or_path): the zimage family's meta-device count = "
            f"{COUNTED['Qwen3-4B']:,}; pixel space: no VAE",
        ),
        unknown=_STAND_IN.format("Z-Image L2P (z_image/z_image_l2p_model.py)"),
    ),
    Family(
        id="zeta_chroma",
        transformer=Module("none", "ZImageDCT", {}, "Zeta-Chroma transformer", ""),
        text_encoders=(QWEN3_4B,),
        vae=(),
        card=_card(
            zeta_chroma_transformer(),
            COUNTED["Qwen3-4B"],
            0,
            f"Zeta-Chroma transformer: {_AITK}/zeta_chroma/zeta_chroma_transformer.py "
            "ZImageDCTParams defaults with in_channels 32 x 32 x 3 at patch 1 "
            "(zeta_chroma_model.py builds it so and loads the checkpoint strictly), counted "
            f"layer by layer = {zeta_chroma_transformer():,}; Qwen3-4B "
            "(Tongyi-MAI/Z-Image-Turbo text_encoder, the UI's extras_name_or_path): the zimage "
            f"family's meta-device count = {COUNTED['Qwen3-4B']:,}; pixel space: no VAE",
        ),
        unknown=_STAND_IN.format("Zeta-Chroma (zeta_chroma/zeta_chroma_transformer.py)"),
    ),
    Family(
        id="ernie_image",
        transformer=Module("none", "ErnieImage", {}, "ERNIE-Image transformer", ""),
        text_encoders=(),
        vae=(VAE_FLUX2,),
        card=_card(
            ernie_image_transformer(),
            ernie_text_encoder(),
            COUNTED["FLUX.2 VAE"],
            f"ERNIE-Image transformer: {_AITK}/ernie_image/transformer.py at the release's "
            "shape (sgl-project/sglang multimodal_gen/configs/models/dits/ernie_image.py and "
            "filipstrand/mflux 97ac5e6 models/ernie_image: 36 layers of 4096, 32 heads, FFN "
            "12288, 128 channels at patch 1, text 3072), counted layer by layer = "
            f"{ernie_image_transformer():,}; text encoder: AutoModel of the release's "
            "text_encoder (a Mistral 3 checkpoint: mflux reads its language_model.model. "
            "weights), a Ministral-3-3B-shaped language model (mflux: 26 layers of 3072, "
            "SwiGLU 9216, vocab 131072) = "
            f"{_mistral_lm(3072, 9216, 26, 131072, False):,} and the Mistral 3 Pixtral tower "
            "and projector (Mistral-Small-3.1's vision config: an assumption, the Ministral 3 "
            f"family's own ~0.4 B) = {_pixtral_with_projector(3072):,}; FLUX.2 VAE "
            f"(ernie_image.py AutoencoderKLFlux2) = {COUNTED['FLUX.2 VAE']:,}",
        ),
        unknown=_STAND_IN.format("ERNIE-Image (ernie_image/transformer.py)"),
    ),
    Family(
        id="boogu_image",
        transformer=Module("none", "BooguImage", {}, "Boogu-Image transformer", ""),
        text_encoders=(QWEN3_VL_8B,),
        vae=(VAE_FLUX,),
        card=_card(
            boogu_transformer(),
            COUNTED["Qwen3-VL-8B-Instruct"] - 151936 * 4096,
            COUNTED["FLUX.1 VAE"],
            f"Boogu-Image transformer: {_AITK}/boogu_image/src/transformer.py "
            "BooguImageTransformer2DModel defaults (= sgl-project/sglang multimodal_gen/"
            "configs/models/dits/boogu_image.py; the release README: 10B), counted layer by "
            f"layer = {boogu_transformer():,}; text encoder: AutoModel of the release's mllm "
            "(Qwen3VLModel, no LM head), instruction features of 4096: Qwen3-VL-8B's width, "
            "the ideogram4 family's meta-device count less its untied head (151,936 x 4,096) = "
            f"{COUNTED['Qwen3-VL-8B-Instruct'] - 151936 * 4096:,}; FLUX.1 VAE "
            f"(boogu_image.py) = {COUNTED['FLUX.1 VAE']:,}",
        ),
        unknown=_STAND_IN.format("Boogu-Image (boogu_image/src/transformer.py)"),
    ),
    Family(
        id="omnigen2",
        transformer=Module("none", "OmniGen2", {}, "OmniGen2 transformer", ""),
        text_encoders=(),
        vae=(VAE_FLUX,),
        card=_card(
            omnigen2_transformer(),
            qwen25_vl_3b(),
            COUNTED["FLUX.1 VAE"],
            f"OmniGen2 transformer: {_AITK}/omnigen2/src/models/transformers/"
            "transformer_omnigen2.py at the release's config (vllm-project/vllm-omni's "
            "OmniGen2 pipeline test and the DFloat11 OmniGen2 loaders: 32 layers of 2520, 21 "
            "heads, 7 KV heads, text 2048; the OmniGen2 README: a 4B diffusion model), counted "
            f"layer by layer = {omnigen2_transformer():,}; Qwen2.5-VL-3B-Instruct (the "
            "README's 3B VLM, text features 2048; its published config: 36 layers of 2048, "
            "SwiGLU 11008, 16 heads, 2 KV heads, tied), Qwen2_5_VLForConditionalGeneration "
            f"counted layer by layer = {qwen25_vl_3b():,}; VAE: a 16-channel AutoencoderKL "
            f"(the transformer's in_channels), FLUX.1's assumed = {COUNTED['FLUX.1 VAE']:,}",
        ),
        unknown=_STAND_IN.format(
            "OmniGen2 (omnigen2/src/models/transformers/transformer_omnigen2.py)"
        ),
    ),
)
