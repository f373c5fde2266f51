# ruff: noqa: E501  (log lines are kept whole, as the trainers print them)
"""Six classes of log the diagnosis used to misread (issue 31), each on a log of the shape of a
real public report, whose address heads its case. The logs keep the report's lines (paths
shortened, a few lines of chatter left out); where the test needs the shape cut (a traceback
pasted up to a frame), the case says so. ``before`` in each comment is what the diagnosis said
before these rules.
"""

from __future__ import annotations

from tests.support.log_classes import diagnosed

# --- 1. a log that stops in the launcher or in a config dump ------------------------------------

# https://github.com/LarryJane491/Lora-Training-in-Comfy/issues/78 ("Training stop after loading
# the dataset"): accelerate's defaults warning, sd-scripts' dataset preparation and its
# `[Dataset 0]` block, then nothing. Before: "The log's last run shows no crash".
ACCELERATE_THEN_DATASET = """\
The following values were not passed to `accelerate launch` and had defaults used instead:
        `--num_processes` was set to a value of `0`
        `--num_machines` was set to a value of `1`
        `--mixed_precision` was set to a value of `'no'`
        `--dynamo_backend` was set to a value of `'no'`
To avoid this warning pass in values for each of the problematic parameters or run `accelerate config`.
prepare tokenizer
update token length: 225
Using DreamBooth method.
prepare images.
found directory K:\\train\\5_subject contains 278 image files
1390 train images with repeating.
0 reg images.
[Dataset 0]
  batch_size: 1
  resolution: (512, 512)
  enable_bucket: True
  min_bucket_reso: 256
  max_bucket_reso: 1584
"""

# https://github.com/deepspeedai/DeepSpeed/issues/4581: DeepSpeed's launcher (as diffusion-pipe
# starts its trainer) prints the world size, the devices, then the environment one variable a
# line; the report's log stops in those lines. Before: "no crash".
DEEPSPEED_LAUNCHER = """\
[2023-10-29 11:00:22,452] [WARNING] [runner.py:203:fetch_hostfile] Unable to find hostfile, will proceed with training with local resources only.
[2023-10-29 11:00:22,452] [INFO] [runner.py:570:main] cmd = /usr/bin/python3 -u -m deepspeed.launcher.launch --world_info=eyJsb2NhbGhvc3QiOiBbMF19 --master_addr=127.0.0.1 --master_port=29500 train.py --deepspeed --config examples/wan.toml
[2023-10-29 11:00:26,196] [INFO] [launch.py:138:main] 0 NV_LIBNCCL_DEV_PACKAGE=libnccl-dev=2.13.4-1+cuda11.7
[2023-10-29 11:00:26,197] [INFO] [launch.py:138:main] 0 NCCL_VERSION=2.13.4-1
[2023-10-29 11:00:26,197] [INFO] [launch.py:145:main] WORLD INFO DICT: {'localhost': [0]}
[2023-10-29 11:00:26,197] [INFO] [launch.py:151:main] nnodes=1, num_local_procs=1, node_rank=0
[2023-10-29 11:00:26,197] [INFO] [launch.py:163:main] dist_world_size=1
[2023-10-29 11:00:26,197] [INFO] [launch.py:165:main] Setting CUDA_VISIBLE_DEVICES=0
"""

# https://github.com/kohya-ss/musubi-tuner/issues/168: the launch command, and the dataset TOML
# the user pasted after it; nothing of the trainer's own. Before: "no crash".
COMMAND_THEN_TOML = """\
accelerate launch --num_cpu_threads_per_process 1 --mixed_precision bf16 wan_train_network.py --task t2v-1.3B --dataset_config duffi/settings.toml --sdpa --gradient_checkpointing
[general]
resolution = [720, 480]
caption_extension = ".txt"
batch_size = 1
enable_bucket = true

[[datasets]]
video_directory = "/datasets1/video"
target_frames = [1, 13, 25]
"""


