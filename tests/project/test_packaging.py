"""The installed package: one import name in site-packages, with its data and nothing else.

The repository's fixed top-level folders (``wizard/``, ``screens/``, ``presets/``) install as
one import package, ``oom_wizard`` (``oom_wizard.screens``, ``oom_wizard.presets``), through
setuptools' package-dir mapping. The wheel is built for real and its file list read.
"""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support.once import once_per_run

REPO = Path(__file__).resolve().parents[2]
OLD_NAMES = re.compile(r"^\s*(?:from|import)\s+(?:wizard|screens|presets)\b", re.M)


def build_wheel(folder: Path) -> None:
    """The project's wheel, built into ``folder``."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--quiet",
            "-w",
            str(folder),
            str(REPO),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def names(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, ...]:
    """The file names inside the project's wheel (built once for all the workers)."""
    (wheel,) = once_per_run(tmp_path_factory, "wheel", build_wheel).glob("oom_wizard-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        return tuple(archive.namelist())


def test_the_wheel_adds_one_top_level_name(names: tuple[str, ...]) -> None:
    top = {name.split("/")[0] for name in names}
    assert top == {"oom_wizard", "oom_wizard-0.1.0.dist-info"}


def test_the_wheel_holds_the_app_the_presets_and_the_demo(names: tuple[str, ...]) -> None:
    expected = {
        "oom_wizard/cli.py",
        "oom_wizard/__main__.py",
        "oom_wizard/py.typed",
        "oom_wizard/commands/__init__.py",
        "oom_wizard/screens/app.py",
        "oom_wizard/screens/app.tcss",
        "oom_wizard/presets/ladders.yaml",
        "oom_wizard/presets/archs.yaml",
        "oom_wizard/presets/log_markers.yaml",
        "oom_wizard/presets/demo/flux_portrait_lora.yaml",
        "oom_wizard/presets/demo/wan_dance_lora.log",
    }
    assert expected <= set(names)


def test_development_tools_stay_out_of_the_wheel(names: tuple[str, ...]) -> None:
    assert not [name for name in names if "export_screenshots" in name or "/tests/" in name]
    assert not [name for name in names if name.endswith(".svg")]


def test_no_file_imports_the_folders_by_their_repository_names() -> None:
    """From the repository root ``import wizard`` would still work, and fail once installed."""
    offenders = [
        str(path.relative_to(REPO))
        for folder in ("wizard", "screens", "presets", "tests", "bench")
        for path in (REPO / folder).rglob("*.py")
        if OLD_NAMES.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
