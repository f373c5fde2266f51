"""Tests of the streaming log reader: phases, signals, allocator messages, awkward files."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from oom_wizard.errors import LogError, PresetError
from oom_wizard.logs.allocator import parse_allocator_message
from oom_wizard.logs.markers import load_log_markers
from oom_wizard.logs.result import LogScan
from oom_wizard.logs.scan import MAX_SEGMENT_BYTES, scan_log, scan_stream, scan_text
from oom_wizard.logs.signals import SIGNALS

HEADER = [
    "Running 1 job",
    "{",
    '    "type": "diffusion_trainer",',
    '    "training_folder": "output"',
    "}",
    "#############################################",
    "# Running job: my_lora",
    "#############################################",
    "Running  1 process",
]
LOAD = [
    "Loading Wan model",
    "Loading transformer 1",
    "Quantizing Transformer 1",
    " - quantizing 40 transformer blocks",
    "Loading UMT5EncoderModel",
    "Loading VAE",
    "Making pipe",
    "Preparing Model",
    "create LoRA network. base dim (rank): 16, alpha: 16",
]
DATASET = [
    "Dataset: /data/clips",
    "  -  Preprocessing video dimensions",
    "  -  Found 12 videos and 0 images",
    "Bucket sizes for /data/clips:",
    "512x512x41f: 12 files",
    "1 buckets made",
    "Caching latents for /data/clips",
    " - Saving latents to disk",
    "Caching latents to disk: 100%|##########| 12/12 [00:30<00:00,  2.50s/it]",
]
OOM_CURRENT = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 5.06 GiB. GPU 0 has a total "
    "capacity of 31.36 GiB of which 336.62 MiB is free. Process 4242 has 2.00 GiB memory in use. "
    "Process 777 has 512.00 MiB memory in use. Including non-PyTorch memory, this process has "
    "28.18 GiB memory in use. Of the allocated memory 24.17 GiB is allocated by PyTorch, and "
    "2.92 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large "
    "try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation."
)
FAILURE = [
    "Error running job: CUDA out of memory. Tried to allocate 5.06 GiB.",
    "",
    "========================================",
    "Result:",
    " - 0 completed jobs",
    " - 1 failure",
    "========================================",
    "Traceback (most recent call last):",
    '  File "/ai-toolkit/run.py", line 120, in <module>',
    "    main()",
    OOM_CURRENT,
]


def bar(n: int, total: int = 3000, name: str = "my_lora") -> str:
    """One render of the training bar as tqdm writes it."""
    pct = n * 100 // total
    post = ", lr: 1.0e-04 loss: 4.512e-01" if n else ""
    return f"{name}: {pct:3d}%|#         | {n}/{total} [00:10<1:19:20,  1.73s/it{post}]"


def redraws(first: int, last: int, total: int = 3000) -> str:
    """Successive training-bar renders joined by carriage returns, as in log.txt."""
    return "".join("\r" + bar(n, total) for n in range(first, last + 1))


def scan(*lines: str, newline: str = "\n") -> LogScan:
    return scan_text(newline.join(lines) + newline)


# --- phases -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tail", "phase"),
    [
        (LOAD[:2], "model_load"),
        (["Loading Qwen Image model", "Loading transformer"], "model_load"),
        (LOAD[:3], "quantize"),
        (
            [
                "Loading transformer",
                "Quantizing blocks (uint4): 40%|####      | 24/60 [00:09<00:14]",
            ],
            "quantize",
        ),
        ([*LOAD, *DATASET[:5]], "cache_latents"),
        ([*LOAD, *DATASET], "cache_latents"),
        (
            [*LOAD, "Caching text_embeddings for /data", " - Saving text embeddings to disk"],
            "cache_text",
        ),
        (
            [
                *LOAD,
                "Caching embeddings and unloading text encoder",
                "***** UNLOADING TEXT ENCODER *****",
            ],
            "cache_text",
        ),
        ([*LOAD, *DATASET, "Generating baseline samples before training"], "baseline_sample"),
        ([*LOAD, "Generating first sample from first sample config"], "baseline_sample"),
        (
            [*LOAD, "Generating Samples:  50%|#####     | 1/2 [00:30<00:30, 30.0s/it]"],
            "baseline_sample",
        ),
        ([*LOAD, "Skipping first sample due to config setting", bar(0)], "training"),
        ([*LOAD, bar(0), bar(250)], "training"),
        (
            [
                *LOAD,
                bar(0),
                bar(250),
                "",
                "Saving at step 250",
                "Saved checkpoint to /out/x_000000250.safetensors",
            ],
            "save",
        ),
        (
            [*LOAD, bar(250), "Generating Samples:   0%|          | 0/2 [00:00<?, ?it/s]"],
            "periodic_sample",
        ),
        (
            [*LOAD, bar(250), "Generating Images:   0%|          | 0/2 [00:00<?, ?it/s]"],
            "periodic_sample",
        ),
        ([*LOAD, bar(250), " 40%|####      | 10/25 [00:10<00:15,  1.00s/it]"], "periodic_sample"),
        ([*LOAD, bar(250), "Unloading vae"], "periodic_sample"),
        ([*LOAD, bar(250), "Sampling at step 250"], "periodic_sample"),
        (
            [*LOAD, bar(250), "Generating Samples: 100%|##########| 2/2 [00:50<00:00]", bar(251)],
            "training",
        ),
        (["some unrelated line", "another one"], "unknown"),
    ],
)
def test_each_phase(tail: list[str], phase: str) -> None:
    assert scan(*HEADER, *tail).phase == phase


@pytest.mark.parametrize(
    ("lines", "phase"),
    [
        (["loading model for process 0/1", "caching latents."], "cache_latents"),
        (["caching text encoder outputs."], "cache_text"),
        (
            ["running training / 学習開始", "steps:   0%|          | 0/1600 [00:00<?, ?it/s]"],
            "training",
        ),
        (["steps:  10%|#         | 160/1600 [02:00<18:00, 1.2s/it, avr_loss=0.0731]"], "training"),
        (["Epoch 1/10, Steps:   5%|5         | 50/1000 [00:40<12:00,  1.3it/s]"], "training"),
        ([bar(300), "sampling: 100%|##########| 25/25 [00:05<00:00,  5.0it/s]"], "periodic_sample"),
        ([bar(300), "Running validation..."], "periodic_sample"),
    ],
)
def test_relatives_lines(lines: list[str], phase: str) -> None:
    assert scan(*lines).phase == phase


def test_timestamps_before_every_line_are_removed() -> None:
    stamp = "2025-03-01T10:15:32.123456789Z "
    result = scan(
        stamp + "Loading transformer",
        stamp + bar(0),
        stamp + bar(120),
        stamp + "Generating Images:   0%|          | 0/2 [00:00<?, ?it/s]",
        "[10:15:40] " + OOM_CURRENT,
    )
    assert (result.phase, result.last_step) == ("periodic_sample", 120)
    assert result.oom is not None and result.oom.tried == 5.06


def test_a_bar_that_reports_a_loss_is_the_training_bar_whatever_its_name() -> None:
    named = (
        "sample lora:   4%|4         | 120/3000 [00:10<1:19:20,  1.73s/it, lr: 1.0e-04 loss: 0.4]"
    )
    result = scan("Loading transformer", named)
    assert result.phase == "training" and result.last_step == 120


# sd_dreambooth_extension #760: its preview bar carries the training loss, and the trainer
# printed the caught error into the bar's postfix; the paste stops inside the message.
PREVIEW_BAR_WITH_ERROR = (
    "Generating Samples:   0%| | 0/4 [00:00<?, ?it/s, loss=0.00784, loss_avg=0.101, Exception "
    "saving sample: CUDA out of memory. Tried to allocate 576.00 MiB (GPU 0; 12.00 GiB total "
    "capacity; 10.74 GiB already allocated; 0 bytes fre"
)


def test_the_trainers_own_sample_bar_name_wins_over_a_loss_in_its_postfix() -> None:
    result = scan("  ***** Running training *****", "  LR: 2e-06)", PREVIEW_BAR_WITH_ERROR)
    assert result.phase == "periodic_sample"
    # The banner says training starts at step 0; the preview bar is not the training bar.
    assert not result.training_started and result.last_step == 0


def test_a_sample_bar_with_the_training_loss_is_drawn_during_training() -> None:
    closed = "Generating Samples:   0%| | 0/4 [00:00<?, ?it/s, loss=0.00784, loss_avg=0.101]"
    plain = "Generating Samples:   0%| | 0/4 [00:00<?, ?it/s]"
    assert scan(closed).phase == "periodic_sample"
    assert scan(plain).phase == "baseline_sample"


def test_a_message_printed_into_an_open_bar_postfix_is_read() -> None:
    result = scan(PREVIEW_BAR_WITH_ERROR)
    assert result.crashed and result.has("cuda_oom")
    assert result.oom is not None
    assert (result.oom.form, result.oom.total, result.oom.allocated) == ("legacy", 12.0, 10.74)
    assert result.evidence_for("cuda_oom")[0].line == 1


def test_an_unnamed_bar_before_training_keeps_the_phase() -> None:
    result = scan(*LOAD[:3], " 40%|####      | 16/40 [00:05<00:07,  3.1it/s]")
    assert result.phase == "quantize"


def test_download_bars_are_not_the_training_bar() -> None:
    result = scan(
        "Loading transformer",
        "model-00001-of-00002.safetensors:  45%|####5     | 4.50G/9.99G [00:30<00:36, 152MB/s]",
        "Fetching 3 files: 100%|##########| 3/3 [00:00<00:00, 10.2it/s]",
    )
    assert result.phase == "model_load"
    assert not result.training_started


def test_a_sample_line_with_a_step_in_another_language_is_a_periodic_sample() -> None:
    result = scan(
        "generating sample images at step / サンプル画像生成ステップ: 250",
        "torch.cuda.OutOfMemoryError: CUDA out of memory.",
    )
    assert result.phase == "periodic_sample"
    assert result.last_step == 250


def test_the_training_bar_gives_the_last_step_and_the_total() -> None:
    result = scan_text("\n".join([*HEADER, *LOAD]) + "\n" + redraws(0, 40) + "\n")
    assert (result.last_step, result.total_steps, result.first_step) == (40, 3000, 0)
    assert result.training_started and not result.crashed


def test_frames_of_the_failing_traceback_place_a_crash_without_a_bar() -> None:
    result = scan(
        "Traceback (most recent call last):",
        '  File "E:\\ai-toolkit\\jobs\\process\\BaseSDTrainProcess.py", line 2128, in run',
        "    loss_dict = self.hook_train_loop(batch_list)",
        '  File "E:\\tk\\sd_trainer\\SDTrainer.py", line 1927, in hook_train_loop',
        '  File "E:\\tk\\venv\\Lib\\site-packages\\torch\\_tensor.py", line 648, in backward',
        "torch.OutOfMemoryError: CUDA out of memory.",
    )
    assert (result.phase, result.marker_phase, result.frame_phase) == (
        "training",
        "unknown",
        "training",
    )
    # The outermost that says anything: the call under BaseSDTrainProcess.run's frame.
    assert result.evidence_for("frame")[0].line == 3


def test_a_deepspeed_train_batch_frame_is_a_training_step() -> None:
    """diffusion-pipe's step runs in DeepSpeed's ``train_batch``, under ``[rank0]:`` tags."""
    result = scan(
        "[rank0]: Traceback (most recent call last):",
        '[rank0]:   File "/dp/train.py", line 646, in <module>',
        "[rank0]:     loss = model_engine.train_batch().item()",
        '[rank0]:   File "/dp/deepspeed/runtime/pipe/engine.py", line 373, in train_batch',
        "[rank0]: torch.OutOfMemoryError: CUDA out of memory.",
    )
    assert (result.phase, result.frame_phase) == ("training", "training")


def test_a_wrapper_timestamp_and_level_tag_are_removed_before_frames_are_read() -> None:
    """FluxGym prints ``[date time] [INFO] `` before every line of sd-scripts' traceback."""
    tag = "[2024-09-09 17:43:57] [INFO] "
    result = scan(
        tag + "Traceback (most recent call last):",
        tag + 'File "F:/fluxgym/sd-scripts/train_network.py", line 402, in train',
        tag + 'File "F:/fluxgym/sd-scripts/flux_train_network.py", line 218, in '
        "cache_text_encoder_outputs_if_needed",
        tag + "torch.OutOfMemoryError: CUDA out of memory.",
    )
    assert (result.phase, result.frame_phase) == ("cache_text", "cache_text")


