"""A stand-in for AI Toolkit's ``run.py`` that runs out of memory the way the real one does.

``python tests/support/fake_trainer.py CONFIG`` reads an AI Toolkit job config (YAML or JSON),
works out how much GPU memory each phase would want with its OWN small model (deliberately not the
project's estimate, so a test against it is not circular), and prints the toolkit's log shapes
for a run on a card of ``FAKE_VRAM_GB`` GiB: the start banner and config dump, the model-load
lines, the dataset and caching lines, the baseline sample, the training bar redrawn with ``\\r``,
the OOM skip banners, saves, samples, and on a crash ``Error running job: …``, the result block
and the traceback with PyTorch's message on stderr, exit status 1. A finished run exits 0.

The memory model, in GiB (invented figures of a plausible size):

- weights on the GPU: a per-arch size, × 0.52 when quantized (× 0.3 for 4-bit), × 0.85 with
  ``low_vram``, × (1 - percent) with ``layer_offloading``; the text encoder likewise;
- loading holds the transformer and the text encoder at once (with ``low_vram`` the larger);
- a training step: resident weights (+ the text encoder unless its embeddings are cached) +
  1.2 for the LoRA and optimizer + activations ∝ batch × latent tokens × latent frames,
  × 0.3 with gradient checkpointing;
- a sample: resident weights (+ text encoder unless cached) + half the activations of one
  sample of ``sample.width × height × num_frames`` + the VAE decode (halved by ``low_vram``).

It resumes as AI Toolkit does: from the newest (by creation time) ``<name>*.safetensors`` in
``<training_folder>/<name>/`` (a relative training folder is taken from the config's folder,
so that a test's files stay in its own folder), reading ``training_info`` → ``step`` from the
file's safetensors metadata (an 8-byte little-endian header length, then JSON), printing
``Found step N in metadata, starting from there``, and training from that step up to
``train.steps`` (nothing when that is not above it). With ``FAKE_CHECKPOINTS=1`` its saves
write such files (a header and no tensors), periodic ones as ``<name>_<9-digit step>``, the
final one as ``<name>.safetensors``.

The batches draw the buckets in a fixed order: the smaller buckets in turn, and the largest
one four batches in a row from step ``FAKE_BIG_BUCKET_FROM`` (default 0), then every 100 steps.

Environment knobs (all optional):
  FAKE_VRAM_GB           card size (default 24)
  FAKE_OTHER_GB          memory another process holds on the card (shown in the OOM message)
  FAKE_HOST_RAM_GB       host RAM; offloaded weights + latents kept in memory above it: the
                         kernel's OOM killer ends the process with SIGKILL while caching
  FAKE_OLD_TORCH         1: the old ``RuntimeError: CUDA out of memory. Tried … (GPU 0; …)``
  FAKE_STEP_S            seconds of real sleep per step (default 0)
  FAKE_STALL_AT          step at which to hang for FAKE_STALL_S seconds (default 3600)
  FAKE_IGNORE_SIGINT     1: ignore SIGINT (a trainer that needs SIGTERM)
  FAKE_IGNORE_SIGTERM    1: ignore SIGTERM as well (needs SIGKILL)
  FAKE_WORKER            1: start a child process (a dataloader worker) in the same group
  FAKE_SETSID_HELPER     a path: start a helper in a session of its own (``setsid``) that
                         holds the trainer's stdout and stderr open and outlives it (it
                         sleeps 600 s), and write its pid there
  FAKE_PIDFILE           write "pid pgid [worker pid]" here
  FAKE_CHECKPOINTS       1: the saves write checkpoint files with the step in their metadata
  FAKE_HANG_AFTER_ERROR  1: after printing the fatal error, do not exit (a worker keeps it up)
  FAKE_ALLOWED_GB        cap the process below the card (a memory fraction): it runs out of
                         this allowance, and PyTorch's message says "N GiB allowed;"
  FAKE_FRAGMENTED        1: the first training step runs out of memory with 6 GiB reserved
                         by PyTorch but unallocated (fragmentation), unless
                         PYTORCH_CUDA_ALLOC_CONF has expandable_segments:True; "always": even then
  FAKE_ADAPTER           "zero" or "trained": the final save writes a LoRA (bf16 tensors: a
                         down and an up weight per layer) whose up weights are all still zero,
                         as they start, or have moved
  FAKE_FLAT_LOSS         1: the bar's loss is the same at every step (else it wanders)
  FAKE_FAULT             a CUDA library or driver fault to fail the first training step with,
                         not memory (one of FAULTS: cudnn_attention, cublas, illegal_access),
                         printed in PyTorch's words as reported on torch 2.11 with an H200
"""

