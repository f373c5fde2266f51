"""``run --db PATH --job NAME``: the autopilot on a job of AI Toolkit's web UI.

A real SQLite jobs database (the UI's schema), the real ``oom-wizard`` script, and the fake
trainer as its real child. The job's row is the config: each attempt's config is written to a
file of its own for the trainer, and each fix is saved into the row in place with its change
log, as ``apply --db --in-place`` saves it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from oom_wizard.application.autopilot import DbJobRef, UserSave, autopilot
from oom_wizard.application.settling import WizardState
from oom_wizard.commands.run import ask_in_wizard
from oom_wizard.formats.document import load_document
from oom_wizard.storage.changelog import read_changelog
from oom_wizard.storage.jobdb import load_job
from tests.app.test_run_wizard import headless, save
from tests.support.aitk_db import add_job, job_row, make_db, stringify
from tests.support.autopilot_support import DEMO, FAKE_COMMAND, FLUX, Ran, fake_runner, run_here


def ui_job(tmp_path: Path, status: str = "error") -> tuple[Path, str]:
    """The demo's image job stored in a jobs database as the UI stores it; its JSON text."""
    db = make_db(tmp_path / "aitk_db.db")
    text = stringify(load_document(DEMO / FLUX).tree)
    add_job(db, "flux_portrait_lora", text=text, status=status)
    return db, text


@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Callable[..., Ran]:
    """``oom-wizard run --db DB --job flux_portrait_lora ... --auto`` with the stand-in trainer
    on a 24 GiB card (in this process, see ``run_here``; the trainer is a real child)."""

    def run_job(tmp_path: Path, db: Path, *extra: str) -> Ran:
        args = ["run", "--db", str(db), "--job", "flux_portrait_lora", *extra, "--auto", "--"]
        return run_here(
            monkeypatch, capsys, tmp_path, [*args, *FAKE_COMMAND], {"FAKE_VRAM_GB": "24"}
        )

    return run_job


def train(text: str) -> dict[str, object]:
    tree = json.loads(text)
    train: dict[str, object] = tree["config"]["process"][0]["train"]
    return train


def test_a_web_ui_job_is_rolled_back_in_place_until_it_fits(
    tmp_path: Path, run: Callable[..., Ran]
) -> None:
    db, original = ui_job(tmp_path)

    done = run(tmp_path, db)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "The run finished" in done.stdout
    row = job_row(db, "flux_portrait_lora")
    assert row is not None
    now = train(row["job_config"])
    assert now["gradient_checkpointing"] is True and now["steps"] == 3000
    job = load_job(db, "flux_portrait_lora")
    log = read_changelog(job.changelog_path)
    assert [r.direction for r in log.runs] == ["rollback", "scale_up"]
    assert [(a.kind, a.outcome) for a in log.attempts] == [
        ("full", "crashed"),
        ("validation", "passed_validation"),
        ("full", "finished"),
    ]
    # Each attempt ran a config file of its own, written from the row as it was then.
    ran = [Path(a.config) for a in log.attempts]
    assert len(set(ran)) == 3 and all(path.parent == job.changelog_path.parent for path in ran)
    assert ran[0].read_text(encoding="utf-8") == original
    assert train(ran[1].read_text(encoding="utf-8"))["steps"] == 251
    assert train(ran[2].read_text(encoding="utf-8")) == now
    # Its validation run draws a periodic sample, as a file's does: the steps go one past the
    # first sample_every (250), so the sample after the save at step 250 tests the sampling
    # memory of a trained state before the full run (the web UI's sample_now is not needed).
    assert log.attempts[1].log is not None
    validation = Path(log.attempts[1].log).read_text(encoding="utf-8")
    periodic = validation.index("Saving at step 250")
    last_save = validation.index("flux_portrait_lora.safetensors")
    assert "Generating Samples" in validation[periodic:last_save]


def test_a_job_the_ui_is_running_is_not_written(tmp_path: Path, run: Callable[..., Ran]) -> None:
    db, original = ui_job(tmp_path, status="running")

    done = run(tmp_path, db)

    assert done.returncode == 2
    assert done.stderr.startswith("oom-wizard: error: ") and "is running" in done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert "Attempt 1" not in done.stdout  # no second trainer beside the UI's
    row = job_row(db, "flux_portrait_lora")
    assert row is not None and row["job_config"] == original
    assert not (tmp_path / "oom-wizard").exists()  # nothing written


def test_run_with_db_and_a_config_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db, _ = ui_job(tmp_path)
    config = tmp_path / "x.yaml"
    config.write_text((DEMO / FLUX).read_text(encoding="utf-8"), encoding="utf-8")
    args = ["run", str(config), "--db", str(db), "--job", "flux_portrait_lora", "--"]
    done = run_here(monkeypatch, capsys, tmp_path, [*args, *FAKE_COMMAND])
    assert done.returncode == 2
    assert "either a config file or --db" in done.stderr


def test_without_auto_the_wizard_saves_into_the_job_and_that_runs(tmp_path: Path) -> None:
    db, _ = ui_job(tmp_path)
    seen: list[dict[str, object]] = []

    def ask(state: WizardState, fix: Sequence[str]) -> bool | UserSave:
        assert state.db_job is not None and state.db_job.name == "flux_portrait_lora"
        return ask_in_wizard(state, drive=headless(seen, save))  # Enter: in place, the default

    outcome = autopilot(DbJobRef(db, "flux_portrait_lora"), fake_runner(24), ask=ask)

    assert len(seen) == 1 and outcome.exit_status == 0
    assert [(a.kind, a.outcome) for a in outcome.attempts] == [
        ("full", "crashed"),
        ("validation", "passed_validation"),
        ("full", "finished"),
    ]
    row = job_row(db, "flux_portrait_lora")
    assert row is not None and train(row["job_config"])["gradient_checkpointing"] is True
    assert [
        (a.kind, a.outcome)
        for a in read_changelog(load_job(db, "flux_portrait_lora").changelog_path).attempts
    ] == [(a.kind, a.outcome) for a in outcome.attempts]
