"""Tests of the diagnosis: moments, model kinds, the environment verdict, advice and answers."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from typing import Any, Literal

import pytest

from oom_wizard.errors import WizardError
from oom_wizard.formats.view import JobView, build_view
from oom_wizard.host.probe import GpuInfo, GpuProcess, ProbeResult
from oom_wizard.logs.result import LogScan
from oom_wizard.logs.scan import scan_text
from oom_wizard.rules import diagnosis as diagnosis_module
from oom_wizard.rules.diagnosis import (
    EARLY_STEP_LIMIT,
    Answers,
    Diagnosis,
    conservative,
    diagnose,
)
from oom_wizard.storage.changelog import ChangeEntry, ChangeLog, FileRef, RunRecord

BASE: dict[str, Any] = {
    "job": "extension",
    "config": {
        "name": "my_lora",
        "process": [
            {
                "type": "diffusion_trainer",
                "network": {"type": "lora", "linear": 16, "linear_alpha": 16},
                "train": {
                    "batch_size": 1,
                    "steps": 3000,
                    "gradient_checkpointing": True,
                    "disable_sampling": True,
                },
                "model": {"arch": "flux", "name_or_path": "black-forest-labs/FLUX.1-dev"},
                "datasets": [{"folder_path": "/d", "resolution": [512]}],
                "sample": {"width": 512, "height": 512, "sample_every": 250},
            }
        ],
    },
}


def view_of(**sections: dict[str, Any]) -> JobView:
    """The base config with some sections' keys replaced (``datasets`` replaces the list)."""
    tree = copy.deepcopy(BASE)
    process = tree["config"]["process"][0]
    for name, values in sections.items():
        if name == "datasets":
            process["datasets"] = values["items"]
        elif values is None:
            process.pop(name, None)
        else:
            process[name] = {**process.get(name, {}), **values}
    return build_view(tree, file="job.yaml", locate=lambda path: None)


def bar(n: int, total: int = 3000) -> str:
    return f"my_lora: {n * 100 // total:3d}%|#         | {n}/{total} [00:10<1:19:20,  1.73s/it]"


def log(*lines: str) -> LogScan:
    return scan_text("\n".join(lines) + "\n")


def oom_message(
    *,
    tried: str = "2.00 GiB",
    total: float = 24.0,
    free: str = "100.00 MiB",
    this: float = 23.4,
    unallocated: str = "0.20 GiB",
    others: str = "",
) -> str:
    return (
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {tried}. GPU 0 has a total "
        f"capacity of {total:.2f} GiB of which {free} is free. {others}Including non-PyTorch "
        f"memory, this process has {this:.2f} GiB memory in use. Of the allocated memory "
        f"18.00 GiB is allocated by PyTorch, and {unallocated} is reserved by PyTorch but "
        "unallocated."
    )


OOM = "torch.OutOfMemoryError: CUDA out of memory."
LOADING = ["Loading Flux model", "Loading transformer", "Quantizing transformer"]


def advice_ids(diagnosis: Diagnosis) -> list[str]:
    return [a.id for a in diagnosis.advice]


# --- moments ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lines", "moment"),
    [
        ([*LOADING, OOM], "loading"),
        (["Loading transformer", "Quantizing transformer", OOM], "loading"),
        (["Caching latents for /d", OOM], "loading"),
        (["Caching text_embeddings for /d", OOM], "loading"),
        (["Generating baseline samples before training", OOM], "loading"),
        (
            [*LOADING, bar(0), bar(250), "Generating Images:   0%|          | 0/2 [00:00<?]", OOM],
            "sampling",
        ),
        ([*LOADING, bar(0), OOM], "early_steps"),
        ([*LOADING, bar(0), bar(EARLY_STEP_LIMIT - 1), OOM], "early_steps"),
        ([*LOADING, bar(0), bar(EARLY_STEP_LIMIT), OOM], "intermittent"),
        ([*LOADING, bar(0), bar(700), "", "Saving at step 750", OOM], "intermittent"),
        (["generating sample images at step / サンプル画像生成ステップ: 250", OOM], "sampling"),
    ],
)
def test_moment_from_the_phase_and_step(lines: list[str], moment: str) -> None:
    assert diagnose(log(*lines), view_of()).moment == moment


def test_skips_at_the_first_steps_then_the_abort_are_early_steps() -> None:
    banner = "# OOM during training step, skipping batch {}/3 #"
    result = diagnose(
        log(
            bar(0),
            banner.format(1),
            bar(1),
            banner.format(2),
            bar(2),
            banner.format(3),
            bar(3),
            "Error running job: OOM during training step 3 times in a row, aborting training",
        ),
        view_of(),
    )
    assert result.moment == "early_steps"
    assert {"oom_skip", "oom_abort"} <= set(result.signals)


def test_a_crash_right_after_a_resume_counts_from_the_resume() -> None:
    resumed = log("Found step 1500 in metadata, starting from there", bar(1500), bar(1502), OOM)
    result = diagnose(resumed, view_of())
    assert result.moment == "early_steps" and result.resumed
    assert "after resuming" in result.verdict
    assert diagnose(log(bar(1500), bar(1530), OOM), view_of()).moment == "intermittent"


def test_skips_mixed_with_progress_are_intermittent_even_without_a_crash() -> None:
    scan = log(
        bar(0), bar(400), "# OOM during training step, skipping batch 1/3 #", bar(401), bar(900)
    )
    result = diagnose(scan, view_of())
    assert not scan.crashed
    assert result.moment == "intermittent"
    assert result.verdict.startswith("Training skipped 1 batch for")


TRACEBACK_IN_TRAINING = [
    "Traceback (most recent call last):",
    '  File "/tk/jobs/process/BaseSDTrainProcess.py", line 2128, in run',
    '  File "/tk/extensions_built_in/sd_trainer/SDTrainer.py", line 1927, in hook_train_loop',
    '  File "/venv/torch/_tensor.py", line 648, in backward',
    OOM,
]


def test_a_training_traceback_without_a_bar_and_several_buckets_is_intermittent() -> None:
    result = diagnose(
        log(*TRACEBACK_IN_TRAINING),
        view_of(datasets={"items": [{"folder_path": "/d", "resolution": [512, 768, 1024]}]}),
    )
    assert (result.moment, result.phase, result.confidence) == ("intermittent", "training", "low")


def test_a_training_traceback_without_a_bar_and_one_bucket_is_early_steps() -> None:
    # The frames pin a training step and every step weighs the same: medium (issue 40).
    result = diagnose(log(*TRACEBACK_IN_TRAINING), view_of())
    assert (result.moment, result.confidence) == ("early_steps", "medium")
    assert "which step, the log does not show" in result.basis


