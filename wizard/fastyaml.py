"""The fastest safe YAML loader this PyYAML has: libyaml's ``CSafeLoader``, else the pure one.

The presets and the log markers are read with it; the one fallback lives here.
"""

from __future__ import annotations

try:
    from yaml import CSafeLoader as SafeLoader
except ImportError:  # PyYAML built without libyaml
    from yaml import SafeLoader  # type: ignore[assignment]

__all__ = ["SafeLoader"]