def test_a_log_that_stops_in_the_launcher_or_the_dataset_settings_died_while_loading() -> None:
    for text in (ACCELERATE_THEN_DATASET, DEEPSPEED_LAUNCHER, COMMAND_THEN_TOML):
        result = diagnosed(text)
        assert (result.moment, result.phase, result.confidence) == ("loading", "launch", "low")
        assert "before the model loaded" in result.verdict
        assert result.certainty.startswith("Not sure (low):")


def test_a_launch_line_before_the_trainers_own_lines_does_not_claim_the_moment() -> None:
    """The launcher's lines only set the phase until the trainer's own lines come."""
    result = diagnosed(ACCELERATE_THEN_DATASET + "Loading Flux model\nQuantizing transformer\n")
    assert result.phase == "quantize"


# --- 2. a traceback cut before its error line, in data loading -----------------------------------

# https://github.com/kohya-ss/sd-scripts/issues/86 ("OSError: [WinError 1455] when attempting to
# start the training"): a DataLoader worker on Windows imports train_network.py again through
# runpy. Cut here after the frames, as pastes of it often are. Before: "out of memory is not
# assumed", no moment.
SPAWN_WORKER_CUT = """\
running training / 学習開始
Traceback (most recent call last):
  File "<string>", line 1, in <module>
  File "C:\\Python310\\lib\\multiprocessing\\spawn.py", line 116, in spawn_main
    exitcode = _main(fd, parent_sentinel)
  File "C:\\Python310\\lib\\multiprocessing\\spawn.py", line 125, in _main
    prepare(preparation_data)
  File "C:\\Python310\\lib\\multiprocessing\\spawn.py", line 236, in prepare
    _fixup_main_from_path(data['init_main_from_path'])
  File "C:\\Python310\\lib\\multiprocessing\\spawn.py", line 287, in _fixup_main_from_path
    main_content = runpy.run_path(main_path,
  File "C:\\Python310\\lib\\runpy.py", line 289, in run_path
    return _run_module_code(code, init_globals, run_name,
  File "C:\\Python310\\lib\\runpy.py", line 86, in _run_code
    exec(code, run_globals)
  File "C:\\sd-scripts\\train_network.py", line 1, in <module>
"""

# https://github.com/tkipf/c-swm/issues/10 ("Data Loading Error"): the training loop's batch
# fetch (`DataLoader.__next__` → `fetch`), cut before the worker's error line. Before: "out of
# memory is not assumed", no moment.
FETCH_CUT = """\
steps:   0%|          | 3/2000 [00:21<3:55:10,  7.07s/it, avr_loss=0.112]
Traceback (most recent call last):
  File "/workspace/sd-scripts/train_network.py", line 1012, in <module>
    trainer.train(args)
  File "/workspace/sd-scripts/train_network.py", line 861, in train
    for step, batch in enumerate(train_dataloader):
  File "/usr/lib/python3.10/site-packages/torch/utils/data/dataloader.py", line 633, in __next__
    data = self._next_data()
  File "/usr/lib/python3.10/site-packages/torch/utils/data/dataloader.py", line 1328, in _next_data
    idx, data = self._get_data()
  File "/usr/lib/python3.10/site-packages/torch/utils/data/_utils/fetch.py", line 51, in fetch
"""


def test_a_cut_worker_start_on_windows_is_the_page_file_not_the_card() -> None:
    result = diagnosed(SPAWN_WORKER_CUT)
    assert result.moment == "environment" and result.confidence == "medium"
    assert "page file" in " ".join(result.reasons)
    assert result.advice[0].id == "data_loading"


def test_a_cut_batch_fetch_is_the_hosts_side_said_with_low_confidence() -> None:
    result = diagnosed(FETCH_CUT)
    assert (result.moment, result.confidence) == ("environment", "low")
    assert "data loader" in " ".join(result.reasons)


