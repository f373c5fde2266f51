"""Small widgets shared by the stage screens: a highlighted diff, the step ladder, values."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.content import Content
from textual.widgets import Static

from wizard.document import MISSING

if TYPE_CHECKING:
    from wizard.plan import StepProposal


def show_value(value: Any) -> str:
    """A config value as the user reads it (``(absent)`` for a missing key)."""
    if value is MISSING:
        return "(absent)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(show_value(item) for item in value) + "]"
    if value is None:
        return "null"
    return str(value)


def diff_content(diff: str) -> Content:
    """A unified diff with added lines, removed lines and hunk headers highlighted."""
    if not diff.strip():
        return Content.styled("No line changes.", "$text-muted")
    lines: list[Content] = []
    for line in diff.splitlines():
        if line.startswith(("+++", "---")):
            style = "$text-muted"
        elif line.startswith("+"):
            style = "$text-success"
        elif line.startswith("-"):
            style = "$text-error"
        elif line.startswith("@@"):
            style = "$text-accent"
        else:
            style = ""
        lines.append(Content.styled(line, style) if style else Content(line))
    return Content("\n").join(lines)


class DiffView(Static):
    """The lines a change makes, as a highlighted unified diff."""

    DEFAULT_CSS = """
    DiffView {
        height: auto;
        padding: 0 1;
        background: $boost;
    }
    """

    def show(self, diff: str) -> None:
        """Render ``diff``."""
        self.update(diff_content(diff))


def ladder_content(steps: tuple[StepProposal, ...], current: str | None) -> Content:
    """The roll-back steps on one line: done, current, to come."""
    parts: list[Content] = []
    for step in steps:
        if step.satisfied:
            parts.append(Content.styled(f"✓ {step.title}", "$text-success"))
        elif step.id == current:
            parts.append(Content.styled(f"▶ {step.title}", "bold $text-accent"))
        else:
            parts.append(Content.styled(f"· {step.title}", "$text-muted"))
    return Content("  ").join(parts)
