"""``python -m wizard``: the same entry point as the ``oom-wizard`` console script."""

from __future__ import annotations

import sys

from wizard.cli import main

sys.exit(main())
