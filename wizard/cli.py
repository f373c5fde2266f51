"""The command line, and the composition root.

Each subcommand lives in ``wizard.commands`` as a module with ``add_parser`` and
``run``. This is the one place that turns a ``WizardError`` into one line on stderr
and exit status 2, and the one place that may load ``screens`` (lazily, to start
the app).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from types import ModuleType

from wizard import __version__
from wizard.errors import WizardError

PROG = "oom-wizard"
EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_BAD_INPUT = 2


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one line with exit status 2 like every bad input."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise WizardError(f"{message} (see '{self.prog} --help')")


def _command_modules() -> list[ModuleType]:
    from wizard import commands

    return commands.all_commands()


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: ``oom-wizard [CONFIG | JOB_DIR]`` plus the subcommands."""
    parser = _Parser(
        prog=PROG,
        description=(
            "Your AI Toolkit job died with CUDA out of memory: find out when and why, "
            "roll the config back one step at a time, and later scale it up again."
        ),
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    parser.add_argument("--debug", action="store_true", help="show a traceback on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for module in _command_modules():
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args_list
    try:
        from wizard.commands import split_default_command

        parser = build_parser()
        args = parser.parse_args(split_default_command(args_list))
        handler = getattr(args, "handler", None)
        if handler is None:
            parser.print_help()
            return EXIT_OK
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
