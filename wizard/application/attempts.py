"""An attempt of ``run``, in words: how it ended, a recorded attempt in one line, and a
re-add that gives back what an attempt crashed with.

``run`` says it as it goes, ``history`` and the scale-up's refusals say it from the change log.
"""

from __future__ import annotations

from pathlib import Path

from oom_wizard.errors import WizardError
from oom_wizard.formats.document import JobDocument, load_document
from oom_wizard.logs.result import crash_step_of
from oom_wizard.rules.memory import PHASE_WORDS
from oom_wizard.rules.scaleup import ELSE_TO_CHANGE, CrashedConfig, repeated_crash
from oom_wizard.spelling import value
from oom_wizard.storage.changelog import AttemptRecord, ChangeLog, resolve_recorded


def describe_outcome(
    outcome: str, step: int | None, phase: str | None, moment: str | None, exit_code: int | None
) -> str:
    """How an attempt ended, in words (``history`` shows recorded attempts with it too)."""
    if outcome == "crashed":
        crashed_in = crash_step_of(step, phase)  # the bar counts steps done: not the one that ran
        if crashed_in is not None:
            where = f" at step {crashed_in}"
        else:
            where = f" after step {step}" if step is not None else ""
        inside = f" in {phase}" if phase and phase != "unknown" else ""
        about = f" ({moment})" if moment else ""
        return f"crashed{where}{inside}{about}"
    if outcome == "passed_validation":
        return f"passed validation ({step} steps)"
    if outcome == "finished":
        return f"finished ({step} steps)" if step is not None else "finished"
    if outcome == "interrupted":
        return "interrupted (Ctrl-C)"
    if outcome == "terminated":
        return "terminated (SIGTERM)"
    if outcome == "untrained":
        at = f" (its step counter stayed at {step})" if step is not None else ""
        return f"exited with status {exit_code} without training a step{at}"
    if outcome == "stopped":
        return "stopped (the trainer says so)"
    if outcome == "running":
        at = f" at step {step}" if step is not None else ""
        inside = f" in {phase}" if phase and phase != "unknown" else ""
        return f"still running{at}{inside} when watch left it"
    if outcome == "trained_nothing":
        at = f" ({step} steps)" if step is not None else ""
        return f"ran to its end{at}, but its adapter did not change: it trained nothing"
    return f"failed (exit status {exit_code}), not out of memory"


def describe_record(record: AttemptRecord) -> str:
    """A recorded attempt in one line: its config, the kind of run, how it ended, how long."""
    ended = describe_outcome(
        record.outcome, record.step, record.phase, record.moment, record.exit_code
    )
    peak = (
        f" · {record.peak_gib:.1f} of {record.card_gib:.1f} GiB at most"
        if record.peak_gib is not None and record.card_gib is not None
        else ""
    )
    if record.outcome == "trained_nothing" and record.learned:
        ended = f"ran to its end, but {record.learned}"
    given = f" · with {' '.join(record.environment)}" if record.environment else ""
    told = estimate_words(record)
    if record.watched:  # a run oom-wizard did not start: how long watch followed it
        run = f"a run followed by watch{given} · {ended} · watched {record.duration_s:.1f} s"
    else:
        run = f"{record.kind} run{given} · {ended} · {record.duration_s:.1f} s"
    return f"{record.config} · {run}{told}{peak}"


def estimate_words(record: AttemptRecord) -> str:
    """`` · estimated 19.3–23.5 GiB in the training step (the measured peak is inside it)``:
    what the model said of the attempt's config before it ran, against what nvidia-smi
    measured (the phase the peak is a point of; for a run ``watch`` followed, every phase it
    read); for an attempt recorded without an estimate, or whose config the model does not
    estimate, that said."""
    estimate = record.estimate
    if estimate is None:
        return " · no estimate was recorded before it ran"
    if "not_estimated" in estimate:
        return f" · not estimated ({estimate['not_estimated']})"
    phases = estimate.get("phases")
    if record.watched and record.peaks_gib:
        told = [
            _phase_against(phases, phase, gib)
            for phase, gib in record.peaks_gib.items()
            if phase in PHASE_WORDS
        ]
        return " · " + "; ".join(told) if told else ""
    named = record.peak_phase or estimate.get("phase")
    phase = next((p for p in PHASE_WORDS if p == named), None)
    band = _band(phases, phase)
    if band is None or phase is None:
        return ""
    low, high = band
    words = f" · estimated {low:.1f}–{high:.1f} GiB in the {PHASE_WORDS[phase]}"
    peak = record.peak_gib
    if peak is None:
        return words + " (nothing measured)"
    return f"{words} (the measured peak is {_where(peak, low, high)})"


def _band(phases: object, phase: str | None) -> tuple[float, float] | None:
    """A recorded estimate's band of ``phase`` (None: not recorded)."""
    band = phases.get(phase) if isinstance(phases, dict) and phase is not None else None
    if not isinstance(band, dict):
        return None
    low, high = band.get("low"), band.get("high")
    if not isinstance(low, int | float) or not isinstance(high, int | float):
        return None
    return float(low), float(high)


def _where(gib: float, low: float, high: float) -> str:
    return "inside it" if low <= gib <= high else ("below it" if gib < low else "above it")


def _phase_against(phases: object, phase: str, gib: float) -> str:
    """``training step: estimated 16.0–19.3 GiB, read 17.8 GiB (inside it)``."""
    words = next(said for known, said in PHASE_WORDS.items() if known == phase)
    band = _band(phases, phase)
    if band is None:
        return f"{words}: not estimated, read {gib:.1f} GiB"
    low, high = band
    where = _where(gib, low, high)
    return f"{words}: estimated {low:.1f}–{high:.1f} GiB, read {gib:.1f} GiB ({where})"


def crashed_configs(changelog: ChangeLog, log_path: Path | None) -> tuple[CrashedConfig, ...]:
    """The configs the change log's crashed attempts ran, read from disk, oldest first (one
    that is gone or cannot be read is left out: there is nothing to compare)."""
    if log_path is None:
        return ()
    found: list[CrashedConfig] = []
    for number, record in enumerate(changelog.attempts, start=1):
        if record.outcome != "crashed":
            continue
        try:
            document = load_document(resolve_recorded(log_path, record.config))
        except (WizardError, OSError):
            continue
        found.append(CrashedConfig(number, document))
    return tuple(found)


def repeated_crash_note(
    now: JobDocument, after: JobDocument, changelog: ChangeLog, log_path: Path | None
) -> str | None:
    """When the config ``after`` (a re-add on ``now``) gives back what an attempt crashed
    with, in words (None: it does not); ``scale-up``, the app and ``history`` say it."""
    found = repeated_crash(now, after, changelog, crashed_configs(changelog, log_path))
    if found is None:
        return None
    number = found.crashed.number
    record = changelog.attempts[number - 1]
    if found.today:
        return (
            f"the last attempt, {number}, crashed with this config's own settings "
            f"({describe_record(record)}): roll it back further first (oom-wizard on this "
            "config, or 'oom-wizard run'); a re-add only after a run of it trains through"
        )
    settings = ", ".join(f"{path} {value(setting)}" for path, setting in found.settings)
    return (
        f"this gives back what attempt {number} crashed with ({describe_record(record)}): "
        f"{settings}; it will likely crash again unless something else changes "
        f"({ELSE_TO_CHANGE})"
    )
