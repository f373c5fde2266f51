"""Data about AI Toolkit (ladders, moments, architectures, UI panels, demo jobs).

This package holds no code: its YAML files are read and validated by ``oom_wizard.rules.catalog``.
"""
