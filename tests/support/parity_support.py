"""The same job and answers through the command line and through the app, side by side.

A :class:`Case` names a job (a config file with its log, an AI Toolkit job folder, or a job
of the web UI's database), the demo job it is made from, and the answers (a moment and a
model kind, or none: the log and config decide). :func:`build` lays the job out under a
root; :func:`through_cli` runs ``plan --json`` and ``apply`` on it in-process, and
:func:`through_app` drives the Textual app over the same layout under another root,
accepting every default, as a user pressing Enter would. Both give an :class:`Outcome`:
the moment, the kind, the plan, the saved bytes and the change log (timestamps and the
root left out), which :func:`compare` checks field by field.

``bench/parity_table.py`` runs every case of :data:`CASES` and prints the table.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from textual.pilot import Pilot

from oom_wizard.application.demo import IMAGE_JOB, VIDEO_JOB, DemoJob
from oom_wizard.formats.document import load_document
from oom_wizard.screens.app import OomWizardApp, create_app
from oom_wizard.screens.base import Finished
from oom_wizard.screens.environment import EnvironmentScreen
from oom_wizard.screens.moment import MomentScreen
from oom_wizard.screens.result import ResultScreen
from oom_wizard.screens.toggles import Choice
from oom_wizard.screens.widgets import MarkedOptionList
from oom_wizard.storage.jobdb import DbSaveResult
from oom_wizard.storage.save import SaveResult
from oom_wizard.vocabulary import MOMENTS
from tests.support.aitk_db import add_job, job_row, make_db
from tests.support.app_support import accept_steps, save_from_review, wait_for_state
from tests.support.plan_support import APPLY_SAVED, cli

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "presets" / "demo"
SIZE = (80, 24)

Source = Literal["file", "folder", "db"]

#: The checks of every case, in the table's order.
CHECKS = ("moment", "kind", "plan", "saved bytes", "change log")


@dataclass(frozen=True)
class Case:
    """One job and the user's answers.

    Attributes:
        source: A config file with ``--log``, a job folder, or a web-UI job (``--db``).
        demo: The bundled job the config and log come from.
        moment: The moment answered (``--moment``, the moment list); None: from the log.
        kind: The kind answered (``--kind``, the kind buttons); None: from the config.
    """

    source: Source
    demo: DemoJob
    moment: str | None
    kind: str | None

    @property
    def name(self) -> str:
        """``file/image-job/early_steps/video``, as the table lists it."""
        job = "image-job" if self.demo == IMAGE_JOB else "video-job"
        return f"{self.source}/{job}/{self.moment or 'from-log'}/{self.kind or 'from-config'}"


def _cases() -> tuple[Case, ...]:
    """Each source with a job left to its log, every moment answered, both kinds each way.

    Every source sees both kinds, every moment is answered once with each kind (the
    environment verdict, which saves nothing, with both), and each source leaves one job
    entirely to its log and config. Nine app runs: enough to cover every path of the front
    ends, few enough for a suite that runs in seconds, not minutes.
    """
    return (
        Case("file", IMAGE_JOB, None, None),
        Case("folder", VIDEO_JOB, None, None),
        Case("db", IMAGE_JOB, None, None),
        Case("file", VIDEO_JOB, "loading", "video"),
        Case("folder", IMAGE_JOB, "early_steps", "image"),
        Case("db", VIDEO_JOB, "sampling", "video"),
        Case("file", IMAGE_JOB, "intermittent", "image"),
        Case("folder", IMAGE_JOB, "environment", "image"),
        Case("db", VIDEO_JOB, "environment", "video"),
        Case("db", IMAGE_JOB, "loading", "video"),
    )


CASES = _cases()


@dataclass(frozen=True)
class Job:
    """Where a case's job was laid out, and how to name it to the CLI and the app."""

    root: Path
    target: Path | None
    log: Path | None
    db: Path | None
    name: str | None

    def cli_arguments(self) -> list[str]:
        """The job as the command line names it."""
        if self.db is not None:
            assert self.name is not None
            return ["--db", str(self.db), "--job", self.name]
        arguments = [str(self.target)]
        if self.log is not None:
            arguments += ["--log", str(self.log)]
        return arguments

    def app(self) -> OomWizardApp:
        """The app on the job (no GPU probe: the cases compare config and log)."""
        if self.db is not None:
            return create_app(db=self.db, job=self.name, probe=False)
        return create_app(self.target, log=self.log, probe=False)


