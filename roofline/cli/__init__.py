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
app.add_typer(hardware_app, name="hardware")
app.add_typer(models_app, name="models")

# Command modules register themselves on the apps above.
from . import (  # noqa: E402,F401
    collectives,
    diffusion,
    estimate,
    kv,
    measure,
    models_import,
    plot,
    serve,
    specs,
    speculate,
)


def main(argv: list[str] | None = None) -> None:
    try:
        app(args=argv, standalone_mode=False)
    except RooflineError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    except Exception as e:  # click usage errors and aborts carry their own exit codes
        import click

        if isinstance(e, click.exceptions.ClickException):
            print(f"error: {e.format_message()}", file=sys.stderr)
            raise SystemExit(e.exit_code) from None
        if isinstance(e, click.exceptions.Exit):
            raise SystemExit(e.exit_code) from None
        if isinstance(e, click.exceptions.Abort):
            print("aborted", file=sys.stderr)
            raise SystemExit(1) from None
        raise
