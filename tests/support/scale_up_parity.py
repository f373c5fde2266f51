"""The scale-up through both front ends, for ``tests/application/test_parity_scale_up.py`` and
``bench/parity_table.py``.

A :class:`ScaleUpCase` is a demo job, as a config file or as a job of the web UI's database,
rolled back with ``apply`` (a kind answered or not), then scaled up once: by ``oom-wizard
scale-up --yes`` (``--in-place`` for a database job; :func:`through_cli`), and by what the
app's scale-up screen calls, :func:`oom_wizard.application.scale_up.save_scale_up` on the state the
app
opens the saved config with (:func:`through_app_service`). Both give the saved bytes (the
file, or the job's row) and the change log, its timestamps and the root left out.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from oom_wizard.application.demo import IMAGE_JOB, VIDEO_JOB, DemoJob
from oom_wizard.application.saving import ToFile
from oom_wizard.application.scale_up import next_scale_up, save_scale_up
from oom_wizard.application.settling import start
from oom_wizard.formats.document import load_document
from oom_wizard.request import JobRequest
from oom_wizard.storage.jobdb import DbSaveResult, InPlace
from oom_wizard.storage.save import SaveResult
from tests.support.aitk_db import add_job, job_row, make_db
from tests.support.parity_support import DEMO, normal
from tests.support.plan_support import cli


@dataclass(frozen=True)
class ScaleUpCase:
    """A demo job, the kind answered at its roll-back (None: the config's), scaled up once."""

    demo: DemoJob
    kind: str | None
    source: Literal["file", "db"] = "file"

    @property
    def name(self) -> str:
        """``scale-up/file/image-job/video``, as the table lists it."""
        job = "image-job" if self.demo == IMAGE_JOB else "video-job"
        return f"scale-up/{self.source}/{job}/{self.kind or 'from-config'}"


#: The case that forked first (an image job rolled back as video), then each job as it is.
SCALE_UP_CASES = (
    ScaleUpCase(IMAGE_JOB, "video"),
    ScaleUpCase(IMAGE_JOB, None),
    ScaleUpCase(VIDEO_JOB, None),
    ScaleUpCase(IMAGE_JOB, "video", "db"),
    ScaleUpCase(VIDEO_JOB, None, "db"),
)


@dataclass(frozen=True)
class ScaledUp:
    """What one front end's scale-up wrote."""

    saved: bytes
    changelog: Any


def _written_before_the_save(log: Path) -> None:
    """Date the copied log an hour back: the crash it shows came before the roll-back saved
    (a log written in the same second as the save would read as a crash of the fix, since the
    change log's times have whole seconds)."""
    earlier = time.time() - 3600
    os.utime(log, (earlier, earlier))


def rolled_back(root: Path, case: ScaleUpCase) -> Path:
    """The demo job under ``root`` as a config file, rolled back by ``apply`` (every default
    step): the new config, with its change log beside it."""
    root.mkdir(parents=True)
    config = root / case.demo.config
    shutil.copyfile(DEMO / case.demo.config, config)
    shutil.copyfile(DEMO / case.demo.log, root / case.demo.log)
    _written_before_the_save(root / case.demo.log)
    kind = ["--kind", case.kind] if case.kind is not None else []
    status, out, err = cli("apply", config, "--log", root / case.demo.log, "--no-probe", *kind)
    assert status == 0, err
    return Path(next(line for line in out.splitlines() if line.startswith("Wrote "))[6:])


def rolled_back_job(root: Path, case: ScaleUpCase) -> tuple[Path, str]:
    """The demo job under ``root`` as a job of the web UI's database, rolled back in place by
    ``apply --in-place``: the database and the job's name."""
    stem = Path(case.demo.config).stem
    folder = root / "output" / stem
    folder.mkdir(parents=True)
    shutil.copyfile(DEMO / case.demo.log, folder / "log.txt")
    _written_before_the_save(folder / "log.txt")
    db = make_db(root / "aitk_db.db")
    add_job(db, stem, config=load_document(DEMO / case.demo.config).tree, step=4, id=f"job-{stem}")
    kind = ["--kind", case.kind] if case.kind is not None else []
    status, _out, err = cli("apply", "--db", db, "--job", stem, "--no-probe", "--in-place", *kind)
    assert status == 0, err
    return db, stem


def _row_config(db: Path, name: str) -> bytes:
    row = job_row(db, name)
    assert row is not None
    return str(row["job_config"]).encode("utf-8")


def through_cli(root: Path, case: ScaleUpCase) -> ScaledUp:
    """``oom-wizard scale-up CONFIG --yes`` (``--db PATH --job NAME --in-place``)."""
    if case.source == "db":
        db, name = rolled_back_job(root, case)
        status, out, err = cli("scale-up", "--db", db, "--job", name, "--in-place")
        assert status == 0, err
        said = next(line for line in out.splitlines() if line.startswith("Change log "))
        changelog = Path(said[11:])
        return ScaledUp(_row_config(db, name), normal(changelog, root))
    config = rolled_back(root, case)
    status, out, err = cli("scale-up", config, "--yes")
    assert status == 0, err
    lines = out.splitlines()
    saved = Path(next(line for line in lines if line.startswith("Wrote "))[6:])
    changelog = Path(next(line for line in lines if line.startswith("Change log "))[11:])
    return ScaledUp(saved.read_bytes(), normal(changelog, root))


def through_app_service(root: Path, case: ScaleUpCase) -> ScaledUp:
    """The app's scale-up: the saved config opened as the app opens it, its next re-add saved
    where the scale-up screen saves it (the default file, or the job's own row)."""
    if case.source == "db":
        db, name = rolled_back_job(root, case)
        state = start(JobRequest(db=db, job=name, probe=False))
        scale_up = next_scale_up(state)
        assert scale_up is not None
        saved_row = save_scale_up(state, scale_up, InPlace())
        assert isinstance(saved_row, DbSaveResult)
        return ScaledUp(_row_config(db, name), normal(saved_row.changelog, root))
    config = rolled_back(root, case)
    state = start(JobRequest(config, probe=False))
    scale_up = next_scale_up(state)
    assert scale_up is not None
    saved = save_scale_up(state, scale_up, ToFile())
    assert isinstance(saved, SaveResult)
    return ScaledUp(saved.config.read_bytes(), normal(saved.changelog, root))
