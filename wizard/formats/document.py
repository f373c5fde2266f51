"""The job document: a config file loaded as AI Toolkit loads it, edited surgically.

``load_document`` reads a ``.yaml``/``.yml``/``.json``/``.jsonc`` file defensively
(size, binary content, encoding, syntax, unsafe tags, alias bombs) and returns an
immutable ``JobDocument``: the text as it is on disk, the tree the toolkit would
see, and the typed view of its memory settings. ``JobDocument.with_edits`` returns
a new document whose text differs from this one only in the edited fields; every
edit is checked by loading the new text again and comparing it with the tree we
meant to produce, so a formatting surprise becomes a refusal, never a wrong config.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
import math
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias

from oom_wizard.errors import ConfigError, EditError
from oom_wizard.files import file_kind
from oom_wizard.formats.jsonedit import JsonText, duplicate_keys
from oom_wizard.formats.view import JobView, build_view
from oom_wizard.formats.yamledit import YamlText
from oom_wizard.formats.yamlload import ComposedYaml, check_limits, compose, construct
from oom_wizard.paths import MISSING as MISSING, FieldPath, format_path

Format: TypeAlias = Literal["yaml", "json"]

#: Real job configs are a few kilobytes; anything past this is not one.
MAX_CONFIG_BYTES: Final = 2 * 1024 * 1024

YAML_SUFFIXES: Final = (".yaml", ".yml")
JSON_SUFFIXES: Final = (".json", ".jsonc")
BOM: Final = "\ufeff"


@dataclass(frozen=True)
class SetValue:
    """Set the field at ``path`` to ``value``, adding the key (and its sections) if missing."""

    path: FieldPath
    value: Any


@dataclass(frozen=True)
class RemoveKey:
    """Remove the key at ``path`` (nothing happens when it is absent)."""

    path: FieldPath


Edit: TypeAlias = SetValue | RemoveKey


@dataclass(frozen=True)
class JobDocument:
    """One job config: its text, the tree AI Toolkit would load, and its typed view.

    Attributes:
        source: The file it was read from (for a database job, a descriptive path).
        fmt: ``"yaml"`` or ``"json"`` (``.jsonc`` is JSON with comments).
        text: The text without the byte-order mark, line endings as in the file.
        tree: Exactly what AI Toolkit's loader produces from the text.
        bom: The file starts with a UTF-8 byte-order mark.
        newline: ``"\\r\\n"`` or ``"\\n"``, whichever the file uses.
        warnings: Things worth telling the user that do not stop us (duplicate keys...).
    """

    source: Path
    fmt: Format
    text: str
    tree: dict[str, Any]
    bom: bool = False
    newline: str = "\n"
    warnings: tuple[str, ...] = ()
    composed: ComposedYaml | None = field(default=None, repr=False, compare=False)
    """The YAML node graph the tree was built from (None for JSON): the editor reuses it."""

    @cached_property
    def _editor(self) -> YamlText | JsonText:
        if self.fmt == "yaml":
            composed = self.composed or compose(self.text, self.source)
            return YamlText(self.text, composed, self.newline)
        return JsonText(self.text, self.newline)

    @cached_property
    def _view(self) -> JobView:
        return build_view(self.tree, file=str(self.source), locate=self.position)

    def view(self) -> JobView:
        """The typed view of every memory-relevant field (validated on first use).

        Raises:
            ConfigError: a field has a value of the wrong type; names its line and column.
        """
        return self._view

    def get(self, path: FieldPath, default: Any = MISSING) -> Any:
        """The value at ``path`` in the tree, or ``default`` when it is absent."""
        node: Any = self.tree
        for part in path:
            if isinstance(part, int):
                if not isinstance(node, list) or not 0 <= part < len(node):
                    return default
            elif not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    def position(self, path: FieldPath) -> tuple[int, int] | None:
        """1-based (line, column) of the value at ``path`` in the file, if it is there."""
        return self._editor.position(path)

    def with_edits(self, edits: Iterable[Edit]) -> JobDocument:
        """A new document with ``edits`` applied to the text, one field at a time.

        Raises:
            EditError: an edit cannot be made without touching other fields, or the
                result would not load to exactly the intended tree.
        """
        edits = list(edits)
        document = self
        if len(edits) > 1 and _independent(edits):
            # Edits of unrelated fields commute: those that are one splice of the text go
            # in together (one parse checks them all), the others one at a time after.
            regions = [(edit, self._splice_of(edit)) for edit in edits]
            together = [(edit, region) for edit, region in regions if region is not None]
            if len(together) > 1:
                batched = self._apply_together(together)
                if batched is not None:
                    document = batched
                    edits = [edit for edit, region in regions if region is None]
        for edit in edits:
            document = document._apply(edit)
        return document

    def _splice_of(self, edit: Edit) -> tuple[int, int, str] | None:
        if not isinstance(edit, SetValue):
            return None
        try:
            _check_writable(edit.value, edit.path)
            return self._editor.splice_of(edit.path, edit.value)
        except EditError:
            return None

    def _apply_together(
        self, together: list[tuple[Edit, tuple[int, int, str]]]
    ) -> JobDocument | None:
        """The edits (each with its one splice of this text, none overlapping) in one pass.

        The result is parsed once and must load to exactly the intended tree; None (make
        the edits one at a time, which also names the one that fails) otherwise. This keeps
        a config with thousands of edited prompts linear instead of one parse per edit.
        """
        regions = [region for _, region in together]
        regions.sort(key=lambda region: region[0])  # stable: insertions keep the edits' order
        if any(a[1] > b[0] for a, b in itertools.pairwise(regions)):
            return None
        pieces: list[str] = []
        at = 0
        for start, end, replacement in regions:
            pieces += [self.text[at:start], replacement]
            at = end
        pieces.append(self.text[at:])
        expected = unshared_copy(self.tree)
        for edit, _ in together:
            _apply_in_place(expected, edit)
        try:
            edited = parse_document("".join(pieces), source=self.source, fmt=self.fmt, bom=self.bom)
        except ConfigError:
            return None
        return edited if same_value(edited.tree, expected) else None

    def _apply(self, edit: Edit) -> JobDocument:
        editor = self._editor
        try:
            if isinstance(edit, SetValue):
                _check_writable(edit.value, edit.path)
                text = editor.set_value(edit.path, edit.value)
            else:
                text = editor.remove_key(edit.path)
        except EditError as exc:
            if exc.file is not None:
                raise
            # The editor knows the place in the text; the file is this document's.
            raise EditError(
                exc.message, file=self.source, line=exc.line, column=exc.column
            ) from None
        expected = apply_to_tree(self.tree, edit)
        try:
            edited = parse_document(text, source=self.source, fmt=self.fmt, bom=self.bom)
        except ConfigError as exc:
            raise EditError(
                f"editing {format_path(edit.path)} would break the file ({exc.message}); "
                "nothing was written"
            ) from None
        if not same_value(edited.tree, expected):
            raise EditError(
                f"editing {format_path(edit.path)} would not give the intended config; "
                "nothing was written. Please report this file's layout"
            )
        return edited

    def with_header_comment(self, line: str) -> JobDocument:
        """The same document with ``# line`` as its first line (YAML only, once).

        A file with a byte-order mark gets no header: the mark belongs to the first
        line, and a line put above it would change that line too.
        """
        comment = f"# {line}"
        if self.fmt != "yaml" or self.bom or self.text.startswith(comment):
            return self
        # A comment line above everything never changes what YAML reads (not even before a
        # directive), so the tree stays; only the text, and so the node positions, move.
        return dataclasses.replace(self, text=comment + self.newline + self.text, composed=None)

    def to_bytes(self) -> bytes:
        """The bytes to write: the text, UTF-8, with the byte-order mark if the source had one."""
        return ((BOM if self.bom else "") + self.text).encode("utf-8")


# --------------------------------------------------------------------- loading


def load_document(path: str | Path) -> JobDocument:
    """Read a job config as AI Toolkit would, refusing anything unsafe or broken.

    It reads the file as it is: a user's config is opened through
    :func:`oom_wizard.storage.jobdir.load_config`, which first finishes or undoes a killed save
    beside it.

    Raises:
        ConfigError: the file is missing, unreadable, too large, binary, not UTF-8,
            not valid YAML/JSON, or not an AI Toolkit job.
    """
    path = Path(path)
    try:
        fmt = format_for(path)
    except OSError as exc:  # e.g. a name longer than the file system allows
        raise ConfigError(f"cannot use this name: {exc.strerror or exc}", file=path) from None
    data = _read_bounded(path)
    if data.startswith((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")):
        raise ConfigError(
            "this file is saved as UTF-32; AI Toolkit reads UTF-8: save it as UTF-8", file=path
        )
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ConfigError(
            "this file is saved as UTF-16; AI Toolkit reads UTF-8: save it as UTF-8", file=path
        )
    if b"\x00" in data:
        raise ConfigError("this is a binary file, not a job config", file=path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ConfigError(
            f"byte 0x{data[exc.start]:02x} is not UTF-8 text; save the file as UTF-8",
            file=path,
            line=line,
            column=column,
        ) from None
    bom = text.startswith(BOM)
    document = parse_document(text.removeprefix(BOM), source=path, fmt=fmt, bom=bom)
    document.view()  # validate now: a bad value is a load error, with its position
    notes = _toolkit_would_refuse(path, fmt, bom) + _not_json_values(document)
    if notes:
        document = dataclasses.replace(document, warnings=(*document.warnings, *notes))
    return document


def _toolkit_would_refuse(path: Path, fmt: Format, bom: bool) -> tuple[str, ...]:
    """What AI Toolkit's own loader refuses in a file we can read (kept as it is on save).

    The toolkit opens configs as UTF-8 text, picks its reader by the exact, lower-case
    suffix, and hands JSON to ``json.loads``, which refuses a byte-order mark.
    """
    notes = []
    if path.suffix not in (*YAML_SUFFIXES, *JSON_SUFFIXES):
        notes.append(
            f"{path}: AI Toolkit reads only names ending in lower-case .yaml, .yml, .json or "
            f".jsonc and refuses '{path.suffix}'; rename the file before you run it"
        )
    if path.suffix.lower() == ".jsonc" and _has_json_comments(path):
        notes.append(
            f"{path}: has // or /* */ comments; AI Toolkit reads .jsonc with plain json.loads, "
            "which refuses them (only the UI's importer strips them); the output keeps them"
        )
    if fmt == "json" and bom:
        notes.append(
            f"{path}: starts with a byte-order mark, which AI Toolkit's JSON reader refuses "
            "('Unexpected UTF-8 BOM'); the output keeps it: save it without the mark to run it"
        )
    return tuple(notes)


def _has_json_comments(path: Path) -> bool:
    try:
        text = read_regular_file(path, MAX_CONFIG_BYTES).decode("utf-8", "replace")
    except OSError:
        return False
    return "/" in text and strip_json_comments(text) != text


def _not_json_values(document: JobDocument) -> tuple[str, ...]:
    """Values AI Toolkit cannot pass through ``json.dumps``, which it does to every config.

    YAML 1.1 reads ``2024-01-01`` as a date, ``!!binary`` as bytes and ``!!set`` as a set;
    the toolkit's start-up turns the config into JSON (for ``[name]``) and stops on them.
    """
    notes = []
    stack: list[tuple[FieldPath, Any]] = [((), document.tree)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict):
            stack.extend(((*path, str(key)), child) for key, child in value.items())
        elif isinstance(value, list):
            stack.extend(((*path, index), child) for index, child in enumerate(value))
        elif not (value is None or isinstance(value, (str, int, float))):
            where = document.position(path)
            at = f"{where[0]}:{where[1]}: " if where else " "
            notes.append(
                f"{document.source}:{at}{format_path(path)} is read as a "
                f"{type(value).__name__}, which AI Toolkit cannot turn into JSON at start-up; "
                "put the value in quotes"
            )
    return tuple(sorted(notes))


def format_for(path: Path) -> Format:
    """``yaml`` or ``json`` from the file name, as AI Toolkit chooses its parser."""
    suffix = path.suffix.lower()
    if suffix in YAML_SUFFIXES:
        return "yaml"
    if suffix in JSON_SUFFIXES:
        return "json"
    if path.is_dir():
        raise ConfigError(
            "this is a folder; pass a job folder's config file, or the folder to 'oom-wizard'",
            file=path,
        )
    raise ConfigError(
        "AI Toolkit reads only .yaml, .yml, .json and .jsonc job files; rename or pick the config",
        file=path,
    )


def _read_bounded(path: Path) -> bytes:
    try:
        data = read_regular_file(path, MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError("no such file; check the path", file=path) from None
    except IsADirectoryError:
        raise ConfigError("this is a folder, not a config file", file=path) from None
    except NotRegularFile as exc:
        raise ConfigError(f"this is {exc.kind}, not a config file", file=path) from None
    except OSError as exc:
        raise ConfigError(f"cannot read it: {exc.strerror}", file=path) from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"larger than {MAX_CONFIG_BYTES // (1024 * 1024)} MiB, which no job config is; "
            "is this the right file?",
            file=path,
        )
    return data


class NotRegularFile(OSError):
    """A path that is a FIFO, a device or a socket: reading it could block or never end."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


