"""The fastest safe YAML loader this PyYAML has: libyaml's ``CSafeLoader``, else the pure one.

The presets and the log markers are read with it, and an edited config is checked with it
(:func:`oom_wizard.formats.yamlload.load_tree`); the one fallback lives here. The user's own config
is always read with the pure ``SafeLoader``, as AI Toolkit reads it.
"""

from __future__ import annotations

try:
    from yaml import CSafeLoader as SafeLoader
except ImportError:  # PyYAML built without libyaml
    from yaml import SafeLoader  # type: ignore[assignment]

__all__ = ["SafeLoader"]
