"""The job document: loaded exactly as AI Toolkit loads it, edited into new documents."""

from __future__ import annotations

import datetime
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from oom_wizard.errors import ConfigError, EditError
from oom_wizard.formats.document import (
    MISSING,
    JobDocument,
    RemoveKey,
    SetValue,
    apply_to_tree,
    load_document,
    parse_document,
    same_value,
)
from oom_wizard.formats.yamledit import YamlText
from oom_wizard.formats.yamlload import MAX_DEPTH, check_limits

MINIMAL = """\
job: extension
config:
  name: test_job
  process:
    - type: sd_trainer
      train:
        batch_size: 2
        lr: 1e-4
      datasets:
        - folder_path: /data
          resolution: [512, 768]
"""


def yaml_tree(text: str) -> dict[str, Any]:
    return parse_document(text, source=Path("job.yaml"), fmt="yaml").tree


def write(folder: Path, name: str, data: str | bytes) -> Path:
    path = folder / name
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8", newline="")
    else:
        path.write_bytes(data)
    return path


# ------------------------------------------------------------ toolkit loader semantics


@pytest.mark.parametrize(
    ("scalar", "value"),
    [
        ("1e-4", 1e-4),
        ("5e-05", 5e-05),
        ("-2e-5", -2e-5),
        ("+3e2", 300.0),
        ("1E+5", 1e5),
        ("1.0e4", 1e4),
        ("1.e5", 1e5),
        ("0.0001", 0.0001),
        (".5", 0.5),
        ("1_000", 1000),
        ("0x1F", 31),
        ("012", 10),
        ("1:30", 90),
        ("yes", True),
        ("No", False),
        ("on", True),
        ("OFF", False),
        ("~", None),
        ("2024-01-02", datetime.date(2024, 1, 2)),
        ("'1e-4'", "1e-4"),
        ('"yes"', "yes"),
        (".5e3", ".5e3"),
        ("1e", "1e"),
        ("3e5x", "3e5x"),
    ],
)
def test_scalars_load_as_the_toolkits_safeloader_reads_them(scalar: str, value: Any) -> None:
    loaded = yaml_tree(f"v: {scalar}\n")["v"]

    assert type(loaded) is type(value)
    assert loaded == value


@pytest.mark.parametrize("opener", ["[", "{"])
def test_the_depth_limit_counts_nested_brackets_exactly_at_its_bound(opener: str) -> None:
    closer = {"[": "]", "{": "}"}[opener]
    nested = "v: " + opener * MAX_DEPTH + closer * MAX_DEPTH + "\n"
    check_limits(nested, "job.yaml")  # MAX_DEPTH openers in all: the quick bound passes it
    many = "".join(f"k{i}: {opener}{closer}\n" for i in range(MAX_DEPTH + 5))
    check_limits(many, "job.yaml")  # more openers than the bound, none nested: the full pass
    deeper = "v: " + opener * (MAX_DEPTH + 1) + closer * (MAX_DEPTH + 1) + "\n"
    with pytest.raises(ConfigError, match=f"nests deeper than {MAX_DEPTH} levels") as caught:
        check_limits(deeper, "job.yaml")
    assert (caught.value.line, caught.value.column) == (1, 4 + MAX_DEPTH)


def test_the_float_resolver_does_not_leak_into_pyyaml_itself() -> None:
    yaml_tree("v: 1e-4\n")

    assert yaml.safe_load("v: 1e-4\n") == {"v": "1e-4"}


def test_substitutions_stay_as_written() -> None:
    text = 'a: ${HOME}/data\nb: "[name]"\nc: "${MISSING_VAR}"\nd: x_[name]_y\n'

    assert yaml_tree(text) == {
        "a": "${HOME}/data",
        "b": "[name]",
        "c": "${MISSING_VAR}",
        "d": "x_[name]_y",
    }


def test_a_bare_bracketed_name_is_a_flow_list_as_the_toolkit_reads_it() -> None:
    assert yaml_tree("name: [name]\n") == {"name": ["name"]}


def test_a_scalar_the_toolkits_resolver_cannot_convert_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="could not read a value"):
        yaml_tree("v: ._\n")


def test_json_and_jsonc_load(tmp_path: Path) -> None:
    plain = write(tmp_path, "job.json", '{"job": "extension", "config": {"process": []}}')
    commented = write(
        tmp_path, "job.jsonc", '{\n  // c\n  "job": "extension", /* x */ "config": {}\n}\n'
    )

    assert parse_document(plain.read_text(), source=plain, fmt="json").tree["job"] == "extension"
    assert parse_document(commented.read_text(), source=commented, fmt="json").tree == {
        "job": "extension",
        "config": {},
    }


