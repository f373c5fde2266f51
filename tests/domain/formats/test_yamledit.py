"""Surgical YAML edits: each edit changes the lines of its field and nothing else."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from oom_wizard.errors import EditError
from oom_wizard.formats.document import Edit, JobDocument, RemoveKey, SetValue, parse_document
from oom_wizard.formats.yamlload import ToolkitLoader
from oom_wizard.paths import FieldPath, parse_path

P0: FieldPath = ("config", "process", 0)

JOB = """\
---
# job header comment
job: extension
config:
  name: "my_lora"   # the name
  process:
    - type: 'sd_trainer'
      training_folder: output
      train:
        batch_size: 4     # lower this on OOM
        steps: 2000
        lr: 1e-4
        gradient_checkpointing: yes
        optimizer: "adamw8bit"

        dtype: bf16
      model:
        name_or_path: black-forest-labs/FLUX.1-dev
        quantize: true  # 8 bit
      datasets:
        - folder_path: "/data/set a"
          caption_ext: txt
          resolution: [ 512, 768, 1024 ]  # buckets
        - folder_path: /data/b
          resolution:
            - 512
            # - 640
            - 768   # mid
            - 1024
      sample:
        width: 1024
        height: 1024
        prompts:
          - "a photo of [trigger]"
          - plain prompt
meta:
  name: "[name]"
  version: '1.0'
