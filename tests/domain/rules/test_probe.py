"""Tests of the GPU probe against a fake ``nvidia-smi`` put first on PATH."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from oom_wizard.host.probe import parse_gpus, parse_processes, probe_gpu, read_host_memory

MEMINFO = """MemTotal:       65536000 kB
MemFree:         1000000 kB
MemAvailable:   16384000 kB
"""


def fake_nvidia_smi(
    folder: Path, gpus: str, apps: str, *, status: int = 0, sleep: float = 0
) -> None:
    """Write an ``nvidia-smi`` that answers the two queries the probe makes."""
    script = folder / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        f"sleep {sleep}\n"
        'case "$1" in\n'
        f"  --query-gpu=*) printf '%s' '{gpus}' ;;\n"
        f"  --query-compute-apps=*) printf '%s' '{apps}' ;;\n"
        "esac\n"
        f"exit {status}\n",
        encoding="utf-8",
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    return folder


@pytest.fixture
def meminfo(tmp_path: Path) -> Path:
    path = tmp_path / "meminfo"
    path.write_text(MEMINFO, encoding="ascii")
    return path


def test_probe_reads_cards_processes_and_host_memory(bin_dir: Path, meminfo: Path) -> None:
    fake_nvidia_smi(
        bin_dir,
        "0, NVIDIA GeForce RTX 4090, 24564, 20480, 4084\n",
        "4242, /usr/bin/python3, 18432\n999, comfy, ui, main.py, 2048\n",
    )
    result = probe_gpu(meminfo=meminfo)
    assert result is not None
    gpu = result.gpus[0]
    assert (gpu.index, gpu.name, gpu.total_gib, gpu.used_gib) == (
        0,
        "NVIDIA GeForce RTX 4090",
        24564 / 1024,
        20.0,
    )
    assert [(p.pid, p.name, p.used_gib) for p in result.processes] == [
        (4242, "/usr/bin/python3", 18.0),
        (999, "comfy, ui, main.py", 2.0),
    ]
    assert result.processes_gib == 20.0
    assert (result.host_total_gib, result.host_available_gib) == (62.5, 15.625)


def test_wddm_hides_per_process_memory(bin_dir: Path, meminfo: Path) -> None:
    fake_nvidia_smi(bin_dir, "0, RTX 3060, 12288, 11000, 1288\n", "1234, python.exe, [N/A]\n")
    result = probe_gpu(meminfo=meminfo)
    assert result is not None
    assert result.processes[0].used_gib is None and result.processes_gib == 0


def test_no_nvidia_smi_means_no_probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert probe_gpu() is None


def test_a_failing_nvidia_smi_means_no_probe(bin_dir: Path) -> None:
    fake_nvidia_smi(bin_dir, "NVIDIA-SMI has failed because it couldn't communicate", "", status=9)
    assert probe_gpu() is None


def test_a_hanging_nvidia_smi_times_out(bin_dir: Path) -> None:
    fake_nvidia_smi(bin_dir, "0, X, 1, 1, 0\n", "", sleep=5)
    assert probe_gpu(timeout=0.2) is None


def test_garbage_rows_are_skipped() -> None:
    assert parse_gpus("No devices were found\n\n") == ()
    assert parse_processes("No running processes found\n") == ()


def test_host_memory_without_meminfo_is_the_page_counts_total_else_unknown(
    tmp_path: Path,
) -> None:
    pages = {"SC_PHYS_PAGES": 2 * 1024 * 1024, "SC_PAGE_SIZE": 4096}
    assert read_host_memory(tmp_path / "absent", pages=pages.__getitem__) == (8.0, None)

    def refused(name: str) -> int:
        raise ValueError(name)

    assert read_host_memory(tmp_path / "absent", pages=refused) == (None, None)
