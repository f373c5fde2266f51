# ruff: noqa: E501  (log lines are kept whole, as the trainers print them)
"""Six more classes of log the diagnosis misread (issue 40), each a rule over a class of log,
each tested on a log written in the shape of a real public report, whose address heads its
case (the lines are written here in the shapes those reports show; paths and names are made
up). ``before`` in each comment is what the diagnosis said before these rules.
"""

from __future__ import annotations

from tests.support.log_classes import diagnosed

# --- 1. a launcher's error that wraps its child's death -----------------------------------------

# https://github.com/AkaneTendo25/musubi-tuner/issues/67: a ComfyUI node runs musubi-tuner's
# stages as child processes; the latent-caching child dies with 0xC0000005 (3221225477, an
# access violation: what a Windows host out of memory looks like) and the node raises.
# Before: "The job failed with RuntimeError ... not with an out-of-memory error", no moment.
WINDOWS_CHILD_ACCESS_VIOLATION = """\
==============================================================================
[NODE] STAGE 1/3: Cache latents
[NODE] Images found: 6
$ D:\\tuner\\venv\\Scripts\\python.exe ltx2_cache_latents.py --dataset_config C:\\work\\config\\dataset.toml --ltx2_checkpoint C:\\models\\ltx-2.3-22b-dev-fp8.safetensors --device cuda --vae_dtype bf16
INFO:musubi_tuner.ltx2_cache_latents:Load dataset config from C:\\work\\config\\dataset.toml
INFO:musubi_tuner.dataset.image_video_dataset:found 6 images
INFO:musubi_tuner.dataset.config_utils:[Dataset 0]
INFO:musubi_tuner.ltx2_cache_latents:Loading VAE model from C:\\models\\ltx-2.3-22b-dev-fp8.safetensors
!!! Exception during processing !!! Command failed with exit code 3221225477: D:\\tuner\\venv\\Scripts\\python.exe ltx2_cache_latents.py --dataset_config C:\\work\\config\\dataset.toml --device cuda
Traceback (most recent call last):
  File "C:\\ComfyUI\\execution.py", line 496, in execute
    output_data, output_ui, has_subgraph = get_output_data(prompt_id, unique_id, obj, input_data_all)
  File "C:\\ComfyUI\\custom_nodes\\trainer_nodes\\nodes.py", line 318, in run_stage
    raise RuntimeError(f"Command failed with exit code {proc.returncode}: {printable}")
RuntimeError: Command failed with exit code 3221225477: D:\\tuner\\venv\\Scripts\\python.exe ltx2_cache_latents.py --dataset_config C:\\work\\config\\dataset.toml --device cuda
"""

# https://github.com/Linaqruf/kohya-trainer/issues/148 ("died with <Signals.SIGKILL: 9> when
# starting to train"): the notebook's accelerate launcher reports its child killed by the
# kernel's OOM killer, after the checkpoint loaded. Before: "the host ran out of RAM", kept.
LINUX_CHILD_SIGKILL = """\
prepare accelerator
load StableDiffusion checkpoint
loading u-net: <All keys matched successfully>
loading vae: <All keys matched successfully>
Traceback (most recent call last):
  File "/usr/local/bin/accelerate", line 8, in <module>
    sys.exit(main())
  File "/usr/local/lib/python3.9/dist-packages/accelerate/commands/launch.py", line 567, in simple_launcher
    raise subprocess.CalledProcessError(returncode=process.returncode, cmd=cmd)
subprocess.CalledProcessError: Command '['/usr/bin/python3', 'train_network.py', '--dataset_config=/content/config.toml']' died with <Signals.SIGKILL: 9>.
"""


# --- 2. a log with nothing but start-up output --------------------------------------------------

# https://github.com/bmaltais/kohya_ss/issues/1935 ("Kohya_ss stopped training by itself"): the
# GUI's console shows its start-up (the requirement check, the web UI's address, TensorBoard)
# and the training it started, then nothing; the shapes of those lines as kohya_ss#559 shows
# them. Before: "The log's last run shows no crash".
GUI_START_UP_ONLY = """\
Validating that requirements are satisfied.
All requirements satisfied.
Load CSS...
Running on local URL:  http://127.0.0.1:7860

To create a public link, set `share=True` in `launch()`.
14:02:11-381255 INFO     Start training LoRA Standard ...
14:02:11-383702 INFO     Starting TensorBoard on port 6006
TensorBoard 2.15.1 at http://localhost:6006/ (Press CTRL+C to quit)
"""

