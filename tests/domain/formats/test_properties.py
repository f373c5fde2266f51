"""Property: a random set of edits on a realistic config changes exactly those fields.

Hypothesis writes AI Toolkit-like configs in the styles people really use (block and
flow lists, list-item mappings such as ``datasets``, comments above entries, between
list items and at the end of lines, quoted and bare scalars, ``1e-4`` floats, YAML
1.1 booleans, empty sections, 2- or 4-space indentation, dashes indented or not, CRLF,
a ``---`` marker, a byte-order mark) and a random edit set (set existing scalars, add
missing keys and missing sections, replace lists, remove keys and whole sections). The
renderer remembers which lines belong to which field. After the edits, the bytes that
``save`` would write (with its header comment):

* load, with AI Toolkit's loader, to the source tree plus exactly the edits
  (types included: an int stays an int, a bool a bool);
* keep every line that belongs to no edited field, in the same order;
* hold nothing else but edited keys, items of replaced lists, and lines of edited
  fields kept as they were;
* keep a block list block and a flow list flow, an inline comment on a changed scalar,
  CRLF line endings and the byte-order mark.

The same configs and edits, written as JSON in AI Toolkit's layouts (pretty, and the
UI database's one-line form), must come out exactly as ``json.dumps`` writes the
edited tree in that layout.
"""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from oom_wizard.formats.document import Edit, RemoveKey, SetValue, parse_document
from oom_wizard.formats.yamlload import ToolkitLoader
from oom_wizard.paths import FieldPath
from oom_wizard.storage.save import HEADER

T = TypeVar("T")
Draw = Callable[[st.SearchStrategy[T]], T]

# ----------------------------------------------------------------- scalars as written

#: (as written in the file, what AI Toolkit's loader reads)
INTS = [("1", 1), ("4", 4), ("512", 512), ("2000", 2000), ("0", 0), ("-1", -1)]
FLOATS = [
    ("1e-4", 1e-4),
    ("2e-5", 2e-5),
    ("0.0001", 1e-4),
    ("1.5", 1.5),
    ("1.0e-05", 1e-5),
    ("0.99", 0.99),
]
BOOLS = [("true", True), ("false", False), ("True", True), ("yes", True), ("off", False)]
STRINGS = [
    ("bf16", "bf16"),
    ("adamw8bit", "adamw8bit"),
    ("/data/set_a", "/data/set_a"),
    ("${DATA_ROOT}/images", "${DATA_ROOT}/images"),
    ("x_[name]", "x_[name]"),
    ("'sd_trainer'", "sd_trainer"),
    ("'1.0'", "1.0"),
    ('"[name]"', "[name]"),
    ('"a photo of [trigger], 4k"', "a photo of [trigger], 4k"),
    ('"yes"', "yes"),
    ('"with # hash"', "with # hash"),
    ('"flowmatch"', "flowmatch"),
]
NULLS = [("", None), ("~", None), ("null", None)]
SCALARS = INTS + FLOATS + BOOLS + STRINGS

#: Values an edit may write (some need quotes or a float spelling to survive).
NEW_SCALARS: list[Any] = [
    1,
    2,
    768,
    0.00025,
    1e-05,
    1.0,
    True,
    False,
    "bf16",
    "yes",
    "1e-4",
    "a: b",
    "# not a comment",
    "[name]",
    "it's",
    "${VAR}",
    "",
    None,
]
NEW_LISTS: list[list[Any]] = [
    [512],
    [512, 768],
    [256, 512, 768, 1024],
    [1024, 768],
    ["a photo", "yes", "x: y"],
    [],
]

SECTION_KEYS = {
    "train": ["batch_size", "steps", "lr", "gradient_checkpointing", "optimizer", "dtype"],
    "model": ["name_or_path", "quantize", "low_vram", "arch", "qtype"],
    "network": ["type", "linear", "linear_alpha"],
    "sample": ["width", "height", "sample_every", "sample_steps", "prompts", "neg"],
    "save": ["dtype", "save_every", "max_step_saves_to_keep"],
}
DATASET_KEYS = ["caption_ext", "num_frames", "cache_latents_to_disk", "caption_dropout_rate"]
COMMENTS = ["# a note", "#        low_vram: true  # commented out", "# - 2048", "#"]


