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
from dataclasses import dataclass, field
from typing import Any

from wizard.errors import EditError
from wizard.paths import FieldPath, format_path


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
        self.pos += 1
        while self.text[self.pos] != '"':
            self.pos += 2 if self.text[self.pos] == "\\" else 1
        self.pos += 1
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
            self._skip()
            if self.text[self.pos] == ",":
                self.pos += 1
                self._skip()
        self.pos += 1
        span.end = self.pos
        return span

    def _array(self) -> Span:
        span = Span(self.pos, 0, "array")
        self.pos += 1
        self._skip()
        while self.text[self.pos] != "]":
            span.items.append(self._value())
            self._skip()
            if self.text[self.pos] == ",":
                self.pos += 1
                self._skip()
        self.pos += 1
        span.end = self.pos
        return span


def parse_spans(text: str) -> Span:
    """Spans of a JSON text that ``json.loads`` (after comment stripping) accepts."""
    return _Parser(text).parse()


class JsonText:
    """A JSON text and the edits that can be made to it.

    Args:
        text: The JSON text (comments allowed, no byte-order mark).
        newline: The line ending the file uses.
    """

    def __init__(self, text: str, newline: str) -> None:
        self.text = text
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
        return self._add_member(container, str(missing[0]), nested)

    def remove_key(self, path: FieldPath) -> str:
        """The text without the member at ``path`` (unchanged if it is absent)."""
        span, container, missing = self.find(path)
        if span is None or missing or container.kind != "object":
            return self.text
        members = container.members
        index = max(i for i, member in enumerate(members) if member.key == path[-1])
        if index + 1 < len(members):
            return self._splice(members[index].key_start, members[index + 1].key_start, "")
        if index > 0:
            return self._splice(members[index - 1].value.end, span.end, "")
        return self._splice(container.start + 1, container.end - 1, "")

    def _add_member(self, container: Span, key: str, value: Any) -> str:
        rendered_key = json.dumps(key, ensure_ascii=False)
        if not container.members:
            entry = f"{rendered_key}: {json.dumps(value, ensure_ascii=False)}"
            return self._splice(container.start + 1, container.end - 1, entry)
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
            entry = f",{gap}{rendered_key}{colon}{json.dumps(value, ensure_ascii=False)}"
        return self._splice(last.value.end, last.value.end, entry)

    def _render(self, value: Any, replacing: Span) -> str:
        original = self.text[replacing.start : replacing.end]
        if isinstance(value, (list, dict)) and "\n" in original:
            line_start = self.text.rfind("\n", 0, replacing.start) + 1
            indent = self.text[line_start : replacing.start]
            indent = indent[: len(indent) - len(indent.lstrip())]
            return self._render_pretty(value, indent)
        compact = "," in original and ", " not in original
        separators = (",", ":") if compact else (", ", ": ")
        return json.dumps(value, ensure_ascii=False, separators=separators)

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

    def _splice(self, start: int, end: int, replacement: str) -> str:
        return self.text[:start] + replacement + self.text[end:]
