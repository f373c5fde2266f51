"""The log classes of trainers other than AI Toolkit (issue 22), each on real lines of real reports.

Every test quotes lines as a report posted them (its address is in the test) and checks the rule
that reads that class of line: bars that are not AI Toolkit's, the step given outside a bar,
tracebacks cut before their error line, the launch command as the log, multi-process prefixes,
kills with no marker, and a slowdown from the first steps.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from oom_wizard.errors import PresetError
from oom_wizard.formats.view import JobView, build_view
from oom_wizard.host.probe import GpuInfo, ProbeResult
from oom_wizard.logs.bars import parse_bar
from oom_wizard.logs.markers import load_log_markers
from oom_wizard.logs.scan import scan_text
from oom_wizard.rules.diagnosis import diagnose

BASE: dict[str, Any] = {
    "job": "extension",
    "config": {
        "name": "cousin",
        "process": [
            {
                "type": "diffusion_trainer",
                "network": {"type": "lora", "linear": 16, "linear_alpha": 16},
                "train": {"batch_size": 1, "steps": 3000, "gradient_checkpointing": True},
                "model": {
                    "arch": "sdxl",
                    "name_or_path": "stabilityai/stable-diffusion-xl-base-1.0",
                },
                "datasets": [{"folder_path": "/d", "resolution": [1024]}],
                "sample": {"width": 1024, "height": 1024, "sample_every": 250},
            }
        ],
    },
}


def view(**train: Any) -> JobView:
    tree = copy.deepcopy(BASE)
    tree["config"]["process"][0]["train"].update(train)
    return build_view(tree, file="job.yaml", locate=lambda path: None)


BAR_STEPS = load_log_markers().compiled().bar_steps


# --- 1. progress that is not AI Toolkit's bar ---------------------------------------------------


def test_everydream2s_epochs_bar_gives_the_global_step_and_an_oom_before_it_is_at_that_step() -> (
    None
):
    # https://github.com/victorchall/EveryDream2trainer/issues/3: the error, then the bars.
    log = (
        "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 12.00 GiB total "
        "capacity; 11.26 GiB already allocated; 0 bytes free; 11.28 GiB reserved in total by "
        "PyTorch)\n"
        "Epochs:   0%|          | 0/10 [00:56<?, ?it/s, vram=4867/12288 MB gs:0]\n"
        "Steps:   1%|█▎\n"
    )
    scan = scan_text(log)
    assert scan.training_started and scan.crashed
    assert scan.last_step == 0 and scan.total_steps is None  # 10 is epochs, not steps
    assert diagnose(scan, view()).moment == "early_steps"


def test_a_bar_step_postfix_is_the_step_and_the_bar_total_is_not_the_runs() -> None:
    # https://github.com/hpcaitech/ColossalAI/issues/2398 (Lightning, Stable Diffusion v2).
    line = (
        "Epoch 1: 100%|█| 163/163 [18:20<00:00,  6.75s/it, loss=0.98, v_num=0, "
        "train/loss_simple_step=0.976, train/loss_vlb_step=0.00521, train/loss_step=0.975, "
        "global_step=325.0, lr_abs=1.6e-7, tr"
    )
    bar = parse_bar(line, BAR_STEPS)
    assert bar is not None and (bar.n, bar.total) == (325, None)
    assert parse_bar(line) is not None and parse_bar(line).n == 163  # type: ignore[union-attr]


def test_lightnings_epoch_bar_counts_the_epochs_batches() -> None:
    # https://github.com/UCSB-NLP-Chang/DiffSTE/issues/17 (epoch 0) and
    # https://github.com/Mikubill/naifu/issues/12 (an epoch at its total is not the run's end).
    bar = parse_bar(
        "Epoch 0:   0%|          | 3/14290 [00:11<14:55:59,  3.76s/it, loss=0.28, v_num=0]",
        BAR_STEPS,
    )
    assert bar is not None and (bar.n, bar.total) == (3, None)
    bar = parse_bar("Epoch 2:  50%|█████     | 10/20 [00:11<00:11,  1.00s/it]", BAR_STEPS)
    assert bar is not None and bar.n == 2 * 20 + 10
    scan = scan_text("Epoch 0: 100% 575/575 [31:47<00:00,  3.32s/it, loss=0.263]\n")
    assert scan.training_started and scan.last_step == 575 and not scan.finished


def test_diffusers_steps_bar_before_a_traceback_is_the_training_step() -> None:
    # https://github.com/huggingface/diffusers/pull/2002 (train_text_to_image_lora.py).
    log = (
        "Steps:   0%|          | 1/83300 [00:08<204:55:05,  8.86s/it, lr=0.0001, step_loss=0.209]"
        "Traceback (most recent call last):\n"
        '  File "./train_text_to_image_lora.py", line 891, in <module>\n'
        "    main()\n"
        '  File "./train_text_to_image_lora.py", line 819, in main\n'
        "    accelerator.backward(loss)\n"
    )
    scan = scan_text(log)
    assert scan.crashed and scan.training_started and scan.last_step == 1
    assert scan.phase == "training"


# --- 2. the step from other places ---------------------------------------------------------------


def test_a_deepspeed_state_folder_gives_the_step_of_the_save() -> None:
    # https://github.com/kohya-ss/sd-scripts/issues/1247 (DeepSpeed's logger prefix stripped).
    log = (
        "[2024-04-09 15:39:37,942] [INFO] [logging.py:96:log_dist] [Rank 0] Saving model "
        "checkpoint: ./training/model/temp/test-step00000001-state/pytorch_model/"
        "mp_rank_00_model_states.pt\n"
    )
    scan = scan_text(log)
    assert scan.phase == "save" and scan.last_step == 1


def test_a_checkpoint_folder_gives_the_step_of_the_save() -> None:
    # https://github.com/huggingface/transformers/issues/21482: the bar, then the save on its line.
    log = (
        "  0%|▎          | 500/224238 [51:15<381:53:08,  6.14s/it][INFO|trainer.py:2753] "
        "2023-02-06 16:37:12,461 >> Saving model checkpoint to bennyD/checkpoint-500\n"
    )
    scan = scan_text(log)
    assert scan.phase == "save" and scan.last_step == 500


def test_an_epoch_numbered_save_is_not_a_step() -> None:
    # https://github.com/bmaltais/kohya_ss/issues/2303: `-000001` counts epochs.
    log = (
        "steps:  10%|█▏         | 195/1950 [31:37<4:44:34,  9.73s/it, avr_loss=0.126]\n"
        "saving checkpoint: K:/AI/Training/Dataset/testwoman_v1/model\\"
        "testwoman_v1-000001.safetensors\n"
    )
    scan = scan_text(log)
    assert scan.phase == "save" and scan.last_step == 195


def test_deepspeeds_global_step_folder_gives_the_step() -> None:
    # https://github.com/hiyouga/LlamaFactory/issues/8053 (a save, then the process stops).
    log = (
        "[2025-05-14 14:25:51,391] [INFO] [engine.py:3536:_save_zero_checkpoint] zero checkpoint "
        "saved /home/master/work/saves/checkpoint-200/global_step200/"
        "bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt\n"
    )
    assert scan_text(log).last_step == 200


# --- 3. tracebacks cut before their error line, or frames only -----------------------------------


def test_frames_only_are_a_crash_and_the_step_function_names_training() -> None:
    # https://github.com/victorchall/EveryDream2trainer/issues/91 (the paste ends in the VAE).
    log = (
        "Traceback (most recent call last):\n"
        '  File "D:\\download\\AI\\EveryDream2trainer\\train.py", line 854, in main\n'
        '    model_pred, target = get_model_prediction_and_target(batch["image"], batch["tokens"], '
        "args.zero_frequency_noise_ratio)\n"
        '  File "D:\\download\\AI\\EveryDream2trainer\\train.py", line 779, in '
        "get_model_prediction_and_target\n"
        "    latents = vae.encode(pixel_values, return_dict=False)\n"
    )
    scan = scan_text(log)
    assert scan.crashed and scan.frame_phase == "training"
    assert diagnose(scan, view()).moment == "early_steps"


def test_a_traceback_with_no_header_is_still_a_crash() -> None:
    # https://github.com/tdrussell/diffusion-pipe/issues/32: rank-prefixed frames, no error line.
    log = (
        '[rank0]:   File "/home/tyler/Documents/AI/diffusion-pipe/models/hunyuan_video.py", '
        "line 592, in forward\n"
        "[rank0]:     x = self.block(x, vec, txt_seq_len.item(), cu_seqlens, cu_seqlens, "
        "max_seqlen.item(), max_seqlen.item(), (freqs_cos, freqs_sin))\n"
    )
    scan = scan_text(log)
    assert scan.crashed, "an unfinished traceback is a crash"
    assert scan.frame_phase == "training"  # diffusion-pipe never samples while training


def test_the_line_that_computes_the_loss_is_the_training_step() -> None:
    # https://github.com/Stability-AI/StableCascade/issues/53
    log = (
        "Traceback (most recent call last):\n"
        '  File "/workspace/StableCascade/./train/base.py", line 254, in train\n'
        "    loss, loss_adjusted = self.forward_pass(data, extras, models)\n"
    )
    assert scan_text(log).frame_phase == "training"


def test_an_image_logger_is_a_sample_and_a_log_opening_in_its_frames_is_an_excerpt() -> None:
    # https://github.com/lllyasviel/ControlNet/issues/294: out of memory in image logging.
    log = (
        '  File "/home/ubuntu/ControlNet/cldm/cldm.py", line 397, in log_images\n'
        '    samples_cfg, _ = self.sample_log(cond={"c_concat": [c_cat], "c_crossattn": [c]},\n'
        '  File "/home/ubuntu/ControlNet/cldm/cldm.py", line 413, in sample_log\n'
    )
    scan = scan_text(log)
    assert scan.crashed and scan.phase == "periodic_sample"
    headed = scan_text("Traceback (most recent call last):\n" + log)
    assert headed.phase == "baseline_sample"  # the whole traceback, before any bar: the first


def test_dreambooth_extensions_batch_search_wraps_the_training_loop() -> None:
    # https://github.com/d8ahazard/sd_dreambooth_extension/issues/1457
    log = (
        "Traceback (most recent call last):\n"
        '  File "G:\\AI\\SDNEW\\stable-diffusion-webui\\extensions\\sd_dreambooth_extension\\'
        'dreambooth\\memory.py", line 126, in decorator\n'
        "    return function(batch_size, grad_size, prof, *args, **kwargs)\n"
    )
    assert scan_text(log).frame_phase == "training"


def test_a_traceback_cut_at_its_first_word_is_a_crash() -> None:
    # https://github.com/d8ahazard/sd_dreambooth_extension/issues/491: class images, then cut.
    log = "Concept requires 430 images.\n  0%|          | 0/430 [00:00<?, ?it/s]Traceback\n"
    scan = scan_text(log)
    assert scan.crashed and scan.phase == "baseline_sample"


# --- 4. the launch command as the log ------------------------------------------------------------


def test_a_command_that_samples_first_puts_a_bare_failure_in_that_sample() -> None:
    # https://github.com/kohya-ss/musubi-tuner/issues/317: the command, then an out of memory.
    log = (
        "accelerate launch --num_cpu_threads_per_process 1 --mixed_precision bf16 "
        "E:\\Musubi\\musubi\\musubi-tuner\\hv_train_network.py --sdpa --mixed_precision bf16 "
        "--fp8_base --optimizer_type adamw8bit --learning_rate 1e-3 --gradient_checkpointing "
        "--sample_prompts E:\\Musubi\\prompts.txt --sample_every_n_steps 1 --sample_at_first\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    )
    scan = scan_text(log)
    assert scan.sample_first and scan.phase == "baseline_sample"
    assert diagnose(scan, view()).moment == "loading"
    plain = scan_text(log.replace(" --sample_every_n_steps 1 --sample_at_first", ""))
    assert not plain.sample_first and plain.phase == "launch"  # the command, then nothing known


def test_a_command_that_samples_first_yields_to_a_bar() -> None:
    # The same command with the training bar after it: the bar, not the command, says where.
    log = (
        "accelerate launch hv_train_network.py --sample_every_n_steps 1 --sample_at_first\n"
        "steps:   0%|          | 1/3000 [00:05<4:10:00,  5.00s/it, avr_loss=0.1]\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    )
    assert scan_text(log).phase == "training"


# --- 5. multi-process prefixes -------------------------------------------------------------------


def test_torchrun_and_cpp_prefixes_are_stripped() -> None:
    # https://github.com/bghira/SimpleTuner/issues/3176 (c10's prefix) and
    # https://github.com/Francis-Rings/StableAvatar/issues/57 (torch.distributed.elastic's).
    scan = scan_text(
        "[W831 10:32:25.255074645 CUDACachingAllocator.cpp:508] expandable_segments: memory "
        "mapping failed with OOM on device 0 while trying to map 20971520 bytes (free: 15663104, "
        "total: 33671348224).\n"
    )
    assert scan.has("cuda_oom")
    scan = scan_text(
        "E0908 17:08:08.400000 3889263 site-packages/torch/distributed/elastic/multiprocessing/"
        "api.py:874] failed (exitcode: -9) local_rank: 0 (pid: 3889427) of binary: python\n"
    )
    assert scan.has("host_oom_kill") and scan.crashed
    scan = scan_text(
        "[default0]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB.\n"
    )
    assert scan.has("cuda_oom") and scan.exception is not None


def test_a_guis_line_counter_and_timestamp_are_stripped() -> None:
    # https://github.com/n00mkrad/text2image-gui/issues/65
    scan = scan_text(
        "[00000599] [01-24-2023 23:20:26]     pickler.dump(obj)\n"
        "[00000600] [01-24-2023 23:20:26] MemoryError\n"
    )
    assert scan.has("host_memory_error") and scan.crashed
    assert diagnose(scan, view()).moment == "environment"


# --- 6. kills with no marker ---------------------------------------------------------------------


COLAB_SAVE = (
    "load StableDiffusion checkpoint: /content/pretrained_model/sd_xl_base_1.0.safetensors\n"
    "steps:  10%|█▏         | 195/1950 [31:37<4:44:34,  9.73s/it, avr_loss=0.126]\n"
    "saving checkpoint: /content/LoRA/output/testwoman_v1-000001.safetensors\n"
)
"""A Colab run that ends on a save line: the lines of kohya_ss #2303 in a Colab runtime's folders
(https://github.com/bmaltais/kohya_ss/issues/2303, https://github.com/camenduru/kohya_ss-colab/issues/3)."""


def test_a_log_that_ends_on_a_save_in_a_colab_runtime_is_host_ram_with_the_step() -> None:
    scan = scan_text(COLAB_SAVE)
    assert scan.ends_open and scan.phase == "save" and scan.host_pressure_line == 3
    result = diagnose(scan, view())
    assert result.moment == "environment"
    assert any("checkpoint save at step 195" in r and "/content/" in r for r in result.reasons)
    local = scan_text(COLAB_SAVE.replace("/content/", "K:/AI/"))
    assert diagnose(local, view()).moment != "environment"  # no sign of the host: no verdict


def test_a_log_that_ends_on_the_hosts_huge_allocations_is_host_ram() -> None:
    # https://github.com/Mikubill/naifu/issues/12 (Colab; the lines stop after these).
    log = (
        "Epoch 0: 100% 575/575 [31:47<00:00,  3.32s/it, loss=0.263]tcmalloc: large alloc "
        "1134575616 bytes == 0x17a8de000 @  0x7efc50b2d615 0x5d6f4c\n"
        "tcmalloc: large alloc 1418223616 bytes == 0x2be0a000 @  0x7efc50b2d615 0x5d6f4c\n"
    )
    scan = scan_text(log)
    assert scan.ends_open and scan.host_pressure_line == 2
    assert diagnose(scan, view()).moment == "environment"


def test_a_launcher_error_with_no_trainer_error_is_a_silent_death() -> None:
    # https://github.com/camenduru/kohya_ss-colab/issues/3 (the stored copy is cut there).
    log = (
        "load StableDiffusion checkpoint: /content/sdxl_base.safetensors\n"
        "building text encoders\n"
        "Traceback (most recent call last):\n"
        '  File "/usr/local/lib/python3.10/dist-packages/accelerate/commands/launch.py", '
        "line 628, in simple_launcher\n"
        "    raise subprocess.CalledProcessError(returncode=process.returncode, cmd=cmd)\n"
        "subprocess.CalledProcessError: Command died wi\n"
    )
    scan = scan_text(log)
    assert scan.crashed and scan.has("silent_exit")
    assert diagnose(scan, view()).moment == "environment"


def test_a_launcher_error_after_the_trainers_own_error_is_that_error() -> None:
    # https://github.com/bmaltais/kohya_ss/issues/3300: the OOM, then accelerate's traceback.
    log = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 14.00 MiB. GPU 0 has a "
        "total capacity of 39.56 GiB of which 896.00 KiB is free.\n"
        "Traceback (most recent call last):\n"
        '  File "/content/kohya_ss/.venv/lib/python3.11/site-packages/accelerate/commands/'
        'launch.py", line 785, in simple_launcher\n'
        "subprocess.CalledProcessError: Command '['python', 'sdxl_train.py']' returned non-zero "
        "exit status 1.\n"
    )
    scan = scan_text(log)
    assert scan.has("cuda_oom") and not scan.has("silent_exit")
    assert diagnose(scan, view()).moment != "environment"