def test_clip_lengths_from_each_clip_count_as_several_buckets() -> None:
    clips = {"items": [{"folder_path": "/v", "resolution": [512], "auto_frame_count": True}]}
    assert diagnose(log(*TRACEBACK_IN_TRAINING), view_of(datasets=clips)).moment == "intermittent"


def test_an_oom_line_alone_means_before_step_1_said_with_low_confidence() -> None:
    result = diagnose(log(OOM), view_of())
    assert (result.moment, result.phase, result.confidence) == ("loading", "unknown", "low")
    assert any("excerpt" in note for note in result.notes)


def test_a_loss_dict_follow_on_alone_is_a_training_step() -> None:
    scan = log("Error running job: local variable 'loss_dict' referenced before assignment")
    assert diagnose(scan, view_of()).moment == "early_steps"


def test_a_log_without_a_crash_has_no_moment() -> None:
    finished = ["Saving at step 3000", "", "Result:", " - 1 completed jobs", " - 0 failure"]
    result = diagnose(log(*LOADING, bar(0), bar(100), bar(3000), *finished), view_of())
    assert result.moment is None and result.crashed is False
    assert "no crash" in result.verdict


def test_a_training_bar_at_its_total_is_a_finished_run() -> None:
    result = diagnose(log(*LOADING, bar(0), bar(2999), bar(3000)), view_of())
    assert result.moment is None and "no crash" in result.verdict


def test_a_log_that_stops_inside_training_gives_that_moment_with_low_confidence() -> None:
    result = diagnose(log(*LOADING, bar(0), bar(100)), view_of())
    assert (result.moment, result.confidence, result.crashed) == ("intermittent", "low", False)
    assert "stops" in result.verdict and "stalled or was killed" in result.verdict


def test_a_crash_that_is_not_an_oom_has_no_moment() -> None:
    scan = log(
        *LOADING,
        "Error running job: [Errno 2] No such file or directory: '/d'",
        "FileNotFoundError: [Errno 2] No such file or directory: '/d'",
    )
    result = diagnose(scan, view_of())
    assert result.moment is None
    assert any("not with an out-of-memory error" in note for note in result.notes)


def test_a_cut_off_traceback_is_assumed_to_be_the_oom() -> None:
    result = diagnose(
        log(*LOADING, bar(0), bar(30), "Traceback (most recent call last):"), view_of()
    )
    assert (result.moment, result.confidence) == ("intermittent", "low")


def test_no_log_no_answer_no_moment() -> None:
    result = diagnose(None, view_of())
    assert (result.moment, result.phase, result.crashed, result.signals) == (
        None,
        "unknown",
        None,
        (),
    )


# --- model kinds --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "kind"),
    [
        ({"arch": "qwen_image"}, "image"),
        ({"arch": "qwen_image_edit_plus:2511"}, "image"),
        ({"arch": "wan22_14b:t2v"}, "video"),
        ({"arch": "ltx2.3"}, "video"),
        ({"arch": "wan21:1b"}, "video"),
    ],
)
def test_the_arch_decides_the_kind(model: dict[str, Any], kind: str) -> None:
    assert diagnose(None, view_of(model=model)).model_kind == kind


def test_an_audio_arch_is_treated_as_image_and_said_so() -> None:
    result = diagnose(None, view_of(model={"arch": "ace_step_15"}))
    assert result.model_kind == "image"
    assert any("audio model" in note and "image and video" in note for note in result.notes)


def test_legacy_flags_give_the_arch() -> None:
    result = diagnose(None, view_of(model={"arch": None, "is_xl": True}))
    assert (result.model_kind, result.arch) == ("image", "sdxl")


@pytest.mark.parametrize(
    "sections",
    [
        {"datasets": {"items": [{"folder_path": "/v", "resolution": [512], "num_frames": 41}]}},
        {"sample": {"num_frames": 81}},
        {"sample": {"samples": [{"prompt": "a cat --frames 33"}]}},
    ],
)
def test_frames_above_one_anywhere_mean_video(sections: dict[str, Any]) -> None:
    model = {"model": {"arch": None, "name_or_path": "some/model"}}
    assert diagnose(None, view_of(**model, **sections)).model_kind == "video"


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("Wan-AI/Wan2.1-T2V-14B-Diffusers", "video"),
        ("Lightricks/LTX-Video", "video"),
        ("black-forest-labs/FLUX.1-dev", "image"),
    ],
)
def test_the_model_path_is_the_last_hint(path: str, kind: str) -> None:
    assert diagnose(None, view_of(model={"arch": None, "name_or_path": path})).model_kind == kind


def test_an_unknown_arch_is_said_and_the_path_still_hints() -> None:
    result = diagnose(None, view_of(model={"arch": "newmodel", "name_or_path": "x/wan2.5-video"}))
    assert result.model_kind == "video"
    assert any("'newmodel'" in note for note in result.notes)


def test_without_a_config_the_kind_is_unknown_and_said_so() -> None:
    result = diagnose(log(*LOADING, OOM), None)
    assert result.model_kind is None and result.arch is None
    assert "model kind unknown" in result.verdict


# --- the environment ----------------------------------------------------------------------------


def test_other_processes_in_the_message_are_the_environment() -> None:
    others = "Process 4242 has 6.00 GiB memory in use. Process 77 has 1.50 GiB memory in use. "
    result = diagnose(
        log(*LOADING, bar(0), bar(40), oom_message(others=others, this=16.0)), view_of()
    )
    assert result.moment == "environment" and result.environment_suspected
    assert "pid 4242 6.00 GiB" in result.reasons[0]
    assert advice_ids(result) == ["other_processes"]
    assert result.first_change == result.advice[0].text


def test_in_a_container_the_jobs_own_listed_process_is_not_the_environment() -> None:
    """diffusion-pipe #153: no "this process"; the 78.44 GiB process is the job itself."""
    message = (
        "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.68 GiB. GPU 0 "
        "has a total capacity of 79.21 GiB of which 259.19 MiB is free. Process 2828469 has "
        "516.00 MiB memory in use. Process 2856448 has 78.44 GiB memory in use. Of the allocated "
        "memory 70.48 GiB is allocated by PyTorch, and 6.78 GiB is reserved by PyTorch but "
        "unallocated."
    )
    result = diagnose(log(*LOADING, bar(0), message), view_of())
    assert result.moment == "early_steps" and not result.environment_suspected
    assert any("the job itself filled the card" in reason for reason in result.reasons)
    assert any("names no process as its own" in note for note in result.notes)
    assert result.to_json()["oom"]["this_process_inferred"] is True