# https://github.com/OpenRLHF/OpenRLHF/issues/841 ("Sigkill, process exits with return code
# -9"): DeepSpeed prints its engine's configuration one key a line as the engine is built; a
# paste that stops in it stops before the first step. Before: "no crash".
DEEPSPEED_CONFIG_PRINT_ONLY = """\
[2025-03-07 23:55:15,355] [INFO] [config.py:999:print] DeepSpeedEngine configuration:
[2025-03-07 23:55:15,356] [INFO] [config.py:1003:print]   activation_checkpointing_config  {
    "partition_activations": false,
    "contiguous_memory_optimization": false
}
[2025-03-07 23:55:15,356] [INFO] [config.py:1003:print]   train_micro_batch_size_per_gpu  1
[2025-03-07 23:55:15,356] [INFO] [config.py:1003:print]   zero_config .................. stage=2 contiguous_gradients=True reduce_scatter=True reduce_bucket_size=500000000 offload_param=None offload_optimizer=DeepSpeedZeroOffloadOptimizerConfig(device='cpu', nvme_path=None, buffer_count=4, pin_memory=True)
[2025-03-07 23:55:15,356] [INFO] [config.py:1003:print]   zero_enabled ................. True
"""


# --- 3. an out-of-memory swallowed while caching, surfacing as another error ---------------------

# https://github.com/bghira/SimpleTuner/issues/859 ("If the VAE runs out of memory while
# caching, training continues onward but then crashes when it can't find the missing cache
# file"), in the shape of #550's traceback: the check on the data loader's side raises.
# Before: "The job failed with Exception ... not with an out-of-memory error".
CACHE_CHECK_AFTER_SWALLOWED_OOM = """\
2024-08-24 10:11:02,114 [INFO] (DataBackendFactory) (id=default_dataset_896) Creating VAE latent cache.
2024-08-24 10:11:02,201 [INFO] (DataBackendFactory) (id=default_dataset_896) Discovering cache objects..
Processing bucket 1.0:  98%|█████████████████████████▌| 49/50 [00:41<00:00,  1.18it/s]
2024-08-24 10:12:40,510 [INFO] (__main__) ***** Running training *****
Epoch 1/10, Steps:   0%|          | 0/2000 [00:00<?, ?it/s]
2024-08-24 10:12:44,730 [ERROR] (collate_fn) (id=default_dataset_896) Error while computing latents: (id=default_dataset_896) Some images were not correctly cached during the VAE Cache operations. Ensure --skip_file_discovery=vae is not set.
Problematic images: ['/root/SimpleTuner/dataset/36.png']
Traceback (most recent call last):
  File "/root/SimpleTuner/train.py", line 1491, in main
    for step, batch in random_dataloader_iterator(train_backends):
  File "/root/SimpleTuner/helpers/data_backend/factory.py", line 923, in random_dataloader_iterator
    yield (step, next(chosen_iter))
  File "/root/SimpleTuner/.venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py", line 631, in __next__
    data = self._next_data()
Exception: (id=default_dataset_896) Some images were not correctly cached during the VAE Cache operations. Ensure --skip_file_discovery=vae is not set.
"""


# --- 4. a traceback cut before its error line, in backward or attention frames --------------------

# https://github.com/AUTOMATIC1111/stable-diffusion-webui/issues/8400 (textual inversion, 4 GB
# card): the embedding trainer's own frame and the backward call it makes; the paste is cut
# there. Before: "the error itself is not in the log", no moment.
TEXTUAL_INVERSION_BACKWARD_CUT = """\
Training at rate of 0.005 until step 100000
Preparing dataset...
100%|██████████████████████████████████████████████████| 20/20 [00:04<00:00,  4.31it/s]
Traceback (most recent call last):
  File "C:\\sd-webui\\modules\\textual_inversion\\textual_inversion.py", line 503, in train_embedding
    scaler.scale(loss).backward()
"""