from __future__ import annotations

import json
import math
import os
import signal
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

#: weights and text encoder in GiB (bf16) by the start of ``model.arch``.
WEIGHTS: dict[str, tuple[float, float, float]] = {
    # arch: (transformer, text encoder, activation GiB per 1000 latent tokens without checkpointing)
    "flux": (23.8, 9.6, 3.4),
    "wan21:14b": (28.0, 11.4, 0.9),
    "wan22_14b": (28.0, 11.4, 0.9),
    "wan21:1b": (2.8, 11.4, 0.5),
    "sdxl": (5.1, 1.6, 1.6),
}
DEFAULT_WEIGHTS = (12.0, 4.0, 2.0)
LORA_AND_OPTIMIZER = 1.2
BIG_BUCKET_RUN = 4
BIG_BUCKET_PERIOD = 100


def env_float(name: str, default: float) -> float:
    """A float from the environment."""
    value = os.environ.get(name)
    return float(value) if value else default


def out(text: str = "", end: str = "\n") -> None:
    """Print to stdout (status lines), unbuffered as under the UI."""
    sys.stdout.write(text + end)
    sys.stdout.flush()


def err(text: str, end: str = "\n") -> None:
    """Print to stderr (bars and tracebacks)."""
    sys.stderr.write(text + end)
    sys.stderr.flush()


def load_config(path: Path) -> dict[str, Any]:
    """The job config, YAML or JSON."""
    text = path.read_text(encoding="utf-8-sig")
    tree = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    if not isinstance(tree, dict):
        raise SystemExit(f"not a job config: {path}")
    return tree


def _quantized(size: float, on: Any, qtype: Any) -> float:
    if not on:
        return size
    return size * (0.3 if "4" in str(qtype or "") else 0.52)


@dataclass(frozen=True)
class Demand:
    """What the job wants, worked out once from the config."""

    name: str
    arch: str
    video: bool
    load_peak: float
    resident: float
    act_per_token: float
    sample_act_per_token: float
    batch: int
    buckets: tuple[int, ...]
    frames: int
    sample_tokens: float
    sample_vae: float
    host_ram: float

    def step_gib(self, resolution: int) -> float:
        """GPU memory of one training step on a bucket of ``resolution``."""
        tokens = (resolution / 16) ** 2 * latent_frames(self.frames) / 1000
        return self.resident + LORA_AND_OPTIMIZER + self.batch * tokens * self.act_per_token

    def sample_gib(self, training: bool) -> float:
        """GPU memory of one sample pass (the optimizer state is kept during training)."""
        kept = LORA_AND_OPTIMIZER if training else 0.0
        return (
            self.resident + kept + self.sample_tokens * self.sample_act_per_token + self.sample_vae
        )


def latent_frames(frames: int) -> int:
    """Frames after the video VAE's 4x temporal compression."""
    return (max(frames, 1) - 1) // 4 + 1