# --------------------------------------------------------------------- the model


@dataclass
class Scalar:
    """A scalar value, as written and as loaded."""

    text: str
    value: Any


@dataclass
class Seq:
    """A list of scalars: block (one ``- item`` per line) or flow (``[a, b]``)."""

    items: list[Scalar]
    flow: bool
    spacing: str = ", "  # flow only: ", " or ","
    padded: bool = False  # flow only: "[ a, b ]"
    indented: bool = True  # block only: dashes one step deeper than the key
    between: dict[int, str] = field(default_factory=dict)  # block: comment line before item i
    item_comments: dict[int, str] = field(default_factory=dict)


@dataclass
class Entry:
    """One ``key: value`` with the comment lines above it and its inline comment."""

    key: str
    value: Node
    leading: list[str] = field(default_factory=list)
    inline: str = ""


@dataclass
class Map:
    """A mapping: block, flow (``{a: 1}``), or an empty section (``key:``/``key: null``/``{}``)."""

    entries: list[Entry]
    flow: bool = False
    empty_as: str = ""  # for an empty mapping: "", "null" or "{}"


@dataclass
class MapList:
    """A block list of block mappings (``datasets``, ``process``)."""

    items: list[Map]
    indented: bool = True


Node = Scalar | Seq | Map | MapList


def tree_of(node: Node) -> Any:
    """The Python value AI Toolkit's loader gives for ``node``."""
    if isinstance(node, Scalar):
        return node.value
    if isinstance(node, Seq):
        return [item.value for item in node.items]
    if isinstance(node, MapList):
        return [tree_of(item) for item in node.items]
    if not node.entries and node.empty_as in ("", "null"):
        return None
    return {entry.key: tree_of(entry.value) for entry in node.entries}


# ------------------------------------------------------------------------ rendering


@dataclass
class Rendered:
    """The text as lines, and which lines belong to which field.

    Attributes:
        lines: The lines, without line breaks.
        spans: path → (first line, last content line) of that entry, inclusive.
        comments: path → the inline comment on the line of a scalar entry.
        block_lists: paths of the lists written one ``- item`` per line.
    """

    lines: list[str] = field(default_factory=list)
    spans: dict[FieldPath, tuple[int, int]] = field(default_factory=dict)
    comments: dict[FieldPath, str] = field(default_factory=dict)
    block_lists: set[FieldPath] = field(default_factory=set)
    last_content: int = -1

    def add(self, line: str, content: bool = True) -> None:
        self.lines.append(line)
        if content:
            self.last_content = len(self.lines) - 1


def render_scalar(scalar: Scalar) -> str:
    return scalar.text


def render_flow_seq(seq: Seq) -> str:
    body = seq.spacing.join(item.text for item in seq.items)
    return f"[ {body} ]" if seq.padded and body else f"[{body}]"


def render_flow_map(mapping: Map) -> str:
    return "{" + ", ".join(f"{e.key}: {render_scalar(e.value)}" for e in mapping.entries) + "}"  # type: ignore[arg-type]


def with_comment(line: str, comment: str) -> str:
    return f"{line}  {comment}" if comment else line


def render_map(
    mapping: Map, indent: int, step: int, path: FieldPath, out: Rendered, dash: str | None = None
) -> None:
    """Render a block mapping's entries; ``dash`` puts the first entry on a ``- `` line."""
    for index, entry in enumerate(mapping.entries):
        on_dash = dash is not None and index == 0
        if not on_dash:
            for comment in entry.leading:
                out.add(comment if comment.startswith("#  ") else " " * indent + comment, False)
        prefix = dash if on_dash and dash is not None else " " * indent
        first = len(out.lines)
        render_entry(entry, prefix, indent, step, (*path, entry.key), out)
        out.spans[(*path, entry.key)] = (first, out.last_content)


