"""The card's other tenants: a fake ``nvidia-smi`` first on PATH shows another process holding
6 GiB of a 24 GiB card; ``fit``, ``plan`` and the app's summary name it (pid, name, GiB) and
weigh the job against what is free."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from oom_wizard.application.fitting import VERDICT_STATUS
from oom_wizard.application.settling import Answers, card_of, start
from oom_wizard.host.probe import GpuProcess
from oom_wizard.host.tenants import CardTenants
from oom_wizard.request import JobRequest
from oom_wizard.rules.tenants import real_share, room_gib, tenants_words
from tests.support.plan_support import cli

DEMO = Path(__file__).resolve().parents[2] / "presets" / "demo" / "flux_portrait_lora.yaml"


def fake_smi(folder: Path, monkeypatch: pytest.MonkeyPatch, other_mib: int = 6144) -> None:
    """One 24 GiB card with another process (pid 4242, python) holding ``other_mib``."""
    folder.mkdir()
    script = folder / "nvidia-smi"
    total = 24576
    script.write_text(
        '#!/bin/sh\ncase "$1" in\n'
        f"  --query-gpu=*) printf '0, NVIDIA RTX 4090, {total}, {other_mib}, "
        f"{total - other_mib}\\n' ;;\n"
        f"  --query-compute-apps=*) printf '4242, python, {other_mib}\\n' ;;\nesac\n",
        encoding="utf-8",
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    config = tmp_path / "flux_portrait_lora.yaml"
    shutil.copyfile(DEMO, config)
    fake_smi(tmp_path / "bin", monkeypatch)
    return config


def test_fit_names_the_other_process_and_weighs_against_what_is_free(demo: Path) -> None:
    status, out, err = cli("fit", demo, "--json")
    found = json.loads(out)
    assert status == VERDICT_STATUS[found["verdict"]], err
    assert found["card_gib"] == 24.0 and found["weighed_against_gib"] == 18.0
    assert found["tenants"]["processes"] == [{"pid": 4242, "name": "python", "gib": 6.0}]
    assert "weighed against the 18.00 GiB free" in found["tenants"]["words"]
    status, text, _ = cli("fit", demo)
    assert "on the card: another process holds a real share of the card" in text
    assert "pid 4242 python 6.00 GiB" in text and "of 18.0 GiB" in text


def test_plan_and_the_app_say_it_too(demo: Path) -> None:
    status, text, err = cli("plan", demo, "--moment", "early_steps")
    assert status == 0, err
    assert "on the card: another process holds a real share" in " ".join(text.split())
    state = start(JobRequest(target=demo), Answers(moment="early_steps"))
    card, source = card_of(state.job, state.diagnosis)  # what the plan is sized against
    assert card == 18.0 and source is not None and "free beside" in source
    from oom_wizard.screens.load import summary

    assert "pid 4242 python 6.00 GiB" in summary(state).plain


def test_a_small_share_is_named_but_not_weighed() -> None:
    desktop = CardTenants(0, 24.0, 1.0, 23.0, (GpuProcess(77, "Xorg", 1.0),))
    assert not real_share(desktop) and room_gib(desktop) == 24.0
    assert "a small share" in (tenants_words(desktop) or "")
    assert tenants_words(CardTenants(0, 24.0, 0.0, 24.0)) is None
