"""LTX-2, LTX-2.3 and MiniMax-H3: the audio-video families."""

from __future__ import annotations

from .base import Family, Module
from .encoders import GEMMA3_12B, QWEN3_VL_32B, VAE_LTX2, VAE_LTX2_AUDIO
from .inputs import _ltx2_inputs, _minimax_inputs

_LTX_20 = {
    "in_channels": 128,
    "out_channels": 128,
    "num_attention_heads": 32,
    "attention_head_dim": 128,
    "cross_attention_dim": 4096,
    "audio_in_channels": 128,
    "audio_out_channels": 128,
    "audio_num_attention_heads": 32,
    "audio_attention_head_dim": 64,
    "audio_cross_attention_dim": 2048,
    "num_layers": 48,
    "caption_channels": 3840,
    "rope_type": "split",
    "use_prompt_embeddings": True,
    "perturbed_attn": False,
    "gated_attn": False,
    "cross_attn_mod": False,
    "audio_gated_attn": False,
    "audio_cross_attn_mod": False,
}
_LTX_23 = {
    **_LTX_20,
    "gated_attn": True,
    "cross_attn_mod": True,
    "audio_gated_attn": True,
    "audio_cross_attn_mod": True,
    "use_prompt_embeddings": False,
    "perturbed_attn": True,
}
_LTX_SRC = "AI Toolkit ltx2/convert_ltx2_to_diffusers.py config"
_GEMMA_TEXT = GEMMA3_12B.config["text_config"]
# every hidden state of Gemma-3-12B stacked per token: its embeddings' output and each layer's
_LTX_TEXT_WIDTH = (_GEMMA_TEXT["num_hidden_layers"] + 1) * _GEMMA_TEXT["hidden_size"]
_LTX_TEXT_SOURCE = (
    f"Gemma-3-12B's {_GEMMA_TEXT['num_hidden_layers'] + 1} hidden states of "
    f"{_GEMMA_TEXT['hidden_size']:,} stacked per token (AI Toolkit ltx2.py get_prompt_embeds: "
    "output_hidden_states, torch.stack, flatten), padded to 1,024 tokens for every prediction "
    "(pad_embeds in get_noise_prediction) and fed to the text connectors on the card"
)
_LTX_NOTE = (
    "VAE 32x32 spatial, 8x temporal, patch 1: a 768x512 121-frame clip is 16 x 24 x 16 = "
    "6,144 video tokens; the audio stream's tokens are a constant beside them"
)
FAMILIES: tuple[Family, ...] = (
    Family(
        id="ltx2",
        transformer=Module(
            "diffusers",
            "LTX2VideoTransformer3DModel",
            _LTX_20,
            "LTX-2 audio-video transformer",
            f"{_LTX_SRC} 2.0 (Lightricks/LTX-2)",
        ),
        text_encoders=(GEMMA3_12B,),
        vae=(VAE_LTX2, VAE_LTX2_AUDIO),
        text_tokens=1024,
        text_tokens_source="LTX-2 pipeline max_sequence_length 1024",
        text_embedding_width=_LTX_TEXT_WIDTH,
        text_embedding_source=_LTX_TEXT_SOURCE,
        blocks=("transformer_blocks",),
        reduce={"num_layers": 1},
        inputs=_ltx2_inputs,
        video=True,
        note=_LTX_NOTE,
    ),
    Family(
        id="ltx23",
        transformer=Module(
            "diffusers",
            "LTX2VideoTransformer3DModel",
            _LTX_23,
            "LTX-2.3 audio-video transformer",
            f"{_LTX_SRC} 2.3; LTX-2.5 keeps this transformer config (same file), but its text "
            "encoder is Gemma 4 12B with projections, not counted here: Gemma-3-12B stands in",
        ),
        text_encoders=(GEMMA3_12B,),
        vae=(VAE_LTX2, VAE_LTX2_AUDIO),
        text_tokens=1024,
        text_tokens_source="LTX-2 pipeline max_sequence_length 1024",
        text_embedding_width=_LTX_TEXT_WIDTH,
        text_embedding_source=_LTX_TEXT_SOURCE,
        blocks=("transformer_blocks",),
        reduce={"num_layers": 1},
        inputs=_ltx2_inputs,
        video=True,
        note=_LTX_NOTE,
    ),
    Family(
        id="minimax_h3",
        transformer=Module(
            "diffusers",
            "MiniMaxH3Transformer3DModel",
            {},
            "MiniMax-H3 transformer",
            "class defaults (diffusers: 'as in the released checkpoint')",
        ),
        text_encoders=(QWEN3_VL_32B,),
        vae=(),
        params_note="video and audio VAEs not counted: AI Toolkit's own minimax_h3/src code",
        text_tokens=512,
        text_tokens_source="a typical caption (the prompt is not padded)",
        blocks=("transformer_blocks",),
        reduce={"num_layers": 1, "num_refiner_layers": 1},
        inputs=_minimax_inputs,
        video=True,
        note="VAE 16x16 spatial, 17 frames -> 5 latent frames, patch 2: 480x832 x 107 frames is "
        "31 latent frames x 15 x 26 tokens",
    ),
)
