"""What a change does, shown: a field's ``before → after`` line, the highlighted diff, or the
changes field by field where the config is one long line."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from textual.content import Content
from textual.widgets import Static

from oom_wizard import spelling

if TYPE_CHECKING:
    from oom_wizard.service import ChangeEntry, Prepared

#: A diff line longer than this is unreadable as a line (a config stored as one line of
#: JSON, as the web UI stores it): such a change is shown field by field instead.
LONG_DIFF_LINE = 160


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
        else:
            style = ""
        lines.append(Content.styled(line, style) if style else Content(line))
    return Content("\n").join(lines)


def field_changes_content(entries: Sequence[ChangeEntry]) -> Content:
    """The changes field by field, as a diff of ``path: value`` lines."""
    if not entries:
        return Content.styled("No field changes.", "$text-muted")
    lines = [Content.styled("The config is one long line; the fields that change:", "$text-muted")]
    for entry in entries:
        before, after = spelling.before_after(entry.before, entry.after)
        lines.append(Content.styled(f"- {entry.path}: {before}", "$text-error"))
        lines.append(Content.styled(f"+ {entry.path}: {after}", "$text-success"))
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
        diff = ready.diff()
        if any(len(line) > LONG_DIFF_LINE for line in diff.splitlines()):
            self.update(field_changes_content(ready.entries))
        else:
            self.update(diff_content(diff))