# --- the table ------------------------------------------------------------------------------------


def test_a_bar_step_rule_without_its_group_is_refused_where_it_is_written(tmp_path: Path) -> None:
    shipped = (Path(__file__).resolve().parents[3] / "presets" / "log_markers.yaml").read_text(
        encoding="utf-8"
    )
    broken = shipped.replace(r"'\bgs:\s*(?P<step>\d+)'", r"'\bgs:\s*\d+'")
    assert broken != shipped
    path = tmp_path / "log_markers.yaml"
    path.write_text(broken, encoding="utf-8")
    with pytest.raises(
        PresetError, match=r"log_markers\.yaml:\d+:\d+: .*`step` or an `epoch` group"
    ):
        load_log_markers(path)


def test_a_colab_log_that_ends_while_the_model_loads_is_host_ram() -> None:
    # https://github.com/bmaltais/kohya_ss/issues/1398 (free Colab, SDXL: SIGKILL while loading).
    log = (
        "/content/data/30_elsin/caricaturin (1).png\n"
        "30 train images with repeating.\n"
        "loading image sizes.\n"
        "100% 1/1 [00:00<00:00, 211.78it/s]\n"
        "make buckets\n"
    )
    scan = scan_text(log)
    assert scan.ends_open and scan.phase == "model_load"
    assert diagnose(scan, view()).moment == "environment"
    elsewhere = scan_text(log.replace("/content/", "/home/me/"))
    assert diagnose(elsewhere, view()).moment == "loading"