def test_a_launcher_reporting_return_code_minus_9_is_a_host_kill() -> None:
    """DeepSpeed's launcher says ``exits with return code = -9`` when the child was SIGKILLed."""
    result = scan(
        "[2025-03-14 10:50:58,183] [INFO] [launch.py:319:sigkill_handler] Killing subprocess 1960",
        "[2025-03-14 10:50:58,286] [ERROR] [launch.py:325:sigkill_handler] ['python', '-u', "
        "'train.py'] exits with return code = -9",
    )
    assert result.crashed and result.exit_code == -9
    assert result.signals == ("host_oom_kill",)


def test_a_launcher_reporting_return_code_1_is_an_exit_but_no_kill() -> None:
    result = scan("[ERROR] [launch.py:325:sigkill_handler] ['python'] exits with return code = 1")
    assert result.crashed and result.exit_code == 1
    assert result.signals == ("silent_exit",)


def test_sampling_frames_beat_the_last_training_bar() -> None:
    result = scan(
        *LOAD,
        bar(500),
        "Traceback (most recent call last):",
        '  File "/tk/jobs/process/BaseSDTrainProcess.py", line 2730, in run',
        '  File "/tk/jobs/process/BaseSDTrainProcess.py", line 300, in sample',
        '  File "/tk/toolkit/models/base_model.py", line 460, in generate_images',
        '  File "/tk/toolkit/models/base_model.py", line 900, in encode_prompt',
        OOM_CURRENT,
    )
    assert result.phase == "periodic_sample"
    assert result.last_step == 500


# sd-scripts #1014: the kohya family's sample call says when it runs by its epoch argument.
KOHYA_SAMPLE_FRAMES = [
    "Traceback (most recent call last):",
    '  File "/kaggle/temp/sd-scripts/sdxl_train_network.py", line 189, in <module>',
    "    trainer.train(args)",
    '  File "/kaggle/temp/sd-scripts/train_network.py", line 885, in train',
    "    self.sample_images(accelerator, args, epoch + 1, global_step, accelerator.device, vae, "
    "tokenizer, text_encoder, unet)",
    '  File "/kaggle/temp/sd-scripts/library/sdxl_train_util.py", line 367, in sample_images',
]


@pytest.mark.parametrize(
    ("epoch", "phase"),
    [("epoch + 1", "periodic_sample"), ("None", "periodic_sample"), ("0", "baseline_sample")],
)
def test_a_kohya_sample_call_without_a_bar_says_when_it_ran(epoch: str, phase: str) -> None:
    lines = [line.replace("epoch + 1", epoch) for line in KOHYA_SAMPLE_FRAMES]
    result = scan(*lines, "torch.OutOfMemoryError: CUDA out of memory.")
    assert result.crashed and result.phase == phase


def test_an_aitk_sample_call_without_a_bar_is_still_the_baseline_sample() -> None:
    result = scan(
        "Traceback (most recent call last):",
        '  File "/tk/jobs/process/BaseSDTrainProcess.py", line 2730, in run',
        "    self.sample(self.step_num)",
        '  File "/tk/jobs/process/BaseSDTrainProcess.py", line 300, in sample',
        OOM_CURRENT,
    )
    assert result.phase == "baseline_sample"


