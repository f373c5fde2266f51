"""Measure parameter counts, training activations and VAE passes from the models' own code.

This is the one script that writes ``presets/memory.yaml``; the families it measures (each one's
classes and configurations, inputs and adapted modules) are defined in ``bench/families/``, one
module per family group, and this script holds the machinery. For each memory family it

* counts the parameters of the transformer (or UNet), the text encoder(s) and the VAE exactly,
  by building diffusers' and transformers' classes with the published configuration on
  PyTorch's ``meta`` device (no weights are read or downloaded);
* measures the training step's activations with AI Toolkit's adapters in place, as
  ``toolkit/lora_special.py`` and ``toolkit/network_mixins.py`` build them (``TOOLKIT_ADAPTERS``
  says which modules, per family, and where the toolkit's code says so): an fp32 rank-16
  down/up pair beside every adapted Linear (and 1x1 convolution; 3x3 ones too for LoCon), the
  module's input cast to fp32 for it, no autocast. Each adapted module therefore keeps an fp32
  copy of its input for the adapter's weight gradient, which frozen blocks do not;
  - a transformer at its real width with ONE block of each kind, forward and backward of one
    block at several token counts, with and without checkpointing, also frozen, with LoKr, and
    (for families with shared GPU rows, or with another trainer's published point in that
    setup: ``AUTOCAST_FAMILIES``) in the rows' own setup: the adapter under bf16 autocast with
    CUDA's float32 ops, its input the base's own bf16 tensor: bytes per token per block;
  - a UNet whole, at 512 and 1024 px: a fixed part and a slope per latent pixel, for LoRA (and
    LoCon for the families ``LOCON_UNETS`` names), with and without diffusers' gradient
    checkpointing, and (SDXL) in the GPU rows' setup;
* measures each VAE's decode and encode peak (no gradients), images by pixel, a frame-by-frame
  video VAE by frame pixel (its one-frame first chunk), what its later chunks of four frames and
  their causal cache add per frame pixel, and clip pixel, times its architecture's GPU factor
  (the shared GPU rows of a reference VAE over the same measurement: what cuDNN allocates
  beside the tensors);
* writes the figures, with the package versions, into ``presets/memory.yaml``.

Everything runs under PyTorch's FakeTensorMode on the CPU: the real model code with the real
kernels' shape and dtype rules (the CPU flash attention's meta functions) but no values, so a
6144-wide block costs neither RAM nor minutes on a shared 2-core machine. The bytes saved for
backward come from ``torch.autograd.graph.saved_tensors_hooks`` (each storage once; parameter
storages and the inputs every block shares left out); the transient peak from a dispatch mode
that follows every storage the region allocates. FLUX.1's double block gives 126.5 and 379.4
MiB at 1,024 and 4,096 image tokens + 512 text tokens frozen, as a real bf16 CPU run did.

Two families need values, not shapes (``Family.real`` says why): HiDream-I1 routes each token to
its experts by the gate's scores, and Lumina 2 reads its text mask's values. Their blocks run with
real bf16 tensors on the CPU instead, the same hooks counting, at small token counts (a block of
each kind built once at its real width, its frozen weights shared by the adapters' copies, fixed
seeds): the bytes are linear in the tokens with a flash kernel, so the slope between two small
grids is the figure and a third grid checks it. A bf16 matrix product on a CPU without bf16
units takes PyTorch's scalar path, so each is computed in fp32 and rounded to bf16 once
(``_fp32_matmuls``: the same output tensor, nothing else counted); a family then takes minutes.
The method checks out: ``--check --real zimage`` (Z-Image's blocks with real tensors at 256 and
512 image tokens) agrees with its fake-tensor figures within 2 %, and HiDream's figures are the
same to the byte from 144/256/400 and 256/400/576 image tokens, whichever experts the gate chose.

Usage (torch, diffusers and transformers come from the ``measure`` extra, in a venv of their own;
each family is written as soon as it is measured, so a run can be stopped and resumed by naming
the families left)::

    python bench/calibrate_memory.py                    # every family, everything (hours)
    python bench/calibrate_memory.py flux wan21_14b     # some families (or arch ids: krea2)
    python bench/calibrate_memory.py --kind activations sdxl   # blocks or UNet only
    python bench/calibrate_memory.py --kind vae flux    # the VAE passes only
    python bench/calibrate_memory.py --kind params      # parameter counts only (seconds)
    python bench/calibrate_memory.py --check flux       # measure, compare, exit 1 if they differ
    python bench/calibrate_memory.py --table            # the markdown table of memory.yaml

The figures are deterministic: fixed seeds, fixed shapes, sorted output.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import platform
import sys
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

# The family definitions live beside this script, in bench/families/.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from families import FAMILIES
from families.base import Family, Grid, Inputs, Module
from families.encoders import VAE_FLUX, VAE_WAN21
from families.inputs import _randn

ROOT = Path(__file__).resolve().parent.parent
MEMORY_YAML = ROOT / "presets" / "memory.yaml"
ARCHS_YAML = ROOT / "presets" / "archs.yaml"

# Token counts of one measurement: two image-token counts for the slope, a third to check the fit,
# and a second text-token count for the text slope. Small, so that a family takes seconds.
IMAGE_GRIDS = ((32, 32), (32, 64), (64, 64))  # latent tokens (after patching): 1024, 2048, 4096
FORMAT = 2  # memory.yaml's format (catalog.MemoryFile)
BYTES_TOLERANCE = 0.02  # --check: relative difference accepted (allocation sizes round)
# The top-level inputs a LoRA's gradient flows through (latents and text embeddings); the rest
# (timesteps, positions, masks) do not need one.
GRAD_INPUTS = (
    "hidden_states",
    "encoder_hidden_states",
    "audio_hidden_states",
    "x",
    "cap_feats",
    "encoder_hidden_states_t5",
    "encoder_hidden_states_llama3",
    "inputs_embeds",
)


# --- counting --------------------------------------------------------------------------------


def _class(module: Module) -> tuple[Any, Any]:
    name, _, config_name = module.name.partition(":")
    library = __import__(module.library)
    return getattr(library, name), getattr(library, config_name) if config_name else None


def build_meta(module: Module) -> Any:
    """The module's class with its configuration, on the meta device."""
    import torch

    cls, config_cls = _class(module)
    with torch.device("meta"):
        if config_cls is None:
            return cls(**module.config)
        config = config_cls(**module.config)
        if hasattr(cls, "_from_config"):
            return cls._from_config(config)
        return cls(config)


def count(module: Module) -> int:
    """Exact parameter count (shared weights once)."""
    model = build_meta(module)
    return sum(p.numel() for p in model.parameters())


def billions(n: int) -> float:
    return round(n / 1e9, 3)


# --- adapters as AI Toolkit builds them ----------------------------------------------------------
#
# toolkit/lora_special.py (LoRASpecialNetwork.create_modules) puts a module beside every Linear
# (LINEAR_MODULES) and 1x1 Conv2d of the model class the arch names in `target_lora_modules`;
# with `transformer_only` (NetworkConfig's default) only inside the names the model's
# `get_transformer_block_names()` gives; 3x3 convolutions only with `network.conv` (LoCon).
# BaseSDTrainProcess casts the network to float32 (`network.force_to(..., dtype=torch.float32)`)
# and trains without autocast, and toolkit/network_mixins.py (ToolkitModuleMixin.forward) casts
# each adapted module's input to the adapter's dtype ("always cast to float32") before
# `lora_down`: every adapted module keeps its own fp32 copy of its input for the adapter's weight
# gradient. toolkit/models/lokr.py (LokrModule._call_forward_fast_linear) instead keeps the
# input in the base's dtype and folds the Kronecker factors through it.

LORA_RANK = 16  # AI Toolkit's example configs: linear 16 (the rank barely moves the saved bytes)
ADAPTERS = ("none", "lora", "lora_autocast", "lokr")
"""What a block is measured with: none (frozen), lora (AI Toolkit's fp32 path), lora_autocast
(the adapter under bf16 autocast, as the shared GPU rows were taken and other trainers train:
``AUTOCAST_FAMILIES``), lokr (its fast path)."""


def _factor(dimension: int) -> tuple[int, int]:
    """LyCORIS' factorization with factor -1: m <= n, m * n = dimension, m + n smallest."""
    m, n = 1, dimension
    for candidate in range(2, math.isqrt(dimension) + 1):
        if dimension % candidate == 0:
            m, n = candidate, dimension // candidate
    return m, n


class _Copies:
    """The fp32 copies of one forward, by input: a class that fuses the projections reading one
    tensor (one Linear for q, k and v) casts that tensor once, not once per projection."""

    def __init__(self) -> None:
        self.by_input: dict[int, tuple[Any, Any]] = {}

    def of(self, x: Any, dtype: Any) -> Any:
        key = id(x)
        found = self.by_input.get(key)
        if found is None or found[0] is not x:
            found = (x, x.to(dtype))
            self.by_input[key] = found
        return found[1]

    def clear(self) -> None:
        self.by_input.clear()


