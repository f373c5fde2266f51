"""The Wan VAE's sample decode: its peak of live tensor bytes at the sizes samples use.

AI Toolkit decodes a Wan sample with diffusers' ``AutoencoderKLWan.decode`` (its own subclass
only adds gradient checkpointing, which a no-grad decode never takes: toolkit/models/wan21/
autoencoder_kl_wan.py), in the model's dtype (bf16 by default: wan21.py loads the VAE with
``torch_dtype=self.torch_dtype``), one latent frame at a time through the causal cache
(``_feat_map``), spatially tiled only with ``low_vram`` or ``model_kwargs.vae_tiling``
(wan21.py ``use_vae_tiling``). This script runs that decode on fake tensors (PyTorch's
``FakeTensorMode``: no data, no arithmetic, only the tensors' shapes; not the ``meta`` device,
where attention falls back to the unfused path and keeps an fp32 score matrix that the card's
fused kernel never makes). A dispatch mode sees every tensor an operator returns
and follows its storage (each storage once, by its identity) until the storage is freed: the
live bytes and their peak. The VAE's weights and the input latent are not counted (they are
there before the decode starts); the decoded clip is.

Per size it prints the peak, the same times the GPU factor (the Wan 2.1 VAE's H200 rows over
the same count), what ``presets/memory.yaml`` gives (``fit``'s figure; bench/calibrate_memory.py
writes those terms), the cache the decoder holds after its last chunk, the output, and the
chunk that held the peak. ``--encode`` adds the encode (``vae.encode(...).latent_dist.sample()``
as AI Toolkit's ``encode_images``), ``--tiled`` the tiled decode. ``--check`` runs one small
pass for real on the CPU (real tensors, random weights) and prints the same count there and the
CPU allocator's own peak (PyTorch's memory profiler, workspaces inside operators included)
beside the count on fake tensors.

    /tmp/torchvenv/bin/python bench/measure_vae_decode.py            # Wan 2.1 and 2.2 VAEs
    /tmp/torchvenv/bin/python bench/measure_vae_decode.py --vae wan21 --tiled --check
    /tmp/torchvenv/bin/python bench/measure_vae_decode.py --encode --quick

Needs torch and diffusers (the ``measure`` extra, in a virtual environment of its own).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibrate_memory import LiveBytes, storage_id
from families.encoders import VAE_WAN21, VAE_WAN22

GIB = 2**30
VAES = {"wan21": VAE_WAN21, "wan22": VAE_WAN22}
MEMORY_YAML = Path(__file__).resolve().parent.parent / "presets" / "memory.yaml"
MEMORY_FAMILY = {"wan21": "wan21_14b", "wan22": "wan22_5b"}  # a family with that VAE
# (frames, height, width): one frame at 512 and 1024 px, and the clips samples use at 480p.
SIZES: tuple[tuple[int, int, int], ...] = (
    (1, 512, 512),
    (1, 1024, 1024),
    (1, 480, 832),
    (17, 480, 832),
    (33, 480, 832),
    (37, 480, 832),
    (81, 480, 832),
    (17, 832, 480),
    (33, 832, 480),
    (81, 832, 480),
    (33, 240, 416),
    (5, 1024, 1024),
    (121, 704, 1280),
)
# The sizes bench/calibrate_memory.py fits memory.yaml's terms on (one frame at two sizes, two
# clips), and the GPU rows' size.
FIT_SIZES = ((1, 512, 512), (1, 1024, 1024), (17, 480, 832), (81, 480, 832), (33, 480, 832))
# The tiled decode (low_vram, model_kwargs.vae_tiling): tiles of 256 px every 192 px.
TILED_SIZES = ((1, 1024, 1024), (1, 480, 832), (33, 480, 832), (81, 480, 832))
# The GPU rows of ../shared/gpu-measurements.md (H200, bf16): the Wan 2.1 VAE's passes above
# the memory allocated before them, GiB.
GPU_ROWS = {
    "decode": {(33, 480, 832): 4.27, (81, 480, 832): 4.38},
    "encode": {(33, 480, 832): 3.20, (81, 480, 832): 3.20},
}


@dataclass(frozen=True)
class Pass:
    """One pass's figures, bytes."""

    direction: str  # "decode" | "encode"
    frames: int
    height: int
    width: int
    peak: int
    cache: int  # the causal cache after the last chunk (0 when tiled: each tile clears it)
    out: int  # the decoded clip, or the encoded latent
    peak_chunk: int  # the chunk whose pass held the peak (0: the first)
    chunk_peaks: tuple[int, ...]  # the peak within each chunk, live bytes
    attention: tuple[str, ...]


def build(name: str, dtype: Any) -> Any:
    """The VAE with random weights made in ``dtype`` (as AI Toolkit loads it: the model's)."""
    import torch
    from diffusers import AutoencoderKLWan

    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        vae = AutoencoderKLWan(**VAES[name].config)
    finally:
        torch.set_default_dtype(previous)
    for param in vae.parameters():
        if param.is_floating_point() and param.dtype != dtype:
            param.data = param.data.to(dtype)
    return vae.eval()


