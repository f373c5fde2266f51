"""An attempt of ``run``, in words: how it ended, and a recorded attempt in one line.

``run`` says it as it goes, ``history`` and the scale-up's refusals say it from the change log.
"""

from __future__ import annotations

from oom_wizard.storage.changelog import AttemptRecord


def describe_outcome(
    outcome: str, step: int | None, phase: str | None, moment: str | None, exit_code: int | None
) -> str:
    """How an attempt ended, in words (``history`` shows recorded attempts with it too)."""
    if outcome == "crashed":
        where = f" at step {step}" if step is not None else ""
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
    return f"{record.config} · {record.kind} run · {ended} · {record.duration_s:.1f} s{peak}"