# --- signals ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "signal"),
    [
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB.", "cuda_oom"),
        ("torch.cuda.OutOfMemoryError: CUDA out of memory.", "cuda_oom"),
        ("RuntimeError: HIP out of memory. Tried to allocate 2.00 GiB", "cuda_oom"),
        ("RuntimeError: CUDA error: out of memory", "cuda_error_oom"),
        (
            "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(h)`",
            "cublas_alloc",
        ),
        (
            "torch.OutOfMemoryError: CUDA out of memory. GPU 0 has a total capacity of 23.53 GiB "
            "of which 0 bytes is free.",
            "zero_free",
        ),
        (
            "CUDA out of memory. (GPU 0; 7.79 GiB total capacity; 5.47 GiB already allocated; "
            "0 bytes free; 5.55 GiB reserved in total by PyTorch)",
            "zero_free",
        ),
        ("# OOM during training step, skipping batch 2/3 #", "oom_skip"),
        (
            "Error running job: OOM during training step 3 times in a row, aborting training",
            "oom_abort",
        ),
        (
            "Error running job: local variable 'loss_dict' referenced before assignment",
            "loss_dict_followon",
        ),
        (
            "UnboundLocalError: cannot access local variable 'loss_dict' where it is not "
            "associated with a value",
            "loss_dict_followon",
        ),
        ("Job process terminated with signal SIGKILL.", "host_oom_kill"),
        ("Killed", "host_oom_kill"),
        (
            "/bin/sh: line 1:  4242 Killed                  python run.py config/my.yaml",
            "host_oom_kill",
        ),
        ("Job process terminated with exit code 137.", "host_oom_kill"),
        (
            "[12345.678] Out of memory: Killed process 4242 (python) total-vm:90000000kB",
            "host_oom_kill",
        ),
    ],
)
def test_each_signal(line: str, signal: str) -> None:
    result = scan(*LOAD, line)
    assert signal in result.signals
    assert result.evidence_for(signal)[0].line == len(LOAD) + 1


def test_signals_are_reported_in_a_fixed_order() -> None:
    result = scan(
        "RuntimeError: CUDA error: out of memory", "torch.OutOfMemoryError: CUDA out of memory."
    )
    assert list(result.signals) == [s for s in SIGNALS if s in result.signals]


def test_a_silent_exit_has_no_python_error() -> None:
    result = scan(*LOAD, bar(12), "Job process terminated with exit code 1.")
    assert result.signals == ("silent_exit",)
    assert result.crashed and result.exit_code == 1


def test_an_exit_after_a_traceback_is_not_silent() -> None:
    result = scan(*LOAD, *FAILURE, "Job process terminated with exit code 1.")
    assert "silent_exit" not in result.signals
    assert result.crashed


def test_a_skip_banner_records_the_step_it_happened_at() -> None:
    result = scan(
        *LOAD,
        bar(0),
        bar(57),
        "",
        "################################################",
        "# OOM during training step, skipping batch 1/3 #",
        "################################################",
        "",
        bar(58),
        bar(90),
    )
    assert result.skip_count == 1
    skip = result.skips[0]
    assert (skip.attempt, skip.step) == (1, 57)
    assert not result.crashed  # training went on: a hint, not a crash
    assert result.phase == "training" and result.last_step == 90


def test_the_loss_dict_follow_on_after_a_skip_is_a_crash_at_that_step() -> None:
    result = scan(
        "Skipping first sample due to config setting",
        "SS:   0%|          | 0/5000 [00:00<?, ?it/s]",
        "################################################",
        "# OOM during training step, skipping batch 1/3 #",
        "################################################",
        "Error running job: local variable 'loss_dict' referenced before assignment",
    )
    assert result.crashed
    assert {"oom_skip", "loss_dict_followon"} <= set(result.signals)
    assert (result.last_step, result.total_steps, result.skips[0].step) == (0, 5000, 0)


def test_a_stopped_job_did_not_crash() -> None:
    result = scan(
        *LOAD,
        bar(40),
        "========================================",
        "Job stopped",
        "========================================",
    )
    assert result.stopped and not result.crashed


def test_a_terminate_signal_is_a_stop() -> None:
    result = scan(*LOAD, bar(40), "Job process terminated with signal SIGTERM.")
    assert result.stopped and not result.crashed and not result.signals


def test_a_traceback_followed_by_progress_is_not_the_crash() -> None:
    result = scan(
        *LOAD,
        "Failed to compile model: boom",
        "Traceback (most recent call last):",
        '  File "/tk/x.py", line 1, in hook_train_loop',
        "RuntimeError: boom",
        "Continuing without compilation",
        bar(0),
        bar(10),
    )
    assert not result.crashed
    assert result.frame_phase is None and result.phase == "training"


# kohya_ss #1202: the error is printed, then tqdm closes its bar and draws it once more.
OOM_WRAPPED_THEN_BAR = [
    "OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 6.00 GiB total "
    "capacity; 5.24 GiB already",
    "allocated; 0 bytes free; 5.29 GiB reserved in total by PyTorch) If reserved memory is >> "
    "allocated memory try setting",
    "max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and "
    "PYTORCH_CUDA_ALLOC_CONF",
    "steps:   0%|                                       | 1/2100 [00:03<2:05:34,  3.59s/it, "
    "loss=0.473]",
]


def test_the_bar_drawn_once_more_after_the_oom_is_tqdm_closing_it_not_progress() -> None:
    result = scan(*OOM_WRAPPED_THEN_BAR)
    assert result.crashed and result.has("cuda_oom")
    assert result.phase == "training" and result.last_step == 1
    assert result.oom is not None and result.oom.reserved == 5.29


def test_the_bar_at_the_same_step_after_the_oom_keeps_the_crash() -> None:
    kohya = "steps:   0%|          | {n}/1600 [00:0{n}<20:09,  1.32it/s, avr_loss=0.087]"
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB."
    result = scan(kohya.format(n=4), kohya.format(n=5), oom, kohya.format(n=5))
    assert result.crashed and result.last_step == 5


def test_the_bar_moving_on_after_an_oom_is_training_that_went_on() -> None:
    kohya = "steps:   0%|          | {n}/1600 [00:0{n}<20:09,  1.32it/s, avr_loss=0.087]"
    oom = "Exception while training: CUDA out of memory. Tried to allocate 20.00 MiB."
    result = scan(kohya.format(n=4), oom, kohya.format(n=4), kohya.format(n=5))
    assert not result.crashed and result.last_step == 5
    assert not scan(
        *OOM_WRAPPED_THEN_BAR, OOM_WRAPPED_THEN_BAR[-1].replace("1/2100", "2/2100")
    ).crashed


def test_host_copy_in_the_failing_traceback() -> None:
    result = scan(
        '[rank0]:   File "/dp/utils/offloading.py", line 119, in weights_to_device',
        "[rank0]:     module.weight.data = module.weight.data.to(device, non_blocking=True)",
        "[rank0]: RuntimeError: CUDA error: out of memory",
    )
    assert result.host_copy
    assert result.signals == ("cuda_error_oom",)
    assert result.exception is not None and result.exception.line == 3


# diffusion-pipe #342 (Wan 14B, block swap, WSL2): the stored copy ends before the error line.
BLOCK_SWAP_CUT_OFF = [
    "[rank0]: Traceback (most recent call last):",
    '[rank0]:   File "/home/u/diffusion-pipe/train.py", line 496, in <module>',
    "[rank0]:     model.enable_block_swap(blocks_to_swap)",
    '[rank0]:   File "/home/u/diffusion-pipe/utils/offloading.py", line 272, in '
    "prepare_block_devices_before_forward",
    "[rank0]:     weights_to_device(b, torch.device('cpu'))  # make sure weights are on cpu",
    "[rank0]:     ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    '[rank0]:   File "/home/u/diffusion-pipe/utils/offloading.py", line 119, in weights_to_device',
    "[rank0]:     module.weight.data = module.weight.data.to(device, non_blocking=True)",
    "[rank0]:                          ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
]


