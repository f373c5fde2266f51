"""Shared helpers of the plan, apply, scale-up and history tests: jobs in memory, the example
configs, and the project's exactness check run in-process."""

from __future__ import annotations

import contextlib
import copy
import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from oom_wizard.cli import main
from oom_wizard.formats.document import JobDocument, parse_document
from oom_wizard.paths import FieldPath
from tests.support import exactness
from tests.support.corpus import own_configs, shared_examples

NOWHERE = Path("/nonexistent/oom-wizard-test/job.yaml")

P0: FieldPath = ("config", "process", 0)

# The scale-up order as DESIGN.md states it, quality first and the memory settings last
# (deliberately not read from presets/).
SCALE_UP_ORDER = [
    "validation_run",
    "smaller_bucket",
    "top_bucket",
    "sampling",
    "extra_passes",
    "control_images",
    "lora_rank",
    "batch_size",
    "num_frames",
    "optimizer_8bit",
    "placement",
    "layer_offloading",
    "text_encoder",
    "quantize",
    "low_vram",
    "gradient_checkpointing",
    "attention",
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
    """Example configs that load: the project's own, then AI Toolkit's from ``../shared``
    when it is there."""
    return [*own_configs(), *toolkit_examples()]


def toolkit_examples() -> list[Path]:
    """AI Toolkit's example configs from ``../shared`` that load (one of them is not valid
    YAML, and is left out); empty when ``../shared`` is not there."""
    from oom_wizard.errors import ConfigError
    from oom_wizard.formats.document import load_document

    found = []
    for path in shared_examples():
        try:
            load_document(path)
        except ConfigError:
            continue
        found.append(path)
    return found


def differing(original: Path | JobDocument, edited: Path | JobDocument) -> set[str]:
    """The leaf paths whose values differ between two configs, as AI Toolkit loads them; a
    list's items are leaves of their own (``resolution[2]``)."""

    def tree(item: Path | JobDocument) -> Any:
        return exactness.load_tree(item) if isinstance(item, Path) else item.tree

    flat_a, flat_b = _flatten(tree(original)), _flatten(tree(edited))
    gone = object()
    return {
        path
        for path in flat_a.keys() | flat_b.keys()
        if not exactness.equal(flat_a.get(path, gone), flat_b.get(path, gone))
    }


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Leaf path → value; an empty mapping or list is a leaf of its own."""
    found: dict[str, Any] = {}
    if isinstance(value, dict) and value:
        for key, item in value.items():
            found.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(value, list) and value:
        for index, item in enumerate(value):
            found.update(_flatten(item, f"{prefix}[{index}]"))
    else:
        found[prefix] = value
    return found


def assert_exact(original: Path, edited: Path, changelog: Path | None = None) -> None:
    """The saved config is exactly the source plus the logged changes
    (``tests/support/exactness.py``)."""
    verdict = exactness.check(original, edited, changelog)
    assert verdict.ok, verdict.problems


def verify(original: Path, edited: Path, changelog: Path | None = None) -> tuple[int, str]:
    """The project's exactness check (``tests/support/exactness.py``): 0 and its verdict when exact,
    1 and the problems when not."""
    verdict = exactness.check(original, edited, changelog)
    return (0 if verdict.ok else 1), "\n".join([*verdict.problems, verdict.line()])


#: ``apply``'s exit statuses when it saved: the saved config fits (or no card is known), is
#: tight, or is predicted not to fit (README: the exit statuses).
APPLY_SAVED = (0, 3, 4)


def cli(*args: str | Path) -> tuple[int, str, str]:
    """Run ``oom-wizard ARGS`` in-process: status, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main([str(arg) for arg in args])
    return status, out.getvalue(), err.getvalue()
