"""``run``'s trainer, from the application's side: the command line with its ``{config}``, the
rules the supervision needs (when a log ends in a fatal error, which card readings to trust)
and the words for what became of the trainer's processes. The supervision itself, processes
and signals, is :mod:`oom_wizard.host.supervision`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Final

from oom_wizard.errors import WizardError
from oom_wizard.host.probe import ProbeResult, probe_gpu
from oom_wizard.host.supervision import (
    FATAL_SILENCE_S,
    GRACE_S,
    MEASURE_S,
    StartFailed,
    Supervision,
    TrainerEnd,
    epilogue,
    group_alive,
    run_trainer as supervise,
    stops_as_from_a_terminal,
)
from oom_wizard.logs.scan import scan_log
from oom_wizard.rules.limits import probe_problem
from oom_wizard.spelling import counted

__all__ = [
    "CONFIG_FIELD",
    "FATAL_SILENCE_S",
    "GRACE_S",
    "MEASURE_S",
    "TrainerEnd",
    "default_command",
    "epilogue",
    "group_alive",
    "processes_note",
    "run_trainer",
    "stops_as_from_a_terminal",
    "trainer_argv",
]

CONFIG_FIELD: Final = "{config}"


def trainer_argv(template: Sequence[str], config: Path) -> list[str]:
    """The command with ``{config}`` replaced; without the field, the config is appended.

    Raises:
        WizardError: an empty command.
    """
    if not template:
        raise WizardError("no trainer command: give it after --, e.g. -- python run.py {config}")
    if not any(CONFIG_FIELD in part for part in template):
        return [*template, str(config)]
    return [part.replace(CONFIG_FIELD, str(config)) for part in template]


def default_command(folder: Path) -> list[str] | None:
    """``python run.py {config}`` when ``folder`` is AI Toolkit's folder (it has run.py)."""
    return ["python", "run.py", CONFIG_FIELD] if (folder / "run.py").is_file() else None


def processes_note(end: TrainerEnd) -> str:
    """What became of the trainer's processes, as far as it is known (the summary's words)."""
    if end.left_running:
        pids = " ".join(str(pid) for pid in end.left_running)
        count = len(end.left_running)
        return (
            f"the trainer was stopped, but {counted(count, 'process', 'processes')} it "
            f"started still run{'' if count > 1 else 's'} after SIGKILL (pid {pids}); "
            "check them with ps and end them yourself"
        )
    if not end.sees_all:
        return (
            "the trainer and its process group were stopped (a process it started in a "
            "session of its own cannot be found on this system; check with ps)"
        )
    if end.outside_group:
        count = end.outside_group
        return (
            f"the trainer's processes were stopped, {count} of them outside its process "
            f"group (a helper in a session of its own)"
        )
    return "the trainer's processes were stopped"


def ends_in_fatal_error(log: Path) -> bool:
    """Whether the log's run ends in a failure shaped as one (a traceback, an exception
    line, an exit), not in progress, and not a message a printed prompt quotes."""

    try:
        scan = scan_log(log)
    except (OSError, WizardError):
        return False
    return scan.crashed and scan.failure_shaped


def trusted_card() -> ProbeResult | None:
    """One reading of ``nvidia-smi``, or None when there is none or no card could give it
    (:func:`~oom_wizard.rules.limits.probe_problem`)."""
    found = probe_gpu()
    return found if found is not None and probe_problem(found) is None else None


def run_trainer(
    argv: Sequence[str],
    log: Path,
    *,
    echo: IO[bytes] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    grace_s: float = GRACE_S,
    silence_s: float = FATAL_SILENCE_S,
    measure_s: float = MEASURE_S,
) -> TrainerEnd:
    """Run the trainer to its end under :mod:`~oom_wizard.host.supervision`, with the
    application's rules (:func:`ends_in_fatal_error`, :func:`trusted_card`).

    Raises:
        WizardError: the command cannot be started.
    """
    options = Supervision(
        grace_s=grace_s,
        silence_s=silence_s,
        measure_s=measure_s,
        echo=echo,
        env=env,
        cwd=cwd,
        fatal_error=ends_in_fatal_error,
        read_card=trusted_card,
    )
    try:
        return supervise(argv, log, options)
    except StartFailed as exc:
        raise WizardError(str(exc)) from None
