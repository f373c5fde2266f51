"""``python -m oom_wizard``: the same entry point as the ``oom-wizard`` console script.

A Ctrl-C that lands while the command line itself is still being imported ends the
process quietly too (nothing can have been written yet).
"""

from __future__ import annotations

import sys

try:
    from oom_wizard.cli import main
except KeyboardInterrupt:
    print("oom-wizard: interrupted; nothing was written", file=sys.stderr)
    sys.exit(130)

sys.exit(main())
