"""The storage layer's saves, given the prior change log as an open reads it (the one beside
the source config, or the web-UI job's): the tests that save without opening a job first.

Both take the run's facts as keywords (``direction="rollback", steps=[...]``), as the
change log records them, beside the saver's own options."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from oom_wizard.storage.changelog import RunFacts
from oom_wizard.storage.changes import Prepared, changelog_of
from oom_wizard.storage.jobdb import DbJob, DbSaveResult, SaveMode, read_job_changelog, save_to_db
from oom_wizard.storage.save import SaveResult, commit

_RUN_FIELDS = frozenset(field.name for field in fields(RunFacts))


def _run_and_options(options: dict[str, Any]) -> tuple[RunFacts, dict[str, Any]]:
    """The run's facts among ``options``, and the saver's options left."""
    run = {key: value for key, value in options.items() if key in _RUN_FIELDS}
    if "steps" in run:
        run["steps"] = tuple(run["steps"])
    rest = {key: value for key, value in options.items() if key not in _RUN_FIELDS}
    return RunFacts(**run), rest


def commit_beside(prepared: Prepared, **options: Any) -> SaveResult:
    """:func:`commit` after the change log beside the prepared document's source, if any."""
    run, rest = _run_and_options(options)
    return commit(prepared, run, prior=changelog_of(prepared.before.source), **rest)


def save_to_db_after(
    prepared: Prepared, job: DbJob, mode: SaveMode, **options: Any
) -> DbSaveResult:
    """:func:`save_to_db` after the job's change log as read now, if any."""
    run, rest = _run_and_options(options)
    return save_to_db(prepared, job, mode, run, prior=read_job_changelog(job), **rest)
