"""Surgical edits of JSON text (``.json``, ``.jsonc``, and the UI database's column).

``json.loads`` gives the tree; this module gives the *spans*: a small parser that
records where every value, key and member starts and ends, so that an edit
replaces only the characters of one value, inserts one member in the layout of its
siblings (one per line when the object is pretty-printed, inline when it is
compact, as AI Toolkit's UI stores it), or removes one member with its comma.
``//`` and ``/* */`` comments (``.jsonc``) are skipped like white space and kept.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from oom_wizard.errors import EditError
from oom_wizard.formats.splice import SplicedText
from oom_wizard.formats.yamlload import duplicate_note
from oom_wizard.paths import FieldPath, format_path


@dataclass
class Span:
    """One JSON value: ``text[start:end]``; members or items for containers."""

    start: int
    end: int
    kind: str  # "object" | "array" | "scalar"
    members: list[Member] = field(default_factory=list)
    items: list[Span] = field(default_factory=list)


@dataclass
class Member:
    """One ``"key": value`` of an object: where its key starts and ends, and its value."""

    key: str
    key_start: int
    key_end: int
    value: Span


#: A JSON string, quotes included (the unrolled form: linear, no backtracking).
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)


class _Parser:
    """A JSON parser that records spans; the text is already known to be valid."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def parse(self) -> Span:
        self._skip()
        return self._value()

    def _skip(self) -> None:
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            if char in " \t\r\n\ufeff":
                self.pos += 1
            elif text.startswith("//", self.pos):
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end
            elif text.startswith("/*", self.pos):
                end = text.find("*/", self.pos + 2)
                self.pos = len(text) if end < 0 else end + 2
            else:
                return

    def _value(self) -> Span:
        char = self.text[self.pos]
        if char == "{":
            return self._object()
        if char == "[":
            return self._array()
        start = self.pos
        if char == '"':
            self._string()
        else:
            while self.pos < len(self.text) and self.text[self.pos] not in ",]} \t\r\n/":
                self.pos += 1
        return Span(start, self.pos, "scalar")

    def _string(self) -> str:
        start = self.pos
        match = _STRING.match(self.text, start)
        assert match is not None  # the text is valid JSON
        self.pos = match.end()
        decoded: str = json.loads(self.text[start : self.pos])
        return decoded

    def _object(self) -> Span:
        span = Span(self.pos, 0, "object")
        self.pos += 1
        self._skip()
        while self.text[self.pos] != "}":
            key_start = self.pos
            key = self._string()
            key_end = self.pos
            self._skip()
            self.pos += 1  # ':'
            self._skip()
            span.members.append(Member(key, key_start, key_end, self._value()))
            self._separator()
        self.pos += 1
        span.end = self.pos
        return span

    def _separator(self) -> None:
        """Skip to the next member or item: white space, comments and one comma."""
        self._skip()
        if self.text[self.pos] == ",":
            self.pos += 1
            self._skip()

    def _array(self) -> Span:
        span = Span(self.pos, 0, "array")
        self.pos += 1
        self._skip()
        while self.text[self.pos] != "]":
            span.items.append(self._value())
            self._separator()
        self.pos += 1
        span.end = self.pos
        return span


def parse_spans(text: str) -> Span:
    """Spans of a JSON text that ``json.loads`` (after comment stripping) accepts."""
    return _Parser(text).parse()


def _item_separator(text: str, span: Span) -> str | None:
    """The separator between a container's first two entries, when they share a line."""
    starts = [m.key_start for m in span.members] or [i.start for i in span.items]
    ends = [m.value.end for m in span.members] or [i.end for i in span.items]
    if len(starts) < 2:
        return None
    gap = text[ends[0] : starts[1]]
    if "\n" in gap or "/" in gap:
        return None
    return "," + gap.split(",", 1)[1]


def duplicate_keys(text: str) -> list[str]:
    """``LINE:COL: note`` on every key written again in one object (``json`` keeps the last)."""
    notes: list[str] = []
    stack = [parse_spans(text)]
    while stack:
        span = stack.pop()
        earlier: dict[str, int] = {}
        for member in span.members:
            line = text.count("\n", 0, member.key_start) + 1
            if member.key in earlier:
                column = member.key_start - text.rfind("\n", 0, member.key_start)
                notes.append(duplicate_note(member.key, line, column, earlier))
            earlier[member.key] = line
        stack.extend(reversed([member.value for member in span.members] + span.items))
    return notes


