"""Formats: AI Toolkit's job configs as the toolkit reads them, and edits that keep every byte.

YAML and JSON loaded exactly as AI Toolkit loads them (:mod:`~oom_wizard.formats.yamlload`),
the job document and its typed view (:mod:`~oom_wizard.formats.document`,
:mod:`~oom_wizard.formats.view`), the surgical editors (:mod:`~oom_wizard.formats.yamledit`,
:mod:`~oom_wizard.formats.jsonedit`, :mod:`~oom_wizard.formats.splice`), one field change
(:mod:`~oom_wizard.formats.change`) and the ``PATH=VALUE`` pairs of the command line
(:mod:`~oom_wizard.formats.fields`).

The lowest room: it imports only the shared values at the top of the package (errors, field
paths, the frozen model base). Nothing here touches a file but to read it.
"""
