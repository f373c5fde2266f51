"""Tests of ``oom_wizard.formats.preset``: a preset file's data is exactly what PyYAML's safe
loader builds (the reader builds the plain nodes itself, and hands every other node to PyYAML),
and its errors are located."""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import RootModel

from oom_wizard.errors import PresetError
from oom_wizard.formats.preset import parse_preset

AnyData = RootModel[Any]

SHIPPED = sorted(
    entry.name
    for entry in resources.files("oom_wizard.presets").iterdir()
    if entry.name.endswith(".yaml")
)


def read(tmp_path: Path, text: str) -> Any:
    path = tmp_path / "preset.yaml"
    path.write_text(text, encoding="utf-8")
    return parse_preset(path, AnyData).root


def same(a: Any, b: Any) -> bool:
    """Equal, with NaN equal to itself (``.nan`` is a float PyYAML builds)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("name", SHIPPED)
def test_a_shipped_preset_reads_as_the_safe_loader_reads_it(name: str) -> None:
    file = resources.files("oom_wizard.presets") / name
    text = file.read_text(encoding="utf-8")
    assert same(parse_preset(file, AnyData).root, yaml.load(text, Loader=yaml.SafeLoader))


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\nb: 2.5\nc: true\nd: null\ne: ~\nf: 0x1f\ng: 1_000\nh: .inf\ni: .nan\nj: 1e3\n",
        "quoted: '1'\nplain: yes\nstamp: 2026-12-01\nbinary: !!binary aGk=\n",
        "base: &b {x: 1, y: [1, 2]}\nderived:\n  <<: *b\n  z: 3\nagain: *b\n",
        "1: int key\nnull: null key\n2.5: float key\ntrue: bool key\n",
        "tagged: !!str 12\nset: !!set {a, b}\nomap: !!omap [{a: 1}, {b: 2}]\n",
        "list: &l [1, 2]\ntwice: [*l, *l]\n",
        "[1, [2, [3, {deep: [4]}]]]\n",
        "'just a string'\n",
        "",
    ],
    ids=[
        "scalars",
        "odd-scalars",
        "merge-keys",
        "non-string-keys",
        "tags",
        "aliases",
        "nested",
        "top-scalar",
        "empty",
    ],
)
def test_any_yaml_reads_as_the_safe_loader_reads_it(tmp_path: Path, text: str) -> None:
    assert same(read(tmp_path, text), yaml.load(text, Loader=yaml.SafeLoader))


def test_a_shared_node_is_one_object_as_in_pyyaml(tmp_path: Path) -> None:
    data = read(tmp_path, "list: &l [1, 2]\ntwice: [*l, *l]\n")
    assert data["twice"][0] is data["twice"][1] is data["list"]


def test_a_node_that_holds_itself_is_built_by_pyyaml(tmp_path: Path) -> None:
    data = read(tmp_path, "&loop [1, *loop]\n")
    assert data[0] == 1 and data[1] is data


def test_a_duplicate_key_is_refused_at_its_line_and_column(tmp_path: Path) -> None:
    with pytest.raises(PresetError) as caught:
        read(tmp_path, "a: 1\nb:\n  c: 2\n  c: 3\n")
    assert (caught.value.line, caught.value.column) == (4, 3)