# https://github.com/modelscope/DiffSynth-Studio/issues/380 shows a video transformer's
# attention frames (`wan/modules/attention.py`); under torchrun every line of the failing
# rank is tagged `[rank0]:`, and the paste keeps only the innermost frames. Before: "the error
# itself is not in the log", no moment.
RANK_TAGGED_ATTENTION_CUT = """\
[rank0]: Traceback (most recent call last):
[rank0]:   File "/workspace/DiffSynth-Studio/diffsynth/models/wan_video_dit.py", line 212, in forward
[rank0]:     x = x + gate_msa * self.self_attn(input_x, freqs)
[rank0]:   File "/workspace/DiffSynth-Studio/diffsynth/models/wan_video_dit.py", line 131, in forward
[rank0]:     x = self.attn(q, k, v)
[rank0]:   File "/workspace/DiffSynth-Studio/diffsynth/models/wan_video_dit.py", line 41, in flash_attention
[rank0]:     x = F.scaled_dot_product_attention(q, k, v)
"""


# --- 5. other trainers' step counters --------------------------------------------------------------

# The three counters are issue 40's shapes from the held-out reports (`Training steps: 5`,
# `steps: 12/1000`, `Epoch 1/10 ... it 30`); the nearest public report found,
# https://github.com/Stability-AI/StableCascade/issues/53, prints its own counters as plain text
# (`iter: 0`, `total_steps: 0`) before an OOM in its first steps. Before: "no training
# progress": the moment `loading`, low.
TRAINING_STEPS_COUNTER = """\
STARTING JOB WITH CONFIG:
batch_size: 4
image_size: 768
Training steps: 5
torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 23.65 GiB of which 901.06 MiB is free. Including non-PyTorch memory, this process has 22.74 GiB memory in use. Of the allocated memory 21.93 GiB is allocated by PyTorch, and 361.70 MiB is reserved by PyTorch but unallocated.
"""

STEPS_SLASH_COUNTER = """\
steps: 12/1000
torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 23.65 GiB of which 901.06 MiB is free. Including non-PyTorch memory, this process has 22.74 GiB memory in use. Of the allocated memory 21.93 GiB is allocated by PyTorch, and 361.70 MiB is reserved by PyTorch but unallocated.
"""

EPOCH_IT_COUNTER = """\
Epoch 1/10 | it 30 | loss 0.1123 | lr 1.0e-04
torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 23.65 GiB of which 901.06 MiB is free. Including non-PyTorch memory, this process has 22.74 GiB memory in use. Of the allocated memory 21.93 GiB is allocated by PyTorch, and 361.70 MiB is reserved by PyTorch but unallocated.
"""


# --- 6. an error glued to the end of a progress-bar line ------------------------------------------

# https://github.com/ostris/ai-toolkit/issues/443 ("torch.AcceleratorError: CUDA error: unknown
# error"): AI Toolkit's job error is printed on the training bar's line, after its last redraw.
# Before: the error unread, "the log stops ... stalled or was killed".
ERROR_AFTER_BAR = (
    "Skipping first sample due to config setting\n"
    "cs:   8%|###2                                     | 239/3000 [1:05:11<49:46:14, 64.89s/it, lr: 1.0e-04 loss: 1.643e-02]"
    "Error running job: CUDA error: unknown error\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "\n"
    "========================================\n"
    "Result:\n"
    " - 0 completed jobs\n"
    " - 1 failure\n"
    "========================================\n"
)


# --- the verdicts -------------------------------------------------------------------------------


def test_a_launchers_error_for_a_child_that_died_with_an_access_violation_is_placed_by_its_script() -> (
    None
):
    result = diagnosed(WINDOWS_CHILD_ACCESS_VIOLATION)
    assert (result.moment, result.phase, result.confidence) == (
        "loading",
        "cache_latents",
        "medium",
    )
    assert "silent_exit" in result.signals and result.environment_suspected
    assert "0xC0000005" in " ".join(result.reasons)
    assert result.advice[0].id == "host_ram"
    assert "not with an out-of-memory error" not in " ".join(result.notes)