def test_in_a_container_a_foreign_process_holding_the_card_is_the_environment() -> None:
    """DiffSynth-Studio #1238: the 21.96 GiB process is the job, the 73.02 GiB one is not."""
    message = (
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 18.00 MiB. GPU  has "
        "a total capacity of 95.00 GiB of which 6.50 MiB is free. Process 3927658 has 73.02 GiB "
        "memory in use. Process 4105349 has 21.96 GiB memory in use. Of the allocated memory "
        "21.65 GiB is allocated by PyTorch, and 1.51 MiB is reserved by PyTorch but unallocated."
    )
    result = diagnose(log(message), view_of())
    assert result.moment == "environment"
    assert "pid 3927658 73.02 GiB" in result.reasons[0]
    assert "4105349" not in " ".join(result.reasons)


# FluxGym #78 and musubi-tuner #978 (Windows): a small allocation fails with half the card free.
ROOM_LEFT_MESSAGES = [
    "[2024-09-18 08:19:50] [INFO] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
    "80.00 MiB. GPU 0 has a total capacity of 12.00 GiB of which 6.31 GiB is free. Of the "
    "allocated memory 4.64 GiB is allocated by PyTorch, and 14.47 MiB is reserved by PyTorch but "
    "unallocated.",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 48.00 MiB. GPU 0 has a total "
    "capacity of 15.93 GiB of which 8.76 GiB is free. Of the allocated memory 6.06 GiB is "
    "allocated by PyTorch, and 1.45 M",
]


@pytest.mark.parametrize("message", ROOM_LEFT_MESSAGES)
def test_an_allocation_failing_with_the_card_far_from_full_is_the_environment(
    message: str,
) -> None:
    result = diagnose(log(message), view_of())
    assert result.moment == "environment"
    assert "the card was not full" in result.reasons[0]
    # The host's side first; and the run's only OOM with most of the card free is a one-off:
    # one retry of the same config with expandable segments (rules.oneoff).
    assert advice_ids(result) == ["host_ram", "expandable_segments"]
    assert result.advice[1].text.startswith("A one-off, not the config: the run's only")


def test_a_large_allocation_above_what_is_free_is_still_the_config() -> None:
    message = oom_message(tried="8.00 GiB", free="6.00 GiB", this=17.5)
    result = diagnose(log(*LOADING, bar(0), message), view_of())
    assert result.moment == "early_steps" and not result.environment_suspected


def test_a_little_free_memory_is_not_room_left() -> None:
    message = oom_message(tried="20.00 MiB", free="1.00 GiB", this=22.8)
    result = diagnose(log(*LOADING, bar(0), message), view_of())
    assert result.moment == "early_steps"


def test_a_small_other_process_is_not_the_environment() -> None:
    others = "Process 4242 has 300.00 MiB memory in use. "
    result = diagnose(log(*LOADING, bar(0), oom_message(others=others)), view_of())
    assert result.moment == "early_steps" and not result.environment_suspected


def test_memory_held_outside_this_process_without_a_listed_process() -> None:
    result = diagnose(log(*LOADING, oom_message(this=12.0)), view_of())
    assert result.moment == "environment"
    assert "outside this process" in result.reasons[0]


def test_the_job_holding_nearly_all_the_card_is_not_the_environment() -> None:
    message = oom_message(this=23.5, free="0 bytes")
    result = diagnose(log(*LOADING, message), view_of())
    assert "zero_free" in result.signals
    assert result.moment == "loading" and not result.environment_suspected
    assert "the job itself filled the card" in result.reasons[0]


def test_a_conservative_config_dying_at_once_with_zero_free_is_the_environment() -> None:
    legacy = (
        "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 23.65 GiB total "
        "capacity; 1.10 GiB already allocated; 0 bytes free; 1.20 GiB reserved in total by PyTorch)"
    )
    result = diagnose(log(*LOADING, legacy), view_of())
    assert result.moment == "environment"
    assert "conservative config" in result.reasons[0]
    assert "fresh_worker" in advice_ids(result)


def test_a_legacy_message_where_pytorch_reserved_the_card_is_the_job() -> None:
    """'0 bytes free' in the legacy form, but this PyTorch reserved all the card but its CUDA
    context: the job filled the card, even with a conservative config."""
    legacy = (
        "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 4.00 GiB total "
        "capacity; 3.43 GiB already allocated; 0 bytes free; 3.50 GiB reserved in total by PyTorch)"
    )
    result = diagnose(log(*LOADING, legacy), view_of())
    assert result.moment == "loading"
    assert not result.environment_suspected
    assert "the job itself filled the card" in result.reasons[-1]


@pytest.mark.parametrize(
    "sections",
    [
        {"train": {"batch_size": 4}},
        {"train": {"gradient_checkpointing": False}},
        {"datasets": {"items": [{"folder_path": "/d", "resolution": [512, 1024]}]}},
        {"train": {"disable_sampling": False}, "sample": {"width": 1024, "height": 1024}},
        # No network: a full fine-tune (JoePenna Dreambooth #37 died in Lightning's sanity check).
        {"network": None},
    ],
)
def test_a_config_that_is_not_conservative_keeps_its_moment(sections: dict[str, Any]) -> None:
    view = view_of(**sections)
    assert view.primary is not None and not conservative(view.primary)[0]
    scan = log(*LOADING, "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling x")
    result = diagnose(scan, view)
    assert result.moment == "loading" and not result.environment_suspected


def test_a_driver_signal_late_in_training_is_not_at_once() -> None:
    scan = log(*LOADING, bar(0), bar(500), "RuntimeError: CUDA error: out of memory")
    assert diagnose(scan, view_of()).moment == "intermittent"


def test_a_driver_signal_at_once_without_a_config_is_only_suspected() -> None:
    result = diagnose(log(*LOADING, "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED"), None)
    assert result.moment == "loading" and result.environment_suspected
    assert "if the config is already small" in result.reasons[0]


PINNED = [
    '  File "/tk/toolkit/memory_management/manager.py", line 80, in move',
    '    block.to("cpu", non_blocking=True)',
    "RuntimeError: CUDA error: out of memory",
]


