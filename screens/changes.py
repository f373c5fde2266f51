"""What a change does, shown: a field's ``before → after`` line, the highlighted diff, or the
changes field by field where the config is one long line."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.content import Content
from textual.widgets import Static

from oom_wizard import spelling

if TYPE_CHECKING:
    from oom_wizard.storage.changelog import ChangeEntry
    from oom_wizard.storage.changes import Prepared


def change_line(entry: ChangeEntry) -> str:
    """``path: before → after`` (:func:`oom_wizard.spelling.change`)."""
    return spelling.change(entry.path, entry.before, entry.after)


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
        elif not line.startswith(" "):  # a heading (the fields of a one-line config)
            style = "$text-muted"
        else:
            style = ""
        lines.append(Content.styled(line, style) if style else Content(line))
    return Content("\n").join(lines)


class DiffView(Static):
    """What a change does: the highlighted unified diff, or field by field for long lines."""

    DEFAULT_CSS = """
    DiffView {
        height: auto;
        padding: 0 1;
        background: $boost;
    }
    """

    def show(self, ready: Prepared) -> None:
        """Render the changes of ``ready``."""
        self.update(diff_content(ready.shown_diff()))