def test_a_training_bar_drawn_without_its_count_is_training_at_its_start() -> None:
    # https://github.com/JoePenna/Dreambooth-Stable-Diffusion/issues/194: the paste stops there.
    log = (
        "Sanity Checking: 0it [00:00, ?it/s]\n"
        "Epoch 0:   0%|                                                              |\n"
    )
    scan = scan_text(log)
    assert scan.training_started and scan.last_step is None and scan.ends_open
    assert diagnose(scan, view()).moment == "early_steps"
    # EveryDream2 #3: a cut `Steps` bar after the `Epochs` bar keeps the step that one showed.
    scan = scan_text(
        "Epochs:   0%|  | 0/10 [00:56<?, ?it/s, vram=4867/12288 MB gs:7]\nSteps:   1%|█▎\n"
    )
    assert scan.training_started and scan.last_step == 7


# --- 7. a slowdown from the first steps ----------------------------------------------------------


def _crawl(rate: float, steps: int = 40) -> str:
    """sd-scripts' training bar at ``rate`` s/it from its first step to ``steps``, then nothing."""
    lines = ["steps:   0%|          | 0/1000 [00:00<?, ?it/s]"]
    for n in range(1, steps + 1):
        elapsed = int(n * rate)
        lines.append(
            f"steps:   {n * 100 // 1000}%|          | {n}/1000 "
            f"[{elapsed // 60:02d}:{elapsed % 60:02d}<10:00:00, {rate:.2f}s/it, avr_loss=0.1]"
        )
    return "\n".join(lines) + "\n"