def render_entry(
    entry: Entry, prefix: str, indent: int, step: int, path: FieldPath, out: Rendered
) -> None:
    head = f"{prefix}{entry.key}:"
    value = entry.value
    if isinstance(value, Scalar):
        out.add(with_comment(f"{head} {value.text}" if value.text else head, entry.inline))
        if entry.inline:
            out.comments[path] = entry.inline
    elif isinstance(value, Seq) and value.flow:
        out.add(with_comment(f"{head} {render_flow_seq(value)}", entry.inline))
    elif isinstance(value, Seq):
        out.block_lists.add(path)
        out.add(with_comment(head, entry.inline))
        dash_indent = indent + step if value.indented else indent
        for i, item in enumerate(value.items):
            if i in value.between:
                out.add(" " * dash_indent + value.between[i], False)
            out.add(
                with_comment(f"{' ' * dash_indent}- {item.text}", value.item_comments.get(i, ""))
            )
    elif isinstance(value, Map) and value.flow:
        out.add(with_comment(f"{head} {render_flow_map(value)}", entry.inline))
    elif isinstance(value, Map) and not value.entries:
        written = f"{head} {value.empty_as}" if value.empty_as else head
        out.add(with_comment(written, entry.inline))
    elif isinstance(value, Map):
        out.add(with_comment(head, entry.inline))
        render_map(value, indent + step, step, path, out)
    else:
        assert isinstance(value, MapList)
        out.add(with_comment(head, entry.inline))
        dash_indent = indent + step if value.indented else indent
        for i, member in enumerate(value.items):
            dash = " " * dash_indent + "- "
            render_map(member, dash_indent + 2, step, (*path, i), out, dash=dash)


# ------------------------------------------------------------------------ strategies


def scalar_from(draw: Draw[Any], pool: list[tuple[str, Any]]) -> Scalar:
    text, value = draw(st.sampled_from(pool))
    return Scalar(text, value)


def comments(draw: Draw[Any]) -> list[str]:
    lines: list[str] = draw(st.lists(st.sampled_from([*COMMENTS, ""]), max_size=2))
    return lines


def inline(draw: Draw[Any]) -> str:
    comment: str = draw(st.sampled_from(["", "", "# why", "#  lower this on OOM"]))
    return comment


def flow_safe(text: str) -> bool:
    """Can this scalar be written inside ``[...]`` or ``{...}`` as it is?"""
    return bool(text) and (text[0] in "'\"" or not any(c in text for c in "{}[],#"))


def a_seq(draw: Draw[Any], pool: list[tuple[str, Any]]) -> Seq:
    items = [scalar_from(draw, pool) for _ in range(draw(st.integers(1, 4)))]
    flow = all(flow_safe(item.text) for item in items) and draw(st.booleans())
    seq = Seq(items, flow)
    if flow:
        seq.spacing = draw(st.sampled_from([", ", ","]))
        seq.padded = draw(st.booleans())
    else:
        seq.indented = draw(st.booleans())
        if len(items) > 1 and draw(st.booleans()):
            seq.between[draw(st.integers(1, len(items) - 1))] = "# - 640"
        if draw(st.booleans()):
            seq.item_comments[draw(st.integers(0, len(items) - 1))] = "# big"
    return seq


def a_section(draw: Draw[Any], name: str) -> Map:
    keys = draw(st.lists(st.sampled_from(SECTION_KEYS[name]), unique=True, max_size=5))
    if name == "sample" and "prompts" not in keys and draw(st.booleans()):
        keys.append("prompts")
    if not keys:
        return Map([], empty_as=draw(st.sampled_from(["", "null", "{}"])))
    entries = []
    for key in keys:
        value: Node
        value = a_seq(draw, STRINGS) if key == "prompts" else scalar_from(draw, SCALARS + NULLS)
        entries.append(Entry(key, value, comments(draw), inline(draw)))
    inline_ok = all(isinstance(e.value, Scalar) and flow_safe(e.value.text) for e in entries)
    if len(entries) <= 3 and inline_ok and draw(st.integers(0, 3)) == 0:
        return Map([Entry(e.key, e.value) for e in entries], flow=True)
    return Map(entries)


