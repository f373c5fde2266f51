"""The reading side of the log scanner: the cheap test for a whole chunk, progress, cancel.

:mod:`oom_wizard.logs.scan` reads a log in chunks of bytes. Most lines of a real log say nothing
(library warnings, a logger's chatter, dataset notes), so a chunk is first searched with one
*trigger*: a byte expression that finds every place where some marker could match. Only the
lines it finds go to the rules; the others are only counted.

Python's ``re`` tries the trigger at every position (20-25 MB/s), so the :class:`Gate` asks the
same question first, 64 KB at a time: could some marker match here? It is answered by
pydantic-core's Rust regex engine (already installed with pydantic) over the whole region. Only
the pieces it says yes to are searched by the trigger; elsewhere only a progress bar is read.

The trigger is derived from the marker table's own joined expression, so a marker added later
is covered without touching this module. :func:`required_strings` walks a pattern's parse tree
and returns strings of which every match must contain one (``^Loading\\b`` → ``Loading``;
``(?:CUDA|HIP) out of memory`` → `` out of memory``). :func:`build_trigger` keeps a short
window of each (starting at its rarest byte, so that the search engine skips most of a chunk
at its first-byte check) and joins the windows as a trie. The windows are found in the raw
bytes because decoding (``errors="replace"``), removing ANSI codes and line prefixes never
create text: a line holding an escape byte is always looked at, as is every progress bar
(``%|``).

A case-insensitive rule matches more than ASCII case: Python's ``re`` folds ``K`` (Kelvin
sign) to ``k``, ``ſ`` to ``s`` and ``İ``/``ı`` to ``i`` (:data:`NON_ASCII_FOLDS`). The byte
search spells those forms out beside the two ASCII cases, so that it never misses them.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib
import itertools
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from pydantic_core import SchemaError, SchemaValidator, core_schema

_parser: Any = importlib.import_module("re._parser" if sys.version_info >= (3, 11) else "sre_parse")

NON_ASCII_FOLDS: Final[dict[str, tuple[str, ...]]] = {
    "i": ("\u0130", "\u0131"),
    "k": ("\u212a",),
    "s": ("\u017f",),
}
"""ASCII letters that a case-insensitive ``re`` pattern also matches as non-ASCII characters."""
ALWAYS: Final[tuple[bytes, ...]] = (b"%|", b"\x1b")
"""Byte strings whose lines are always read: a progress bar, and an ANSI escape."""
WINDOW: Final = 16
"""Characters kept of each required string, from its rarest one on."""
MIN_WINDOW: Final = 4
"""A window shorter than this many bytes costs ``SHORT_COST`` for each byte it lacks."""
SHORT_COST: Final = 100.0
"""The cost of each byte a window lacks of ``MIN_WINDOW`` (see :func:`_cost`)."""
SPACE_WEIGHT: Final = 400.0
"""A space is several times as common as the commonest letter: a window starting at one (the
`` in `` of a traceback frame) is found in most lines of ordinary text."""

# How often a byte shows in ordinary log text, most frequent first: space, lowercase English
# letters by frequency, with the digits (logs are full of numbers) and the punctuation of
# paths, numbers and identifiers among them. A byte not listed (uppercase, the rarer
# punctuation, control bytes) counts as rare.
_COMMON: Final = " etaoins0rhl1d2c5u34m6789._/-:fpgw,=ybv()[]'\"kxjqz"

Required = frozenset[tuple[str, bool]]
"""Strings, each with whether it is matched ignoring case; every match holds one of them."""


class ScanCancelled(Exception):
    """Reading the log was cancelled (by the cancellation check given to the scanner)."""


# --- what every match of a pattern must contain --------------------------------------------------


def required_strings(pattern: str) -> Required | None:
    """Strings of which every match of ``pattern`` holds at least one (None: none is needed).

    A superset is always safe: a string is only kept when the parse tree proves it is in every
    match (a literal run of a sequence, every branch of an alternation, a group repeated at
    least once). Anchors, classes and optional parts add nothing.
    """
    return _sequence(_parse(pattern), ignore_case=False)


@functools.lru_cache(maxsize=1024)
def _parse(pattern: str) -> Any:
    """The parse tree of ``pattern``, once for :func:`required_strings` and
    :func:`gate_expression` (both only read it)."""
    return _parser.parse(pattern)


def _sequence(items: Any, *, ignore_case: bool) -> Required | None:
    options: list[Required] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            options.append(frozenset({("".join(run), ignore_case)}))
            run.clear()

    for op, arg in items:
        name = str(op)
        if name == "LITERAL":
            char = chr(arg)
            if char in "\r\n" or (ignore_case and not char.isascii()):
                flush()  # a segment never holds \r or \n; other cases of non-ASCII: unknown
            else:
                run.append(char)
            continue
        if name == "BRANCH" and run:
            # The parser moves a prefix that all alternatives share in front of them
            # (``Error|Exception`` → ``E(?:rror|xception)``): join it back.
            heads = [_literal_head(alternative, ignore_case=ignore_case) for alternative in arg[1]]
            options.append(frozenset(("".join(run) + head, ignore_case) for head in heads))
        flush()
        found = _item(name, arg, ignore_case=ignore_case)
        if found is not None:
            options.append(found)
    flush()
    if not options:
        return None
    return min(options, key=_cost)


def _cost(option: Required) -> float:
    """How much searching for ``option`` costs (lower is better).

    Every string is searched by its window, found first by its first byte: an option of rare
    first bytes is cheap even when it holds a few strings, and a window shorter than
    ``MIN_WINDOW`` bytes is expensive (it is found in many lines that say nothing).
    """
    return sum(_window_cost(_window(text, ignore_case=icase), icase) for text, icase in option)


def _window_cost(window: str, ignore_case: bool) -> float:
    # the search runs over bytes: a non-ASCII character (rich's box line) is 2-4 of them
    short = max(MIN_WINDOW - len(window.encode("utf-8")), 0)
    return _rarity(window[0], ignore_case=ignore_case) + SHORT_COST * short


def _literal_head(items: Any, *, ignore_case: bool) -> str:
    """The literal characters a sequence starts with (cut as :func:`_sequence` cuts them)."""
    head: list[str] = []
    for op, arg in items:
        if str(op) != "LITERAL":
            break
        char = chr(arg)
        if char in "\r\n" or (ignore_case and not char.isascii()):
            break
        head.append(char)
    return "".join(head)


def _item(name: str, arg: Any, *, ignore_case: bool) -> Required | None:
    if name == "SUBPATTERN":
        _group, add_flags, del_flags, body = arg
        if add_flags & re.IGNORECASE:
            ignore_case = True
        if del_flags & re.IGNORECASE:
            ignore_case = False
        return _sequence(body, ignore_case=ignore_case)
    if name == "ATOMIC_GROUP":
        return _sequence(arg, ignore_case=ignore_case)
    if name == "BRANCH":
        union: set[tuple[str, bool]] = set()
        for alternative in arg[1]:
            found = _sequence(alternative, ignore_case=ignore_case)
            if found is None:
                return None
            union |= found
        return frozenset(union)
    if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
        low, _high, body = arg
        return _sequence(body, ignore_case=ignore_case) if low >= 1 else None
    return None


def cases(char: str, *, ignore_case: bool) -> list[str]:
    """Every character ``char`` matches as a pattern's literal (see :data:`NON_ASCII_FOLDS`)."""
    if not ignore_case or not char.isalpha():
        return [char]
    lower = char.lower()
    return sorted({lower, char.upper(), *NON_ASCII_FOLDS.get(lower, ())})


