"""A model split over the GPUs (``model.split_model_over_gpus``): the cards as AI Toolkit places
the transformer's blocks on them, or None where the model stays on one card (the split is off,
the toolkit refuses it, or one GPU is seen). Each phase is then its fullest card's
(:meth:`oom_wizard.rules.memory.account.ProcessAccount.cards`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from oom_wizard.formats.view import ProcessView
from oom_wizard.rules.memory.family import BILLION, FamilyFigures, Placed


@dataclass(frozen=True)
class SplitCard:
    """One GPU of a split model: its share of the transformer's parameters and the blocks it
    holds, with how many of each."""

    index: int
    share: float
    blocks: Placed


def split_cards(figures: FamilyFigures, ema: float, gpus: int) -> tuple[SplitCard, ...] | None:
    """The cards of ``model.split_model_over_gpus`` as AI Toolkit places the blocks
    (levers.yaml's ``split_model``), or None when the model stays on one card: the split
    is off, the toolkit refuses it, or one GPU (or none) is seen. ``ema``: the bytes of EMA's
    copy (a full fine-tune without it keeps only the latents beside cuda:0's blocks)."""
    model = figures.process.model
    if model.split_model_over_gpus is not True:
        return None
    facts = figures.presets.levers.split_model
    if model.is_flux is not True:
        arch = (model.arch or "").split(":", 1)[0]
        figures.notes.append(
            "model.split_model_over_gpus is on, but AI Toolkit accepts it only with "
            "model.is_flux: true (its check, config_modules.py:700, runs before model.arch "
            "flux sets is_flux at :790): the job stops while loading, so one card is "
            "counted."
            if arch in ("flux", "flex1")
            else f"model.split_model_over_gpus is on, but AI Toolkit splits only FLUX "
            f"(config_modules.py:700): with model.arch {arch or 'unset'} it stops while "
            "loading, so one card is counted."
        )
        return None
    sizes = facts.block_params
    if any(block.name not in sizes for block in figures.blocks):
        figures.notes.append(
            "model.split_model_over_gpus is on, but AI Toolkit splits only FLUX's "
            "transformer blocks: this model is counted on one card."
        )
        return None
    if gpus <= 1:
        figures.notes.append(
            "model.split_model_over_gpus is on, but one GPU is seen (or none was probed): "
            "AI Toolkit spreads the blocks over torch.cuda.device_count() cards, so with "
            "one every block stays on cuda:0 and one card is counted."
        )
        return None
    total = figures.p_t * BILLION
    scale = model.split_model_other_module_param_count_scale
    if scale is None:  # a ${...} placeholder: the toolkit's default
        scale = type(model).model_fields["split_model_other_module_param_count_scale"].default
    other = facts.other_module_params * scale
    per_card = (total + other) / gpus
    counts: list[dict[str, int]] = [{} for _ in range(gpus)]
    params = [0.0] * gpus
    index, current = 0, other
    for block in figures.blocks:
        size = sizes[block.name]
        for _ in range(block.count):
            counts[index][block.name] = counts[index].get(block.name, 0) + 1
            params[index] += size
            current += size
            if current > per_card:  # the block that passes the share stays
                index, current = min(index + 1, gpus - 1), 0.0
    params[0] += max(total - sum(params), 0.0)  # embedders and output layers: cuda:0
    cards = tuple(
        SplitCard(
            index=i,
            share=params[i] / total if total > 0 else 0.0,
            blocks=tuple(
                (block, counts[i][block.name])
                for block in figures.blocks
                if block.name in counts[i]
            ),
        )
        for i in range(gpus)
        if i == 0 or counts[i]
    )
    figures.notes.append(_split_words(figures.process, cards, ema))
    if figures.process.network is not None:
        figures.notes.append(
            "AI Toolkit keeps the adapter on cuda:0 (network.force_to(device_torch), "
            "BaseSDTrainProcess.py:1983) while the split moves the blocks, so an adapted "
            "layer on another card gets its input there and its adapter on cuda:0: such "
            "LoRA runs are reported to stop with a device error (AI Toolkit issue 1048)."
        )
    return cards


def _split_words(process: ProcessView, cards: Sequence[SplitCard], ema: float) -> str:
    with_first = "the adapter" if process.network is not None else "EMA's copy"
    if process.network is None and not ema:
        with_first = "the latents"

    def held(card: SplitCard) -> str:
        blocks = " + ".join(f"{count} {block.name}" for block, count in card.blocks)
        return f"cuda:{card.index} {blocks or 'no blocks'}"

    first, *rest = cards
    return (
        f"model.split_model_over_gpus over {len(cards)} GPUs (AI Toolkit's rule, "
        f"toolkit/models/flux.py): {held(first)} with the text encoder, the VAE, "
        f"{with_first} and the transformer's other layers"
        + "".join(f"; {held(card)}" for card in rest)
        + ". Each phase is its fullest card's."
    )