def test_a_cut_traceback_inside_the_models_forward_is_still_read_as_before() -> None:
    model_cut = FETCH_CUT.replace(
        'File "/usr/lib/python3.10/site-packages/torch/utils/data/dataloader.py", line 633, in '
        "__next__",
        'File "/workspace/sd-scripts/train_network.py", line 967, in process_batch',
    ).split("    data = self._next_data()")[0]
    result = diagnosed(model_cut)
    assert result.moment == "early_steps"


# --- 3. out-of-resources text that is not Python's -----------------------------------------------

# https://github.com/Xpra-org/xpra/issues/2847: Windows' own text for ERROR_NOT_ENOUGH_MEMORY
# ("OSError: [WinError 8] Not enough memory resources are available to process this command."),
# here as a trainer's GUI toolkit shows it in the middle of a run. Before: "The job failed with
# OSError ... not with an out-of-memory error".
WINDOWS_OUT_OF_RESOURCES = """\
steps:   4%|▍         | 88/2000 [04:10<1:30:41,  2.85s/it, avr_loss=0.0871]
Exception in Tkinter callback
Traceback (most recent call last):
  File "C:\\Python310\\lib\\tkinter\\__init__.py", line 1921, in __call__
    return self.func(*args)
OSError: [WinError 8] Not enough memory resources are available to process this command.
"""


def test_windows_out_of_resources_text_is_host_memory() -> None:
    result = diagnosed(WINDOWS_OUT_OF_RESOURCES)
    assert result.moment == "environment" and "host_memory_error" in result.signals
    assert "host_ram" in [a.id for a in result.advice]


# --- 4. a capped process ------------------------------------------------------------------------

# https://github.com/Comfy-Org/ComfyUI/issues/1246: a user capped the process with
# torch.cuda.set_per_process_memory_fraction(0.5) on a 16 GB card to stand in for an 8 GB one.
# Today's PyTorch words the OOM of such a process as "N GiB allowed;" (../shared/gpu-measurements.md
# holds one measured on an H200); the figures are that report's: 8 GiB allowed of 15.99.
# Before: "the card was not full, so it is not the config's memory ... Windows commit limit".
CAPPED = """\
Loading Flux model
steps:   0%|          | 2/2000 [00:09<2:31:10,  4.54s/it, avr_loss=0.31]
Traceback (most recent call last):
  File "/ai-toolkit/jobs/process/BaseSDTrainProcess.py", line 2043, in run
    loss_dict = self.hook_train_loop(batch)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 10.00 MiB. GPU 0 has a total capacity of 15.99 GiB of which 6.61 GiB is free. Including non-PyTorch memory, this process has 8.37 GiB memory in use. 8.00 GiB allowed; Of the allocated memory 7.99 GiB is allocated by PyTorch, and 12.00 MiB is reserved by PyTorch but unallocated.
"""


def test_a_capped_process_ran_out_of_its_allowance_which_is_its_card() -> None:
    result = diagnosed(CAPPED)
    assert result.moment == "early_steps" and result.confidence == "high"
    assert not result.environment_suspected and "host_ram" not in [a.id for a in result.advice]
    assert result.oom is not None and (result.oom.total, result.oom.capacity) == (8.0, 15.99)
    assert any("capped at 8.00 GiB of the 15.99 GiB card" in note for note in result.notes)
    assert result.to_json()["oom"]["total_gib"] == 8.0


# --- 5. CUDA library faults that are not memory ---------------------------------------------------

# https://github.com/bmaltais/kohya_ss/issues/1380 ("LORA Training -> RuntimeError: CUDA error:
# CUBLAS_STATUS_EXECUTION_FAILED"). Before: "The job failed with RuntimeError", no advice.
CUBLAS_FAILED = """\
steps:   1%|          | 21/2000 [01:02<1:38:11,  2.98s/it, loss=0.118]
Traceback (most recent call last):
  File "D:\\kohya_ss\\train_network.py", line 554, in train
    accelerator.backward(loss)
RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx( handle, opa, opb, m, n, k, &falpha, a, CUDA_R_16BF, lda, b, CUDA_R_16BF, ldb, &fbeta, c, CUDA_R_16BF, ldc, CUDA_R_32F, CUBLAS_GEMM_DFALT_TENSOR_OP)`
"""

