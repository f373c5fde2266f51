"""The storage layer's saves, given the prior change log as an open reads it (the one beside
the source config, or the web-UI job's): the tests that save without opening a job first."""

from __future__ import annotations

from typing import Any

from oom_wizard.storage.changes import Prepared, changelog_of
from oom_wizard.storage.jobdb import DbJob, DbSaveResult, SaveMode, read_job_changelog, save_to_db
from oom_wizard.storage.save import SaveResult, commit


def commit_beside(prepared: Prepared, **options: Any) -> SaveResult:
    """:func:`commit` after the change log beside the prepared document's source, if any."""
    return commit(prepared, prior=changelog_of(prepared.before.source), **options)


def save_to_db_after(
    prepared: Prepared, job: DbJob, mode: SaveMode, **options: Any
) -> DbSaveResult:
    """:func:`save_to_db` after the job's change log as read now, if any."""
    return save_to_db(prepared, job, mode, prior=read_job_changelog(job), **options)
