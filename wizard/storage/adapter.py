"""Whether the adapter AI Toolkit saved moved from its start: a fix that trains nothing is no fix.

AI Toolkit saves the job's adapter as ``<training_folder>/<name>/<name>.safetensors`` at the end
of a run and as ``<name>_<9-digit step>.safetensors`` at each periodic save (``save_every``).
A safetensors file is an 8-byte little-endian header length, a JSON header naming each tensor's
``dtype``, ``shape`` and ``data_offsets`` (from the end of the header), then the raw tensors.
Read here with the standard library, tensor by tensor, never the whole file at once.

What "moved" means, per kind of adapter:

- **LoRA** (``network.type`` ``lora`` or ``locon``, the default): its up weights (``lora_up``,
  ``lora_B``) start at zero (AI Toolkit's ``LoRAModule`` initialises them so, as every LoRA
  does, so that the untrained adapter changes nothing); an adapter whose up weights are all
  still zero after a run changes nothing, whatever else it holds. One saved file is enough.
- **LoKr and full fine-tunes**: no weight starts at a known value, so the last save is compared
  with the first step checkpoint of the same run, byte for byte, tensor by tensor; without an
  earlier checkpoint nothing can be said.

Only files written since the run started count (an older file is another run's). At most
:data:`MAX_READ_BYTES` of tensors are read per file; past that the check says how many tensors it
read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from oom_wizard.storage.resume import NotSafetensors, job_folders, read_header

if TYPE_CHECKING:
    from oom_wizard.formats.document import JobDocument

MAX_READ_BYTES: Final = 256 * 1024 * 1024
"""Tensor bytes read at most per file: a LoRA's up weights are far below it (a rank-32 FLUX LoRA
holds about 90 MB of them in bf16); a full fine-tune's file is sampled."""
SIGN_MASKS: Final[dict[str, tuple[int, int]]] = {
    "BF16": (2, 0x7FFF),
    "F16": (2, 0x7FFF),
    "F32": (4, 0x7FFFFFFF),
}
"""Bytes per element and the mask that drops the sign bit (``-0.0`` is a zero too)."""
UP_WEIGHT: Final = re.compile(r"(?:lora_up|lora_B)\b")
"""A LoRA's up weight in AI Toolkit's two key styles (``lora_unet_…lora_up.weight``,
``transformer.….lora_B.weight``)."""
STEP_FILE: Final = re.compile(r"_(\d{9})\.safetensors$")
_LORA_TYPES: Final = ("lora", "locon")


@dataclass(frozen=True)
class AdapterCheck:
    """What the saved adapter shows.

    Attributes:
        moved: True: it moved from its start; False: it did not (a failed fix); None: it could
            not be told (no file of this run, a kind that needs a checkpoint it lacks).
        words: What was read and found, in a sentence.
        file: The file read, if any.
    """

    moved: bool | None
    words: str
    file: Path | None = None


def _tensors(header: dict[str, Any]) -> list[tuple[str, str, int, int]]:
    """(name, dtype, start, end) of each tensor, in the file's order."""
    found = []
    for name, entry in header.items():
        if name == "__metadata__" or not isinstance(entry, dict):
            continue
        offsets = entry.get("data_offsets")
        dtype = entry.get("dtype")
        if not (isinstance(offsets, list) and len(offsets) == 2 and isinstance(dtype, str)):
            continue
        start, end = offsets
        if isinstance(start, int) and isinstance(end, int) and 0 <= start <= end:
            found.append((name, dtype, start, end))
    return sorted(found, key=lambda item: item[2])


def is_zero(data: bytes, dtype: str) -> bool:
    """Whether every element of a tensor's raw bytes is zero (``+0.0`` or ``-0.0``)."""
    if data.count(0) == len(data):
        return True
    size, mask = SIGN_MASKS.get(dtype, (1, 0xFF))
    if len(data) % size:
        return False
    view = memoryview(data)
    cast = view.cast("I") if size == 4 else view.cast("H") if size == 2 else view.cast("B")
    return not any(value & mask for value in cast)


