"""Whether a run that ended cleanly trained anything: its saved adapter and its loss.

A fix that fits and trains nothing passes a check of steps alone (ai-toolkit#1057: with 100 %
layer offloading and INT8, "training appears to run normally, but the resulting LoRA has zero
effect"). So after each clean run ``run`` reads the adapter the run saved
(:func:`~oom_wizard.storage.adapter.check_adapter`) and the loss its bar reported
(:func:`~oom_wizard.logs.loss.loss_trace`). The adapter decides where it can be read; the loss
decides only where it cannot (no file of this run, a LoKr without an earlier checkpoint).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from oom_wizard.logs.loss import loss_trace
from oom_wizard.storage.adapter import adapter_kind, check_adapter

if TYPE_CHECKING:
    from pathlib import Path

    from oom_wizard.formats.document import JobDocument


@dataclass(frozen=True)
class Learned:
    """What a clean run shows of its training.

    Attributes:
        nothing: The run trained nothing: its adapter did not move from its start (or, where
            the adapter cannot be read, its loss sat on one value).
        words: What was read, in a sentence (``history`` keeps it).
        noun: ``the LoRA``, ``the lokr adapter``, ``the model``.
    """

    nothing: bool
    words: str
    noun: str

    def verdict(self) -> str:
        """``the LoRA did not change: this config trains nothing`` and what was read."""
        return f"{self.noun} did not change: this config trains nothing ({self.words})"


def learned(document: JobDocument, log: Path, since: float) -> Learned:
    """What the run that wrote ``log`` (started at ``since``, seconds since the epoch) shows."""
    kind = adapter_kind(document)
    noun = {"lora": "the LoRA", "locon": "the LoRA", "full": "the model"}.get(
        kind, f"the {kind} adapter"
    )
    adapter = check_adapter(document, since)
    loss = loss_trace(log)
    words = f"{adapter.words}; {loss.words()}"
    if adapter.moved is not None:
        return Learned(not adapter.moved, words, noun)
    return Learned(loss.moved is False, words, noun)
