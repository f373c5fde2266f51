"""The project's own exactness check of a saved config: ORIGINAL -> EDITED, told by a change log.

    python -m tests.support.exactness ORIGINAL EDITED [--changelog LOG]

It shares no code with ``wizard/``: the trees are read the way AI Toolkit reads them (JSON, or
YAML through PyYAML's SafeLoader with the toolkit's extra float resolver, so ``1e-4`` is a
float), and then:

1. **The values.** Replaying the change log on the original tree (per path, the first
   ``before`` and the last ``after``; ``after: null`` removes the key) must give exactly the
   edited tree. Every logged ``before`` must be what the original holds there. Booleans are
   never equal to numbers; ``1`` and ``1.0`` are.
2. **The text.** Each line the edit removed or added must hold a changed key (in JSON, one
   of the keys on the line; a one-line JSON is one line), a key of a section the edit added,
   an item of a changed list, a bracket, a section in flow style that holds a changed field,
   or be blank; an added line may also be a comment; a JSON line may gain or lose its comma.
   No comment line of the original is lost, and an inline comment on a changed line is kept.
3. **The bytes around the text.** A byte-order mark and the line endings are kept.

``check`` returns a :class:`Verdict`; ``main`` prints its problems and a one-line verdict and
exits 0 (exact), 1 (a problem) or 2 (an input it cannot read). The test suite uses it for every
saved config, so the suite is complete without ``../shared``; where ``../shared/checks`` is
present, ``tests/domain/formats/test_exactness.py`` also holds this checker against the
independent one.
"""

from __future__ import annotations

import argparse
import copy
import difflib
import itertools
import json
import math
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

JSON_SUFFIXES = (".json", ".jsonc")
BOM = "\ufeff"


class ToolkitYamlLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader plus the float resolver that AI Toolkit's ``toolkit/config.py`` adds.

    The toolkit's pattern also takes a float with an exponent and no dot (``1e-4``, ``5e-05``,
    ``1_000e3``) and a dotted one with an unsigned exponent (``1.0e4``); quoted scalars stay
    strings, and ``.5e3`` stays a string as in plain PyYAML.
    """


ToolkitYamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?
           |\.[0-9_]+(?:[eE][-+][0-9]+)?
           |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
           |[-+]?\.(?:inf|Inf|INF)
           |\.(?:nan|NaN|NAN))$""",
        re.VERBOSE,
    ),
    list("-+0123456789."),
)


def load_tree(path: Path) -> Any:
    """The config tree as AI Toolkit loads the file (by its suffix)."""
    text = path.read_bytes().decode("utf-8").removeprefix(BOM)
    if path.suffix.lower() in JSON_SUFFIXES:
        return json.loads(text)
    return yaml.load(text, Loader=ToolkitYamlLoader)


_PART = re.compile(r"\[(\d+)\]|\.?([^.\[\]]+)")


def path_parts(text: str) -> list[str | int]:
    """``config.process[0].train.lr`` as ``["config", "process", 0, "train", "lr"]``."""
    parts: list[str | int] = []
    for index, key in _PART.findall(text):
        parts.append(int(index) if index else key)
    return parts


_ABSENT = object()


def value_at(tree: Any, parts: Sequence[str | int]) -> Any:
    """The value at ``parts``, or ``_ABSENT``."""
    node = tree
    for part in parts:
        inside_list = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        inside_mapping = isinstance(node, dict) and part in node
        if not (inside_list or inside_mapping):
            return _ABSENT
        node = node[part]
    return node


def replay(tree: Any, parts: Sequence[str | int], after: Any) -> None:
    """Set (or, for ``None``, remove) the value at ``parts`` in ``tree``, making sections."""
    node = tree
    for part, following in itertools.pairwise(parts):
        if isinstance(node, dict):
            if part not in node or not isinstance(node[part], dict | list):
                node[part] = [] if isinstance(following, int) else {}
            node = node[part]
        else:
            node = node[part]
    last = parts[-1]
    if after is None:
        if isinstance(node, dict):
            node.pop(last, None)
        elif isinstance(node, list) and isinstance(last, int) and last < len(node):
            del node[last]
    else:
        node[last] = after