"""


def document(text: str) -> JobDocument:
    return parse_document(text, source=Path("job.yaml"), fmt="yaml")


def edit(text: str, *edits: Edit) -> str:
    return document(text).with_edits(edits).text


def load(text: str) -> Any:
    return yaml.load(text, Loader=ToolkitLoader)


def diff(before: str, after: str) -> tuple[list[str], list[str]]:
    """(lines removed, lines added): every line that differs, in order."""
    a, b = before.splitlines(), after.splitlines()
    removed: list[str] = []
    added: list[str] = []
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            removed += a[i1:i2]
            added += b[j1:j2]
    return removed, added


def path(text: str) -> FieldPath:
    return parse_path(text)


# ------------------------------------------------------------------- set a scalar


def test_set_scalar_changes_only_its_line_and_keeps_the_inline_comment() -> None:
    after = edit(JOB, SetValue((*P0, "train", "batch_size"), 1))

    assert diff(JOB, after) == (
        ["        batch_size: 4     # lower this on OOM"],
        ["        batch_size: 1     # lower this on OOM"],
    )


@pytest.mark.parametrize(
    ("field", "value", "line"),
    [
        (("config", "name"), "other", '  name: "other"   # the name'),
        ((*P0, "type"), "diffusion_trainer", "    - type: 'diffusion_trainer'"),
        ((*P0, "training_folder"), "/out", "      training_folder: /out"),
        ((*P0, "train", "optimizer"), "adafactor", '        optimizer: "adafactor"'),
    ],
)
def test_set_string_keeps_its_quote_style(field: FieldPath, value: str, line: str) -> None:
    after = edit(JOB, SetValue(field, value))

    assert diff(JOB, after)[1] == [line]


def test_a_plain_string_that_would_read_as_another_type_is_quoted() -> None:
    after = edit(JOB, SetValue((*P0, "training_folder"), "yes"))

    assert load(after)["config"]["process"][0]["training_folder"] == "yes"
    assert diff(JOB, after)[1] == ['      training_folder: "yes"']


def test_single_quotes_inside_a_single_quoted_string_are_doubled() -> None:
    after = edit(JOB, SetValue((*P0, "type"), "it's"))

    assert diff(JOB, after)[1] == ["    - type: 'it''s'"]
    assert load(after)["config"]["process"][0]["type"] == "it's"


@pytest.mark.parametrize(
    ("written", "value", "expected"),
    [
        ("yes", False, "no"),
        ("True", False, "False"),
        ("on", False, "off"),
        ("true", False, "false"),
    ],
)
def test_booleans_keep_their_spelling_family(written: str, value: bool, expected: str) -> None:
    text = JOB.replace("gradient_checkpointing: yes", f"gradient_checkpointing: {written}")

    after = edit(text, SetValue((*P0, "train", "gradient_checkpointing"), value))

    assert diff(text, after)[1] == [f"        gradient_checkpointing: {expected}"]
    assert load(after)["config"]["process"][0]["train"]["gradient_checkpointing"] is value


def test_a_float_is_written_so_that_every_yaml_loader_reads_a_float() -> None:
    after = edit(JOB, SetValue((*P0, "train", "lr"), 1e-5))

    assert diff(JOB, after)[1] == ["        lr: 1.0e-05"]
    assert yaml.safe_load(after)["config"]["process"][0]["train"]["lr"] == 1e-5
    assert load(after)["config"]["process"][0]["train"]["lr"] == 1e-5


@pytest.mark.parametrize("line", ["width:", "width:   # empty for now", "width: ~", "width: null"])
def test_set_an_empty_value(line: str) -> None:
    text = JOB.replace("        width: 1024", f"        {line}")

    after = edit(text, SetValue((*P0, "sample", "width"), 512))

    comment = "   # empty for now" if "#" in line else ""
    assert diff(text, after) == ([f"        {line}"], [f"        width: 512{comment}"])


@pytest.mark.parametrize(("header", "kept"), [("|", ""), (">-  # folded", "  # folded")])
def test_set_a_block_scalar_replaces_its_whole_block(header: str, kept: str) -> None:
    text = f"a:\n  note: {header}\n    line one\n    line two\n  b: 1\n"

    after = edit(text, SetValue(("a", "note"), "short"))

    assert after == f"a:\n  note: short{kept}\n  b: 1\n"


def test_set_a_duplicated_key_edits_the_one_the_toolkit_uses() -> None:
    text = "a:\n  x: 1\n  x: 2\n"

    after = edit(text, SetValue(("a", "x"), 3))

    assert after == "a:\n  x: 1\n  x: 3\n"


# ------------------------------------------------------------------- add a missing key


def test_add_a_missing_key_at_the_indentation_of_its_siblings() -> None:
    after = edit(JOB, SetValue((*P0, "model", "low_vram"), True))

    removed, added = diff(JOB, after)
    assert (removed, added) == ([], ["        low_vram: true"])
    lines = after.splitlines()
    assert lines[lines.index("        low_vram: true") - 1] == "        quantize: true  # 8 bit"


def test_add_a_missing_key_inside_a_list_item_mapping() -> None:
    after = edit(JOB, SetValue((*P0, "datasets", 0, "num_frames"), 1))

    assert diff(JOB, after) == ([], ["          num_frames: 1"])
    assert load(after)["config"]["process"][0]["datasets"][0]["num_frames"] == 1


def test_add_a_key_after_a_section_whose_last_value_is_a_block_list() -> None:
    after = edit(JOB, SetValue((*P0, "datasets", 1, "num_frames"), 1))

    assert diff(JOB, after) == ([], ["          num_frames: 1"])
    lines = after.splitlines()
    assert lines[lines.index("          num_frames: 1") - 1] == "            - 1024"


def test_add_a_missing_section() -> None:
    text = JOB.replace("      sample:\n        width: 1024\n        height: 1024\n", "")
    text = text.replace(
        '        prompts:\n          - "a photo of [trigger]"\n          - plain prompt\n', ""
    )

    after = edit(text, SetValue((*P0, "sample", "width"), 512))

    assert diff(text, after) == ([], ["      sample:", "        width: 512"])
    assert load(after)["config"]["process"][0]["sample"] == {"width": 512}


def test_add_two_missing_levels_at_once() -> None:
    after = edit(JOB, SetValue((*P0, "model", "quantize_kwargs", "exclude"), ["a", "b"]))

    assert diff(JOB, after) == ([], ["        quantize_kwargs:", "          exclude: [a, b]"])


@pytest.mark.parametrize(
    ("line", "kept"),
    [
        ("sample:", "sample:"),
        ("sample:   # later", "sample:   # later"),
        ("sample: null", "sample:"),
    ],
)
def test_add_a_key_under_an_empty_section(line: str, kept: str) -> None:
    text = "a:\n  " + line + "\n  b: 1\n"

    after = edit(text, SetValue(("a", "sample", "width"), 512))

    assert after == f"a:\n  {kept}\n    width: 512\n  b: 1\n"


def test_add_keys_to_an_inline_section() -> None:
    assert edit("a: {x: 1}\n", SetValue(("a", "y"), 2)) == "a: {x: 1, y: 2}\n"
    assert edit("a: {}\n", SetValue(("a", "y"), 2)) == "a: {y: 2}\n"


@pytest.mark.parametrize("value", ["${DATA}/x", "a,b", "[name]", "{x}"])
def test_strings_inside_flow_collections_are_quoted_when_they_must_be(value: str) -> None:
    in_map = edit("a: {x: 1}\n", SetValue(("a", "y"), value), SetValue(("a", "x"), value))
    in_list = edit("r: [1, 2]\n", SetValue(("r",), [value, 3]))
    emptied = edit("a:\n  x: 1\n", RemoveKey(("a", "x")), SetValue(("a", "y"), value))

    assert load(in_map) == {"a": {"x": value, "y": value}}
    assert load(in_list) == {"r": [value, 3]}
    assert load(emptied) == {"a": {"y": value}}


@pytest.mark.parametrize("value", ["${DATA}/x", "a,b", "x_[name]"])
def test_the_same_strings_stay_bare_in_block_context(value: str) -> None:
    assert edit("a:\n  x: 1\n", SetValue(("a", "x"), value)) == f"a:\n  x: {value}\n"


def test_a_new_section_follows_the_files_indentation_step() -> None:
    text = (
        "config:\n    process:\n        -   type: x\n            train:\n                steps: 1\n"
    )

    after = edit(text, SetValue(("config", "process", 0, "sample", "width"), 512))

    assert diff(text, after) == ([], ["            sample:", "                width: 512"])


def test_add_a_key_at_the_end_of_a_file_without_a_final_newline() -> None:
    assert edit("a:\n  b: 1", SetValue(("a", "c"), 2)) == "a:\n  b: 1\n  c: 2"


def test_a_new_key_goes_before_comment_lines_that_introduce_the_next_section() -> None:
    text = "train:\n  steps: 1\n  # lr: 1e-4\nmodel:\n  x: 1\n"

    after = edit(text, SetValue(("train", "batch_size"), 1))

    assert after == "train:\n  steps: 1\n  batch_size: 1\n  # lr: 1e-4\nmodel:\n  x: 1\n"


def test_a_list_item_cannot_be_added_by_path() -> None:
    with pytest.raises(EditError, match="cannot add list items"):
        edit("a: {}\n", SetValue(("a", "list", 0), 1))


# ------------------------------------------------------------------- replace a list


def test_a_flow_list_stays_flow_with_its_own_spacing() -> None:
    after = edit(JOB, SetValue((*P0, "datasets", 0, "resolution"), [512, 768]))

    assert diff(JOB, after) == (
        ["          resolution: [ 512, 768, 1024 ]  # buckets"],
        ["          resolution: [ 512, 768 ]  # buckets"],
    )


@pytest.mark.parametrize(
    ("written", "value", "expected"),
    [
        ("[512,768,1024]", [512], "[512]"),
        ("[512,768]", [512, 640, 768], "[512,640,768]"),
        ("[512, 768]", [1024], "[1024]"),
        ("[ 512 ]", [512, 768], "[ 512, 768 ]"),
        ("[ 512, 768, 1024]", [512, 768], "[ 512, 768]"),
        ("[512, 768 ]", [512], "[512 ]"),
    ],
)
def test_flow_list_spacing_variants(written: str, value: list[int], expected: str) -> None:
    assert edit(f"r: {written}\n", SetValue(("r",), value)) == f"r: {expected}\n"


def test_a_block_list_stays_block_and_only_the_dropped_item_goes() -> None:
    after = edit(JOB, SetValue((*P0, "datasets", 1, "resolution"), [512, 768]))

    assert diff(JOB, after) == (["            - 1024"], [])


def test_a_block_list_item_changed_in_place_keeps_its_comment() -> None:
    after = edit(JOB, SetValue((*P0, "datasets", 1, "resolution"), [512, 640, 1024]))

    assert diff(JOB, after) == (["            - 768   # mid"], ["            - 640   # mid"])


def test_a_block_list_grows_by_lines_in_the_style_of_its_items() -> None:
    after = edit(JOB, SetValue((*P0, "datasets", 1, "resolution"), [256, 512, 768, 1024, 1280]))

    assert diff(JOB, after) == ([], ["            - 256", "            - 1280"])
    assert load(after)["config"]["process"][0]["datasets"][1]["resolution"] == [
        256,
        512,
        768,
        1024,
        1280,
    ]


def test_a_block_list_of_strings_keeps_its_quotes_where_items_stay() -> None:
    after = edit(JOB, SetValue((*P0, "sample", "prompts"), ["a photo of [trigger]", "new one"]))

    assert diff(JOB, after) == (["          - plain prompt"], ["          - new one"])


def test_emptying_a_block_list_writes_an_empty_flow_list() -> None:
    text = "r:\n  - 1\n  - 2\nz: 0\n"

    assert edit(text, SetValue(("r",), [])) == "r: []\nz: 0\n"


def test_a_single_value_becomes_a_list_and_back() -> None:
    assert edit("r: 512  # one\n", SetValue(("r",), [512, 768])) == "r: [512, 768]  # one\n"
    assert edit("r: [512, 768]\n", SetValue(("r",), 512)) == "r: 512\n"
    assert edit("r:\n  - 512\n  - 768\nz: 0\n", SetValue(("r",), 512)) == "r: 512\nz: 0\n"


# ------------------------------------------------------------------- remove a key


def test_remove_a_key_takes_exactly_its_line() -> None:
    after = edit(JOB, RemoveKey((*P0, "train", "lr")))

    assert diff(JOB, after) == (["        lr: 1e-4"], [])


def test_remove_a_section_takes_all_its_lines_and_nothing_else() -> None:
    after = edit(JOB, RemoveKey((*P0, "model")))

    assert diff(JOB, after) == (
        [
            "      model:",
            "        name_or_path: black-forest-labs/FLUX.1-dev",
            "        quantize: true  # 8 bit",
        ],
        [],
    )


def test_remove_the_only_key_of_a_section_leaves_an_empty_section() -> None:
    text = "a:\n  sample:\n    x: 1\n  b: 2\n"

    after = edit(text, RemoveKey(("a", "sample", "x")))

    assert after == "a:\n  sample: {}\n  b: 2\n"
    assert load(after) == {"a": {"sample": {}, "b": 2}}


def test_remove_from_an_inline_section() -> None:
    assert edit("a: {x: 1, y: 2}\n", RemoveKey(("a", "x"))) == "a: {y: 2}\n"
    assert edit("a: {x: 1, y: 2}\n", RemoveKey(("a", "y"))) == "a: {x: 1}\n"


def test_remove_an_absent_key_changes_nothing() -> None:
    assert edit(JOB, RemoveKey((*P0, "train", "nope"))) == JOB


def test_remove_a_duplicated_key_removes_every_copy() -> None:
    after = edit("a:\n  x: 1\n  y: 2\n  x: 3\n", RemoveKey(("a", "x")))

    assert after == "a:\n  y: 2\n"


def test_remove_the_first_key_of_a_list_item_is_refused() -> None:
    with pytest.raises(EditError, match="first key of a list item"):
        edit(JOB, RemoveKey((*P0, "type")))


# ------------------------------------------------------------- line endings, markers


def crlf(text: str) -> str:
    return text.replace("\n", "\r\n")


@pytest.mark.parametrize(
    "edits",
    [
        [SetValue((*P0, "train", "batch_size"), 1)],
        [SetValue((*P0, "model", "low_vram"), True)],
        [SetValue((*P0, "datasets", 0, "resolution"), [512])],
        [SetValue((*P0, "datasets", 1, "resolution"), [256, 512, 768])],
        [SetValue((*P0, "caption", "x", "y"), 1)],
        [RemoveKey((*P0, "model"))],
        [RemoveKey((*P0, "sample", "prompts"))],
    ],
)
def test_crlf_line_endings_survive_every_kind_of_edit(edits: list[Edit]) -> None:
    after = edit(crlf(JOB), *edits)

    assert re.search(r"(?<!\r)\n", after) is None
    assert after.replace("\r\n", "\n") == edit(JOB, *edits)


def test_document_markers_and_directives_survive() -> None:
    text = "%YAML 1.1\n---\na:\n  b: 1\n...\n"

    after = edit(text, SetValue(("a", "c"), 2), SetValue(("a", "b"), 3))

    assert after == "%YAML 1.1\n---\na:\n  b: 3\n  c: 2\n...\n"


def test_the_byte_order_mark_is_written_back() -> None:
    doc = parse_document(JOB, source=Path("job.yaml"), fmt="yaml", bom=True)

    edited = doc.with_edits([SetValue((*P0, "train", "steps"), 100)])

    assert edited.to_bytes().startswith(b"\xef\xbb\xbf---\n# job header comment\n")


# ------------------------------------------------------------- anchors, aliases, merges


ANCHORED = """\
defaults: &train_defaults
  batch_size: 4
  lr: 1e-4