def read_regular_file(path: Path, limit: int) -> bytes:
    """At most ``limit`` bytes of ``path``, which must be a regular file.

    The file is opened without blocking (a FIFO would wait for a writer) and checked with
    ``fstat`` on the open descriptor, so nothing can swap it for another kind meanwhile.

    Raises:
        NotRegularFile: a FIFO, device, socket or folder.
        OSError: it cannot be opened or read.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(21, "Is a directory", str(path))
        if not stat.S_ISREG(mode):
            raise NotRegularFile(_kind_of(mode))
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(limit)
    finally:
        os.close(fd)


#: Why reading a file of a kind would not end (:func:`oom_wizard.files.file_kind`).
_ENDLESS = {
    "a pipe (FIFO)": ", which could wait forever",
    "a device": ", which can be read forever",
}


def _kind_of(mode: int) -> str:
    kind = file_kind(mode)
    return kind + _ENDLESS.get(kind, "")


def parse_document(text: str, *, source: Path, fmt: Format, bom: bool = False) -> JobDocument:
    """A document from text already in memory (a file's content, a database column).

    Raises:
        ConfigError: the text is not valid YAML/JSON or its top level is not a mapping.
    """
    newline = "\r\n" if "\r\n" in text else "\n"
    check_limits(text, source)
    composed: ComposedYaml | None = None
    try:
        if fmt == "yaml":
            composed = compose(text, source)
            warnings = composed.duplicates
            tree = construct(composed, source)
            if "<<" in text:
                composed = None  # constructing merge keys rewrites the node graph in place
        else:
            tree, warnings = _load_json(text, source)
    except RecursionError:
        # The depth bound above should make this unreachable; never a traceback if not.
        raise ConfigError(
            "nested too deeply to read; no job config is: is this the right file?", file=source
        ) from None
    if not isinstance(tree, dict):
        kind = "a list" if isinstance(tree, list) else f"a single value ({tree!r:.40})"
        raise ConfigError(
            f"the file holds {kind}, not a job config (a mapping with 'job' and 'config')",
            file=source,
            line=1,
            column=1,
        )
    return JobDocument(
        source=source,
        fmt=fmt,
        text=text,
        tree=tree,
        bom=bom,
        newline=newline,
        warnings=tuple(f"{source}:{note}" for note in warnings),
        composed=composed,
    )


#: A string (unrolled: linear, no backtracking), or a comment; a string is matched first,
#: so ``//`` inside one is text.
_COMMENT_OR_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|//[^\n]*|/\*.*?\*/', re.S)


def strip_json_comments(text: str) -> str:
    """``//`` and ``/* */`` comments blanked out (same length, line breaks kept)."""

    def blank(match: re.Match[str]) -> str:
        found = match.group(0)
        if found.startswith('"'):
            return found
        return re.sub(r"[^\r\n]", " ", found)

    return _COMMENT_OR_STRING.sub(blank, text)


def _load_json(text: str, source: Path) -> tuple[Any, tuple[str, ...]]:
    stripped = strip_json_comments(text) if "/" in text else text
    if stripped != text and source.suffix.lower() == ".json":
        at = next(i for i, (a, b) in enumerate(zip(text, stripped, strict=True)) if a != b)
        line = text.count("\n", 0, at) + 1
        column = at - (text.rfind("\n", 0, at) + 1) + 1
        kind = "//" if text.startswith("//", at) else "/* */"
        raise ConfigError(
            f"a {kind} comment; AI Toolkit reads .json files with json.loads, which refuses "
            "comments: delete it",
            file=source,
            line=line,
            column=column,
        )
    if not stripped.strip():
        raise ConfigError("the file is empty; pass the job's config file", file=source)
    try:
        tree = json.loads(stripped)
    except json.JSONDecodeError as exc:
        raise _json_error(stripped, exc, source) from None
    return tree, tuple(duplicate_keys(text))


def _json_error(text: str, exc: json.JSONDecodeError, source: Path) -> ConfigError:
    """The decoder's complaint, in words for a trailing comma before a closing bracket."""
    before = text[: exc.pos].rstrip()
    closing = text[exc.pos : exc.pos + 1]
    if before.endswith(",") and closing and closing in "}]":
        message = "a trailing comma before the closing bracket; JSON does not allow it: delete it"
    else:
        message = f"JSON syntax error: {exc.msg}"
    return ConfigError(message, file=source, line=exc.lineno, column=exc.colno)


# ----------------------------------------------------------- tree arithmetic


def _independent(edits: list[Edit]) -> bool:
    """No edit's path is another's, or inside another's (so their order cannot matter)."""
    paths = {edit.path for edit in edits}
    if len(paths) < len(edits):
        return False
    return not any(path[:depth] in paths for path in paths for depth in range(1, len(path)))


def apply_to_tree(tree: dict[str, Any], edit: Edit) -> dict[str, Any]:
    """A copy of ``tree`` with ``edit`` applied: what the edited text must load to.

    The copy shares nothing: a value that YAML aliases into two places is two values
    here, so an edit that changes the other place too shows up as a difference.
    """
    result: dict[str, Any] = unshared_copy(tree)
    _apply_in_place(result, edit)
    return result


def apply_edits(tree: dict[str, Any], edits: Iterable[Edit]) -> dict[str, Any]:
    """A copy of ``tree`` (sharing nothing) with every edit applied in order (one copy)."""
    result: dict[str, Any] = unshared_copy(tree)
    for edit in edits:
        _apply_in_place(result, edit)
    return result


def _apply_in_place(result: dict[str, Any], edit: Edit) -> None:
    node: Any = result
    for part in edit.path[:-1]:
        if isinstance(part, int):
            node = node[part]
            continue
        if node.get(part) is None:  # absent, or an empty section (`sample:`)
            if isinstance(edit, RemoveKey):
                return
            node[part] = {}
        node = node[part]
    last = edit.path[-1]
    if isinstance(edit, SetValue):
        node[last] = unshared_copy(edit.value)
    elif isinstance(node, dict):
        node.pop(last, None)
    elif isinstance(node, list) and isinstance(last, int) and 0 <= last < len(node):
        del node[last]


def unshared_copy(value: Any) -> Any:
    """A deep copy in which no two places share a list or mapping (unlike ``copy.deepcopy``,
    which keeps YAML aliases aliased). Iterative: depth is bounded by the loader already."""
    if not isinstance(value, (dict, list)):
        return copy.copy(value)
    root: Any = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, Any]] = [(value, root)]
    while stack:
        source, target = stack.pop()
        items = source.items() if isinstance(source, dict) else enumerate(source)
        for key, child in items:
            if isinstance(child, (dict, list)):
                fresh: Any = {} if isinstance(child, dict) else []
                stack.append((child, fresh))
            else:
                fresh = child
            if isinstance(target, dict):
                target[key] = fresh
            else:
                target.append(fresh)
    return root


def same_value(a: Any, b: Any) -> bool:
    """Equal as AI Toolkit would see them: bools are not numbers, 1 == 1.0, NaN == NaN."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
            return True
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def _check_writable(value: Any, path: FieldPath) -> None:
    if isinstance(value, dict):
        for child in value.values():
            _check_writable(child, path)
    elif isinstance(value, list):
        for child in value:
            _check_writable(child, path)
    elif value is not None and not isinstance(value, (bool, int, float, str)):
        raise EditError(f"{format_path(path)}: cannot write a {type(value).__name__}")
