"""Unit tests of the application layer's rules (the parity tests run them through both
front ends): the change-log policy, the probe flag, settling answers, recording steps, and
the typed run record of a web-UI job."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oom_wizard.application.choosing import prepared, recorded_steps
from oom_wizard.application.opening import open_job
from oom_wizard.application.settling import WizardState, settle, start
from oom_wizard.errors import WizardError
from oom_wizard.paths import format_path
from oom_wizard.request import JobRequest
from oom_wizard.rules.diagnosis import Answers
from oom_wizard.rules.plan import StepChoice
from oom_wizard.storage.changelog import ChangeLog, DatabaseRecord, RunRecord, changelog_path_for
from tests.support.plan_support import job, write_job

TREE = job(
    train={"batch_size": 4, "steps": 2000, "gradient_checkpointing": False},
    datasets=[{"resolution": [512, 768, 1024]}],
)


def opened(tmp_path: Path, tree: dict[str, object] = TREE) -> WizardState:
    return start(JobRequest(write_job(tmp_path / "job.yaml", tree), probe=False))


def test_a_broken_change_log_stops_the_open(tmp_path: Path) -> None:
    config = write_job(tmp_path / "job.yaml", TREE)
    changelog_path_for(config).write_text("{not json", encoding="utf-8")
    with pytest.raises(WizardError) as refused:
        open_job(JobRequest(config, probe=False))
    assert refused.value.one_line().startswith(f"{changelog_path_for(config)}:")


def test_no_probe_means_no_probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def read_probe() -> tuple[None, None]:
        calls.append("probed")
        return None, None

    monkeypatch.setattr("oom_wizard.application.opening.read_probe", read_probe)
    config = write_job(tmp_path / "job.yaml", TREE)
    open_job(JobRequest(config, probe=False))
    assert calls == []
    open_job(JobRequest(config))
    assert calls == ["probed"]


def test_settling_says_where_the_moment_and_kind_come_from(tmp_path: Path) -> None:
    state = opened(tmp_path)
    assert (state.settled.moment_source, state.settled.kind_source) == ("assumed", "found")
    answered = settle(state.job, Answers(moment="sampling", model_kind="video"))
    assert (answered.moment, answered.model_kind) == ("sampling", "video")
    assert (answered.moment_source, answered.kind_source) == ("answer", "answer")


def test_an_answer_that_repeats_the_config_is_no_answer(tmp_path: Path) -> None:
    state = opened(tmp_path)
    same = settle(state.job, Answers(model_kind="image"))
    assert same.kind_source == "found"
    assert same.diagnosis == state.diagnosis


def test_a_step_switched_on_that_changes_nothing_is_not_recorded(tmp_path: Path) -> None:
    state = opened(tmp_path)
    first = state.rollback_steps()[0]
    choices = {
        first.id: StepChoice(
            first.id,
            enabled=True,
            fields={format_path(field.path): False for field in first.fields},
        )
    }
    ready = prepared(state, choices)
    assert not ready.changed
    assert recorded_steps(state.plan, ready) == []
    on = prepared(state, {first.id: StepChoice(first.id, enabled=True)})
    assert recorded_steps(state.plan, on) == [first.id]


def test_a_web_ui_run_record_is_typed_and_a_file_run_has_none() -> None:
    data = {
        "source": {"path": "a"},
        "output": {"path": "a"},
        "runs": [
            {"at": "2026-01-01T00:00:00+00:00", "direction": "rollback"},
            {
                "at": "2026-01-01T00:00:00+00:00",
                "direction": "rollback",
                "database": {"job_id": "1", "job_name": "j", "saved": "in_place"},
            },
        ],
    }
    log = ChangeLog.model_validate(data)
    assert log.runs[0].database is None
    assert log.runs[1].database == DatabaseRecord(job_id="1", job_name="j", saved="in_place")
    written = json.loads(log.to_json())
    assert "database" not in written["runs"][0]
    assert written["runs"][1]["database"] == {"job_id": "1", "job_name": "j", "saved": "in_place"}
    assert RunRecord.model_validate(written["runs"][1]).database == log.runs[1].database