def _card(used: float, total: float = 31.5) -> ProbeResult:
    return ProbeResult(
        gpus=(
            GpuInfo(
                index=0,
                name="NVIDIA GeForce RTX 5090",
                total_gib=total,
                used_gib=used,
                free_gib=total - used,
            ),
        ),
        processes=(),
    )


def test_a_crawl_from_the_first_step_on_a_full_card_is_a_first_steps_problem() -> None:
    # https://github.com/bmaltais/kohya_ss/issues/3296: SDXL LoRA on a 5090 at about 39 s/it from
    # the start, VRAM 31.2 / 31.5 GB (the report's figures, in sd-scripts' bar shape).
    scan = scan_text(_crawl(39.0))
    assert scan.ends_open and scan.spill_step is None and scan.best_rate == 39.0
    assert diagnose(scan, view()).moment == "intermittent"  # without the card: 40 steps made
    result = diagnose(scan, view(), probe=_card(31.2))
    assert result.moment == "early_steps", result.verdict
    assert "sysmem_spill" in result.signals
    assert any(a.id == "sysmem_fallback" for a in result.advice)
    assert "from step 1" in result.verdict


def test_a_fast_bar_or_a_card_with_room_is_no_crawl_from_the_start() -> None:
    assert diagnose(scan_text(_crawl(1.6)), view(), probe=_card(31.2)).moment == "intermittent"
    assert diagnose(scan_text(_crawl(39.0)), view(), probe=_card(20.0)).moment == "intermittent"


