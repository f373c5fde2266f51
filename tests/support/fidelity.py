"""Load-edit-save fidelity over a folder of real AI Toolkit configs.

    python -m tests.support.fidelity tests/fixtures/configs
    python -m tests.support.fidelity ../shared/aitk-examples \
        --verifier ../shared/checks/verify_change.py

For every ``.yaml``/``.yml``/``.json`` config in the folder (plus copies of the first
one: CRLF, byte-order mark, both, without the four fields, and as JSON pretty and in
the UI database's one-line form), this runs
``oom-wizard set`` in-process on four memory fields of ``config.process[0]``:
``train.batch_size``, ``train.gradient_checkpointing``, ``datasets[0].resolution``
and ``sample.width``, with values chosen so that each one really changes (and is
added when it is missing). The result is then checked by an exactness checker: the
project's own (``tests/support/exactness.py``), or with ``--verifier`` an independent script
with the same command line, such as ``../shared/checks/verify_change.py``: the tree
differs by exactly the logged changes, and no line outside them moved. The source
bytes must be unchanged.

It prints one line per file and a final ``N passed, N failed`` line, and exits
non-zero when any file fails. ``tests/domain/formats/test_fidelity.py`` runs the same function
under pytest. This file has no ``test_`` prefix so that pytest does not collect it.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import re
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oom_wizard.cli import main as wizard_main
from tests.support import exactness
from tests.support.corpus import CONFIG_SUFFIXES

PROCESS = "config.process[0]"
BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class Verifier:
    """The independent checker: its command line and its AI Toolkit-style loader."""

    main: Callable[[Sequence[str]], int]
    load_tree: Callable[[Path], Any]


@dataclass(frozen=True)
class Outcome:
    """The fidelity verdict on one config.

    Attributes:
        name: The file's name (with a ``[crlf]``/``[bom]`` tag for the variants).
        ok: The edit was saved and the exactness checker accepted it.
        detail: What was checked, or what went wrong.
        refused: AI Toolkit cannot load the file, and oom-wizard refused it too.
    """

    name: str
    ok: bool
    detail: str
    refused: bool = False

    def line(self) -> str:
        """One line for the report."""
        return f"{'ok  ' if self.ok else 'FAIL'} {self.name}: {self.detail}"


def own_verifier() -> Verifier:
    """The project's own checker, ``tests/support/exactness.py``."""
    return Verifier(main=exactness.main, load_tree=exactness.load_tree)


def load_verifier(script: Path) -> Verifier:
    """An independent checker such as ``verify_change.py``, imported from its file."""
    spec = importlib.util.spec_from_file_location("verify_change", script)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return Verifier(main=module.main, load_tree=module.load_tree)


def assignments_for(tree: dict[str, Any]) -> list[str]:
    """``PATH=VALUE`` for the four fields, each with a value different from today's."""
    process = tree["config"]["process"][0]
    train = process.get("train") or {}
    sample = process.get("sample") or {}
    datasets = process.get("datasets") or []
    batch_size = train.get("batch_size", 1)
    checkpointing = train.get("gradient_checkpointing", True)
    width = sample.get("width")
    assignments = [
        f"{PROCESS}.train.batch_size={batch_size + 1}",
        f"{PROCESS}.train.gradient_checkpointing={'false' if checkpointing else 'true'}",
        f"{PROCESS}.sample.width={768 if width == 512 else 512}",
    ]
    if datasets:
        assignments.append(
            f"{PROCESS}.datasets[0].resolution={_smaller_resolution(datasets[0].get('resolution'))}"
        )
    return assignments


def _smaller_resolution(resolution: Any) -> str:
    """Drop the last bucket of a list; a single value (or none) becomes ``[512]``."""
    if isinstance(resolution, list) and len(resolution) > 1:
        return "[" + ", ".join(str(item) for item in resolution[:-1]) + "]"
    return "[768]" if resolution in ([512], 512) else "[512]"


