"""Surgical edits of YAML text: change one field, leave every other byte alone.

Every edit works on the text, guided by the composed node graph of
``oom_wizard.formats.yamlload``: a node knows the character offsets where it starts and ends,
so a new value replaces exactly the old value's characters (an inline comment after
it stays), a new key is inserted as one line at the indentation of its siblings,
and a removed key takes exactly its own lines with it. Flow lists stay flow lists
(with their own spacing), block lists stay block lists (only the items that change
are touched), quoted strings keep their quotes.

Values reached through an alias are shared with another place in the file; we
refuse to change them and name the anchor, because an edit there would silently
change two fields. A key inherited through a merge key (``<<:``) is overridden by
adding the key to the mapping that inherits it, which leaves the anchor alone.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from oom_wizard.errors import EditError
from oom_wizard.formats.splice import SplicedText
from oom_wizard.formats.yamlload import MERGE_TAG, ComposedYaml, ToolkitLoader, compose
from oom_wizard.paths import FieldPath, format_path

_PREFIX = re.compile(r"(?:[&!]\S*\s+)*")
_BLOCK_HEADER = re.compile(r"[|>][-+0-9]*")


@dataclass(frozen=True)
class Located:
    """Where a path leads in the node graph.

    Attributes:
        node: The value node, or None when the last key is missing.
        parent: The mapping or sequence that holds (or would hold) the value.
        parent_key: The key node under which ``parent`` sits, when it sits under a key.
        key_node: The key node of the value, when the parent is a mapping and it exists.
        missing: The part of the path from the first missing key on (empty when found).
        via_merge: The value is inherited through a ``<<:`` merge key.
    """

    node: Node | None
    parent: Node
    parent_key: ScalarNode | None
    key_node: ScalarNode | None
    missing: FieldPath
    via_merge: bool


class YamlText(SplicedText):
    """A YAML text with its node graph, and the edits that can be made to it.

    Args:
        text: The document text (no byte-order mark).
        composed: Its node graph.
        newline: The line ending used by the file (``"\\n"`` or ``"\\r\\n"``).
    """

    def __init__(self, text: str, composed: ComposedYaml, newline: str) -> None:
        super().__init__(text)
        self.composed = composed
        self.newline = newline

    # ----------------------------------------------------------------- lookup

    def locate(self, path: FieldPath) -> Located:
        """Follow ``path`` through the node graph.

        Raises:
            EditError: the path goes through a scalar, or through a list index that
                does not exist.
        """
        node: Node = self.composed.root
        parent_key: ScalarNode | None = None
        via_merge = False
        for depth, part in enumerate(path):
            if isinstance(part, int):
                if not isinstance(node, SequenceNode) or not 0 <= part < len(node.value):
                    raise EditError(f"{format_path(path[: depth + 1])} does not exist")
                if depth == len(path) - 1:
                    return Located(node.value[part], node, parent_key, None, (), via_merge)
                node, parent_key = node.value[part], None
                continue
            if _is_null(node) and depth > 0:
                return Located(None, node, parent_key, None, path[depth:], via_merge)
            if not isinstance(node, MappingNode):
                raise EditError(
                    f"{format_path(path[:depth])} is not a section, so it has no '{part}'"
                )
            found = _find_key(node, part)
            if found is None:
                return Located(None, node, parent_key, None, path[depth:], via_merge)
            key_node, value_node, merged = found
            via_merge = via_merge or merged
            if depth == len(path) - 1:
                return Located(value_node, node, parent_key, key_node, (), via_merge)
            node, parent_key = value_node, key_node
        return Located(node, node, parent_key, None, (), via_merge)

    def position(self, path: FieldPath) -> tuple[int, int] | None:
        """1-based line and column of the value at ``path`` (or its key), if it exists."""
        try:
            located = self.locate(path)
        except EditError:
            return None
        if located.node is None or located.missing:
            return None
        mark = located.node.start_mark
        return mark.line + 1, mark.column + 1

    def _refuse_shared(self, path: FieldPath) -> None:
        node: Node = self.composed.root
        for depth, part in enumerate(path):
            if isinstance(part, int):
                if not isinstance(node, SequenceNode) or part >= len(node.value):
                    return
                node = node.value[part]
            else:
                if not isinstance(node, MappingNode):
                    return
                found = _find_key(node, part)
                if found is None:
                    return
                node = found[1]
            if id(node) in self.composed.shared:
                name = self.composed.anchor_names.get(id(node), "?")
                line = node.start_mark.line + 1
                raise EditError(
                    f"{format_path(path[: depth + 1])} is the anchor &{name} (line {line}), "
                    "which is also used elsewhere through an alias; changing it here would "
                    "change it there too. Give this place its own copy, or edit the anchor "
                    "yourself",
                    line=line,
                    column=node.start_mark.column + 1,
                )

    # ------------------------------------------------------------------ edits

    def set_value(self, path: FieldPath, value: Any) -> str:
        """The text with ``path`` set to ``value`` (adding the key, and sections, if missing)."""
        self._refuse_shared(path)
        located = self.locate(path)
        if located.node is None or located.via_merge:
            missing = located.missing or path[-1:]
            if any(isinstance(part, int) for part in missing):
                raise EditError(f"{format_path(path)}: cannot add list items by path")
            return self._add_keys(located, [str(p) for p in missing], value)
        return self._replace_node(located, value)

    def remove_key(self, path: FieldPath) -> str:
        """The text without the key at ``path`` (unchanged text if it is absent)."""
        self._refuse_shared(path)
        located = self.locate(path)
        if located.node is None or located.key_node is None:
            return self.text
        if located.via_merge:
            raise EditError(
                f"{format_path(path)} is inherited through a merge key (<<:); "
                "it cannot be removed here without changing the anchor"
            )
        text = self._remove_pair(located, path)
        if _direct_count(located.parent, str(path[-1])) > 1:
            # The key is written twice: remove the earlier copy too, or it would come back.
            edited = YamlText(text, compose(text, Path("(edited text)")), self.newline)
            return edited.remove_key(path)
        return text

    # ------------------------------------------------------- replace a value

    def _replace_node(self, located: Located, value: Any) -> str:
        node = located.node
        assert node is not None
        start = self._content_start(node)
        if isinstance(node, SequenceNode) and isinstance(value, list) and not node.flow_style:
            return self._edit_block_sequence(node, value, located)
        in_flow = bool(getattr(located.parent, "flow_style", False))  # inside [...] or {...}
        if isinstance(node, ScalarNode):
            if node.start_mark.index == node.end_mark.index:
                # An empty value (`width:`) is a zero-length scalar right after the colon.
                rendered = render_inline(value, like=None, flow=in_flow)
                return self._splice(start, start, " " + rendered)
            if node.style in ("|", ">"):
                # `key: |` + its lines  →  `key: value`, keeping a comment after the `|`.
                header = _BLOCK_HEADER.match(self.text, start)
                assert header is not None
                rest = self.text[header.end() : self._line_end(start)]
                block_end = self._line_end(self._content_end(node))
                rendered = render_inline(value, like=None)
                return self.text[:start] + rendered + rest + self.text[block_end:]
            rendered = render_inline(value, like=node, flow=in_flow)
            return self._splice(start, node.end_mark.index, rendered)
        if getattr(node, "flow_style", False):
            if isinstance(node, SequenceNode) and isinstance(value, list):
                original = self.text[start : node.end_mark.index]
                return self._splice(start, node.end_mark.index, render_flow_list(value, original))
            rendered = render_inline(value, like=None, flow=in_flow)
            return self._splice(start, node.end_mark.index, rendered)
        return self._replace_block_with_inline(located, value)

    def _edit_block_sequence(self, node: SequenceNode, items: list[Any], located: Located) -> str:
        if any(isinstance(item, (dict, list)) for item in items) or any(
            not isinstance(item, ScalarNode) for item in node.value
        ):
            raise EditError("only lists of plain values can be rewritten here")
        if not items:
            return self._replace_block_with_inline(located, items)
        old_values = _construct_items(node)
        matcher = _match_items(old_values, items)
        prefix = self._item_prefix(node.value[0])
        text = self.text
        # Work from the end so earlier offsets stay valid.
        for tag, i1, i2, j1, j2 in reversed(matcher):
            if tag == "equal":
                continue
            new_lines = "".join(
                f"{prefix}{render_inline(item, like=None)}{self.newline}" for item in items[j1:j2]
            )
            if i1 < i2:
                if tag == "replace" and i2 - i1 == j2 - j1:
                    for offset in reversed(range(i2 - i1)):
                        item_node = node.value[i1 + offset]
                        text = (
                            text[: item_node.start_mark.index]
                            + render_inline(items[j1 + offset], like=item_node)
                            + text[item_node.end_mark.index :]
                        )
                    continue
                begin = self._line_start(node.value[i1].start_mark.index)
                end = self._line_end_incl(node.value[i2 - 1].end_mark.index)
                text = text[:begin] + new_lines + text[end:]
            else:
                if i1 < len(node.value):
                    at = self._line_start(node.value[i1].start_mark.index)
                else:
                    at = self._line_end_incl(node.value[-1].end_mark.index)
                    if at == len(text) and not text.endswith(("\n", "\r")):
                        new_lines = self.newline + new_lines.removesuffix(self.newline)
                text = text[:at] + new_lines + text[at:]
        return text

    def _replace_block_with_inline(self, located: Located, value: Any) -> str:
        """``key:`` + block below it  →  ``key: value`` on the key's line."""
        node, key_node = located.node, located.key_node
        if node is None or key_node is None:
            raise EditError("this value cannot be rewritten in place")
        colon = self.text.index(":", key_node.end_mark.index)
        block_start = self._line_end_incl(colon)
        block_end = self._line_end_incl(self._content_end(node))
        rest = self.text[colon + 1 : self._line_end(colon)]
        comment = rest.strip()
        spacing = rest[: len(rest) - len(rest.lstrip())] if comment else ""
        line = f" {render_inline(value, like=None)}" + (
            f"{spacing or '  '}{comment}" if comment else ""
        )
        text = self.text[: colon + 1] + line + self.text[self._line_end(colon) : block_start]
        return text + self.text[block_end:]

    # ---------------------------------------------------------- add a key

    def _add_keys(self, located: Located, keys: list[str], value: Any) -> str:
        mapping = located.parent
        nested: Any = value
        for key in reversed(keys[1:]):
            nested = {key: nested}
        key = keys[0]
        if isinstance(mapping, MappingNode) and mapping.flow_style:
            return self._add_to_flow_mapping(mapping, key, nested)
        if isinstance(mapping, MappingNode) and mapping.value:
            indent = mapping.value[0][0].start_mark.column
            anchor = self._line_end(self._content_end(mapping))
            lines = render_block(key, nested, indent, self.indent_step(), self.newline)
            if anchor == len(self.text) and not self.text.endswith(("\n", "\r")):
                return self.text + self.newline + lines.removesuffix(self.newline)
            after = self._line_end_incl(anchor)
            return self._splice(after, after, lines)
        # An empty section (`sample:` or `sample: null`): the new keys go below its key.
        if located.parent_key is None:
            raise EditError(f"cannot add '{key}' here: its section has no key to hang it from")
        parent_indent = self._line_indent(located.parent_key.start_mark.index)
        colon = self.text.index(":", located.parent_key.end_mark.index)
        line_end = self._line_end(colon)
        rest = self.text[colon + 1 : line_end]
        value_text = rest.split("#", 1)[0].strip()
        if value_text not in ("", "null", "~", "Null", "NULL"):
            raise EditError(f"cannot add '{key}' under a section written as '{value_text}'")
        # Drop only the null token; the key, the spacing and any comment stay as written.
        head = self.text[:line_end]
        if value_text:
            token = colon + 1 + rest.index(value_text)
            head = self.text[:token].rstrip(" ") + self.text[token + len(value_text) : line_end]
        lines = render_block(
            key, nested, parent_indent + self.indent_step(), self.indent_step(), self.newline
        )
        tail = self.text[line_end:]
        if tail.startswith(("\r\n", "\n")):
            cut = 2 if tail.startswith("\r\n") else 1
            return head + self.newline + lines + tail[cut:]
        return head + self.newline + lines.removesuffix(self.newline) + tail

    def _add_to_flow_mapping(self, mapping: MappingNode, key: str, value: Any) -> str:
        close = mapping.end_mark.index - 1
        if self.text[close] != "}":
            raise EditError(f"cannot add '{key}' to this inline section")
        entry = f"{render_key(key, flow=True)}: {render_inline(value, like=None, flow=True)}"
        if mapping.value:
            return self._splice(close, close, f", {entry}")
        return self._splice(close, close, entry)

    # ------------------------------------------------------- remove a key

    def _remove_pair(self, located: Located, path: FieldPath) -> str:
        mapping, key_node, node = located.parent, located.key_node, located.node
        assert isinstance(mapping, MappingNode) and key_node is not None and node is not None
        if mapping.flow_style:
            pairs = mapping.value
            index = next(i for i, (k, _) in enumerate(pairs) if k is key_node)
            start = key_node.start_mark.index
            end = node.end_mark.index
            if index + 1 < len(pairs):
                end = pairs[index + 1][0].start_mark.index
            elif index > 0:
                start = pairs[index - 1][1].end_mark.index
            return self._splice(start, end, "")
        line_start = self._line_start(key_node.start_mark.index)
        if self.text[line_start : key_node.start_mark.index].strip():
            raise EditError(
                f"{format_path(path)} is the first key of a list item; remove it by hand"
            )
        end = self._line_end_incl(self._content_end(node))
        direct = [pair for pair in mapping.value if pair[0].tag != MERGE_TAG]
        if len(direct) == 1 and len(mapping.value) == 1 and located.parent_key is not None:
            text = self.text[:line_start] + self.text[end:]
            colon = text.index(":", located.parent_key.end_mark.index)
            return text[: colon + 1] + " {}" + text[colon + 1 :]
        return self.text[:line_start] + self.text[end:]

    # ------------------------------------------------------------- helpers

    def indent_step(self) -> int:
        """The indentation step the file uses (the smallest increase between lines)."""
        step = 0
        previous = 0
        for line in self.text.splitlines():
            stripped = line.lstrip(" ")
            if not stripped or stripped.startswith("#"):
                continue
            indent = len(line) - len(stripped)
            if indent > previous and (step == 0 or indent - previous < step):
                step = indent - previous
            previous = indent
        return step or 2

    def _content_start(self, node: Node) -> int:
        return _skip_properties(self.text, node.start_mark.index)

    def _content_end(self, node: Node) -> int:
        """Offset just past the last character of ``node``'s own content."""
        last: Node = node
        while True:
            if isinstance(last, MappingNode) and last.value and not last.flow_style:
                last = last.value[-1][1] if not _is_empty(last.value[-1][1]) else last.value[-1][0]
            elif isinstance(last, SequenceNode) and last.value and not last.flow_style:
                last = last.value[-1]
            else:
                break
        end = last.end_mark.index
        if isinstance(last, ScalarNode) and last.style in ("|", ">"):
            end = len(self.text[:end].rstrip("\r\n"))
        return max(end, node.start_mark.index)

    def _item_prefix(self, item: Node) -> str:
        begin = self._line_start(item.start_mark.index)
        return self.text[begin : item.start_mark.index]

    def _line_indent(self, index: int) -> int:
        begin = self._line_start(index)
        line = self.text[begin:index]
        return len(line) - len(line.lstrip(" -"))

    def _line_start(self, index: int) -> int:
        return max(self.text.rfind("\n", 0, index), self.text.rfind("\r", 0, index)) + 1

    def _line_end(self, index: int) -> int:
        """Offset of the line break that ends the line holding ``index`` (or the text end)."""
        for i in range(index, len(self.text)):
            if self.text[i] in "\r\n":
                return i
        return len(self.text)

    def _line_end_incl(self, index: int) -> int:
        end = self._line_end(index)
        if self.text.startswith("\r\n", end):
            return end + 2
        return end + 1 if end < len(self.text) else end


