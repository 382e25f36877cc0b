"""`roofline plot roofline|batch|kv`: charts from the same results the tables and JSON show.

Each command computes its results with the core (`phases.estimate`, `sweeps.kv_curve`) and hands
them to `roofline.plots`, which only draws. Files are PNG or SVG by suffix; `plot batch` without
`--output` prints the frontier as a text table instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .. import plots
from ..catalog import load_hardware, load_model
from ..cost import CEILINGS
from ..errors import InvalidInputError
from ..phases import estimate
from ..precision import Precision
from ..report import frontier_table
from ..sweeps import kv_curve
from . import app
from .common import SpecsDir, console, int_list, positive

plot_app = typer.Typer(help="Draw charts (PNG or SVG): roofline, latency-throughput frontier, "
                            "KV cache / state memory.", no_args_is_help=True)
app.add_typer(plot_app, name="plot")

Output = Annotated[Path, typer.Option("--output", "-o", help="chart file, .png or .svg")]
Dtype = Annotated[str, typer.Option(help="weights, activations and KV format")]
Ceiling = Annotated[str, typer.Option(help="datasheet (speed of light) or achievable")]
Models = Annotated[list[str], typer.Argument(help="model names, aliases or YAML paths")]
Devices = Annotated[list[str], typer.Option("--hardware", "-h",
                                            help="device name, alias or YAML path (repeatable)")]
Device = Annotated[str, typer.Option("--hardware", "-h", help="device name, alias or YAML path")]
ModelOpt = Annotated[str | None, typer.Option(
    "--model", "-m", help="model whose prefill and decode operators to place")]
Batches = Annotated[str, typer.Option(help="batch sizes B, comma-separated")]
TextOutput = Annotated[Path | None, typer.Option(
    "--output", "-o", help="chart file, .png or .svg; without it, print a text table")]
TextFlag = Annotated[bool, typer.Option("--text", help="print the text table as well as the file")]


def _check_ceiling(ceiling: str) -> None:
    if ceiling not in CEILINGS:
        raise InvalidInputError(f"unknown ceiling '{ceiling}'; use one of: {', '.join(CEILINGS)}")


def _saved(path: Path) -> None:
    console.print(f"wrote {path}")


@plot_app.command("roofline")
def roofline_cmd(
    output: Output,
    hardware: Device = "h100-sxm",
    model: ModelOpt = None,
    batch: Batches = "1,64",
    prompt: Annotated[int, typer.Option(help="prompt tokens P; decode is drawn at S = P")] = 1024,
    dtype: Dtype = "bf16",
    ceiling: Ceiling = "achievable",
    specs_dir: SpecsDir = None,
) -> None:
    """Roofline of a device, with each operator of a model's prefill and decode steps."""
    _check_ceiling(ceiling)
    hw = load_hardware(hardware, specs_dir or ())
    estimates = []
    if model is not None:
        m = load_model(model, specs_dir or ())
        # gen = 1: the chart needs only the prefill step and the first decode step (S = P)
        estimates = [estimate(m, hw, [b], positive(prompt, "--prompt"), 1,
                              Precision.uniform(dtype), ceiling)  # type: ignore[arg-type]
                     for b in int_list(batch, "batch size")]
    _saved(plots.save(plots.roofline_chart(hw, estimates), output))


@plot_app.command("batch")
def batch_cmd(
    models: Models,
    hardware: Devices = ["h100-sxm"],  # noqa: B006 (typer reads the default, never mutates it)
    batch: Batches = "1,2,4,8,16,32,64,128,256",
    prompt: Annotated[int, typer.Option(help="prompt tokens P per sequence")] = 1024,
    gen: Annotated[int, typer.Option(help="generated tokens G per sequence")] = 256,
    dtype: Dtype = "bf16",
    ceiling: Ceiling = "achievable",
    output: TextOutput = None,
    text: TextFlag = False,
    specs_dir: SpecsDir = None,
) -> None:
    """Latency-throughput frontier over batch sizes (one curve per model x device)."""
    _check_ceiling(ceiling)
    batches = int_list(batch, "batch size")
    specs = [load_model(m, specs_dir or ()) for m in models]
    devices = [load_hardware(h, specs_dir or ()) for h in hardware]
    estimates = [estimate(m, hw, batches, positive(prompt, "--prompt"), positive(gen, "--gen"),
                          Precision.uniform(dtype), ceiling)  # type: ignore[arg-type]
                 for m in specs for hw in devices]
    if output is not None:
        _saved(plots.save(plots.frontier_chart(estimates), output))
    if output is None or text:
        console.print(frontier_table(estimates))


@plot_app.command("kv")
def kv_cmd(
    models: Models,
    output: Output,
    hardware: Devices = ["h100-sxm"],  # noqa: B006 (typer reads the default, never mutates it)
    batch: Annotated[int, typer.Option(help="sequences B held at once")] = 1,
    dtype: Annotated[str, typer.Option(help="KV cache format")] = "bf16",
    specs_dir: SpecsDir = None,
) -> None:
    """KV cache / state memory vs context length for several models (windows, MLA latents
    and SSM state included), with device memory lines."""
    curves = [kv_curve(load_model(m, specs_dir or ()), Precision(kv=dtype),
                       positive(batch, "--batch")) for m in models]
    devices = [load_hardware(h, specs_dir or ()) for h in hardware]
    _saved(plots.save(plots.kv_chart(curves, devices), output))