@pytest.mark.parametrize("name", ["job.yaml", "job.yml", "JOB.YAML"])
def test_load_document_reads_yaml_suffixes(tmp_path: Path, name: str) -> None:
    doc = load_document(write(tmp_path, name, MINIMAL))

    assert doc.fmt == "yaml"
    assert doc.tree["config"]["process"][0]["train"]["lr"] == 1e-4


def test_a_suffix_the_toolkit_would_refuse_is_read_with_a_warning(tmp_path: Path) -> None:
    path = write(tmp_path, "JOB.YAML", MINIMAL)

    (warning,) = load_document(path).warnings

    assert warning.startswith(f"{path}: AI Toolkit reads only names ending in lower-case")
    assert load_document(write(tmp_path, "job.yaml", MINIMAL)).warnings == ()


def test_a_json_byte_order_mark_is_kept_with_a_warning(tmp_path: Path) -> None:
    text = '{"job": "extension", "config": {"name": "x", "process": [{"type": "sd_trainer"}]}}'
    path = write(tmp_path, "job.json", b"\xef\xbb\xbf" + text.encode())

    doc = load_document(path)

    assert doc.bom and doc.to_bytes() == path.read_bytes()
    assert len(doc.warnings) == 1 and "Unexpected UTF-8 BOM" in doc.warnings[0]


def test_values_the_toolkit_cannot_turn_into_json_are_warned_about(tmp_path: Path) -> None:
    text = MINIMAL + "meta:\n  date: 2024-01-02\n  blob: !!binary aGk=\n  quoted: '2024-01-02'\n"

    warnings = load_document(write(tmp_path, "job.yaml", text)).warnings

    assert warnings == (
        f"{tmp_path / 'job.yaml'}:13:9: meta.date is read as a date, which AI Toolkit cannot "
        "turn into JSON at start-up; put the value in quotes",
        f"{tmp_path / 'job.yaml'}:14:9: meta.blob is read as a bytes, which AI Toolkit cannot "
        "turn into JSON at start-up; put the value in quotes",
    )


def test_utf16_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, "job.yaml", MINIMAL.encode("utf-16"))

    with pytest.raises(ConfigError, match="UTF-16"):
        load_document(path)


def test_load_document_refuses_other_suffixes(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"\.yaml, \.yml, \.json and \.jsonc"):
        load_document(write(tmp_path, "job.txt", MINIMAL))


def test_load_document_validates_the_typed_view_with_the_value_position(tmp_path: Path) -> None:
    path = write(tmp_path, "job.yaml", MINIMAL.replace("batch_size: 2", "batch_size: lots"))

    with pytest.raises(ConfigError) as raised:
        load_document(path)

    assert (raised.value.file, raised.value.line, raised.value.column) == (str(path), 7, 21)
    assert "batch_size" in raised.value.message


# --------------------------------------------------------------- bytes on disk


def test_bom_and_crlf_are_detected_and_written_back(tmp_path: Path) -> None:
    data = b"\xef\xbb\xbf" + MINIMAL.replace("\n", "\r\n").encode()
    doc = load_document(write(tmp_path, "job.yaml", data))

    assert doc.bom
    assert doc.newline == "\r\n"
    assert not doc.text.startswith("\ufeff")
    assert doc.to_bytes() == data


def test_an_unedited_document_writes_back_its_exact_bytes(tmp_path: Path) -> None:
    path = write(tmp_path, "job.yaml", MINIMAL)

    assert load_document(path).to_bytes() == path.read_bytes()


def test_the_header_comment_is_added_once_and_never_above_a_bom() -> None:
    doc = parse_document(MINIMAL, source=Path("job.yaml"), fmt="yaml")
    with_bom = parse_document(MINIMAL, source=Path("job.yaml"), fmt="yaml", bom=True)

    once = doc.with_header_comment("note").with_header_comment("note")

    assert once.text == "# note\n" + MINIMAL
    assert with_bom.with_header_comment("note").text == MINIMAL


# ----------------------------------------------------------------- get, position


def test_get_follows_keys_and_indexes() -> None:
    doc = parse_document(MINIMAL, source=Path("job.yaml"), fmt="yaml")

    assert doc.get(("config", "process", 0, "datasets", 0, "resolution")) == [512, 768]
    assert doc.get(("config", "process", 1)) is MISSING
    assert doc.get(("config", "name", "x")) is MISSING
    assert doc.get(("config", "nope"), default=None) is None


def test_position_is_one_based() -> None:
    doc = parse_document(MINIMAL, source=Path("job.yaml"), fmt="yaml")

    assert doc.position(("job",)) == (1, 6)
    assert doc.position(("config", "process", 0, "train", "lr")) == (8, 13)


