"""What a set of changes does to the peaks that crash, read off the one memory model.

Every figure here comes from :func:`oom_wizard.rules.memory.job_memory`, with the job's own
calibration (:class:`oom_wizard.rules.memory.Calibration`), for today's config and for the
changed one: the phases' bands in GiB, the weights held on the card (the parts that are not
activations or overhead), and the relative figures ``plan`` and the step screens give as a
second number (the changed config's activations against today's, per phase). Nothing is
estimated a second way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from oom_wizard.formats.change import Change
from oom_wizard.formats.document import JobDocument
from oom_wizard.rules.catalog import Presets
from oom_wizard.rules.memory import (
    MOMENT_PHASE,
    Calibration,
    JobMemory,
    MomentPhase,
    Phase,
    job_memory,
)

NOTE: Final = (
    "From the memory model (GiB bands per phase); the percentages are the changed config's "
    "activations against today's."
)

NOT_ESTIMATED_NOTE: Final = (
    "No GiB from the memory model for this job: a step is offered where the model says it "
    "lowers the peak the crash ran into, without a figure."
)

PEAK_WORDS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "load": "the loaded weights and the first sample",
        "training": "one training step",
        "sample": "the sample",
    }
)
"""How the plan names the peak a crash ran into (see :data:`MOMENT_PHASE`)."""

_PEAK_PHASES: Final[Mapping[MomentPhase, tuple[Phase, ...]]] = MappingProxyType(
    {
        "load": ("load", "baseline_sample", "sample"),
        "training": ("training",),
        "sample": ("sample",),
    }
)
"""The model's phases each crashed peak weighs: a loading crash is the load or the first
sample (and a lighter sample lowers the first sample too)."""

_EPSILON: Final = 1e-4
"""GiB: a band that moves less than this has not moved."""


def _lowered(before: JobMemory, after: JobMemory, moment: str) -> bool:
    """Whether ``after`` holds less than ``before`` at the peak a crash at ``moment`` ran
    into (see :meth:`MemoryEstimate.lowers`)."""
    peak = MOMENT_PHASE.get(moment)
    if peak is None:
        return False
    if after.cards > before.cards:
        return True
    for phase in _PEAK_PHASES[peak]:
        then, now = before.phases.get(phase), after.phases.get(phase)
        if then is None:
            continue
        if now is None or now.high < then.high - _EPSILON:
            return True
    return False


@dataclass(frozen=True)
class MemoryEstimate:
    """Today's memory and the changed config's, from the one model.

    Attributes:
        gib: Each phase's band in GiB (:class:`JobMemory`) before and after the changes.
    """

    gib: tuple[JobMemory, JobMemory]

    @property
    def not_estimated(self) -> str | None:
        """Why the job gets no GiB (None: it does); its bands then only give the direction
        of the changes (:meth:`lowers`)."""
        return self.gib[0].not_estimated

    @property
    def note(self) -> str:
        """How to read the figures."""
        return NOTE if self.not_estimated is None else NOT_ESTIMATED_NOTE

    @property
    def train_pct(self) -> float:
        """A training step's activations (or the VAE's pass, where it is the larger) with the
        changes, in percent of today's."""
        return self._percent("training") or 100.0

    @property
    def sample_pct(self) -> float | None:
        """A periodic sample's activations in percent of today's; 0 when the changes switch
        sampling off, None when today's config renders no periodic sample."""
        before, after = self.gib
        if before.phases.get("sample") is None:
            return None
        if after.phases.get("sample") is None:
            return 0.0
        return self._percent("sample")

    def _percent(self, phase: Phase) -> float | None:
        before, after = (memory.parts.get(phase) for memory in self.gib)
        if before is None or after is None:
            return None
        then, now = (p.activations + p.vae_pass for p in (before, after))
        return round(100.0 * now / then, 1) if then > 0 else None

    def gib_json(self) -> dict[str, object]:
        """``{"before": PHASES, "after": PHASES}`` as ``plan --json`` gives them."""
        before, after = self.gib
        return {"before": before.phases_json(), "after": after.phases_json()}

    def lowers(self, moment: str) -> bool:
        """Whether the changes lower the peak a crash at ``moment`` ran into: the training
        step for ``early_steps`` and ``intermittent``, the periodic sample for ``sampling``,
        the load or the first sample for ``loading``. A phase the changes take away is
        lowered; a model split over more cards lowers what each card holds."""
        return _lowered(*self.gib, moment)

    def lowers_beyond(self, other: MemoryEstimate, moment: str) -> bool:
        """Whether these changes hold less at the peak a crash at ``moment`` ran into than
        ``other``'s (changes to the same config): what one step adds beside the others."""
        return _lowered(other.gib[1], self.gib[1], moment)

    def weights_gib(self, moment: str) -> tuple[float | None, float | None]:
        """The weights held at the crashed peak (everything but activations and overhead),
        before and after, in GiB rounded to 0.1; None where the arch's counts are unknown."""
        phase: Phase = MOMENT_PHASE.get(moment, "training")
        before, after = self.gib
        if not before.known:
            return None, None
        held = [memory.parts.get(phase) for memory in (before, after)]
        if held[0] is None or held[1] is None:
            return None, None
        return round(held[0].weights, 1), round(held[1].weights, 1)


def estimate(
    document: JobDocument,
    changes: Sequence[Change],
    model_kind: str,
    *,
    presets: Presets | None = None,
    calibration: Calibration | None = None,
    gpus: int = 1,
) -> MemoryEstimate:
    """Today's memory and the memory with ``changes``, both with the job's calibration.

    Args:
        document: Today's config.
        changes: The changes to weigh (as :func:`oom_wizard.rules.plan.changes_for` makes them).
        model_kind: ``video`` counts frames; ``image`` counts one frame per sample.
        presets: The preset data (default: the shipped presets).
        calibration: What today's config's own run said (see
            :func:`oom_wizard.rules.memory.job_memory`).
        gpus: How many GPUs the probe sees (a model split over them is weighed per card).

    Raises:
        ConfigError: the changes give a value the toolkit would refuse (a batch of 0...).
    """
    before = job_memory(
        document, (), model_kind, presets=presets, calibration=calibration, gpus=gpus
    )
    after = job_memory(
        document,
        changes,
        model_kind,
        presets=presets,
        calibration=calibration,
        calibrated_on=document,
        gpus=gpus,
    )
    return MemoryEstimate(gib=(before, after))
