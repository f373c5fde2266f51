"""What the tests of a class of log diagnose it against: one FLUX LoRA job, its log read as the
trainer wrote it (``tests/domain/rules/test_log_classes*.py``)."""

from __future__ import annotations

import copy
from typing import Any

from oom_wizard.formats.view import JobView, build_view
from oom_wizard.logs.scan import scan_text
from oom_wizard.rules.diagnosis import Diagnosis, diagnose

#: A FLUX.1 LoRA at 1024 px, batch 1, checkpointing on: a job the log's class, not its config,
#: decides the diagnosis of.
FLUX_LORA: dict[str, Any] = {
    "job": "extension",
    "config": {
        "name": "lora",
        "process": [
            {
                "type": "sd_trainer",
                "network": {"type": "lora", "linear": 16, "linear_alpha": 16},
                "datasets": [{"folder_path": "/data", "resolution": [1024]}],
                "train": {"batch_size": 1, "steps": 2000, "gradient_checkpointing": True},
                "model": {"name_or_path": "black-forest-labs/FLUX.1-dev", "is_flux": True},
            }
        ],
    },
}


def view() -> JobView:
    """:data:`FLUX_LORA` as AI Toolkit reads it."""
    return build_view(copy.deepcopy(FLUX_LORA), file="job.yaml", locate=lambda path: None)


def diagnosed(text: str) -> Diagnosis:
    """The diagnosis of a log ``text`` of :data:`FLUX_LORA`."""
    return diagnose(scan_text(text), view())