def window_pattern(text: str, *, ignore_case: bool) -> bytes:
    """A byte expression that finds ``text`` wherever the pattern it comes from could."""
    parts = []
    for char in text:
        forms = [re.escape(form.encode("utf-8")) for form in cases(char, ignore_case=ignore_case)]
        parts.append(forms[0] if len(forms) == 1 else b"(?:" + b"|".join(forms) + b")")
    return b"".join(parts)


# --- the trigger ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Window:
    """A short piece of a required string, and the patterns that need it."""

    text: str
    ignore_case: bool
    patterns: tuple[int, ...]
    data: bytes = b""
    regex: re.Pattern[bytes] | None = None

    @classmethod
    def of(cls, text: str, ignore_case: bool, patterns: tuple[int, ...]) -> _Window:
        """The window ``text`` (a regular expression for it when case is ignored)."""
        if ignore_case:
            regex = re.compile(window_pattern(text, ignore_case=True))
            return cls(text, ignore_case, patterns, regex=regex)
        return cls(text, ignore_case, patterns, data=text.encode("utf-8"))

    def first_bytes(self) -> set[int]:
        """The bytes a match of the window can start with."""
        forms = cases(self.text[0], ignore_case=self.ignore_case)
        return {form.encode("utf-8")[0] for form in forms}

    def at(self, raw: bytes, pos: int) -> bool:
        """Whether the window is in ``raw`` at ``pos``."""
        if self.regex is not None:
            return self.regex.match(raw, pos) is not None
        return raw.startswith(self.data, pos)


