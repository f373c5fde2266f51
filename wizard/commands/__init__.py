"""The subcommands of ``oom-wizard``, one module each.

Every module has ``add_parser(subparsers)``, which registers its arguments and sets
``handler`` to its ``run(args) -> int``. Modules import the heavier domain code
inside ``run`` so that ``--help`` stays instant.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from types import ModuleType

#: subcommand name -> module in this package, in the order ``--help`` lists them.
COMMANDS: dict[str, str] = {
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
}


def all_commands() -> list[ModuleType]:
    """The command modules that exist (a missing one is simply not offered)."""
    modules = []
    for module_name in COMMANDS.values():
        try:
            modules.append(importlib.import_module(f"wizard.commands.{module_name}"))
        except ModuleNotFoundError as exc:
            if exc.name != f"wizard.commands.{module_name}":
                raise
    return modules


def split_default_command(argv: Sequence[str]) -> list[str]:
    """``oom-wizard CONFIG`` means ``oom-wizard open CONFIG``; ``oom-wizard`` alone too."""
    args = list(argv)
    for i, arg in enumerate(args):
        if arg in ("-h", "--help", "--version"):
            return args
        if arg == "--debug":
            continue
        if arg in COMMANDS:
            return args
        return [*args[:i], "open", *args[i:]]
    return [*args, "open"]