def up_weights_moved(path: Path) -> AdapterCheck:
    """A LoRA's file: whether any up weight is non-zero (module doc)."""
    try:
        header, base = read_header(path)
        ups = [t for t in _tensors(header) if UP_WEIGHT.search(t[0])]
        if not ups:
            return AdapterCheck(None, f"{path} holds no LoRA up weight (lora_up, lora_B)", path)
        read = moved = 0
        budget = MAX_READ_BYTES
        with path.open("rb") as stream:
            for _, dtype, start, end in ups:
                if end - start > budget:
                    break
                budget -= end - start
                stream.seek(base + start)
                data = stream.read(end - start)
                read += 1
                if not is_zero(data, dtype):
                    moved += 1
                    break  # one up weight that moved is enough
    except (OSError, NotSafetensors):
        return AdapterCheck(None, f"{path} could not be read as a safetensors file", path)
    if moved:
        return AdapterCheck(True, f"its up weights are not all zero ({path})", path)
    of = f"{read} of {len(ups)}" if read < len(ups) else f"all {len(ups)}"
    return AdapterCheck(
        False if read == len(ups) else None,
        f"{of} of its up weights are still zero, as they start ({path})",
        path,
    )


def same_tensors(first: Path, last: Path) -> AdapterCheck:
    """A LoKr's or a full fine-tune's last save against the first checkpoint of the run."""
    try:
        head_a, base_a = read_header(first)
        head_b, base_b = read_header(last)
        in_a = {name: (start, end) for name, _, start, end in _tensors(head_a)}
        shared = [t for t in _tensors(head_b) if t[0] in in_a]
        if not shared:
            return AdapterCheck(None, f"{first} and {last} share no tensor to compare", last)
        budget, read = MAX_READ_BYTES, 0
        with first.open("rb") as a, last.open("rb") as b:
            for name, _, start, end in shared:
                if end - start > budget:
                    break
                budget -= end - start
                a_start, a_end = in_a[name]
                a.seek(base_a + a_start)
                b.seek(base_b + start)
                read += 1
                if a.read(a_end - a_start) != b.read(end - start):
                    return AdapterCheck(True, f"{last} differs from {first}", last)
    except (OSError, NotSafetensors):
        return AdapterCheck(None, f"{first} or {last} could not be read", last)
    if read < len(shared):
        return AdapterCheck(
            None, f"{read} of {len(shared)} tensors of {last} are as in {first}; not all read", last
        )
    return AdapterCheck(
        False, f"every tensor of {last} is as in {first}, its first checkpoint", last
    )


def adapter_kind(document: JobDocument) -> str:
    """``lora``, ``lokr`` (or another network type), or ``full`` (no network: a fine-tune)."""
    network = document.get(("config", "process", 0, "network"))
    if not isinstance(network, dict):
        return "full"
    kind = network.get("type", "lora")
    return str(kind).lower() if kind else "lora"


def check_adapter(document: JobDocument, since: float) -> AdapterCheck:
    """Whether the adapter this run saved moved from its start (module doc); ``since``: when
    the run started (seconds since the epoch): older files are another run's."""
    name = document.get(("config", "name"))
    folders = [f for f in job_folders(document) if f.is_dir()]
    if not isinstance(name, str) or not folders:
        return AdapterCheck(None, "no output folder of the job to read its adapter from")
    folder = folders[0]
    saved: list[tuple[float, Path]] = []
    try:
        entries = [p for p in folder.iterdir() if p.name.startswith(name)]
    except OSError:
        entries = []
    for path in entries:
        if path.suffix != ".safetensors":
            continue
        try:
            modified = path.stat().st_mtime
        except OSError:
            continue
        rest = path.name[len(name) :]
        if modified >= since and (rest == ".safetensors" or STEP_FILE.fullmatch(rest)):
            saved.append((modified, path))
    if not saved:
        return AdapterCheck(None, f"no adapter saved by this run in {folder}")
    saved.sort()
    final = folder / f"{name}.safetensors"
    last = final if any(path == final for _, path in saved) else saved[-1][1]
    kind = adapter_kind(document)
    if kind in _LORA_TYPES:
        return up_weights_moved(last)
    steps = [path for _, path in saved if path != last and STEP_FILE.search(path.name)]
    if not steps:
        return AdapterCheck(
            None,
            f"a {kind} adapter starts from no known value and this run saved no earlier "
            f"checkpoint to compare {last} with",
            last,
        )
    first = min(steps, key=lambda path: path.name)
    return same_tensors(first, last)
