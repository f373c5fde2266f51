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


def _bar(step: int, elapsed: str = "00:00") -> str:
    return f"flux:   2%|▏         | {step}/3000 [{elapsed}<10:00,  0.20s/it, lr: 1.0e-04]\r"


OOM_LINE = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total "
    "capacity of 23.55 GiB of which 1.00 GiB is free. Including non-PyTorch memory, this "
    "process has 22.50 GiB memory in use.\n"
)


@pytest.mark.parametrize(
    ("found_step", "resumable", "expected"),
    [
        (False, False, (0, 300)),  # a bar first drawn at 50: no resume, 300 steps trained
        (False, True, (50, 250)),  # a checkpoint was there: it resumed at 50
        (True, False, (50, 250)),  # the log says so: "Found step 50 in metadata"
    ],
)
def test_run_claims_a_resume_only_where_one_could_happen_or_the_log_says_so(
    tmp_path: Path, found_step: bool, resumable: bool, expected: tuple[int, int]
) -> None:
    from oom_wizard.application.autopilot import steps_trained
    from oom_wizard.logs.scan import scan_log

    log = tmp_path / "log.txt"
    said = "Found step 50 in metadata, starting from step 50\n" if found_step else ""
    log.write_text(
        "Running 1 job\n" + said + "".join(_bar(n) for n in range(50, 301, 50)) + "\n",
        encoding="utf-8",
    )
    assert steps_trained(scan_log(log), resumable=resumable) == expected


def test_without_nvidia_smi_the_card_is_the_one_the_oom_message_names(tmp_path: Path) -> None:
    from oom_wizard.application.autopilot import card_of
    from oom_wizard.host.supervision import TrainerEnd
    from oom_wizard.logs.scan import scan_log

    log = tmp_path / "log.txt"
    log.write_text("Running 1 job\n" + _bar(3) + "\n" + OOM_LINE, encoding="utf-8")
    scan = scan_log(log)
    assert card_of(TrainerEnd(returncode=1, duration_s=1.0), scan) == 23.55
    measured = TrainerEnd(returncode=1, duration_s=1.0, card_gib=24.0)
    assert card_of(measured, scan) == 24.0
