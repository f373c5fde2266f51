"""AI Toolkit's newer options that change memory, each read with its source, its effect and its
lever (AI Toolkit 27a03a91).

- ``model.compile`` (and ``block_compile``, ``compile_mode``…): torch.compile. Unless the
  transformer is layer-offloaded, AI Toolkit moves it to the card before compiling, undoing
  ``low_vram``'s parking (``BaseSDTrainProcess.py:2272-2470``, the move at 2285-2286), and
  compiling needs memory of its own on the first forward (Fizgig measured +3.9 GB for an INT8
  Krea 2). Not in the estimate; the lever is ``model.compile: false`` (no quality cost, the
  steps run slower).
- ``train.diffusion_feature_extractor_path``: a feature-extractor loss. ``v3``-``v5`` decode the
  predicted latents through a VAE every step, with gradients, and run a SigLIP2 so400m vision
  encoder (about 0.4 B parameters, bf16) and LPIPS' VGG (fp32) on the decoded images; ``v6`` a
  DINOv3 ViT-H+, ``v7``-``v10`` a TIPSv2 model; ``v1``/``v2`` and files are small latent-space
  networks (``toolkit/models/diffusion_feature_extraction.py``: the classes, ``load_dfe``;
  ``SDTrainer.py:392-410`` puts the extractor on the card, ``660-727`` runs it). Not in the
  estimate; the lever is to remove it (a quality cost: it is a loss term) or to take a lighter
  version (``v2`` works on latents, with no decode).
- ``datasets[].control_from_same_folder`` / ``num_controls_from_same_folder`` (default 1): each
  item draws that many other images of its own folder as control images
  (``toolkit/dataloader_mixins.py:1124-1141``, ``config_modules.py:963-964``); they count in
  the estimate as control images do. The lever is fewer of them.
- The web UI's ``sample_now`` (its Job table's column, ``ui/prisma/schema.prisma:43``): the UI's
  trainer samples at its next step when it is set and clears it
  (``DiffusionTrainer.py:207-230``), but only a trainer the UI started (``AITK_JOB_ID`` and the
  database: ``is_ui_trainer``, ``DiffusionTrainer.py:20-31``). ``run --db`` starts the trainer
  itself, so AI Toolkit does not read it there; it is a lever for a job the UI runs. The
  short validation run tests a sample without it, file and web-UI jobs alike: its step count
  goes one past the first ``sample_every`` (:func:`~oom_wizard.rules.plan.validation_run_steps`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from oom_wizard.spelling import counted

if TYPE_CHECKING:
    from oom_wizard.formats.document import JobDocument

HEAVY_EXTRACTORS: Final = {
    "v3": "a SigLIP2 so400m vision encoder and LPIPS' VGG, with a VAE decode of every step",
    "v4": "a SigLIP2 so400m vision encoder and LPIPS' VGG, with a VAE decode of every step",
    "v5": "a SigLIP2 so400m vision encoder and LPIPS' VGG, with a VAE decode of every step",
    "v6": "a DINOv3 ViT-H+ vision model, with a VAE decode of every step",
    "v7": "a TIPSv2 DPT model, with a VAE decode of every step",
    "v8": "a TIPSv2 DPT model, with a VAE decode of every step",
    "v9": "a vision model, with a VAE decode of every step",
    "v10": "a vision model, with a VAE decode of every step",
}
"""What each named feature extractor puts on the card (the classes of
``diffusion_feature_extraction.py``)."""


@dataclass(frozen=True)
class OptionFinding:
    """One option of the config that changes memory.

    Attributes:
        path: The field, in AI Toolkit's notation.
        value: Its value, as written.
        source: Where AI Toolkit reads and uses it.
        effect: What it does to memory.
        lever: What lowers it, and at what cost.
        counted: Whether the estimate counts it.
    """

    path: str
    value: object
    source: str
    effect: str
    lever: str
    counted: bool

    def words(self) -> str:
        counted = "counted in the estimate" if self.counted else "not in the estimate"
        return f"{self.path}: {self.value}: {self.effect} ({counted}); {self.lever} [{self.source}]"

    def to_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "value": self.value,
            "source": self.source,
            "effect": self.effect,
            "lever": self.lever,
            "counted": self.counted,
        }


def option_findings(document: JobDocument) -> tuple[OptionFinding, ...]:
    """The options of ``document`` that change memory and that the estimate reads or names."""
    found: list[OptionFinding] = []
    for process in document.view().processes:
        at = f"config.process[{process.index}]"
        model, train = process.model, process.train
        if model.compile is True:
            offloaded = model.layer_offloading is True
            found.append(
                OptionFinding(
                    f"{at}.model.compile",
                    True,
                    "BaseSDTrainProcess.py:2272-2470",
                    "torch.compile needs memory of its own on the first forward (+3.9 GB "
                    "measured for an INT8 Krea 2)"
                    + (
                        ""
                        if offloaded
                        else ", and the transformer is moved to the card before compiling, "
                        "undoing low_vram's parking"
                    ),
                    "model.compile: false costs no quality (the steps are slower)",
                    False,
                )
            )
        extractor = train.diffusion_feature_extractor_path
        if extractor:
            heavy = HEAVY_EXTRACTORS.get(extractor.strip().lower())
            found.append(
                OptionFinding(
                    f"{at}.train.diffusion_feature_extractor_path",
                    extractor,
                    "SDTrainer.py:392-410, 660-727; diffusion_feature_extraction.py load_dfe",
                    f"the feature-extractor loss puts {heavy} on the card"
                    if heavy
                    else "a small latent-space network on the card, run every step",
                    "remove it (a quality cost: it is a loss term)"
                    + (
                        ", or a lighter version: v2 works on latents, with no decode"
                        if heavy
                        else ""
                    ),
                    False,
                )
            )
        for dataset in process.datasets:
            if dataset.control_from_same_folder:
                count = dataset.num_controls_from_same_folder or 1
                found.append(
                    OptionFinding(
                        f"{at}.datasets[{dataset.index}].control_from_same_folder",
                        True,
                        "dataloader_mixins.py:1124-1141; config_modules.py:963-964",
                        f"each item brings {counted(count, 'other image')} of its "
                        "folder as control images, whose tokens join the training step",
                        "fewer of them (num_controls_from_same_folder), or "
                        "full_size_control_images: false (512 × 512 each)",
                        True,
                    )
                )
    return tuple(found)