shared_res: &res [512, 768]
config:
  process:
    - train:
        <<: *train_defaults
        steps: 100
      datasets:
        - resolution: *res
        - resolution: *res
"""


def test_a_value_shared_through_an_alias_is_refused_naming_the_anchor() -> None:
    with pytest.raises(EditError) as raised:
        edit(ANCHORED, SetValue((*P0, "datasets", 0, "resolution"), [512]))

    assert "&res" in raised.value.message
    assert "line 4" in raised.value.message


def test_editing_the_anchor_itself_is_refused_too() -> None:
    with pytest.raises(EditError, match="&res"):
        edit(ANCHORED, SetValue(("shared_res",), [512]))


def test_a_merged_key_is_overridden_in_place_and_the_anchor_is_untouched() -> None:
    after = edit(ANCHORED, SetValue((*P0, "train", "batch_size"), 1))

    assert diff(ANCHORED, after) == ([], ["        batch_size: 1"])
    tree = load(after)
    assert tree["config"]["process"][0]["train"]["batch_size"] == 1
    assert tree["defaults"] == {"batch_size": 4, "lr": 1e-4}


def test_a_merge_key_written_last_still_gets_the_override_below_its_own_keys() -> None:
    text = ANCHORED.replace(
        "        <<: *train_defaults\n        steps: 100\n",
        "        steps: 100\n        <<: *train_defaults\n",
    )

    after = edit(text, SetValue((*P0, "train", "lr"), 2e-4))

    assert diff(text, after) == ([], ["        lr: 0.0002"])
    assert load(after)["defaults"]["lr"] == 1e-4


def test_removing_a_merged_key_is_refused() -> None:
    with pytest.raises(EditError, match="merge key"):
        edit(ANCHORED, RemoveKey((*P0, "train", "lr")))


# ------------------------------------------------------------------- paths, positions


def test_a_path_through_a_scalar_is_refused() -> None:
    with pytest.raises(EditError, match="not a section"):
        edit(JOB, SetValue((*P0, "train", "steps", "x"), 1))


def test_a_list_index_out_of_range_is_refused() -> None:
    with pytest.raises(EditError, match=r"datasets\[5\] does not exist"):
        edit(JOB, SetValue((*P0, "datasets", 5, "resolution"), 1))


@pytest.mark.parametrize(
    ("field", "where"),
    [
        ("config.name", (5, 9)),
        ("config.process[0].type", (7, 13)),
        ("config.process[0].train.batch_size", (10, 21)),
        ("config.process[0].datasets[0].resolution", (23, 23)),
        ("config.process[0].datasets[1].resolution[2]", (29, 15)),
        ("config.process[0].sample.prompts[1]", (35, 13)),
    ],
)
def test_position_is_the_line_and_column_of_the_value(field: str, where: tuple[int, int]) -> None:
    assert document(JOB).position(path(field)) == where


@pytest.mark.parametrize(
    "field", ["config.process[0].train.nope", "config.process[3]", "config.name.x"]
)
def test_position_of_something_absent_is_none(field: str) -> None:
    assert document(JOB).position(path(field)) is None


# ------------------------------------- issue 12: aliases counted in any order, unshared copies

ALIASED_LATER = """\
job: extension
config:
  name: t
  process:
    - type: sd_trainer
      train: &train
        batch_size: 4
    - type: sd_trainer
      train: *train
