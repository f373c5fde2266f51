"""The command line, and the composition root.

Each subcommand lives in ``wizard.commands`` as a module with ``add_parser`` and
``run``, listed in :data:`COMMANDS`; the first argument picks one (``open``, the wizard,
when it names none). This is the one place that turns a ``WizardError`` into one line on stderr
and exit status 2, and the one place that may load ``screens`` (lazily, to start
the app).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from types import ModuleType
from typing import Final

from wizard import __version__
from wizard.commands import (
    apply,
    demo,
    diagnose,
    history,
    open_cmd,
    plan,
    restore,
    scale_up,
    set_cmd,
)
from wizard.errors import WizardError

PROG = "oom-wizard"
EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_BAD_INPUT = 2


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one line with exit status 2 like every bad input."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise WizardError(f"{message} (see '{self.prog} --help')")


#: subcommand name -> its module, in the order ``--help`` lists them. ``open`` is the
#: default: ``oom-wizard CONFIG`` and ``oom-wizard`` alone are ``oom-wizard open ...``.
COMMANDS: Final[dict[str, ModuleType]] = {
    "open": open_cmd,
    "demo": demo,
    "diagnose": diagnose,
    "plan": plan,
    "apply": apply,
    "set": set_cmd,
    "scale-up": scale_up,
    "history": history,
    "restore": restore,
}
DEFAULT_COMMAND: Final = "open"


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: ``oom-wizard [CONFIG | JOB_DIR]`` plus the subcommands."""
    return _build()[0]


def _build() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The whole command line, and each command's own parser by name."""
    parser = _Parser(
        prog=PROG,
        description=(
            "Your AI Toolkit job died with CUDA out of memory: find out when and why, "
            "roll the config back one step at a time, and later scale it up again."
        ),
    )
    _add_global_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for module in COMMANDS.values():
        module.add_parser(sub)
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


def _dispatch(commands: dict[str, argparse.ArgumentParser], rest: list[str]) -> argparse.Namespace:
    """The arguments parsed by the command they name (``open`` unless the first names one)."""
    name = rest[0] if rest and rest[0] in COMMANDS else DEFAULT_COMMAND
    arguments = rest[1:] if rest and rest[0] == name else rest
    return commands[name].parse_args(arguments)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    debug = False
    try:
        options, rest = _global_options(args_list)
        debug = bool(options.debug)
        parser, commands = _build()
        if rest and rest[0] in ("-h", "--help"):
            parser.print_help()
            return EXIT_OK
        args = _dispatch(commands, rest)
        handler = args.handler
        result: int = handler(args)
        return result
    except WizardError as exc:
        if debug:
            traceback.print_exc()
        print(f"{PROG}: error: {exc.one_line()}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; nothing was written", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:
        if debug:
            traceback.print_exc()
        print(
            f"{PROG}: internal error: {type(exc).__name__}: {exc} "
            "(run again with --debug for a traceback, and please report it)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