def a_dataset(draw: Draw[Any]) -> Map:
    entries = [Entry("folder_path", scalar_from(draw, STRINGS[2:5]))]
    keys = draw(st.lists(st.sampled_from(DATASET_KEYS), unique=True, max_size=3))
    if draw(st.integers(0, 4)):
        keys.insert(draw(st.integers(0, len(keys))), "resolution")
    for key in keys:
        value: Node = (
            (a_seq(draw, INTS) if draw(st.integers(0, 2)) else scalar_from(draw, INTS))
            if key == "resolution"
            else scalar_from(draw, SCALARS)
        )
        entries.append(Entry(key, value, comments(draw), inline(draw)))
    return Map(entries)


@st.composite
def configs(draw: Draw[Any]) -> Map:
    """The model of a job config (its root mapping)."""
    process = [
        Entry(
            "type",
            scalar_from(draw, [("sd_trainer", "sd_trainer"), ("'sd_trainer'", "sd_trainer")]),
        )
    ]
    sections = draw(st.lists(st.sampled_from(list(SECTION_KEYS)), unique=True, min_size=1))
    sections.insert(draw(st.integers(0, len(sections))), "datasets")
    for name in sections:
        value: Node
        if name == "datasets":
            value = MapList(
                [a_dataset(draw) for _ in range(draw(st.integers(1, 3)))], draw(st.booleans())
            )
        else:
            value = a_section(draw, name)
        process.append(Entry(name, value, comments(draw), inline(draw)))
    config = Map(
        [
            Entry("name", scalar_from(draw, STRINGS), comments(draw), inline(draw)),
            Entry("process", MapList([Map(process)], draw(st.booleans())), comments(draw)),
        ]
    )
    root = [Entry("job", Scalar("extension", "extension"), comments(draw)), Entry("config", config)]
    if draw(st.booleans()):
        root.append(
            Entry("meta", Map([Entry("name", Scalar('"[name]"', "[name]"))]), comments(draw))
        )
    return Map(root)


@dataclass
class Case:
    """A rendered config, its tree, and an edit set with what it is allowed to touch."""

    text: str
    tree: dict[str, Any]
    rendered: Rendered
    edits: list[Edit]
    expected: dict[str, Any]
    allowed_lines: set[int]
    edited_keys: set[str]
    crlf: bool
    bom: bool


P0: FieldPath = ("config", "process", 0)


def walk(node: Node, path: FieldPath) -> list[tuple[FieldPath, Node, Map | None, int]]:
    """(path, node, the mapping holding it, its index there) for every entry below ``node``."""
    found: list[tuple[FieldPath, Node, Map | None, int]] = []
    if isinstance(node, Map):
        for index, entry in enumerate(node.entries):
            found.append(((*path, entry.key), entry.value, node, index))
            found += walk(entry.value, (*path, entry.key))
    elif isinstance(node, MapList):
        for index, item in enumerate(node.items):
            found += walk(item, (*path, index))
    return found


def maps_of(node: Node, path: FieldPath) -> list[tuple[FieldPath, Map]]:
    """Every mapping below ``node`` (not the root), with its path."""
    found: list[tuple[FieldPath, Map]] = []
    for sub_path, sub, _, _ in walk(node, path):
        if isinstance(sub, Map):
            found.append((sub_path, sub))
        if isinstance(sub, MapList):
            found += [((*sub_path, i), item) for i, item in enumerate(sub.items)]
    return found


def related(a: FieldPath, b: FieldPath) -> bool:
    return a[: len(b)] == b or b[: len(a)] == a


