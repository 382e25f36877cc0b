"""Issue 42, "validate drops options of its other modes without a word": `validate --published
--model x` ran the published rows and ignored --model. Which options apply in which mode is
declared once (`roofline/cli/applies.py`, MODES) and refused in one place before a command runs.
The (command, option, mode) triples are discovered from that declaration and checked against
the command tree's own help ("with --serving: ...") so neither can drift from the other."""

from __future__ import annotations

import re

import pytest
import typer.main
from conftest import run_cli

from roofline.cli import app, register
from roofline.cli.applies import MODES, refuse_inapplicable
from roofline.errors import InvalidInputError


def _command(path: str):
    register(path.split())
    cmd = typer.main.get_command(app)
    for word in path.split():
        cmd = cmd.commands[word]
    return cmd


def _typed(param) -> list[str]:
    """The words that give `param` on a command line (a flag alone, an option a value)."""
    return [param.opts[0]] if getattr(param, "is_flag", False) else [param.opts[0], "1"]


def _triples() -> list[tuple[str, str, str]]:
    """(command, option parameter, a mode it does not apply in), from the declaration."""
    return [
        (axis.command, name, mode)
        for axis in MODES
        for name, modes in axis.only.items()
        for mode in axis.select
        if mode not in modes
    ]


TRIPLES = _triples()


def test_the_declaration_names_real_options_and_modes() -> None:
    for axis in MODES:
        params = {p.name for p in _command(axis.command).params}
        assert set(axis.only) <= params, set(axis.only) - params
        for modes in axis.only.values():
            assert set(modes) <= set(axis.select)
    assert len(TRIPLES) >= 30


#: what an option's help says of its mode, and the mode of the declaration it means
HELP_MODES = {
    "validate": {r"^with --serving:": "--serving", r"^with --published:": "--published"},
    "serve": {r"^--speculate:": "--speculate", r"^disaggregated:": "disaggregated"},
}


@pytest.mark.parametrize("command", sorted(HELP_MODES))
def test_every_option_whose_help_names_a_mode_is_declared(command: str) -> None:
    """The help is what users read; an option it ties to a mode is in MODES with that mode."""
    declared = {n: m for axis in MODES if axis.command == command for n, m in axis.only.items()}
    found = 0
    for p in _command(command).params:
        for pattern, mode in HELP_MODES[command].items():
            if re.search(pattern, getattr(p, "help", "") or ""):
                found += 1
                assert mode in declared.get(p.name, ()), (p.name, mode)
    assert found >= 6


@pytest.mark.parametrize(("command", "name", "mode"), TRIPLES, ids="-".join)
def test_an_option_outside_its_mode_is_refused_by_name(capsys, command, name, mode) -> None:
    axis = next(a for a in MODES if a.command == command and name in a.only)
    param = next(p for p in _command(command).params if p.name == name)
    code, out, err = run_cli(capsys, *command.split(), *axis.select[mode], *_typed(param))
    assert (code, out) == (1, "")
    assert err.startswith(f"error: {param.opts[0]} ") and err.count("\n") == 1, err
    for belongs in axis.only[name]:  # the mode it belongs to is named
        assert belongs in err, err


@pytest.mark.parametrize(
    ("command", "name", "mode"),
    [(a.command, n, m) for a in MODES for n, ms in a.only.items() for m in ms],
    ids="-".join,
)
def test_an_option_in_its_mode_passes_the_rule(command, name, mode) -> None:
    """The other side: in a mode it belongs to, the rule lets the option through (no run)."""
    axis = next(a for a in MODES if a.command == command and name in a.only)
    cmd = _command(command)
    param = next(p for p in cmd.params if p.name == name)
    refuse_inapplicable(cmd, command.split(), [*axis.select[mode], *_typed(param)])


def test_validate_drops_options_of_its_other_modes_without_a_word(capsys) -> None:
    """The root cause: `validate --published` ran with --model and --tp of
    --serving given, and said nothing. Now the first is refused, naming its mode."""
    code, out, err = run_cli(
        capsys, "validate", "--published", "--model", "llama-3.1-8b", "--tp", "2"
    )
    assert (code, out) == (1, "")
    assert err == (
        "error: --model, --tp apply to `validate --serving` only, not to `validate --published`;"
        " drop them\n"
    )


def test_an_option_left_at_its_default_is_not_refused() -> None:
    """`--gate` defaults to on; only a typed option is refused, not a default of another mode."""
    cmd = _command("validate")
    refuse_inapplicable(cmd, ["validate"], ["--serving", "f.json", "-H", "h100-sxm"])
    with pytest.raises(InvalidInputError, match="--gate applies to `validate --published`"):
        refuse_inapplicable(cmd, ["validate"], ["--serving", "f.json", "--gate"])


def test_contradictory_modes_are_left_to_the_command(capsys) -> None:
    code, _, err = run_cli(capsys, "validate", "--serving", "--published", "--model", "x")
    assert code == 1 and err == "error: give --serving or --published, not both\n"