class Trigger:
    """The cheap test of the log's lines, built from the marker patterns.

    ``search`` over a chunk of bytes finds every line that could match one of the patterns;
    :meth:`passes` then runs, on one such segment, only the patterns whose windows it holds.
    """

    def __init__(
        self,
        search: re.Pattern[bytes],
        windows: dict[int, list[_Window]],
        patterns: Sequence[re.Pattern[str]],
        joined: re.Pattern[str],
    ) -> None:
        self.search = search
        """Finds a window (or a bar's ``%|``, or an escape byte) in a chunk of bytes."""
        self._windows = windows
        self._patterns = patterns
        self._joined = joined

    def passes(self, raw: bytes, text: str) -> bool:
        """Whether some pattern matches ``text``, the cleaned form of the segment ``raw``."""
        if b"\x1b" in raw:
            return self._joined.search(text) is not None  # its codes removed, text is new
        tried: set[int] = set()
        search, windows, patterns = self.search.search, self._windows, self._patterns
        pos = 0
        while (match := search(raw, pos)) is not None:
            pos = match.start()
            for window in windows.get(raw[pos], ()):
                if window.at(raw, pos):
                    for index in window.patterns:
                        if index not in tried:
                            if patterns[index].search(text):
                                return True
                            tried.add(index)
            pos += 1
        return False

    def patterns_in(self, raw: bytes) -> set[int] | None:
        """The patterns (their indexes) whose fixed text the segment ``raw`` holds: no other
        can match its cleaned form. None when it holds an escape (removing it makes new text)."""
        if b"\x1b" in raw:
            return None
        found: set[int] = set()
        search, windows = self.search.search, self._windows
        pos = 0
        while (match := search(raw, pos)) is not None:
            pos = match.start()
            for window in windows.get(raw[pos], ()):
                if window.at(raw, pos):
                    found.update(window.patterns)
            pos += 1
        return found


def build_trigger(
    sources: Sequence[str],
    joined: re.Pattern[str],
    *,
    patterns: Sequence[re.Pattern[str]] | None = None,
) -> Trigger | None:
    """The :class:`Trigger` of the patterns ``sources`` (regular expressions over text).

    ``joined`` matches where any of them does (it is asked about a line with ANSI codes);
    ``patterns``, when the caller has them, are the sources compiled, in the same order.

    None when some pattern needs no fixed text at all: then every line must be read.
    """
    owners: dict[tuple[str, bool], set[int]] = {}
    for index, source in enumerate(sources):
        required = required_strings(source)
        if required is None:
            return None
        for text, ignore_case in required:
            piece = _window(text, ignore_case=ignore_case)
            owners.setdefault((piece, ignore_case), set()).add(index)
    windows: dict[int, list[_Window]] = {}
    branches: list[tuple[bytes, bytes]] = [(always, b"") for always in ALWAYS]
    for (text, ignore_case), indexes in sorted(owners.items()):
        window = _Window.of(text, ignore_case, tuple(sorted(indexes)))
        for first in window.first_bytes():
            windows.setdefault(first, []).append(window)
        if ignore_case:
            tail = window_pattern(text[1:], ignore_case=True)
            for form in cases(text[0], ignore_case=True):
                branches.append((form.encode("utf-8"), tail))
        else:
            branches.append((window.data, b""))
    compiled = [re.compile(source) for source in sources] if patterns is None else patterns
    return Trigger(re.compile(_alternation(branches)), windows, compiled, joined)


def _rarity(char: str, *, ignore_case: bool) -> float:
    """How often ``char`` shows in ordinary text (higher: more often)."""

    def weight(one: str) -> float:
        if one == " ":
            return SPACE_WEIGHT
        rank = _COMMON.find(one)
        return 1.0 if rank < 0 else 100.0 * 0.94**rank

    if ignore_case and char.isalpha():
        return weight(char.lower()) + weight(char.upper())
    return weight(char)