def test_a_launchers_error_for_a_child_killed_by_the_oom_killer_is_still_the_hosts_ram() -> None:
    result = diagnosed(LINUX_CHILD_SIGKILL)
    assert (result.moment, result.confidence) == ("environment", "high")
    assert "host_oom_kill" in result.signals


def test_a_launchers_error_with_exit_status_1_is_still_the_childs_python_error() -> None:
    # Exit status 1 is the child's own Python error, printed in the part not pasted.
    text = WINDOWS_CHILD_ACCESS_VIOLATION.replace("3221225477", "1")
    result = diagnosed(text)
    assert "silent_exit" not in result.signals and result.moment is None


def test_a_log_of_start_up_output_only_stopped_before_the_model_loaded() -> None:
    for text in (GUI_START_UP_ONLY, DEEPSPEED_CONFIG_PRINT_ONLY):
        result = diagnosed(text)
        assert (result.moment, result.phase, result.confidence) == ("loading", "launch", "low")
        assert "before the model loaded" in result.verdict


def test_start_up_output_after_the_training_bar_does_not_move_the_run_back() -> None:
    text = (
        "lora:   1%|          | 20/2000 [00:40<1:06:00,  2.00s/it, lr: 1.0e-04 loss: 4.1e-01]\n"
        "Starting TensorBoard on port 6006\n"
    )
    assert diagnosed(text).phase == "training"


def test_a_caching_check_that_fails_after_a_swallowed_oom_is_the_caching() -> None:
    result = diagnosed(CACHE_CHECK_AFTER_SWALLOWED_OOM)
    assert (result.moment, result.phase, result.confidence) == (
        "loading",
        "cache_latents",
        "medium",
    )
    assert "cache_followon" in result.signals and not result.environment_suspected
    assert result.verdict.startswith("The VAE ran out of GPU memory")


def test_a_cut_traceback_in_a_backward_call_or_in_attention_hints_at_a_training_step() -> None:
    # A backward call pins a training step (whose number the log does not show): medium; an
    # attention frame only hints at one: low.
    backward = diagnosed(TEXTUAL_INVERSION_BACKWARD_CUT)
    assert (backward.moment, backward.phase, backward.confidence) == (
        "early_steps",
        "training",
        "medium",
    )
    attention = diagnosed(RANK_TAGGED_ATTENTION_CUT)
    assert (attention.moment, attention.phase, attention.confidence) == (
        "early_steps",
        "training",
        "low",
    )


def test_attention_with_the_oom_message_places_training_but_not_its_step() -> None:
    message = TRAINING_STEPS_COUNTER.splitlines()[-1]
    result = diagnosed(RANK_TAGGED_ATTENTION_CUT + "[rank0]: " + message + "\n")
    assert (result.moment, result.phase, result.confidence) == ("early_steps", "training", "low")


def test_attention_inside_a_sample_pass_stays_the_sample_pass() -> None:
    text = (
        "lora:   5%|          | 100/2000 [03:20<1:03:20,  2.00s/it, lr: 1.0e-04 loss: 4.1e-01]\n"
        "Generating Images\n"
        + RANK_TAGGED_ATTENTION_CUT
        + TRAINING_STEPS_COUNTER.splitlines()[-1]
        + "\n"
    )
    assert diagnosed(text).moment == "sampling"


def test_other_trainers_step_counters_place_the_step() -> None:
    expected = {
        TRAINING_STEPS_COUNTER: ("early_steps", 6),
        STEPS_SLASH_COUNTER: ("intermittent", 13),
        EPOCH_IT_COUNTER: ("intermittent", 31),
    }
    for text, (moment, step) in expected.items():
        result = diagnosed(text)
        assert (result.moment, result.crash_step, result.confidence) == (moment, step, "high")


def test_a_later_epochs_iteration_count_is_not_read_as_the_step() -> None:
    result = diagnosed(EPOCH_IT_COUNTER.replace("Epoch 1/10", "Epoch 3/10"))
    assert result.crash_step != 31


def test_an_error_glued_to_the_end_of_a_bar_line_is_read() -> None:
    result = diagnosed(ERROR_AFTER_BAR)
    assert "library_fault" in result.signals and result.moment is None
    assert result.confidence == "high" and result.advice[0].id == "library_fault"
    assert result.crash_step == 240
