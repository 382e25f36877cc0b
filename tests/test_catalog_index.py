"""Indexing reads only the top of a bundled spec: the name and aliases it finds there are the
ones the whole file holds, for every bundled file."""

from __future__ import annotations

import pytest
import yaml

from roofline.catalog import _bundled, header_text

FILES = sorted(
    p
    for folder in ("hardware_specs", "model_specs", "engine_specs")
    for p in _bundled(folder).glob("*.yaml")
)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_header_holds_the_name_and_aliases(path) -> None:
    text = path.read_text(encoding="utf-8")
    whole = yaml.safe_load(text)
    head = header_text(text)
    assert head is not None, "name and aliases must come first in a bundled spec"
    top = yaml.safe_load(head)
    assert top["name"] == whole["name"]
    assert (top.get("aliases") or []) == (whole.get("aliases") or [])


@pytest.mark.parametrize(
    "text, expected",
    [
        ("name: a\naliases: [b]\nkind: gpu\n", "name: a\naliases: [b]"),
        ("name: a\nkind: gpu\naliases: [b]\n", None),  # aliases later: read the whole file
        ("# c\nname: a\ndisplay_name: A\nkind: gpu\n", "# c\nname: a\ndisplay_name: A"),
        ("name: a\naliases:\n  - b\n  - c\nvendor: x\n", "name: a\naliases:\n  - b\n  - c"),
    ],
)
def test_header_text(text: str, expected: str | None) -> None:
    assert header_text(text.replace("\\\n", "\n")) == (
        None if expected is None else expected.replace("\\\n", "\n")
    )