# ------------------------------------------------------------------ lookup


def _find_key(mapping: MappingNode, key: str) -> tuple[ScalarNode, Node, bool] | None:
    """The last direct ``key`` of ``mapping`` (as the toolkit reads it), else an inherited one."""
    for key_node, value_node in reversed(mapping.value):
        if isinstance(key_node, ScalarNode) and key_node.tag != MERGE_TAG and key_node.value == key:
            return key_node, value_node, False
    for key_node, value_node in mapping.value:
        if isinstance(key_node, ScalarNode) and key_node.tag == MERGE_TAG:
            sources = value_node.value if isinstance(value_node, SequenceNode) else [value_node]
            for source in sources:
                if isinstance(source, MappingNode):
                    found = _find_key(source, key)
                    if found is not None:
                        return found[0], found[1], True
    return None


def _direct_count(mapping: Node, key: str) -> int:
    """How many times ``key`` is written directly in ``mapping`` (merge keys aside)."""
    if not isinstance(mapping, MappingNode):
        return 0
    return sum(
        1
        for key_node, _ in mapping.value
        if isinstance(key_node, ScalarNode) and key_node.tag != MERGE_TAG and key_node.value == key
    )


def _is_null(node: Node) -> bool:
    return isinstance(node, ScalarNode) and node.tag == "tag:yaml.org,2002:null"


