"""Indexing reads only the top of a bundled spec: the name and aliases it finds there are the
ones the whole file holds, for every bundled file."""

from __future__ import annotations

import pytest
import yaml

from roofline.spec.catalog import _bundled, header_text

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


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_plain_header_reads_what_yaml_reads(path) -> None:
    from roofline.spec.catalog import plain_header

    head = header_text(path.read_text(encoding="utf-8"))
    plain, top = plain_header(head), yaml.safe_load(head)
    if plain is not None:  # None: YAML reads the header
        assert plain["name"] == top["name"]
        assert plain.get("aliases", []) == [str(a) for a in top.get("aliases") or []]


@pytest.mark.parametrize(
    "head, expected",
    [
        ("name: a\naliases: [b, c d]", {"name": "a", "aliases": ["b", "c d"]}),
        ("name: a\naliases: [b,\n  c]", {"name": "a", "aliases": ["b", "c"]}),
        ("name: a\naliases:\n  - b\n  - c", {"name": "a", "aliases": ["b", "c"]}),
        ("# x\nname: a\ndisplay_name: A (b)", {"name": "a"}),
        ("name: a\naliases: ['3090']", None),  # quoted: YAML
        ("name: a\naliases: [1.5, yes]", None),  # YAML would read a number and a boolean
        ("name: a\ndisplay_name: >-\n  long", None),
        ("name: 'a'", None),
    ],
)
def test_plain_header(head: str, expected: dict | None) -> None:
    from roofline.spec.catalog import plain_header

    assert plain_header(head) == expected
