"""The top-level inputs each model class takes for one measured point, and the models set to AI
Toolkit's code path."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import Grid, Inputs

# --- top-level inputs per model class ----------------------------------------------------------


def _randn(torch: Any, *shape: int) -> Any:
    return torch.randn(*shape, dtype=torch.bfloat16)


def _flux_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    n = grid.image_tokens
    ids = torch.zeros(n, 3)
    ids[:, 1] = torch.arange(grid.height).repeat_interleave(grid.width).repeat(grid.frames)
    ids[:, 2] = torch.arange(grid.width).repeat(grid.height * grid.frames)
    inputs: Inputs = {
        "hidden_states": _randn(torch, 1, n, config.get("in_channels", 64)),
        "encoder_hidden_states": _randn(
            torch, 1, grid.text, config.get("joint_attention_dim", 4096)
        ),
        "img_ids": ids,
        "txt_ids": torch.zeros(grid.text, 3),
        "timestep": torch.tensor([0.5], dtype=torch.bfloat16),
    }
    if "pooled_projection_dim" in config or config.get("_class") == "FluxTransformer2DModel":
        inputs["pooled_projections"] = _randn(torch, 1, config.get("pooled_projection_dim", 768))
    if config.get("guidance_embeds"):
        inputs["guidance"] = torch.tensor([3.5], dtype=torch.bfloat16)
    return inputs


def _chroma_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    inputs = _flux_inputs(torch, config, grid)
    inputs.pop("pooled_projections", None)
    return inputs


def _fibo_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    # FLUX's inputs without the pooled projection (the class has the key, set to None), and
    # DimFusion's per-block text: one hidden state of the text encoder for every block (AI
    # Toolkit fibo_model.py get_noise_prediction repeats the last one where the encoder has
    # fewer layers than the transformer has blocks).
    flux = {key: value for key, value in config.items() if key != "pooled_projection_dim"}
    inputs = _flux_inputs(torch, flux, grid)
    blocks = config["num_layers"] + config["num_single_layers"]
    inputs["text_encoder_layers"] = [
        _randn(torch, 1, grid.text, config["text_encoder_dim"]) for _ in range(blocks)
    ]
    return inputs


def _flux2_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    n = grid.image_tokens
    img_ids = torch.cartesian_prod(
        torch.arange(grid.frames),
        torch.arange(grid.height),
        torch.arange(grid.width),
        torch.arange(1),
    ).unsqueeze(0)
    txt_ids = torch.cartesian_prod(
        torch.arange(1), torch.arange(1), torch.arange(1), torch.arange(grid.text)
    ).unsqueeze(0)
    inputs: Inputs = {
        "hidden_states": _randn(torch, 1, n, config["in_channels"]),
        "encoder_hidden_states": _randn(torch, 1, grid.text, config["joint_attention_dim"]),
        "img_ids": img_ids,
        "txt_ids": txt_ids,
        "timestep": torch.tensor([0.5], dtype=torch.bfloat16),
    }
    if config.get("guidance_embeds", True):
        inputs["guidance"] = torch.tensor([3.5], dtype=torch.bfloat16)
    return inputs


def _qwen_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    return {
        "hidden_states": _randn(torch, 1, grid.image_tokens, config.get("in_channels", 64)),
        "encoder_hidden_states": _randn(
            torch, 1, grid.text, config.get("joint_attention_dim", 3584)
        ),
        "encoder_hidden_states_mask": torch.ones(1, grid.text, dtype=torch.long),
        "timestep": torch.tensor([0.5], dtype=torch.bfloat16),
        "img_shapes": [(grid.frames, grid.height, grid.width)],
    }


def _wan_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    # Wan patches the latent 1x2x2: the latent is twice the token grid on each side.
    return {
        "hidden_states": _randn(
            torch, 1, config["in_channels"], grid.frames, grid.height * 2, grid.width * 2
        ),
        "encoder_hidden_states": _randn(torch, 1, grid.text, config.get("text_dim", 4096)),
        "timestep": torch.tensor([500]),
    }


def _krea2_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    n = grid.image_tokens
    position_ids = torch.zeros(grid.text + n, 3)
    position_ids[grid.text :, 1] = torch.arange(grid.height).repeat_interleave(grid.width)
    position_ids[grid.text :, 2] = torch.arange(grid.width).repeat(grid.height)
    return {
        "hidden_states": _randn(torch, 1, n, config["in_channels"]),
        "encoder_hidden_states": _randn(
            torch, 1, grid.text, config["num_text_layers"], config["text_hidden_dim"]
        ),
        "timestep": torch.tensor([0.5], dtype=torch.bfloat16),
        "position_ids": position_ids,
        "encoder_attention_mask": torch.ones(1, grid.text, dtype=torch.bool),
    }


def _ltx2_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    audio_frames = 32  # about 1.3 s of audio latents; a constant beside the video tokens
    text_dim = config["caption_channels"] if config.get("use_prompt_embeddings", True) else None
    video_text = text_dim or config["cross_attention_dim"]
    audio_text = text_dim or config["audio_cross_attention_dim"]
    newer: Inputs = {}
    if config.get("cross_attn_mod"):
        # LTX-2.3: AI Toolkit passes the sigma beside the timestep and the cross timestep
        step = torch.tensor([500.0], dtype=torch.bfloat16)
        newer = {"audio_timestep": step, "sigma": step / 1000, "audio_sigma": step / 1000}
        newer["use_cross_timestep"] = True
    return {
        **newer,
        "hidden_states": _randn(torch, 1, grid.image_tokens, config["in_channels"]),
        "audio_hidden_states": _randn(torch, 1, audio_frames, config["audio_in_channels"]),
        "encoder_hidden_states": _randn(torch, 1, grid.text, video_text),
        "audio_encoder_hidden_states": _randn(torch, 1, grid.text, audio_text),
        "timestep": torch.tensor([500.0], dtype=torch.bfloat16),
        "encoder_attention_mask": torch.ones(1, grid.text, dtype=torch.bool),
        "num_frames": grid.frames,
        "height": grid.height,
        "width": grid.width,
        "audio_num_frames": audio_frames,
        "fps": 24.0,
    }


def _minimax_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    audio = 16  # a constant beside the video tokens
    video = grid.image_tokens
    total = grid.text + audio + video
    text_idx = torch.arange(grid.text)
    audio_idx = torch.arange(grid.text, grid.text + audio)
    video_idx = torch.arange(grid.text + audio, total)
    tags = torch.zeros(total, dtype=torch.long)
    tags[text_idx] = 1
    tags[audio_idx] = 2
    steps = torch.zeros(total, dtype=torch.long)
    steps[audio_idx] = 1
    positions = torch.zeros(total, 3)
    positions[:, 0] = torch.arange(total, dtype=torch.float32)
    hw = grid.height * grid.width
    positions[video_idx, 1] = (torch.arange(video) % hw // grid.width).float()
    positions[video_idx, 2] = (torch.arange(video) % grid.width).float()
    patch = config.get("patch_size", (1, 2, 2))
    return {
        "hidden_states": _randn(
            torch, 1, video, config["in_channels"] * patch[0] * patch[1] * patch[2]
        ),
        "audio_hidden_states": _randn(torch, 1, audio, config["audio_in_channels"]),
        "encoder_hidden_states": _randn(torch, 1, grid.text, config["text_dim"]),
        "timestep": torch.tensor([0.7, 0.3]),
        "timestep_indices": steps,
        "token_tags": tags,
        "position_ids": positions,
        "video_indices": video_idx,
        "audio_indices": audio_idx,
        "text_indices": text_idx,
    }


def _ideogram4_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    from diffusers.models.transformers import transformer_ideogram4 as ideo

    text, n = grid.text, grid.image_tokens
    total = text + n
    hidden = torch.zeros(1, total, config["in_channels"], dtype=torch.bfloat16)
    hidden[:, text:] = _randn(torch, 1, n, config["in_channels"])
    features = torch.zeros(1, total, config["llm_features_dim"], dtype=torch.bfloat16)
    features[:, :text] = _randn(torch, 1, text, config["llm_features_dim"])
    positions = torch.zeros(1, total, 3, dtype=torch.long)
    for axis in range(3):
        positions[:, :text, axis] = torch.arange(text)
    offset = ideo.IMAGE_POSITION_OFFSET
    positions[:, text:, 0] = offset
    positions[:, text:, 1] = torch.arange(grid.height).repeat_interleave(grid.width) + offset
    positions[:, text:, 2] = torch.arange(grid.width).repeat(grid.height) + offset
    indicator = torch.empty(1, total, dtype=torch.long)
    indicator[:, :text] = ideo.LLM_TOKEN_INDICATOR
    indicator[:, text:] = ideo.OUTPUT_IMAGE_INDICATOR
    return {
        "hidden_states": hidden,
        "timestep": torch.tensor([0.5], dtype=torch.bfloat16),
        "encoder_hidden_states": features,
        "position_ids": positions,
        "segment_ids": torch.ones(1, total, dtype=torch.long),
        "indicator": indicator,
    }


def _zimage_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    return {
        "x": [_randn(torch, config["in_channels"], grid.frames, grid.height * 2, grid.width * 2)],
        "cap_feats": [_randn(torch, grid.text, config["cap_feat_dim"])],
        "t": torch.tensor([0.5]),
    }


def _sd3_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    return {
        "hidden_states": _randn(torch, 1, config["in_channels"], grid.height * 2, grid.width * 2),
        "encoder_hidden_states": _randn(torch, 1, grid.text, config["joint_attention_dim"]),
        "pooled_projections": _randn(torch, 1, config["pooled_projection_dim"]),
        "timestep": torch.tensor([500.0], dtype=torch.bfloat16),
    }


def _cosmos_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    # The padding mask the model concatenates is one more input channel (reduce: in_channels 17,
    # concat_padding_mask off: its resize needs torchvision); the blocks see the same shapes.
    return {
        "hidden_states": _randn(
            torch, 1, config["in_channels"], grid.frames, grid.height * 2, grid.width * 2
        ),
        "timestep": torch.tensor([500.0], dtype=torch.bfloat16),
        "encoder_hidden_states": _randn(torch, 1, grid.text, config["text_embed_dim"]),
    }


def _llm_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    total = grid.text + grid.image_tokens
    return {
        "inputs_embeds": _randn(torch, 1, total, config["hidden_size"]),
        "position_ids": torch.arange(total).view(1, 1, total).expand(3, 1, total),
        "use_cache": False,
    }


def _hidream_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    # A block's text is three equal sequences (AI Toolkit hidream_model.py get_prompt_embeds:
    # max_sequence_length 128 for each encoder): the T5 one and the last Llama layer's, which
    # every block carries on, and the Llama layer of the block itself.
    assert grid.text % 3 == 0, grid
    text = grid.text // 3
    return {
        "hidden_states": _randn(torch, 1, config["in_channels"], grid.height * 2, grid.width * 2),
        "timesteps": torch.tensor([500.0]),
        "encoder_hidden_states_t5": _randn(torch, 1, text, config["caption_channels"][0]),
        "encoder_hidden_states_llama3": [
            _randn(torch, 1, text, config["caption_channels"][1])
            for _ in range(max(config["llama_layers"]) + 1)
        ],
        "pooled_embeds": _randn(torch, 1, config["text_emb_dim"]),
    }


def _hidream_toolkit_moe(model: Any) -> None:
    """Route each mixture-of-experts layer as AI Toolkit's HiDream code does in training.

    diffusers' MOEFeedForwardSwiGLU trains through its reference path (every token repeated
    top-k times); AI Toolkit's own copy (hidream/src/models/moe.py) always takes the sorted
    dispatch (``moe_infer``: each expert runs on the tokens routed to it, the results are
    scattered back), with gradients and without the auxiliary loss. diffusers has that path
    too, as ``moe_infer`` under ``torch.no_grad``, taken with ``force_inference_output``: this
    takes it with gradients, as the toolkit does.
    """
    from diffusers.models.transformers.transformer_hidream_image import MOEFeedForwardSwiGLU

    dispatch = MOEFeedForwardSwiGLU.moe_infer.__wrapped__  # the method without torch.no_grad
    for module in model.modules():
        if isinstance(module, MOEFeedForwardSwiGLU):
            module._force_inference_output = True
            module.gate._force_inference_output = True  # no auxiliary loss, as in the toolkit
            module.moe_infer = dispatch.__get__(module)


def _lumina2_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    # AI Toolkit (stable_diffusion_model.py predict_noise) passes the Gemma mask as int64; the
    # joint blocks see the caption's unmasked tokens only (the model counts them with .tolist()):
    # every text token is unmasked here, the longest caption.
    return {
        "hidden_states": _randn(torch, 1, config["in_channels"], grid.height * 2, grid.width * 2),
        "timestep": torch.tensor([0.5], dtype=torch.bfloat16),
        "encoder_hidden_states": _randn(torch, 1, grid.text, config["cap_feat_dim"]),
        "encoder_attention_mask": torch.ones(1, grid.text, dtype=torch.int64),
    }


def _pixart_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    added = {}
    if config.get("use_additional_conditions"):
        added = {
            "resolution": torch.tensor([[grid.height * 16.0, grid.width * 16.0]]),
            "aspect_ratio": torch.tensor([[grid.height / grid.width]]),
        }
    return {
        "hidden_states": _randn(torch, 1, config["in_channels"], grid.height * 2, grid.width * 2),
        "encoder_hidden_states": _randn(torch, 1, grid.text, config["caption_channels"]),
        "timestep": torch.tensor([500]),
        "added_cond_kwargs": added,
    }


def _auraflow_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    return {
        "hidden_states": _randn(torch, 1, config["in_channels"], grid.height * 2, grid.width * 2),
        "encoder_hidden_states": _randn(torch, 1, grid.text, config["joint_attention_dim"]),
        "timestep": torch.tensor([500.0], dtype=torch.bfloat16),
    }


def _cogview4_inputs(torch: Any, config: Mapping[str, Any], grid: Grid) -> Inputs:
    side = [[grid.height * 16.0, grid.width * 16.0]]
    return {
        "hidden_states": _randn(torch, 1, config["in_channels"], grid.height * 2, grid.width * 2),
        "encoder_hidden_states": _randn(torch, 1, grid.text, config["text_embed_dim"]),
        "timestep": torch.tensor([500.0], dtype=torch.bfloat16),
        "original_size": torch.tensor(side, dtype=torch.bfloat16),
        "target_size": torch.tensor(side, dtype=torch.bfloat16),
        "crop_coords": torch.tensor([[0.0, 0.0]], dtype=torch.bfloat16),
    }