def _is_empty(node: Node) -> bool:
    return isinstance(node, ScalarNode) and node.value == "" and node.style is None


def _skip_properties(text: str, index: int) -> int:
    """Skip an anchor (``&name``) and a tag (``!tag``) written before a value."""
    match = _PREFIX.match(text, index)
    return match.end() if match else index


def _construct_items(node: SequenceNode) -> list[Any]:
    loader = ToolkitLoader("")
    try:
        return [loader.construct_object(item, deep=True) for item in node.value]
    finally:
        loader.dispose()


def _match_items(old: list[Any], new: list[Any]) -> Sequence[tuple[str, int, int, int, int]]:
    keys_old = [_key(v) for v in old]
    keys_new = [_key(v) for v in new]
    return difflib.SequenceMatcher(a=keys_old, b=keys_new, autojunk=False).get_opcodes()


def _key(value: Any) -> str:
    return f"{type(value).__name__}:{value!r}"


# --------------------------------------------------------------- rendering


def render_key(key: str, *, flow: bool = False) -> str:
    """A mapping key, quoted only when it must be (``flow``: inside ``{...}``)."""
    return key if _plain_ok(key, flow=flow) else json.dumps(key, ensure_ascii=False)


def render_inline(value: Any, like: ScalarNode | None, *, flow: bool = False) -> str:
    """``value`` as YAML on one line, in the style of the scalar it replaces, if any.

    Args:
        value: What to write.
        like: The scalar being replaced, whose quotes and boolean spelling are kept.
        flow: The value goes inside ``[...]`` or ``{...}``, where ``,[]{}`` need quotes.
    """
    if isinstance(value, dict):
        inner = ", ".join(
            f"{render_key(str(k), flow=True)}: {render_inline(v, None, flow=True)}"
            for k, v in value.items()
        )
        return "{" + inner + "}"
    if isinstance(value, list):
        return "[" + ", ".join(render_inline(v, None, flow=True) for v in value) + "]"
    if isinstance(value, bool):
        return _render_bool(value, like.value if like is not None and like.style is None else None)
    if value is None:
        return "null"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return render_float(value)
    if isinstance(value, str):
        quote = like.style if like is not None and like.style in ("'", '"') else None
        if quote == "'":
            return "'" + value.replace("'", "''") + "'" if "\n" not in value else json.dumps(value)
        if quote is None and _plain_ok(value, flow=flow):
            return value
        return json.dumps(value, ensure_ascii=False)
    raise EditError(f"cannot write a value of type {type(value).__name__}")


