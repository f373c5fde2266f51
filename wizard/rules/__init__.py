"""Rules: what the wizard decides, from the presets, the config, the log and the history.

The presets read and validated (:mod:`~oom_wizard.rules.catalog`), the diagnosis and the model
kind (:mod:`~oom_wizard.rules.diagnosis`, :mod:`~oom_wizard.rules.modelkind`), the roll-back
plan (:mod:`~oom_wizard.rules.plan`), the memory model (the wing :mod:`~oom_wizard.rules.memory`:
what one process holds, term by term, its bands and its one calibration) and what a change does
to it (:mod:`~oom_wizard.rules.estimate`), the fixes sized by it
(:mod:`~oom_wizard.rules.sizing`), the way back up (:mod:`~oom_wizard.rules.scaleup`) and the
checks of a typed value (:mod:`~oom_wizard.rules.values`). The top room of the domain: it
reads storage (the change log) but never writes.
"""
