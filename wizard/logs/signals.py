"""The words of a training log: the phases a run goes through and the signals it can show.

The phases are where a crash happens (loading, sampling, training, saving); a signal is one
kind of evidence (PyTorch's OOM message, a skip banner, the host's kill, a spill into system
memory). The marker table (:mod:`oom_wizard.logs.markers`) maps lines to them, and the
diagnosis reads them off a :class:`~oom_wizard.logs.result.LogScan`.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

Phase = Literal[
    "launch",
    "model_load",
    "quantize",
    "cache_latents",
    "cache_text",
    "baseline_sample",
    "training",
    "periodic_sample",
    "save",
    "unknown",
]

LOADING_PHASES: Final[frozenset[Phase]] = frozenset(
    {"launch", "model_load", "quantize", "cache_latents", "cache_text", "baseline_sample"}
)
"""Phases before the first training step (the ``loading`` moment). ``launch``: the launcher or
the dataset settings printed before the trainer loads anything."""

GpuSignal = Literal[
    "cuda_oom",
    "cuda_error_oom",
    "cublas_alloc",
    "zero_free",
    "oom_skip",
    "oom_abort",
    "loss_dict_followon",
    "cache_followon",
]
"""Signals that the GPU ran out of memory, directly or through a known follow-on error
(``cache_followon``: a trainer caught an OOM while caching latents and fails later on the images
it left out)."""

HostSignal = Literal["host_oom_kill", "host_memory_error"]
"""Signals that the host (RAM), not the GPU, ran out: a kill from outside, Python's MemoryError."""

FaultSignal = Literal["library_fault"]
"""A CUDA library (cuDNN, cuBLAS) or the driver failed for a reason other than memory: an
illegal memory access, a failed kernel, cuDNN's attention graph refusing to run."""

LineSignal = Literal[GpuSignal, HostSignal, FaultSignal]
"""The signals a single line shows (the others are concluded from the whole run)."""

RunSignal = Literal["silent_exit", "sysmem_spill", "stall"]
"""Signals concluded from the whole run: an exit with no error, a training bar that slowed down
several-fold after a stable stretch (the driver spilling VRAM into system memory), a log that
stops on a bar with no progress at all."""

Signal = Literal[LineSignal, RunSignal]
SIGNALS: Final[tuple[Signal, ...]] = get_args(Signal)
"""Every signal, in the order they are reported."""

GPU_SIGNALS: Final[frozenset[Signal]] = frozenset(get_args(GpuSignal))
HOST_SIGNALS: Final[frozenset[Signal]] = frozenset(get_args(HostSignal))

FATAL_SIGNALS: Final[frozenset[Signal]] = frozenset(
    {
        "cuda_oom",
        "cuda_error_oom",
        "cublas_alloc",
        "oom_abort",
        "loss_dict_followon",
        "cache_followon",
        "library_fault",
    }
)
"""Signals that mean the job is failing (a skip banner does not: training goes on)."""

MarkerPhase = Literal[
    "launch",
    "model_load",
    "quantize",
    "cache_latents",
    "cache_text",
    "baseline_sample",
    "sample",
    "training_start",
    "save",
]
BarPhase = Literal["model_load", "quantize", "cache_latents", "cache_text", "sample", "ignore"]
FramePhase = Literal[
    "model_load",
    "quantize",
    "cache_latents",
    "cache_text",
    "training",
    "sample",
    "baseline_sample",
    "periodic_sample",
    "save",
]
"""``sample`` is a sample pass that the log's bar tells apart (before or during training);
``baseline_sample`` and ``periodic_sample`` are a call that says which one it is itself."""

BarKind = Literal[
    "training",
    "unnamed",
    "model_load",
    "quantize",
    "cache_latents",
    "cache_text",
    "sample",
    "ignore",
]
"""How a progress bar moves the phase (``unnamed``: a bar without a description)."""
DataFrame = Literal["worker_start", "batch_fetch"]
"""A traceback frame of data loading: a DataLoader worker process starting (on Windows it
imports the training script again, which needs the host's commit charge), or a batch being
fetched inside the training loop."""
STOP_SIGNALS: Final = frozenset({"SIGTERM", "SIGINT", "SIGHUP"})
"""A job ended by one of these was stopped (by the user, the UI or a shutdown), not crashed."""

STEP_SIGNALS: Final[frozenset[Signal]] = frozenset({"oom_skip", "oom_abort", "loss_dict_followon"})
"""Signals only a training step produces."""