def test_a_copy_to_the_cpu_in_the_failing_traceback() -> None:
    result = scan(*BLOCK_SWAP_CUT_OFF)
    assert result.crashed and result.host_copy and result.cpu_copy
    assert result.signals == () and result.exception is None
    assert result.frame_phase == "model_load"
    # AI Toolkit #574's quantizer: the destination and the non_blocking flag on one line.
    assert scan(
        '  File "E:\\ai-toolkit\\toolkit\\util\\quantize.py", line 308, in quantize_model',
        '    block.to("cpu", non_blocking=True)',
    ).cpu_copy


def test_a_copy_to_the_card_is_not_a_copy_to_the_cpu() -> None:
    result = scan(
        '  File "/dp/utils/offloading.py", line 119, in weights_to_device',
        "    module.weight.data = module.weight.data.to(self.device, non_blocking=True)",
    )
    assert result.host_copy and not result.cpu_copy
    assert not scan("moving blocks with .to('cpu') here", "CUDA out of memory.").cpu_copy


def test_onetrainers_saving_line_is_the_save_phase() -> None:
    # OneTrainer #681: the final save, then the training thread's traceback (cut off).
    result = scan(
        "step:  21%|██▏       | 6/28 [00:12<00:45,  2.05s/it, loss=0.107, smooth loss=0.0844]4] ",
        "Saving C:/Users/k/Desktop/Model Training Mats/amber_img/workspace/model/amber.safetensors",
        "Exception in thread Thread-3 (__training_thread_function):",
        "Traceback (most recent call last):",
        '  File "threading.py", line 1016, in _bootstrap_inner',
        '  File "C:\\OneTrainer\\modules\\ui\\TrainUI.py", line 579, in __training_thread_func',
    )
    assert result.crashed and result.phase == "save" and result.marker_phase == "save"
    assert scan("Saving the model weights now").marker_phase != "save"


def test_onetrainers_epoch_bar_is_the_outer_loop_not_the_training_bar() -> None:
    # OneTrainer #681: the `step:` bar (with the loss) restarts every epoch under the `epoch:`
    # bar, whose 52 s/it is a whole epoch: neither its count nor its rate is the step's.
    result = scan(
        "step: 100%|██████████| 28/28 [00:49<00:00,  1.76s/it, loss=0.0377, smooth loss=0.085]5] ",
        "step:  21%|██▏       | 6/28 [00:12<00:45,  2.05s/it, loss=0.107, smooth loss=0.0844]4] ",
        "epoch:  55%|█████▌    | 22/40 [19:12<15:42, 52.38s/it]",
    )
    assert result.training_started
    assert (result.last_step, result.total_steps) == (6, 28)
    assert "sysmem_spill" not in result.signals and result.spill_step is None
    # A bar called epoch that reports the loss is the training bar (its only bar).
    alone = scan("Epoch:  40%|████      | 4/10 [00:09<00:13,  2.20s/it, loss=0.113]")
    assert alone.training_started and alone.last_step == 4


# kohya_ss #3300 (sdxl_train.py in Colab): notebooks draw tqdm without its bar.
COLAB_OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 14.00 MiB. GPU 0 has a total "
    "capacity of 39.56 GiB of which 896.00 KiB is free. Process 118916 has 39.55 GiB memory in "
    "use. Of the allocated memory 37.77 GiB is allocated by PyTorch, and 1.28 GiB is reserved by "
    "PyTorch but unallocated."
)


def test_a_bar_drawn_without_its_bar_is_the_same_bar() -> None:
    result = scan(COLAB_OOM, "steps:   0% 0/2300 [00:01<?, ?it/s]")
    assert result.training_started and (result.last_step, result.total_steps) == (0, 2300)
    # Unnamed (camenduru/kohya_ss-colab #3) before training: it moves no phase.
    loading = scan("loading image sizes.", "100% 14/14 [00:05<00:00,  2.40it/s]", COLAB_OOM)
    assert not loading.training_started and loading.phase != "training"
    # A percentage in prose is no bar.
    assert not scan("steps: 50% 1/2 done", COLAB_OOM).training_started


def test_lightnings_sanity_check_is_a_sample_pass_before_training() -> None:
    # JoePenna Dreambooth #37: Lightning validates two batches before the first training step.
    result = scan(
        "Sanity Checking DataLoader 0:   0%|                       | 0/2 [00:00<?, ?it/s]Here "
        "comes the checkpoint...",
        "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
    )
    assert not result.training_started and result.phase == "baseline_sample"
    assert "cublas_alloc" in result.signals


def test_an_oom_caught_and_retried_smaller_is_an_oom() -> None:
    # sd_dreambooth_extension #657: its wrapper prints the OOM it caught right after the bar.
    caught = scan(
        "Steps:   0%|          | 0/4000 [00:00<?, ?it/s]OOM Detected, reducing batch/grad size "
        "to 0/1.",
        "Traceback (most recent call last):",
    )
    assert "cuda_oom" in caught.signals and caught.training_started
    # #760, #852: accelerate's batch-size finder once nothing smaller is left.
    assert "cuda_oom" in scan("RuntimeError: No executable batch size found, reached zero.").signals
    assert "cuda_oom" not in scan("Detected 2 GPUs, reducing nothing").signals


def test_an_exception_reported_while_training_is_the_training_phase() -> None:
    # sd_dreambooth_extension #456: the trainer names the loop the error came from.
    result = scan(
        "Exception while training: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 12.00 "
        "GiB total capacity; 11.08 GiB already allocated; 0 bytes free; 11.25 GiB reserved in "
        "total by PyTorch)",
        " Allocated: 11.1GB",
    )
    assert result.oom is not None and result.phase == "training"
    assert scan("Exception while loading the model: CUDA out of memory.").phase != "training"


def test_non_blocking_outside_a_traceback_is_not_evidence() -> None:
    assert not scan(
        "note: tensors move with non_blocking=True here", "CUDA out of memory."
    ).host_copy


# --- the allocator message ----------------------------------------------------------------------


def test_current_allocator_message() -> None:
    oom = scan(*LOAD, OOM_CURRENT).oom
    assert oom is not None
    assert oom.form == "current" and oom.gpu == 0
    assert (oom.tried, oom.total, oom.this_process) == (5.06, 31.36, 28.18)
    assert oom.free == pytest.approx(336.62 / 1024)
    assert (oom.allocated, oom.reserved_unallocated) == (24.17, 2.92)
    assert [(p.pid, p.gib) for p in oom.other_processes] == [(4242, 2.0), (777, 0.5)]
    assert oom.others_total == 2.5
    assert oom.line == len(LOAD) + 1


# diffusion-pipe #153 (two ranks on one 80 GB card, in a container) and DiffSynth-Studio #1238
# (another job on the card; this build prints no GPU index): no "this process" in either.
OOM_CONTAINER_OWN_BIG = (
    "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.68 GiB. GPU 0 has a "
    "total capacity of 79.21 GiB of which 259.19 MiB is free. Process 2828469 has 516.00 MiB "
    "memory in use. Process 2856448 has 78.44 GiB memory in use. Of the allocated memory 70.48 "
    "GiB is allocated by PyTorch, and 6.78 GiB is reserved by PyTorch but unallocated."
)
OOM_CONTAINER_OTHER_BIG = (
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 18.00 MiB. GPU  has a "
    "total capacity of 95.00 GiB of which 6.50 MiB is free. Process 3927658 has 73.02 GiB memory "
    "in use. Process 4105349 has 21.96 GiB memory in use. Of the allocated memory 21.65 GiB is "
    "allocated by PyTorch, and 1.51 MiB is reserved by PyTorch but unallocated."
)


