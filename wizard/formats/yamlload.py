"""YAML exactly as AI Toolkit reads it, plus the node graph we need to edit it.

AI Toolkit loads job files with PyYAML's ``SafeLoader`` after adding one implicit
resolver, so that ``1e-4`` is a float (``toolkit/config.py``). We do the same, on
a subclass so that no other YAML reader in the process changes behaviour.

Besides the tree, we keep the composed node graph: every node knows where it
starts and ends in the text, which is what lets ``oom_wizard.formats.yamledit`` change one
field and leave every other byte alone. Loading is defensive: non-safe tags are
refused (never constructed), alias bombs are refused before anything expands, and
duplicate keys are reported (the toolkit silently takes the last one).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from oom_wizard.errors import ConfigError

#: The float resolver AI Toolkit adds to SafeLoader (toolkit/config.py).
TOOLKIT_FLOAT = re.compile(
    r"""^(?:
     [-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |\.[0-9_]+(?:[eE][-+][0-9]+)?
    |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)

#: A config whose aliases would expand to more nodes than this is refused (billion laughs).
MAX_EXPANDED_NODES = 200_000

MERGE_TAG = "tag:yaml.org,2002:merge"

#: Deeper nesting than this is refused before any parser sees the text (real job configs
#: nest about eight levels; Python's parsers recurse and give up near a thousand).
MAX_DEPTH = 100

#: Python refuses to read an integer with more digits than this (``sys.int_info``).
MAX_INT_DIGITS = 4300

_LONG_DIGITS = re.compile(rf"\d{{{MAX_INT_DIGITS + 1},}}")
_BRACKETS = re.compile(r"[\[\]{}\n\"'#]")
_DEEP_LINE = re.compile(rf"^[ -]{{{MAX_DEPTH},}}", re.M)


def check_limits(text: str, file: str | Path, *, what: str = "the file") -> None:
    """Refuse, before parsing, text nested deeper than :data:`MAX_DEPTH` or holding a number
    longer than :data:`MAX_INT_DIGITS` digits (each would stop a parser with a Python error).

    The depth counts brackets outside quotes and comments, plus, for block YAML, the levels
    of indentation and the ``- `` entries of one line. It is a bound, not a parse: a text
    under it may still be refused by the parser, with its own message.

    Raises:
        ConfigError: with the line and column where the limit is passed.
    """
    digits = _LONG_DIGITS.search(text)
    if digits is not None:
        line, column = _line_col(text, digits.start())
        raise ConfigError(
            f"a number of {len(digits.group()):,} digits; Python (and so AI Toolkit) reads at "
            f"most {MAX_INT_DIGITS} digits in a number",
            file=file,
            line=line,
            column=column,
        )
    at = _too_deep(text)
    if at is not None:
        line, column = _line_col(text, at)
        raise ConfigError(
            f"{what} nests deeper than {MAX_DEPTH} levels here; no job config does, and "
            "the parsers would give up: is this the right file?",
            file=file,
            line=line,
            column=column,
        )


def _line_col(text: str, index: int) -> tuple[int, int]:
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


def _too_deep(text: str) -> int | None:
    """The index where nesting first passes MAX_DEPTH, or None (one linear pass)."""
    depth = 0
    quote = ""
    index = 0
    indents: list[int] = []
    length = len(text)
    # Every block level takes a column at least (an indent, or "- "), so lines only need
    # counting when one starts that far in.
    counting = _DEEP_LINE.search(text) is not None
    if not counting and text.count("[") + text.count("{") <= MAX_DEPTH:
        return None  # only an opening bracket adds a level, and there are too few of them
    line_start = counting
    while index < length:
        if line_start:
            line_start = False
            if depth == 0 and not quote:
                end = text.find("\n", index)
                end = length if end < 0 else end
                body = text[index:end]
                stripped = body.lstrip(" ")
                if stripped and not stripped.startswith("#"):
                    indent = len(body) - len(stripped)
                    while indents and indents[-1] >= indent:
                        indents.pop()
                    indents.append(indent)
                    dashes = len(re.match(r"(?:-[ ]+)*", stripped).group().split("-")) - 1  # type: ignore[union-attr]
                    if len(indents) + dashes > MAX_DEPTH:
                        return index + indent
        match = _BRACKETS.search(text, index)
        if match is None:
            return None
        char = match.group()
        index = match.end()
        if quote:
            if char == "\n":
                line_start = counting
            if char == quote:
                if quote == '"' and _escaped(text, match.start()):
                    continue
                quote = ""
            continue
        if char == "\n":
            line_start = counting
        elif char in "\"'":
            quote = char
        elif char == "#":
            end = text.find("\n", index)
            index = length if end < 0 else end
        elif char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return match.start()
        else:
            depth = max(depth - 1, 0)
    return None


def _escaped(text: str, index: int) -> bool:
    slashes = 0
    while index > 0 and text[index - 1] == "\\":
        slashes += 1
        index -= 1
    return slashes % 2 == 1


class ToolkitLoader(yaml.SafeLoader):
    """SafeLoader with AI Toolkit's extra float resolver, remembering anchors by node."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.anchor_names: dict[int, str] = {}

    def compose_document(self) -> Node | None:
        # PyYAML's own body, except that the anchors survive the document.
        self.get_event()  # type: ignore[no-untyped-call]
        node: Node | None = self.compose_node(None, None)  # type: ignore[arg-type]
        self.get_event()  # type: ignore[no-untyped-call]
        for name, anchored in self.anchors.items():
            self.anchor_names[id(anchored)] = name
        self.anchors = {}
        return node


ToolkitLoader.add_implicit_resolver("tag:yaml.org,2002:float", TOOLKIT_FLOAT, list("-+0123456789."))


@dataclass(frozen=True)
class ComposedYaml:
    """The node graph of one YAML document and what we learnt while composing it.

    Attributes:
        root: The document's root node.
        anchor_names: ``id(node)`` → anchor name, for every anchored node.
        shared: ``id(node)`` of every node reached from more than one place (aliases).
        duplicates: ``LINE:COL: note`` on every key written again in one mapping.
    """

    root: Node
    anchor_names: dict[int, str]
    shared: frozenset[int]
    duplicates: tuple[str, ...]


def _mark_error(exc: yaml.MarkedYAMLError, file: Path) -> ConfigError:
    mark = exc.problem_mark or exc.context_mark
    problem = exc.problem or exc.context or "this is not valid YAML"
    context = exc.context or ""
    message = f"YAML syntax error: {problem}{_hint_for(problem)}"
    if "expected a single document" in context:
        message = (
            "a second YAML document starts here; AI Toolkit reads one document per file: "
            "keep one and delete the others"
        )
    elif "quoted scalar" in context and "end of stream" in problem and exc.context_mark:
        mark = exc.context_mark  # where the quote opens, not where the file ends
        message = "YAML syntax error: the quote that opens here is never closed"
    if mark is None:
        return ConfigError(message, file=file)
    return ConfigError(message, file=file, line=mark.line + 1, column=mark.column + 1)


def _unprintable(text: str, exc: yaml.reader.ReaderError, file: Path) -> ConfigError:
    """A character YAML does not allow anywhere, a comment included (PyYAML, and so AI
    Toolkit, refuses the whole file): where it is and what to do."""
    index = exc.position
    char = text[index] if 0 <= index < len(text) else chr(exc.character)
    line = text.count("\n", 0, index) + 1
    column = index - (text.rfind("\n", 0, index) + 1) + 1
    code = ord(char)
    shown = f"^{chr(code ^ 0x40)}" if code < 0x20 or code == 0x7F else repr(char)
    return ConfigError(
        f"control character U+{code:04X} ({shown} in an editor) here; YAML allows none, not "
        "even in a comment, so AI Toolkit cannot read this file either: delete it and save",
        file=file,
        line=line,
        column=column,
    )


def _hint_for(problem: str) -> str:
    if "\\t" in problem or "tab" in problem:
        return "; indent with spaces, not tabs"
    if "expected <block end>" in problem:
        return "; check this line's indentation, and the lines above for a quote left open"
    if "could not determine a constructor" in problem:
        return "; AI Toolkit's safe loader refuses this tag, and so do we (nothing was run)"
    if "found unexpected end of stream" in problem or "found unexpected end" in problem:
        return "; is a quote or bracket left open?"
    return ""


def compose(text: str, file: Path) -> ComposedYaml:
    """Compose ``text`` into nodes, refusing what AI Toolkit's loader would refuse.

    Raises:
        ConfigError: syntax error, several documents, an empty file or an alias bomb.
    """
    try:
        loader = ToolkitLoader(text)
    except yaml.reader.ReaderError as exc:  # the reader checks every character first
        raise _unprintable(text, exc, file) from None
    try:
        root = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        raise _mark_error(exc, file) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"YAML error: {exc}", file=file) from None
    finally:
        loader.dispose()
    if root is None or _is_empty_document(root):
        raise ConfigError("the file is empty; pass the job's config file", file=file)
    shared = _check_expansion(root, file)
    return ComposedYaml(
        root=root,
        anchor_names=loader.anchor_names,
        shared=shared,
        duplicates=tuple(_duplicate_keys(root)),
    )


def _is_empty_document(root: Node) -> bool:
    """A document with nothing in it but a ``---`` marker (an empty, untagged null)."""
    return (
        isinstance(root, ScalarNode)
        and root.value == ""
        and root.style is None
        and root.tag == "tag:yaml.org,2002:null"
    )


def construct(composed: ComposedYaml, file: Path) -> Any:
    """Build Python values from composed nodes, with the toolkit's SafeLoader rules."""
    loader = ToolkitLoader("")
    try:
        return loader.construct_document(composed.root)
    except yaml.MarkedYAMLError as exc:
        raise _mark_error(exc, file) from None
    except (ValueError, TypeError) as exc:
        # e.g. the pathological scalar "._" that the toolkit's float resolver cannot convert.
        raise ConfigError(f"AI Toolkit could not read a value here: {exc}", file=file) from None
    finally:
        loader.dispose()


def _children(node: Node) -> list[Node]:
    if isinstance(node, MappingNode):
        return [child for pair in node.value for child in pair]
    if isinstance(node, SequenceNode):
        return list(node.value)
    return []


def _check_expansion(root: Node, file: Path) -> frozenset[int]:
    """Count nodes as if every alias were expanded; refuse a graph that explodes.

    Sizes are memoised per node, so a billion-laughs document costs a few hundred
    steps here instead of exponential memory later.
    """
    sizes: dict[int, int] = {}
    seen_from: dict[int, int] = {}
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if not children_done and key in seen_from and key not in sizes:
            # Reached again while its own children are still being counted: a cycle.
            mark = node.start_mark
            raise ConfigError(
                "an alias here refers to the value that contains it (a recursive anchor); "
                "AI Toolkit cannot use such a config",
                file=file,
                line=mark.line + 1,
                column=mark.column + 1,
            )
        if children_done:
            total = 1 + sum(sizes[id(child)] for child in _children(node))
            if total > MAX_EXPANDED_NODES:
                mark = node.start_mark
                raise ConfigError(
                    "aliases here expand to more than "
                    f"{MAX_EXPANDED_NODES:,} values (an alias bomb?); refused",
                    file=file,
                    line=mark.line + 1,
                    column=mark.column + 1,
                )
            sizes[key] = total
            continue
        seen_from[key] = seen_from.get(key, 0) + 1
        if key in sizes or seen_from[key] > 1:
            continue
        stack.append((node, True))
        # Every child is pushed, even one already counted: each arrival is a reference,
        # and a node reached from two places is shared (an alias), whatever the order.
        stack.extend((child, False) for child in _children(node))
    return frozenset(key for key, count in seen_from.items() if count > 1)


def _duplicate_keys(root: Node) -> list[str]:
    notes: list[str] = []
    visited: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in visited:
            continue
        visited.add(id(node))
        if isinstance(node, MappingNode):
            first_line: dict[str, int] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, ScalarNode) or key_node.tag == MERGE_TAG:
                    continue
                mark = key_node.start_mark
                if key_node.value in first_line:
                    notes.append(
                        duplicate_note(key_node.value, mark.line + 1, mark.column + 1, first_line)
                    )
                first_line[key_node.value] = mark.line + 1
        stack.extend(_children(node))
    return notes


def duplicate_note(key: str, line: int, column: int, earlier: dict[str, int]) -> str:
    """``LINE:COL: ...`` for a key written again in one mapping (the toolkit keeps the last)."""
    return (
        f"{line}:{column}: key '{key}' is written twice in the same section (also on line "
        f"{earlier[key]}); AI Toolkit silently uses this one, the last"
    )
