"""Scaling up: the next re-add, what it is predicted to do, and its save."""

from __future__ import annotations

from oom_wizard.application.attempts import repeated_crash_note
from oom_wizard.application.fitting import probed_card
from oom_wizard.application.history import NextScaleUps, offered_scale_ups
from oom_wizard.application.saving import Destination, Saved, memory_record, write_run
from oom_wizard.application.settling import WizardState, memory_calibration, start
from oom_wizard.errors import WizardError
from oom_wizard.paths import MISSING, parse_path
from oom_wizard.request import JobRequest
from oom_wizard.rules.memory import Prediction, predict_readd
from oom_wizard.rules.plan import ScaleUp, next_scale_up as plan_next_scale_up
from oom_wizard.rules.scaleup import (
    crashed_config_note,
    nothing_left_text,
    stop_text,
)
from oom_wizard.storage.changelog import (
    read_changelog,
)
from oom_wizard.storage.changes import Change, Prepared, prepare
from oom_wizard.vocabulary import MODEL_KINDS, ModelKind


def open_for_scale_up(request: JobRequest, *, hint: str = "") -> WizardState:
    """The config to scale up, opened as every use case opens a job (:func:`start`: its
    change log read once, by SHA-256 or name), without the GPU unless the request asks.

    ``hint`` ends the refusal of a config without a change log (the command line's option).

    Raises:
        WizardError: no change log describes the config (nothing to re-add from), or see
            :func:`~oom_wizard.application.opening.open_job`.
    """
    state = start(request)
    if state.changelog is None:
        raise WizardError(
            "no change log beside this config that describes it; a scale-up needs the "
            f".changelog.json that oom-wizard saved with it{hint}",
            file=state.source,
        )
    return state


def scale_up_kind(state: WizardState) -> ModelKind:
    """The model kind a re-add is weighed and recorded as: the one the last run of the change
    log recorded (what the user confirmed when the roll-back was saved), else the kind settled
    now. One rule for the command line, the app and ``run --scale-up``: a re-add does not ask
    the kind again, so it must not settle it afresh."""
    last = state.changelog.last_run() if state.changelog is not None else None
    recorded = last.model_kind if last is not None else None
    return next((kind for kind in MODEL_KINDS if kind == recorded), state.model_kind)


def next_scale_up(state: WizardState) -> ScaleUp | None:
    """The one setting the next retry gets back, or None when everything is restored.

    ``history`` and the result screen name the same one: both come through
    :func:`oom_wizard.rules.plan.next_scale_up`.
    """

    if state.changelog is None:
        return None
    return plan_next_scale_up(state.document, state.changelog)


def prepare_scale_up(state: WizardState, scale_up: ScaleUp) -> Prepared:
    """The re-add applied in memory (raises EditError if an edit cannot be made)."""
    return prepare(state.document, list(scale_up.changes))


def save_scale_up(
    state: WizardState,
    scale_up: ScaleUp,
    destination: Destination,
    *,
    ready: Prepared | None = None,
) -> Saved:
    """Write the scaled-up config and append a ``scale_up`` run to its change log.

    ``ready`` is ``prepare_scale_up(state, scale_up)`` when the caller has it already (shown
    to the user), so that the edits are not made and checked a second time.

    Raises:
        SaveRefused: the output or change log is refused; nothing is written.
        JobDatabaseError: the database refuses (a running job, a taken name, a lock).
    """
    if ready is None:
        ready = prepare_scale_up(state, scale_up)
    steps = [scale_up.step] if ready.changed else []
    kind = scale_up_kind(state)
    return write_run(
        state,
        ready,
        destination,
        direction="scale_up",
        model_kind=kind,
        steps=steps,
        memory=memory_record(state, ready, kind),
    )


def save_undo_scale_up(state: WizardState, step: str, destination: Destination) -> Saved:
    """Roll back what the change log's last run re-added (the scale-up that crashed), as a
    ``rollback`` run of ``step`` recorded with the scale-up's kind (``run --scale-up``).

    Raises:
        WizardError: the config has no change log; SaveRefused, JobDatabaseError: see
            :func:`save_scale_up`.
    """

    changelog = state.changelog
    if changelog is None:
        raise WizardError("no change log describes this config: nothing to undo", file=state.source)
    changes = [
        Change(
            path=parse_path(entry.path),
            after=MISSING if entry.before is None else entry.before,
            step=entry.step,
            reason="The scale-up that re-added this crashed: back to the stable value",
        )
        for entry in changelog.changes_of_run(len(changelog.runs) - 1)
    ]
    ready = prepare(state.document, changes)
    kind = scale_up_kind(state)
    return write_run(
        state,
        ready,
        destination,
        direction="rollback",
        model_kind=kind,
        steps=[step],
        memory=memory_record(state, ready, kind),
    )


def nothing_left(state: WizardState) -> tuple[str, ...]:
    """What the scale-up says when no re-add is left: that everything is back, or which
    changes made with ``set`` still stand (the words ``scale-up`` and ``history`` print)."""

    if state.changelog is None:
        return ("this config has no change log, so nothing of a roll-back is left to re-add.",)
    return nothing_left_text(state.document, state.changelog)


def offered_after_save(saved: Saved, ready: Prepared) -> NextScaleUps:
    """The settings offered back after a config just saved, in the scale-up's order: the
    list ``history`` prints (:func:`~oom_wizard.application.history.offered_scale_ups`).

    The save hands back the change log it wrote; a result without it (made elsewhere) has
    it read (run it in the save's worker).
    """
    log = saved.log if saved.log is not None else read_changelog(saved.changelog)
    return offered_scale_ups(ready.after, log, saved.changelog)


def scale_up_notes(state: WizardState, ready: Prepared, scale_up: ScaleUp) -> tuple[str, ...]:
    """What to say before a re-add is saved: that it gives back the exact config that
    crashed, or a combination an attempt of ``run`` crashed with, or that it crashed every
    time it was tried (the command line and the app)."""

    changelog = state.changelog
    if changelog is None:
        return ()
    source = crashed_config_note(ready.after, changelog)
    notes = [stop_text(changelog, scale_up), source]
    if source is None:
        notes.append(
            repeated_crash_note(state.document, ready.after, changelog, state.changelog_path)
        )
    return tuple(note for note in notes if note is not None)


def scale_up_prediction(state: WizardState, scale_up: ScaleUp) -> Prediction | None:
    """Whether the re-add is predicted to fit on the card (the probe's, else the one the
    job's figures name), from the headroom its lineage showed (the one calibration,
    :func:`~oom_wizard.application.settling.memory_calibration`, which the change log's
    record of the saved re-add uses too: one figure, printed and recorded); None when no card
    is known. The re-add stays allowed whatever it says."""

    card = probed_card(state)
    try:
        return predict_readd(
            state.document,
            list(scale_up.changes),
            scale_up_kind(state),
            card_gib=card.gib if card is not None else None,
            calibration=memory_calibration(state),
            gpus=state.plan.gpus,
        )
    except WizardError:
        return None
