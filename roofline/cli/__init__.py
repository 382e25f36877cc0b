"""`roofline` command line: parse → load validated specs → call the pure core → render.

Each command lives in its own module and registers itself on `app`. Domain errors from the
core are caught here, and only here: one line on stderr, exit status 1, no traceback.
"""

from __future__ import annotations

import sys

import typer

from ..errors import RooflineError

app = typer.Typer(
    name="roofline",
    help="How fast can this LLM run on that hardware, why, and is my system anywhere near it?",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
hardware_app = typer.Typer(help="List and show accelerator specs.", no_args_is_help=True)
models_app = typer.Typer(help="List and show model architecture specs.", no_args_is_help=True)
engines_app = typer.Typer(help="List and show inference-engine profiles.", no_args_is_help=True)
app.add_typer(hardware_app, name="hardware")
app.add_typer(models_app, name="models")
app.add_typer(engines_app, name="engines")

#: The module(s) that register each top-level command. Only the modules of the command being
#: run are imported, so `roofline estimate` does not pay for serve, plot or measure imports.
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "estimate": ("estimate",),
    "hardware": ("specs",),
    "models": ("specs", "models_import"),
    "engines": ("specs",),
    "kv": ("kv",),
    "speculate": ("speculate",),
    "diffusion": ("diffusion",),
    "collectives": ("collectives",),
    "serve": ("serve",),
    "plan": ("plan",),
    "plot": ("plot",),
    "measure": ("measure",),
    "calibrate": ("measure",),
    "validate": ("measure",),
    "check": ("measure",),
}


def register(argv: list[str]) -> None:
    """Import the command modules `argv` needs (all of them for help or an unknown name)."""
    import importlib

    command = next((a for a in argv if not a.startswith("-")), None)
    names = COMMAND_MODULES.get(command or "", tuple(sorted(
        {m for mods in COMMAND_MODULES.values() for m in mods})))
    for name in names:
        importlib.import_module(f"{__name__}.{name}")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    try:
        register(argv)
        app(args=argv, standalone_mode=False)
    except RooflineError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    except Exception as e:  # click usage errors and aborts carry their own exit codes
        # typer ships its own copy of click (typer._click) in newer releases: match by class
        # name so both the vendored and the standalone click are recognised.
        kinds = {c.__name__ for c in type(e).__mro__}
        if "ClickException" in kinds:
            print(f"error: {e.format_message()} (see `roofline --help`)",  # type: ignore[attr-defined]
                  file=sys.stderr)
            raise SystemExit(e.exit_code) from None  # type: ignore[attr-defined]
        if "Exit" in kinds:
            raise SystemExit(e.exit_code) from None  # type: ignore[attr-defined]
        if "Abort" in kinds:
            print("aborted", file=sys.stderr)
            raise SystemExit(1) from None
        raise
