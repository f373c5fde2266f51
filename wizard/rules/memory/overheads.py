"""What the card holds beside the tensors the account counts: the CUDA context (measured, a
constant), the libraries' workspaces (as they allocate them), the caching allocator's slack (a
share of what the activations and the layers in flight leave) and each batch item's own cost.

None is a constant earned by other trainers' extras; the slack and the item's cost are refitted
(``tests/support/measured_peaks.py``), and :class:`Overheads` carries them with the bands'
widths so that ``bench/memory_accuracy.py`` can refit them with one source left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from oom_wizard.rules.memory.bands import CLASS_BAND, Certainty

ITEM_GIB: Final = 1.30
"""Per batch item, what does not scale with the pixels: the latents, noise and targets, the
text embeddings and the fp32 loss of one item. Refitted on the published batch series (each
source's runs that differ only in the batch size: SimpleTuner's Krea 2 and Ideogram 4), where
a trainer's own extras cancel out; ``bench/memory_accuracy.py`` prints the refit and a test
keeps this at it."""


CUDA_CONTEXT_GIB: Final = (0.73, 0.76)
"""The CUDA context and libraries beside PyTorch's allocations, whatever the job (used −
reserved on every H200 row of ``../shared/gpu-measurements.md``): measured, not fitted."""
ALLOCATOR_SLACK: Final = 0.0
"""The caching allocator's reserve beyond the peak allocation, as a share of what the
activations, the VAE's pass and the layers in flight leave (reserved − peak allocated grows
with them, not with the resident weights). Refitted by least squares on the shared GPU rows
(``tests/fixtures/gpu_peaks.yaml``), the only points measured the way AI Toolkit trains."""
WORKSPACE_GIB: Final = 0.06
"""The libraries' workspaces, as they allocate them through PyTorch's allocator: cuBLAS's
(4 MiB × 8 on a Hopper card, about 8 MiB before) and cuBLASLt's (32 MiB on a Hopper card, 1-4
MiB before) for the one stream a trainer computes on; attention kernels' are far smaller.
Not a constant earned by other trainers' extras."""


@dataclass(frozen=True)
class Overheads:
    """What no CPU measures, beside the terms, and the bands' widths: the CUDA context (GiB),
    the allocator's slack (a share), the libraries' workspaces outside loading (GiB), each
    batch item's own cost in a training step (GiB; ``Terms.items``), and each certainty class's
    band around the figure.

    :data:`OVERHEADS` is what the model ships; ``bench/memory_accuracy.py`` refits them with
    each source of the fixtures left out (``tests/support/measured_peaks.py``) to judge the
    model on what it was not fitted to."""

    context_gib: float = sum(CUDA_CONTEXT_GIB) / 2.0
    slack: float = ALLOCATOR_SLACK
    workspace_gib: float = WORKSPACE_GIB
    item_gib: float = ITEM_GIB
    band: Mapping[Certainty, tuple[float, float]] = field(default_factory=lambda: CLASS_BAND)


OVERHEADS: Final = Overheads()
"""The overheads the model uses unless told otherwise."""