other: *train
"""


@pytest.mark.parametrize(
    "path",
    [(*P0, "train", "batch_size"), ("config", "process", 1, "train", "batch_size")],
)
def test_a_child_of_an_aliased_mapping_is_refused_naming_its_anchor(path: FieldPath) -> None:
    with pytest.raises(EditError, match=r"&train \(line 6\)"):
        edit(ALIASED_LATER, SetValue(path, 1))


def test_the_intended_tree_shares_nothing_with_the_aliased_source() -> None:
    from oom_wizard.formats.document import apply_to_tree

    tree = yaml.load(ALIASED_LATER, Loader=ToolkitLoader)
    assert tree["config"]["process"][0]["train"] is tree["other"]  # YAML shares them

    expected = apply_to_tree(tree, SetValue((*P0, "train", "batch_size"), 1))

    assert expected["config"]["process"][0]["train"]["batch_size"] == 1
    assert expected["config"]["process"][1]["train"]["batch_size"] == 4
    assert expected["other"]["batch_size"] == 4


PROMPTS = (
    "\n".join(
        [
            "job: extension",
            "config:",
            "  name: t",
            "  process:",
            "    - type: sd_trainer",
            "      sample:",
            "        width: 1024",
            "        prompts:",
        ]
        + [f'          - "prompt {i} --w 1280 --h 768"  # n{i}' for i in range(60)]
    )
    + "\n"
)


def test_many_edits_made_together_give_exactly_the_one_at_a_time_text() -> None:
    document = parse_document(PROMPTS, source=Path("job.yaml"), fmt="yaml")
    edits: list[Edit] = [
        SetValue((*P0, "sample", "prompts", i), f"prompt {i} --w 768 --h 464") for i in range(60)
    ]
    edits += [SetValue((*P0, "sample", "width"), 768), SetValue((*P0, "sample", "height"), 768)]

    together = document.with_edits(edits).text
    one_by_one = document
    for single in edits:
        one_by_one = one_by_one.with_edits([single])

    assert together == one_by_one.text
    assert "# n59" in together and "--w 768 --h 464" in together
