"""Toggles that read the same without colour: a step's field boxes and a moment's choices."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Checkbox, RadioButton


class Tick(Checkbox):
    """A compact checkbox that reads the same without colour: ``[x]`` on, ``[ ]`` off.

    Textual's own box draws the same glyph either way and tells them apart by colour only,
    which a plain-text capture (or a colour-blind reader) cannot. The label says what the
    box does when it is on ("drop bucket 1024").
    """

    def __init__(self, label: str, value: bool, *, id: str | None = None) -> None:
        super().__init__(label, value, id=id, compact=True)

    @property
    def _button(self) -> Content:
        """``[x]`` or ``[ ]`` (replaces Textual's colour-only glyph)."""
        if self.value:
            return Content.styled("[x]", "bold $text-success")
        return Content.styled("[ ]", "$text-muted")


class Choice(RadioButton):
    """A compact radio button that reads the same without colour: ``(•)`` chosen, ``( )`` not."""

    def __init__(self, label: str, value: bool, *, id: str | None = None) -> None:
        super().__init__(label, value, id=id, compact=True)

    @property
    def _button(self) -> Content:
        """``(•)`` or ``( )`` (replaces Textual's colour-only glyph)."""
        if self.value:
            return Content.styled("(•)", "bold $text-success")
        return Content.styled("( )", "$text-muted")
