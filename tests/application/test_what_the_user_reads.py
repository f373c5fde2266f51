"""Statements the user reads that the application layer makes, each checked against what is
true: a quantize suggestion, a re-add after a crash, the validation run's words."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from oom_wizard.application.autopilot import NEXT_STEPS, what_is_left
from oom_wizard.application.choosing import review
from oom_wizard.application.settling import start
from oom_wizard.cli import main
from oom_wizard.formats.document import load_document
from oom_wizard.request import JobRequest
from oom_wizard.rules.diagnosis import Answers
from tests.support.autopilot_support import DEMO, FLUX, SCENARIOS, play, write_config
from tests.support.fake_trainer import write_checkpoint


def test_run_does_not_suggest_quantizing_a_model_that_is_quantized_already(
    tmp_path: Path,
) -> None:
    quantized = load_document(DEMO / FLUX)
    assert all(p.model.quantize for p in quantized.view().processes)
    words = " ".join(what_is_left(quantized))
    assert "a quantized one" not in words
    assert "a lower qtype (model.qtype: model.quantize is on already)" in words
    text = (DEMO / FLUX).read_text(encoding="utf-8")
    plain_file = tmp_path / "plain.yaml"
    plain_file.write_text(text.replace("quantize: true\n", "quantize: false\n", 1), "utf-8")
    plain = load_document(plain_file)
    assert not any(p.model.quantize for p in plain.view().processes)
    assert what_is_left(plain) == NEXT_STEPS


def test_history_and_scale_up_offer_no_re_add_after_the_last_attempt_crashed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On an 8 GiB card the job crashes at loading twice and ``run`` stops: the last attempt
    crashed with the saved config's own settings, so ``history`` offers no re-add and
    ``scale-up`` warns before one (issue 33, left from the last round)."""
    outcome = play(tmp_path, next(s for s in SCENARIOS if s.name == "image-ladder-exhausted"))
    assert outcome.status == "stopped" and outcome.attempts[-1].outcome == "crashed"
    capsys.readouterr()
    assert main(["history", str(outcome.config)]) == 0
    text = capsys.readouterr().out
    assert "Next scale-up: none offered; " in text
    assert re.search(r"the last attempt, \d+, crashed with this config's own settings", text)
    assert "Later, one setting back per retry" not in text
    assert main(["scale-up", str(outcome.config)]) == 0
    assert re.search(
        r"warning: the last attempt, \d+, crashed with this config's own settings",
        capsys.readouterr().out,
    )


@pytest.mark.parametrize("resumed_at", [None, 500, 2950])
def test_the_validation_runs_words_are_what_the_save_writes(
    tmp_path: Path, resumed_at: int | None
) -> None:
    """Whichever way the switch is, the review's words about the validation run are read off
    the edit it saves: never "there is none" beside a train.steps the save writes, never a
    count the save does not write. Before, the words were worded once, from the switch as the
    screen opened: a job resumed at step 500 read "would not be shorter than the full run, so
    there is none" while the switch, on, saved train.steps 751."""
    config = write_config(tmp_path, next(s for s in SCENARIOS if s.name == "image-early-steps"))
    if resumed_at is not None:
        name = f"flux_portrait_lora_{resumed_at:09d}.safetensors"
        write_checkpoint(tmp_path / "output" / "flux_portrait_lora" / name, resumed_at)
    state = start(JobRequest(target=config, probe=False), Answers(moment="early_steps"))
    for switch in (None, True, False):
        shown = review(state, validation=switch)
        saved = [e.after for e in shown.ready.entries if e.step == "validation_run"]
        note = shown.validation_note or ""
        if saved:
            assert "there is none" not in note and "no validation run" not in note.lower()
            if resumed_at is not None:
                assert f"train.steps is {saved[0]}, so it trains {saved[0] - resumed_at} " in note
        elif resumed_at is not None:
            assert "train.steps is" not in note
            assert "there is none" in note or "no validation run is saved" in note
        if resumed_at is None:
            assert note == ""  # a fresh start: the switch and the diff say it all

    def run_saved(switch: bool) -> list[object]:
        entries = review(state, validation=switch).ready.entries
        return [e.after for e in entries if e.step == "validation_run"]

    if resumed_at == 500:  # the switch can make a run: on, it does; off, it does not
        assert (run_saved(True), run_saved(False)) == ([751], [])
    if resumed_at == 2950:  # no run is shorter: the switch on saves none, and says so
        assert run_saved(True) == []
