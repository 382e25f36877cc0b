"""`roofline` command line: parse → load validated specs → call the pure core → render.

Each command lives in its own module and registers itself on `app`. Domain errors from the
core are caught here, and only here: one line on stderr, exit status 1, no traceback.
Interrupts (Ctrl-C, SIGTERM, SIGHUP) never exit 0: 128 + the signal number.
"""

from __future__ import annotations

import errno
import io
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Annotated, Any

import typer
import typer.main

from ..errors import InvalidInputError, RooflineError

app = typer.Typer(
    name="roofline",
    help="How fast can this LLM run on that hardware, why, and is my system anywhere near it?",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
hardware_app = typer.Typer(help="List and show accelerator specs.", no_args_is_help=True)
models_app = typer.Typer(help="List and show model architecture specs.", no_args_is_help=True)
engines_app = typer.Typer(help="List and show inference-engine profiles.", no_args_is_help=True)
app.add_typer(hardware_app, name="hardware")
app.add_typer(models_app, name="models")
app.add_typer(engines_app, name="engines")


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            v = version("roofline")
        except PackageNotFoundError:
            v = "unknown (not installed)"
        print(f"roofline {v}")
        raise typer.Exit()


@app.callback()
def _root(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_version, help="print the version and exit"
        ),
    ] = False,
) -> None:
    """How fast can this LLM run on that hardware, why, and is my system anywhere near it?"""


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

#: Signals that stop a run the way Ctrl-C does (what `timeout`, CI runners and schedulers send).
STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n))


class Interrupted(KeyboardInterrupt):
    """SIGTERM/SIGHUP raised as an interrupt, so every Ctrl-C path (keeping measured points
    included) serves them too."""


_received: list[int] = []


def _on_signal(signum: int, frame: object) -> None:
    _received.append(signum)
    raise Interrupted(signum)


