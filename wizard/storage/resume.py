"""Where AI Toolkit's next run of a job starts: the step it resumes from.

AI Toolkit resumes a job from the newest checkpoint in its output folder
(``<training_folder>/<name>/``): ``get_latest_save_path`` takes the newest (by creation time)
of ``<name>*.safetensors`` / ``.pt`` / folders there, leaving out ``_LoRA``, ``_refiner``,
``_t2i`` and ``_cn`` files unless the name has them, and
``load_training_state_from_metadata`` reads the step from the checkpoint's metadata,
``training_info`` (a JSON text) → ``step``, printing ``Found step N in metadata, starting from
there``. ``train.start_step``, when set, wins over the metadata. The loop then runs
``range(step, train.steps)``: a run whose ``train.steps`` is not above the resume step trains
nothing (``jobs/process/BaseSDTrainProcess.py``: ``get_latest_save_path``,
``load_training_state_from_metadata``, the train loop).

A safetensors file starts with an 8-byte little-endian header length and that many bytes of
JSON; its ``__metadata__`` maps names to strings. Nothing here needs torch.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from oom_wizard.formats.document import JobDocument
    from oom_wizard.logs.result import LogScan

MAX_HEADER_BYTES: Final = 100 * 1024 * 1024
"""A safetensors header larger than this is not read (the format's own limit)."""
_FALSE_FRIENDS: Final = ("_LoRA", "_refiner", "_t2i", "_cn")


@dataclass(frozen=True)
class ResumePoint:
    """The step the next run starts from, and what says so.

    Attributes:
        step: The training step (steps already done).
        source: In words: ``training_info.step of checkpoint output/x/x_000000500.safetensors``.
    """

    step: int
    source: str


class NotSafetensors(ValueError):
    """A file that is not a safetensors file as the format writes it."""


def read_header(path: Path) -> tuple[dict[str, Any], int]:
    """A safetensors file's JSON header (an 8-byte little-endian length, then the JSON) and
    where its tensor data starts.

    Raises:
        OSError: the file cannot be read; NotSafetensors: it is not a safetensors file.
    """
    with path.open("rb") as stream:
        head = stream.read(8)
        if len(head) != 8:
            raise NotSafetensors(path)
        (size,) = struct.unpack("<Q", head)
        if size <= 0 or size > MAX_HEADER_BYTES:
            raise NotSafetensors(path)
        try:
            header = json.loads(stream.read(size))
        except ValueError:
            raise NotSafetensors(path) from None
    if not isinstance(header, dict):
        raise NotSafetensors(path)
    return header, 8 + size


def checkpoint_step(path: Path) -> int | None:
    """``training_info.step`` of a safetensors checkpoint's metadata (None: none or unreadable)."""
    try:
        header, _ = read_header(path)
    except (OSError, ValueError):
        return None
    meta = header.get("__metadata__")
    if not isinstance(meta, dict):
        return None
    info = meta.get("training_info")
    if isinstance(info, str):
        try:
            info = json.loads(info)
        except ValueError:
            return None
    step = info.get("step") if isinstance(info, dict) else None
    return step if isinstance(step, int) and not isinstance(step, bool) and step >= 0 else None


def newest_checkpoint(folder: Path, name: str) -> Path | None:
    """The checkpoint AI Toolkit resumes ``name`` from in ``folder`` (module doc)."""
    try:
        paths = [p for p in folder.iterdir() if p.name.startswith(name)]
    except OSError:
        return None
    kept = [
        p
        for p in paths
        if (p.suffix in (".safetensors", ".pt") or p.is_dir())
        and not any(word in p.name and word not in name for word in _FALSE_FRIENDS)
    ]
    if not kept:
        return None

    def created(path: Path) -> float:
        try:
            return os.stat(path).st_ctime
        except OSError:
            return 0.0

    return max(kept, key=created)


def job_folders(document: JobDocument) -> list[Path]:
    """Where the job's output folder may be: ``<training_folder>/<name>`` from the current
    folder (as AI Toolkit resolves it), then from the config's folder, then the config's own
    folder when it is a job folder's config."""
    name = document.get(("config", "name"))
    if not isinstance(name, str) or not name:
        return []
    training = document.get(("config", "process", 0, "training_folder"), "output")
    found: list[Path] = []
    if isinstance(training, str) and training:
        root = Path(training)
        found.append(root / name if root.is_absolute() else Path.cwd() / root / name)
        if not root.is_absolute():
            found.append(document.source.parent / root / name)
    if document.source.parent.name == name:
        found.append(document.source.parent)
    return found


def resume_point(document: JobDocument, scan: LogScan | None = None) -> ResumePoint | None:
    """The step the next run of ``document`` starts from (None: from the start).

    ``train.start_step`` when set; else the newest checkpoint's metadata in the job's output
    folder; else, when that folder is not here, the step the log's last run resumed from.
    """
    start = document.get(("config", "process", 0, "train", "start_step"))
    if isinstance(start, int) and not isinstance(start, bool) and start > 0:
        return ResumePoint(start, "train.start_step")
    name = document.get(("config", "name"))
    folders = [f for f in job_folders(document) if f.is_dir()]
    if folders and isinstance(name, str):
        newest = newest_checkpoint(folders[0], name)
        if newest is None:
            return None
        step = checkpoint_step(newest) if newest.suffix == ".safetensors" else None
        if step is None or step <= 0:
            return None
        return ResumePoint(step, f"training_info.step of checkpoint {newest}")
    if scan is not None and scan.resumed and scan.first_step:
        return ResumePoint(scan.first_step, "the log (the last run resumed there)")
    return None