def attach(
    block: Any, adapter: str, conv3x3: bool = False, fused: bool = False, where: str = ""
) -> _Copies:
    """Put ``adapter`` beside every Linear and 1x1 Conv2d of ``block`` (3x3 ones too with
    ``conv3x3``), as AI Toolkit does; the adapters' weights are the block's only trainable ones.
    ``fused``: the toolkit's own class of this arch fuses the projections that share an input;
    ``where``: only the modules with this in their name (the GPU rows' SDXL: ``attentions``)."""
    import torch

    copies = _Copies()
    if adapter == "none":
        return copies

    def adapted(module: Any) -> bool:
        if isinstance(module, torch.nn.Conv2d):
            return module.kernel_size == (1, 1) or conv3x3
        return isinstance(module, torch.nn.Linear)

    targets = [
        module for name, module in block.named_modules() if where in name and adapted(module)
    ]
    for module in targets:
        _adapt(module, adapter, copies, fused)
    return copies


def _adapt(module: Any, adapter: str, copies: _Copies, fused: bool) -> None:
    import torch

    fp32 = torch.float32
    original = module.forward
    conv = isinstance(module, torch.nn.Conv2d)
    if adapter == "lokr" and not conv:
        in_m, in_n = _factor(module.in_features)
        out_l, out_k = _factor(module.out_features)
        module.lokr_w1 = torch.nn.Parameter(torch.zeros(out_l, in_m, dtype=fp32))
        module.lokr_w2_a = torch.nn.Parameter(torch.zeros(out_k, LORA_RANK, dtype=fp32))
        module.lokr_w2_b = torch.nn.Parameter(torch.zeros(LORA_RANK, in_n, dtype=fp32))

        def lokr_forward(x: Any) -> Any:
            base = original(x)
            dtype = base.dtype
            factors = (module.lokr_w1, module.lokr_w2_a, module.lokr_w2_b)
            a, w2a, w2b = (factor.to(dtype) for factor in factors)
            grid = x.to(dtype).unflatten(-1, (in_m, in_n))
            tmp = torch.einsum("...qs,rs->...qr", grid, w2b)
            tmp = torch.einsum("...qr,or->...qo", tmp, w2a)
            delta = torch.einsum("...qo,pq->...po", tmp, a).flatten(-2, -1)
            return (base + delta).to(x.dtype)

        module.forward = lokr_forward
        return
    if conv:
        module.lora_down = torch.nn.Conv2d(
            module.in_channels,
            LORA_RANK,
            module.kernel_size,
            module.stride,
            module.padding,
            bias=False,
            dtype=fp32,
        )
        module.lora_up = torch.nn.Conv2d(LORA_RANK, module.out_channels, 1, bias=False, dtype=fp32)
    else:
        module.lora_down = torch.nn.Linear(module.in_features, LORA_RANK, bias=False, dtype=fp32)
        module.lora_up = torch.nn.Linear(LORA_RANK, module.out_features, bias=False, dtype=fp32)
    multiplier = torch.ones(1, dtype=fp32)

    def lora_forward(x: Any) -> Any:
        base = original(x)
        if adapter == "lora_autocast":  # the whole forward runs under bf16 autocast
            return base + module.lora_up(module.lora_down(x))
        lora_input = copies.of(x, fp32) if fused else x.to(fp32)
        out = module.lora_up(module.lora_down(lora_input))
        shape = (-1,) + (1,) * (out.dim() - 1)
        return base + (out * multiplier.view(shape)).to(base.dtype)

    module.forward = lora_forward


# CUDA autocast runs these in float32 (aten's autocast_mode.cpp, the fp32 and fp32_set_opt_dtype
# lists, the ones a diffusion block calls); CPU autocast does not, so the GPU rows' setup is
# reproduced on the CPU by upcasting their low-precision inputs.
_CUDA_AUTOCAST_FP32 = frozenset(
    {
        "layer_norm",
        "group_norm",
        "pow",
        "__pow__",
        "rsqrt",
        "exp",
        "log",
        "softmax",
        "log_softmax",
        "sum",
        "cumsum",
    }
)


def _autocast(adapter: str) -> Any:
    """The forward's autocast: none on AI Toolkit's own path, bf16 for the GPU rows' setup."""
    import torch

    if adapter != "lora_autocast":
        return contextlib.nullcontext()
    return torch.autocast("cpu", dtype=torch.bfloat16)