@functools.lru_cache(maxsize=4096)  # asked again for each option a pattern's tree offers
def _window(text: str, *, ignore_case: bool) -> str:
    """The few characters of ``text`` that are cheapest to search for: they start at a rare
    character, and are long enough not to be found everywhere (see :func:`_window_cost`)."""
    windows = [text[start : start + WINDOW] for start in range(len(text))]
    return min(windows, key=lambda window: _window_cost(window, ignore_case))


def _alternation(branches: list[tuple[bytes, bytes]]) -> bytes:
    """One expression for the windows, grouped by their first byte so that the search skips
    every other byte quickly.

    Each branch is literal bytes, then an expression (empty for an exact window).
    """
    exact: dict[int, list[bytes]] = {}
    tails: dict[int, list[bytes]] = {}
    for literal, tail in branches:
        if tail:
            tails.setdefault(literal[0], []).append(re.escape(literal[1:]) + tail)
        else:
            exact.setdefault(literal[0], []).append(literal[1:])
    alternatives = []
    for byte in sorted(exact.keys() | tails.keys()):
        words = exact.get(byte, [])
        inner = [_trie(sorted(words))] if words else []
        inner += sorted(set(tails.get(byte, [])))
        body = inner[0] if len(inner) == 1 else b"(?:" + b"|".join(inner) + b")"
        alternatives.append(re.escape(bytes([byte])) + body)
    return b"|".join(alternatives)


def _trie(words: list[bytes]) -> bytes:
    """``words`` as one alternation grouped by common prefixes (a word ends its branch)."""
    if any(not word for word in words):
        return b""
    groups: dict[int, list[bytes]] = {}
    for word in words:
        groups.setdefault(word[0], []).append(word[1:])
    branches = [re.escape(bytes([first])) + _trie(rests) for first, rests in groups.items()]
    if len(branches) == 1:
        return branches[0]
    return b"(?:" + b"|".join(branches) + b")"


# --- the gate: the same question at a machine's speed, for a whole region ---------------------


_TO_ASCII: Final = bytes(range(128)) + b"\x7f" * 128
"""The gate reads every non-ASCII byte as DEL (``\\x7f``): its text is ASCII, which the
engine takes as it is (no copy to UTF-8), one character per byte (the same offsets)."""
_NON_ASCII: Final = r"\x{7f}+"
"""Any non-ASCII character (its bytes, each read as DEL), or DEL."""
_ONE_CHAR: Final = r"(?:[\x{00}-\x{09}\x{0b}\x{0c}\x{0e}-\x{7e}]|\x{7f}+)"
"""Any character of a segment (never ``\\r`` or ``\\n``)."""
_TRAILING_SPACE: Final = r"[\x{09}\x{0b}\x{0c}\x{1c}-\x{20}\x{7f}]*"
"""What ``str.rstrip`` may have removed from the end of a segment."""
_SEGMENT_END: Final = "(?:" + _TRAILING_SPACE + r"(?:[\x{0a}\x{0d}]|\z))"
_END_ANCHORS: Final = ("AT_END", "AT_END_STRING")
_ASCII_CATEGORIES: Final[dict[str, tuple[tuple[int, int], ...]]] = {
    "CATEGORY_DIGIT": ((48, 57),),
    "CATEGORY_SPACE": ((9, 9), (11, 12), (28, 32)),
    "CATEGORY_WORD": ((48, 57), (65, 90), (95, 95), (97, 122)),
}
"""The ASCII members of ``\\d``, ``\\s`` and ``\\w`` (their other members are non-ASCII)."""
GATE_LEAD: Final = 6
"""Literal characters a gate expression should start with (when its pattern has so many)."""
REGION: Final = 64 * 1024
"""Bytes the gate is first asked about at a time (a whole number of lines)."""
PIECE: Final = 2 * 1024
"""A region the gate finds something in is cut down to about this size."""
FANOUT: Final = 8
"""Parts a region the gate finds something in is cut into at each level: the gate reads each
byte of a region once per level, so few wide levels cost less than many halvings (a 64 KB
region with one hot line: about 2x its bytes, not 6x)."""


class _Untranslatable(Exception):
    """A part of a pattern the gate has no superset for."""


