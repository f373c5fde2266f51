"""A crash the allocator's own figures call a one-off: fragmented, or the only OOM with most of
the card free (``rules.oneoff``), read from the log as AI Toolkit prints it."""

from __future__ import annotations

from oom_wizard.logs.scan import scan_text
from oom_wizard.rules.oneoff import one_off_oom, with_expandable_segments
from tests.support.fake_trainer import fragmented_message, message

HEAD = "Running 1 job\n# Running job: portrait\nLoading Flux model\n"
BAR = "portrait:   0%|          | 0/3000 [00:00<?, ?it/s]\r"


def crash(text: str, before: str = "") -> str:
    return (
        f"{HEAD}{before}{BAR}\nError running job: {text}\n"
        "Traceback (most recent call last):\n"
        '  File "/opt/ai-toolkit/jobs/process/BaseSDTrainProcess.py", line 2130, in run\n'
        "    hook_train_loop()\n"
        f"torch.OutOfMemoryError: {text}\n"
    )


def test_a_fragmented_crash_is_a_one_off_and_says_its_figures() -> None:
    found = one_off_oom(scan_text(crash(fragmented_message(24.0))))
    assert found is not None
    assert "6.00 GiB reserved but unallocated" in found
    assert "2.00 GiB allocation" in found


def test_a_card_filled_by_the_config_is_not_one() -> None:
    # 312 MiB unallocated and 20 MiB free: the config outgrew the card.
    assert one_off_oom(scan_text(crash(message(40.0, 24.0, 0.0)))) is None


def test_the_only_oom_with_most_of_the_card_free_is_one_but_not_after_skipped_batches() -> None:
    text = (
        "CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 23.65 "
        "GiB of which 14.00 GiB is free. Including non-PyTorch memory, this process has 9.50 "
        "GiB memory in use. Of the allocated memory 9.00 GiB is allocated by PyTorch, and "
        "100.00 MiB is reserved by PyTorch but unallocated."
    )
    found = one_off_oom(scan_text(crash(text)))
    assert found is not None and "14.00 GiB of 23.65 GiB free" in found
    skipped = (
        "################################################\n"
        "# OOM during training step, skipping batch 1/3 #\n"
        "################################################\n"
    )
    assert one_off_oom(scan_text(crash(text, before=BAR + "\n" + skipped))) is None


def test_the_setting_joins_what_the_environment_has_and_is_not_given_twice() -> None:
    expandable = "expandable_segments:True"
    assert with_expandable_segments({}) == {"PYTORCH_CUDA_ALLOC_CONF": expandable}
    assert with_expandable_segments({"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:512"}) == {
        "PYTORCH_CUDA_ALLOC_CONF": f"max_split_size_mb:512,{expandable}"
    }
    assert with_expandable_segments({"PYTORCH_CUDA_ALLOC_CONF": expandable}) is None