def equal(a: Any, b: Any) -> bool:
    """Equal as AI Toolkit would use them: a bool is not a number; ``1 == 1.0``; NaN is NaN."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def leaves(node: Any, prefix: str = "") -> dict[str, Any]:
    """Every leaf by its path; a list of scalars is one leaf."""
    found: dict[str, Any] = {}
    if isinstance(node, dict) and node:
        for key, value in node.items():
            found.update(leaves(value, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(node, list) and any(isinstance(item, dict | list) for item in node):
        for index, value in enumerate(node):
            found.update(leaves(value, f"{prefix}[{index}]"))
    else:
        found[prefix] = node
    return found


def differing(original: Any, edited: Any) -> set[str]:
    """The leaf paths whose values differ between two trees."""
    before, after = leaves(original), leaves(edited)
    return {
        path
        for path in before.keys() | after.keys()
        if not equal(before.get(path, _ABSENT), after.get(path, _ABSENT))
    }


@dataclass(frozen=True)
class Verdict:
    """What the check found.

    Attributes:
        problems: One sentence per problem; empty when the edit is exact.
        differing: How many leaves differ between the two trees.
    """

    problems: tuple[str, ...]
    differing: int

    @property
    def ok(self) -> bool:
        """True when the edit is exactly the logged changes."""
        return not self.problems

    def line(self) -> str:
        """The one-line verdict."""
        if self.ok:
            return f"exactness: ok; {self.differing} field(s) differ, all of them logged"
        return f"exactness: {len(self.problems)} problem(s); {self.differing} field(s) differ"


def net_changes(entries: Iterable[dict[str, Any]]) -> dict[str, tuple[Any, Any]]:
    """Per path, the first ``before`` and the last ``after`` of the change-log entries."""
    net: dict[str, tuple[Any, Any]] = {}
    for entry in entries:
        path = str(entry["path"])
        first = net[path][0] if path in net else entry.get("before")
        net[path] = (first, entry.get("after"))
    return net


def check_values(original: Any, edited: Any, net: dict[str, tuple[Any, Any]]) -> list[str]:
    """Problems of the trees: replaying ``net`` on ``original`` must give ``edited``."""
    problems = []
    expected = copy.deepcopy(original)
    for path, (before, after) in net.items():
        parts = path_parts(path)
        actual = value_at(original, parts)
        if not equal(None if actual is _ABSENT else actual, before):
            problems.append(
                f"{path}: the change log says before={before!r}, the original has "
                f"{None if actual is _ABSENT else actual!r}"
            )
        replay(expected, parts, after)
    if not equal(expected, edited):
        want, got = leaves(expected), leaves(edited)
        for path in sorted(want.keys() | got.keys()):
            a, b = want.get(path, _ABSENT), got.get(path, _ABSENT)
            if a is _ABSENT or b is _ABSENT or not equal(a, b):
                shown = ["(absent)" if v is _ABSENT else repr(v) for v in (a, b)]
                problems.append(f"{path}: the log gives {shown[0]}, the edited file has {shown[1]}")
    return problems


_KEY = re.compile(r"""^\s*(?:-\s+)*(?:"([^"]*)"|'([^']*)'|([^\s:#'"{}\[\],][^:#]*?))\s*:(?:\s|$)""")


def _key_of(line: str) -> str | None:
    """The mapping key a YAML or JSON line starts with, if any."""
    match = re.match(
        r"""^\s*(?:-\s+)*(?:"([^"]*)"|'([^']*)'|([^\s:#'"{}\[\],][^:#]*?))\s*:(?:\s|$)""", line
    )
    if match is None:
        return None
    return next(group for group in match.groups() if group is not None).strip()


def _inline_comment(line: str) -> str | None:
    """The ``# ...`` comment at the end of a YAML line, outside quotes."""
    quote = ""
    for i, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[i:].strip()
    return None


_YAML_ITEM = re.compile(r"^\s*-\s+[^:#]*(?:#.*)?$")
_JSON_ITEM = re.compile(r'^\s*(?:-?\d[\d.eE+-]*|"(?:[^"\\]|\\.)*"|true|false|null),?\s*$')
_BRACKETS = re.compile(r"^\s*[\[\]{}],?\s*$")


def check_text(original: str, edited: str, paths: Iterable[str], is_json: bool) -> list[str]:
    """Problems of the text around the changed fields."""
    problems = []
    if original.startswith(BOM) != edited.startswith(BOM):
        problems.append("the byte-order mark was not kept")
    crlf = "\r\n" in original
    if crlf and re.search(r"(?<!\r)\n", edited):
        problems.append("the original ends its lines with CRLF; the edited file mixes in LF")
    if not crlf and "\r\n" in edited:
        problems.append("the original ends its lines with LF; the edited file has CRLF")
    changed, sections = set(), set()
    for path in paths:
        keys = [part for part in path_parts(path) if isinstance(part, str)]
        changed.add(keys[-1])
        sections.update(keys[:-1])

    def explained(line: str, added: bool) -> bool:
        if not line.strip() or _BRACKETS.match(line):
            return True
        if is_json:
            keys = set(re.findall(r'"((?:[^"\\]|\\.)*)"\s*:', line))
            if keys:
                inline = bool(keys & sections) and bool(re.search(r":\s*[\[{]", line))
                return bool(keys & changed) or inline or (added and bool(keys & sections))
        key = None if is_json else _key_of(line)
        if key is not None:
            # a section written in flow style (``network: {linear: 32}``) holds its fields
            flow = key in sections and bool(re.search(r":\s*[\[{]", line))
            return key in changed or flow or (added and key in sections)
        return bool((_JSON_ITEM if is_json else _YAML_ITEM).match(line))

    before, after = original.splitlines(), edited.splitlines()
    if is_json:  # a key added after the last one of an object puts a comma on the line before
        before, after = [line.rstrip(",") for line in before], [line.rstrip(",") for line in after]
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        for number, line in enumerate(before[i1:i2], start=i1 + 1):
            if not is_json and line.lstrip().startswith("#"):
                problems.append(f"line {number}: a comment of the original is gone: {line.strip()}")
            elif not explained(line, added=False):
                problems.append(
                    f"line {number}: changed, but holds no changed field: {line.strip()}"
                )
        for line in after[j1:j2]:
            if not is_json and line.lstrip().startswith("#"):
                continue
            if not explained(line, added=True):
                problems.append(f"an added line holds no changed field: {line.strip()}")
        if not is_json and tag == "replace":
            for old, new in zip(before[i1:i2], after[j1:j2], strict=False):
                comment = _inline_comment(old)
                if comment and not old.lstrip().startswith("#") and comment not in new:
                    problems.append(f"the inline comment of a changed line is gone: {comment}")
    return problems


def check(original: Path, edited: Path, changelog: Path | None = None) -> Verdict:
    """Check ``edited`` against ``original`` and the change log (none: only the text checks)."""
    old_text = original.read_bytes().decode("utf-8")
    new_text = edited.read_bytes().decode("utf-8")
    old_tree, new_tree = load_tree(original), load_tree(edited)
    changed = differing(old_tree, new_tree)
    problems: list[str] = []
    paths: set[str] = set(changed)
    if changelog is not None:
        net = net_changes(json.loads(changelog.read_text(encoding="utf-8"))["changes"])
        problems += check_values(old_tree, new_tree, net)
        paths |= net.keys()
    is_json = original.suffix.lower() in JSON_SUFFIXES
    problems += check_text(old_text, new_text, paths, is_json)
    return Verdict(tuple(problems), len(changed))


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: print the problems and the verdict; 0 exact, 1 not, 2 unreadable."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("original", type=Path)
    parser.add_argument("edited", type=Path)
    parser.add_argument("--changelog", type=Path)
    args = parser.parse_args(argv)
    try:
        verdict = check(args.original, args.edited, args.changelog)
    except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError) as exc:
        print(f"exactness: cannot read the inputs: {exc}")
        return 2
    for problem in verdict.problems:
        print("FAIL", problem)
    print(verdict.line())
    return 0 if verdict.ok else 1


if __name__ == "__main__":
    sys.exit(main())