def gate_expression(pattern: str) -> str | None:
    """A Rust-syntax expression that matches, in the raw bytes of a segment as the gate reads
    them (:data:`_TO_ASCII`), wherever ``pattern`` could match its cleaned text (None: it
    cannot tell).

    It is a superset: anchors other than ``$`` and look-arounds are dropped, and so is what
    comes before the pattern's first literal words; a class, or a letter that folds to a
    non-ASCII one, also takes any run of non-ASCII bytes (a character that is not ASCII, or
    bytes ``errors="replace"`` made one); ``$`` is the end of the segment after what
    ``rstrip`` removes. It never crosses a ``\\r`` or ``\\n``, and it also matches a part of a
    segment the rules read (the text after a bar's ``]``).
    """
    parsed = _parse(pattern)
    ignore_case = bool(parsed.state.flags & re.IGNORECASE)
    items = _but_anchors(parsed)
    while len(items) == 1 and str(items[0][0]) == "SUBPATTERN":  # the whole pattern in a group
        _group, add_flags, del_flags, body = items[0][1]
        ignore_case = _flags(ignore_case, add_flags, del_flags)
        items = _but_anchors(body)
    # A match of the rest of a sequence is inside a match of the whole: what comes before its
    # first long enough literal start can go, so that the engine's prefilter looks for that
    # text (the words a marker starts with, not a dash and a space).
    leads = [0] * (len(items) + 1)  # leads[i]: the literal characters items[i:] start with
    for index in range(len(items) - 1, -1, -1):
        count, whole = _lead(items[index : index + 1], ignore_case=ignore_case)
        leads[index] = count + (leads[index + 1] if whole else 0)
    leads.pop()
    enough = min(GATE_LEAD, max(leads, default=0))
    start = next((start for start, lead in enumerate(leads) if lead >= enough), 0)
    try:
        return _gate_sequence(items[start:], ignore_case=ignore_case)
    except _Untranslatable:
        return None


def _but_anchors(items: Any) -> list[Any]:
    """``items`` without the anchors the gate drops (all but the end of the segment)."""
    return [item for item in items if str(item[0]) != "AT" or str(item[1]) in _END_ANCHORS]


def _flags(ignore_case: bool, add_flags: int, del_flags: int) -> bool:
    if add_flags & re.IGNORECASE:
        return True
    if del_flags & re.IGNORECASE:
        return False
    return ignore_case


def _lead(items: Any, *, ignore_case: bool) -> tuple[int, bool]:
    """How many literal characters every match of ``items`` starts with (ASCII ones when case
    is ignored), and whether that is all of it."""
    count = 0
    for op, arg in items:
        name = str(op)
        if name in ("ASSERT", "ASSERT_NOT") or (name == "AT" and str(arg) not in _END_ANCHORS):
            continue
        if name == "LITERAL":
            char = chr(arg)
            if char in "\r\n" or (ignore_case and not char.isascii()):
                return count, False
            count += 1
            continue
        if name == "SUBPATTERN":
            _group, add_flags, del_flags, body = arg
            inner, whole = _lead(body, ignore_case=_flags(ignore_case, add_flags, del_flags))
        elif name == "BRANCH":
            found = [_lead(other, ignore_case=ignore_case) for other in arg[1]]
            inner = min(length for length, _ in found)
            whole = all(all_of and length == inner for length, all_of in found)
        else:
            return count, False
        count += inner
        if not whole:
            return count, False
    return count, True


def _hex(code: int) -> str:
    return f"\\x{{{code:02x}}}"


def _gate_literal(code: int, *, ignore_case: bool) -> str:
    char = chr(code)
    if char in "\r\n":
        raise _Untranslatable  # a segment never holds one: the pattern cannot match
    if not char.isascii():
        if ignore_case or char == "\ufffd":
            return "(?:" + _NON_ASCII + ")"
        return _hex(0x7F) * len(char.encode("utf-8"))
    if ignore_case and char.isalpha():
        forms = "[" + _hex(ord(char.lower())) + _hex(ord(char.upper())) + "]"
        return f"(?:{forms}|{_NON_ASCII})" if char.lower() in NON_ASCII_FOLDS else forms
    return _hex(code)


