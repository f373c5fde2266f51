"""The command line, and the composition root.

Each subcommand lives in ``oom_wizard.commands`` as a module with ``add_parser`` and
``run``, listed in :data:`COMMANDS`; the first argument picks one (``open``, the wizard,
when it names none). This is the one place that turns a ``WizardError`` into one line on stderr
and exit status 2, and the one place that may load ``screens`` (lazily, to start
the app).
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import importlib
import os
import signal
import sys
import threading
import traceback
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Final

from oom_wizard import __version__
from oom_wizard.errors import PROGRAM, WizardError, error_line, os_error_line
from oom_wizard.host.interrupts import Terminated, raise_terminated, redeliver_lost_interrupts
from oom_wizard.storage.atomic import recover, settle
from oom_wizard.storage.leftovers import dead_leftovers, unresolved_notes

PROG = PROGRAM
EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one line with exit status 2 like every bad input."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise WizardError(f"{message} (see '{self.prog} --help')")


#: subcommand name -> its module in ``oom_wizard.commands``, in the order ``--help`` lists
#: them. ``open`` is the default: ``oom-wizard CONFIG`` and ``oom-wizard`` alone are
#: ``oom-wizard open ...``. A run imports the module of its own command only (``--help``
#: imports them all), so that ``demo`` or ``diagnose`` does not pay for the other commands.
COMMANDS: Final[dict[str, str]] = {
    "open": "open_cmd",
    "demo": "demo",
    "diagnose": "diagnose",
    "plan": "plan",
    "apply": "apply",
    "set": "set_cmd",
    "scale-up": "scale_up",
    "history": "history",
    "restore": "restore",
    "watch": "watch",
    "run": "run",
    "fit": "fit",
    "completion": "completion",
}
DEFAULT_COMMAND: Final = "open"
#: The commands that describe the whole command line: they are given its parser as
#: ``args.parser`` (and build every command's, as ``--help`` does).
WHOLE_LINE: Final = frozenset({"completion"})


def command_module(name: str) -> ModuleType:
    """The module of the subcommand ``name`` (a key of :data:`COMMANDS`)."""
    return importlib.import_module(f"oom_wizard.commands.{COMMANDS[name]}")


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: ``oom-wizard [CONFIG | JOB_DIR]`` plus the subcommands."""
    return _build()[0]


def _build(
    only: str | None = None,
) -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The whole command line, and each command's own parser by name (``only``: that
    command's alone, the one a run dispatches to)."""
    parser = _Parser(
        prog=PROG,
        description=(
            "Your AI Toolkit job died with CUDA out of memory: find out when and why, "
            "roll the config back one step at a time, and later scale it up again."
        ),
    )
    _add_global_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS if only is None else (only,):
        command_module(name).add_parser(sub)
    return parser, dict(sub.choices)


def _add_global_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    parser.add_argument("--debug", action="store_true", help="show a traceback on errors")