class JsonText(SplicedText):
    """A JSON text and the edits that can be made to it.

    Args:
        text: The JSON text (comments allowed, no byte-order mark).
        newline: The line ending the file uses.
    """

    def __init__(self, text: str, newline: str) -> None:
        super().__init__(text)
        self.newline = newline
        self.root = parse_spans(text)

    def find(self, path: FieldPath) -> tuple[Span | None, Span, FieldPath]:
        """(value span or None, deepest existing container, the missing rest of the path)."""
        node = self.root
        for depth, part in enumerate(path):
            if isinstance(part, int):
                if node.kind != "array" or not 0 <= part < len(node.items):
                    raise EditError(f"{format_path(path[: depth + 1])} does not exist")
                child = node.items[part]
            else:
                if depth > 0 and self.text[node.start : node.end] == "null":
                    return None, node, path[depth:]  # an empty section, written as null
                if node.kind != "object":
                    raise EditError(
                        f"{format_path(path[:depth])} is not a section, so it has no '{part}'"
                    )
                matches = [member.value for member in node.members if member.key == part]
                if not matches:
                    return None, node, path[depth:]
                child = matches[-1]  # json.loads keeps the last of duplicate keys
            if depth == len(path) - 1:
                return child, node, ()
            node = child
        return node, node, ()

    def position(self, path: FieldPath) -> tuple[int, int] | None:
        """1-based line and column of the value at ``path``, if it exists."""
        try:
            span, _, missing = self.find(path)
        except EditError:
            return None
        if span is None or missing:
            return None
        before = self.text[: span.start]
        return before.count("\n") + 1, span.start - (before.rfind("\n") + 1) + 1

    def set_value(self, path: FieldPath, value: Any) -> str:
        """The text with ``path`` set to ``value``, adding keys and sections if missing."""
        span, container, missing = self.find(path)
        if span is not None:
            return self._splice(span.start, span.end, self._render(value, span))
        if any(isinstance(part, int) for part in missing):
            raise EditError(f"{format_path(path)}: cannot add list items by path")
        nested: Any = value
        for key in reversed(missing[1:]):
            nested = {key: nested}
        if container.kind == "scalar":  # null becomes the new section
            section = {missing[0]: nested}
            if self._pretty():
                rendered = self._render_pretty(section, self._indent_of(container.start))
            else:
                rendered = self._render(section, container)
            return self._splice(container.start, container.end, rendered)
        return self._add_member(container, str(missing[0]), nested)

    def remove_key(self, path: FieldPath) -> str:
        """The text without the member at ``path`` (unchanged if it is absent).

        A key written twice is removed twice, so that no earlier copy comes back.
        """
        span, container, missing = self.find(path)
        if span is None or missing or container.kind != "object":
            return self.text
        text = self.text
        for index in reversed(range(len(container.members))):
            if container.members[index].key == path[-1]:
                text = JsonText(text, self.newline)._remove_member(container.start, index)
        return text

    def _remove_member(self, container_start: int, index: int) -> str:
        container = self._container_at(container_start)
        members = container.members
        member = members[index]
        if len(members) == 1:
            around = (
                self.text[container.start + 1 : member.key_start]
                + self.text[member.value.end : container.end - 1]
            )
            if "/" in around:  # comments in the object stay
                return self._splice(member.key_start, member.value.end, "")
            return self._splice(container.start + 1, container.end - 1, "")
        begin = self._line_start(member.key_start)
        on_own_line = not self.text[begin : member.key_start].strip()
        if on_own_line and self._has_line_break(member.value.end, container.end):
            # Pretty layout: the member's own lines go, with a comment at the end of them;
            # comment lines above the next member stay with it.
            end = self._line_end_incl(self._comma_after(member.value.end) or member.value.end)
            if index + 1 == len(members):
                comma = self._comma_after(members[index - 1].value.end)
                assert comma is not None
                return self.text[:comma] + self.text[comma + 1 : begin] + self.text[end:]
            return self.text[:begin] + self.text[end:]
        if index + 1 < len(members):
            return self._splice(member.key_start, members[index + 1].key_start, "")
        comma = self._comma_after(members[index - 1].value.end)
        assert comma is not None
        return self.text[:comma] + self.text[member.value.end :]

    def _add_member(self, container: Span, key: str, value: Any) -> str:
        rendered_key = json.dumps(key, ensure_ascii=False)
        item_sep, key_sep = self._separators()
        if not container.members:
            interior = self.text[container.start + 1 : container.end - 1]
            if self._pretty():
                indent = self._indent_of(container.start)
                inner = indent + " " * self._indent_step()
                rendered = self._render_pretty(value, inner)
                entry = f"{self.newline}{inner}{rendered_key}{key_sep}{rendered}"
                if interior.strip():
                    return self._splice(container.start + 1, container.start + 1, entry)
                return self._splice(
                    container.start + 1, container.end - 1, entry + self.newline + indent
                )
            rendered = json.dumps(value, ensure_ascii=False, separators=(item_sep, key_sep))
            entry = f"{rendered_key}{key_sep}{rendered}"
            return self._splice(container.start + 1, container.start + 1, entry)
        last = container.members[-1]
        colon = self.text[last.key_end : last.value.start]
        if len(container.members) > 1:
            gap = self.text[container.members[-2].value.end : last.key_start].lstrip(",")
        else:
            gap = self.text[container.start + 1 : last.key_start]
        if "\n" in gap:
            indent = gap[gap.rfind("\n") + 1 :]
            rendered = self._render_pretty(value, indent)
            entry = f",{self.newline}{indent}{rendered_key}{colon}{rendered}"
        else:
            space = gap[: len(gap) - len(gap.lstrip(" \t"))]
            if len(container.members) == 1:  # no gap to learn from: the text's own style
                space = item_sep.removeprefix(",")
            separators = ("," + space, colon)
            rendered = json.dumps(value, ensure_ascii=False, separators=separators)
            entry = f",{space}{rendered_key}{colon}{rendered}"
        return self._splice(last.value.end, last.value.end, entry)

    def _render(self, value: Any, replacing: Span) -> str:
        original = self.text[replacing.start : replacing.end]
        if isinstance(value, (list, dict)) and "\n" in original:
            return self._render_pretty(value, self._indent_of(replacing.start))
        item_sep, key_sep = self._separators()
        own = _item_separator(self.text, replacing)
        return json.dumps(value, ensure_ascii=False, separators=(own or item_sep, key_sep))

    def _separators(self) -> tuple[str, str]:
        """The inline separators of this text: ``", "`` and ``": "``, or ``","`` and ``":"``."""
        item_sep: str | None = None
        key_sep: str | None = None
        stack = [self.root]
        while stack and (item_sep is None or key_sep is None):
            span = stack.pop()
            item_sep = item_sep or _item_separator(self.text, span)
            for member in span.members[:1]:
                colon = self.text[member.key_end : member.value.start]
                if key_sep is None and "/" not in colon and "\n" not in colon:
                    key_sep = colon
            stack.extend(reversed([m.value for m in span.members] + span.items))
        compact = key_sep == ":"
        return item_sep or ("," if compact else ", "), key_sep or ": "

    def _pretty(self) -> bool:
        """Is the text laid out on several lines (as opposed to one-line, compact JSON)?"""
        return self._has_line_break(self.root.start, self.root.end)

    def _has_line_break(self, start: int, end: int) -> bool:
        return "\n" in self.text[start:end] or "\r" in self.text[start:end]

    def _container_at(self, start: int) -> Span:
        stack = [self.root]
        while stack:
            span = stack.pop()
            if span.start == start and span.kind != "scalar":
                return span
            stack.extend([m.value for m in span.members] + span.items)
        raise EditError("internal: lost track of a JSON object while editing")

    def _comma_after(self, index: int) -> int | None:
        """The offset of the ``,`` that follows a value (past blanks and comments), if any."""
        parser = _Parser(self.text)
        parser.pos = index
        parser._skip()
        return parser.pos if self.text.startswith(",", parser.pos) else None

    def _indent_of(self, index: int) -> str:
        line = self.text[self._line_start(index) : index]
        return line[: len(line) - len(line.lstrip(" \t"))]

    def _line_start(self, index: int) -> int:
        return max(self.text.rfind("\n", 0, index), self.text.rfind("\r", 0, index)) + 1

    def _line_end_incl(self, index: int) -> int:
        """Past the line break that ends the line holding ``index`` (or the text end)."""
        newline = self.text.find("\n", index)
        return len(self.text) if newline < 0 else newline + 1

    def _render_pretty(self, value: Any, indent: str) -> str:
        if not isinstance(value, (list, dict)):
            return json.dumps(value, ensure_ascii=False)
        step = self._indent_step()
        rendered = json.dumps(value, ensure_ascii=False, indent=step)
        return rendered.replace("\n", self.newline + indent)

    def _indent_step(self) -> int:
        for line in self.text.splitlines()[1:]:
            stripped = line.lstrip(" ")
            if stripped and len(line) > len(stripped):
                return len(line) - len(stripped)
        return 2
