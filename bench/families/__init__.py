"""The memory families: how bench/calibrate_memory.py counts and measures each model AI Toolkit
trains (its class, configuration, inputs and adapted modules), one module per family group;
FAMILIES lists them in the order they are measured."""

from __future__ import annotations

from dataclasses import replace

from . import (
    anima,
    auraflow_cogview,
    counted,
    fibo,
    flux,
    hidream_lumina,
    ideogram_zimage,
    iris,
    ltx_minimax,
    pixart,
    prx_hidream_o1,
    qwen,
    sd3,
    unet,
    wan,
)
from .adapters import TOOLKIT_ADAPTERS
from .base import Family

_FAMILIES: tuple[Family, ...] = (
    *flux.FAMILIES,
    *qwen.FAMILIES,
    *wan.FAMILIES,
    *ltx_minimax.FAMILIES,
    *ideogram_zimage.FAMILIES,
    *sd3.FAMILIES,
    *hidream_lumina.FAMILIES,
    *unet.FAMILIES,
    *pixart.FAMILIES,
    *auraflow_cogview.FAMILIES,
    *prx_hidream_o1.FAMILIES,
    *anima.FAMILIES,
    *iris.FAMILIES,
    *fibo.FAMILIES,
    *counted.FAMILIES,
)

FAMILIES: tuple[Family, ...] = tuple(
    replace(family, **TOOLKIT_ADAPTERS.get(family.id, {})) for family in _FAMILIES
)