def build(root: Path, case: Case) -> Job:
    """Lay the case's job out under ``root`` (the same layout for every root)."""
    root.mkdir(parents=True, exist_ok=True)
    config, log = DEMO / case.demo.config, DEMO / case.demo.log
    stem = Path(case.demo.config).stem
    if case.source == "file":
        shutil.copyfile(config, root / config.name)
        shutil.copyfile(log, root / log.name)
        return Job(root, root / config.name, root / log.name, None, None)
    folder = root / "output" / stem
    folder.mkdir(parents=True)
    shutil.copyfile(log, folder / "log.txt")
    if case.source == "folder":
        shutil.copyfile(config, folder / "config.yaml")
        return Job(root, folder, None, None, None)
    db = make_db(root / "aitk_db.db")
    # read as AI Toolkit reads YAML (1e-4 is a float), stored as the UI stores JSON
    add_job(db, stem, config=load_document(config).tree, step=4, id=f"job-{stem}")
    return Job(root, None, None, db, stem)


@dataclass(frozen=True)
class Outcome:
    """What one front end made of a case.

    Attributes:
        moment: The moment in effect.
        kind: The model kind in effect.
        plan: The plan as ``plan --json`` prints it.
        saved: The saved config's bytes (a file, or the database row's ``job_config``);
            None when nothing was saved (an ``environment`` verdict).
        changelog: The change log, its timestamps and the root left out (None: none).
    """

    moment: str
    kind: str
    plan: dict[str, Any]
    saved: bytes | None
    changelog: Any


def _answers(case: Case) -> list[str]:
    arguments = ["--no-probe"]
    if case.moment is not None:
        arguments += ["--moment", case.moment]
    if case.kind is not None:
        arguments += ["--kind", case.kind]
    return arguments


def through_cli(job: Job, case: Case) -> Outcome:
    """``plan --json`` and ``apply`` (every default step) on the job, in-process."""
    status, out, err = cli("plan", *job.cli_arguments(), *_answers(case), "--json")
    assert status == 0, err
    plan = json.loads(out)
    if plan["moment"] == "environment":
        return Outcome(plan["moment"], plan["model_kind"], plan, None, None)
    where = ["--in-place"] if job.db is not None else []
    status, out, err = cli("apply", *job.cli_arguments(), *_answers(case), *where)
    assert status in APPLY_SAVED, err
    lines = out.splitlines()
    changelog = Path(next(line for line in lines if line.startswith("Change log "))[11:])
    if job.db is not None:
        saved = _db_config(job)
    else:
        saved = Path(next(line for line in lines if line.startswith("Wrote "))[6:]).read_bytes()
    return Outcome(plan["moment"], plan["model_kind"], plan, saved, normal(changelog, job.root))


async def through_app(job: Job, case: Case) -> Outcome:
    """The app on the job: the answers picked, every step accepted, saved where it offers."""
    app = job.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        await pilot.press("enter")
        await on_screen(pilot, MomentScreen)
        if case.moment is not None:
            moments = app.screen.query_one("#moments", MarkedOptionList)
            moments.highlighted = MOMENTS.index(case.moment)
        if case.kind is not None:
            app.screen.query_one(f"#{case.kind}", Choice).value = True
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        state = app.require_state()
        if isinstance(app.screen, EnvironmentScreen):
            return Outcome(state.moment, state.model_kind, state.plan.to_json(), None, None)
        await accept_steps(pilot)
        await save_from_review(pilot)
        result = app.screen
        assert isinstance(result, ResultScreen)
        finished: Finished = result.finished
        state = app.require_state()
        saved = finished.saved
        if isinstance(saved, DbSaveResult):
            data = _db_config(job)
        else:
            assert isinstance(saved, SaveResult)
            data = saved.config.read_bytes()
        return Outcome(
            state.moment,
            state.model_kind,
            state.plan.to_json(),
            data,
            normal(saved.changelog, job.root),
        )


async def on_screen(pilot: Pilot[int], screen: type[Any]) -> None:
    """Let pending screen changes land, then check the screen on top."""
    await pilot.pause()
    assert isinstance(pilot.app.screen, screen), type(pilot.app.screen).__name__


def _db_config(job: Job) -> bytes:
    assert job.db is not None and job.name is not None
    row = job_row(job.db, job.name)
    assert row is not None
    return str(row["job_config"]).encode("utf-8")


def normal(changelog: Path, root: Path) -> Any:
    """A change log as both front ends must write it: no timestamps, the root as ``<root>``."""
    text = changelog.read_text(encoding="utf-8").replace(str(root), "<root>")
    data = json.loads(text)
    for run in data["runs"]:
        run.pop("at", None)
    return data


def compare(cli_side: Outcome, app_side: Outcome) -> dict[str, bool]:
    """Check by check (:data:`CHECKS`): does the app give what the command line gives?"""
    return {
        "moment": cli_side.moment == app_side.moment,
        "kind": cli_side.kind == app_side.kind,
        "plan": cli_side.plan == app_side.plan,
        "saved bytes": cli_side.saved == app_side.saved,
        "change log": cli_side.changelog == app_side.changelog,
    }