def test_without_this_process_the_listed_process_covering_pytorchs_memory_is_the_job() -> None:
    oom = scan(OOM_CONTAINER_OWN_BIG).oom
    assert oom is not None and oom.this_process_inferred
    assert oom.this_process == 78.44
    assert [p.pid for p in oom.other_processes] == [2828469]
    assert oom.others_total == pytest.approx(516 / 1024)


def test_without_this_process_a_big_foreign_process_stays_another_process() -> None:
    oom = scan(OOM_CONTAINER_OTHER_BIG).oom
    assert oom is not None and oom.this_process_inferred
    assert (oom.gpu, oom.total, oom.this_process) == (None, 95.0, 21.96)
    assert [(p.pid, p.gib) for p in oom.other_processes] == [(3927658, 73.02)]


def test_no_listed_process_is_the_job_when_none_covers_pytorchs_memory() -> None:
    message = OOM_CONTAINER_OTHER_BIG.replace("21.96 GiB memory", "30.00 GiB memory")
    oom = scan(message).oom
    assert oom is not None and not oom.this_process_inferred and oom.this_process is None
    assert len(oom.other_processes) == 2


def test_a_message_naming_this_process_is_left_as_it_is() -> None:
    oom = scan(*LOAD, OOM_CURRENT).oom
    assert oom is not None and not oom.this_process_inferred


def test_legacy_allocator_message() -> None:
    found = parse_allocator_message(
        "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 1; 23.69 GiB total "
        "capacity; 22.52 GiB already allocated; 3.31 MiB free; 22.63 GiB reserved in total by "
        "PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb"
    )
    assert found["form"] == "legacy" and found["gpu"] == 1
    assert found["tried"] == pytest.approx(20 / 1024)
    assert (found["total"], found["allocated"], found["reserved"]) == (23.69, 22.52, 22.63)
    assert found["free"] == pytest.approx(3.31 / 1024)


def test_legacy_message_with_the_capacty_misspelling_and_zero_free() -> None:
    result = scan(
        "RuntimeError: CUDA out of memory. Tried to allocate 2.00 MiB (GPU 0; 4.00 GiB total "
        "capacty; 3.10 GiB already allocated; 0 bytes free; 3.20 GiB reserved in total by PyTorch)"
    )
    oom = result.oom
    assert oom is not None and oom.form == "legacy"
    assert (oom.total, oom.free, oom.allocated, oom.reserved) == (4.0, 0.0, 3.1, 3.2)
    assert oom.reserved_unallocated == pytest.approx(0.1)
    assert {"cuda_oom", "zero_free"} <= set(result.signals)


def test_a_message_wrapped_over_several_lines_is_put_back_together() -> None:
    result = scan(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total",
        "capacity of 23.55 GiB of which 120.00 MiB is free. Including non-PyTorch memory, this",
        "process has 23.40 GiB memory in use. Of the allocated memory 21.00 GiB is allocated by",
        "PyTorch, and 1.80 GiB is reserved by PyTorch but unallocated.",
    )
    oom = result.oom
    assert oom is not None
    assert oom.tried == 1.0
    # A figure the wrap cut between its words is read whole from the lines put together.
    assert (oom.total, oom.this_process, oom.allocated) == (23.55, 23.4, 21.0)
    assert oom.free == pytest.approx(120 / 1024)
    assert oom.reserved_unallocated == 1.8


def test_a_bare_oom_line_keeps_the_numbers_of_the_full_message() -> None:
    result = scan(*LOAD, *FAILURE, "torch.OutOfMemoryError: CUDA out of memory.")
    assert result.oom is not None and result.oom.tried == 5.06


# --- resume and several runs --------------------------------------------------------------------


def test_two_runs_are_counted_and_the_last_is_described() -> None:
    first = [*HEADER, *LOAD, bar(0), bar(120), *FAILURE]
    second = [*HEADER, *LOAD, "Generating baseline samples before training"]
    result = scan(*first, *second)
    assert result.run_count == 2
    assert result.run_start_line == len(first) + 1
    assert result.phase == "baseline_sample"
    assert not result.crashed and result.oom is None and not result.signals


def test_a_resume_is_seen_in_the_metadata_line() -> None:
    result = scan(
        *HEADER,
        "#### IMPORTANT RESUMING FROM /out/my_lora_000000500.safetensors ####",
        "Loading from /out/my_lora_000000500.safetensors",
        "Found step 500 in metadata, starting from there",
        bar(500),
        bar(501),
    )
    assert result.resumed and result.first_step == 500


def test_a_resume_is_seen_in_the_first_training_bar() -> None:
    result = scan(*LOAD, bar(1200), bar(1201))
    assert result.resumed and result.first_step == 1200


def test_a_fresh_start_is_not_a_resume() -> None:
    assert not scan(*HEADER, *LOAD, bar(0), bar(1)).resumed


def test_a_config_dump_alone_starts_a_run() -> None:
    result = scan(*LOAD, bar(3), *FAILURE, "{", '    "job": "extension",', *LOAD)
    assert result.run_count == 2 and not result.crashed


def test_a_log_without_a_header() -> None:
    result = scan(bar(10), bar(11), *FAILURE)
    assert result.run_count == 1 and not result.header_seen
    assert result.crashed and result.last_step == 11


# --- the reader's edge cases --------------------------------------------------------------------


def test_carriage_return_redraws_share_one_line_number() -> None:
    text = "\n".join(LOAD) + "\n" + redraws(0, 300) + "\n" + "\n".join(FAILURE) + "\n"
    result = scan_text(text)
    assert result.last_step == 300
    assert result.evidence_for("bar")[0].line == len(LOAD) + 1
    assert result.oom is not None and result.oom.line == len(LOAD) + 1 + len(FAILURE)
    assert result.line_count == len(LOAD) + 1 + len(FAILURE)


def test_later_lines_of_redraws_keep_the_last_step() -> None:
    text = redraws(0, 5) + "\n" + redraws(6, 500) + "\n" + redraws(501, 502) + "\n"
    result = scan_text(text)
    assert (result.last_step, result.first_step, result.line_count) == (502, 0, 3)
    assert result.evidence_for("bar")[0].line == 3


def test_a_sample_bar_at_the_end_of_a_line_of_redraws() -> None:
    sample = "\rGenerating Images:   0%|          | 0/2 [00:00<?, ?it/s]"
    result = scan_text(redraws(0, 5) + "\n" + redraws(6, 50) + sample + "\n" + OOM_CURRENT + "\n")
    assert (result.phase, result.last_step) == ("periodic_sample", 50)


def test_text_glued_to_the_last_of_many_redraws() -> None:
    glued = redraws(6, 50) + "Traceback (most recent call last):"
    result = scan_text(redraws(0, 5) + "\n" + glued + "\n" + OOM_CURRENT + "\n")
    assert (result.phase, result.last_step, result.crashed) == ("training", 50, True)


def test_crlf_line_endings_give_the_same_scan() -> None:
    lines = [*HEADER, *LOAD, bar(0), bar(20), *FAILURE]
    assert scan(*lines, newline="\r\n") == scan(*lines)


def test_non_utf8_bytes_are_replaced() -> None:
    data = b"Loading transformer\n\xff\xfe\x80 caf\xe9 \x93\n" + OOM_CURRENT.encode() + b"\n"
    result = scan_text(data)
    assert result.phase == "model_load" and result.oom is not None and result.oom.line == 3


def test_a_utf16_log_from_powershell_is_read() -> None:
    data = ("\n".join([*LOAD, OOM_CURRENT]) + "\n").encode("utf-16")
    result = scan_text(data)
    assert result.phase == "model_load" and result.oom is not None and result.oom.tried == 5.06


