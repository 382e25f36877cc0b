"""Issue 42, "comma lists drop empty items": `--batch ',max'` ran `max` alone, `--batch 1,,8`
ran 1 and 8. Every option that takes a comma-separated list, found by walking the command tree
(its help says "comma-separated" or "a list", or its default holds a comma), refuses an empty
item by name, in one line, exit 1, through the one parser `common.comma_items`."""

from __future__ import annotations

import re

import pytest
import typer
from conftest import run_cli

from roofline.cli import app, common, register
from roofline.errors import InvalidInputError


def _list_options() -> list[tuple[tuple[str, ...], tuple[str, ...], str, str]]:
    """(command path, its required values, first long flag, its default) of every
    list-valued option."""
    register([])  # every command module
    root = typer.main.get_command(app)
    out: list[tuple[tuple[str, ...], tuple[str, ...], str, str]] = []

    def walk(cmd, path: tuple[str, ...]) -> None:
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            walk(sub, (*path, name))
        required: tuple[str, ...] = ()
        for p in getattr(cmd, "params", []):
            if p.required:
                value = REQUIRED.get(p.name, "x")
                named = p.opts[0].startswith("-")
                required += (p.opts[0], value) if named else (value,)
        required += PRECONDITIONS.get(" ".join(path), ())
        for p in getattr(cmd, "params", []):
            longs = [o for o in getattr(p, "opts", []) if o.startswith("--")]
            text = (getattr(p, "help", None) or "").lower()
            default = p.default if isinstance(p.default, str) else ""
            listed = "comma" in text or "a list" in text or "," in default
            if longs and listed and not getattr(p, "is_flag", False):
                out.append((path, required, longs[0], default))

    walk(root, ())
    return out


#: a value for each required parameter of the commands with a list option (a model the catalog
#: has, an output that is never written: the list is refused first)
REQUIRED = {
    "model": "llama-3.1-8b",
    "models": "llama-3.1-8b",
    "target": "llama-3.1-8b",
    "output": "never-written.png",
}
#: what a command checks before it parses its lists (a rule across options, not a required
#: parameter the walk can see)
PRECONDITIONS = {
    "plan": ("--rate", "1"),
    "plot plan": ("--rate", "1"),
    "speculate": ("--heads", "0.5"),
}
OPTIONS = _list_options()
#: the empty items a user types: doubled, trailing, leading (alone and blank between: the
#: parser's own test below)
EMPTY = ("{v},,{v}", "{v},", ",{v}")
#: a valid item where the option has no default to take one from
ITEM = {"--hardware": "h100-sxm", "--dtype": "bf16", "--formats": "bf16"}


def _item(flag: str, default: str) -> str:
    return default.split(",")[0].split("..")[0] if default else ITEM.get(flag, "1")


def test_the_walk_finds_the_list_options_users_type() -> None:
    found = {(" ".join(c), o) for c, _, o, _ in OPTIONS}
    for want in (("estimate", "--batch"), ("plan", "--max-batches"), ("speculate", "--k")):
        assert want in found, found
    assert len(OPTIONS) >= 14


@pytest.mark.parametrize("shape", EMPTY)
@pytest.mark.parametrize(
    ("command", "required", "flag", "default"),
    OPTIONS,
    ids=[f"{' '.join(c)} {o}" for c, _, o, _ in OPTIONS],
)
def test_an_empty_list_item_is_refused_by_name(
    capsys, command, required, flag, default, shape
) -> None:
    value = shape.format(v=_item(flag, default))
    code, out, err = run_cli(capsys, *command, *required, flag, value)
    assert (code, out) == (1, ""), err
    assert re.match(rf"error: {flag} has an empty [\w ]+ in '{re.escape(value)}'", err), err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    ("text", "items"),
    [("1,8,max", ["1", "8", "max"]), (" 1 , 8 ", ["1", "8"]), ("bf16", ["bf16"])],
)
def test_items_are_stripped_and_kept_in_order(text, items) -> None:
    assert common.comma_items(text, "--x") == items


@pytest.mark.parametrize("text", ["1,,8", "1,", ",2", ",", " ", "1, ,2"])
def test_the_parser_names_the_option(text) -> None:
    with pytest.raises(InvalidInputError, match=r"^--batch has an empty batch size"):
        common.batch_list(text)
    with pytest.raises(InvalidInputError, match=r"^--max-batch has an empty max batch"):
        common.int_list(text, "max batch", flag="--max-batch")
