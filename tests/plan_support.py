"""Shared helpers of the plan, apply, scale-up and history tests: jobs in memory, the examples,
and ``verify_change.py`` loaded in-process."""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import io
import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from wizard.cli import main
from wizard.document import JobDocument, parse_document
from wizard.paths import FieldPath

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
EXAMPLES = SHARED / "aitk-examples"
VERIFY_CHANGE = SHARED / "checks" / "verify_change.py"
NOWHERE = Path("/nonexistent/oom-wizard-test/job.yaml")

P0: FieldPath = ("config", "process", 0)

# The scale-up order as DESIGN.md states it, quality first and the memory settings last
# (deliberately not read from presets/).
SCALE_UP_ORDER = [
    "validation_run",
    "smaller_bucket",
    "top_bucket",
    "sampling",
    "lora_rank",
    "batch_size",
    "num_frames",
    "optimizer_8bit",
    "layer_offloading",
    "text_encoder",
    "quantize",
    "low_vram",
    "gradient_checkpointing",
]


def job(
    *,
    arch: str | None = "flux",
    train: Mapping[str, Any] | None = None,
    datasets: list[Mapping[str, Any]] | None = None,
    sample: Mapping[str, Any] | None = None,
    model: Mapping[str, Any] | None = None,
    extra_processes: list[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """A small AI Toolkit job tree with one training process."""
    process: dict[str, Any] = {
        "type": "sd_trainer",
        "train": dict(train or {"batch_size": 1, "steps": 2000}),
        "model": {**({"arch": arch} if arch else {}), **(model or {})},
        "datasets": [dict(d) for d in (datasets or [{"resolution": [512, 768, 1024]}])],
    }
    if sample is not None:
        process["sample"] = dict(sample)
    processes = [process, *(copy.deepcopy(p) for p in extra_processes or [])]
    return {"job": "extension", "config": {"name": "t", "process": processes}}


def document(tree: Mapping[str, Any], source: Path = NOWHERE) -> JobDocument:
    """A job document from a tree, as if read from a YAML file at ``source``."""
    text = yaml.safe_dump(dict(tree), sort_keys=False)
    return parse_document(text, source=source, fmt="yaml")


def write_job(path: Path, tree: Mapping[str, Any]) -> Path:
    """Write a job tree as a config file (JSON for a ``.json`` path, else YAML); return the path."""
    if path.suffix == ".json":
        path.write_text(json.dumps(tree, indent=2), encoding="utf-8")
    else:
        path.write_text(yaml.safe_dump(dict(tree), sort_keys=False), encoding="utf-8")
    return path


def examples() -> list[Path]:
    """AI Toolkit's example configs that load (one of them is not valid YAML)."""
    from wizard.document import load_document
    from wizard.errors import ConfigError

    found = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        try:
            load_document(path)
        except ConfigError:
            continue
        found.append(path)
    return found


def differing(original: Path | JobDocument, edited: Path | JobDocument) -> set[str]:
    """The leaf paths whose values differ between two configs, as the toolkit loads them
    (this project's loader; ``verify_change.py`` is the independent check when present)."""
    from wizard.document import load_document, same_value

    def tree(item: Path | JobDocument) -> Any:
        return (load_document(item) if isinstance(item, Path) else item).tree

    flat_a, flat_b = _flatten(tree(original)), _flatten(tree(edited))
    gone = object()
    return {
        path
        for path in flat_a.keys() | flat_b.keys()
        if (a := flat_a.get(path, gone)) is gone
        or (b := flat_b.get(path, gone)) is gone
        or not same_value(a, b)
    }


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Leaf path → value; an empty mapping or list is a leaf of its own."""
    if isinstance(value, dict) and value:
        found: dict[str, Any] = {}
        for key, item in value.items():
            found.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return found
    if isinstance(value, list) and value:
        found = {}
        for index, item in enumerate(value):
            found.update(_flatten(item, f"{prefix}[{index}]"))
        return found
    return {prefix: value}


def verify_if_present(original: Path, edited: Path, changelog: Path | None = None) -> None:
    """The independent check of ``../shared/checks/verify_change.py``, when it is beside the
    checkout (an extra: the tests that call it check the same values themselves)."""
    if not VERIFY_CHANGE.exists():
        return
    verdict, report = verify(original, edited, changelog)
    assert verdict == 0, report


@cache
def verify_change() -> ModuleType:
    """``../shared/checks/verify_change.py`` as a module (run in-process, not per subprocess)."""
    spec = importlib.util.spec_from_file_location("verify_change", VERIFY_CHANGE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def verify(original: Path, edited: Path, changelog: Path | None = None) -> tuple[int, str]:
    """Run verify_change in-process: its exit status and its output."""
    args = [str(original), str(edited)]
    if changelog is not None:
        args += ["--changelog", str(changelog)]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = verify_change().main(args)
    return status, out.getvalue()


def cli(*args: str | Path) -> tuple[int, str, str]:
    """Run ``oom-wizard ARGS`` in-process: status, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main([str(arg) for arg in args])
    return status, out.getvalue(), err.getvalue()