# --------------------------------------------------------------------- with_edits


def test_with_edits_returns_a_new_document_and_leaves_this_one_alone() -> None:
    doc = parse_document(MINIMAL, source=Path("job.yaml"), fmt="yaml")

    edited = doc.with_edits([SetValue(("config", "process", 0, "train", "batch_size"), 1)])

    assert doc.text == MINIMAL
    assert doc.tree["config"]["process"][0]["train"]["batch_size"] == 2
    assert edited.tree["config"]["process"][0]["train"]["batch_size"] == 1
    assert edited.source == doc.source


def test_an_edit_whose_text_would_load_differently_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    doc = parse_document(MINIMAL, source=Path("job.yaml"), fmt="yaml")
    monkeypatch.setattr(YamlText, "set_value", lambda self, path, value: MINIMAL + "extra: 1\n")

    with pytest.raises(EditError, match="would not give the intended config"):
        doc.with_edits([SetValue(("config", "name"), "other")])


def test_an_edit_whose_text_would_not_parse_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = parse_document(MINIMAL, source=Path("job.yaml"), fmt="yaml")
    monkeypatch.setattr(YamlText, "set_value", lambda self, path, value: MINIMAL + "  : :\n")

    with pytest.raises(EditError, match="would break the file"):
        doc.with_edits([SetValue(("config", "name"), "other")])


def _several_edits() -> list[SetValue]:
    train = ("config", "process", 0, "train")
    return [SetValue((*train, "batch_size"), 1), SetValue(("config", "name"), "lighter")]


def test_edits_made_together_are_checked_against_what_the_toolkits_own_loader_reads() -> None:
    doc = parse_document(MINIMAL, source=Path("job.yaml"), fmt="yaml")

    edited = doc.with_edits(_several_edits())

    exact = parse_document(edited.text, source=Path("job.yaml"), fmt="yaml")
    assert same_value(edited.tree, exact.tree)
    again = edited.with_edits([SetValue(("config", "name"), "lighter still")])
    assert again.tree["config"]["name"] == "lighter still"
    assert again.tree["config"]["process"][0]["train"]["batch_size"] == 1


def test_values_that_cannot_be_written_are_refused() -> None:
    doc = parse_document(MINIMAL, source=Path("job.yaml"), fmt="yaml")

    with pytest.raises(EditError, match="cannot write a"):
        doc.with_edits([SetValue(("config", "name"), object())])


def test_warnings_name_the_duplicate_key_that_takes_effect() -> None:
    doc = parse_document("job: a\nconfig:\n  x: 1\n  x: 2\n", source=Path("job.yaml"), fmt="yaml")

    assert doc.tree["config"]["x"] == 2
    assert doc.warnings == (
        "job.yaml:4:3: key 'x' is written twice in the same section (also on line 3); "
        "AI Toolkit silently uses this one, the last",
    )


# ---------------------------------------------------------------- tree arithmetic


def test_apply_to_tree_walks_through_lists_and_creates_missing_sections() -> None:
    tree = {"config": {"process": [{"train": {"a": 1}, "sample": None}]}}

    added = apply_to_tree(tree, SetValue(("config", "process", 0, "model", "x"), 1))
    under_null = apply_to_tree(tree, SetValue(("config", "process", 0, "sample", "w"), 2))
    removed = apply_to_tree(tree, RemoveKey(("config", "process", 0, "train", "a")))
    absent = apply_to_tree(tree, RemoveKey(("config", "process", 0, "model", "x")))

    assert added["config"]["process"][0] == {"train": {"a": 1}, "sample": None, "model": {"x": 1}}
    assert under_null["config"]["process"][0]["sample"] == {"w": 2}
    assert removed["config"]["process"][0]["train"] == {}
    assert absent == tree
    assert tree == {"config": {"process": [{"train": {"a": 1}, "sample": None}]}}


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        (1, 1.0, True),
        (True, 1, False),
        (False, 0, False),
        (math.nan, math.nan, True),
        ([1, {"a": None}], [1.0, {"a": None}], True),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}, True),
        ({"a": 1}, {"a": 1, "b": None}, False),
        ("1", 1, False),
        (None, MISSING, False),
    ],
)
def test_same_value_compares_as_the_toolkit_would(a: Any, b: Any, same: bool) -> None:
    assert same_value(a, b) is same


def test_job_document_is_immutable() -> None:
    doc = parse_document(MINIMAL, source=Path("job.yaml"), fmt="yaml")

    with pytest.raises(AttributeError):
        doc.text = "x"  # type: ignore[misc]
    assert isinstance(doc, JobDocument)
