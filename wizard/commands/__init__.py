"""The subcommands of ``oom-wizard``, one module each.

Every module has ``add_parser(subparsers)``, which registers its arguments and sets
``handler`` to its ``run(args) -> int``. Modules import the heavier domain code
inside ``run`` so that ``--help`` stays instant.
"""

from __future__ import annotations