def test_a_pinned_memory_copy_is_the_environment_and_never_asks_for_more_offloading() -> None:
    view = view_of(
        model={
            "arch": "wan21:1b",
            "layer_offloading": True,
            "layer_offloading_transformer_percent": 0.3,
        },
        datasets={"items": [{"folder_path": "/d", "resolution": [1024]}]},
    )
    result = diagnose(log(*LOADING, *PINNED), view)
    assert result.moment == "environment"
    assert "pinned" in result.reasons[0]
    assert advice_ids(result) == ["pinned_memory"]
    text = result.advice[0].text
    assert "Do not add more offloading" in text and "layer_offloading_transformer_percent" in text
    assert not any(
        "more offloading" in a.text.replace("Do not add more offloading", "") for a in result.advice
    )


# diffusion-pipe #216 and #342 (Wan 14B with block swap): the traceback, as posted, stops in
# the copy of the swapped blocks to the CPU, before its error line.
CPU_COPY_CUT_OFF = [
    "trainable params: 153,354,240 || all params: 14,441,845,824 || trainable%: 1.0619",
    "[rank0]: Traceback (most recent call last):",
    '[rank0]:   File "/home/t/diffusion-pipe/train.py", line 450, in <module>',
    "[rank0]:     model.enable_block_swap(blocks_to_swap)",
    '[rank0]:   File "/home/t/diffusion-pipe/utils/offloading.py", line 272, in '
    "prepare_block_devices_before_forward",
    "[rank0]:     weights_to_device(b, torch.device('cpu'))  # make sure weights are on cpu",
    '[rank0]:   File "/home/t/diffusion-pipe/utils/offloading.py", line 119, in weights_to_device',
    "[rank0]:     module.weight.data = module.weight.data.to(device, non_blocking=True)",
]


def test_a_traceback_cut_off_in_a_pinned_copy_to_the_cpu_is_the_environment() -> None:
    view = view_of(model={"arch": "wan21:14b", "layer_offloading": True})
    result = diagnose(log(*CPU_COPY_CUT_OFF), view)
    assert result.moment == "environment"
    assert "copy of weights to the CPU" in result.reasons[0]
    assert advice_ids(result) == ["pinned_memory"]
    assert "pinned host memory" in result.verdict


def test_a_cut_off_copy_to_the_card_stays_the_configs() -> None:
    to_card = [line.replace("torch.device('cpu')", "self.device") for line in CPU_COPY_CUT_OFF]
    result = diagnose(log(*to_card), view_of(model={"arch": "wan21:14b"}))
    assert result.moment == "loading" and "pinned_memory" not in advice_ids(result)


# ShivamShrirao/diffusers #61 (DreamBooth through DeepSpeed ZeRO-3 with CPU offload, 8GB card).
ZERO_OFFLOAD = [
    '  File "/env/site-packages/deepspeed/runtime/zero/stage3.py", line 607, in '
    "_create_fp16_partitions_with_defragmentation",
    "    self._create_param_groups_fp16_flat_cpu_memory()",
    '  File "/env/site-packages/deepspeed/runtime/zero/stage3.py", line 543, in '
    "_create_param_groups_fp16_flat_cpu_memory",
    "    torch.empty(int(flat_buffer_size),",
    "RuntimeError: CUDA error: out of memory",
]


def test_zero_offloads_pinned_cpu_buffers_are_the_environment_whatever_the_config() -> None:
    view = view_of(
        train={"batch_size": 4, "gradient_checkpointing": False},
        datasets={"items": [{"folder_path": "/d", "resolution": [1024]}]},
    )
    result = diagnose(log(*LOADING, *ZERO_OFFLOAD), view)
    assert result.moment == "environment"
    assert "pinned" in result.reasons[0] and advice_ids(result)[0] == "pinned_memory"


# OneTrainer #232 (SD 1.5, the final save): the stored traceback stops in safetensors' writer.
SAVE_CUT_OFF = [
    "Traceback (most recent call last):",
    '  File "C:\\OneTrainer\\modules\\ui\\TrainUI.py", line 486, in __training_thread_function',
    "    trainer.end()",
    '  File "C:\\OneTrainer\\modules\\trainer\\GenericTrainer.py", line 597, in end',
    "    self.model_saver.save(",
    '  File "C:\\OneTrainer\\modules\\modelSaver\\StableDiffusionModelSaver.py", line 138, in save',
    "    self.__save_safetensors(model, model_type, output_model_destination, dtype)",
    '  File "C:\\OneTrainer\\venv\\lib\\site-packages\\safetensors\\torch.py", line 281, '
    "in save_file",
    "    serialize_file(_flatten(tensors), filename, metadata=metadata)",
]


def test_a_save_cut_off_without_a_gpu_error_is_host_ram() -> None:
    result = diagnose(log(*SAVE_CUT_OFF), view_of())
    assert result.moment == "environment"
    assert "writing a checkpoint" in result.reasons[0]
    assert "host_ram" in advice_ids(result)


def test_a_gpu_out_of_memory_at_save_stays_the_configs() -> None:
    result = diagnose(log(*LOADING, bar(250), *SAVE_CUT_OFF, oom_message()), view_of())
    assert result.moment != "environment"
    assert not any("writing a checkpoint" in reason for reason in result.reasons)


# AI Toolkit #506 (Qwen-Image on a 32GB card): PyTorch's message without its process line.
NO_PROCESS_LINE = (
    "CUDA out of memory. Tried to allocate 2.03 GiB. GPU 0 has a total capacity of 31.84 GiB of "
    "which 0 bytes is free. Of the allocated memory 29.69 GiB is allocated by PyTorch, and 138.42 "
    "MiB is reserved by PyTorch but unallocated."
)


def test_pytorch_alone_filling_the_card_is_the_config_without_a_process_line() -> None:
    view = view_of(model={"arch": "qwen_image", "name_or_path": "Qwen/Qwen-Image"})
    result = diagnose(log(*LOADING, NO_PROCESS_LINE), view)
    assert result.moment == "loading" and not result.environment_suspected
    assert any("PyTorch in this process held 29.83 GiB" in r for r in result.reasons)


def test_a_small_pytorch_share_without_a_process_line_is_no_counter_rule() -> None:
    message = NO_PROCESS_LINE.replace("29.69 GiB is allocated", "6.00 GiB is allocated")
    result = diagnose(log(*LOADING, message), view_of())
    assert not any("PyTorch in this process held" in r for r in result.reasons)


