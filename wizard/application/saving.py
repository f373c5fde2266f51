"""Saving a roll-back: a new config file or the web-UI job's row, with one run of the
change log.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

from oom_wizard.application.choosing import prepared, recorded_steps
from oom_wizard.application.settling import WizardState, host_of, memory_calibration
from oom_wizard.errors import Front, SaveRefused, WizardError
from oom_wizard.formats.document import JobDocument
from oom_wizard.rules.diagnosis import Diagnosis
from oom_wizard.rules.host import HostMemory
from oom_wizard.rules.memory import JobMemory, job_memory as memory_of
from oom_wizard.rules.plan import StepChoice
from oom_wizard.storage.changelog import (
    Direction,
    RunFacts,
    changelog_path_for,
)
from oom_wizard.storage.changes import Prepared
from oom_wizard.storage.jobdb import (
    AsNew as AsNew,  # the destinations a caller names
    DbSaveResult as DbSaveResult,  # what a database save hands back
    InPlace as InPlace,
    save_to_db,
)
from oom_wizard.storage.save import (
    SaveResult as SaveResult,  # the value a file save hands back
    check_output,
    commit,
    default_output_path,
)
from oom_wizard.vocabulary import ModelKind


@dataclass(frozen=True)
class ToFile:
    """Save the fix as a new config file and its change log (never over an existing file).

    Attributes:
        output: The new config; None derives it from the source (``my_job.oomfix.yaml``).
        changelog: The change log; None puts it beside the output.
        force: Replace ``output`` if it exists (never the source; ``apply --force``).
    """

    output: Path | None = None
    changelog: Path | None = None
    force: bool = False


#: Where a save goes: a new file, or (for a job of the web UI's database) the job's own
#: row (:class:`~oom_wizard.storage.jobdb.InPlace`) or a new job
#: (:class:`~oom_wizard.storage.jobdb.AsNew`).
Destination: TypeAlias = ToFile | InPlace | AsNew


#: What a save wrote: files (:class:`~oom_wizard.storage.save.SaveResult`) or a database row.
Saved: TypeAlias = SaveResult | DbSaveResult


def save(
    state: WizardState,
    choices: Mapping[str, StepChoice] | None,
    destination: Destination,
    *,
    ready: Prepared | None = None,
) -> Saved:
    """Write the roll-back: a new config file, or into the jobs database.

    Args:
        state: The wizard state.
        choices: The step choices (None: the plan's defaults).
        destination: Where it goes.
        ready: ``prepared(state, choices)`` when the caller has it already (shown to the
            user), so that the edits are not made and checked a second time.

    Raises:
        SaveRefused: the output or change log is refused; nothing is written.
        JobDatabaseError: the database refuses (a running job, a taken name, a lock).
        EditError: an edit cannot be made safely.
    """
    if ready is None:
        ready = prepared(state, choices)
    return write_run(
        state,
        ready,
        destination,
        direction="rollback",
        moment=state.moment,
        steps=recorded_steps(state.plan, ready),
        diagnosis=state.diagnosis if state.job.scan is not None else None,
        model_kind=state.model_kind,
        memory=memory_record(state, ready, state.model_kind),
    )


def default_file_output(state: WizardState) -> Path:
    """The first free file name for the fix saved as a file.

    Beside the source for a config file; in the working folder, after the job's name, for
    a database job (whose config has no file of its own).
    """

    if state.db_job is None:
        return default_output_path(state.source)
    return default_output_path(Path(f"{state.db_job.file_stem}.json"))


@dataclass(frozen=True)
class FileTarget:
    """A config file to save to, as typed (the app's "Save as" and "Change log" fields):
    the destination, or the refusal of each field.

    Attributes:
        destination: Where the save goes (None: a field is refused).
        output_refused: Why the output name is refused (None: it is not).
        changelog_refused: Why the change-log name is refused (None: it is not).
        changelog_beside: The change log that goes beside the output as typed, refused or
            not (None: the output is no file name at all): the change-log field follows it.
    """

    destination: ToFile | None
    output_refused: SaveRefused | None = None
    changelog_refused: SaveRefused | None = None
    changelog_beside: Path | None = None

    def reasons(self, front: Front = "app") -> tuple[str | None, str | None]:
        """The output's and the change log's reasons, worded for ``front`` (None: fine)."""
        return (
            self.output_refused.reason(front) if self.output_refused else None,
            self.changelog_refused.reason(front) if self.changelog_refused else None,
        )

    def first_refusal(self) -> SaveRefused | None:
        """The refusal to show as the save's error line."""
        return self.output_refused or self.changelog_refused


def check_destination(state: WizardState, destination: ToFile) -> None:
    """Refuse the names a command was given (``-o``, ``--changelog``) before anything is
    shown, as the save would refuse them after: a bad input is its one line alone.

    Raises:
        SaveRefused: a name AI Toolkit would not read, the source, or a file that exists.
    """
    for path in (destination.output, destination.changelog):
        if path is not None:
            check_output(path, source=state.source, force=destination.force)


def default_file_target(state: WizardState) -> ToFile:
    """Where a save as a file goes when the user changes nothing: the first free name
    (:func:`default_file_output`) and its change log beside it, by the one rule of
    :func:`file_target` (which the save's own default, ``ToFile()``, agrees with)."""
    output = default_file_output(state)
    target = file_target(state, str(output), None).destination
    return target if target is not None else ToFile(output, changelog_path_for(output))


def file_target(state: WizardState, output: str, changelog: str | None) -> FileTarget:
    """The file destination typed in the app, checked as the save checks it, before it.

    Args:
        state: The wizard state (its source is never a target).
        output: The new config's path as typed (``~`` is expanded).
        changelog: The change log's path as typed; None puts it beside the output.
    """

    output_path, output_refused = _file_name(output, "the new config", "file_name")
    if output_path is not None:
        try:
            check_output(output_path, source=state.source)
        except SaveRefused as exc:
            output_refused = exc
    beside = changelog_path_for(output_path) if output_path is not None else None
    changelog_path: Path | None
    changelog_refused: SaveRefused | None = None
    if changelog is None:
        changelog_path = beside
    else:
        changelog_path, changelog_refused = _file_name(
            changelog, "the change log", "changelog_name"
        )
    if output_refused is not None or changelog_refused is not None or changelog_path is None:
        return FileTarget(None, output_refused, changelog_refused, beside)
    assert output_path is not None
    return FileTarget(ToFile(output_path, changelog_path), changelog_beside=beside)


def _file_name(typed: str, what: str, remedy: str) -> tuple[Path | None, SaveRefused | None]:
    """``typed`` as a file's path, or why it cannot be one (empty, or a folder)."""
    text = typed.strip()
    if not text:
        return None, SaveRefused(f"a file name is needed for {what}", remedy=remedy)
    path = Path(text).expanduser()
    if text.endswith("/") or path.name in ("", ".", ".."):
        return None, SaveRefused("this is a folder", file=text, remedy=remedy)
    return path, None


def write_run(
    state: WizardState,
    ready: Prepared,
    destination: Destination,
    *,
    direction: Direction,
    model_kind: ModelKind,
    steps: Sequence[str],
    moment: str | None = None,
    diagnosis: Diagnosis | None = None,
    memory: dict[str, object] | None = None,
) -> Saved:
    """Save ``ready`` where ``destination`` says, with one run of the change log recording
    ``model_kind`` (the settled kind for a roll-back, :func:`~oom_wizard.application.scale_up.
    scale_up_kind` for a re-add)."""
    run = RunFacts(
        direction,
        moment=moment,
        model_kind=model_kind,
        diagnosis=diagnosis.to_json() if diagnosis is not None else None,
        steps=tuple(steps),
        memory=memory,
    )
    if isinstance(destination, ToFile):
        return commit(
            ready,
            run,
            output=destination.output,
            changelog_path=destination.changelog,
            force=destination.force,
            prior=state.changelog,
        )
    if state.db_job is None:
        raise WizardError("only a job of the web UI's database can be saved into it")

    return save_to_db(ready, state.db_job, destination, run, prior=state.changelog)


def saved_memory(state: WizardState, after: JobDocument, kind: ModelKind) -> JobMemory | None:
    """The memory of a config saved from ``state`` (``after``: its document), weighed as a
    ``kind`` model with the lineage's one calibration
    (:func:`~oom_wizard.application.settling.memory_calibration`): the figure its change log
    records, and the one ``scale-up`` prints before it saves (None: it cannot be weighed)."""

    try:
        return memory_of(
            after,
            [],
            kind,
            calibration=memory_calibration(state),
            calibrated_on=state.document,
            gpus=state.plan.gpus,
        )
    except WizardError:
        return None


def memory_record(state: WizardState, ready: Prepared, kind: ModelKind) -> dict[str, object] | None:
    """The change log run's ``memory`` for the saved config, weighed as a ``kind`` model
    (:func:`saved_memory`)."""

    after = saved_memory(state, ready.after, kind)
    if after is None:
        return None
    return {**memory_json(after), "host": host_record(host_of(state, ready.after))}


def host_record(host: HostMemory) -> dict[str, object]:
    """The saved config's host RAM as its change log records it (a run's ``memory.host``):
    ``fit --json``'s ``host`` for that config on this machine, its phases, RAM and verdict."""
    found = host.to_json()
    return {key: found[key] for key in ("phases", "ram_gib", "verdict", "peak_phase")}


def memory_json(after: JobMemory) -> dict[str, object]:
    """A config's memory as a change log records it (a run's ``memory``, an attempt's
    ``estimate``)."""
    if after.not_estimated is not None:
        return {"not_estimated": after.not_estimated}
    return {
        "phase": after.peak_phase,
        "estimated_gib": after.peak().rounded(),
        "phases": after.phases_json(),
        "certainty": after.certainty,
        "calibrated_by": after.calibrated_by.as_json() if after.calibrated_by else None,
    }
