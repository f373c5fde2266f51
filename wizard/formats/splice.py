"""What the two surgical editors share: a text that every edit rewrites with one splice.

:class:`SplicedText` is the base of ``yamledit.YamlText`` and ``jsonedit.JsonText``. Each edit
(``set_value``) ends in :meth:`SplicedText._splice`, which returns the new text and remembers the
region it replaced. :meth:`SplicedText.splice_of` runs an edit only to learn that region, so that
several unrelated edits are made in one pass over the text and checked with one parse.
"""

from __future__ import annotations

from typing import Any

from oom_wizard.paths import FieldPath


class SplicedText:
    """A config's text and the region the last edit rewrote.

    Args:
        text: The text (no byte-order mark).
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self._spliced: tuple[int, int, str, str] | None = None
        self._regions_only = False

    def set_value(self, path: FieldPath, value: Any) -> str:
        """The text with the value at ``path`` set (each editor says how)."""
        raise NotImplementedError

    def splice_of(self, path: FieldPath, value: Any) -> tuple[int, int, str] | None:
        """The one region ``set_value(path, value)`` rewrites, as (start, end, new text).

        None when that edit is more than one splice of this text (then it must be made on
        its own). Lets several edits be made in one pass and checked with one parse.
        """
        self._spliced = None
        self._regions_only = True  # _splice records the region and skips building the text
        try:
            result = self.set_value(path, value)
        finally:
            self._regions_only = False
        spliced = self._spliced
        self._spliced = None
        if spliced is None or spliced[3] is not result:
            return None
        return spliced[0], spliced[1], spliced[2]

    def _splice(self, start: int, end: int, replacement: str) -> str:
        """The text with ``[start, end)`` replaced (or, in :meth:`splice_of`, a marker)."""
        if self._regions_only:
            marker = f"\x00{start}:{end}\x00"  # a fresh object: only this return is it
            self._spliced = (start, end, replacement, marker)
            return marker
        result = self.text[:start] + replacement + self.text[end:]
        self._spliced = (start, end, replacement, result)
        return result
