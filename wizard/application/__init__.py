"""The application layer: every use case of the wizard, one module each, for both front ends.

The command line (``oom_wizard.commands``) and the app (``screens``) parse or render and call
these; they decide, composing the domain (the rest of ``oom_wizard``). One module per use case:

- :mod:`~oom_wizard.application.opening`: a config, a job folder or a web-UI job, read once.
- :mod:`~oom_wizard.application.settling`: the answers against the job, one plan; the state.
- :mod:`~oom_wizard.application.choosing`: the default set, the choices, the fixes.
- :mod:`~oom_wizard.application.saving`: a roll-back saved to a file or the job's row.
- :mod:`~oom_wizard.application.scale_up`: the next re-add, predicted and saved.
- :mod:`~oom_wizard.application.editing`: ``set``.
- :mod:`~oom_wizard.application.history`: ``history``.
- :mod:`~oom_wizard.application.watching`: a crash diagnosed, for ``diagnose``, ``watch``
  and ``run``; :mod:`~oom_wizard.application.follow` follows a live job.
- :mod:`~oom_wizard.application.autopilot` and :mod:`~oom_wizard.application.running`: ``run``.
- :mod:`~oom_wizard.application.fitting`: ``fit``.
- :mod:`~oom_wizard.application.leaving`: what was saved, and the commands to go on.
- :mod:`~oom_wizard.application.labels` and :mod:`~oom_wizard.application.preferences`: what
  the screens show from the presets, and the user's settings.

Both front ends import these modules directly: one door per use case. This package's own
module imports nothing, so that a command loads only the use case it runs.
"""
