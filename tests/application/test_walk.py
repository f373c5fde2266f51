"""The default walk: which roll-back steps Enter goes through (the application layer's rule).

The walk is the plan's procedure for this crash: the moment's first steps and the kind's
ladder with something left to change, plus any deeper lever a fix the review offers takes.
A deeper lever that every fix leaves off (the demo's EMA copy, its LoRA rank) is not a
screen on the way; the progress line, the command palette and the review reach it.
"""

from __future__ import annotations

from pathlib import Path

from oom_wizard.application.choosing import (
    choose,
    done_before,
    fix_names,
    in_walk,
    optional_line,
    optional_steps,
    walk_steps,
)
from oom_wizard.application.demo import IMAGE_JOB, VIDEO_JOB, DemoJob
from oom_wizard.application.settling import WizardState, start
from oom_wizard.request import JobRequest
from oom_wizard.rules.plan import StepChoice
from tests.support.app_support import demo_folder


def demo(tmp_path: Path, job: DemoJob) -> WizardState:
    folder = demo_folder(tmp_path)
    return start(JobRequest(folder / job.config, folder / job.log, probe=False))


def test_the_image_demo_walks_its_ladder_and_leaves_the_deeper_levers_off_it(
    tmp_path: Path,
) -> None:
    state = demo(tmp_path, IMAGE_JOB)
    assert [s.id for s in walk_steps(state)] == [
        "gradient_checkpointing",
        "batch_size",
        "top_bucket",
        "sampling",
    ]
    left = optional_steps(state)
    assert [(number, step.id) for number, step in left] == [
        (8, "quantize"),
        (10, "extra_passes"),
        (14, "lora_rank"),
    ]
    for _, step in left:  # off in every fix the review offers
        assert step.deeper and not any(step.id in state.plan.fix_steps(f) for f in fix_names(state))
    assert optional_line(state) == (
        "Optional, off by default and not opened on the way: step 8 Quantized weights, step 10 "
        "Extra passes and copies off, step 14 Lower LoRA rank (the command palette opens them)."
    )
    # Switched on by hand (opened from the palette), the step is on the walk from then on.
    extra = state.step("extra_passes")
    assert not in_walk(state, extra)
    chosen = choose(state, StepChoice("extra_passes", enabled=True))
    assert in_walk(chosen, extra)
    assert [number for number, _ in optional_steps(chosen)] == [8, 14]


def test_a_deeper_lever_a_fix_takes_is_on_the_walk(tmp_path: Path) -> None:
    # Intermittent: the crash's floor sizes the deficit; fewer frames alone leave less than the
    # margin, so the least-loss fix also takes a deeper lever (the text encoder off the card
    # while training, free of quality loss), and both options are that one set; the deeper
    # step is on the walk. The video demo's job, without its cached text embeddings and with
    # its text encoder at bf16 (quantized, fewer frames alone fit within the CPU class's band).
    folder = demo_folder(tmp_path)
    config = folder / VIDEO_JOB.config
    text = config.read_text(encoding="utf-8")
    text = text.replace("        cache_text_embeddings: true\n", "")
    text = text.replace("        quantize_te: true\n", "        quantize_te: false\n")
    config.write_text(text, encoding="utf-8")
    state = start(JobRequest(config, folder / VIDEO_JOB.log, probe=False))
    assert state.plan.fix_steps() == ("num_frames", "text_encoder")
    assert state.plan.fix_steps("safe") == ("num_frames", "text_encoder")
    deeper = [s.id for s in walk_steps(state) if s.deeper]
    assert deeper and all(step in state.plan.fix_steps("safe") for step in deeper)
    assert [s.id for s in walk_steps(state)] == [
        "num_frames",
        "sampling",
        "text_encoder",
    ]
    index = state.step_index("text_encoder")
    jumped = done_before(state, index)
    assert jumped is not None
    assert jumped.words() == "steps 6-9 already done in the config, or optional"
    # The deeper levers no fix takes are opened from the palette, not walked through.
    assert [step.id for _, step in optional_steps(state)] == [
        "smaller_bucket",
        "quantize",
        "layer_offloading",
        "lora_rank",
    ]