def test_the_running_training_banner_starts_training_at_step_0() -> None:
    # https://github.com/d8ahazard/sd_dreambooth_extension/issues/1182 (the stored copy is cut).
    log = (
        "Processing images...: 100%|██████████| 12/12 [00:00<00:00, 12020.93it/s]\n"
        "Total dataset length (steps): 12\n"
        "  ***** Running training *****\n"
        "  Num batches each epoch = 12\n"
        "  Total optimization s\n"
    )
    scan = scan_text(log)
    assert scan.phase == "training" and scan.last_step == 0 and not scan.finished
    assert diagnose(scan, view()).moment == "early_steps"


def test_lightnings_training_batch_is_the_training_step() -> None:
    # https://github.com/AMAP-ML/FluxText/issues/25 (frames only, rank-prefixed).
    log = (
        '[rank4]:   File "/home/kas/.conda/envs/flux_text/lib/python3.10/site-packages/lightning/'
        'pytorch/loops/training_epoch_loop.py", line 250, in advance\n'
        "[rank4]:     batch_output = self.automatic_optimization.run(trainer.optimizers[0], "
        "batch_idx, kwargs)\n"
    )
    scan = scan_text(log)
    assert scan.crashed and scan.frame_phase == "training"


def test_an_evaluation_call_handed_the_global_step_is_a_sample_during_training() -> None:
    # https://github.com/TEXTurePaper/TEXTurePaper/issues/41: eval_pipeline runs in the loop.
    log = (
        "  0% 0/50 [00:00<?, ?it/s]\n"
        "Traceback (most recent call last):\n"
        '  File "/content/TEXTurePaper/scripts/finetune_diffusion.py", line 894, in main\n'
        "    eval_pipeline(pipeline, args.eval_path, args.instance_prompt, global_step, "
        "vis_save_dir,\n"
        '  File "/content/TEXTurePaper/scripts/finetune_diffusion.py", line 324, in '
        "call_pipeline_without_image\n"
        "    noise_pred = self.unet(latent_model_input, t, encoder_hidden_states=text_embeddings)"
        ".sample\n"
    )
    scan = scan_text(log)
    assert scan.frame_phase == "periodic_sample"
    assert diagnose(scan, view()).moment == "sampling"
    # kohya's baseline call hands the global step too, with epoch 0: that one comes first.
    baseline = log.replace(
        "eval_pipeline(pipeline, args.eval_path, args.instance_prompt, global_step, vis_save_dir,",
        "sample_images(accelerator, args, 0, global_step, accelerator.device, vae, tokenizer,",
    )
    assert scan_text(baseline).frame_phase == "baseline_sample"


def test_a_launcher_error_with_exit_status_1_is_an_error_not_pasted() -> None:
    # The launcher of https://github.com/bmaltais/kohya_ss/issues/3300 alone: status 1 means the
    # trainer raised a Python error of its own, in the part of the log that was not pasted.
    log = (
        "subprocess.CalledProcessError: Command '['/content/kohya_ss/.venv/bin/python', "
        "'/content/kohya_ss/sd-scripts/sdxl_train.py']' returned non-zero exit status 1.\n"
    )
    scan = scan_text(log)
    assert scan.crashed and not scan.has("silent_exit") and scan.exception is not None
    native = log.replace("exit status 1.", "exit status 3221225477.")
    assert scan_text(native).has("silent_exit")
