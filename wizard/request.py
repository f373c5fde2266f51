"""What the wizard was asked to open: a config, a job folder, or a job of the UI's database.

It lives apart from the application layer so that the app can be built and painted before
the domain (pydantic, the presets, the document layer) is imported.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class JobRequest:
    """What the wizard was asked to open, as the command line named it.

    Attributes:
        target: A config file or AI Toolkit job folder; None asks for one (unless ``db``
            is given).
        log: The training log, when it is not the job folder's own.
        db: AI Toolkit's jobs database (``aitk_db.db`` or its folder): the job comes from it.
        job: The database job to open; None lists the database's jobs to pick one.
        probe: Ask ``nvidia-smi`` about the GPU when the job is opened (``--no-probe`` turns
            it off); every command and the app honour it the same way.
        changelog: The change log named by the user (``scale-up --changelog``); None: the
            one beside the config.
        edited_ok: The user said to go on from a config edited after oom-wizard saved it,
            with its change log (``--edited-ok``, or yes to the app's question).
    """

    target: Path | None = None
    log: Path | None = None
    db: Path | None = None
    job: str | None = None
    probe: bool = True
    edited_ok: bool = False
    changelog: Path | None = None

    @property
    def asks_for_config(self) -> bool:
        """Whether the user names the config in the app (neither a config nor a database)."""
        return self.target is None and self.db is None

    @property
    def listing(self) -> bool:
        """Whether the user picks the job from the database's list."""
        return self.db is not None and self.job is None
