"""Fields named on the command line: ``PATH=VALUE`` pairs and ``--unset PATH``.

A path must name a field the config already has, or a memory field AI Toolkit
knows (so that a typo such as ``train.batchsize`` is refused instead of being
added where the toolkit would silently ignore it). VALUE is read the way the
toolkit reads a YAML scalar or flow list.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import yaml

from oom_wizard.errors import ConfigError, EditError, WizardError
from oom_wizard.formats.change import Change
from oom_wizard.formats.document import MISSING, JobDocument
from oom_wizard.formats.view import (
    AdapterView,
    DatasetView,
    EmaView,
    ModelView,
    NetworkView,
    SampleItem,
    SampleView,
    TrainView,
)
from oom_wizard.formats.yamlload import ToolkitLoader, check_limits
from oom_wizard.paths import FieldPath, format_path, parse_path


def parse_assignment(text: str, document: JobDocument) -> Change:
    """``config.process[0].train.batch_size=1`` → a Change.

    Raises:
        EditError: no ``=``, an unknown path, or a VALUE that is not a scalar or flow list.
    """
    path_text, sep, value_text = text.partition("=")
    if not sep:
        raise _refused(document, f"'{text}' is not PATH=VALUE (for example train.batch_size=1)")
    path = check_path(path_text, document)
    try:
        value = parse_value(value_text, path)
    except EditError as exc:
        raise _refused(document, exc.message, path) from None
    return Change(path=path, after=value, reason="set by hand")


def parse_unset(text: str, document: JobDocument) -> Change:
    """``--unset PATH`` → a Change that removes the key."""
    path = check_path(text, document)
    if document.get(path) is MISSING:
        raise _refused(
            document, f"{format_path(path)} is not in the config, so there is nothing to unset"
        )
    return Change(path=path, after=MISSING, reason="removed by hand")


def parse_value(text: str, path: FieldPath) -> Any:
    """A YAML scalar or flow list, read with AI Toolkit's loader."""

    try:
        check_limits(text, format_path(path), what="this value")
    except ConfigError as exc:
        raise EditError(exc.message) from None
    try:
        value = yaml.load(text, Loader=ToolkitLoader)
    except yaml.YAMLError:
        raise EditError(
            f"{format_path(path)}: '{text}' is not a value; write true, 1, 0.0001, "
            '[512, 768] or "text"'
        ) from None
    if isinstance(value, dict) or (
        isinstance(value, list) and any(isinstance(item, (dict, list)) for item in value)
    ):
        raise EditError(f"{format_path(path)}: only a plain value or a flat list can be set")
    if text.strip() == "":
        raise EditError(f"{format_path(path)}: no value after '='")
    return value


def check_path(text: str, document: JobDocument) -> FieldPath:
    """The parsed path, if the config has it or it is a field AI Toolkit knows.

    Raises:
        EditError: the path names nothing the toolkit would read.
    """
    try:
        path = parse_path(text)
    except WizardError as exc:
        raise _refused(document, exc.message) from None
    if document.get(path) is not MISSING:
        return path
    processes = document.get(("config", "process"), [])
    if len(path) < 4 or path[:2] != ("config", "process") or not isinstance(path[2], int):
        raise _refused(
            document,
            f"{format_path(path)} is not in the config and is not a field oom-wizard knows; "
            "check the spelling (fields live under config.process[N])",
        )
    if not isinstance(processes, list) or path[2] >= len(processes):
        raise _refused(document, f"{format_path(path[:3])} does not exist")
    generic = generic_key(path[3:])
    if generic not in known_field_keys():
        raise _refused(
            document,
            f"{format_path(path)} is not in the config and '{generic}' is not a field "
            "oom-wizard knows; check the spelling",
        )
    return path


def _refused(document: JobDocument, message: str, path: FieldPath | None = None) -> EditError:
    """An EditError about ``document``, at the field's position when the field is there."""
    where = document.position(path) if path is not None else None
    line, column = where if where is not None else (None, None)
    return EditError(message, file=document.source, line=line, column=column)


@cache
def known_field_keys() -> frozenset[str]:
    """Every field of the typed view, as ``train.batch_size``, ``datasets[].resolution``..."""
    sections = (
        ("train", TrainView),
        ("model", ModelView),
        ("sample", SampleView),
        ("datasets[]", DatasetView),
        ("sample.samples[]", SampleItem),
        ("network", NetworkView),
        ("adapter", AdapterView),
        ("train.ema_config", EmaView),
    )
    mappings = {"train.ema_config"}
    keys = {
        f"{prefix}.{name}"
        for prefix, model in sections
        for name in model.model_fields
        if name not in model.DERIVED and f"{prefix}.{name}" not in mappings
    }
    keys.update({"network.linear_alpha", "sample.prompts"})
    return frozenset(keys)


def generic_key(tail: FieldPath) -> str:
    """``("datasets", 0, "resolution")`` → ``datasets[].resolution``."""
    out = ""
    for part in tail:
        out += "[]" if isinstance(part, int) else (f".{part}" if out else part)
    return out