def _gate_class(items: Any, *, ignore_case: bool) -> str:
    members: set[int] = set()
    negate = False
    for op, arg in items:
        name = str(op)
        if name == "NEGATE":
            negate = True
        elif name == "LITERAL":
            members.add(arg)
        elif name == "RANGE":
            members.update(range(arg[0], min(arg[1], 127) + 1))
        elif name == "CATEGORY":
            category = str(arg)
            positive = category.replace("_NOT_", "_")
            if positive not in _ASCII_CATEGORIES:
                raise _Untranslatable
            ascii_members = {
                code for low, high in _ASCII_CATEGORIES[positive] for code in range(low, high + 1)
            }
            members |= ascii_members if positive == category else set(range(128)) - ascii_members
        else:
            raise _Untranslatable
    members = {code for code in members if code < 128}
    if ignore_case:
        members |= {ord(chr(code).swapcase()) for code in members if chr(code).isalpha()}
    if negate:
        members = set(range(128)) - members
    members -= {10, 13}
    if not members:
        return "(?:" + _NON_ASCII + ")"
    return "(?:[" + "".join(_hex(code) for code in sorted(members)) + "]|" + _NON_ASCII + ")"


def _gate_sequence(items: Any, *, ignore_case: bool) -> str:
    out: list[str] = []
    for op, arg in items:
        name = str(op)
        if name == "LITERAL":
            out.append(_gate_literal(arg, ignore_case=ignore_case))
        elif name == "NOT_LITERAL" or name == "ANY":
            out.append(_ONE_CHAR)
        elif name == "IN":
            out.append(_gate_class(arg, ignore_case=ignore_case))
        elif name == "AT":
            if str(arg) in _END_ANCHORS:
                out.append(_SEGMENT_END)
        elif name == "SUBPATTERN":
            _group, add_flags, del_flags, body = arg
            inner = _flags(ignore_case, add_flags, del_flags)
            out.append("(?:" + _gate_sequence(body, ignore_case=inner) + ")")
        elif name == "ATOMIC_GROUP":
            out.append("(?:" + _gate_sequence(arg, ignore_case=ignore_case) + ")")
        elif name == "BRANCH":
            alternatives = []
            for alternative in arg[1]:
                with contextlib.suppress(_Untranslatable):
                    alternatives.append(_gate_sequence(alternative, ignore_case=ignore_case))
            if not alternatives:
                raise _Untranslatable
            out.append("(?:" + "|".join(alternatives) + ")")
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, high, body = arg
            try:
                inner_expression = _gate_sequence(body, ignore_case=ignore_case)
            except _Untranslatable:
                if low:
                    raise
                continue  # it can only match zero times
            if high == _parser.MAXREPEAT:
                quantifier = "*" if low == 0 else f"{{{low},}}"
            else:
                quantifier = f"{{{low},{high}}}"
            out.append("(?:" + inner_expression + ")" + quantifier)
        elif name in ("ASSERT", "ASSERT_NOT"):
            continue
        elif name == "GROUPREF":
            out.append(_ONE_CHAR + "*")
        else:
            raise _Untranslatable
    return "".join(out)


