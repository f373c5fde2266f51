"""Issue 23's levers and terms, each on a config that uses it, weighed through the application
layer.

Every case starts from the demo FLUX job (``presets/demo/flux_portrait_lora.yaml``, the
project's own fixture) with checkpointing on and EMA off, changes what the lever needs, writes
the config to a folder, opens it with :func:`oom_wizard.application.settling.start` (no probe),
answers the
moment, and reads:

- a **rung** (:data:`RUNGS`): the plan's step, the one field the case is about (only that field
  switched on), its value before and after, the GiB of the phase it lowers today and with that
  field changed (:func:`oom_wizard.application.fitting.job_memory`), and where it is in AI
  Toolkit's UI;
- a **term** (:data:`TERMS`, a setting the estimate counts that no rung changes): the GiB of
  the phase with the setting and without it, and the setting's UI location.

A rung with ``gpus`` above one (the FLUX split) is opened as if ``nvidia-smi`` saw that many
idle 24 GiB cards: the job's probe is that one, and the plan and the GiB follow it.

``tests/domain/rules/test_levers.py`` checks each row; ``bench/levers_table.py`` prints them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from oom_wizard.application.choosing import answer
from oom_wizard.application.fitting import job_memory
from oom_wizard.application.settling import WizardState, start
from oom_wizard.host.probe import GpuInfo, ProbeResult
from oom_wizard.request import JobRequest
from oom_wizard.rules.catalog import load_presets
from oom_wizard.rules.diagnosis import Answers
from oom_wizard.rules.memory import Phase
from oom_wizard.rules.plan import StepChoice
from oom_wizard.spelling import before_after

DEMO = Path(__file__).resolve().parents[2] / "presets" / "demo" / "flux_portrait_lora.yaml"
P0 = "config.process[0]"

Change = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class Rung:
    """A lever the plan offers: the step, the field, the moment whose plan offers it."""

    name: str
    step: str
    field: str
    moment: str
    phase: Phase
    change: Change
    kind: str = "image"
    zero_because: str | None = None
    """Why the lever moves no GiB at its phase (the estimate's own reason), when it does not."""
    gpus: int = 1
    """How many cards the probe is taken to see."""


@dataclass(frozen=True)
class Term:
    """A setting the estimate counts, weighed with it and without it."""

    name: str
    field: str
    phase: Phase
    change: Change
    kind: str = "image"
    base: Change | None = None
    """The config weighed without the setting, when it is not the demo itself (an edit job)."""
    arch: str = "flux"
    """The arch whose UI location is given."""


@dataclass(frozen=True)
class Row:
    """One line of the table."""

    name: str
    field: str
    before: str
    after: str
    phase: Phase
    gib_before: float
    gib_after: float
    where: str | None

    @property
    def gib_change(self) -> float:
        return self.gib_after - self.gib_before


def _train(**values: Any) -> Change:
    return lambda p: p["train"].update(values)


def _edit_model(process: dict[str, Any]) -> None:
    process["model"] = {"name_or_path": "Qwen/Qwen-Image-Edit-2509", "arch": "qwen_image_edit_plus"}
    process["model"].update(quantize=True, qtype="qfloat8", low_vram=True)
    process["datasets"][0].update(
        resolution=[1024],
        control_path_1="/data/before",
        control_path_2="/data/reference",
        control_path_3="/data/style",
    )
    process["sample"]["guidance_scale"] = 1


def _validation(process: dict[str, Any]) -> None:
    process["train"]["disable_sampling"] = True
    process["train"]["validation_config"] = {
        "validation_items": [{"image_path": "/data/val/0.png", "prompt": "p0rtr41t, portrait"}],
        "resolution": 1024,
        "validate_every_n_steps": 50,
    }


def _full_fine_tune(process: dict[str, Any]) -> None:
    process.pop("network")
    process["train"].update(optimizer="adafactor", lr=1e-5)


def _split_full_fine_tune(process: dict[str, Any]) -> None:
    """A full fine-tune (a LoRA's split is kept out of the fixes: its adapter stays on cuda:0),
    with model.is_flux, which AI Toolkit's split needs beside model.arch."""
    _full_fine_tune(process)
    process["model"]["is_flux"] = True


def _locon(process: dict[str, Any]) -> None:
    process["network"].update(type="locon", conv=32, conv_alpha=32)


PRIOR_WITHOUT_GRADIENTS = "a prior prediction made without gradients before the step"

RUNGS: tuple[Rung, ...] = (
    Rung(
        "fewer control images",
        "control_images",
        "datasets[0].control_path_3",
        "early_steps",
        "training",
        _edit_model,
    ),
    Rung(
        "validation resolution",
        "sampling",
        "train.validation_config.resolution",
        "sampling",
        "sample",
        _validation,
    ),
    Rung(
        "validation sigmas",
        "sampling",
        "train.validation_config.validation_sigmas",
        "sampling",
        "sample",
        _validation,
    ),
    Rung(
        "eager attention",
        "attention",
        "train.attention_backend",
        "early_steps",
        "training",
        _train(attention_backend="_native_math"),
    ),
    Rung(
        "parameter swapping",
        "placement",
        "train.do_paramiter_swapping",
        "early_steps",
        "training",
        _full_fine_tune,
    ),
    Rung(
        "FLUX split over 2 GPUs",
        "placement",
        "model.split_model_over_gpus",
        "early_steps",
        "training",
        _split_full_fine_tune,
        gpus=2,
    ),
    Rung(
        "LoCon conv rank",
        "lora_rank",
        "network.conv",
        "early_steps",
        "training",
        _locon,
    ),
    *(
        Rung(
            flag.replace("_", " "),
            "extra_passes",
            f"train.{flag}",
            "early_steps",
            "training",
            _train(**{flag: True}),
            zero_because=zero_because,
        )
        for flag, zero_because in {
            "diff_output_preservation": None,
            "blank_prompt_preservation": None,
            "inverted_mask_prior": PRIOR_WITHOUT_GRADIENTS,
            "do_prior_divergence": PRIOR_WITHOUT_GRADIENTS,
        }.items()
    ),
    Rung(
        "EMA",
        "extra_passes",
        "train.ema_config.use_ema",
        "early_steps",
        "training",
        _train(ema_config={"use_ema": True, "ema_decay": 0.99}),
    ),
    Rung(
        "trained text encoder",
        "extra_passes",
        "train.train_text_encoder",
        "early_steps",
        "training",
        _train(train_text_encoder=True),
    ),
)


def _edit_at_512(process: dict[str, Any]) -> None:
    """The Qwen-Image-Edit-Plus job with its targets at 512 px (each control image is 1 MP)."""
    _edit_model(process)
    process["datasets"][0]["resolution"] = [512]


def _matched(process: dict[str, Any]) -> None:
    _edit_at_512(process)
    process["model"]["model_kwargs"] = {"match_target_res": True}


TERMS: tuple[Term, ...] = (
    Term(
        "text encoder on the CPU",
        "model.te_device",
        "load",
        lambda p: p["model"].update(te_device="cpu", quantize_te=False),
    ),
    Term(
        "VAE on the CPU",
        "model.vae_device",
        "load",  # a training step with cached latents has it in system RAM already
        lambda p: p["model"].update(vae_device="cpu"),
    ),
    Term(
        "4-bit text encoder",
        "model.text_encoder_bits",
        "load",
        lambda p: p["model"].update(text_encoder_bits=4, quantize_te=False),
    ),
    Term(
        "text encoder in float32",
        "model.te_dtype",
        "load",
        lambda p: p["model"].update(te_dtype="float32", quantize_te=False),
    ),
    Term(
        "VAE in float32",
        "model.vae_dtype",
        "load",
        lambda p: p["model"].update(vae_dtype="float32"),
    ),
    Term(
        "control images at target",
        "model.model_kwargs.match_target_res",
        "training",
        _matched,
        base=_edit_at_512,
        arch="qwen_image_edit_plus",
    ),
    Term(
        "LoKr factor 4",
        "network.lokr_factor",
        "training",
        lambda p: p["network"].update(type="lokr", lokr_factor=4),
    ),
)


def demo_tree(change: Change) -> dict[str, Any]:
    """The demo job (checkpointing on, EMA off) with ``change`` made to its process."""
    tree = yaml.safe_load(DEMO.read_text("utf-8"))
    process = tree["config"]["process"][0]
    process["train"]["gradient_checkpointing"] = True
    process["train"].pop("ema_config", None)
    change(process)
    return copy.deepcopy(tree)


def opened(
    tree: dict[str, Any], folder: Path, name: str, moment: str, kind: str, gpus: int = 1
) -> WizardState:
    """The config written to ``folder`` and opened through the application layer, its moment
    answered
    (with ``gpus`` idle 24 GiB cards as the probe's, above one)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name.replace(' ', '_')}.yaml"
    path.write_text(yaml.safe_dump(tree, sort_keys=False), encoding="utf-8")
    state = start(JobRequest(target=path, probe=False))
    if gpus > 1:
        cards = tuple(GpuInfo(i, "idle 24 GiB card", 24.0, 0.0, 24.0) for i in range(gpus))
        state = replace(state, job=replace(state.job, probe=ProbeResult(cards, ())))
    return answer(state, Answers(moment=moment, model_kind=kind))  # type: ignore[arg-type]


def _mid(state: WizardState, choices: dict[str, StepChoice], phase: Phase) -> float:
    _today, changed = job_memory(state, choices)
    band = changed.phases[phase]
    assert band is not None, phase
    return band.mid


def rung_row(rung: Rung, folder: Path) -> Row:
    """The rung's plan on its config: the field, before → after, the GiB and the UI location."""
    state = opened(demo_tree(rung.change), folder, rung.name, rung.moment, rung.kind, rung.gpus)
    step = state.plan.step(rung.step)
    assert step is not None, f"{rung.name}: the plan has no {rung.step} step"
    key = f"{P0}.{rung.field}"
    found = [f for f in step.fields if f.key == key]
    assert found, f"{rung.name}: {rung.step} proposes {[f.key for f in step.fields]}"
    (proposal,) = found
    only = StepChoice(
        step_id=step.id, enabled=True, fields={f.key: f.key == key for f in step.fields}
    )
    before, after = before_after(proposal.before, proposal.after)
    return Row(
        name=rung.name,
        field=rung.field,
        before=before,
        after=after,
        phase=rung.phase,
        gib_before=_mid(state, {}, rung.phase),
        gib_after=_mid(state, {step.id: only}, rung.phase),
        where=proposal.ui_hint,
    )


def term_row(term: Term, folder: Path) -> Row:
    """The term's GiB at its phase without the setting and with it, and its UI location."""
    base = term.base or (lambda p: None)
    without = opened(demo_tree(base), folder, f"{term.name} off", "early_steps", term.kind)
    with_it = opened(demo_tree(term.change), folder, term.name, "early_steps", term.kind)
    presets = load_presets()
    arch = presets.arch(term.arch)
    tree = demo_tree(term.change)
    value: Any = tree["config"]["process"][0]
    for part in term.field.split("."):
        value = value[part]
    return Row(
        name=term.name,
        field=term.field,
        before="(unset)",
        after=str(value).lower() if isinstance(value, bool) else str(value),
        phase=term.phase,
        gib_before=_mid(without, {}, term.phase),
        gib_after=_mid(with_it, {}, term.phase),
        where=presets.ui_hint(term.field, arch),
    )


def rows(folder: Path) -> list[Row]:
    """Every rung's row, then every term's."""
    return [rung_row(r, folder / "rungs") for r in RUNGS] + [
        term_row(t, folder / "terms") for t in TERMS
    ]
