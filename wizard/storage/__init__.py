"""Storage: where a job and its history live, and the one way anything is written.

The atomic save and its leftovers (:mod:`~oom_wizard.storage.save`,
:mod:`~oom_wizard.storage.leftovers`), the change log (:mod:`~oom_wizard.storage.changelog`)
and the pipeline from field changes to a saved pair (:mod:`~oom_wizard.storage.changes`),
AI Toolkit's jobs database and job folders (:mod:`~oom_wizard.storage.jobdb`,
:mod:`~oom_wizard.storage.jobdir`), its checkpoints (:mod:`~oom_wizard.storage.resume`), and
the user's settings (:mod:`~oom_wizard.storage.settings`). It builds on the formats and the
logs, and decides nothing about memory.
"""