@st.composite
def cases(draw: Draw[Any]) -> Case:
    root = draw(configs())
    step = draw(st.sampled_from([2, 4]))
    out = Rendered()
    if draw(st.booleans()):
        out.add("---", False)
    render_map(root, 0, step, (), out)
    text = "\n".join(out.lines) + "\n"
    tree = tree_of(root)

    entries = walk(root, ())
    scalars = [(p, n) for p, n, holder, i in entries if isinstance(n, Scalar) and p[:3] == P0]
    lists = [(p, n) for p, n, _, _ in entries if isinstance(n, Seq)]
    removable = [
        (p, holder)
        for p, n, holder, i in entries
        if p[:3] == P0
        and len(p) > 3
        and holder is not None
        and not (i == 0 and isinstance(p[-2], int))
    ]
    mappings = [(p, m) for p, m in maps_of(root, ()) if p[:3] == P0 or p == P0]

    candidates: dict[str, list[tuple[FieldPath, Any]]] = {
        "set": [(path, draw(st.sampled_from(NEW_SCALARS))) for path, _ in scalars],
        "list": [(path, draw(st.sampled_from([*NEW_LISTS, 512]))) for path, _ in lists],
        "add": [],
        "remove": [(path, None) for path, _ in removable],
    }
    for path, mapping in mappings:
        present = {entry.key for entry in mapping.entries}
        pool = SECTION_KEYS.get(str(path[-1]), [*DATASET_KEYS, "resolution"])
        if path == P0:
            pool = [f"{s}.{k}" for s in SECTION_KEYS if s not in present for k in SECTION_KEYS[s]]
        for key in pool:
            if key.split(".")[0] not in present:
                value = draw(st.sampled_from([*NEW_SCALARS, [512, 768]]))
                candidates["add"].append(((*path, *key.split(".")), value))

    kinds = [kind for kind, found in candidates.items() if found]
    edits: list[Edit] = []
    taken: list[FieldPath] = []
    for kind in draw(st.lists(st.sampled_from(kinds), min_size=1, max_size=6)):
        path, value = draw(st.sampled_from(candidates[kind]))
        if any(related(path, other) for other in taken):
            continue
        taken.append(path)
        edits.append(RemoveKey(path) if kind == "remove" else SetValue(path, value))

    expected = copy.deepcopy(tree)
    for one in edits:
        expected = apply(expected, one)

    allowed, keys = allowed_lines(root, out, edits)
    crlf = draw(st.booleans())
    return Case(
        text.replace("\n", "\r\n") if crlf else text,
        tree,
        out,
        edits,
        expected,
        allowed,
        keys,
        crlf,
        draw(st.booleans()),
    )


def apply(tree: Any, one: Edit) -> Any:
    """The edit applied to a plain tree (written independently of wizard.document)."""
    node = tree
    for part in one.path[:-1]:
        if isinstance(part, str) and node.get(part) is None:
            node[part] = {}
        node = node[part]
    if isinstance(one, SetValue):
        node[one.path[-1]] = copy.deepcopy(one.value)
    else:
        del node[one.path[-1]]
    return tree


def allowed_lines(root: Map, out: Rendered, edits: list[Edit]) -> tuple[set[int], set[str]]:
    """Lines an edit set may change, and the keys its new lines may hold.

    A field's own lines (key line to last content line) may change. So may the key line
    of the section that holds it when that section is written inline (``{...}``), is an
    empty section the edit adds to, or loses all of its keys to the edits.
    """
    allowed: set[int] = set()
    keys: set[str] = set()
    removed: Counter[FieldPath] = Counter()
    for one in edits:
        keys.update(part for part in one.path if isinstance(part, str))
        if one.path in out.spans:
            first, last = out.spans[one.path]
            allowed.update(range(first, last + 1))
        for depth in range(len(one.path) - 1, 0, -1):
            parent = one.path[:depth]
            if parent in out.spans:
                holder = node_at(root, parent)
                if isinstance(holder, Map) and (holder.flow or not holder.entries):
                    allowed.add(out.spans[parent][0])
                break
        if isinstance(one, RemoveKey):
            removed[one.path[:-1]] += 1
    for parent, count in removed.items():
        holder = node_at(root, parent)
        if isinstance(holder, Map) and count == len(holder.entries) and parent in out.spans:
            allowed.add(out.spans[parent][0])
    return allowed, keys


def node_at(root: Map, path: FieldPath) -> Node | None:
    node: Node = root
    for part in path:
        if isinstance(part, int) and isinstance(node, MapList):
            node = node.items[part]
        elif isinstance(part, str) and isinstance(node, Map):
            match = [entry.value for entry in node.entries if entry.key == part]
            if not match:
                return None
            node = match[0]
        else:
            return None
    return node


# --------------------------------------------------------------------- the property


