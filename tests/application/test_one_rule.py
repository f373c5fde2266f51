"""Rules that the command line and the app must decide in one place (issue 21).

Each test runs both front ends' paths (or the two callers of a rule) on the same input and
checks that they agree, or holds the code to its one owner.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

from oom_wizard.application.demo import IMAGE_JOB
from oom_wizard.application.follow import WatchTarget
from oom_wizard.application.watching import diagnose_crash
from tests.support.parity_support import DEMO
from tests.support.plan_support import cli

REPO = Path(__file__).resolve().parents[2]


def test_a_log_without_its_config_is_diagnosed_by_one_rule() -> None:
    """``diagnose --log`` and a followed run without a config (``watch``, ``run``) read the
    same verdict, moment and first change from the same log."""
    log = DEMO / IMAGE_JOB.log
    status, out, err = cli("diagnose", "--log", log, "--json", "--no-probe")
    assert status == 0, err
    printed = json.loads(out)
    report = diagnose_crash(WatchTarget(log=log, config=None, name="job"))
    assert report.state is None
    assert (report.verdict, report.moment, report.first_change) == (
        printed["verdict"],
        printed["moment"],
        printed["first_change"],
    )


def constructions(name: str) -> list[str]:
    """Where ``name(...)`` is called in ``wizard/`` and ``screens/``: ``file:function``."""
    found = []
    for path in sorted([*REPO.glob("wizard/**/*.py"), *REPO.glob("screens/*.py")]):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef):
                continue
            for node in ast.walk(function):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and node.func.id == name
                ):
                    found.append(f"{path.relative_to(REPO)}:{function.name}")
    return found


def test_the_wizard_state_has_one_constructor() -> None:
    """``plan``, ``apply``, ``diagnose``, ``run`` and the app get their state from
    ``start``; the state after new answers comes from it by ``dataclasses.replace``."""
    assert constructions("WizardState") == ["wizard/application/settling.py:start"]


def test_the_first_change_is_the_first_step_the_default_fix_takes() -> None:
    """``diagnose``'s "first" line and the default set are one rule: a step that is on by
    default but that the default fix leaves out is not what to change first."""
    import dataclasses

    from oom_wizard.application.choosing import default_choices
    from oom_wizard.application.settling import start
    from oom_wizard.application.watching import first_step
    from oom_wizard.request import JobRequest

    demo = DEMO / IMAGE_JOB.config
    state = start(JobRequest(demo, log=DEMO / IMAGE_JOB.log, probe=False))
    skipped = next(s for s in state.plan.steps if s.default_on and not s.satisfied)
    taken = next(
        s
        for s in state.plan.steps
        if s is not skipped and not s.satisfied and s.fields and s.id != "validation_run"
    )
    plan = dataclasses.replace(
        state.plan, fixes={"just_enough": (taken.id,)}, default_fix="just_enough"
    )
    state = dataclasses.replace(state, settled=dataclasses.replace(state.settled, plan=plan))
    enabled = [step for step, choice in default_choices(state).items() if choice.enabled]
    assert enabled == [taken.id]
    first = first_step(state)
    assert first is not None and first.startswith(taken.title), (first, skipped.title)


def test_the_change_log_beside_an_output_is_one_rule(tmp_path: Path) -> None:
    """The app's destination picker shows (``default_file_target``) exactly the config and
    change log that a save with no names (``ToFile()``: ``apply`` without ``-o``) writes."""
    import shutil

    from oom_wizard.application.saving import ToFile, default_file_target, save
    from oom_wizard.application.settling import start as open_state
    from oom_wizard.request import JobRequest
    from oom_wizard.storage.save import SaveResult

    for name in (IMAGE_JOB.config, IMAGE_JOB.log):
        shutil.copyfile(DEMO / name, tmp_path / name)
    state = open_state(
        JobRequest(tmp_path / IMAGE_JOB.config, log=tmp_path / IMAGE_JOB.log, probe=False)
    )
    shown = default_file_target(state)
    saved = save(state, None, ToFile())
    assert isinstance(saved, SaveResult)
    assert (shown.output, shown.changelog) == (saved.config, saved.changelog)


def changelog_reads(monkeypatch: object) -> list[str]:
    """The change logs read from now on (every read goes through ``read_regular_file``, which
    the change log's module imports from the document's)."""
    import oom_wizard.formats.document as document
    import oom_wizard.storage.changelog as changelog

    assert hasattr(monkeypatch, "setattr")
    reads: list[str] = []
    real = document.read_regular_file

    def counting(path: Path, *args: object, **kwargs: object) -> bytes:
        if str(path).endswith(".changelog.json"):
            reads.append(Path(path).name)
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    for module in (document, changelog):
        monkeypatch.setattr(module, "read_regular_file", counting)
    return reads


def test_the_change_log_is_read_once_for_an_open_a_save_and_its_result(
    tmp_path: Path, monkeypatch: object
) -> None:
    """The app's open, save and result screen (the re-adds ahead of the saved config) read
    the change log once: the save hands back the log it wrote. ``apply`` reads it once."""
    from oom_wizard.application.choosing import prepared
    from oom_wizard.application.saving import ToFile, save
    from oom_wizard.application.scale_up import offered_after_save
    from oom_wizard.application.settling import start as open_state
    from oom_wizard.request import JobRequest
    from tests.support.scale_up_parity import ScaleUpCase, rolled_back

    ours = rolled_back(tmp_path / "app", ScaleUpCase(IMAGE_JOB, None))
    reads = changelog_reads(monkeypatch)
    state = open_state(JobRequest(ours, probe=False))
    ready = prepared(state, None)
    saved = save(state, None, ToFile(), ready=ready)
    offered_after_save(saved, ready)
    assert len(reads) == 1, reads

    again = rolled_back(tmp_path / "cli", ScaleUpCase(IMAGE_JOB, None))
    reads.clear()
    status, _out, err = cli("apply", again, "--no-probe")
    assert status == 0, err
    assert len(reads) == 1, reads


def test_an_open_with_no_answer_diagnoses_the_log_once(monkeypatch: object) -> None:
    """``start`` (the app's first state, ``plan`` and ``apply`` without ``--moment`` or
    ``--kind``) diagnoses once: the settled diagnosis with no answer is the log's own."""
    from oom_wizard.application import opening, settling
    from oom_wizard.application.settling import start as open_state
    from oom_wizard.request import JobRequest

    assert hasattr(monkeypatch, "setattr")
    calls: list[str] = []
    for module in (opening, settling):  # the two that call it, with the name they imported
        real = module.diagnose

        def counting(*args: object, _real: object = real, **kwargs: object) -> object:
            calls.append("diagnose")
            return _real(*args, **kwargs)  # type: ignore[operator]

        monkeypatch.setattr(module, "diagnose", counting)
    state = open_state(JobRequest(DEMO / IMAGE_JOB.config, log=DEMO / IMAGE_JOB.log, probe=False))
    assert calls == ["diagnose"]
    assert state.diagnosis == state.job.log_diagnosis