class Gate:
    """The trigger's question (could some pattern match here?) asked of a whole region of
    bytes at once, by pydantic-core's regular expression engine (Rust's ``regex``: a DFA
    with a literal prefilter, hundreds of MB/s, where Python's ``re`` tries every position).

    It only answers yes or no; :meth:`hot` cuts the regions it says yes to into ``FANOUT``
    parts, again and again, so that the trigger (which finds the lines) only runs over small
    pieces.

    Once the training bar is known, the same reading can also vouch for the bars of a region
    (:meth:`with_redraws`, :meth:`regions`): the scanner then skips the redraws there without
    counting them.
    """

    def __init__(self, matches: Callable[[str], bool], expression: str = "") -> None:
        self._matches = matches
        self._expression = expression
        self._with_redraws: dict[bytes, Gate | None] = {}

    def matches(self, data: bytes) -> bool:
        """Whether some pattern could match a segment of ``data`` (or it holds an escape)."""
        return self._matches(_as_ascii(data))

    def hot(self, block: bytes) -> list[tuple[int, int]]:
        """The pieces of ``block`` (whole lines, in order) where some pattern could match;
        no pattern matches a segment outside them."""
        return self.regions(block)[0]

    def regions(
        self, block: bytes, redraws: Gate | None = None
    ) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        """:meth:`hot`'s pieces, and the stretches of ``block`` (whole lines, in order) that
        ``redraws`` (this gate :meth:`with_redraws`) says no to: no pattern matches a segment
        there, and every bar there is a redraw of the training bar (see
        :func:`redraws_expression`). The pieces are those :meth:`hot` finds; each stretch
        ``redraws`` says no to needs no question of this gate (it asks for more)."""
        text = _as_ascii(block)  # one character per byte: the same offsets
        pieces: list[tuple[int, int]] = []
        clean: list[tuple[int, int]] = []
        start, size = 0, len(text)
        while start < size:
            end = text.find("\n", start + REGION) + 1 or size
            self._ask(text, start, end, pieces, clean, redraws)
            start = end
        return pieces, clean

    def _ask(
        self,
        text: str,
        start: int,
        end: int,
        pieces: list[tuple[int, int]],
        clean: list[tuple[int, int]],
        redraws: Gate | None,
    ) -> None:
        """Add the pieces of ``text[start:end]`` where some pattern could match, and, when
        ``redraws`` says no to it, the stretch to ``clean``.

        With ``redraws``, this gate is only asked about the smallest parts (a piece, or one
        line) that ``redraws`` says yes to: a part this gate says yes to is in a part it says
        yes to, so those are the pieces :meth:`hot` finds."""
        part = text[start:end]
        if redraws is None:
            if self._matches(part):
                parts = self._parts(text, start, end)
                if not parts:
                    pieces.append((start, end))
                for low, high in parts:
                    self._ask(text, low, high, pieces, clean, None)
            return
        if not redraws._matches(part):
            if clean and clean[-1][1] == start:
                clean[-1] = (clean[-1][0], end)
            else:
                clean.append((start, end))
            return
        parts = self._parts(text, start, end)
        if parts:
            for low, high in parts:
                self._ask(text, low, high, pieces, clean, redraws)
        elif self._matches(part):
            pieces.append((start, end))

    def _parts(self, text: str, start: int, end: int) -> list[tuple[int, int]]:
        """The ``FANOUT`` parts (whole lines) ``text[start:end]`` is cut into when the gate says
        yes to it; none when it is a piece: small, or one line."""
        if end - start <= PIECE:
            return []
        step = max((end - start) // FANOUT, PIECE // 2)
        cuts = [start]
        while cuts[-1] < end:
            cut = text.find("\n", cuts[-1] + step, end - 1) + 1
            cuts.append(cut if cut > cuts[-1] else end)
        return list(itertools.pairwise(cuts)) if len(cuts) > 2 else []

    def with_redraws(self, desc: bytes) -> Gate | None:
        """This gate, asked also whether some bar is not a redraw of the training bar whose
        description is ``desc`` (:func:`redraws_expression`): it says no only where this
        gate does and every bar is such a redraw. One reading answers both, at the cost of
        one (a few per cent slower). None when ``desc`` cannot be asked about. Built once per
        description (a few milliseconds)."""
        if desc not in self._with_redraws:
            if len(self._with_redraws) >= MAX_REDRAW_GATES:
                self._with_redraws.clear()
            extra = redraws_expression(desc)
            gate = None
            if extra is not None and self._expression:
                gate = _compiled_gate(f"{self._expression}|{extra}")
            self._with_redraws[desc] = gate
        return self._with_redraws[desc]


MAX_REDRAW_GATES: Final = 8
"""Training-bar descriptions a gate keeps :meth:`Gate.with_redraws` for (a log with more
builds them again)."""
_SEPARATOR_CLASS: Final = r"\x{0a}\x{0d}"


def redraws_expression(desc: bytes) -> str | None:
    """A Rust-syntax expression that matches, in a region as the gate reads it, wherever a bar
    there may be something else than a redraw of the training bar whose description is
    ``desc``: a ``\\r`` not followed by ``desc``; a segment that does not start with ``desc``
    but holds a ``%``; one that starts with it and holds no ``%``, or two.

    Where it finds none, every segment that starts with ``desc`` holds one ``%`` and no other
    segment holds one, so the number of ``%`` is the number of the bar's segments (what
    ``_Scanner._skip_drawn_bars`` counts to tell). A segment starts at a ``\\r``, a
    ``\\n`` or where the region starts. Only segments that end in the region are judged: a
    stretch the scanner skips ends with a line end, and what follows the last one of a block is
    read with the next block. None when ``desc`` is not ASCII (the gate reads every other byte
    as DEL), is empty, or holds a ``%``, a DEL or a line end.
    """
    if not desc or not desc.isascii() or any(byte in desc for byte in b"%\x7f\r\n"):
        return None
    chars = [_hex(byte) for byte in desc]
    not_line_end = f"[^{_SEPARATOR_CLASS}]"
    no_percent = f"[^{_SEPARATOR_CLASS}\\x{{25}}]*"
    percent = _hex(0x25)

    def other_start(at: int) -> str:
        # What follows a \r that goes on as desc[:at] and then leaves it.
        leave = f"[^{chars[at]}]"
        if at + 1 == len(desc):
            return leave
        return leave + "|" + chars[at] + "(?:" + other_start(at + 1) + ")"

    def percent_elsewhere(at: int) -> str:
        # A segment that leaves desc at desc[at] and holds a % from there on.
        leave = f"{percent}|[^{chars[at]}{_SEPARATOR_CLASS}\\x{{25}}]{not_line_end}*{percent}"
        if at + 1 == len(desc):
            return leave
        return leave + "|" + chars[at] + "(?:" + percent_elsewhere(at + 1) + ")"

    start = f"(?:\\A|[{_SEPARATOR_CLASS}])"
    parts = [
        _hex(0x0D) + "(?:" + other_start(0) + ")",
        "(?:\\A|" + _hex(0x0A) + ")(?:" + percent_elsewhere(0) + ")",
        start
        + "".join(chars)
        + f"(?:{no_percent}[{_SEPARATOR_CLASS}]|{no_percent}{percent}{no_percent}{percent})",
    ]
    return "|".join(parts)


def _as_ascii(data: bytes) -> str:
    """``data`` as the gate reads it (see :data:`_TO_ASCII`)."""
    return (data if data.isascii() else data.translate(_TO_ASCII)).decode("ascii")


def build_gate(sources: Sequence[str]) -> Gate | None:
    """The :class:`Gate` of the patterns ``sources`` (None when one has no translation, or the
    engine is missing or refuses the expression: then the trigger reads every region)."""
    expressions = [gate_expression(source) for source in sources]
    if any(expression is None for expression in expressions):
        return None
    joined = "|".join(f"(?:{expression})" for expression in expressions) + "|" + _hex(0x1B)
    return _compiled_gate(joined)


def _compiled_gate(expression: str) -> Gate | None:
    """The :class:`Gate` of a Rust-syntax expression (None: the engine refuses it, and the
    trigger alone is still right)."""
    try:
        validator = SchemaValidator(
            core_schema.str_schema(pattern=expression, regex_engine="rust-regex")
        )
    except SchemaError:
        return None
    return Gate(validator.isinstance_python, expression)


# --- progress and cancel -------------------------------------------------------------------------

Progress = Callable[[int, int], None]
"""Called after each chunk with (bytes read, total bytes; 0 when the size is unknown)."""
Cancelled = Callable[[], bool]
"""Called after each chunk; True stops the reading with :class:`ScanCancelled`."""


@dataclass(frozen=True)
class Watch:
    """What a scan reports to while it reads: a progress callback and a cancellation check."""

    progress: Progress | None = None
    cancelled: Cancelled | None = None


_WATCH: contextvars.ContextVar[Watch | None] = contextvars.ContextVar("log_watch", default=None)


@contextlib.contextmanager
def watching(watch: Watch) -> Iterator[None]:
    """Every log scan started inside this block (in this thread) reports to ``watch``.

    This lets a caller far above the scanner (the app's load worker, through the session)
    show progress and cancel without every layer passing the callbacks down.
    """
    token = _WATCH.set(watch)
    try:
        yield
    finally:
        _WATCH.reset(token)


def current_watch() -> Watch | None:
    """The watch set by the innermost :func:`watching` block of this thread, if any."""
    return _WATCH.get()


class Readable(Protocol):
    """What the scanner reads from: a binary stream's ``read``."""

    def read(self, size: int, /) -> bytes:
        """Up to ``size`` bytes; empty at the end."""
        ...


class WatchedReader:
    """A binary stream that reports each read to a :class:`Watch` (a few calls per chunk)."""

    def __init__(self, stream: Readable, total: int, watch: Watch) -> None:
        self._stream = stream
        self._total = total
        self._done = 0
        self._progress = watch.progress
        self._cancelled = watch.cancelled

    def read(self, size: int, /) -> bytes:
        """Read up to ``size`` bytes; raise :class:`ScanCancelled` when asked to stop."""
        if self._cancelled is not None and self._cancelled():
            raise ScanCancelled
        data = self._stream.read(size)
        self._done += len(data)
        if self._progress is not None:
            self._progress(self._done, max(self._total, self._done) if self._total else 0)
        return data
