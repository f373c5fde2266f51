"""The entry point of ``python -m oom_wizard`` and of the ``oom-wizard`` console script.

Kept to the standard library until the interrupt hook is in place, so that a Ctrl-C that
lands while the command line itself is still being imported ends the process quietly too
(nothing can have been written yet), including one that lands inside the import system's
own callbacks (see ``oom_wizard.host.interrupts``).
"""

from __future__ import annotations

import gc
import sys

EXIT_INTERRUPTED = 130


def main() -> int:
    """Import the command line under the interrupt hook, then run it."""
    try:
        # boundary (a): the command line, imported once the interrupt hook is in place
        from oom_wizard.host.interrupts import redeliver_lost_interrupts

        redeliver_lost_interrupts()
        from oom_wizard.cli import main as run_command_line
    except KeyboardInterrupt:
        print("oom-wizard: interrupted; nothing was written", file=sys.stderr)
        return EXIT_INTERRUPTED
    status = run_command_line()
    # The process ends here. The interpreter's collections on the way out would trace every
    # object the command imported or built (pydantic's schemas: a tenth of a short command's
    # time) only to free memory the system takes back anyway; frozen, they skip them.
    gc.freeze()
    return status


if __name__ == "__main__":
    sys.exit(main())
