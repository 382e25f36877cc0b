"""Issue 42, "an empty value means 'not given'": `--model ''`, `--policy ''`, `--engine=` or a
bare `''` silently fell back to a default. Every option that takes a value, found by walking
the command tree (not a hand-kept list), refuses an empty one by name, in one line, exit 1."""

from __future__ import annotations

import pytest
import typer
from conftest import run_cli

from roofline.cli import app, register


def _value_options() -> list[tuple[tuple[str, ...], str]]:
    """(command path, first long flag) of every option that takes a value."""
    register([])  # every command module (they are imported as a command line needs them)
    root = typer.main.get_command(app)
    out: list[tuple[tuple[str, ...], str]] = []

    def walk(cmd, path: tuple[str, ...]) -> None:
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            walk(sub, (*path, name))
        for p in getattr(cmd, "params", []):
            longs = [o for o in getattr(p, "opts", []) if o.startswith("--")]
            if longs and not getattr(p, "is_flag", False) and p.nargs == 1:
                out.append((path, longs[0]))

    walk(root, ())
    return out


OPTIONS = _value_options()


def test_the_walk_finds_the_options_users_type() -> None:
    found = {(" ".join(c), o) for c, o in OPTIONS}
    for want in (("estimate", "--engine"), ("serve", "--policy"), ("plan", "--hardware")):
        assert (want[0], want[1]) in found
    assert len(OPTIONS) > 100


@pytest.mark.parametrize(
    ("command", "flag"), OPTIONS, ids=lambda x: " ".join(x) if isinstance(x, tuple) else x
)
def test_an_empty_option_value_is_refused_by_name(capsys, command, flag) -> None:
    code, out, err = run_cli(capsys, *command, flag, "")
    assert code == 1 and out == ""
    assert err == f"error: {flag} is empty; give it a value or leave it out\n"


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (("estimate", "--engine="), "--engine"),
        (("serve", "--model="), "--model"),
        (("estimate", ""), "the argument after 'estimate'"),
        (("estimate", "--json", ""), "--json"),
        (("",), "the first argument"),
    ],
)
def test_empty_forms_are_refused_by_name(capsys, argv, named) -> None:
    code, _, err = run_cli(capsys, *argv)
    assert code == 1 and err == f"error: {named} is empty; give it a value or leave it out\n"
