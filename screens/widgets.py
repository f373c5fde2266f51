"""Small widgets shared by the stage screens: the key bar, a plain input, a list that reads
without colour, and the step ladder.

The load screen, the first one painted, needs only these; the toggles (:mod:`.toggles`) and
the change views (:mod:`.changes`) live beside them, imported by the screens that show them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from rich.segment import Segment
from textual.app import ComposeResult
from textual.content import Content
from textual.markup import escape
from textual.screen import Screen
from textual.strip import Strip
from textual.validation import ValidationResult
from textual.widgets import Footer, Input, OptionList

if TYPE_CHECKING:
    from oom_wizard.rules.plan import StepProposal

#: What a :class:`KeyBar` shows of one binding: its key, action, words, group, whether it is
#: enabled, and its tooltip.
_KeyShown = tuple[str, str, str, str | None, bool, str]


class KeyBar(Footer):
    """Textual's footer, rebuilt only when the keys it shows change.

    The footer rebuilds all its keys whenever the screen's bindings are refreshed: on every
    focus change, and on every move inside a list, whose hidden cursor keys come and go.
    Each rebuild restyles every key, which made the footer the costliest widget of the app.
    The keys it shows change rarely (a step, a save), so this bar compares what it would
    show with what it shows, or is about to show, and is rebuilt only when they differ.
    """

    _showing: tuple[_KeyShown, ...] | None = None

    def compose(self) -> ComposeResult:
        # Until the screen's bindings are ready, the footer composes no keys at all.
        self._showing = self._shows() if self._bindings_ready else None
        yield from super().compose()

    def bindings_changed(self, screen: Screen[object]) -> None:
        here = self.is_attached and screen is self.screen
        if here and self._showing is not None and self._shows() == self._showing:
            return
        super().bindings_changed(screen)
        if here and screen.app.app_focus:
            self._showing = self._shows()  # the rebuild the footer has just asked for

    def _shows(self) -> tuple[_KeyShown, ...]:
        """What the bar shows of the screen's bindings: the shown ones and the palette's."""
        palette = self.app.COMMAND_PALETTE_BINDING
        return tuple(
            (
                binding.key,
                binding.action,
                binding.description,
                binding.group.description if binding.group else None,
                enabled,
                tooltip,
            )
            for key, (_node, binding, enabled, tooltip) in self.screen.active_bindings.items()
            if binding.show or key == palette
        )


class PlainInput(Input):
    """An input that Textual does not validate: what is typed in the wizard is checked by the
    application layer (a refusal shows on its row), never by Textual's validators.

    Without validators Textual still runs its validation on every change of the value, the
    first one included, and sets the ``-valid`` class each time: two restyles of the input
    per key typed, and two before it is even on screen. This input has nothing to validate
    and skips that.
    """

    def validate(self, value: str) -> ValidationResult | None:
        return None


#: What marks the highlighted row of a :class:`MarkedOptionList`, and the width it takes.
MARKER = "▶ "
MARKER_WIDTH = len(MARKER)


class MarkedOptionList(OptionList):
    """An option list whose highlighted row reads without colour: ``▶`` marks it.

    Textual shows the highlight as a background only, which a plain-text capture (or a
    colour-blind reader) cannot see. The marker takes a gutter left of every row, as
    Textual's own ``SelectionList`` does for its boxes.
    """

    def _get_left_gutter_width(self) -> int:
        return MARKER_WIDTH

    def render_line(self, y: int) -> Strip:
        """The row as Textual renders it, after the marker (or the blank gutter)."""
        line = super().render_line(y)
        try:
            index, line_in_option = self._lines[self.scroll_offset.y + y]
        except IndexError:
            return line
        marked = index == self.highlighted and line_in_option == 0
        style = next(iter(line)).style if line.cell_length else None
        gutter = Segment(MARKER if marked else " " * MARKER_WIDTH, style)
        return Strip([gutter, *line], line.cell_length + MARKER_WIDTH)


#: How the progress line marks each step (and the help's legend): no colour needed.
LADDER_MARKS: Final[dict[str, tuple[str, str, str]]] = {
    "current": ("▶", "bold $text-accent", "this step"),
    "accepted": ("+", "$text-success", "accepted"),
    "skipped": ("−", "$text-warning", "skipped"),
    "done": ("✓", "$text-success", "already done in the config (it can still be opened)"),
    "unavailable": ("×", "$text-muted", "not for this model"),
    "later": ("…", "$text-muted", "for a later retry"),
    "ahead": ("·", "$text-muted", "still ahead"),
}


def ladder_content(
    steps: tuple[StepProposal, ...], current: str | None, status: Mapping[str, str]
) -> Content:
    """The roll-back steps on one line, each marked by where it stands (``LADDER_MARKS``);
    a click on one opens it (``app.open_step``), done or not."""
    parts: list[Content] = []
    for step in steps:
        kind = "current" if step.id == current else status.get(step.id, "ahead")
        mark, style, _ = LADDER_MARKS[kind]
        action = f"@click=app.open_step({step.id!r})"
        parts.append(Content.from_markup(f"[{style} {action}]{escape(f'{mark} {step.title}')}[/]"))
    return Content("  ").join(parts)


def ladder_legend() -> str:
    """The marks of the progress line, in words (for the help)."""
    return " · ".join(f"{mark} {words}" for mark, _, words in LADDER_MARKS.values())
