"""Field paths in AI Toolkit's own notation: ``config.process[0].datasets[1].resolution``.

A path is kept as a tuple of mapping keys (``str``) and list indexes (``int``) so that
the rest of the code never parses strings twice. ``MISSING`` stands for the value at a
path the config does not have.
"""

from __future__ import annotations

import re
from typing import Final, TypeAlias

from oom_wizard.errors import WizardError


class _Missing:
    """The type of ``MISSING``: a key that is not in the config."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Final = _Missing()


PathPart: TypeAlias = str | int
FieldPath: TypeAlias = tuple[PathPart, ...]

_TOKEN = re.compile(r"\[(\d+)\]|\.?([^.\[\]]+)")


def parse_path(text: str) -> FieldPath:
    """Parse ``config.process[0].train.batch_size`` into ``("config", "process", 0, ...)``.

    Raises:
        WizardError: the text is not a field path.
    """
    text = text.strip()
    parts: list[PathPart] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos or (pos == 0 and text.startswith(".")):
            raise WizardError(
                f"'{text}' is not a field path; write it like config.process[0].train.batch_size"
            )
        index, key = match.groups()
        parts.append(int(index) if index is not None else key)
        pos = match.end()
    if not parts or not isinstance(parts[0], str):
        raise WizardError(
            f"'{text}' is not a field path; write it like config.process[0].train.batch_size"
        )
    return tuple(parts)


def format_path(path: FieldPath) -> str:
    """The inverse of :func:`parse_path`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out
