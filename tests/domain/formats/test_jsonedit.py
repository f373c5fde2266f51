"""Surgical JSON edits: pretty files stay pretty, one-line files (the UI database) stay one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from oom_wizard.errors import ConfigError, EditError
from oom_wizard.formats.document import (
    Edit,
    JobDocument,
    RemoveKey,
    SetValue,
    apply_to_tree,
    parse_document,
    strip_json_comments,
)
from oom_wizard.paths import FieldPath

P0: FieldPath = ("config", "process", 0)

TREE: dict[str, Any] = {
    "job": "extension",
    "config": {
        "name": "my_lora",
        "process": [
            {
                "type": "diffusion_trainer",
                "train": {"batch_size": 4, "steps": 2000, "lr": 0.0001, "optimizer": "adamw8bit"},
                "model": {"name_or_path": "black-forest-labs/FLUX.1-dev", "quantize": True},
                "datasets": [{"folder_path": "/data/a", "resolution": [512, 768, 1024]}],
                "sample": {},
                "logging": {"log_every": 1},
            }
        ],
    },
    "meta": {"name": "[name]", "version": "1.0"},
}

EDIT_SETS: list[list[Edit]] = [
    [SetValue((*P0, "train", "batch_size"), 1)],
    [SetValue((*P0, "train", "gradient_checkpointing"), True)],
    [SetValue((*P0, "datasets", 0, "resolution"), [512, 768])],
    [SetValue((*P0, "datasets", 0, "resolution"), 512)],
    [SetValue((*P0, "sample", "width"), 512)],
    [SetValue((*P0, "model", "layer_offloading", "enabled"), True)],
    [SetValue((*P0, "logging", "extra"), {"a": [1, 2], "b": None})],
    [RemoveKey((*P0, "train", "batch_size"))],
    [RemoveKey((*P0, "train", "optimizer"))],
    [RemoveKey((*P0, "logging", "log_every"))],
    [
        SetValue((*P0, "train", "batch_size"), 2),
        RemoveKey((*P0, "train", "lr")),
        SetValue((*P0, "sample", "height"), 768),
        SetValue((*P0, "train", "steps"), 500),
    ],
]


def document(text: str, name: str = "job.json") -> JobDocument:
    return parse_document(text, source=Path(name), fmt="json")


def edit(text: str, *edits: Edit, name: str = "job.json") -> str:
    return document(text, name).with_edits(edits).text


def expected_tree(edits: list[Edit]) -> dict[str, Any]:
    tree = TREE
    for one in edits:
        tree = apply_to_tree(tree, one)
    return tree


# Each layout: how json.dumps writes it. After any edit the text must be exactly what the
# same json.dumps call writes for the edited tree: same key order, same layout.
LAYOUTS: dict[str, dict[str, Any]] = {
    "pretty, indent 2": {"indent": 2},
    "pretty, indent 4": {"indent": 4},
    "ui database (JSON.stringify)": {"separators": (",", ":")},
    "one line with spaces": {},
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("edits", EDIT_SETS)
def test_edits_keep_key_order_and_layout(layout: str, edits: list[Edit]) -> None:
    options = LAYOUTS[layout]
    text = json.dumps(TREE, **options)

    after = edit(text, *edits)

    assert after == json.dumps(expected_tree(edits), **options)


def test_crlf_pretty_json_stays_crlf() -> None:
    text = json.dumps(TREE, indent=2).replace("\n", "\r\n") + "\r\n"
    edits = EDIT_SETS[-1] + [SetValue((*P0, "model", "low_vram"), True)]

    after = edit(text, *edits)

    assert after == json.dumps(expected_tree(edits), indent=2).replace("\n", "\r\n") + "\r\n"


def test_replacing_a_scalar_keeps_everything_around_it() -> None:
    text = '{"a": {"b": 1, "c": "x"}}\n'

    assert edit(text, SetValue(("a", "c"), "y")) == '{"a": {"b": 1, "c": "y"}}\n'


def test_commas_inside_strings_do_not_decide_the_spacing() -> None:
    text = '{"prompts":["a, b","c"],"n":1}'

    assert edit(text, SetValue(("prompts",), ["x", "y, z"])) == '{"prompts":["x","y, z"],"n":1}'


def test_a_section_written_as_null_becomes_an_object() -> None:
    pretty = json.dumps({"s": None, "n": 1}, indent=2)
    compact = json.dumps({"s": None, "n": 1}, separators=(",", ":"))

    assert edit(pretty, SetValue(("s", "w"), 5)) == json.dumps({"s": {"w": 5}, "n": 1}, indent=2)
    assert edit(compact, SetValue(("s", "w"), 5)) == '{"s":{"w":5},"n":1}'


def test_a_duplicated_key_is_edited_where_json_reads_it_and_removed_everywhere() -> None:
    text = '{"a": 1, "b": 2, "a": 3}'

    assert edit(text, SetValue(("a",), 4)) == '{"a": 1, "b": 2, "a": 4}'
    assert edit(text, RemoveKey(("a",))) == '{"b": 2}'
    assert document(text).warnings == (
        "job.json:1:18: key 'a' is written twice in the same section (also on line 1); "
        "AI Toolkit silently uses this one, the last",
    )


# ------------------------------------------------------------------------- .jsonc

JSONC = """\
{
  // the job type
  "job": "extension", /* always extension */
  "config": {
    "name": "http://not/a/comment", // a URL-like string stays a string
    "process": [
      {
        "type": "sd_trainer",
        "train": {
          "batch_size": 4, // lower on OOM
          /* the learning rate */
          "lr": 0.0001,
          "steps": 100 // short run
        }
      }
    ]
  }
}
"""


def test_jsonc_loads_with_both_comment_kinds() -> None:
    doc = document(JSONC, "job.jsonc")

    assert doc.tree["job"] == "extension"
    assert doc.tree["config"]["name"] == "http://not/a/comment"
    assert doc.tree["config"]["process"][0]["train"] == {
        "batch_size": 4,
        "lr": 0.0001,
        "steps": 100,
    }


def test_jsonc_set_keeps_the_comment_on_the_line() -> None:
    after = edit(JSONC, SetValue((*P0, "train", "batch_size"), 1), name="job.jsonc")

    assert after == JSONC.replace('"batch_size": 4, // lower', '"batch_size": 1, // lower')


def test_jsonc_remove_keeps_the_comment_above_the_next_member() -> None:
    after = edit(JSONC, RemoveKey((*P0, "train", "batch_size")), name="job.jsonc")

    assert after == JSONC.replace('          "batch_size": 4, // lower on OOM\n', "")


def test_jsonc_remove_the_last_member_moves_the_comma_not_the_comments() -> None:
    after = edit(JSONC, RemoveKey((*P0, "train", "steps")), name="job.jsonc")

    assert after == JSONC.replace('"lr": 0.0001,\n', '"lr": 0.0001\n').replace(
        '          "steps": 100 // short run\n', ""
    )


def test_jsonc_add_goes_after_the_last_member_at_its_indentation() -> None:
    after = edit(JSONC, SetValue((*P0, "train", "gradient_checkpointing"), True), name="job.jsonc")

    assert after == JSONC.replace(
        '"steps": 100 // short run\n',
        '"steps": 100,\n          "gradient_checkpointing": true // short run\n',
    )
    assert document(after, "job.jsonc").tree["config"]["process"][0]["train"]["steps"] == 100


def test_jsonc_remove_the_only_member_keeps_a_comment_inside() -> None:
    text = '{"a": {"b": 1 // why\n}}'

    assert edit(text, RemoveKey(("a", "b")), name="job.jsonc") == '{"a": { // why\n}}'


def test_comment_stripping_keeps_strings_and_positions() -> None:
    stripped = strip_json_comments('{"u": "a//b", /* c */ "v": 1} // end')

    assert stripped == '{"u": "a//b",         "v": 1}       '


# ------------------------------------------------------------------------- errors


def test_a_trailing_comma_is_named_with_its_position() -> None:
    with pytest.raises(ConfigError) as raised:
        document('{\n  "a": 1,\n}\n')

    assert (raised.value.line, raised.value.column) == (3, 1)  # the bracket after it
    assert "trailing comma" in raised.value.message


def test_a_file_cut_short_after_a_comma_is_not_called_a_trailing_comma() -> None:
    with pytest.raises(ConfigError) as raised:
        document('{"a": 1,')

    assert "trailing comma" not in raised.value.message
    assert (raised.value.line, raised.value.column) == (1, 9)


def test_a_list_index_out_of_range_is_refused() -> None:
    with pytest.raises(EditError, match="does not exist"):
        edit(json.dumps(TREE), SetValue((*P0, "datasets", 3, "resolution"), 1))


def test_positions_in_json() -> None:
    doc = document(json.dumps(TREE, indent=2))

    assert doc.position((*P0, "train", "batch_size")) == (9, 25)
    assert doc.position((*P0, "datasets", 0, "resolution", 1)) == (23, 15)
    assert doc.position((*P0, "train", "nope")) is None
