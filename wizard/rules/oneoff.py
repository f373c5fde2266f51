"""An out-of-memory crash that is not the config's: the allocator's, once.

PyTorch's own message says when memory was lost to fragmentation ("If reserved but unallocated
memory is large try setting ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``"). Two figures
of the crash say the config did not outgrow the card:

- **fragmented**: the memory PyTorch held reserved but unallocated is large (at least
  :data:`FRAGMENTED_MIN_GIB`), and with what the card still had free it covered the allocation
  that failed: the room was there, in pieces;
- **one-off**: the run's only out-of-memory error (no skipped batch before it) came with most of
  the card free (at least :data:`MOSTLY_FREE_SHARE` of it).

Either way the answer is one retry of the same config with the allocator setting PyTorch names,
in the environment of the trainer only (``run --auto`` does it; ``diagnose`` and the app say
it), and a roll-back only when that crashes again. Rolling back first would give up quality for
a crash the config did not cause.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from oom_wizard.spelling import gib

if TYPE_CHECKING:
    from oom_wizard.logs.result import LogScan

ALLOC_CONF: Final = "PYTORCH_CUDA_ALLOC_CONF"
EXPANDABLE: Final = "expandable_segments:True"
ALLOCATOR_SETTING: Final = f"{ALLOC_CONF}={EXPANDABLE}"
"""The allocator setting PyTorch's message names against fragmentation."""
FRAGMENTED_MIN_GIB: Final = 1.0
"""Reserved-but-unallocated memory at least this large is fragmentation worth a retry (the
diagnosis' ``FRAGMENTATION_MIN_GIB`` advice threshold, the same figure)."""
MOSTLY_FREE_SHARE: Final = 0.5
"""A single out-of-memory error with at least this share of the card free is a one-off."""
RETRY_WORDS: Final = (
    f"'oom-wizard run --auto' retries such a crash once with {ALLOCATOR_SETTING} in the "
    "trainer's environment and the same config, and rolls back only if it crashes again"
)


def one_off_oom(scan: LogScan | None) -> str | None:
    """Why the crash in ``scan`` is the allocator's and not the config's, in words; None when
    its figures do not say so (module doc)."""
    if scan is None or not scan.crashed or scan.oom is None:
        return None
    oom = scan.oom
    wasted, free, tried = oom.reserved_unallocated, oom.free or 0.0, oom.tried
    if (
        wasted is not None
        and wasted >= FRAGMENTED_MIN_GIB
        and (tried is None or wasted + free >= tried)
    ):
        covered = (
            f", which with the {gib(free)} free covered the {gib(tried)} allocation that failed"
            if tried is not None
            else ""
        )
        return (
            f"PyTorch held {gib(wasted)} reserved but unallocated{covered}: the memory was "
            "fragmented, the room was there in pieces"
        )
    if (
        scan.skip_count == 0
        and oom.total
        and oom.free is not None
        and oom.free >= MOSTLY_FREE_SHARE * oom.total
    ):
        return (
            f"the run's only out-of-memory error came with {gib(oom.free)} of {gib(oom.total)} "
            "free: a one-off, not a config that outgrew the card"
        )
    return None


def with_expandable_segments(environ: Mapping[str, str]) -> dict[str, str] | None:
    """What the trainer's environment gains for the retry (the setting added to what
    ``PYTORCH_CUDA_ALLOC_CONF`` already holds); None when expandable segments are already on
    there, so a retry with them would be the same run again."""
    current = environ.get(ALLOC_CONF, "").strip()
    options = [part.strip() for part in current.split(",") if part.strip()]
    if any(part.replace(" ", "").lower() == EXPANDABLE.lower() for part in options):
        return None
    options = [part for part in options if not part.startswith("expandable_segments")]
    return {ALLOC_CONF: ",".join([*options, EXPANDABLE])}