def check_config(source: Path, workdir: Path, verify: Verifier, name: str | None = None) -> Outcome:
    """Run ``oom-wizard set`` on ``source`` into ``workdir`` and verify the result.

    A file that AI Toolkit's own loader rejects (one of the shipped examples has an
    unclosed quote) must be refused the same way: exit status 2, one
    ``FILE:LINE:COL`` line, nothing written.
    """
    name = name or source.name
    before = source.read_bytes()
    output = workdir / f"{source.stem}.edited{source.suffix}"
    changelog = workdir / f"{source.stem}.edited.changelog.json"
    try:
        tree = verify.load_tree(source)
    except Exception:  # the toolkit cannot load it: expect a clean refusal
        return _check_refusal(name, source, before, output)
    args = ["set", str(source), *assignments_for(tree)]
    status, out, err = _captured(
        wizard_main, [*args, "-o", str(output), "--changelog", str(changelog)]
    )
    if status != 0:
        return Outcome(name, False, f"oom-wizard set exited {status}: {err.strip() or out.strip()}")
    if source.read_bytes() != before:
        return Outcome(name, False, "the source file changed")
    status, out, _ = _captured(
        verify.main, [str(source), str(output), "--changelog", str(changelog)]
    )
    if status != 0:
        problems = "; ".join(line for line in out.splitlines() if line.startswith("FAIL"))
        return Outcome(name, False, f"the checker exited {status}: {problems or out.strip()}")
    if source.suffix in (".json", ".jsonc") and not same_json_layout(source, output):
        return Outcome(name, False, "the JSON layout changed (indentation or separators)")
    fields = ", ".join(a.split("=", 1)[0].removeprefix(f"{PROCESS}.") for a in args[2:])
    return Outcome(name, True, f"{len(args) - 2} fields ({fields}) verified")


JSON_LAYOUTS: list[dict[str, Any]] = [
    {"indent": 2, "ensure_ascii": False},
    {"indent": 4, "ensure_ascii": False},
    {"separators": (",", ":"), "ensure_ascii": False},  # JSON.stringify, as the UI stores it
    {"ensure_ascii": False},
]


def same_json_layout(source: Path, output: Path) -> bool:
    """When ``json.dumps`` in some layout writes the source exactly, it writes the output too."""
    before, after = source.read_text("utf-8"), output.read_text("utf-8")
    for layout in JSON_LAYOUTS:
        for ending in ("", "\n"):
            if json.dumps(json.loads(before), **layout) + ending == before:
                return json.dumps(json.loads(after), **layout) + ending == after
    return True  # a hand-written layout: verify_change.py compares the values


def _check_refusal(name: str, source: Path, before: bytes, output: Path) -> Outcome:
    args = ["set", str(source), f"{PROCESS}.train.batch_size=1", "-o", str(output)]
    status, _, err = _captured(wizard_main, args)
    expected = re.compile(rf"^oom-wizard: error: {re.escape(str(source))}:\d+:\d+: .+\n\Z")
    if status != 2 or not expected.match(err):
        return Outcome(name, False, f"AI Toolkit cannot load it, but set exited {status}: {err}")
    if output.exists() or source.read_bytes() != before:
        return Outcome(name, False, "refused, but something was written")
    where = err.removeprefix(f"oom-wizard: error: {source}:").split(": ", 1)[0]
    return Outcome(name, True, f"AI Toolkit cannot load it either; refused at {where}", True)


