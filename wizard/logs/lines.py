"""One segment of a log as text: decoded, freed of ANSI codes, shortened for evidence."""

from __future__ import annotations

import re
from typing import Final

EVIDENCE_CHARS: Final = 400
"""Evidence text longer than this is shortened (an allocator message fits)."""

_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")


def clean(raw: bytes) -> str:
    """A segment as text: UTF-8 with bad bytes replaced, ANSI codes removed, trailing space cut."""
    text = raw.decode("utf-8", "replace")
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    return text.rstrip()


def shorten(text: str) -> str:
    """Evidence text: stripped, and cut to :data:`EVIDENCE_CHARS` with an ellipsis."""
    text = text.strip()
    return text if len(text) <= EVIDENCE_CHARS else text[: EVIDENCE_CHARS - 1] + "…"