def test_a_host_kill_is_host_ram_and_offloading_makes_it_worse() -> None:
    probe = ProbeResult(
        gpus=(GpuInfo(0, "RTX 4090", 24.0, 0.5, 23.5),),
        processes=(),
        host_total_gib=32.0,
        host_available_gib=20.0,
    )
    scan = log(*LOADING, "Job process terminated with signal SIGKILL.")
    result = diagnose(scan, view_of(model={"layer_offloading": True}), probe=probe)
    assert result.moment == "environment"
    assert "host ran out of RAM" in result.reasons[0]
    host = next(a for a in result.advice if a.id == "host_ram")
    assert "makes this worse" in host.text and "model.layer_offloading" in host.text
    assert "32.00 GiB of RAM" in host.text
    assert "killed when the host ran out of RAM" in result.verdict


def test_a_kill_after_a_gpu_oom_is_not_a_host_kill() -> None:
    scan = log(*LOADING, bar(0), OOM, "Job process terminated with exit code 137.")
    result = diagnose(scan, view_of())
    assert result.moment == "early_steps" and "host_ram" not in advice_ids(result)


def test_a_silent_exit_is_only_suspected() -> None:
    result = diagnose(
        log(*LOADING, bar(0), bar(20), "Job process terminated with exit code 1."), view_of()
    )
    assert result.signals == ("silent_exit",)
    assert result.environment_suspected and result.moment == "intermittent"
    assert advice_ids(result) == ["check_system_log"]


def test_the_probe_shows_other_processes_after_a_crash() -> None:
    probe = ProbeResult(
        gpus=(GpuInfo(0, "RTX 3090", 24.0, 9.0, 15.0),),
        processes=(GpuProcess(999, "python3", 9.0),),
    )
    result = diagnose(log(*LOADING, bar(0), OOM), view_of(), probe=probe)
    assert result.moment == "environment"
    assert "pid 999 python3" in result.reasons[0]
    assert result.to_json()["gpu_now"]["processes"] == [{"pid": 999, "name": "python3", "gib": 9.0}]


def test_the_probe_is_not_held_against_a_job_that_is_still_running() -> None:
    probe = ProbeResult(
        gpus=(GpuInfo(0, "X", 24.0, 20.0, 4.0),), processes=(GpuProcess(1, "py", 20.0),)
    )
    result = diagnose(log(*LOADING, bar(0), bar(10)), view_of(), probe=probe)
    assert not result.environment_suspected


def test_worked_before_suspects_an_update() -> None:
    result = diagnose(log(*LOADING, bar(0), OOM), view_of(), answers=Answers(worked_before=True))
    assert result.environment_suspected and result.moment == "early_steps"
    assert advice_ids(result) == ["pin_version"]


# --- advice only with its evidence --------------------------------------------------------------


def test_expandable_segments_when_much_is_reserved_but_unallocated() -> None:
    scan = log(*LOADING, oom_message(this=23.0, unallocated="2.92 GiB", tried="5.06 GiB"))
    advice = diagnose(scan, view_of()).advice
    assert [a.id for a in advice] == ["expandable_segments"]
    text = advice[0].text
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in text
    assert "UI server" in text and "<toolkit root>/.env" in text
    assert "will not cover the 5.06 GiB" in text


def test_expandable_segments_that_would_make_room() -> None:
    scan = log(*LOADING, oom_message(this=23.0, unallocated="1.50 GiB", tried="1.00 GiB"))
    text = diagnose(scan, view_of()).advice[0].text
    assert text.startswith("A one-off, not the config: PyTorch held 1.50 GiB reserved")
    assert "covered the 1.00 GiB allocation that failed" in text
    assert "retries such a crash once with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in text


def test_no_expandable_segments_when_little_is_reserved() -> None:
    assert diagnose(log(*LOADING, oom_message(this=23.0)), view_of()).advice == ()


def test_a_plain_crash_gets_no_advice_beyond_the_config() -> None:
    result = diagnose(log(*LOADING, bar(0), OOM), view_of())
    assert result.advice == () and result.reasons == ()
    assert result.first_change is not None and result.first_change.startswith("Gradient")


# --- answers ------------------------------------------------------------------------------------


def test_the_users_moment_wins_and_the_disagreement_is_shown() -> None:
    result = diagnose(log(*LOADING, bar(0), OOM), view_of(), answers={"moment": "sampling"})
    assert result.moment == "sampling" and result.confidence == "high"
    assert result.disagreements == (
        "You said 'sampling', but the log points to 'early_steps' (in training step 1 of 3000, "
        "within the first steps); your answer is used.",
    )
    assert "as you said" in result.verdict


def test_an_answer_that_agrees_is_no_disagreement() -> None:
    result = diagnose(log(*LOADING, bar(0), OOM), view_of(), answers=Answers(moment="early_steps"))
    assert result.disagreements == ()


def test_the_users_kind_wins_and_the_disagreement_is_shown() -> None:
    result = diagnose(None, view_of(), answers={"model_kind": "video"})
    assert result.model_kind == "video"
    assert "says image" in result.disagreements[0]


def test_an_answered_moment_works_without_a_log() -> None:
    assert diagnose(None, None, answers={"moment": "sampling"}).moment == "sampling"


def test_an_unknown_answer_is_refused() -> None:
    with pytest.raises(WizardError, match="unknown moment 'sometimes'"):
        diagnose(None, None, answers={"moment": "sometimes"})


# --- the change log -----------------------------------------------------------------------------


def changelog(direction: Literal["rollback", "scale_up"]) -> ChangeLog:
    resolution = "config.process[0].datasets[0].resolution"
    return ChangeLog(
        source=FileRef(path="job.yaml"),
        output=FileRef(path="job.oomfix.yaml"),
        runs=(
            RunRecord(at="2025-01-01T00:00:00+00:00", direction="rollback"),
            RunRecord(at="2025-01-02T00:00:00+00:00", direction=direction),
        ),
        changes=(
            ChangeEntry(run=0, step="top_bucket", path=resolution, before=[512, 1024], after=[512]),
            ChangeEntry(run=1, step="top_bucket", path=resolution, before=[512], after=[512, 1024]),
        ),
    )


def test_after_a_scale_up_the_re_added_setting_is_the_likely_cause() -> None:
    result = diagnose(
        log(*LOADING, bar(0), bar(300), OOM), view_of(), changelog=changelog("scale_up")
    )
    assert advice_ids(result)[0] == "undo_scale_up"
    text = result.advice[0].text
    assert "config.process[0].datasets[0].resolution: [512] → [512, 1024]" in text
    assert "Drop the biggest resolution" in text and "likely cause" in text
    assert result.first_change == text