def _captured(function: Callable[[Sequence[str]], int], args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = function(args)
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else 2
    return status, out.getvalue(), err.getvalue()


def configs_in(folder: Path) -> list[Path]:
    """The config files of ``folder``, sorted by name."""
    return sorted(
        path for path in folder.iterdir() if path.is_file() and path.suffix in CONFIG_SUFFIXES
    )


def variants_of(source: Path, tree: Any, workdir: Path) -> list[tuple[str, Path]]:
    """Copies of ``source`` in ``workdir``: CRLF, BOM, CRLF+BOM, fields missing, and JSON.

    The "missing" copy lacks ``batch_size``, ``gradient_checkpointing``, ``resolution``
    and the whole ``sample:`` section, so that the edit has to add them. The JSON
    copies hold ``tree`` pretty-printed and in the UI database's one-line form.
    """
    data = source.read_bytes().removeprefix(BOM).replace(b"\r\n", b"\n")
    crlf = data.replace(b"\n", b"\r\n")
    missing = without_fields(data.decode("utf-8")).encode("utf-8")
    pretty = json.dumps(tree, indent=2, ensure_ascii=False) + "\n"
    one_line = json.dumps(tree, separators=(",", ":"), ensure_ascii=False)
    copies = {
        "crlf": (crlf, source.suffix),
        "bom": (BOM + data, source.suffix),
        "crlf+bom": (BOM + crlf, source.suffix),
        "missing": (missing, source.suffix),
        "json": (pretty.encode("utf-8"), ".json"),
        "ui database json": (one_line.encode("utf-8"), ".json"),
    }
    made = []
    for tag, (content, suffix) in copies.items():
        path = workdir / f"{source.stem}.{re.sub(r'[^a-z]+', '-', tag)}{suffix}"
        path.write_bytes(content)
        made.append((f"{source.name} [{tag}]", path))
    return made


_DROPPED_KEY = re.compile(r"^\s*(?:batch_size|gradient_checkpointing|resolution)\s*:")
_SAMPLE_SECTION = re.compile(r"^(\s*)sample:\s*(?:#.*)?$")


def without_fields(text: str) -> str:
    """``text`` without the four fields' lines and without its ``sample:`` section."""
    kept: list[str] = []
    section_indent: int | None = None
    for line in text.splitlines(keepends=True):
        indent = len(line) - len(line.lstrip())
        if section_indent is not None:
            if not line.strip() or line.lstrip().startswith("#") or indent > section_indent:
                continue
            section_indent = None
        match = _SAMPLE_SECTION.match(line)
        if match:
            section_indent = len(match.group(1))
        elif not _DROPPED_KEY.match(line):
            kept.append(line)
    return "".join(kept)


def run_fidelity(folder: Path, workdir: Path, verify: Verifier | None = None) -> list[Outcome]:
    """The verdict on every config of ``folder`` and on the variants of the first one.

    Args:
        folder: A folder of AI Toolkit configs (read, never written).
        workdir: An empty folder for the outputs and the variants.
        verify: The checker; the project's own when omitted.
    """
    verify = verify or own_verifier()
    configs = configs_in(folder)
    outcomes = []
    for index, source in enumerate(configs):
        out_dir = workdir / f"{index:03d}"
        out_dir.mkdir()
        outcomes.append(check_config(source, out_dir, verify))
    if configs:
        variant_dir = workdir / "variants"
        variant_dir.mkdir()
        tree = verify.load_tree(configs[0])
        for name, path in variants_of(configs[0], tree, variant_dir):
            out_dir = variant_dir / path.stem
            out_dir.mkdir()
            outcomes.append(check_config(path, out_dir, verify, name=name))
    return outcomes


def main(argv: Sequence[str] | None = None) -> int:
    """Check every config of the folder; exit status 1 when any fails."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("folder", type=Path, help="a folder of AI Toolkit job configs")
    parser.add_argument(
        "--verifier",
        type=Path,
        help="an independent checker script (default: tests/support/exactness.py)",
    )
    args = parser.parse_args(argv)
    if not args.folder.is_dir() or (args.verifier and not args.verifier.is_file()):
        print("fidelity: need a folder of configs (and the --verifier script)", file=sys.stderr)
        return 2
    verify = load_verifier(args.verifier) if args.verifier else own_verifier()
    with tempfile.TemporaryDirectory(prefix="oom-wizard-fidelity-") as temp:
        outcomes = run_fidelity(args.folder, Path(temp), verify)
    for outcome in outcomes:
        print(outcome.line())
    failed = sum(not outcome.ok for outcome in outcomes)
    refused = sum(outcome.refused for outcome in outcomes)
    note = f" ({refused} refused as AI Toolkit refuses them)" if refused else ""
    print(f"{len(outcomes) - failed} passed, {failed} failed{note}")
    return 1 if failed or not outcomes else 0


if __name__ == "__main__":
    sys.exit(main())