def _global_options(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """``--debug`` and ``--version`` wherever they are, and the arguments left for a command.

    Parsed (not searched for) before the command, so that an error while parsing the
    command's own arguments still knows whether to show a traceback.
    """
    parser = _Parser(prog=PROG, add_help=False, allow_abbrev=False)
    _add_global_options(parser)
    return parser.parse_known_args(list(argv))


def _command_named(rest: list[str]) -> str:
    """The command the arguments name (``open`` unless the first names one)."""
    return rest[0] if rest and rest[0] in COMMANDS else DEFAULT_COMMAND


def _dispatch(commands: dict[str, argparse.ArgumentParser], rest: list[str]) -> argparse.Namespace:
    """The arguments parsed by the command they name (``open`` unless the first names one)."""
    name = _command_named(rest)
    arguments = rest[1:] if rest and rest[0] == name else rest
    return commands[name].parse_args(arguments)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    _ascii_fallback()
    restore = _install_signal_handlers()
    noted = len(unresolved_notes())
    try:
        return _main(args_list)
    finally:
        for note in unresolved_notes()[noted:]:
            _say(f"{PROG}: note: {note}")
        if argv is None and threading.current_thread() is threading.main_thread():
            # The process is about to exit and has said what it did: a late Ctrl-C or
            # SIGTERM must not turn into a traceback from the interpreter's shutdown.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        else:
            restore()


def _main(args_list: list[str]) -> int:
    before = _written()
    debug = False
    try:
        options, rest = _global_options(args_list)
        debug = bool(options.debug)
        _recover_here()
        if rest and rest[0] in ("-h", "--help"):
            _build()[0].print_help()
            return EXIT_OK
        name = _command_named(rest)
        parser, commands = _build(only=None if name in WHOLE_LINE else name)
        args = _dispatch(commands, rest)
        _recover_given(args)
        args.parser = parser
        args.debug = debug  # the app writes its tracebacks to a file with --debug
        handler = args.handler
        result: int = handler(args)
        return result
    except WizardError as exc:
        if debug:
            traceback.print_exc()
        _say(f"{error_line(exc)}{_written_note(before)}")
        return EXIT_BAD_INPUT
    except KeyboardInterrupt as exc:
        return _interrupted(exc, before)
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_OK
    except OSError as exc:
        if os_error_line(exc) is None:
            return _internal(exc, debug, before)
        if debug:
            traceback.print_exc()
        if exc.filename is None:
            _silence_stdout()
        _say(f"{error_line(exc)}{_written_note(before)}")
        return EXIT_BAD_INPUT
    except Exception as exc:
        if _an_interrupt_inside(exc):
            return _interrupted(KeyboardInterrupt(), before)
        return _internal(exc, debug, before)


def _interrupted(exc: KeyboardInterrupt, before: tuple[Path, ...]) -> int:
    """Ctrl-C or SIGTERM: say what was written (nothing, or a whole save) and exit 130/143."""
    what = "terminated" if isinstance(exc, Terminated) else "interrupted"
    written = _new_files(before)
    if written:
        names = " and ".join(str(path) for path in written)
        _say(f"{PROG}: {what} after the save was complete: {names} were written")
    else:
        _say(f"{PROG}: {what}; nothing was written")
    return EXIT_TERMINATED if isinstance(exc, Terminated) else EXIT_INTERRUPTED


def _an_interrupt_inside(exc: BaseException) -> bool:
    """Whether ``exc`` is a Ctrl-C that a library wrapped on its way out: in its chain, or,
    for pydantic-core's ``SchemaError`` (built in Rust, which keeps no Python chain), named in
    its message. A Ctrl-C while pydantic builds a model's schema arrives that way."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, KeyboardInterrupt):
            return True
        seen = seen.__cause__ or seen.__context__
    return type(exc).__name__ == "SchemaError" and "KeyboardInterrupt" in str(exc)


def _recover_here() -> None:
    """Finish or undo what a killed save left in the working folder (``save.recover``)."""
    if not dead_leftovers(Path(os.curdir)):  # the working folder, even when it is gone
        return
    with contextlib.suppress(OSError):
        recover(Path.cwd())


#: The arguments that name a job's files: the folder of each is settled before the command runs.
_GIVEN: Final = ("config", "target", "changelog")


def _recover_given(args: argparse.Namespace) -> None:
    """Finish or undo what a killed save left in the folder of each file the command was given
    (and in a job folder given itself), before the command checks that the file is there: the
    config of a pair killed between its two renames is there only once its journal is replayed
    (``save.recover``), whatever folder the command runs in."""
    for name in _GIVEN:
        given = getattr(args, name, None)
        if not isinstance(given, (str, Path)) or not str(given):
            continue
        path = Path(given)
        with contextlib.suppress(OSError, ValueError):
            settle(path.parent, *([path] if path.is_dir() else []))


def _internal(exc: Exception, debug: bool, before: tuple[Path, ...] = ()) -> int:
    if debug:
        traceback.print_exc()
    _say(f"{error_line(exc)}{_written_note(before)}")
    return EXIT_INTERNAL


def _written() -> tuple[Path, ...]:
    """What saves of this process have written so far (nothing before the save code loads:
    never imported here, so a Ctrl-C during the imports cannot fail again)."""
    atomic = sys.modules.get("oom_wizard.storage.atomic")
    written = getattr(atomic, "written_this_process", None)
    return written() if callable(written) else ()


def _new_files(before: tuple[Path, ...]) -> tuple[Path, ...]:
    """What was written since ``before``, each once (a change log that records a later
    attempt is written again: still one file)."""
    return tuple(dict.fromkeys(_written()[len(before) :]))


def _written_note(before: tuple[Path, ...]) -> str:
    """Nothing, or what was saved before the failure (so no message claims otherwise)."""
    written = _new_files(before)
    if not written:
        return ""
    return " (the save itself was complete: " + " and ".join(map(str, written)) + " were written)"


def _say(line: str) -> None:
    """One line on stderr, even when stderr itself is gone."""
    with contextlib.suppress(OSError, ValueError):
        print(line, file=sys.stderr, flush=True)


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush cannot fail again."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError):
        return


#: What a character the output's encoding cannot carry is written as (others: their letter
#: without its accent, else ``?``).
_STAND_INS: Final = {
    "→": "->", "←": "<-", "…": "...", "—": "-", "–": "-", "−": "-", "×": "x", "≈": "~",
    "≤": "<=", "≥": ">=", "±": "+/-", "·": "-", "•": "*", "²": "^2", "³": "^3", "√": "sqrt",
    "Σ": "sum", "α": "alpha", "§": "S", "⚠": "!", "▶": ">", "│": "|", "─": "-", "“": '"',
    "”": '"', "‘": "'", "’": "'", "█": "#", "▉": "#", "▊": "#", "▋": "#", "▌": "#", "▍": "#",
    "▎": "#", "▏": "#",
}  # fmt: skip
_FALLBACK: Final = "oom-wizard-ascii"


def _stand_in(exc: UnicodeError) -> tuple[str | bytes, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    text = exc.object[exc.start : exc.end]
    if all("\udc80" <= char <= "\udcff" for char in text):
        # A file name's undecodable bytes (surrogateescape): written back as they were.
        return bytes(ord(char) - 0xDC00 for char in text), exc.end
    return "".join(_STAND_INS.get(char) or _bare(char) for char in text), exc.end


def _bare(char: str) -> str:
    bare = unicodedata.normalize("NFKD", char).encode("ascii", "ignore").decode("ascii")
    return bare or "?"


codecs.register_error(_FALLBACK, _stand_in)


def _ascii_fallback() -> None:
    """Output never fails on its encoding (``PYTHONIOENCODING=ascii``, a C locale): a
    character stdout or stderr cannot carry is written as an ASCII stand-in (``→`` as ``->``),
    not raised after the work is done (a save's pair already written)."""
    for stream in (sys.stdout, sys.stderr):
        if getattr(stream, "errors", None) not in ("strict", "surrogateescape"):
            continue
        with contextlib.suppress(AttributeError, ValueError, OSError):
            stream.reconfigure(errors=_FALLBACK)  # type: ignore[union-attr]


def _install_signal_handlers() -> Callable[[], None]:
    """SIGTERM and SIGHUP unwind like Ctrl-C (temp files go), and no interrupt is lost in an
    interpreter callback; return what puts the old handlers back."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    old_hook = redeliver_lost_interrupts()
    # Windows has no SIGHUP (a closed console sends CTRL_CLOSE, which Python does not map).
    stops = [getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)]
    old = {stop: signal.signal(stop, raise_terminated) for stop in stops}

    def restore() -> None:
        for stop, handler in old.items():
            signal.signal(stop, handler)
        old_hook()

    return restore
