"""`roofline collectives`: measured all-reduce / all-to-all vs message size, model beside it."""

from __future__ import annotations

import importlib.util
from typing import Annotated

import typer
from rich.table import Table

from ..errors import InvalidInputError
from ..spec.catalog import load_hardware
from ..units import seconds, si
from . import app, common
from .common import JsonFlag, SpecsDir, console, print_json

Opt = typer.Option


#: Largest message per rank (16 GiB): beyond it no device holds the buffers.
MAX_MESSAGE_BYTES = 2**34


def sizes(text: str) -> list[int]:
    if len(text) > 20_000:
        raise InvalidInputError("--sizes: at most 1000 values; give fewer")
    try:
        floats = [float(v) for v in common.comma_items(text, "--sizes")]
    except ValueError:
        raise InvalidInputError(
            f"--sizes must be comma-separated byte counts, got '{text[:40]}'"
        ) from None
    if not floats or not all(4 <= v <= MAX_MESSAGE_BYTES for v in floats):
        raise InvalidInputError(
            f"--sizes needs messages of 4 to {MAX_MESSAGE_BYTES:,} bytes, got '{text[:40]}'"
        )
    return [int(v) for v in floats]


@app.command()
def collectives(
    world_size: Annotated[
        int,
        Opt(
            "--world-size",
            "-n",
            help="ranks (GPUs, or CPU processes)",
            callback=common.in_range(2, 1024),
        ),
    ] = 2,
    sizes_text: Annotated[
        str, Opt("--sizes", help="message bytes per rank, comma-separated")
    ] = "1e3,1e4,1e5,1e6,1e7",
    backend: Annotated[
        str | None, Opt(help="nccl or gloo (default: nccl with CUDA, else gloo)")
    ] = None,
    hardware: Annotated[
        str | None,
        Opt(
            *common.HARDWARE_FLAGS,
            help="device whose interconnect the model uses for the predicted column",
        ),
    ] = None,
    reps: Annotated[
        int,
        Opt(
            help="timed repetitions per point (median reported)", callback=common.in_range(1, 10**5)
        ),
    ] = 20,
    warmup: Annotated[
        int, Opt(help="untimed repetitions first", callback=common.in_range(0, 10**5))
    ] = 3,
    json_out: JsonFlag = False,
    specs_dir: SpecsDir = None,
) -> None:
    """Time all-reduce and all-to-all with torch.distributed and print the model beside them."""
    if world_size < 2:
        raise InvalidInputError("--world-size must be at least 2 for a collective")
    if backend not in (None, "nccl", "gloo"):
        raise InvalidInputError(f"unknown backend '{backend}'; use nccl or gloo")
    if reps < 1 or warmup < 0:
        raise InvalidInputError("--reps must be at least 1 and --warmup at least 0")
    message_sizes = sizes(sizes_text)
    ic = load_hardware(hardware, specs_dir or ()).interconnect if hardware else None
    if importlib.util.find_spec("torch") is None:
        raise InvalidInputError(
            "torch is not installed; install the measure extra: pip install 'roofline[measure]'"
        )
    from ..kernels.collectives import environment, run_collectives

    try:
        results = run_collectives(world_size, message_sizes, ic, backend, reps, warmup)
    except ValueError as e:  # the machine lacks what the backend needs (GPUs for NCCL)
        raise InvalidInputError(
            f"{e}; use fewer ranks, or the gloo backend on this machine's CPU"
        ) from None
    if json_out:
        print_json(
            {
                "environment": environment(),
                "hardware": hardware,
                "results": [r.as_dict() for r in results],
            }
        )
        return
    t = Table(
        title=f"collectives: {world_size} ranks, {results[0].backend}; median of {reps}"
        + (f"; model on {hardware}'s {ic.kind}" if ic else "")
    )
    for col in ("op", "bytes/rank", "median", "min", "max", "bus bandwidth", "model"):
        t.add_column(col, justify="right")
    for r in results:
        t.add_row(
            r.op,
            si(r.message_bytes, "B"),
            seconds(r.median_s),
            seconds(r.min_s),
            seconds(r.max_s),
            si(r.bus_bandwidth_bytes_per_s, "B/s"),
            seconds(r.predicted_s) if r.predicted_s is not None else "—",
        )
    console.print(t)
