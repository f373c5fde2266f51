"""The project's own exactness checker (``tests/support/exactness.py``) catches what it must.

Every other test that saves a config trusts this checker, so it is tested here on edits that
are exact and on edits broken in each way it claims to catch. Where ``../shared/checks`` is
present, the independent ``verify_change.py`` must agree with it on the same files.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from tests.support import exactness
from tests.support.corpus import FLOOR_CONFIG, own_configs, rollable_configs, verify_script
from tests.support.fidelity import load_verifier
from tests.support.plan_support import cli

SOURCE = """\
# a job
job: extension
config:
  name: t
  process:
    - type: sd_trainer
      train:
        batch_size: 4 # four at a time
        lr: 1e-4
        gradient_checkpointing: false
      datasets:
        - folder_path: /data
          resolution: [512, 768, 1024]
"""


def _log(path: Path, *changes: tuple[str, object, object]) -> Path:
    entries = [{"run": 0, "path": p, "before": b, "after": a} for p, b, a in changes]
    path.write_text(json.dumps({"changes": entries}), encoding="utf-8")
    return path


def _files(tmp_path: Path, edited: str, source: str = SOURCE) -> tuple[Path, Path]:
    original, output = tmp_path / "job.yaml", tmp_path / "job.out.yaml"
    original.write_bytes(source.encode())
    output.write_bytes(edited.encode())
    return original, output


BATCH = "config.process[0].train.batch_size"
BUCKETS = "config.process[0].datasets[0].resolution"


def test_an_exact_edit_passes(tmp_path: Path) -> None:
    edited = SOURCE.replace("batch_size: 4", "batch_size: 1").replace(", 1024]", "]")
    original, output = _files(tmp_path, "# changes: job.changelog.json\n" + edited)
    log = _log(tmp_path / "log.json", (BATCH, 4, 1), (BUCKETS, [512, 768, 1024], [512, 768]))
    verdict = exactness.check(original, output, log)
    assert verdict.ok, verdict.problems
    assert verdict.differing == 2


@pytest.mark.parametrize(
    ("edited", "changes", "problem"),
    [
        pytest.param(
            SOURCE.replace("batch_size: 4", "batch_size: 1"), [], "the log gives 4", id="unlogged"
        ),
        pytest.param(
            SOURCE.replace("batch_size: 4", "batch_size: 2"),
            [(BATCH, 4, 1)],
            "the log gives 1, the edited file has 2",
            id="wrong-after",
        ),
        pytest.param(
            SOURCE.replace("batch_size: 4", "batch_size: 1"),
            [(BATCH, 8, 1)],
            "before=8",
            id="wrong-before",
        ),
        pytest.param(SOURCE, [(BATCH, 4, 1)], "the edited file has 4", id="logged-not-done"),
        pytest.param(
            SOURCE.replace("# a job\n", "").replace("batch_size: 4", "batch_size: 1"),
            [(BATCH, 4, 1)],
            "a comment of the original is gone",
            id="lost-comment",
        ),
        pytest.param(
            SOURCE.replace("batch_size: 4 # four at a time", "batch_size: 1"),
            [(BATCH, 4, 1)],
            "inline comment",
            id="lost-inline-comment",
        ),
        pytest.param(
            SOURCE.replace("batch_size: 4", "batch_size: 1").replace("name: t", "name:   t"),
            [(BATCH, 4, 1)],
            "holds no changed field: name:   t",
            id="moved-line",
        ),
        pytest.param(
            SOURCE.replace("batch_size: 4", "batch_size: 1").replace("\n", "\r\n"),
            [(BATCH, 4, 1)],
            "CRLF",
            id="line-endings",
        ),
        pytest.param(
            "\ufeff" + SOURCE.replace("batch_size: 4", "batch_size: 1"),
            [(BATCH, 4, 1)],
            "byte-order mark",
            id="bom",
        ),
        pytest.param(
            SOURCE.replace("lr: 1e-4", "lr: '1e-4'").replace("batch_size: 4", "batch_size: 1"),
            [(BATCH, 4, 1)],
            "'1e-4'",
            id="float-became-string",
        ),
        pytest.param(
            SOURCE.replace("gradient_checkpointing: false", "gradient_checkpointing: 0"),
            [],
            "gradient_checkpointing",
            id="bool-became-int",
        ),
    ],
)
def test_a_broken_edit_is_caught(
    tmp_path: Path, edited: str, changes: list[tuple[str, object, object]], problem: str
) -> None:
    original, output = _files(tmp_path, edited)
    verdict = exactness.check(original, output, _log(tmp_path / "log.json", *changes))
    assert not verdict.ok
    assert any(problem in line for line in verdict.problems), verdict.problems


def test_a_field_in_a_flow_section_and_a_json_comma_are_explained(tmp_path: Path) -> None:
    flow = "job: extension\nconfig:\n  network: {type: lora, linear: 32}  # rank\n"
    original, output = _files(tmp_path, flow.replace("32", "16"), source=flow)
    log = _log(tmp_path / "log.json", ("config.network.linear", 32, 16))
    assert exactness.check(original, output, log).ok
    pretty = '{\n  "config": {\n    "a": 1\n  }\n}\n'
    original, output = tmp_path / "a.json", tmp_path / "b.json"
    original.write_text(pretty, encoding="utf-8")
    output.write_text(pretty.replace('"a": 1', '"a": 1,\n    "b": 2'), encoding="utf-8")
    log = _log(tmp_path / "log.json", ("config.b", None, 2))
    assert exactness.check(original, output, log).ok
    output.write_text(pretty.replace('"a": 1', '"a": 1,\n    "c": 2'), encoding="utf-8")
    assert not exactness.check(original, output, log).ok


def test_the_toolkit_reads_1e_4_as_a_float(tmp_path: Path) -> None:
    original, _ = _files(tmp_path, SOURCE)
    tree = exactness.load_tree(original)
    assert tree["config"]["process"][0]["train"]["lr"] == pytest.approx(0.0001)


def test_a_removed_key_is_a_null_after(tmp_path: Path) -> None:
    edited = SOURCE.replace("        lr: 1e-4\n", "")
    original, output = _files(tmp_path, edited)
    log = _log(tmp_path / "log.json", ("config.process[0].train.lr", 0.0001, None))
    assert exactness.check(original, output, log).ok


def test_the_command_line_prints_a_verdict_and_exits_by_it(tmp_path: Path) -> None:
    original, output = _files(tmp_path, SOURCE.replace("batch_size: 4", "batch_size: 1"))
    log = _log(tmp_path / "log.json", (BATCH, 4, 1))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert exactness.main([str(original), str(output), "--changelog", str(log)]) == 0
        assert exactness.main([str(original), str(output)]) == 0
        assert exactness.main([str(original), str(tmp_path / "missing.yaml")]) == 2
    assert out.getvalue().splitlines()[0].startswith("exactness: ok; 1 field(s) differ")


def _apply_all(source: Path, out_dir: Path) -> tuple[Path, Path]:
    output = out_dir / f"{source.stem}.fixed{source.suffix}"
    log = out_dir / f"{source.stem}.fixed.changelog.json"
    status, _, err = cli(
        "apply", source, "--moment", "early_steps", "--all", "-o", output, "--changelog", log
    )
    assert status == 0, err
    return output, log


def test_the_floor_config_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    source = next(path for path in own_configs() if path.name == FLOOR_CONFIG)
    output, log = tmp_path / "floor.fixed.yaml", tmp_path / "floor.fixed.changelog.json"
    status, out, err = cli(
        "apply", source, "--moment", "early_steps", "--all", "-o", output, "--changelog", log
    )
    assert status == 0, err
    assert "Nothing to change: the config already has these values." in out
    assert not output.exists() and not log.exists()


@pytest.mark.parametrize("source", rollable_configs(), ids=lambda path: path.name)
def test_every_roll_back_of_the_own_configs_is_exact(tmp_path: Path, source: Path) -> None:
    output, log = _apply_all(source, tmp_path)
    verdict = exactness.check(source, output, log)
    assert verdict.ok, verdict.problems
    assert verdict.differing > 0


@pytest.mark.skipif(verify_script() is None, reason="../shared/checks/verify_change.py is absent")
@pytest.mark.parametrize("source", rollable_configs(), ids=lambda path: path.name)
def test_the_independent_checker_agrees(tmp_path: Path, source: Path) -> None:
    script = verify_script()
    assert script is not None
    independent = load_verifier(script)
    output, log = _apply_all(source, tmp_path)
    broken = tmp_path / f"broken{source.suffix}"
    broken.write_bytes(output.read_bytes().replace(b"txt", b"jpg"))
    for edited in (output, broken):
        report = io.StringIO()
        with contextlib.redirect_stdout(report):
            theirs = independent.main([str(source), str(edited), "--changelog", str(log)])
        ours = exactness.check(source, edited, log)
        if ours.ok and theirs != 0:
            # The one known difference: the independent checker attributes a line only by the
            # key it starts with, so a field changed inside a flow-style section
            # (``network: {linear: 32}``) is flagged there; this checker reads the line's keys.
            failures = [line for line in report.getvalue().splitlines() if line.startswith("FAIL")]
            assert failures and all(": {" in line for line in failures), failures
            continue
        assert (theirs == 0) == ours.ok, (edited.name, ours.problems)
