"""`roofline diffusion`: a diffusion LM's tokens/s against autoregressive decoding."""

from __future__ import annotations

from typing import Annotated

import typer

from ..render.report import diffusion_table
from ..spec.catalog import load_hardware, load_model
from ..studies.diffusion import compare_diffusion
from ..units import seconds
from . import app, common
from .common import JsonFlag, SpecsDir, console, print_json


@app.command()
def diffusion(
    model: Annotated[str, typer.Argument(help="model name, alias, or YAML path")] = "llada-8b",
    hardware: common.Hardware = "h100-sxm",
    prompt: common.Prompt = 512,
    gen: Annotated[
        int | None,
        typer.Option(
            help="answer tokens L (default: the spec's)",
            callback=common.in_range(1, common.MAX_TOKENS),
        ),
    ] = None,
    steps: Annotated[
        int | None,
        typer.Option(
            help="refinement steps N (default: the spec's)", callback=common.in_range(1, 10**6)
        ),
    ] = None,
    batch: Annotated[
        int, typer.Option(help="sequences B", callback=common.in_range(1, common.MAX_BATCH))
    ] = 1,
    dtype: Annotated[
        str | None,
        typer.Option(help="weights, activations and KV format (default: as released)"),
    ] = None,
    engine: common.EngineOpt = common.DEFAULT_ENGINE,
    interval: common.Interval = 0.8,
    json_out: JsonFlag = False,
    specs_dir: SpecsDir = None,
) -> None:
    """N full forwards over prompt + answer vs TTFT + (L-1)·TPOT of the same model."""
    m = load_model(model, specs_dir or ())
    hw = load_hardware(hardware, specs_dir or ())
    stack = common.stack(
        m, hw, common.precision(dtype, None, None, None, m), "achievable", engine, specs_dir
    )
    c = compare_diffusion(m, stack, prompt, gen, steps, batch)
    if json_out:
        bands = {"intervals": c.intervals(stack, interval)} if interval else {}
        print_json(common.header(c.model, stack) | c.as_dict() | bands)
    else:
        console.print(diffusion_table(c))
        if interval and (iv := c.intervals(stack, interval)):
            d, a = iv["diffusion_s"], iv["autoregressive_s"]
            console.print(
                f"{interval:.0%} intervals: diffusion {seconds(d['low'])}–{seconds(d['high'])}, "
                f"autoregressive {seconds(a['low'])}–{seconds(a['high'])} ({d['basis']})",
                highlight=False,
            )
