"""A training log without its config: the one rule for ``diagnose --log`` and for a followed
run (``watch``, ``run``) whose config is not at hand.

It is light on purpose: ``diagnose --log`` loads the log reader and the diagnosis, not the
config's models or the save pipeline (``tests/project/test_architecture.py`` holds it to that).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from oom_wizard.host.probe import probe_gpu
from oom_wizard.logs.scan import scan_log
from oom_wizard.rules.diagnosis import (
    Answers as Answers,  # the answers a caller passes
    diagnose,
)

if TYPE_CHECKING:
    from oom_wizard.rules.diagnosis import Diagnosis


def diagnose_log_alone(log: Path, answers: Answers | None = None, *, probe: bool) -> Diagnosis:
    """The log's diagnosis with no config to read (the model kind is then unknown).

    Args:
        log: The training log.
        answers: What the user says (``--moment``, ``--kind``, ``--worked-before``).
        probe: Ask ``nvidia-smi`` about the GPU now (a followed run's GPU is gone: False).

    Raises:
        WizardError: the log cannot be read.
    """

    found = None
    if probe:
        found = probe_gpu()
    return diagnose(scan_log(log), None, answers=answers, probe=found)