def given(vae: Any, direction: str, frames: int, height: int, width: int, dtype: Any) -> Any:
    """The pass's input: the latent of a clip (decode) or the clip itself (encode)."""
    import torch

    config = vae.config
    spatial = int(config.scale_factor_spatial)
    temporal = int(config.scale_factor_temporal)
    if direction == "encode":
        return torch.randn((1, 3, frames, height, width), dtype=dtype)
    latent_frames = (frames - 1) // temporal + 1
    shape = (1, int(config.z_dim), latent_frames, height // spatial, width // spatial)
    return torch.randn(shape, dtype=dtype)


def _cache_bytes(feat_map: Sequence[Any] | None) -> int:
    import torch

    seen: dict[int, int] = {}
    for item in feat_map or ():
        if isinstance(item, torch.Tensor):
            seen[storage_id(item)] = int(item.untyped_storage().nbytes())
    return sum(seen.values())


def run(vae: Any, x: Any, direction: str, *, tiled: bool = False) -> Pass:
    """One pass over ``x`` as AI Toolkit runs it (no gradients): a sample's decode, or the
    encode of a clip (``encode_images``: ``vae.encode(...).latent_dist.sample()``)."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if tiled:
        vae.enable_tiling()
    else:
        vae.disable_tiling()
    exclude = {storage_id(t) for t in (*vae.parameters(), *vae.buffers(), x)}
    chunk_peaks: list[int] = []
    cache_after: list[int] = []
    module = vae.decoder if direction == "decode" else vae.encoder
    plain = module.forward

    with torch.no_grad(), LiveBytes(exclude) as live:

        def chunk(*args: Any, **kwargs: Any) -> Any:
            live.reset_window()
            out = plain(*args, **kwargs)
            chunk_peaks.append(live.window)
            feat_map = vae._feat_map if direction == "decode" else vae._enc_feat_map
            cache_after.append(_cache_bytes(feat_map))
            return out

        module.forward = chunk
        try:
            # A fused attention kernel (output and log-sum-exp only), as the card runs the
            # middle block's single head of 384 (memory-efficient attention): no score matrix.
            with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]):
                if direction == "decode":
                    out = vae.decode(x).sample
                else:
                    out = vae.encode(x).latent_dist.sample()
        finally:
            del module.forward
        size = int(out.untyped_storage().nbytes())
        del out
    if direction == "decode":
        _, _, latent_frames, height, width = x.shape
        spatial = int(vae.config.scale_factor_spatial)
        temporal = int(vae.config.scale_factor_temporal)
        frames = (latent_frames - 1) * temporal + 1
        height, width = height * spatial, width * spatial
    else:
        _, _, frames, height, width = x.shape
    return Pass(
        direction=direction,
        frames=frames,
        height=height,
        width=width,
        peak=live.peak,
        cache=cache_after[-1] if cache_after and not tiled else 0,
        out=size,
        peak_chunk=max(range(len(chunk_peaks)), key=chunk_peaks.__getitem__) if chunk_peaks else 0,
        chunk_peaks=tuple(chunk_peaks),
        attention=tuple(sorted(live.attention)),
    )


_MEASURED: dict[tuple[str, str, bool, tuple[int, int, int]], Pass] = {}


def measure(
    name: str, sizes: Sequence[tuple[int, int, int]], direction: str = "decode", *, tiled: bool
) -> list[Pass]:
    """The passes at ``sizes``, on fake tensors (shapes only: no data, no arithmetic); each
    size is measured once a run."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    missing = [s for s in sizes if (name, direction, tiled, s) not in _MEASURED]
    if missing:
        with FakeTensorMode():
            vae = build(name, torch.bfloat16)
            for size in missing:
                x = given(vae, direction, *size, torch.bfloat16)
                _MEASURED[(name, direction, tiled, size)] = run(vae, x, direction, tiled=tiled)
    return [_MEASURED[(name, direction, tiled, s)] for s in sizes]


def profiler_peak(run: Any) -> int:
    """The CPU allocator's peak above its level at the start: PyTorch's memory profiler's
    timeline of every allocation and free (``_memory_profile``, the private half of
    ``export_memory_timeline``), workspaces inside an operator included."""
    from torch.profiler import ProfilerActivity, profile

    with profile(
        activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True
    ) as prof:
        run()
    level = peak = 0
    for _, action, _, size in prof._memory_profile().timeline:
        if action.name == "CREATE":
            level += size
        elif action.name == "DESTROY":
            level -= size
        peak = max(peak, level)
    return peak


def check(name: str, direction: str, size: tuple[int, int, int]) -> None:
    """A real pass on the CPU against the count on fake tensors, at a small size."""
    import torch

    fake = measure(name, [size], direction, tiled=False)[0]
    vae = build(name, torch.bfloat16)
    x = given(vae, direction, *size, torch.bfloat16)
    real = run(vae, x, direction)

    def plain() -> None:
        with torch.no_grad():
            if direction == "decode":
                vae.decode(x)
            else:
                vae.encode(x).latent_dist.sample()

    allocator = profiler_peak(plain)
    frames, height, width = size
    print(
        f"check {name} {direction} {frames}x{height}x{width}: fake tensors "
        f"{fake.peak / 2**20:.1f} MiB, real CPU tensors {real.peak / 2**20:.1f} MiB (the same "
        f"count), the CPU allocator's peak (profiler) {allocator / 2**20:.1f} MiB; per chunk: "
        f"fake {[round(p / 2**20, 1) for p in fake.chunk_peaks]}, "
        f"real {[round(p / 2**20, 1) for p in real.chunk_peaks]}"
    )


def gpu_factor(direction: str) -> float:
    """The Wan 2.1 VAE's GPU rows over the same count: what the card's kernels add beside the
    tensors (cuDNN's workspaces and layout copies), in proportion to the activations."""
    rows = GPU_ROWS[direction]
    found = measure("wan21", list(rows), direction, tiled=False)
    ratios = [rows[(r.frames, r.height, r.width)] * GIB / r.peak for r in found]
    return sum(ratios) / len(ratios)


def modelled(
    name: str, direction: str, frames: int, height: int, width: int, *, tiled: bool = False
) -> float:
    """What presets/memory.yaml's figures give (catalog.VaePass.at, catalog.TiledDecode.at for
    a tiled decode), bytes."""
    import yaml

    families = yaml.safe_load(MEMORY_YAML.read_text(encoding="utf-8"))["families"]
    vae = families[MEMORY_FAMILY[name]]["vae"]
    fit = vae[direction]
    pixels = height * width
    chunks = (frames - 1) // 4 + 1 if vae.get("frame_by_frame") else 1
    tiles = vae.get("tiled_decode") if tiled else None
    if tiles is not None and (width > tiles["tile"] or height > tiles["tile"]):
        return float(
            tiles["fixed_bytes"]
            + (tiles["chunk_bytes"] if chunks > 1 else 0.0)
            + tiles["bytes_per_clip_pixel"] * pixels * frames
        )
    return float(
        fit["fixed_bytes"]
        + fit["bytes_per_pixel"] * pixels
        + (fit.get("chunk_bytes_per_pixel", 0.0) * pixels if chunks > 1 else 0.0)
        + fit.get("bytes_per_clip_pixel", 0.0) * pixels * frames
    )


def table(name: str, rows: Sequence[Pass], tiled: bool) -> None:
    direction = rows[0].direction
    label = VAES[name].label + (" (tiled)" if tiled else "")
    factor = gpu_factor(direction)
    print(
        f"\n{label}: {direction}, bf16, batch 1. Peak: the live bytes above the weights and the "
        f"{'latent' if direction == 'decode' else 'clip'} (fake tensors); x GPU: times "
        f"{factor:.3f}, the Wan 2.1 VAE's GPU rows over the same count; memory.yaml: what fit "
        "counts"
    )
    out = "clip" if direction == "decode" else "latent"
    print(
        f"| frames | height×width | peak GiB | x GPU GiB | memory.yaml GiB | cache GiB | {out} GiB "
        "| peak in chunk | GPU row GiB |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        gpu = (GPU_ROWS[direction] if name == "wan21" and not tiled else {}).get(
            (r.frames, r.height, r.width)
        )
        print(
            f"| {r.frames} | {r.height}×{r.width} | {r.peak / GIB:.3f} | "
            f"{r.peak * factor / GIB:.2f} | "
            f"{modelled(name, direction, r.frames, r.height, r.width, tiled=tiled) / GIB:.2f} | "
            f"{r.cache / GIB:.3f} | {r.out / GIB:.3f} | {r.peak_chunk + 1} of "
            f"{len(r.chunk_peaks)} | " + (f"{gpu:.2f}" if gpu else "") + " |"
        )
    attention = sorted({a for r in rows for a in r.attention})
    print(f"attention kernels: {', '.join(attention) or 'none'}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vae", choices=sorted(VAES), action="append")
    parser.add_argument("--encode", action="store_true", help="the encode too")
    parser.add_argument("--tiled", action="store_true", help="the tiled decode too (low_vram)")
    parser.add_argument("--quick", action="store_true", help="only the sizes the fit reads")
    parser.add_argument("--check", action="store_true", help="one small real pass on the CPU")
    args = parser.parse_args(argv)
    directions = ("decode", "encode") if args.encode else ("decode",)
    sizes = FIT_SIZES if args.quick else SIZES
    for name in args.vae or sorted(VAES):
        for direction in directions:
            table(name, measure(name, sizes, direction, tiled=False), tiled=False)
            if args.tiled and direction == "decode":
                table(name, measure(name, TILED_SIZES, direction, tiled=True), tiled=True)
            if args.check:
                check(name, direction, (9, 64, 96))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
