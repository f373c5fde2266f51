"""oom-wizard's domain: load, diagnose, plan, edit and save AI Toolkit job configs.

Nothing in this package imports textual; the Textual app lives in ``screens``.
"""

from __future__ import annotations

__version__ = "0.1.0"
