"""Host: this machine, as the wizard sees it where it runs.

The GPUs and host memory (:mod:`~oom_wizard.host.probe`, from nvidia-smi), and Ctrl-C and
SIGTERM as exceptions (:mod:`~oom_wizard.host.interrupts`), and every process a run starts,
found and ended (:mod:`~oom_wizard.host.processes`), and ``run``'s supervision of the trainer
(:mod:`~oom_wizard.host.supervision`, its watchdog :mod:`~oom_wizard.host.watchdog`), on POSIX
and on Windows. It imports only the standard library and its own modules; the rules a run
needs (when a log ends in a fatal error) come in as options.
"""