def _cuda_policy(adapter: str) -> Any:
    """For the GPU rows' setup: while autocast is on (the forward, and a checkpointed block's
    recomputation), the ops CUDA's autocast runs in float32 get float32 inputs."""
    import torch
    from torch.overrides import TorchFunctionMode

    if adapter != "lora_autocast":
        return contextlib.nullcontext()

    def up(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.dtype in (torch.bfloat16, torch.float16):
            return value.float()
        return value

    class CudaPolicy(TorchFunctionMode):  # type: ignore[misc]
        def __torch_function__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            if name in _CUDA_AUTOCAST_FP32 and torch.is_autocast_enabled("cpu"):
                args = tuple(up(a) for a in args)
                kwargs = {k: up(v) for k, v in kwargs.items()}
            return func(*args, **kwargs)

    return CudaPolicy()


# --- measuring -------------------------------------------------------------------------------


@dataclass
class Point:
    grid: Grid
    saved: int  # bytes saved for backward, no checkpointing
    peak: int  # the transient peak above them
    inputs: int  # bytes of the inputs the gradient flows through (what checkpointing keeps)
    ckpt_peak: int  # the peak of forward + recomputation + backward under checkpointing


def tensors_in(value: Any) -> Iterator[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, list | tuple):
        for item in value:
            yield from tensors_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from tensors_in(item)


def _clone(value: Any, grads: set[str], path: str = "") -> Any:
    """A fresh copy of captured block inputs, with requires_grad where it was."""
    import torch

    if isinstance(value, torch.Tensor):
        copy = value.detach().clone()
        if path in grads:
            copy.requires_grad_(True)
        return copy
    if isinstance(value, tuple):
        return tuple(_clone(v, grads, f"{path}.{i}") for i, v in enumerate(value))
    if isinstance(value, list):
        return [_clone(v, grads, f"{path}.{i}") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {k: _clone(v, grads, f"{path}.{k}") for k, v in value.items()}
    return value


def _grad_paths(value: Any, path: str = "") -> set[str]:
    import torch

    if isinstance(value, torch.Tensor):
        return {path} if value.requires_grad else set()
    found: set[str] = set()
    if isinstance(value, tuple | list):
        for i, v in enumerate(value):
            found |= _grad_paths(v, f"{path}.{i}")
    elif isinstance(value, dict):
        for k, v in value.items():
            found |= _grad_paths(v, f"{path}.{k}")
    return found


def storage_id(tensor: Any) -> int:
    """The identity of a tensor's storage (its C++ StorageImpl; fake tensors have one too)."""
    return int(tensor.untyped_storage()._cdata)


def _fp32_matmuls() -> Any:
    """With real tensors: each bf16 matrix product computed in fp32 and rounded to bf16 once.

    A CPU without bf16 units multiplies bf16 matrices through PyTorch's scalar fallback, ten and
    more times slower than fp32 (a HiDream block took an hour). The product's output is the
    bf16 tensor the kernel would give, of the same shape and strides (a GPU's bf16 GEMM also
    accumulates in fp32 and rounds once); the fp32 operands exist only inside this mode's own
    call, where neither the saved-tensor hooks nor ``LiveBytes`` (a mode entered inside this
    one) see them, so what is counted is unchanged.
    """
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    aten = torch.ops.aten
    products = {aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default}

    def up(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.dtype == torch.bfloat16:
            return value.float()
        return value

    class Fp32Matmuls(TorchDispatchMode):  # type: ignore[misc]
        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            kwargs = kwargs or {}
            if func in products and any(
                isinstance(a, torch.Tensor) and a.dtype == torch.bfloat16 for a in args
            ):
                return func(*(up(a) for a in args), **kwargs).to(torch.bfloat16)
            return func(*args, **kwargs)

    return Fp32Matmuls()


class LiveBytes:
    """Follows every storage created inside the region: live bytes now and at their peak.

    A storage is counted once, however many tensors view it, from the operator that first
    returns it until it is freed (a weakref finalizer on the storage); ``window`` is the peak
    since the last :meth:`reset_window` (a VAE's peak chunk by chunk)."""

    def __init__(self, exclude: set[int]) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode

        tracker = self

        class Mode(TorchDispatchMode):  # type: ignore[misc]
            def __torch_dispatch__(
                self, func: Any, types: Any, args: Any = (), kwargs: Any = None
            ) -> Any:
                out = func(*args, **(kwargs or {}))
                if "scaled_dot_product" in str(func):
                    tracker.attention.add(str(func).split(".")[1])
                for tensor in tensors_in(out):
                    tracker.add(tensor)
                return out

        self.exclude = exclude
        self.live = 0
        self.peak = 0
        self.known: dict[int, int] = {}
        self.window = 0
        self.attention: set[str] = set()  # the attention kernels that ran
        self.mode = Mode()

    def add(self, tensor: Any) -> None:
        storage = tensor.untyped_storage()
        ptr = int(storage._cdata)
        if ptr in self.known or ptr in self.exclude or not storage.nbytes():
            return
        size = storage.nbytes()
        self.known[ptr] = size
        self.live += size
        self.peak = max(self.peak, self.live)
        self.window = max(self.window, self.live)
        weakref.finalize(storage, self.free, ptr)

    def reset_window(self) -> None:
        self.window = self.live

    def free(self, ptr: int) -> None:
        size = self.known.pop(ptr, 0)
        self.live -= size

    def __enter__(self) -> LiveBytes:
        self.mode.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.mode.__exit__(*exc)


ATTENTION_SEEN: set[str] = set()


def _run_block(
    block: Any,
    args: Any,
    kwargs: Any,
    grads: set[str],
    checkpoint: bool,
    adapter: str = "none",
    copies: _Copies | None = None,
    recomputes: bool = False,
) -> tuple[int, int]:
    """Forward and backward of one block: bytes saved for backward, and the peak above them.
    ``recomputes``: the block checkpoints inside itself (a UNet after
    enable_gradient_checkpointing)."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.checkpoint import checkpoint as run_checkpointed

    call_args = _clone(args, grads, "a")
    call_kwargs = _clone(kwargs, grads, "k")
    exclude = {storage_id(p) for p in block.parameters()} | {storage_id(b) for b in block.buffers()}
    shared = {storage_id(t) for t in tensors_in((call_args, call_kwargs)) if not t.requires_grad}
    saved: dict[int, int] = {}
    forward = True

    def pack(tensor: Any) -> Any:
        if forward:
            storage = tensor.untyped_storage()
            ptr = int(storage._cdata)
            if ptr not in exclude and ptr not in shared:
                saved.setdefault(ptr, storage.nbytes())
        return tensor

    inputs = {storage_id(t) for t in tensors_in((call_args, call_kwargs))}
    with (
        sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]),
        torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t),
        LiveBytes(exclude | inputs) as live,
        # (not under checkpointing: its recomputation runs outside the policy)
        contextlib.nullcontext() if checkpoint or recomputes else _cuda_policy(adapter),
    ):
        with _autocast(adapter):
            if checkpoint:
                out = run_checkpointed(block, *call_args, use_reentrant=False, **call_kwargs)
            else:
                out = block(*call_args, **call_kwargs)
        forward = False
        outs = [t for t in tensors_in(out) if t.requires_grad]
        torch.autograd.backward(outs, [torch.ones_like(t) for t in outs])
        del out, outs
        if copies is not None:
            copies.clear()
    total = sum(saved.values())
    ATTENTION_SEEN.update(live.attention)
    return total, max(0, live.peak - total)


def _capture(
    model: Any, names: Sequence[str], inputs: Inputs
) -> dict[str, tuple[Any, Any, set[str]]]:
    """Run the reduced model once; the inputs of the first block of each list."""
    import torch

    captured: dict[str, tuple[Any, Any, set[str]]] = {}
    handles = []
    for name in names:
        block = getattr(model, name)[0]

        def hook(module: Any, args: Any, kwargs: Any, name: str = name) -> None:
            if name not in captured:
                grads = _grad_paths(args, "a") | _grad_paths(kwargs, "k")
                captured[name] = (_clone(args, set()), _clone(kwargs, set()), grads)

        handles.append(block.register_forward_pre_hook(hook, with_kwargs=True))
    for key in GRAD_INPUTS:
        value = inputs.get(key)
        if isinstance(value, torch.Tensor):
            value.requires_grad_(True)
        elif isinstance(value, list):
            for item in value:
                item.requires_grad_(True)
    try:
        model(**inputs)
    finally:
        for handle in handles:
            handle.remove()
    return captured


def _config(family: Family) -> dict[str, Any]:
    """The reduced model's configuration with the class defaults filled in."""
    import inspect

    module = family.measured or family.transformer
    cls, config_cls = _class(module)
    if config_cls is not None:
        return {**config_cls(**module.config).to_dict(), **family.reduce}
    defaults = {
        name: p.default
        for name, p in inspect.signature(cls.__init__).parameters.items()
        if p.default is not inspect.Parameter.empty
    }
    return {**defaults, **family.transformer.config, **family.reduce}


def _reduced(family: Family) -> Any:
    import torch

    module = family.measured or family.transformer
    cls, config_cls = _class(module)
    config = {**module.config, **family.reduce}
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        if config_cls is None:
            model = cls(**config)
        else:
            model = cls._from_config(config_cls(**config), attn_implementation="sdpa")
    finally:
        torch.set_default_dtype(previous)
    for param in model.parameters():
        if param.is_floating_point() and param.dtype != torch.bfloat16:
            param.data = param.data.to(torch.bfloat16)
    model.requires_grad_(False)
    model.train()
    return model


# The square latent token grids of a family measured with real tensors that pads non-square
# ones (``Family.square``): two for the slope, a third for the check (256, 400 and 576 tokens).
REAL_SQUARE_SIDES = (16, 20, 24)
REAL_TEXT_TOKENS = 96


def _grids(family: Family, real: bool = False) -> list[Grid]:
    """Two image-token counts for the slope, a third for the check, half the text for its slope.

    ``real``: a quarter of the tokens and 96 text tokens (HiDream's three text sequences of 32),
    so that real tensors stay affordable.
    """
    text = REAL_TEXT_TOKENS if real else family.text_tokens
    side = 16 if real else 32
    if family.square:
        sides = REAL_SQUARE_SIDES if real else (32, 40, 48)
        points = [Grid(1, s, s, text) for s in sides]
    elif family.video:
        # 1, 2 and 4 latent frames of side x side tokens: the same counts, along the time axis
        points = [Grid(f, side, side, text) for f in (1, 2, 4)]
    else:
        points = [Grid(1, h * side // 32, w * side // 32, text) for h, w in IMAGE_GRIDS]
    return [*points, Grid(points[0].frames, points[0].height, points[0].width, text // 2)]


# The shared GPU rows (../shared/gpu-measurements.md, one H200, 2026-12-04) a family's blocks are
# checked against, per token per block over the whole model (the slopes over the rows' tokens):
# LoRA without checkpointing (its adapter under bf16 autocast), frozen, and the checkpointed
# step's peak above what it keeps.
GPU_ROWS: Mapping[str, Mapping[str, float]] = {
    "flux": {"lora_autocast": 152.8 * 1024, "none": 76.5 * 1024, "checkpointed_peak": 195478},
}
GPU_ROW_FAMILIES = frozenset(GPU_ROWS)
"""Families with shared GPU rows of a LoRA: their blocks are measured in the rows' setup too."""
OTHER_TRAINERS: Mapping[str, str] = {
    "wan21_14b": "diffusion-pipe (Wan 2.1 I2V 14B, tests/fixtures/measured_peaks.yaml)",
    "wan21_1b": "diffusion-pipe (as Wan 2.1 14B)",
    "wan22_14b": "diffusion-pipe (as Wan 2.1 14B)",
    "wan22_5b": "diffusion-pipe (as Wan 2.1 14B)",
}
"""Families another trainer trains in the rows' setup (its LoRA under bf16 autocast, reading the
base's own bf16 input; measured_peaks.yaml's ``lora_setup``), with the trainer whose published
points they are compared with there."""
AUTOCAST_FAMILIES = GPU_ROW_FAMILIES | frozenset(OTHER_TRAINERS)
"""Families whose blocks are measured in that setup too (``autocast_*`` in memory.yaml)."""


def gpu_check(family: Family, blocks: Sequence[Mapping[str, Any]]) -> str:
    """How the family's figures in the GPU rows' setup compare with the rows (for `source`)."""
    rows = GPU_ROWS[family.id]
    total: int = sum(block["count"] for block in blocks)

    def mean(key: str) -> float:
        weighted: float = sum(block[key] * block["count"] for block in blocks)
        return weighted / total

    found = {
        "lora_autocast": mean("autocast_saved_bytes_per_token"),
        "none": mean("frozen_saved_bytes_per_token"),
        "checkpointed_peak": max(b["autocast_checkpointed_peak_bytes_per_token"] for b in blocks),
    }
    words = {
        "lora_autocast": "LoRA under bf16 autocast (CUDA's float32 ops emulated), no ckpt",
        "none": "frozen",
        "checkpointed_peak": "checkpointed step's peak (CPU autocast)",
    }
    return "; ".join(
        f"{words[key]}: {found[key] / 1024:.1f} KiB per token per block vs "
        f"{rows[key] / 1024:.1f} measured ({(found[key] / rows[key] - 1) * 100:+.0f} %)"
        for key in rows
    )


def _adapters(family: Family) -> tuple[str, ...]:
    extra = ("lora_autocast",) if family.id in AUTOCAST_FAMILIES else ()
    return ("none", "lora", "lokr", *extra)


def _models(family: Family, adapters: Sequence[str], real: bool) -> dict[str, Any]:
    """One reduced model per adapter (each gets its own adapters attached). With real tensors
    they share one set of frozen weights, initialised once: the weights are excluded from what
    is counted, and building a block at its real width is most of a real run's setup."""
    import copy

    if not real:
        models = {adapter: _reduced(family) for adapter in adapters}
    else:
        base = _reduced(family)
        shared = {id(t): t for t in (*base.parameters(), *base.buffers())}
        models = {adapter: copy.deepcopy(base, dict(shared)) for adapter in adapters}
    if family.prepare is not None:
        for model in models.values():
            family.prepare(model)
    return models


def _routing(model: Any) -> str:
    """For a mixture-of-experts model: how its tokens were routed while measuring."""
    gates = [m for m in model.modules() if hasattr(m, "top_k") and hasattr(m, "n_routed_experts")]
    if not gates:
        return ""
    gate = gates[0]
    return (
        f"; each token routed by the real gate to {gate.top_k} of {gate.n_routed_experts} experts "
        "besides the shared ones: the saved bytes are the sum over the routing, whichever "
        "experts the tokens reach"
    )


def _slope(a: int, b: int, d: int) -> float:
    return (b - a) / d


def measure(family: Family, real: bool = False) -> dict[str, Any]:
    """The activation figures of one family (see the module docstring); ``real`` computes with
    real bf16 tensors at fewer tokens instead of fake ones (slow: a cross-check of the method)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    assert family.inputs is not None
    ATTENTION_SEEN.clear()
    full = build_meta(family.measured or family.transformer)
    width = family.width(_config(family))
    adapters = _adapters(family)
    adapted = family.adapted_blocks or family.blocks
    results: dict[tuple[str, str], list[Point]] = {
        (adapter, name): [] for adapter in adapters for name in family.blocks
    }
    # Fake tensors: the real model code and the real kernels' shapes and dtypes (the CPU flash
    # attention's meta functions), without computing values; what is saved for backward and
    # allocated depends on the shapes only. (Checked against a real bf16 run of FLUX.1's double
    # block: 127 and 379 MiB saved at 1,024 and 4,096 image tokens + 512 text tokens.) A family
    # whose forward needs values (``Family.real``) computes with real bf16 tensors.
    real = real or family.real is not None
    with _fp32_matmuls() if real else FakeTensorMode():
        models = _models(family, adapters, real)
        copies = {
            (adapter, name): attach(getattr(models[adapter], name)[0], adapter, fused=family.fused)
            if name in adapted
            else _Copies()
            for adapter in adapters
            for name in family.blocks
        }
        for index, grid in enumerate(_grids(family, real)):
            # the other adapters at the slope's two points only (the fit's check and the text
            # slope are the LoRA's)
            running = adapters if index < 2 else ("lora",)
            torch.manual_seed(1)
            inputs = family.inputs(torch, _config(family), grid)
            captured = _capture(models["none"], family.blocks, inputs)
            for name in family.blocks:
                args, kwargs, grads = captured[name]
                kept = sum(
                    t.untyped_storage().nbytes()
                    for t in tensors_in((_clone(args, grads, "a"), _clone(kwargs, grads, "k")))
                    if t.requires_grad
                )
                for adapter in running:
                    block = getattr(models[adapter], name)[0]
                    run = (block, args, kwargs, grads)
                    saved, peak = _run_block(*run, False, adapter, copies[adapter, name])
                    ckpt_peak = 0
                    if adapter in ("lora", "lora_autocast"):
                        _, ckpt_peak = _run_block(*run, True, adapter, copies[adapter, name])
                    results[adapter, name].append(Point(grid, saved, peak, kept, ckpt_peak))
            del captured, inputs
    blocks = []
    misses = []
    for name in family.blocks:
        a, b, c, t = results["lora", name]
        d_img = b.grid.image_tokens - a.grid.image_tokens
        slope = _slope(a.saved, b.saved, d_img)
        predicted = a.saved + slope * (c.grid.image_tokens - a.grid.image_tokens)
        misses.append(abs(predicted - c.saved) / c.saved)
        text_slope = (t.saved - a.saved) / (t.grid.text - a.grid.text)
        joint = text_slope >= 0.5 * slope
        kind = type(getattr(full, name)[0]).__name__
        kinds = [type(getattr(full, other)[0]).__name__ for other in family.blocks]

        def per_token(adapter: str, name: str = name, d_img: int = d_img) -> int:
            first, second = results[adapter, name][:2]
            return round(_slope(first.saved, second.saved, d_img))

        entry: dict[str, Any] = {
            "name": kind if kinds.count(kind) == 1 else f"{kind} ({name})",
            "count": len(getattr(full, name)),
            "saved_bytes_per_token": round(slope),
            "frozen_saved_bytes_per_token": per_token("none"),
            "input_bytes_per_token": round((b.inputs - a.inputs) / d_img),
            "peak_bytes_per_token": max(0, round((b.peak - a.peak) / d_img)),
            "checkpointed_peak_bytes_per_token": max(0, round((b.ckpt_peak - a.ckpt_peak) / d_img)),
        }
        lokr = per_token("lokr")
        if not math.isclose(lokr, slope, rel_tol=BYTES_TOLERANCE):
            entry["lokr_saved_bytes_per_token"] = lokr
        if "lora_autocast" in adapters:
            entry["autocast_saved_bytes_per_token"] = per_token("lora_autocast")
            first, second = results["lora_autocast", name][:2]
            entry["autocast_checkpointed_peak_bytes_per_token"] = max(
                0, round((second.ckpt_peak - first.ckpt_peak) / d_img)
            )
        if not joint:
            entry["tokens"] = "image"
            entry["text_bytes_per_token"] = max(0, round(text_slope))
        blocks.append(entry)
    module = family.measured or family.transformer
    points = results["lora", family.blocks[0]]
    tensors = "fake tensors"
    if real:
        tensors = (
            f"real tensors (each matrix product computed in fp32 and rounded to bf16 once) at "
            f"{points[0].grid.text} and {points[3].grid.text} text tokens "
            f"(fixed seeds{_routing(full)})"
        )
    source = (
        f"bench/calibrate_memory.py {family.id}: {module.library} "
        f"{module.name.split(':')[0]} at its real width ({width}), one block of each kind, bf16 "
        f"{tensors} on CPU, flash SDPA, AI Toolkit's LoRA (rank {LORA_RANK}, fp32, input "
        "cast to fp32, no autocast) on "
        + ("every block" if adapted == family.blocks else f"the {', '.join(adapted)} blocks")
        + ("; projections that read one tensor share its fp32 copy (fused)" if family.fused else "")
        + "; frozen: no adapter; lokr: its fast linear path (factor -1); "
        f"slope between {points[0].grid.image_tokens} and {points[1].grid.image_tokens} image "
        "tokens"
        + (" (1 and 2 latent frames)" if family.video else "")
        + (f", checked at {points[2].grid.image_tokens}" if real else "")
        + f"; text tokens: {family.text_tokens_source}"
        + (
            f"; text embeddings: {family.text_embedding_source}"
            if family.text_embedding_width
            else ""
        )
        + (f"; real tensors because {family.real}" if family.real else "")
    )
    if family.id in GPU_ROWS:
        source += f"; against the shared GPU rows in their setup: {gpu_check(family, blocks)}"
    elif family.id in OTHER_TRAINERS:
        source += (
            "; autocast_*: the LoRA under bf16 autocast (CUDA's float32 ops emulated), its input "
            f"the base's own bf16 tensor, as {OTHER_TRAINERS[family.id]} trains it"
        )
    activations: dict[str, Any] = {
        "width": width,
        "text_tokens": family.text_tokens,
        "adapter": "lora",
        "adapted": family.adapted,
        "blocks": blocks,
    }
    if family.text_embedding_width:
        activations["text_embedding_width"] = family.text_embedding_width
    if family.note:
        activations["tokens_per_frame_note"] = family.note
    activations["linearity"] = round(max(misses), 4)
    activations["attention"] = ", ".join(sorted(ATTENTION_SEEN)) or "none seen"
    activations["source"] = source
    return activations


# --- UNets ---------------------------------------------------------------------------------------
#
# A UNet is not a stack of equal blocks: the whole UNet2DConditionModel (its published config, bf16
# fake tensors on the CPU) runs forward and backward at three resolutions, batch 1, with AI
# Toolkit's adapters over the whole UNet, and a line is fitted per latent pixel.

UNET_RESOLUTIONS = (512, 1024)  # px; latent pixels (px / 8)^2 (a whole UNet takes minutes a pass)
UNET_TEXT_TOKENS = 77
SKIP_GPU_SETUP = False  # --skip-gpu-setup: keep memory.yaml's gpu_setup (a UNet pass is minutes)
# The UNets whose LoCon (3x3 convolutions adapted too) is measured besides the LoRA: none in the
# shipped memory.yaml yet (each UNet pass takes minutes of a shared CPU); name them to add it.
LOCON_UNETS: frozenset[str] = frozenset()
# The SDXL rows of ../shared/gpu-measurements.md (batch 1; GiB at 512, 768, 1024 px): LoRA on the
# Linears of the attention blocks under bf16 autocast.
UNET_GPU_ROWS: Mapping[str, Mapping[str, tuple[float, float, float]]] = {
    "sdxl": {
        "saved": (2.07, 4.62, 7.89),
        "step": (2.09, 4.66, 7.96),
        "checkpointed_saved": (0.15, 0.33, 0.58),
        "checkpointed_step": (0.32, 0.47, 0.76),
    }
}
UNET_ADAPTED = (
    "every Linear and 1x1 Conv2d of the UNet; with network.conv (LoCon) every 3x3 Conv2d too "
    "(toolkit/lora_special.py LoRASpecialNetwork: UNET_TARGET_REPLACE_MODULE = "
    "UNet2DConditionModel; transformer_only finds no transformer block names on a UNet and "
    "skips nothing; create_modules gives Linear and 1x1 Conv2d the linear rank, 3x3 Conv2d only "
    "conv_lora_dim)"
)


def _unet_inputs(torch: Any, config: Mapping[str, Any], side: int) -> Inputs:
    latent = side // 8
    inputs: Inputs = {
        "sample": _randn(torch, 1, config["in_channels"], latent, latent),
        "timestep": torch.tensor([500]),
        "encoder_hidden_states": _randn(torch, 1, UNET_TEXT_TOKENS, config["cross_attention_dim"]),
    }
    if config.get("addition_embed_type") == "text_time":
        inputs["added_cond_kwargs"] = {
            "text_embeds": _randn(torch, 1, 1280),
            "time_ids": _randn(torch, 1, 6),
        }
    return inputs


def _fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float, float]:
    """Least-squares line: intercept, slope, and the largest relative miss."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )
    fixed = my - slope * mx
    miss = max(abs(fixed + slope * x - y) / y for x, y in zip(xs, ys, strict=True) if y)
    return fixed, slope, miss


def _unet_passes(
    family: Family, adapter: str, conv3x3: bool, sides: Sequence[int], where: str = ""
) -> dict[str, list[int]]:
    """Saved and peak-above bytes, without and with checkpointing, at each side in px."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    found: dict[str, list[int]] = {
        "saved": [],
        "peak": [],
        "checkpointed_saved": [],
        "checkpointed_peak": [],
    }
    with FakeTensorMode():
        for checkpointed in (False, True):
            unet = _reduced(replace(family, reduce={}))
            if checkpointed:
                unet.enable_gradient_checkpointing()
            copies = attach(unet, adapter, conv3x3=conv3x3, where=where)
            config = _config(family)
            for side in sides:
                torch.manual_seed(1)
                inputs = _unet_inputs(torch, config, side)
                saved, peak = _run_block(
                    unet, (), inputs, set(), False, adapter, copies, recomputes=checkpointed
                )
                prefix = "checkpointed_" if checkpointed else ""
                found[prefix + "saved"].append(saved)
                found[prefix + "peak"].append(peak)
    return found


def measure_unet(family: Family, old: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The UNet's fits per latent pixel, for AI Toolkit's LoRA and LoCon; the GPU rows' setup
    too unless ``SKIP_GPU_SETUP`` (then ``old``'s, the UNet entry memory.yaml has, is kept)."""
    ATTENTION_SEEN.clear()
    networks: dict[str, Any] = {}
    misses: list[float] = []
    for network, conv3x3, sides in (
        ("lora", False, UNET_RESOLUTIONS),
        ("locon", True, UNET_RESOLUTIONS if family.id in LOCON_UNETS else ()),
    ):
        if not sides:
            continue
        found = _unet_passes(family, "lora", conv3x3, sides)
        pixels = [(side // 8) ** 2 for side in sides]
        fits = {}
        for key, values in found.items():
            fixed, slope, miss = _fit(pixels, values)
            if key.endswith("saved") and len(sides) > 2:
                misses.append(miss)
            fits[key] = {"fixed_bytes": round(fixed), "bytes_per_latent_pixel": round(slope, 1)}
        networks[network] = fits
    source = (
        f"bench/calibrate_memory.py {family.id}: diffusers UNet2DConditionModel "
        f"({family.transformer.source}), the whole UNet, bf16 fake tensors on CPU, flash SDPA, "
        f"batch 1, {UNET_TEXT_TOKENS} text tokens, AI Toolkit's LoRA (rank {LORA_RANK}, fp32, "
        "input cast to fp32, no autocast); gradient checkpointing by diffusers' "
        "enable_gradient_checkpointing(); least-squares line over "
        + ", ".join(f"{side}" for side in UNET_RESOLUTIONS)
        + " px (a line through two points: linearity is not checked)"
    )
    gpu_setup = None
    if family.id in UNET_GPU_ROWS and not SKIP_GPU_SETUP:
        gpu_setup, words = unet_gpu_check(family)
        source += f"; gpu_setup, against the shared GPU rows: {words}"
    elif old and old.get("gpu_setup"):
        gpu_setup = old["gpu_setup"]
        source += (
            "; gpu_setup (kept from memory.yaml): the least-squares line of the shared GPU rows "
            "themselves (LoRA on the attention blocks' Linears under bf16 autocast, batch 1, "
            "512, 768, 1024 px), measured on the H200"
        )
    unet: dict[str, Any] = {
        "text_tokens": UNET_TEXT_TOKENS,
        "adapted": UNET_ADAPTED,
        "networks": networks,
    }
    if gpu_setup is not None:
        unet["gpu_setup"] = gpu_setup
    if misses:
        unet["linearity"] = round(max(misses), 4)
    unet["attention"] = ", ".join(sorted(ATTENTION_SEEN)) or "none seen"
    unet["source"] = source
    return unet


def unet_gpu_check(family: Family) -> tuple[dict[str, Any], str]:
    """The UNet in the GPU rows' setup (LoRA on the attention blocks' Linears under bf16
    autocast, CUDA's float32 ops emulated): its fits, and how they compare with the rows."""
    rows = UNET_GPU_ROWS[family.id]
    sides = UNET_RESOLUTIONS
    found = _unet_passes(family, "lora_autocast", False, sides, where="attentions")
    pixels = [(side // 8) ** 2 for side in sides]
    fits = {}
    for key, values in found.items():
        fixed, slope, _ = _fit(pixels, values)
        fits[key] = {"fixed_bytes": round(fixed), "bytes_per_latent_pixel": round(slope, 1)}
    gib = 2.0**30
    measured = {
        "saved": found["saved"],
        "step": [s + p for s, p in zip(found["saved"], found["peak"], strict=True)],
        "checkpointed_saved": found["checkpointed_saved"],
        "checkpointed_step": [
            s + p
            for s, p in zip(found["checkpointed_saved"], found["checkpointed_peak"], strict=True)
        ],
    }
    parts = []
    for key, values in measured.items():
        for side, value, row in zip(sides, values, rows[key][::2], strict=True):
            error = (value / gib / row - 1) * 100
            parts.append(f"{key} {side} px {value / gib:.2f} GiB vs {row:.2f} ({error:+.0f} %)")
    return fits, ", ".join(parts)


# --- VAE passes ----------------------------------------------------------------------------------
#
# The peak of one decode and one encode above the VAE's weights (no gradients, bf16, batch 1), as
# the live storages a dispatch mode follows on fake tensors: what max_memory_allocated shows above
# the memory allocated before the pass (its input included there).

VAE_SIDES = (512, 1024)  # images: the line through two sizes
# A frame-by-frame video VAE, (frames, height, width): an image (its one chunk) at the two sizes,
# and two clips (their later chunks, and the decoded clip growing with the frames).
VAE_FRAMES = ((17, 480, 832), (81, 480, 832))
# The shared GPU rows (GiB): FLUX VAE at 1024 and 1536 px, Wan 2.1 VAE at 33 and 81 frames.
VAE_GPU_ROWS: Mapping[str, Mapping[str, Sequence[tuple[tuple[int, int, int], float]]]] = {
    "FLUX.1 VAE": {
        "decode": (((1, 1024, 1024), 3.38), ((1, 1536, 1536), 7.60)),
        "encode": (((1, 1024, 1024), 2.00), ((1, 1536, 1536), 4.50)),
    },
    "Wan 2.1 VAE": {
        "decode": (((33, 480, 832), 4.27), ((81, 480, 832), 4.38)),
        "encode": (((33, 480, 832), 3.20), ((81, 480, 832), 3.20)),
    },
}
# VAEs that decode and encode a video chunk by chunk with a cache (diffusers' AutoencoderKLWan and
# its Qwen-Image descendant loop over the latent frames).
FRAME_BY_FRAME = frozenset({"AutoencoderKLWan"})
# VAEs that take (batch, channels, frames, height, width), images as one frame.
FIVE_D = frozenset({"AutoencoderKLWan", "AutoencoderKLQwenImage", "AutoencoderKLLTX2Video"})


# A frame-by-frame video VAE's tiled decode (AI Toolkit's Wan text-to-video samples with
# model.low_vram or model_kwargs.vae_tiling): one frame (one tile's first chunk, and the frame's
# kept tiles), and two clips of the same frame (the later chunk, and the kept tiles and the clip
# growing with the frames). Diffusers' AutoencoderKLWan tiles a frame wider or taller than its
# tile_sample_min_width / _height (256 px).
VAE_TILED_FRAMES = ((1, 480, 832), (33, 480, 832), (81, 480, 832))
VAE_TILE = 256

_PEAKS: dict[tuple[str, str, int, int, int, bool], int] = {}


def _vae_peak(
    module: Module, direction: str, frames: int, height: int, width: int, *, tiled: bool = False
) -> int:
    """The peak bytes of one pass (kept: the reference VAEs are measured once a run)."""
    key = (module.label, direction, frames, height, width, tiled)
    if key not in _PEAKS:
        _PEAKS[key] = _vae_pass(module, direction, frames, height, width, tiled=tiled)
    return _PEAKS[key]


def _vae_pass(
    module: Module, direction: str, frames: int, height: int, width: int, *, tiled: bool = False
) -> int:
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with FakeTensorMode():
        vae = _reduced(Family(module.label, module, (), ()))
        vae.eval()
        config = vae.config
        name = module.name.split(":")[0]
        video = name in FIVE_D
        levels = config.get("block_out_channels") or config.get("dim_mult")
        spatial = int(config.get("scale_factor_spatial") or 2 ** (len(levels) - 1))
        temporal = int(config.get("scale_factor_temporal") or 4)
        if direction == "decode":
            channels = int(config.get("latent_channels") or config.get("z_dim"))
            size: tuple[int, ...] = (height // spatial, width // spatial)
            if video:
                size = ((frames - 1) // temporal + 1, *size)
        else:
            channels = 3
            size = (frames, height, width) if video else (height, width)
        shape = (1, channels, *size)
        x = _randn(torch, *shape)
        if tiled:
            assert vae.tile_sample_min_width == vae.tile_sample_min_height == VAE_TILE
            vae.enable_tiling()
        exclude = {storage_id(p) for p in vae.parameters()} | {storage_id(b) for b in vae.buffers()}
        with (
            torch.no_grad(),
            sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]),
            LiveBytes(exclude | {storage_id(x)}) as live,
        ):
            if direction == "decode":
                out = vae.decode(x).sample
            else:
                out = vae.encode(x).latent_dist.sample()
            del out
        return live.peak


def _vae_fits(module: Module, frame_by_frame: bool) -> dict[str, Any]:
    """A fit of each pass: images by pixel; a frame-by-frame video VAE's one frame by pixel too,
    its later chunks by frame pixel and its clip by clip pixel."""
    passes: dict[str, Any] = {}
    for direction in ("decode", "encode"):
        small, large = (_vae_peak(module, direction, 1, s, s) for s in VAE_SIDES)
        a1, a2 = VAE_SIDES[0] ** 2, VAE_SIDES[1] ** 2
        slope = (large - small) / (a2 - a1)
        fixed = small - slope * a1
        passes[direction] = {"fixed_bytes": round(fixed), "bytes_per_pixel": round(slope, 1)}
        if frame_by_frame:
            # The first chunk is one frame (the image's line above); each later chunk holds
            # four and the causal cache: what the shorter clip has beyond its first chunk's
            # working set and its decoded frames, per pixel of a frame.
            (f1, h, w), (f2, _, _) = VAE_FRAMES
            short, long = (_vae_peak(module, direction, *p) for p in VAE_FRAMES)
            pixels = h * w
            per_clip = max((long - short) / ((f2 - f1) * pixels), 0.0)
            chunk = (short - fixed - per_clip * f1 * pixels) / pixels - slope
            passes[direction] |= {
                "chunk_bytes_per_pixel": round(chunk, 1),
                "bytes_per_clip_pixel": round(per_clip, 2),
            }
    return {"frame_by_frame": frame_by_frame, **passes}


def _tiled_fit(module: Module) -> dict[str, float]:
    """The tiled decode (catalog.TiledDecode): one tile's first chunk, a later chunk's extra and
    the kept tiles per clip pixel, from one frame and two clips of the same frame."""
    (_, h, w), (f2, _, _), (f3, _, _) = VAE_TILED_FRAMES
    one, short, long = (_vae_peak(module, "decode", *p, tiled=True) for p in VAE_TILED_FRAMES)
    pixels = h * w
    per_clip = max((long - short) / ((f3 - f2) * pixels), 0.0)
    fixed = one - per_clip * pixels
    chunk = max(short - fixed - per_clip * f2 * pixels, 0.0)
    return {"fixed_bytes": fixed, "chunk_bytes": chunk, "bytes_per_clip_pixel": per_clip}


def _at(fit: Mapping[str, float], frames: int, height: int, width: int) -> float:
    """catalog.VaePass.at: a later chunk's term once the clip has two latent frames (4n+1)."""
    pixels = height * width
    return (
        fit["fixed_bytes"]
        + fit["bytes_per_pixel"] * pixels
        + (fit.get("chunk_bytes_per_pixel", 0.0) * pixels if frames > 4 else 0.0)
        + fit.get("bytes_per_clip_pixel", 0.0) * pixels * frames
    )


# Each VAE architecture's GPU factor comes from the GPU rows of one of its members: the live
# storages on fake tensors leave out what the GPU's kernels allocate beside them (cuDNN's
# workspaces and layout copies), which the rows show in proportion to the activations.
VAE_REFERENCE = {
    "AutoencoderKL": VAE_FLUX,
    "AutoencoderKLFlux2": VAE_FLUX,
    "AutoencoderKLWan": VAE_WAN21,
    "AutoencoderKLQwenImage": VAE_WAN21,
}
_VAE_CACHE: dict[tuple[str, bool], dict[str, Any]] = {}


def vae_factor(module: Module) -> tuple[dict[str, float], str]:
    """Per direction, the GPU rows of the module's reference VAE over the same measurement."""
    reference = VAE_REFERENCE[module.name.split(":")[0]]
    rows = VAE_GPU_ROWS[reference.label]
    factors = {}
    words = []
    for direction, points in rows.items():
        ratios = [gib * 2**30 / _vae_peak(reference, direction, *point) for point, gib in points]
        factors[direction] = round(sum(ratios) / len(ratios), 3)
        words.append(
            f"{direction} x {factors[direction]} (the {reference.label}'s GPU rows over its "
            "measurement: " + ", ".join(f"{r:.3f}" for r in ratios) + ")"
        )
    return factors, "; ".join(words)


def measure_vae(family: Family) -> dict[str, Any] | None:
    """The family's VAE passes (its first VAE: the image or video one), or None without one or
    without a GPU reference for its architecture. A video VAE serving an image family (FIBO's
    Wan 2.2 VAE) is measured on one frame: its first chunk decodes one frame, where each later
    chunk of a clip decodes four, so a clip's per-frame figures would overstate an image."""
    if not family.vae or family.vae[0].name.split(":")[0] not in VAE_REFERENCE:
        return None
    module = family.vae[0]
    video_vae = module.name.split(":")[0] in FRAME_BY_FRAME
    frame_by_frame = video_vae and family.video
    key = (module.label, frame_by_frame)
    if key in _VAE_CACHE:
        return _VAE_CACHE[key]
    fits = _vae_fits(module, frame_by_frame)
    factors, factor_words = vae_factor(module)
    for direction in ("decode", "encode"):
        fits[direction] = {
            key: round(value * factors[direction], 2 if key == "bytes_per_clip_pixel" else 1)
            for key, value in fits[direction].items()
        }
    points = f"{VAE_SIDES[0]} and {VAE_SIDES[1]} px squares" + (
        " of one frame (an image family)" if video_vae and not family.video else ""
    )
    if fits["frame_by_frame"]:
        points += (
            f" (one frame: the first chunk), and {VAE_FRAMES[0][0]} and {VAE_FRAMES[1][0]} frames"
            f" at {VAE_FRAMES[0][1]}x{VAE_FRAMES[0][2]} (the later chunks of four frames with"
            " the causal cache, and the clip)"
        )
    source = (
        f"bench/calibrate_memory.py {family.id} --kind vae: {module.describe()}, bf16 fake tensors "
        f"on CPU, no gradients, batch 1, flash SDPA; the peak of the live storages a pass "
        f"creates (its output included, its input and weights not), fitted over {points}, "
        f"times the GPU factor of its architecture: {factor_words}"
    )
    checked = "cpu"
    rows = VAE_GPU_ROWS.get(module.label)
    if rows is not None:
        checks = []
        worst = 0.0
        for direction, points_gib in rows.items():
            for (frames, height, width), gib in points_gib:
                found = _at(fits[direction], frames, height, width) / 2**30
                error = found / gib - 1
                worst = max(worst, abs(error))
                checks.append(
                    f"{direction} {frames}x{height}x{width} {found:.2f} GiB vs {gib:.2f} "
                    f"({error * 100:+.0f} %)"
                )
        checked = "gpu" if worst <= 0.15 else "cpu"
        source += "; the fit against those rows: " + ", ".join(checks)
    if fits["frame_by_frame"]:
        source += (
            "; no GPU row has one frame: its first-chunk terms are measured on CPU only "
            "(bench/measure_vae_decode.py lists each size)"
        )
    entry = {"checked": checked, **fits}
    if fits["frame_by_frame"]:
        entry["tiled_decode"] = _measure_tiled(module, factors["decode"], factor_words)
    _VAE_CACHE[key] = {**entry, "source": source}
    return _VAE_CACHE[key]


def _measure_tiled(module: Module, factor: float, factor_words: str) -> dict[str, Any]:
    """The tiled decode's terms, times the decode's GPU factor, and what they give at each
    point they were fitted on (and one 1024 px frame, which they were not)."""
    fit = {
        key: round(value * factor, 2 if key == "bytes_per_clip_pixel" else 1)
        for key, value in _tiled_fit(module).items()
    }
    checks = []
    for frames, height, width in (*VAE_TILED_FRAMES, (1, 1024, 1024)):
        measured = _vae_peak(module, "decode", frames, height, width, tiled=True) * factor
        found = (
            fit["fixed_bytes"]
            + (fit["chunk_bytes"] if frames > 4 else 0.0)
            + fit["bytes_per_clip_pixel"] * frames * height * width
        )
        checks.append(
            f"{frames}x{height}x{width} {found / 2**30:.2f} GiB vs {measured / 2**30:.2f}"
        )
    points = ", ".join(f"{f}x{h}x{w}" for f, h, w in VAE_TILED_FRAMES)
    source = (
        f"bench/calibrate_memory.py --kind vae: {module.describe()} with enable_tiling() "
        f"(tiles of {VAE_TILE} px every 192 px, a frame wider or taller than {VAE_TILE} px), "
        "bf16 fake tensors on CPU, no gradients, batch 1; the peak of the live storages the "
        f"decode creates, fitted over {points}, times the untiled decode's GPU factor "
        f"({factor_words.split(';')[0]}); the fit against the measurement: "
        + ", ".join(checks)
        + "; no GPU row has a tiled decode"
    )
    return {"tile": VAE_TILE, **fit, "source": source}


def params_of(family: Family) -> dict[str, Any]:
    if family.card is not None:
        return {**family.card, "experts": family.experts}
    transformer = count(family.transformer)
    text = [(m, count(m)) for m in family.text_encoders]
    vae = [(m, count(m)) for m in family.vae]
    parts = [f"{family.transformer.describe()} = {transformer:,}"]
    parts += [f"{m.describe()} = {n:,}" for m, n in text]
    parts += [f"{m.describe()} = {n:,}" for m, n in vae]
    return {
        "transformer": billions(transformer),
        "text_encoder": billions(sum(n for _, n in text)),
        "vae": billions(sum(n for _, n in vae)),
        "experts": family.experts,
        "source": "exact counts on the meta device: "
        + "; ".join(parts)
        + (f"; {family.params_note}" if family.params_note else ""),
    }


# --- what layer offloading leaves on the card ------------------------------------------------
#
# toolkit/memory_management/manager.py (MemoryManager.attach, ai-toolkit 27a03a91 and the
# 2026-08-28 versions alike) walks the WHOLE module, blocks or not, and hands every Linear and
# Conv2d (LINEAR_MODULES, CONV_MODULES) to a layer manager with the probability of the offload
# percent: its weight lives in system RAM and is copied to the card when the layer runs. Norms,
# embeddings, Conv3d, rotary tables (UNMANAGED_MODULES) and the model's
# get_offload_ignore_modules() pins stay on the card. manager_modules.py stages the copies in a
# ring of PIPELINE_DEPTH slots (AI_TOOLKIT_OFFLOAD_DEPTH, default 4) for the forward and another
# for the backward, each a whole weight at the compute dtype (a quantized weight is dequantized
# on the card), and _BouncingLinearFn keeps each layer's input for its backward.

OFFLOADED_CLASSES = ("Linear", "Conv2d")


def _split_of(model: Any) -> tuple[int, int]:
    """(the parameters layer offloading leaves on the card, the largest offloaded layer's) of
    one model built on the meta device. A parameter stays when any module that holds it is not
    offloaded: a text encoder whose output head shares its token embedding (tie_word_embeddings)
    keeps that weight on the card, as MemoryManager.memory_managed_to moves the Embedding there
    after the head's manager pinned it in system RAM."""
    staying: set[int] = set()
    moved: set[int] = set()
    largest = 0
    for layer in model.modules():
        own = list(layer.parameters(recurse=False))
        if type(layer).__name__ in OFFLOADED_CLASSES:
            size = sum(p.numel() for p in own if id(p) not in moved)
            moved.update(id(p) for p in own)
            largest = max(largest, size)
        else:
            staying.update(id(p) for p in own)
    resident = sum(p.numel() for p in model.parameters() if id(p) not in moved or id(p) in staying)
    return resident, largest


def offload_of(module: Module, text_encoders: Sequence[Module] = ()) -> dict[str, Any]:
    """What layer offloading leaves on the card of one transformer (the parameters outside every
    Linear and Conv2d, and the largest offloaded layer's) and of its text encoders (the same
    count, summed), each built on the meta device."""
    resident, largest = _split_of(build_meta(module))
    found: dict[str, Any] = {"resident_params": resident, "largest_layer_params": largest}
    if text_encoders:
        found["text_encoder_resident_params"] = sum(
            _split_of(build_meta(encoder))[0] for encoder in text_encoders
        )
    words = " and ".join(m.describe() for m in (module, *text_encoders))
    found["source"] = (
        f"{words} on the meta device: the parameters outside every Linear and Conv2d (AI "
        "Toolkit 27a03a91 toolkit/memory_management/manager.py MemoryManager.attach offloads "
        "those two classes, model-wide, and moves the rest to the card: norms, embeddings, "
        "Conv3d, tables), and the transformer's largest such layer"
    )
    return found


# --- memory.yaml -------------------------------------------------------------------------------


def versions() -> dict[str, str]:
    import diffusers
    import torch
    import transformers

    return {
        "torch": str(torch.__version__),
        "diffusers": str(diffusers.__version__),
        "transformers": str(transformers.__version__),
        "python": platform.python_version(),
        "device": "cpu",
        "dtype": "bfloat16",
        "sdpa": "flash or efficient requested (sdpa_kernel); activations.attention names the "
        "kernels that ran",
        "tensors": "fake (FakeTensorMode on CPU: the real code and kernels' shapes and dtypes, no "
        "values); FLUX.1's double block agrees with a real bf16 run (127 and 379 MiB); real bf16 "
        "where an activations source says so (a forward that needs values)",
    }


HEADER = """\
# Parameter counts and measured memory per memory family. Written by bench/calibrate_memory.py
# (see its docstring: it is the one writer of this file); each arch of archs.yaml names its family
# with `memory:` or says why it has none with `memory_unknown:`.
#
#   checked       how the training figures are checked: gpu = the same measurement, run in the
#                 setup of the GPU rows (../shared/gpu-measurements.md), agrees with them; cpu =
#                 measured on the CPU only. A family with no figures is a stand-in.
#   params        billions of parameters: one transformer (experts: how many it holds), all
#                 text encoders together, the VAE; `source` says how they were counted
#   activations   per block kind, bytes per token of one block in bf16 at batch 1, with the
#                 `adapter` in place: lora = AI Toolkit's LoRA on the modules `adapted` names,
#                 built as the toolkit builds it (fp32 down/up pair, the input cast to fp32, no
#                 autocast), so each adapted Linear keeps its input; none = frozen blocks:
#                   saved_bytes_per_token   saved for backward, no gradient checkpointing
#                   frozen_saved_bytes_per_token   the same with no adapter at all
#                   input_bytes_per_token   kept with checkpointing (the block's input)
#                   peak_bytes_per_token    the block's transient peak in forward+backward,
#                                           above its saved bytes
#                   checkpointed_peak_bytes_per_token   with checkpointing, the block's peak
#                                           while it is recomputed and back-propagated
#                   autocast_saved_bytes_per_token, autocast_checkpointed_peak_bytes_per_token
#                                           the same two with the LoRA under bf16 autocast,
#                                           reading the base's bf16 input (the setup of the GPU
#                                           rows and of other trainers' published points, which
#                                           are compared with these; the wizard uses neither)
#                   tokens                  joint: per image+text token; image: per image token
#                                           (then text_bytes_per_token is per text token)
#                 text_embedding_width: where a step's text embeddings are far wider than a
#                 block's input (LTX-2's stacked Gemma states), the values per text token it
#                 holds for each item (the source says where the toolkit's code does it);
#                 linearity: the fit's relative miss at a further token count;
#                 null with `unknown: why` where the blocks could not be measured
#   unet          a UNet's activations per batch item, each a fit: fixed_bytes plus
#                 bytes_per_latent_pixel x (height/8 x width/8), per network (lora, locon):
#                 saved (no checkpointing) and the step's peak above it; checkpointed_saved and
#                 checkpointed_peak likewise with diffusers' gradient checkpointing
#   vae           the peak of a decode and an encode above the VAE's weights, no gradients, bf16,
#                 one image: fixed_bytes + bytes_per_pixel x pixels; a frame_by_frame video VAE:
#                 bytes_per_pixel per pixel of one frame, + bytes_per_clip_pixel x frames x pixels;
#                 tiled_decode: its decode tile by tile (a frame wider or taller than tile px):
#                 fixed_bytes + chunk_bytes from the second latent frame + bytes_per_clip_pixel x
#                 frames x pixels
#   offload       what AI Toolkit's layer offloading leaves on the card: the transformer's
#                 parameters outside every Linear and Conv2d (resident_params: norms, embeddings,
#                 Conv3d, modulation tables) and its largest Linear or Conv2d
#                 (largest_layer_params), whose copies fill the manager's staging ring; and
#                 the same count of its text encoders (text_encoder_resident_params: their
#                 token embeddings above all), which stay on the card under text-encoder
#                 offloading
"""

# A family's keys in the order they are written (the nested ones keep the order they are built
# in); a mapping of scalars without a `source` is written on one line ({...}), as is each block.
_FAMILY_ORDER = ("checked", "params", "offload", "activations", "unet", "vae", "unknown")


def _scalar(value: Any) -> str:
    return (
        yaml.safe_dump(value, default_flow_style=True, width=10_000)
        .strip()
        .removesuffix("\n...")
        .removesuffix(" ...")
    )


def _flow(mapping: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {_scalar(v)}" for k, v in mapping.items()) + "}"


def _lines(mapping: Mapping[str, Any], indent: int) -> list[str]:
    pad = " " * indent
    out: list[str] = []
    for key, value in mapping.items():
        if isinstance(value, Mapping) and value:
            if "source" not in value and not any(
                isinstance(v, Mapping | list) for v in value.values()
            ):
                out.append(f"{pad}{key}: {_flow(value)}")
            else:
                out.append(f"{pad}{key}:")
                out += _lines(value, indent + 2)
        elif isinstance(value, list):
            out.append(f"{pad}{key}:")
            out += [f"{pad}  - {_flow(item)}" for item in value]
        else:
            out.append(f"{pad}{key}: {_scalar(value)}")
    return out


def dump(measured_with: Mapping[str, str], families: Mapping[str, Mapping[str, Any]]) -> str:
    lines = [HEADER.rstrip("\n"), f"format: {FORMAT}", "measured_with:"]
    lines += [f"  {k}: {_scalar(v)}" for k, v in measured_with.items()]
    lines.append("families:")
    for fid in sorted(families):
        lines.append(f"  {fid}:")
        entry = dict(families[fid])
        if entry.get("unet") is not None:
            entry.pop("activations", None)
        elif entry.get("activations") is None:
            entry["activations"] = None
        order = {key: i for i, key in enumerate(_FAMILY_ORDER)}
        lines += _lines(dict(sorted(entry.items(), key=lambda kv: order[kv[0]])), 4)
    return "\n".join(lines) + "\n"


def load_memory() -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    data = yaml.safe_load(MEMORY_YAML.read_text(encoding="utf-8"))
    return dict(data.get("measured_with", {})), dict(data.get("families", {}))


def resolve(names: Sequence[str]) -> list[Family]:
    """Families by id, or by an arch id of archs.yaml (its `memory:` family)."""
    by_id = {f.id: f for f in FAMILIES}
    if not names:
        return list(FAMILIES)
    archs = {a["id"]: a for a in yaml.safe_load(ARCHS_YAML.read_text(encoding="utf-8"))["archs"]}
    chosen: list[Family] = []
    for name in names:
        fid = name if name in by_id else archs.get(name, {}).get("memory")
        if fid not in by_id:
            raise SystemExit(f"calibrate_memory: error: no measured family for {name!r}")
        if by_id[fid] not in chosen:
            chosen.append(by_id[fid])
    return chosen


# --- the table -----------------------------------------------------------------------------------


def _unet_cell(unet: Mapping[str, Any]) -> str:
    """A UNet's fits in KiB per latent pixel (and the fixed part in MiB)."""
    parts = []
    for network, fits in unet["networks"].items():
        shown = ", ".join(
            f"{name} {fit['fixed_bytes'] / 2**20:.0f} MiB"
            f" + {fit['bytes_per_latent_pixel'] / 1024:.1f}"
            for name, fit in fits.items()
        )
        parts.append(f"{network}: {shown} KiB per latent pixel")
    return "UNet; " + "; ".join(parts)


def _vae_cell(vae: Mapping[str, Any] | None) -> str:
    """A VAE's decode and encode at 1024x1024 (one frame; 81 frames of 480x832 for video)."""
    if vae is None:
        return "stand-in: not measured"
    size = (81, 480, 832) if vae.get("frame_by_frame") else (1, 1024, 1024)
    decode, encode = (_at(vae[d], *size) / 2**30 for d in ("decode", "encode"))
    where = "81x480x832" if vae.get("frame_by_frame") else "1024x1024"
    return f"{decode:.2f} / {encode:.2f} GiB at {where} ({vae['checked']})"


def table(families: Mapping[str, Mapping[str, Any]], sources: bool = True) -> str:
    """Markdown: each family, how it is checked, its counts, its activation figures (KiB per
    token per block: with the adapter / frozen / kept with checkpointing / peak; or a UNet's
    fits), its VAE's passes, and (with ``sources``) where the counts come from."""
    rows = [
        "| family | checked | transformer B | text enc. B | VAE B | experts"
        " | activations: LoRA saved / frozen / ckpt input / peak"
        " KiB per token per block | VAE decode / encode" + (" | source |" if sources else " |"),
        "|---|---|---:|---:|---:|---:|---|---|" + ("---|" if sources else ""),
    ]
    for fid in sorted(families):
        entry = families[fid]
        p = entry["params"]
        acts = entry.get("activations")
        checked = entry.get("checked") or "stand-in"
        if entry.get("unet") is not None:
            blocks = _unet_cell(entry["unet"])
        elif acts is None:
            blocks = f"unknown: {entry['unknown']}"
        else:
            parts = []
            for b in acts["blocks"]:
                keys = ("saved_bytes_per_token", "frozen_saved_bytes_per_token")
                kib = [(b.get(k) or 0) / 1024 for k in keys]
                kib += [b[k] / 1024 for k in ("input_bytes_per_token", "peak_bytes_per_token")]
                per = ""
                if b.get("tokens") == "image":
                    text = b.get("text_bytes_per_token") or 0
                    per = f" per image token (+{text / 1024:.1f} saved per text token)"
                shown = " / ".join(f"{k:.1f}" for k in kib)
                parts.append(f"{b['count']}x {b['name']}: {shown}{per}")
            adapter = "" if acts.get("adapter") == "lora" else " (frozen: no adapter measured)"
            blocks = (
                f"width {acts['width']}, {acts['text_tokens']} text tokens{adapter}; "
                + "; ".join(parts)
            )
        row = (
            f"| {fid} | {checked} | {p['transformer']:.3f} | {p['text_encoder']:.3f} | "
            f"{p['vae']:.3f} | {p['experts']} | {blocks} | {_vae_cell(entry.get('vae'))} |"
        )
        if sources:
            row += f" {p['source'].replace('|', '/')} |"
        rows.append(row)
    return "\n".join(rows)


# --- main ------------------------------------------------------------------------------------


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        return math.isclose(a, b, rel_tol=BYTES_TOLERANCE, abs_tol=1)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


KINDS = ("all", "params", "activations", "vae")
_TRAINING = ("checked", "activations", "unet", "unknown")
KEPT: Mapping[str, tuple[str, ...]] = {
    "all": (),
    "params": (*_TRAINING, "vae"),
    "activations": ("vae",),
    "vae": _TRAINING,
}
"""Per kind, the parts of a family a run keeps as memory.yaml has them when it writes."""


def measure_family(
    family: Family, old: Mapping[str, Any], kind: str, real: bool = False
) -> dict[str, Any]:
    """One family's entry of memory.yaml: ``kind`` measured anew, the rest as ``old`` has it
    (``real``: the blocks with real tensors, for --check --real)."""
    entry: dict[str, Any] = {"params": params_of(family)}
    beside = (old.get("params") or {}).get("beside")
    if beside:  # counted from AI Toolkit's connector config, not built here: kept as it is
        source = str(old["params"]["source"])
        tail = source[source.index("; text connectors") :] if "; text connectors" in source else ""
        params = dict(entry["params"])
        params["source"] = str(params.get("source", "")) + tail
        entry["params"] = {**params, "beside": beside}
    if family.card is None:
        entry["offload"] = offload_of(family.transformer, family.text_encoders)
    elif "offload" in old:
        entry["offload"] = old["offload"]
    kept = ("checked", "activations", "unet", "unknown")
    if kind in ("all", "activations"):
        if family.unet:
            entry["unet"] = measure_unet(family, old.get("unet"))
            # gpu: the same measurement in the rows' setup ran and is in the source
            checked = family.id in UNET_GPU_ROWS and not SKIP_GPU_SETUP
            entry["checked"] = "gpu" if checked else "cpu"
        elif family.inputs is None or family.unknown:
            entry["activations"] = None
            entry["unknown"] = family.unknown
        else:
            entry["activations"] = measure(family, real=real)
            entry["checked"] = "gpu" if family.id in GPU_ROWS else "cpu"
    else:
        entry.update({key: old[key] for key in kept if key in old})
    if kind in ("all", "vae"):
        vae = measure_vae(family)
        if vae is not None:
            entry["vae"] = vae
    elif "vae" in old:
        entry["vae"] = old["vae"]
    return entry


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="family ids or arch ids (default: all)")
    parser.add_argument(
        "--check", action="store_true", help="compare with memory.yaml, write nothing"
    )
    parser.add_argument(
        "--table", action="store_true", help="print memory.yaml as a markdown table"
    )
    parser.add_argument(
        "--no-sources", action="store_true", help="with --table: leave the sources out"
    )
    parser.add_argument(
        "--kind",
        choices=KINDS,
        default="all",
        help="what to measure (the rest of each family is kept as memory.yaml has it)",
    )
    parser.add_argument("--params-only", action="store_true", help="the same as --kind params")
    parser.add_argument(
        "--skip-gpu-setup",
        action="store_true",
        help="UNets: keep memory.yaml's figures in the GPU rows' setup instead of measuring them",
    )
    parser.add_argument(
        "--real",
        action="store_true",
        help="with --check: compute with real bf16 tensors at fewer tokens (slow cross-check)",
    )
    args = parser.parse_args(argv)
    if args.real and not args.check:
        parser.error("--real only checks the figures (its token counts differ): add --check")

    global SKIP_GPU_SETUP
    SKIP_GPU_SETUP = args.skip_gpu_setup
    _, stored = load_memory()
    if args.table:
        print(table(stored, sources=not args.no_sources))
        return 0

    differ: list[str] = []
    failed: list[str] = []
    for family in resolve(args.names):
        start = time.monotonic()
        old = stored.get(family.id, {})
        try:
            kind = "params" if args.params_only else args.kind
            entry = measure_family(family, old, kind, real=args.real)
        except Exception as exc:  # one family's failure must not lose the others
            failed.append(family.id)
            print(f"{family.id}: measuring failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        took = time.monotonic() - start
        p = entry["params"]
        print(
            f"{family.id}: transformer {p['transformer']} B, text {p['text_encoder']} B, "
            f"vae {p['vae']} B ({took:.1f} s)",
            file=sys.stderr,
        )
        if args.check:
            now, was = entry, old
            if args.real:  # the per-token figures only: the token counts differ
                now = {"blocks": (entry.get("activations") or {}).get("blocks")}
                was = {"blocks": (old.get("activations") or {}).get("blocks")}
            if not _close(now, was):
                differ.append(family.id)
                print(f"{family.id}: differs from memory.yaml\n  now: {now}\n  was: {was}")
        else:  # read again: another run may have written this family's other parts meanwhile
            _, current = load_memory()
            fresh = current.get(family.id, {})
            for key in KEPT[kind]:
                entry.pop(key, None)
                if key in fresh:
                    entry[key] = fresh[key]
            current[family.id] = entry
            MEMORY_YAML.write_text(dump(versions(), current), encoding="utf-8")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    if args.check:
        print("memory.yaml matches" if not differ else f"differ: {', '.join(differ)}")
        return 1 if differ or failed else 0
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