def test_other_processes_come_before_a_scale_up() -> None:
    others = "Process 4242 has 6.00 GiB memory in use. "
    scan = log(*LOADING, bar(0), bar(300), oom_message(others=others, this=16.0))
    result = diagnose(scan, view_of(), changelog=changelog("scale_up"))
    assert result.moment == "environment"
    assert advice_ids(result) == ["other_processes", "undo_scale_up"]
    assert result.first_change == result.advice[0].text


def test_after_a_roll_back_nothing_is_blamed_on_it() -> None:
    result = diagnose(log(*LOADING, bar(0), OOM), view_of(), changelog=changelog("rollback"))
    assert "undo_scale_up" not in advice_ids(result)


# --- the JSON -----------------------------------------------------------------------------------

DESIGN_KEYS = {
    "moment",
    "phase",
    "model_kind",
    "arch",
    "signals",
    "environment_suspected",
    "reasons",
    "evidence",
    "oom",
    "last_step",
    "total_steps",
    "advice",
}


def test_the_json_has_the_design_keys_and_is_serialisable() -> None:
    others = "Process 4242 has 6.00 GiB memory in use. "
    result = diagnose(
        log(*LOADING, bar(0), bar(40), oom_message(others=others, this=16.0)), view_of()
    )
    data = result.to_json()
    assert set(data) >= DESIGN_KEYS
    assert {"verdict", "log", "disagreements", "run_count", "resumed"} <= set(data)
    assert data["oom"]["other_processes"] == [{"pid": 4242, "gib": 6.0}]
    assert data["oom"]["tried_gib"] == 2.0 and data["oom"]["free_gib"] == pytest.approx(
        0.098, abs=1e-3
    )
    assert all(set(item) == {"line", "text"} for item in data["evidence"])
    assert all(set(item) == {"id", "text"} for item in data["advice"])
    json.dumps(data)


def test_the_evidence_is_short_and_in_file_order() -> None:
    lines = [*LOADING, bar(0), bar(9)] + ["# OOM during training step, skipping batch 1/3 #"] * 1
    result = diagnose(
        log(*lines, "Error running job: CUDA out of memory.", *TRACEBACK_IN_TRAINING), view_of()
    )
    numbers = [e.line for e in result.evidence]
    assert numbers == sorted(numbers) and len(numbers) <= 8 and len(set(numbers)) == len(numbers)


# --- the shapes of issue 9 ---------------------------------------------------------------------

BASELINE_STALL = [  # ai-toolkit#330
    "Generating baseline samples before training",
    "Generating Images:   0%|                                          | 0/1 [00:00<?, ?it/s]",
]
LOKR = [  # ai-toolkit#595 (an excerpt that starts at step 299)
    "lokr-test-2:  10%|9         | 299/3000 [10:44<1:37:05,  2.16s/it, lr: 2.0e-04 loss: "
    "5.226e-01]",
    "Saving at step 300",
    "lokr-test-2:  20%|#9        | 599/3000 [19:45<1:03:24,  1.58s/it, lr: 2.0e-04 loss: "
    "6.736e-01]",
    "Saving at step 600",
    "lokr-test-2:  30%|##9       | 899/3000 [29:51<1:06:28,  1.90s/it, lr: 2.0e-04 loss: "
    "6.463e-01]",
    "Saving at step 900",
]
SPILL = (
    "lokr-test-2:  40%|###9      | 1199/3000 [2:49:04<14:04:18, 28.13s/it, lr: 2.0e-04 "
    "loss: 7.3e-01]"
)
NOW = 1_800_000_000.0


def aged(scan: LogScan, seconds: float) -> LogScan:
    """The scan as if its file had been written ``seconds`` before ``NOW``."""
    return dataclasses.replace(scan, modified=NOW - seconds)


def test_a_log_that_stops_in_the_baseline_sample_is_loading_said_in_words() -> None:
    result = diagnose(aged(log(*LOADING, *BASELINE_STALL), 7200), view_of())
    assert (result.moment, result.confidence, result.crashed) == ("loading", "low", False)
    assert result.verdict.startswith("The log stops during the baseline sample")
    assert "stalled" in result.verdict and "stall" in result.signals
    assert "sysmem_fallback" in advice_ids(result) and "stalled" in advice_ids(result)


def test_a_logs_age_alone_never_says_the_job_may_be_running() -> None:
    # A pasted log is as new as a live one: only something alive says the job may run on.
    for seconds in (30, 7200):
        result = diagnose(aged(log(*LOADING, *BASELINE_STALL), seconds), view_of())
        assert not any("may still be running" in note for note in result.notes)
        assert any("stalled or was killed" in note for note in result.notes)


def test_a_live_process_or_the_web_uis_status_says_the_job_may_be_running() -> None:
    stall = log(*LOADING, *BASELINE_STALL)
    busy = ProbeResult(
        gpus=(GpuInfo(0, "a card", 24.0, 20.0, 4.0),), processes=(GpuProcess(4242, "python", 20.0),)
    )
    on_card = diagnose(stall, view_of(), probe=busy)
    assert any(
        note.startswith(
            "The job may still be running, or stalled: nvidia-smi lists python (pid 4242)"
        )
        for note in on_card.notes
    )
    by_ui = diagnose(stall, view_of(), running="the web UI says job 'x' is running")
    assert any(
        "may still be running, or stalled: the web UI says job 'x' is running." in note
        for note in by_ui.notes
    )
    crashed = diagnose(log(*LOADING, "CUDA out of memory"), view_of(), running="the web UI says")
    assert not any("may still be running" in note for note in crashed.notes)


def card(total: float) -> ProbeResult:
    return ProbeResult(gpus=(GpuInfo(0, "a card", total, 0.5, total - 0.5),), processes=())


def test_a_stall_on_a_card_under_24_gb_is_the_sysmem_spill() -> None:
    small = diagnose(log(*LOADING, *BASELINE_STALL), view_of(), probe=card(16.0))
    big = diagnose(log(*LOADING, *BASELINE_STALL), view_of(), probe=card(80.0))
    assert "sysmem_spill" in small.signals and "stall" in small.signals
    assert "sysmem_spill" not in big.signals and "stall" in big.signals


def test_a_slowdown_after_hours_is_intermittent_from_the_step_it_began() -> None:
    result = diagnose(log(*LOKR, SPILL, "Saving at step 1200"), view_of())
    assert (result.moment, result.confidence) == ("intermittent", "low")
    assert "sysmem_spill" in result.signals and "from training step 1199" in result.verdict
    advice = next(a.text for a in result.advice if a.id == "sysmem_fallback")
    assert "Prefer No Sysmem Fallback" in advice and "'intermittent'" in advice