def demand_of(process: dict[str, Any], name: str) -> Demand:
    """The memory model (see the module docstring)."""
    model = process.get("model") or {}
    train = process.get("train") or {}
    sample = process.get("sample") or {}
    datasets = process.get("datasets") or [{}]
    arch = str(model.get("arch") or "")
    weights, te, act = next(
        (figures for key, figures in WEIGHTS.items() if arch.startswith(key)), DEFAULT_WEIGHTS
    )
    weights = _quantized(weights, model.get("quantize"), model.get("qtype"))
    te = _quantized(te, model.get("quantize_te"), model.get("qtype_te"))
    offloaded = 0.0
    if model.get("layer_offloading"):
        share = float(model.get("layer_offloading_transformer_percent", 1.0) or 0.0)
        offloaded = weights * share
        weights -= offloaded
    low_vram = bool(model.get("low_vram"))
    if low_vram:
        weights *= 0.85
    load_peak = max(weights, te) if low_vram else weights + te
    cached_te = bool(train.get("cache_text_embeddings") or train.get("unload_text_encoder"))
    resident = weights + (0.0 if cached_te else te)
    sample_act = act / 2
    if train.get("gradient_checkpointing"):
        act *= 0.3
    resolution = datasets[0].get("resolution", [512])
    buckets = tuple(
        sorted(int(r) for r in (resolution if isinstance(resolution, list) else [resolution]))
    )
    frames = int(datasets[0].get("num_frames", 1) or 1)
    video = frames > 1 or "wan" in arch
    width, height = int(sample.get("width", 1024)), int(sample.get("height", 1024))
    sample_frames = int(sample.get("num_frames", 1) or 1) if video else 1
    sample_tokens = (width / 16) * (height / 16) * latent_frames(sample_frames) / 1000
    vae = (width * height / 1024**2) * (0.35 * sample_frames if video else 1.0)
    if low_vram:
        vae /= 2
    in_ram = any(d.get("cache_latents") and not d.get("cache_latents_to_disk") for d in datasets)
    host_ram = 8.0 + offloaded + (4.0 if in_ram else 0.0)
    return Demand(
        name=name,
        arch=arch,
        video=video,
        load_peak=load_peak,
        resident=resident,
        act_per_token=act,
        sample_act_per_token=sample_act,
        batch=int(train.get("batch_size", 1) or 1),
        buckets=buckets,
        frames=frames,
        sample_tokens=sample_tokens,
        sample_vae=vae,
        host_ram=host_ram,
    )


class OutOfMemory(Exception):
    """The fake's CUDA out of memory."""

    def __init__(
        self, wanted: float, card: float, other: float, capacity: float | None = None
    ) -> None:
        self.wanted, self.card, self.other = wanted, card, other
        super().__init__(message(wanted, card, other, capacity))


