"""The memory bar: a config's peak against the card, ``19.8 of 23.5 GiB (17.1–22.5)``, with its
phase and what the figure rests on.

The load screen shows today's config; every step screen shows the config with the choices up
to that step. The figures come from the application layer
(:func:`oom_wizard.application.choosing.memory_peak`); the
bar reads without colour: its fill, the figures and the verdict are text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from textual.content import Content
from textual.widgets import Static

from oom_wizard import spelling

if TYPE_CHECKING:
    from oom_wizard.rules.sizing import MemoryPeak

#: Cells of the bar between its ends.
BAR_WIDTH: Final = 16

#: The colour of each verdict (its words: :data:`oom_wizard.spelling.VERDICT_WORDS`).
VERDICT_STYLES: Final = {
    "fits": "$text-success",
    "tight": "$text-warning",
    "wont_fit": "$text-error",
}


def bar_content(peak: MemoryPeak | None) -> Content:
    """``Memory ▕█████████████░░░▏ 19.8 of 23.5 GiB (17.1–22.5), fits``, then the phase and what
    the figure rests on (how its figures were checked, what calibrated it, where the card's
    size comes from).

    Without a card the bar is left out and the peak is shown alone; without figures, or for a
    job the model does not cover, a line that says so.
    """
    if peak is None:
        return Content.styled("Memory: no estimate for this job.", "$text-muted")
    if peak.not_estimated is not None:
        return Content.styled(f"Memory: {peak.not_estimated}.", "$text-muted")
    parts: list[Content | str] = [Content.styled("Memory ", "bold")]
    verdict = peak.verdict
    if peak.card_gib and verdict is not None:
        words, style = spelling.verdict(verdict), VERDICT_STYLES[verdict]
        filled = min(BAR_WIDTH, round(BAR_WIDTH * peak.gib / peak.card_gib))
        parts += [
            "▕",
            Content.styled("█" * filled, style),
            Content.styled("░" * (BAR_WIDTH - filled), "$text-muted"),
            "▏ ",
            Content.styled(peak.words(), "bold"),
            ", ",
            Content.styled(words, style),
        ]
    else:
        parts += [Content.styled(f"peak {peak.words()}", "bold"), ", card size unknown"]
    detail = [f"in {peak.phase_words}"]
    if peak.basis:
        detail.append(peak.basis)
    if peak.card_source:
        detail.append(f"card from {peak.card_source}")
    return Content.assemble(*parts, Content.styled("\n" + " · ".join(detail), "$text-muted"))


class MemoryBar(Static):
    """The peak against the card (see :func:`bar_content`)."""

    DEFAULT_CSS = """
    MemoryBar {
        height: auto;
    }
    """

    def show(self, peak: MemoryPeak | None) -> None:
        """Show ``peak``."""
        self.update(bar_content(peak))