def render_flow_list(items: list[Any], original: str) -> str:
    """A flow list in the spacing of ``original`` (``[512, 768]``, ``[ 512,768 ]``...)."""
    inner = original[1:-1]
    content = inner.strip(" ")
    lead = inner[: len(inner) - len(inner.lstrip(" "))] if content else ""
    trail = inner[len(inner.rstrip(" ")) :] if content else ""
    separator = ", " if (", " in inner or "," not in inner) else ","
    body = separator.join(render_inline(item, None, flow=True) for item in items)
    return f"[{lead}{body}{trail}]" if body else "[]"


def render_block(key: str, value: Any, indent: int, step: int, newline: str) -> str:
    """``key: value`` as block lines at ``indent``; dict values become nested sections."""
    pad = " " * indent
    if isinstance(value, dict) and value:
        lines = f"{pad}{render_key(key)}:{newline}"
        for child_key, child_value in value.items():
            lines += render_block(str(child_key), child_value, indent + step, step, newline)
        return lines
    return f"{pad}{render_key(key)}: {render_inline(value, None)}{newline}"


def render_float(value: float) -> str:
    """A float that every YAML loader reads as a float (``1.0e-05``, never ``1e-05``)."""
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    text = repr(value)
    if "e" in text:
        mantissa, exponent = text.split("e")
        if "." not in mantissa:
            mantissa += ".0"
        text = f"{mantissa}e{exponent}"
    return text


