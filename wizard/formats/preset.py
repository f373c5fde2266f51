"""A preset file read as the wizard reads every one: YAML, no duplicate keys, a schema.

``presets/`` is data about AI Toolkit, validated on every load by a frozen pydantic model
(:mod:`oom_wizard.rules.catalog` for the ladders, archs and memory figures,
:mod:`oom_wizard.logs.scan` for the log markers). A bad file fails with one
:class:`~oom_wizard.errors.PresetError` at the YAML node the first problem is about: its file,
line and column.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from oom_wizard.errors import PresetError

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

_M = TypeVar("_M", bound=BaseModel)

#: libyaml's safe loader where PyYAML was built with it, else PyYAML's own (the same data).
_Loader: Final = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_preset(file: Traversable, schema: type[_M], context: dict[str, Any] | None = None) -> _M:
    """Read one preset file and validate it against ``schema`` (with pydantic's validation
    ``context``), or raise a :class:`~oom_wizard.errors.PresetError` at its line and column."""
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise PresetError(
            f"cannot read preset file: {exc.strerror or exc}", file=str(file)
        ) from exc
    try:
        root, data = _compose_and_construct(text)
        _reject_duplicate_keys(root, file)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        raise PresetError(
            f"not valid YAML: {exc.problem}",
            file=str(file),
            line=mark.line + 1 if mark else None,
            column=mark.column + 1 if mark else None,
        ) from exc
    try:
        return schema.model_validate(data, context=context)
    except ValidationError as exc:
        raise _located(exc, root, file) from exc


def _compose_and_construct(text: str) -> tuple[yaml.Node | None, Any]:
    """Parse YAML once: the node tree (for line and column of errors) and the plain data."""
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
        return root, None if root is None else loader.construct_document(root)
    finally:
        loader.dispose()


def _reject_duplicate_keys(node: yaml.Node | None, file: Traversable) -> None:
    """PyYAML keeps the last of two equal keys silently; in a preset that is always a mistake."""
    for mapping in _mappings(node, set()):
        seen: set[str] = set()
        for key, _ in mapping.value:
            if key.value in seen:
                raise PresetError(
                    f"key '{key.value}' appears twice in this mapping",
                    file=str(file),
                    line=key.start_mark.line + 1,
                    column=key.start_mark.column + 1,
                )
            seen.add(key.value)


def _mappings(node: yaml.Node | None, visited: set[int]) -> Iterator[yaml.MappingNode]:
    """Every mapping node under ``node``, each once (aliases share nodes)."""
    if node is None or id(node) in visited:
        return
    visited.add(id(node))
    if isinstance(node, yaml.MappingNode):
        yield node
        for key, value in node.value:
            yield from _mappings(key, visited)
            yield from _mappings(value, visited)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            yield from _mappings(item, visited)


def _located(exc: ValidationError, root: yaml.Node | None, file: Traversable) -> PresetError:
    """Turn the first pydantic error into a PresetError at the YAML node it is about."""
    # A misspelt key shows up twice, as an extra key and as a missing one: report the first.
    error = min(exc.errors(), key=lambda e: e["type"] == "missing")
    node, where = _node_at(root, error["loc"])
    if error["type"] == "extra_forbidden" and node is not None:
        node = _key_node(root, node)
    message = f"{where or '(top level)'}: {error['msg'].removeprefix('Value error, ')}"
    if error["type"] not in ("missing", "extra_forbidden") and _short(error["input"]):
        message += f" (got {error['input']!r})"
    if exc.error_count() > 1:
        message += f" (and {exc.error_count() - 1} more problems)"
    mark = node.start_mark if node is not None else None
    return PresetError(
        message,
        file=str(file),
        line=mark.line + 1 if mark else None,
        column=mark.column + 1 if mark else None,
    )


def _short(value: Any) -> bool:
    """Whether a bad input is small enough to quote in a one-line message."""
    return isinstance(value, str | int | float | bool) and len(repr(value)) <= 40


def _node_at(root: yaml.Node | None, loc: tuple[int | str, ...]) -> tuple[yaml.Node | None, str]:
    """Follow a pydantic error location through the composed YAML as far as it goes.

    Returns the deepest node reached and its path in the file (``archs[3] (wan21).frames``).
    Parts that are not in the YAML (pydantic's union tags) end the walk; ``[key]`` selects
    the key node of a mapping entry rather than its value.
    """
    node, where = root, ""
    for part in loc:
        if part == "[key]" and node is not None:
            node = _key_node(root, node)
            break
        if isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            where += f"[{part}]" + _id_suffix(node)
        elif isinstance(node, yaml.MappingNode) and isinstance(part, str):
            entry = next(((k, v) for k, v in node.value if k.value == part), None)
            if entry is None:
                where += f".{part}" if where else part
                break
            node = entry[1]
            where += f".{part}" if where else part
        else:
            break
    return node, where


def _id_suffix(node: yaml.Node) -> str:
    """`` (id)`` for a list item that has an ``id`` key, so the message names the arch."""
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if key.value == "id" and isinstance(value, yaml.ScalarNode):
                return f" ({value.value})"
    return ""


def _key_node(root: yaml.Node | None, value: yaml.Node) -> yaml.Node:
    """The key node whose value is ``value`` (for errors about a mapping key itself)."""
    for mapping in _mappings(root, set()):
        for key, item in mapping.value:
            if item is value:
                found: yaml.Node = key
                return found
    return value
