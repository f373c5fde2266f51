"""``restore``: a web-UI job put back to its config before oom-wizard's save."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from oom_wizard.application.opening import settle_database
from oom_wizard.storage.jobdb import find_db, load_job, restore_job

if TYPE_CHECKING:
    from oom_wizard.storage.jobdb import DbSaveResult


def restore(db: Path, job: str, *, force: bool) -> DbSaveResult:
    """Put job ``job`` of the jobs database ``db`` points to back to the config it had before
    oom-wizard's last save into it, with a ``restore`` run of its change log.

    Raises:
        JobDatabaseError: no database or no such job, a running job, nothing to restore, or
            (without ``force``) a job edited in the UI after oom-wizard saved it.
    """

    return restore_job(load_job(settle_database(find_db(db)), job), force=force)