def test_ansi_colour_codes_are_removed() -> None:
    result = scan(
        "\x1b[32mLoading transformer\x1b[0m",
        "\x1b[1m\x1b[31mtorch.OutOfMemoryError: CUDA out of memory.\x1b[0m",
    )
    assert result.phase == "model_load"
    assert result.exception is not None
    assert result.exception.text == "torch.OutOfMemoryError: CUDA out of memory."


def test_a_windows_double_printed_traceback_counts_once() -> None:
    traceback = [
        "Traceback (most recent call last):",
        '  File "C:\\ai-toolkit\\run.py", line 120, in <module>',
        "    main()",
        OOM_CURRENT,
    ]
    result = scan(*LOAD, bar(3), "Error running job: CUDA out of memory.", *traceback, *traceback)
    assert result.run_count == 1 and result.crashed
    assert len(result.evidence_for("cuda_oom")) == 2  # the error line and the first message
    assert result.oom is not None and result.oom.tried == 5.06


def test_a_traceback_glued_to_a_bar_is_still_read() -> None:
    result = scan(*LOAD, bar(7) + "Traceback (most recent call last):", OOM_CURRENT)
    assert result.last_step == 7 and result.crashed and result.phase == "training"


def test_an_overlong_segment_is_cut_and_the_rest_still_read() -> None:
    junk = "x" * (MAX_SEGMENT_BYTES * 3)
    result = scan_stream(
        io.BytesIO(f"Loading transformer\n{junk}\n{OOM_CURRENT}\n".encode()), chunk_bytes=4096
    )
    assert result.phase == "model_load"
    assert result.oom is not None and result.oom.line == 3


@pytest.mark.parametrize("chunk_bytes", [1, 7, 64, 4096])
def test_chunk_boundaries_do_not_change_the_scan(chunk_bytes: int) -> None:
    text = (
        "\r\n".join([*HEADER, *LOAD, *DATASET])
        + "\r\n"
        + redraws(0, 60)
        + "\n"
        + "\n".join(FAILURE)
    )
    data = text.encode()
    whole = scan_stream(io.BytesIO(data))
    assert scan_stream(io.BytesIO(data), chunk_bytes=chunk_bytes) == whole


PIECES = [*HEADER, *LOAD, *DATASET, *FAILURE, bar(0), bar(17), bar(2999), "\x1b[31mred\x1b[0m"]
SEPARATORS = ["\n", "\r", "\r\n"]


@settings(max_examples=60, deadline=None)
@given(
    parts=st.lists(
        st.tuples(
            st.sampled_from(PIECES) | st.binary(max_size=12).map(lambda b: b.decode("latin-1")),
            st.sampled_from(SEPARATORS),
        ),
        max_size=40,
    ),
    chunk_bytes=st.integers(min_value=1, max_value=300),
)
def test_any_log_reads_the_same_in_any_chunk_size(
    parts: list[tuple[str, str]], chunk_bytes: int
) -> None:
    data = "".join(text + sep for text, sep in parts).encode("utf-8", "surrogateescape")
    whole = scan_stream(io.BytesIO(data))
    assert scan_stream(io.BytesIO(data), chunk_bytes=chunk_bytes) == whole
    assert whole.line_count == data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)


def test_an_empty_log() -> None:
    result = scan_text("")
    assert (result.phase, result.crashed, result.line_count, result.run_count) == (
        "unknown",
        False,
        0,
        1,
    )


def test_line_count_without_a_final_newline() -> None:
    assert scan_text("a\nb\nc").line_count == 3
    assert scan_text("a\nb\nc\n").line_count == 3


# --- files and the marker table -----------------------------------------------------------------


