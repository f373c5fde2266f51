"""Host: this machine, as the wizard sees it where it runs.

The GPUs and host memory (:mod:`~oom_wizard.host.probe`, from nvidia-smi), and Ctrl-C and
SIGTERM as exceptions (:mod:`~oom_wizard.host.interrupts`), and every process a run starts,
found and ended (:mod:`~oom_wizard.host.processes`). It imports only the shared values.
"""
