"""The memory model: what a training job holds on the GPU in each phase of its run, as a band
of GiB, and the one rule that calibrates it by the job's own figures.

This is the wing's front door: the layers that use the model (the plan, the sizing, the
solver, the host's budget, the application layer) import these names from here. Inside the
wing each module imports its neighbours directly. How the figures are made, and how to add an
arch, is [MEMORY.md](MEMORY.md).
"""

from oom_wizard.rules.memory.account import ProcessAccount
from oom_wizard.rules.memory.bands import BAND_RATE, Band, Verdict, verdict
from oom_wizard.rules.memory.calibration import (
    Calibration,
    calibration_from,
    calibration_from_attempts,
    calibration_from_json,
    calibration_from_record,
    phase_of,
)
from oom_wizard.rules.memory.family import BILLION, GIB_BYTES
from oom_wizard.rules.memory.job import JobMemory, job_memory, measured_phase, view_after
from oom_wizard.rules.memory.overheads import OVERHEADS, Overheads
from oom_wizard.rules.memory.parts import Parts
from oom_wizard.rules.memory.phases import (
    CRASH_PHASE,
    MOMENT_PHASE,
    PHASE_MOMENT,
    PHASE_WORDS,
    PHASES,
    MomentPhase,
    Phase,
)
from oom_wizard.rules.memory.readd import Prediction, predict_readd

__all__ = [
    "BAND_RATE",
    "BILLION",
    "CRASH_PHASE",
    "GIB_BYTES",
    "MOMENT_PHASE",
    "OVERHEADS",
    "PHASES",
    "PHASE_MOMENT",
    "PHASE_WORDS",
    "Band",
    "Calibration",
    "JobMemory",
    "MomentPhase",
    "Overheads",
    "Parts",
    "Phase",
    "Prediction",
    "ProcessAccount",
    "Verdict",
    "calibration_from",
    "calibration_from_attempts",
    "calibration_from_json",
    "calibration_from_record",
    "job_memory",
    "measured_phase",
    "phase_of",
    "predict_readd",
    "verdict",
    "view_after",
]
