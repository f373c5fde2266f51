"""Whether a re-add is predicted to fit the card, from the job's memory with it, and the
sentence that says so."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from oom_wizard.formats.change import Change
from oom_wizard.formats.document import JobDocument
from oom_wizard.rules.catalog import Presets
from oom_wizard.rules.memory.bands import Verdict, verdict
from oom_wizard.rules.memory.calibration import Calibration
from oom_wizard.rules.memory.job import JobMemory, job_memory
from oom_wizard.rules.memory.phases import PHASE_WORDS


@dataclass(frozen=True)
class Prediction:
    """Whether a re-add is predicted to fit, and the sentence that says so.

    Attributes:
        verdict: Of the peak phase with the re-add.
        memory: The config's memory with the re-add.
        card_gib: The card measured against.
        words: One sentence for the user (the re-add stays allowed whatever it says).
    """

    verdict: Verdict
    memory: JobMemory
    card_gib: float
    words: str


def predict_readd(
    document: JobDocument,
    changes: Sequence[Change],
    model_kind: str,
    *,
    card_gib: float | None,
    calibration: Calibration | None,
    calibrated_on: JobDocument | None = None,
    presets: Presets | None = None,
    gpus: int = 1,
) -> Prediction | None:
    """Whether ``changes`` (a re-add) are predicted to fit, from the known headroom.

    The card is ``card_gib`` (the probe), else the calibration's. None when neither is known,
    or when the job is not estimated (no GiB to predict with). ``gpus``: how many GPUs the
    probe sees (a split model is weighed per card).
    """
    card = card_gib if card_gib is not None else (calibration.card_gib if calibration else None)
    if card is None:
        return None
    after = job_memory(
        document,
        changes,
        model_kind,
        presets=presets,
        calibration=calibration,
        calibrated_on=calibrated_on,
        gpus=gpus,
    )
    if after.not_estimated is not None:
        return None
    return readd_prediction(after, card, calibration)


def readd_prediction(after: JobMemory, card: float, calibration: Calibration | None) -> Prediction:
    """The prediction of a re-add whose config weighs ``after``, on a ``card`` GiB card."""
    peak = after.peak()
    found = verdict(peak, card)
    where = (
        f"the {PHASE_WORDS[after.peak_phase]} peaks at {peak.low:.1f}–{peak.high:.1f} of "
        f"{card:.1f} GiB"
    )
    basis = f" (calibrated by {calibration.source})" if calibration is not None else ""
    if found == "fits":
        words = f"Predicted to fit: {where}{basis}."
    elif found == "tight":
        words = (
            f"Predicted tight: {where}{basis}; it may run out of memory again. You can still "
            "re-add it."
        )
    else:
        words = (
            f"Predicted not to fit: {where}{basis}. You can still re-add it; a new crash's "
            "figures will calibrate the estimate."
        )
    return Prediction(found, after, card, words)