@contextmanager
def _stop_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP raise `Interrupted` while a command runs (restored afterwards)."""
    previous = {}
    try:
        for s in STOP_SIGNALS:
            previous[s] = signal.signal(s, _on_signal)
    except ValueError:  # not the main thread: leave the handlers alone
        pass
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def interrupt_status() -> int:
    """128 + the signal that stopped the run (130 for Ctrl-C)."""
    return 128 + (_received[-1] if _received else signal.SIGINT)


def register(argv: list[str]) -> None:
    """Import the command modules `argv` needs (all of them for help or an unknown name)."""
    import importlib

    command = next((a for a in argv if not a.startswith("-")), None)
    names = COMMAND_MODULES.get(
        command or "", tuple(sorted({m for mods in COMMAND_MODULES.values() for m in mods}))
    )
    for name in names:
        importlib.import_module(f"{__name__}.{name}")


def _registered(t: typer.Typer) -> tuple[Any, ...]:
    """What is registered on `t` and its groups, counted: commands are only ever added (by
    importing their modules, `register`), so equal counts mean the same command tree."""
    return (
        len(t.registered_commands),
        tuple(_registered(g.typer_instance) for g in t.registered_groups if g.typer_instance),
    )


_built: dict[tuple[Any, ...], Any] = {}


def _click_app() -> Any:
    """The click command tree of `app`, built once for the commands registered so far: typer
    builds it from every command's signature (tens of ms), and one run reads it up to three
    times (the mode check, the run, an error's flag names)."""
    key = _registered(app)
    if key not in _built:
        _built.clear()
        _built[key] = typer.main.get_command(app)
    return _built[key]


def _command(argv: list[str]) -> tuple[Any, list[str]]:
    """The deepest command argv names, and its path: ['roofline', 'plot', 'kv']."""
    cmd, words = _click_app(), ["roofline"]
    for word in argv:
        sub = getattr(cmd, "commands", {}).get(word)
        if sub is None:
            break
        cmd, words = sub, [*words, word]
    return cmd, words


def _flags(argv: list[str]) -> dict[str, str]:
    """Parameter name -> the long flag of the command argv names (`kv_format` -> --kv-format)."""
    longs = {p.name: [o for o in p.opts if o.startswith("--")] for p in _command(argv)[0].params}
    return {name: opts[0] for name, opts in longs.items() if name and opts}


def _usage_hint(e: Exception, argv: list[str]) -> str:
    ctx = getattr(e, "ctx", None)
    path = getattr(ctx, "command_path", "") or " ".join(_command(argv)[1])
    return f"see `{path} --help`"


def _interrupted() -> SystemExit:
    print("interrupted", file=sys.stderr)
    return SystemExit(interrupt_status())


def _broken_pipe() -> SystemExit:
    """stdout closed by the reader (`| head`): stop quietly, and keep Python's exit-time
    flush from raising again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115  # the exit-time flush finds nothing
    return SystemExit(1)


#: errors a write to standard output ends in when the stream cannot take it (every file the
#: commands write goes through `roofline.files`, which reports its own)
_STREAM_ERRNOS = frozenset((errno.ENOSPC, errno.EFBIG, errno.EBADF, errno.EIO, errno.EDQUOT))


class _ClosedStream(io.TextIOBase):
    """Standard output the process started without: every write is EBADF (`_unwritable`)."""

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "standard output is closed")

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        raise OSError(errno.EBADF, "standard output is closed")


def _unwritable(e: OSError) -> SystemExit:
    """stdout cannot take the output: say so in one line on stderr, keep the exit-time flush
    from failing again, exit 1."""
    fix = (
        "give it somewhere to go (a redirect, or `-o FILE` where the command has it)"
        if e.errno == errno.EBADF
        else "free space on the device or send the output elsewhere (`-o FILE` or a redirect)"
    )
    with suppress(OSError, ValueError):
        print(f"error: cannot write the output ({e.strerror or e}); {fix}", file=sys.stderr)
    return _broken_pipe()


def _plain_streams() -> None:
    """A terminal or pipe that cannot encode the output's characters (PYTHONIOENCODING=ascii,
    a C locale) gets them replaced ('?'), not a UnicodeEncodeError traceback."""
    for stream in (sys.stdout, sys.stderr):
        enc = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
        if enc and enc not in ("utf8", "utf16", "utf32") and hasattr(stream, "reconfigure"):
            with suppress(OSError, ValueError, AttributeError):
                stream.reconfigure(errors="replace")


def _refuse_empty_values(argv: list[str]) -> None:
    """An empty value is never "not given": `--model ''`, `--engine=` and a bare `''` are
    refused by name, so an empty shell variable cannot silently select a default (issue 42)."""
    for i, arg in enumerate(argv):
        if arg.startswith("--") and arg.endswith("=") and len(arg) > 3:
            name = arg[:-1]
        elif arg.strip() == "" and i > 0 and argv[i - 1].startswith("-") and "=" not in argv[i - 1]:
            name = argv[i - 1]
        elif arg.strip() == "":
            name = f"the argument after '{argv[i - 1]}'" if i else "the first argument"
        else:
            continue
        raise InvalidInputError(f"{name} is empty; give it a value or leave it out")


def _refuse_inapplicable(argv: list[str]) -> None:
    """An option of one mode given in another is refused by name (`applies.MODES`)."""
    from .applies import refuse_inapplicable

    cmd, words = _command(argv)
    refuse_inapplicable(cmd, words[1:], argv[len(words) - 1 :], app.info.context_settings)


def main(argv: list[str] | None = None) -> None:
    from .common import NOTES, with_flags

    argv = sys.argv[1:] if argv is None else argv
    if sys.stdout is None:  # started with stdout closed (`>&-`): writing fails, said once
        sys.stdout = _ClosedStream()
    _plain_streams()
    _received.clear()
    NOTES.clear()
    try:
        with _stop_signals():
            _refuse_empty_values(argv)
            register(argv)
            _refuse_inapplicable(argv)
            # what `app(...)` runs, on the tree already built (pretty exceptions are off, so
            # typer's exception hook would hand every error to Python's own)
            rv = _click_app()(args=argv, prog_name="roofline", standalone_mode=False)
            sys.stdout.flush()
    except RooflineError as e:
        print(f"error: {with_flags(str(e), _flags(argv))}", file=sys.stderr)
        raise SystemExit(getattr(e, "exit_code", 1)) from None
    except KeyboardInterrupt:
        raise _interrupted() from None
    except BrokenPipeError:
        raise _broken_pipe() from None
    except OSError as e:  # stdout full (ENOSPC, EFBIG), closed (EBADF) or failing (EIO)
        if e.errno not in _STREAM_ERRNOS:
            raise
        raise _unwritable(e) from None
    except OverflowError as e:  # a size that passed every range but overflows 64-bit math
        print(
            f"error: a value is too large to compute with ({e}); use smaller sizes in the "
            "flags or spec",
            file=sys.stderr,
        )
        raise SystemExit(1) from None
    except Exception as e:  # click usage errors and aborts carry their own exit codes
        # typer ships its own copy of click (typer._click) in newer releases: match by class
        # name so both the vendored and the standalone click are recognised.
        kinds = {c.__name__ for c in type(e).__mro__}
        if "NoArgsIsHelpError" in kinds:  # a bare `roofline` or group: help, exit 0
            message = e.format_message()  # type: ignore[attr-defined]
            if message.strip():
                print(message)
            raise SystemExit(0) from None
        if "ClickException" in kinds:
            message = " ".join(str(e.format_message()).split())  # type: ignore[attr-defined]
            print(f"error: {message} ({_usage_hint(e, argv)})", file=sys.stderr)
            raise SystemExit(e.exit_code) from None  # type: ignore[attr-defined]
        if "Exit" in kinds:
            code = e.exit_code  # type: ignore[attr-defined]
            if code == 130:
                raise _interrupted() from None
            raise SystemExit(code) from None
        if "Abort" in kinds:
            if isinstance(e.__context__, KeyboardInterrupt):
                raise _interrupted() from None
            print("aborted", file=sys.stderr)
            raise SystemExit(1) from None
        raise
    # typer under standalone_mode=False returns an exit code instead of raising: 130 for a
    # Ctrl-C it caught itself (some releases), a code for `typer.Exit(n)`
    if isinstance(rv, int) and not isinstance(rv, bool) and rv != 0:
        if rv == 130:
            raise _interrupted()
        raise SystemExit(rv)
    for note in NOTES:
        print(note, file=sys.stderr)