def test_scan_log_reads_a_file(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_text("\n".join([*LOAD, OOM_CURRENT]) + "\n", encoding="utf-8")
    result = scan_log(log)
    assert result.source == str(log) and result.crashed


def test_a_missing_log_is_a_log_error(tmp_path: Path) -> None:
    with pytest.raises(LogError, match="no such log file"):
        scan_log(tmp_path / "nope.txt")


def test_a_folder_is_not_a_log(tmp_path: Path) -> None:
    with pytest.raises(LogError, match="folder"):
        scan_log(tmp_path)


def test_the_shipped_marker_table_loads() -> None:
    markers = load_log_markers()
    assert markers.phases and markers.signals
    run_signals = {"silent_exit", "sysmem_spill", "stall"}
    assert {rule.signal for rule in markers.signals} == set(SIGNALS) - run_signals


def test_a_bad_pattern_in_the_marker_table_is_a_preset_error(tmp_path: Path) -> None:
    shipped = Path(__file__).resolve().parents[3] / "presets" / "log_markers.yaml"
    bad = tmp_path / "log_markers.yaml"
    bad.write_text(
        shipped.read_text(encoding="utf-8").replace("'^Running \\d+ jobs?\\s*$'", "'^(Running'")
    )
    with pytest.raises(PresetError, match="not a valid regular expression") as caught:
        load_log_markers(bad)
    # Located like every other preset: the file, the line and the column of the pattern.
    line = next(
        n for n, text in enumerate(bad.read_text().splitlines(), 1) if "'^(Running'" in text
    )
    assert caught.value.one_line().startswith(f"{bad}:{line}:5: run_start[0]: ")


def test_a_wrong_value_in_the_marker_table_names_its_line_and_column(tmp_path: Path) -> None:
    bad = tmp_path / "log_markers.yaml"
    shipped = Path(__file__).resolve().parents[3] / "presets" / "log_markers.yaml"
    text = shipped.read_text(encoding="utf-8").replace(
        "{signal: cublas_alloc,", "{signal: cublas_allocated,"
    )
    bad.write_text(text)
    line = next(n for n, row in enumerate(text.splitlines(), 1) if "cublas_allocated" in row)
    with pytest.raises(PresetError) as caught:
        load_log_markers(bad)
    assert caught.value.one_line().startswith(f"{bad}:{line}:")
    assert "signal" in caught.value.one_line()


def test_an_unknown_key_in_the_marker_table_is_a_preset_error(tmp_path: Path) -> None:
    bad = tmp_path / "log_markers.yaml"
    bad.write_text("run_start: []\nsurprise: 1\n")
    with pytest.raises(PresetError):
        load_log_markers(bad)


# --- the shapes of issue 9, each with lines from a real report ----------------------------------
# The sources are the fixtures in tests/fixtures/reports/ (their expected.yaml names the URL).

LOKR_EXCERPT = [  # ai-toolkit#595: a log that starts at step 299, after 10 minutes of training
    "Skipping first sample due to config setting",
    "lokr-test-2:  10%|9         | 299/3000 [10:44<1:37:05,  2.16s/it, lr: 2.0e-04 loss: "
    "5.226e-01]",
    "Saving at step 300",
    "lokr-test-2:  20%|#9        | 599/3000 [19:45<1:03:24,  1.58s/it, lr: 2.0e-04 loss: "
    "6.736e-01]",
    "Saving at step 600",
    "lokr-test-2:  30%|##9       | 899/3000 [29:51<1:06:28,  1.90s/it, lr: 2.0e-04 loss: "
    "6.463e-01]",
    "Saving at step 900",
    "lokr-test-2:  40%|###9      | 1199/3000 [2:49:04<14:04:18, 28.13s/it, lr: 2.0e-04 loss: "
    "7.353e-01]",
    "Saving at step 1200",
]


def test_a_bar_first_seen_after_hours_of_elapsed_time_is_an_excerpt_not_a_resume() -> None:
    result = scan(*LOKR_EXCERPT[:3])
    assert (result.excerpt, result.resumed, result.first_step) == (True, False, 0)


def test_a_bar_first_seen_past_zero_with_almost_no_elapsed_time_is_a_resume() -> None:
    # ai-toolkit#1007: both versions' lines, each a resume at step 500.
    for line in (
        "HR_Krea2:  19%|#9        | 501/2600 [00:21<12:24:06, 21.27s/it, lr: 9.2e-05 loss: "
        "6.988e-02]",
        "HR_Krea2:  19%|#9        | 501/2600 [05:03<177:04:17, 303.70s/it, lr: 9.3e-05 loss: "
        "1.196e-01]",
    ):
        result = scan(line)
        assert (result.resumed, result.excerpt, result.first_step) == (True, False, 501), line


def test_the_toolkit_saying_it_resumed_wins_over_the_elapsed_time() -> None:
    result = scan("Found step 299 in metadata, starting from there", *LOKR_EXCERPT[1:3])
    assert result.resumed and not result.excerpt


def test_a_bar_whose_s_per_it_grows_several_fold_is_a_sysmem_spill_where_it_began() -> None:
    result = scan(*LOKR_EXCERPT)
    assert result.spill_step == 1199 and "sysmem_spill" in result.signals
    assert result.evidence_for("sysmem_spill")[0].text.startswith("lokr-test-2:  40%")


def test_a_steady_bar_is_no_spill() -> None:
    assert scan(*LOKR_EXCERPT[:7]).spill_step is None


def test_a_log_that_stops_on_a_bar_at_zero_is_a_stall_in_that_phase() -> None:
    # ai-toolkit#330, with the paste's leading space.
    result = scan(
        " Generating baseline samples before training",
        " Generating Images:   0%|                                          | 0/1 [00:00<?, ?it/s]",
    )
    assert (result.phase, result.ends_open, result.crashed) == ("baseline_sample", True, False)
    assert "stall" in result.signals and result.stall_line == 2


def test_a_log_that_stops_after_progress_is_open_but_no_stall() -> None:
    result = scan(*LOAD, bar(0), bar(40))
    assert result.ends_open and "stall" not in result.signals


def test_a_finished_run_is_not_open() -> None:
    result = scan(*LOAD, bar(0), bar(3000), "Result:", " - 1 completed jobs", " - 0 failure")
    assert result.finished and not result.ends_open


def test_a_crash_is_not_open() -> None:
    result = scan(*LOAD, bar(0), OOM_CURRENT)
    assert result.crashed and not result.ends_open and "stall" not in result.signals


@pytest.mark.parametrize(
    ("line", "signal"),
    [
        # autotrain-advanced#737 on ROCm
        (
            "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 124.00 MiB. GPU 0 has a "
            "total capacity of 19.94 GiB of which 554.47 MiB is free.",
            "cuda_oom",
        ),
        # ace-step#282 on a Mac
        (
            "RuntimeError: MPS backend out of memory (MPS allocated: 45.18 GiB, other allocations: "
            "719.81 MiB, max allowed: 45.90 GiB). Tried to allocate 23.44 MiB on private pool.",
            "cuda_oom",
        ),
        # ComfyUI's allocator wrapper, and its error report's short form
        ("Allocation on device 0 would exceed allowed memory. (out of memory)", "cuda_oom"),
        ("- **Exception Message:** Allocation on device ", "cuda_oom"),
        # Python's own, and numpy's wording of it
        ("MemoryError", "host_memory_error"),
        (
            "numpy.core._exceptions._ArrayMemoryError: Unable to allocate 1.50 GiB for an array "
            "with shape (4, 16, 128, 128, 96) and data type float32",
            "host_memory_error",
        ),
        # accelerate's launcher when the kernel killed the trainer (kohya_ss#1065)
        (
            "subprocess.CalledProcessError: Command '['python', 'train_network.py']' died with "
            "<Signals.SIGKILL: 9>.",
            "host_oom_kill",
        ),
    ],
)
def test_every_wording_of_out_of_memory(line: str, signal: str) -> None:
    result = scan(*LOAD, line)
    assert signal in result.signals and result.crashed


def test_an_oom_message_from_rocm_gives_its_numbers() -> None:
    result = scan(
        "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 124.00 MiB. GPU 0 has "
        "a total "
        "capacity of 19.94 GiB of which 554.47 MiB is free. Of the allocated memory 15.87 GiB is "
        "allocated by PyTorch, and 165.29 MiB is reserved by PyTorch but unallocated."
    )
    assert result.oom is not None and result.oom.total == pytest.approx(19.94)


@pytest.mark.parametrize(
    "line",
    [
        "[process exited with code 1 (0x00000001)]",  # alignment-handbook#63, English
        "[已退出进程，代码为 1 (0x00000001)]",  # ai-toolkit#409, the same terminal in Chinese
        "[Processus arrêté avec le code 1 (0x00000001)]",  # any language: the code is the match
        "[2025-02-16 13:28:07] [ERROR] Command exited with code 1",  # fluxgym#337
    ],
)
def test_a_terminal_or_launcher_exit_code_in_any_language_is_an_exit(line: str) -> None:
    result = scan(*LOAD, bar(0), bar(5), line)
    assert result.crashed and result.exit_code == 1 and "silent_exit" in result.signals


def test_an_exit_code_zero_in_the_terminal_is_no_crash() -> None:
    result = scan(*LOAD, bar(0), bar(3000), "[process exited with code 0 (0x00000000)]")
    assert not result.crashed


def test_the_call_under_a_frame_names_the_phase_when_the_function_does_not() -> None:
    # kohya_ss#2305: `train` both caches and trains; its line says which.
    result = scan(
        "Traceback (most recent call last):",
        '  File "K:\\kohya_ss\\sd-scripts\\sdxl_train_network.py", line 185, in <module>',
        "    trainer.train(args)",
        '  File "K:\\kohya_ss\\sd-scripts\\train_network.py", line 272, in train',
        "    train_dataset_group.cache_latents(vae, args.vae_batch_size, "
        "args.cache_latents_to_disk",
    )
    assert (result.crashed, result.frame_phase) == (True, "cache_latents")


def test_moving_the_model_to_the_device_is_loading() -> None:
    # OneTrainer#841
    result = scan(
        "Traceback (most recent call last):",
        '  File "/home/gero/GitHub/OneTrainer/modules/trainer/GenericTrainer.py", line 129, '
        "in start",
        "    self.model_setup.setup_train_device(self.model, self.config)",
        '  File "/home/gero/GitHub/OneTrainer/modules/model/FluxModel.py", line 161, in '
        "transformer_to",
        "    self.transformer.to(device=device)",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 108.00 MiB.",
    )
    assert result.phase == "model_load"


def test_accelerates_wrapped_forward_is_a_training_step() -> None:
    # fluxgym#337, cut off before its last line, behind FluxGym's prefixes.
    result = scan(
        '[2025-02-16 13:28:06] [INFO] File "F:\\fluxgym\\env\\lib\\site-packages\\accelerate\\utils'
        '\\operations.py", line 819, in forward',
        "[2025-02-16 13:28:06] [INFO] return model_forward(*args, **kwargs)",
        "[2025-02-16 13:28:07] [ERROR] Command exited with code 1",
    )
    assert (result.crashed, result.phase) == (True, "training")
    assert "silent_exit" not in result.signals  # a traceback was printed: not a silent exit


def test_a_comfyui_error_report_names_the_training_node() -> None:
    # ComfyUI-FluxTrainer#91
    result = scan(
        "# ComfyUI Error Report",
        "## Error Details",
        "- **Node Type:** FluxTrainLoop",
        "- **Exception Type:** torch.OutOfMemoryError",
        "- **Exception Message:** Allocation on device ",
    )
    assert (result.phase, result.crashed) == ("training", True)


def test_rich_and_logging_level_prefixes_are_removed() -> None:
    result = scan(
        "                    INFO     caching latents...                          "
        "train_util.py:1021",
        "INFO:hv_train_network:Load dataset config from /home/u/dataset.toml",
    )
    assert result.phase == "cache_latents"


PRINTED_CONFIG = [  # the shape AI Toolkit prints at the start of a run (ai-toolkit#515)
    "Running 1 job",
    "{",
    '    "type": "diffusion_trainer",',
    '    "training_folder": "/root/tools/ai-toolkit/output",',
    '    "train": {',
    '        "batch_size": 2,',
    '        "gradient_checkpointing": true',
    "    },",
    '    "datasets": [',
    '        {"folder_path": "/data", "resolution": [512, 768]}',
    "    ]",
    "}",
    "Loading Flux model",
]


def test_the_printed_process_config_gives_its_memory_fields() -> None:
    result = scan(*PRINTED_CONFIG)
    assert result.config_dump == (
        ("train.batch_size", 2),
        ("train.gradient_checkpointing", True),
        ("datasets[0].resolution", [512, 768]),
    )
    assert result.header_seen and result.phase == "model_load"


def test_a_printed_config_that_is_not_json_is_ignored() -> None:
    result = scan("Running 1 job", "{", '    "train": {batch_size: 2}', "}", "Loading model")
    assert result.config_dump is None and result.phase == "model_load"


def test_the_log_files_modification_time_is_kept(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_text("\n".join(LOAD) + "\n", encoding="utf-8")
    os.utime(log, (1_700_000_000, 1_700_000_000))
    assert scan_log(log).modified == 1_700_000_000


@pytest.mark.parametrize(
    ("line", "signal"),
    [
        ("RuntimeError: HIP error: out of memory", "cuda_error_oom"),
        (
            "Search for `hipErrorOutOfMemory' in https://rocm.docs.amd.com for more",
            "cuda_error_oom",
        ),
        ("Error named symbol: cudaMalloc failed: out of memory", "cuda_error_oom"),
        (
            "RuntimeError: [enforce fail at alloc_cpu.cpp:114] data. DefaultCPUAllocator: can't "
            "allocate memory: you tried to allocate 3355443200 bytes. Error code 12",
            "host_memory_error",
        ),
        (
            "torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0 "
            "(pid: 3889428) of binary: /usr/bin/python",
            "host_oom_kill",
        ),
    ],
)
def test_more_wordings_of_out_of_memory(line: str, signal: str) -> None:
    assert signal in scan(*LOAD, line).signals


@pytest.mark.parametrize(
    ("frames", "phase"),
    [
        (  # the optimizer's first step allocates its states
            [
                '  File "/ai-toolkit/extensions_built_in/sd_trainer/SDTrainer.py", line 9, in x',
                "    self.optimizer.step()",
            ],
            "training",
        ),
        (
            [
                '  File "/venv/lib/python3.10/site-packages/torch/utils/checkpoint.py", line 4, in '
                "recompute_fn",
            ],
            "training",
        ),
        (
            [
                '  File "/venv/lib/site-packages/diffusers/pipelines/flux/pipeline_flux.py", '
                "line 913, in __call__",
            ],
            "periodic_sample",
        ),
        (
            ['  File "/musubi-tuner/src/musubi_tuner/cache_latents.py", line 281, in main'],
            "cache_latents",
        ),
    ],
)
def test_frames_of_every_trainer_name_the_phase(frames: list[str], phase: str) -> None:
    result = scan(
        *LOAD, bar(0), bar(20), "Traceback (most recent call last):", *frames, OOM_CURRENT
    )
    assert result.phase == phase


def test_a_validation_bar_of_simpletuner_is_a_sample_pass() -> None:
    # SimpleTuner#2477
    result = scan(
        "Epoch 11/40, Steps:  27%|██▋       | 5534/20160 [7:06:41<17:55:04,  4.41s/it, "
        "lr=0.000399, step_loss=0.0117]",
        "Processing validation prompts:  60%|██████    | 3/5 [01:02<00:42, 21.06s/it]",
        OOM_CURRENT,
    )
    assert result.phase == "periodic_sample"


def test_a_rich_traceback_of_sd_scripts_places_the_crash() -> None:
    # kohya_ss#1441's shape: rich's box, the current line marked with ❱.
    result = scan(
        "caching latents...",
        " 19%|█████▉                         | 14/74 [00:05<00:23,  2.57it/s]",
        "╭─────────────────────────────── Traceback (most recent call last) ────────────────────╮",
        "│ C:\\Users\\t3mpl\\kohya_ss\\train_network.py:252 in train                          │",
        "│                                                                                      │",
        "│   251 │   if cache_latents:                                                          │",
        "│ ❱ 252 │   │   train_dataset_group.cache_latents(vae, args.vae_batch_size)             │",
        "│                                                                                      │",
        "│ /usr/local/lib/python3.9/dist-packages/diffusers/models/unet_2d_condition.py         │",
        "│ :407 in forward                                                                      │",
        "╰──────────────────────────────────────────────────────────────────────────────────────╯",
        "OutOfMemoryError: CUDA out of memory. Tried to allocate 440.00 MiB (GPU 0; 24.00 GiB "
        "total capacity; 1.20 GiB already allocated; 21.99 GiB free; 1.31 GiB reserved in total "
        "by PyTorch)",
    )
    assert (result.crashed, result.frame_phase, result.phase) == (
        True,
        "cache_latents",
        "cache_latents",
    )
    assert result.evidence_for("frame")[0].text.startswith("│ ❱ 252")


def test_a_bar_counting_bytes_is_a_download_not_the_training_bar() -> None:
    # diffusers#9546: the validation pipeline fetches its files, then runs out of memory.
    result = scan(
        "09/28/2024 00:34:14 - INFO - __main__ - Running validation... ",
        "model_index.json: 100%|██████████| 536/536 [00:00<00:00, 1.54MB/s]",
        OOM_CURRENT,
    )
    assert (result.training_started, result.phase) == (False, "periodic_sample")


def test_a_bar_first_seen_at_step_1_after_the_time_one_step_takes_is_no_resume() -> None:
    # kohya_ss#875: the paste lost the 0/1150 redraw; 4 s at 4.89 s/it is that one step.
    result = scan("steps:   0%|          | 1/1150 [00:04<1:33:36,  4.89s/it, loss=0.43]")
    assert (result.resumed, result.first_step, result.last_step) == (False, 0, 1)


def test_a_sample_pass_crawling_far_slower_than_training_steps_is_a_spill() -> None:
    # ai-toolkit#504's sample pass: 115 s per denoising step, after training steps of ~2 s.
    training = [
        f"my_lora:  {n // 30}%|          | {n}/3000 [{n // 30:02d}:00<1:40:00,  {rate}s/it, "
        "lr: 1.0e-04 loss: 4.5e-01]"
        for n, rate in ((60, "2.01"), (90, "1.98"), (120, "2.02"), (150, "2.00"))
    ]
    result = scan(
        *training,
        "Generating Images:   0%|          | 0/2 [00:00<?, ?it/s]Unloading vae",
        "Unloading text encoder",
        "  0%|          | 0/30 [00:00<?, ?it/s]",
        "  3%|3         | 1/30 [01:55<55:46, 115.39s/it]",
        "  7%|6         | 2/30 [03:50<53:38, 114.95s/it]",
    )
    assert (result.phase, result.spill_step) == ("periodic_sample", 150)
    assert "sysmem_spill" in result.signals and result.ends_open


def test_a_sample_pass_at_its_usual_speed_is_no_spill() -> None:
    result = scan(
        "my_lora:   3%|          | 90/3000 [03:00<1:40:00,  2.00s/it, lr: 1.0e-04 loss: 4.5e-01]",
        "my_lora:   4%|          | 120/3000 [04:00<1:40:00,  2.00s/it, lr: 1.0e-04 loss: 4.5e-01]",
        "my_lora:   5%|          | 150/3000 [05:00<1:40:00,  2.00s/it, lr: 1.0e-04 loss: 4.5e-01]",
        "  3%|3         | 1/30 [00:01<00:40,  1.39s/it]",
    )
    assert result.spill_step is None