def message(wanted: float, card: float, other: float, capacity: float | None = None) -> str:
    """PyTorch's allocator message, new or old shape; with ``capacity``, a process capped at
    ``card`` GiB of a card of ``capacity`` GiB (the message's "allowed")."""
    tried = max(wanted - card + other, 0.02) if wanted > card - other else 0.5
    tried = min(tried, 8.0)
    this = max(card - other - 0.05, 0.0)
    if os.environ.get("FAKE_OLD_TORCH") == "1":
        return (
            f"CUDA out of memory. Tried to allocate {tried:.2f} GiB (GPU 0; {card:.2f} GiB total "
            f"capacity; {this - 0.4:.2f} GiB already allocated; 20.00 MiB free; {this - 0.1:.2f} "
            "GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try "
            "setting max_split_size_mb to avoid fragmentation.  See documentation for Memory "
            "Management and PYTORCH_CUDA_ALLOC_CONF"
        )
    others = f"Process 4242 has {other:.2f} GiB memory in use. " if other else ""
    if capacity is not None:
        return (
            f"CUDA out of memory. Tried to allocate {tried:.2f} GiB. GPU 0 has a total capacity "
            f"of {capacity:.2f} GiB of which {capacity - this:.2f} GiB is free. Including "
            f"non-PyTorch memory, this process has {this:.2f} GiB memory in use. {card:.2f} GiB "
            f"allowed; Of the allocated memory {this - 0.4:.2f} GiB is allocated by PyTorch, and "
            "312.00 MiB is reserved by PyTorch but unallocated."
        )
    return (
        f"CUDA out of memory. Tried to allocate {tried:.2f} GiB. GPU 0 has a total capacity of "
        f"{card:.2f} GiB of which 20.00 MiB is free. {others}Including non-PyTorch memory, this "
        f"process has {this:.2f} GiB memory in use. Of the allocated memory {this - 0.4:.2f} GiB "
        "is allocated by PyTorch, and 312.00 MiB is reserved by PyTorch but unallocated. If "
        "reserved but unallocated memory is large try setting "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
        "documentation for Memory Management  "
        "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )


def write_checkpoint(path: Path, step: int) -> None:
    """A safetensors file with no tensors and AI Toolkit's ``training_info`` metadata."""
    info = json.dumps({"step": step, "epoch": 0})
    header = json.dumps({"__metadata__": {"training_info": info}}).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(struct.pack("<Q", len(header)) + header)


def write_lora(path: Path, step: int, *, trained: bool) -> None:
    """A LoRA as AI Toolkit saves one: per layer a ``lora_A`` (down, random) and a ``lora_B``
    (up: zero as it starts, or moved) weight in bf16, with ``training_info`` metadata."""
    rank, width, header, blobs, offset = 4, 8, {}, [], 0
    for layer in range(3):
        for part, value in (("lora_A", 0x3C00 + layer), ("lora_B", 0x3A00 if trained else 0)):
            shape = [rank, width] if part == "lora_A" else [width, rank]
            blob = struct.pack(f"<{rank * width}H", *([value] * (rank * width)))
            name = f"transformer.blocks.{layer}.attn.to_q.{part}.weight"
            header[name] = {
                "dtype": "BF16",
                "shape": shape,
                "data_offsets": [offset, offset + len(blob)],
            }
            blobs.append(blob)
            offset += len(blob)
    header["__metadata__"] = {"training_info": json.dumps({"step": step, "epoch": 0})}
    text = json.dumps(header).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def checkpoint_step(path: Path) -> int | None:
    """``training_info.step`` from a safetensors file's metadata (the fake's own reader)."""
    try:
        data = path.read_bytes()
        (size,) = struct.unpack("<Q", data[:8])
        meta = json.loads(data[8 : 8 + size]).get("__metadata__") or {}
        step = json.loads(meta.get("training_info", "{}")).get("step")
    except (OSError, ValueError, struct.error):
        return None
    return step if isinstance(step, int) else None


FAULTS: dict[str, tuple[str, str]] = {
    "cudnn_attention": (
        "RuntimeError",
        "Expected mha_graph.execute(handle, variant_pack, workspace_ptr.get()).is_good() to be "
        "true, but got false.  (Could this error message be improved?  If so, please report an "
        "enhancement request to PyTorch.)",
    ),
    "cublas": (
        "RuntimeError",
        "CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx( handle, opa, opb, "
        "m, n, k, &falpha, a, CUDA_R_16BF, lda, b, CUDA_R_16BF, ldb, &fbeta, c, CUDA_R_16BF, ldc, "
        "CUDA_R_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP)`",
    ),
    "illegal_access": (
        "torch.AcceleratorError",
        "CUDA error: an illegal memory access was encountered",
    ),
}
"""The faults ``FAKE_FAULT`` names: (exception, message), the words of ../shared's H200 runs."""


def fragmented_message(card: float) -> str:
    """PyTorch's message for an allocation that failed while 6 GiB lay reserved but
    unallocated: the room was there, in pieces."""
    this = card - 0.4
    return (
        f"CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        f"{card:.2f} GiB of which 400.00 MiB is free. Including non-PyTorch memory, this process "
        f"has {this:.2f} GiB memory in use. Of the allocated memory {this - 6.5:.2f} GiB is "
        "allocated by PyTorch, and 6.00 GiB is reserved by PyTorch but unallocated. If reserved "
        "but unallocated memory is large try setting "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
        "documentation for Memory Management  "
        "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )


def fragmented_now() -> bool:
    """Whether ``FAKE_FRAGMENTED`` makes this run's first training step fail."""
    mode = os.environ.get("FAKE_FRAGMENTED")
    expandable = "expandable_segments:True" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    return mode == "always" or (mode == "1" and not expandable)


class Fragmented(Exception):
    """The fake's out of memory from fragmentation (``FAKE_FRAGMENTED``)."""


class Fault(Exception):
    """A CUDA library or driver fault (``FAKE_FAULT``): not memory."""


class Trainer:
    """One run of the fake job."""

    def __init__(self, config: Path) -> None:
        tree = load_config(config)
        folder = Path(str(tree["config"]["process"][0].get("training_folder") or "output"))
        if not folder.is_absolute():
            folder = config.parent / folder
        self.save_root = folder / str(tree["config"].get("name", "job"))
        self.checkpoints = os.environ.get("FAKE_CHECKPOINTS") == "1"
        self.start_step = 0
        self.tree = tree
        self.process: dict[str, Any] = tree["config"]["process"][0]
        self.name = str(tree["config"].get("name", "job"))
        self.demand = demand_of(self.process, self.name)
        self.card = env_float("FAKE_VRAM_GB", 24.0)
        self.other = env_float("FAKE_OTHER_GB", 0.0)
        self.host = env_float("FAKE_HOST_RAM_GB", 0.0)
        self.allowed = env_float("FAKE_ALLOWED_GB", 0.0)
        self.step_s = env_float("FAKE_STEP_S", 0.0)
        stall = os.environ.get("FAKE_STALL_AT")
        self.stall_at = int(stall) if stall else None
        self.stall_s = env_float("FAKE_STALL_S", 3600.0)
        self.big_from = int(env_float("FAKE_BIG_BUCKET_FROM", 0))
        train = self.process.get("train") or {}
        self.steps = int(train.get("steps", 1000) or 1000)
        save = self.process.get("save") or {}
        self.save_every = int(save.get("save_every", 0) or 0)
        sample = self.process.get("sample") or {}
        self.sample_every = int(sample.get("sample_every", 0) or 0)
        self.prompts = max(len(sample.get("prompts") or sample.get("samples") or [1]), 1)
        self.disable_sampling = bool(train.get("disable_sampling"))
        self.skip_first = bool(train.get("skip_first_sample")) or self.disable_sampling
        self.rate = 1.2 + self.demand.step_gib(self.demand.buckets[-1]) / 20

    def need(self, gib: float) -> None:
        """Allocate: raise the OOM when ``gib`` does not fit beside the other process."""
        if self.allowed and gib > self.allowed:
            raise OutOfMemory(gib, self.allowed, 0.0, capacity=self.card)
        if gib > self.card - self.other:
            raise OutOfMemory(gib, self.card, self.other)

    def run(self) -> int:
        """The whole job; the exit status."""
        out("Running 1 job")
        out(json.dumps(self.process, indent=4))
        out("#############################################")
        out(f"# Running job: {self.name}")
        out("#############################################")
        out("Running  1 process")
        try:
            self.load()
            self.resume()
            self.dataset()
            self.first_sample()
            self.train()
        except OutOfMemory as exc:
            old = os.environ.get("FAKE_OLD_TORCH") == "1"
            return self.hang(
                self.fail(str(exc), "RuntimeError" if old else "torch.OutOfMemoryError")
            )
        except StepAbort as exc:
            return self.hang(self.fail(str(exc), "RuntimeError"))
        except Fragmented:
            return self.hang(self.fail(fragmented_message(self.card), "torch.OutOfMemoryError"))
        except Fault as exc:
            kind, text = FAULTS[str(exc)]
            return self.hang(self.fail(text, kind))
        except KeyboardInterrupt:
            out("========================================")
            out("Job stopped")
            out("========================================")
            return 0
        return 0

    def hang(self, status: int) -> int:
        """With ``FAKE_HANG_AFTER_ERROR``, the error is printed but the process lives on."""
        if os.environ.get("FAKE_HANG_AFTER_ERROR") == "1":
            time.sleep(3600)
        return status

    def resume(self) -> None:
        """AI Toolkit's resume: the newest checkpoint's metadata step is the start step."""
        try:
            found = [p for p in self.save_root.glob(f"{self.name}*.safetensors") if p.is_file()]
        except OSError:
            found = []
        if not found:
            return
        newest = max(found, key=lambda p: p.stat().st_ctime)
        out(f"#### IMPORTANT RESUMING FROM {newest} ####")
        out(f"Loading from {newest}")
        step = checkpoint_step(newest)
        if step is not None:
            self.start_step = step
            out(f"Found step {step} in metadata, starting from there")

    def save(self, step: int | None) -> None:
        """A checkpoint (periodic with its step in the name, or the final one)."""
        suffix = f"_{step:09d}" if step is not None else ""
        path = self.save_root / f"{self.name}{suffix}.safetensors"
        out(f"Saved checkpoint to {path}")
        adapter = os.environ.get("FAKE_ADAPTER")
        if adapter and step is None:
            write_lora(path, self.steps_done, trained=adapter == "trained")
        elif self.checkpoints:
            write_checkpoint(path, self.steps_done)

    steps_done = 0

    def fail(self, text: str, kind: str) -> int:
        """The toolkit's failure block, then the traceback on stderr."""
        out(f"Error running job: {text}")
        out("")
        out("========================================")
        out("Result:")
        out(" - 0 completed jobs")
        out(" - 1 failure")
        out("========================================")
        err("Traceback (most recent call last):")
        err('  File "/opt/ai-toolkit/run.py", line 120, in <module>')
        err("    main()")
        err('  File "/opt/ai-toolkit/run.py", line 96, in main')
        err("    job.run()")
        err('  File "/opt/ai-toolkit/jobs/process/BaseSDTrainProcess.py", line 2130, in run')
        err(f"    {self.where}()")
        err(f'  File "/opt/ai-toolkit/jobs/process/BaseSDTrainProcess.py", line 1, in {self.where}')
        err("    ...")
        err(f"{kind}: {text}")
        return 1

    where = "load_model"

    def load(self) -> None:
        """Model load and quantization."""
        arch = self.demand.arch or "flux"
        family = "Wan" if arch.startswith("wan") else "Flux" if arch == "flux" else arch
        out(f"Loading {family} model")
        out("Loading transformer")
        model = self.process.get("model") or {}
        if model.get("quantize"):
            out("Quantizing Transformer")
            err(" - quantizing 57 transformer blocks")
        if model.get("low_vram"):
            out("Moving transformer to CPU")
        out("Loading text encoder")
        if model.get("quantize_te"):
            out("Quantizing Text Encoder")
        self.need(self.demand.load_peak)
        out("Loading VAE")
        out("Making pipe")
        out("Preparing Model")
        network = self.process.get("network") or {}
        rank = network.get("linear", 16)
        alpha = network.get("linear_alpha", rank)
        out(f"create LoRA network. base dim (rank): {rank}, alpha: {alpha}")

    def dataset(self) -> None:
        """Dataset scan, buckets, latent and text caching (the host OOM killer acts here)."""
        self.where = "cache_latents"
        kind = "video" if self.demand.video else "image"
        for dataset in self.process.get("datasets") or [{}]:
            folder = dataset.get("folder_path", "/data/set")
            out(f"Dataset: {folder}")
            out(f"  -  Preprocessing {kind} dimensions")
            err("100%|##########| 24/24 [00:00<00:00, 900.00it/s]")
            out(f"  -  Found 24 {kind}s")
            out(f"Bucket sizes for {folder}:")
            for size in self.demand.buckets:
                shape = f"{size}x{size}" + (f"x{self.demand.frames}f" if self.demand.video else "")
                out(f"{shape}: 8 files")
            out(f"{len(self.demand.buckets)} buckets made")
            out(f"Caching latents for {folder}")
            in_ram = dataset.get("cache_latents") and not dataset.get("cache_latents_to_disk")
            out(" - Keeping latents in memory" if in_ram else " - Saving latents to disk")
            if self.host and self.demand.host_ram > self.host:
                err(
                    "Caching latents to disk:  40%|####      | 10/24 [00:02<00:03,  4.00it/s]",
                    end="\r",
                )
                os.kill(os.getpid(), signal.SIGKILL)
            err("Caching latents to disk: 100%|##########| 24/24 [00:05<00:00,  4.00it/s]")
        if (self.process.get("train") or {}).get("cache_text_embeddings"):
            self.where = "cache_text_embeddings"
            out(f"Caching text_embeddings for {folder}")
            out(" - Saving text embeddings to disk")
            err("Caching text embeddings to disk: 100%|##########| 24/24 [00:01<00:00, 20.00it/s]")

    def first_sample(self) -> None:
        """The baseline sample, or the line that says it is skipped."""
        if self.skip_first:
            out("Skipping first sample due to config setting")
            return
        out("Generating baseline samples before training")
        self.sample(training=False)

    def sample(self, *, training: bool) -> None:
        """One sample pass."""
        self.where = "sample"
        for i in range(self.prompts):
            pct = i * 100 // self.prompts
            count = f"{i}/{self.prompts}"
            err(
                f"Generating Samples:  {pct:>2}%|          | {count} [00:0{i}<00:10,  3.00s/it]",
                end="\r",
            )
            self.need(self.demand.sample_gib(training))
        n = self.prompts
        err(f"Generating Samples: 100%|##########| {n}/{n} [00:09<00:00,  3.00s/it]")
        out("")

    def bucket_at(self, step: int) -> int:
        """The bucket the batch of ``step`` is drawn from."""
        buckets = self.demand.buckets
        offset = step - self.big_from
        if len(buckets) == 1 or (offset >= 0 and offset % BIG_BUCKET_PERIOD < BIG_BUCKET_RUN):
            return buckets[-1]
        return buckets[step % (len(buckets) - 1)]

    def bar(self, step: int, rate: float) -> str:
        """The training bar at ``step`` completed steps."""
        pct = step * 100 // self.steps
        filled = "#" * (pct // 10)
        elapsed, left = clock(step * rate), clock((self.steps - step) * rate)
        loss = 0.4512 if os.environ.get("FAKE_FLAT_LOSS") == "1" else 0.4512 + 0.05 * math.sin(step)
        post = f", lr: 1.0e-04 loss: {loss:.3e}" if step else ""
        shown = f"{rate:.2f}s/it" if step else "?it/s"
        count = f"{step}/{self.steps}"
        return f"{self.name}: {pct:>3}%|{filled:<10}| {count} [{elapsed}<{left}, {shown}{post}]"

    def train(self) -> None:
        """The loop: steps, skip banners, periodic saves and samples, the final save/sample."""
        self.steps_done = self.start_step
        err(self.bar(self.start_step, self.rate), end="\r")
        in_a_row = 0
        for step in range(self.start_step, self.steps):
            self.steps_done = step
            if self.stall_at is not None and step == self.stall_at:
                time.sleep(self.stall_s)
            if self.step_s:
                time.sleep(self.step_s)
            self.where = "hook_train_loop"
            fault = os.environ.get("FAKE_FAULT")
            if fault:
                raise Fault(fault)
            if step == self.start_step and fragmented_now():
                raise Fragmented
            try:
                self.need(self.demand.step_gib(self.bucket_at(step)))
                in_a_row = 0
            except OutOfMemory as exc:
                if in_a_row == 3:
                    raise StepAbort(
                        "OOM during training step 3 times in a row, aborting training"
                    ) from exc
                in_a_row += 1
                out("")
                out("################################################")
                out(f"# OOM during training step, skipping batch {in_a_row}/3 #")
                out("################################################")
                out("")
            if step != self.start_step and self.save_every and step % self.save_every == 0:
                out("")
                out(f"Saving at step {step}")
                self.save(step)
            if (
                step != self.start_step
                and self.sample_every
                and not self.disable_sampling
                and step % self.sample_every == 0
            ):
                self.sample(training=True)
            rate = 1.2 + self.demand.step_gib(self.bucket_at(step)) / 20  # bigger is slower
            err(self.bar(step + 1, rate), end="\r")
            self.steps_done = step + 1
        err("")
        self.save(None)
        if not self.disable_sampling:
            self.sample(training=True)


class StepAbort(Exception):
    """Four OOMs in a row: the toolkit gives up."""


def clock(seconds: float) -> str:
    """tqdm's ``MM:SS`` / ``H:MM:SS``."""
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def start_worker() -> int | None:
    """A child in the same process group, like a dataloader worker."""
    if os.environ.get("FAKE_WORKER") != "1":
        return None
    worker = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"], stderr=subprocess.DEVNULL
    )
    return worker.pid


def start_setsid_helper() -> int | None:
    """A helper in a session of its own that inherits our output: it keeps the pipe open."""
    pidfile = os.environ.get("FAKE_SETSID_HELPER")
    if not pidfile:
        return None
    helper = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True
    )
    Path(pidfile).write_text(f"{helper.pid}\n")
    return helper.pid


def main(argv: list[str]) -> int:
    """``fake_trainer.py CONFIG``."""
    if len(argv) != 1:
        err("usage: fake_trainer.py CONFIG")
        return 2
    if os.environ.get("FAKE_IGNORE_SIGINT") == "1":
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    if os.environ.get("FAKE_IGNORE_SIGTERM") == "1":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    worker = start_worker()
    start_setsid_helper()
    pidfile = os.environ.get("FAKE_PIDFILE")
    if pidfile:
        Path(pidfile).write_text(f"{os.getpid()} {os.getpgrp()} {worker or ''}\n")
    return Trainer(Path(argv[0])).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