# https://github.com/cocktailpeanut/fluxgym/issues/289 ("CUDA Illegal Memory Access Error",
# mid-training in a FLUX LoRA's backward pass), in FluxGym's prefixed lines.
ILLEGAL_ACCESS = """\
[2025-01-09 02:45:29] [INFO] steps:  31%|███       | 620/2000 [41:07<1:31:32,  3.98s/it, avr_loss=0.204]
[2025-01-09 02:45:30] [INFO] Traceback (most recent call last):
[2025-01-09 02:45:30] [INFO] File "C:\\pinokio\\api\\fluxgym.git\\sd-scripts\\train_network.py", line 1251, in train
[2025-01-09 02:45:30] [INFO] accelerator.backward(loss)
[2025-01-09 02:45:30] [INFO] torch.AcceleratorError: CUDA error: an illegal memory access was encountered
"""

# https://github.com/pytorch/pytorch/issues/134001 ("SDPA cudnn internal assert failure"; the
# thread's fix is torch.backends.cuda.enable_cudnn_sdp(False)), in a training step.
CUDNN_ATTENTION = """\
steps:   0%|          | 0/2000 [00:00<?, ?it/s]
Traceback (most recent call last):
  File "/ai-toolkit/jobs/process/BaseSDTrainProcess.py", line 2043, in run
    loss_dict = self.hook_train_loop(batch)
RuntimeError: Expected mha_graph.execute(handle, variant_pack, workspace_ptr.get()).is_good() to be true, but got false.  (Could this error message be improved?  If so, please report an enhancement request to PyTorch.)
"""


def test_a_cuda_library_fault_is_its_own_verdict_with_what_to_try() -> None:
    for text in (CUBLAS_FAILED, ILLEGAL_ACCESS, CUDNN_ATTENTION):
        result = diagnosed(text)
        assert result.moment is None and "library_fault" in result.signals, result.verdict
        assert "not an out-of-memory error" in result.verdict
        assert result.advice[0].id == "library_fault"
        assert result.first_change is not None and "enable_cudnn_sdp(False)" in (
            result.first_change
        )
        assert result.confidence == "high"


def test_a_library_fault_after_an_oom_is_still_the_oom() -> None:
    oom = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total "
        "capacity of 23.99 GiB of which 120.00 MiB is free. Including non-PyTorch memory, this "
        "process has 23.80 GiB memory in use. Of the allocated memory 22.90 GiB is allocated by "
        "PyTorch, and 300.00 MiB is reserved by PyTorch but unallocated."
    )
    result = diagnosed(ILLEGAL_ACCESS + oom + "\n")
    assert result.moment == "intermittent"
    assert "library_fault" not in [a.id for a in result.advice]


# --- 6. no step line, only an OOM line -----------------------------------------------------------

# https://github.com/haotian-liu/LLaVA/issues/1152: the trainer's own progress (an unnamed bar
# the wizard cannot place) and PyTorch's message, nothing else. Before: "before step 1, as the log
# shows no training progress bar", said in the app as "The log points to: loading".
OOM_LINE_ONLY = """\
torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 284.00 MiB (GPU 0; 31.75 GiB total capacity; 27.12 GiB already allocated; 99.50 MiB free; 30.44 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.
"""


def test_an_oom_line_alone_cannot_tell_and_says_so() -> None:
    result = diagnosed(OOM_LINE_ONLY)
    assert result.confidence == "low"
    assert result.certainty.startswith("Not sure (low): the log has no phase line")
    assert any("may have been training" in note for note in result.notes)