def strictly_equal(a: Any, b: Any) -> bool:
    """Equal with the same types all the way down (1 is not 1.0, True is not 1)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(strictly_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(strictly_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def is_subsequence(needles: list[str], haystack: list[str]) -> bool:
    it = iter(haystack)
    return all(any(line == candidate for candidate in it) for line in needles)


_LINE_KEY = re.compile(r"^\s*(?:-\s+)?['\"]?([^'\":#\s]+)['\"]?\s*:")
_LIST_ITEM = re.compile(r"""^\s*-\s+(?:"[^"]*"|'[^']*'|[^:#'"]*)\s*(?:#.*)?$""")


def check_the_generator(case: Case) -> None:
    """The generator writes what it means: the toolkit's loader reads the modelled tree."""
    assert strictly_equal(yaml.load(case.text, Loader=ToolkitLoader), case.tree)


def check_yaml_edits(case: Case) -> None:
    """The YAML edits change exactly the edited fields (the module's six points)."""
    document = parse_document(case.text, source=Path("job.yaml"), fmt="yaml", bom=case.bom)

    edited = document.with_edits(case.edits)
    saved = edited.with_header_comment(HEADER).to_bytes()  # what save() writes

    # 1. the toolkit reads the source tree plus exactly the edits
    text = saved.decode("utf-8")
    assert text.startswith("\ufeff") is case.bom
    text = text.removeprefix("\ufeff")
    assert strictly_equal(yaml.load(text, Loader=ToolkitLoader), case.expected)
    # 2. line endings
    if case.crlf:
        assert re.search(r"(?<!\r)\n", text) is None
    else:
        assert "\r" not in text
    before = case.text.splitlines()
    after = text.splitlines()
    if not case.bom:  # the one line save() adds, naming the change log
        assert after[0] == f"# {HEADER}"
        after = after[1:]
    # 3. every line outside the edited fields survives, in order
    kept = [line for i, line in enumerate(before) if i not in case.allowed_lines]
    assert is_subsequence(kept, after)
    # 4. every other line is an edited key, an item of a replaced list, or an old line kept
    old_allowed = Counter(before[i] for i in case.allowed_lines)
    for line in (Counter(after) - Counter(kept)).elements():
        if old_allowed[line] > 0:
            old_allowed[line] -= 1
            continue
        key = _LINE_KEY.match(line)
        assert (key is not None and key.group(1) in case.edited_keys) or _LIST_ITEM.match(line), (
            f"unexpected line {line!r}"
        )
    # 5. a block list stays a block list, a flow list a flow list
    for one in case.edits:
        if isinstance(one, SetValue) and isinstance(one.value, list) and one.value:
            where = edited.position(one.path)
            assert where is not None
            first_char = after[where[0] - 1][where[1] - 1]
            if one.path in case.rendered.block_lists:
                assert first_char != "["
            elif one.path in case.rendered.spans:
                assert first_char == "["
    # 6. an inline comment on a changed scalar stays at the end of its line
    for one in case.edits:
        comment = case.rendered.comments.get(one.path)
        if isinstance(one, SetValue) and comment:
            name = one.path[-1]
            assert any(
                _LINE_KEY.match(line) and f"{name}:" in line and line.endswith(f"  {comment}")
                for line in after
            )


JSON_LAYOUTS: list[dict[str, Any]] = [
    {"indent": 2},
    {"indent": 4},
    {"separators": (",", ":")},  # AI Toolkit's UI database (JSON.stringify)
    {},
]


def check_json_edits(case: Case, layout: dict[str, Any]) -> None:
    """The same configs and edits as JSON: the result is exactly the layout's own output."""
    text = json.dumps(case.tree, **layout)
    document = parse_document(text, source=Path("job.json"), fmt="json")

    edited = document.with_edits(case.edits)

    assert edited.text == json.dumps(case.expected, **layout)


@given(cases(), st.sampled_from(JSON_LAYOUTS))
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_edits_change_exactly_the_edited_fields(case: Case, layout: dict[str, Any]) -> None:
    """Each generated config and edit set, checked three ways: the generator wrote what it
    means, the YAML edits change exactly the edited fields, and the same edits on the JSON
    forms give exactly the layout's own output.

    One pass over one case: making a case is about half of the CPU, and the three checks
    were three tests that each made their own (50, 150 and 150 examples); each now gets
    100 of the same strategy's cases, the same ones on every run (the suite's profile).
    """
    check_the_generator(case)
    check_yaml_edits(case)
    check_json_edits(case, layout)