def _render_bool(value: bool, original: str | None) -> str:
    families = {
        "True": ("True", "False"),
        "False": ("True", "False"),
        "TRUE": ("TRUE", "FALSE"),
        "FALSE": ("TRUE", "FALSE"),
        "yes": ("yes", "no"),
        "no": ("yes", "no"),
        "on": ("on", "off"),
        "off": ("on", "off"),
        "Yes": ("Yes", "No"),
        "No": ("Yes", "No"),
        "YES": ("YES", "NO"),
        "NO": ("YES", "NO"),
        "On": ("On", "Off"),
        "Off": ("On", "Off"),
        "ON": ("ON", "OFF"),
        "OFF": ("ON", "OFF"),
    }
    yes, no = families.get(original or "", ("true", "false"))
    return yes if value else no


def _plain_ok(text: str, *, flow: bool = False) -> bool:
    """Would ``text`` written bare read back as exactly this string (toolkit loader)?"""
    if not text or text != text.strip() or any(c in text for c in "\n\r\t#"):
        return False
    if flow and any(c in text for c in ",[]{}"):
        return False
    if text[0] in "&*!|>'\"%@`[]{},?:-" or ": " in text or text.endswith(":"):
        return False
    try:
        loaded = yaml.load(f"k: {text}", Loader=ToolkitLoader)
    except yaml.YAMLError:
        return False
    return isinstance(loaded, dict) and loaded.get("k") == text