def test_a_slowdown_in_the_first_steps_is_early_steps() -> None:
    # A short run (100 steps): every step moves the bar's percentage, so each is read.
    bars = ["my_lora:   0%|          | 0/100 [00:00<?, ?it/s]"] + [
        f"my_lora:   {n}%|          | {n}/100 [00:{n * 2:02d}<03:20,  {rate}s/it, lr: 1e-04]"
        for n, rate in ((1, "5.00"), (2, "2.00"), (3, "2.00"), (4, "2.10"), (5, "9.50"))
    ]
    result = diagnose(log(*LOADING, *bars), view_of())
    assert (result.moment, "sysmem_spill" in result.signals) == ("early_steps", True)


def test_an_oom_after_hours_of_an_excerpt_is_intermittent_not_after_resuming() -> None:
    result = diagnose(log(*LOKR, OOM), view_of())
    assert result.moment == "intermittent" and not result.resumed
    assert "resum" not in result.verdict


def test_a_real_resume_that_dies_at_once_is_early_steps_after_resuming() -> None:
    resumed = "my_lora:  17%|#6        | 501/3000 [00:21<12:24:06, 21.27s/it, lr: 9.2e-05]"
    result = diagnose(log(resumed, OOM), view_of())
    assert result.moment == "early_steps" and "after resuming" in result.verdict


def test_python_memory_error_is_host_ram() -> None:
    result = diagnose(log(*LOADING, "Traceback (most recent call last):", "MemoryError"), view_of())
    assert result.moment == "environment" and "host_ram" in advice_ids(result)
    assert "host RAM" in result.verdict


def test_a_desktops_gib_on_a_24_gb_card_is_a_note_not_a_verdict() -> None:
    message = oom_message(total=23.99, this=21.0, free="1.00 GiB")  # 2 GiB outside the job
    result = diagnose(log(*LOADING, bar(0), message), view_of())
    assert result.moment == "early_steps" and not result.environment_suspected
    assert any("outside this process" in note for note in result.notes)


def test_a_real_share_held_outside_the_job_is_the_environment() -> None:
    message = oom_message(total=23.99, this=14.0, free="1.00 GiB")  # 9 GiB outside the job
    result = diagnose(log(*LOADING, bar(0), message), view_of())
    assert result.moment == "environment"


def test_a_job_holding_nearly_the_whole_card_is_the_config_and_never_the_gpu() -> None:
    message = oom_message(total=23.51, this=20.99, free="98.31 MiB")  # OneTrainer#841
    result = diagnose(log(*LOADING, message), view_of())
    assert result.moment == "loading" and not result.environment_suspected
    assert any("it is the config" in reason for reason in result.reasons)


PRINTED = [
    "Running 1 job",
    "{",
    '    "type": "diffusion_trainer",',
    '    "train": {"batch_size": 2, "gradient_checkpointing": true},',
    '    "datasets": [{"folder_path": "/d", "resolution": [512]}]',
    "}",
    *LOADING,
    OOM,
]


def test_a_log_whose_printed_config_differs_is_from_the_run_before() -> None:
    result = diagnose(log(*PRINTED), view_of())
    assert result.log_matches_config is False
    assert [(m.path, m.in_log, m.in_config) for m in result.log_mismatch] == [
        ("config.process[0].train.batch_size", 2, 1)
    ]
    assert "batch_size was 2 there, 1 now" in result.verdict
    assert result.verdict.startswith("This log is from the run before")
    data = result.to_json()
    assert data["log_matches_config"] is False
    assert data["log_mismatch"] == [
        {"path": "config.process[0].train.batch_size", "in_log": 2, "in_config": 1}
    ]


def test_a_log_whose_printed_config_matches_is_this_configs() -> None:
    printed = [line.replace('"batch_size": 2', '"batch_size": 1') for line in PRINTED]
    result = diagnose(log(*printed), view_of())
    assert (result.log_matches_config, result.log_mismatch) == (True, ())
    assert not result.verdict.startswith("This log")


def test_a_log_without_a_printed_config_cannot_tell() -> None:
    result = diagnose(log(*LOADING, OOM), view_of())
    assert result.to_json()["log_matches_config"] is None


def changelog_at(at: str) -> ChangeLog:
    return ChangeLog(
        source=FileRef(path="a.yaml"),
        output=FileRef(path="a.oomfix.yaml"),
        runs=(RunRecord(at=at, direction="rollback", moment="early_steps"),),
        changes=(
            ChangeEntry(
                run=0,
                step="batch_size",
                path="config.process[0].train.batch_size",
                before=2,
                after=1,
            ),
        ),
    )


def test_a_log_older_than_the_last_change_is_from_the_run_before_it() -> None:
    scan = dataclasses.replace(log(*LOADING, OOM), modified=1_700_000_000.0)
    stale = diagnose(scan, view_of(), changelog=changelog_at("2024-01-01T00:00:00+00:00"))
    fresh = diagnose(scan, view_of(), changelog=changelog_at("2023-01-01T00:00:00+00:00"))
    assert stale.log_matches_config is False and "before your last change" in stale.verdict
    assert stale.confidence == "low"
    assert fresh.log_matches_config is None


def test_after_a_restore_the_log_of_the_restored_config_is_its_own() -> None:
    """``restore`` puts back the config from before the roll-back it undoes: a log written
    between that roll-back and the restore (2023-11-14, before the restore of 2024) ran the
    config as it is now, so it is not "written before your last change" (issue 33)."""
    from oom_wizard.storage.changelog import DatabaseRecord

    scan = dataclasses.replace(log(*LOADING, OOM), modified=1_700_000_000.0)
    rolled = changelog_at("2023-01-01T00:00:00+00:00")
    undo = RunRecord(
        at="2024-01-01T00:00:00+00:00",
        direction="restore",
        database=DatabaseRecord(job_id="1", job_name="j", undoes=0),
    )
    restored = rolled.model_copy(update={"runs": (*rolled.runs, undo)})
    result = diagnose(scan, view_of(), changelog=restored)
    assert result.log_matches_config is None
    assert "before your last change" not in result.verdict


def test_a_cut_off_traceback_in_a_training_step_assumes_oom_and_says_so() -> None:
    # kohya_ss#875, cut off in the U-Net forward
    result = diagnose(
        log(
            "steps:   0%|          | 1/1150 [00:04<1:33:36,  4.89s/it, loss=0.43]",
            "Traceback (most recent call last):",
            '  File "D:\\kohya_ss\\train_network.py", line 610, in train',
            "    noise_pred = unet(n",
        ),
        view_of(),
    )
    # The frames pin the step's phase and the bar its number: the moment is sure; that it was
    # out of memory is assumed, and said (issue 40).
    assert (result.moment, result.confidence) == ("early_steps", "high")
    assert any("out of memory is assumed" in note for note in result.notes)
    assert "its error line is cut off, so out of memory is assumed" in result.basis


def test_a_cut_off_traceback_placed_only_by_the_trainers_lines_stays_low() -> None:
    result = diagnose(
        log(
            "steps:   0%|          | 1/1150 [00:04<1:33:36,  4.89s/it, loss=0.43]",
            "Traceback (most recent call last):",
            '  File "D:\\kohya_ss\\train_network.py", line 610, in train',
            "    x = helper(n",
        ),
        view_of(),
    )
    assert (result.moment, result.confidence) == ("early_steps", "low")


def test_a_cut_off_traceback_that_points_nowhere_assumes_nothing() -> None:
    result = diagnose(
        log(
            "Traceback (most recent call last):",
            '  File "/app/run.py", line 12, in <module>',
            "    main()",
        ),
        view_of(),
    )
    assert result.moment is None and result.crashed
    assert any("does not assume an out-of-memory" in note for note in result.notes)


def test_a_crawling_sample_pass_is_the_sampling_moment_with_the_fallback_advice() -> None:
    training = [
        f"my_lora:  {n // 30}%|          | {n}/3000 [{n // 30:02d}:00<1:40:00,  2.00s/it, "
        "lr: 1.0e-04 loss: 4.5e-01]"
        for n in (60, 90, 120, 150)
    ]
    crawl = [
        "  0%|          | 0/30 [00:00<?, ?it/s]",
        "  3%|3         | 1/30 [01:55<55:46, 115.39s/it]",
    ]
    result = diagnose(log(*training, "Generating Images", *crawl), view_of())
    assert (result.moment, result.confidence) == ("sampling", "low")
    assert "crawling" in result.verdict and "sysmem_fallback" in advice_ids(result)


# --- validation (train.validation_config) ------------------------------------------------------

# AI Toolkit's own lines around a validation pass (27a03a91): setup_validation prints its caching
# line at start (BaseSDTrainProcess.py:1611); validate() prints nothing, so a crash in it shows
# only in the traceback: run() calls self.validate() (:2665) after a training step, and
# validate() calls predict_noise (:1721).
VALIDATION_SETUP = "Caching validation latents and embeddings for 2 images"
VALIDATION_TRACEBACK = [
    "Error running job: CUDA out of memory. Tried to allocate 2.00 GiB.",
    "",
    "========================================",
    "Result:",
    " - 0 completed jobs",
    " - 1 failure",
    "========================================",
    "Traceback (most recent call last):",
    '  File "/app/ai-toolkit/run.py", line 120, in <module>',
    "    main()",
    '  File "/app/ai-toolkit/run.py", line 132, in main',
    "    raise e",
    '  File "/app/ai-toolkit/run.py", line 120, in main',
    "    job.run()",
    '  File "/app/ai-toolkit/jobs/ExtensionJob.py", line 22, in run',
    "    process.run()",
    '  File "/app/ai-toolkit/jobs/process/BaseSDTrainProcess.py", line 2665, in run',
    "    self.validate()",
    '  File "/app/ai-toolkit/jobs/process/BaseSDTrainProcess.py", line 1721, in validate',
    "    noise_pred = self.sd.predict_noise(",
    "                 ^^^^^^^^^^^^^^^^^^^^^^",
    '  File "/app/ai-toolkit/toolkit/models/base_model.py", line 974, in predict_noise',
    "    noise_pred = self.get_noise_prediction(",
    "                 ^^^^^^^^^^^^^^^^^^^^^^^^^^",
]


@pytest.mark.parametrize("step", [0, 50])
def test_a_crash_in_a_validation_pass_is_the_periodic_sample_moment(step: int) -> None:
    # validate() runs at the start step and every validate_every_n_steps, after the step.
    scan = log(*LOADING, VALIDATION_SETUP, bar(0), bar(step), *VALIDATION_TRACEBACK, oom_message())
    assert scan.phase == "periodic_sample"
    diagnosis = diagnose(scan, view_of(train={"validation_config": {"resolution": 1024}}))
    assert diagnosis.moment == "sampling"
    assert any("in validate" in e.text for e in scan.evidence)


def test_a_crash_while_caching_the_validation_images_is_loading() -> None:
    scan = log(*LOADING, VALIDATION_SETUP, oom_message())
    assert scan.phase == "cache_latents"
    assert diagnose(scan, view_of()).moment == "loading"


def test_a_validation_crash_is_lowered_by_the_sampling_rung() -> None:
    from oom_wizard.rules.memory import phase_of
    from oom_wizard.rules.plan import build_plan
    from tests.support.plan_support import document

    tree = copy.deepcopy(BASE)
    tree["config"]["process"][0]["train"]["validation_config"] = {
        "validation_items": [{"image_path": "/v.png", "prompt": "x"}],
        "resolution": 1024,
    }
    scan = log(*LOADING, VALIDATION_SETUP, bar(0), bar(50), *VALIDATION_TRACEBACK, oom_message())
    diagnosis = diagnose(scan, build_view(tree, file="job.yaml", locate=lambda path: None))
    assert phase_of(diagnosis) == "sample"
    plan = build_plan(document(tree), diagnosis.moment or "", "image", diagnosis=diagnosis)
    assert plan.steps[0].id == "sampling"
    assert {f.key.rsplit(".", 1)[-1] for f in plan.steps[0].fields} >= {
        "resolution",
        "validation_sigmas",
    }


def _listed(doc: str, heading: str) -> list[str]:
    """The rule names of one numbered list in the module's docstring, in order."""
    section = doc.split(heading, 1)[1].split("\n\n", 2)[1]
    return re.findall(r"^\d+\. :func:`(\w+)`", section, flags=re.MULTILINE)


def test_the_docstring_names_the_rule_tables_in_order() -> None:
    """The index in diagnosis.py's docstring and its two rule tables name the same rules."""
    doc = diagnosis_module.__doc__ or ""
    moment = [rule.__name__ for rule in diagnosis_module.MOMENT_RULES]
    environment = [rule.__name__ for rule in diagnosis_module.ENVIRONMENT_RULES]
    assert _listed(doc, "Moment rules (:data:`MOMENT_RULES`)") == moment
    assert _listed(doc, "Environment rules (:data:`ENVIRONMENT_RULES`)") == environment
