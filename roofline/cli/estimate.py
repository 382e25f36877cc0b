"""`roofline estimate`: TTFT, TPOT, E2E, throughput and memory for a model on a device."""

from __future__ import annotations

from typing import Annotated

import typer

from ..catalog import load_hardware, load_model
from ..cost import CEILINGS
from ..errors import DoesNotFitError, InvalidInputError
from ..phases import estimate as run_estimate
from ..precision import Precision
from ..units import si
from . import app, common
from .common import JsonFlag, SpecsDir, int_list, positive, print_json

ModelArg = Annotated[str, typer.Argument(help="model name, alias, or path to a YAML spec")]
HardwareOpt = Annotated[str, typer.Option("--hardware", "-h",
                                          help="device name, alias, or path to a YAML spec")]


@app.command()
def estimate(
    model: ModelArg = "llama-3.1-8b",
    hardware: HardwareOpt = "h100-sxm",
    batch: Annotated[str, typer.Option(help="batch sizes B, comma-separated")] = "1,16,64",
    prompt: Annotated[int, typer.Option(help="prompt tokens P per sequence")] = 1024,
    gen: Annotated[int, typer.Option(help="generated tokens G per sequence")] = 256,
    dtype: Annotated[str, typer.Option(help="weights, activations and KV format")] = "bf16",
    ceiling: Annotated[str, typer.Option(
        help="datasheet (speed of light) or achievable")] = "achievable",
    breakdown: Annotated[bool, typer.Option(
        help="per-operator FLOPs, bytes, intensity, bound")] = False,
    json_out: JsonFlag = False,
    specs_dir: SpecsDir = None,
) -> None:
    """Estimate prefill and decode latency, throughput and memory per batch size."""
    if ceiling not in CEILINGS:
        raise InvalidInputError(f"unknown ceiling '{ceiling}'; use one of: {', '.join(CEILINGS)}")
    m = load_model(model, specs_dir or ())
    hw = load_hardware(hardware, specs_dir or ())
    e = run_estimate(m, hw, int_list(batch, "batch size"), positive(prompt, "--prompt"),
                     positive(gen, "--gen"), Precision.uniform(dtype), ceiling)
    if json_out:
        print_json(e.as_dict())
    else:
        from ..report import breakdown_table, estimate_table

        common.console.print(estimate_table(e))
        if breakdown:
            b, p = e.cases[0].batch, e.cases[0].prompt_tokens
            common.console.print(breakdown_table(f"prefill: B={b}, T={p}, S=0", e.prefill))
            title = f"decode (first step): B={b}, T=1, S={p}"
            common.console.print(breakdown_table(title, e.decode))
    too_big = [c for c in e.cases if not c.fits]
    if too_big:
        c = too_big[0]
        raise DoesNotFitError(
            f"batch {c.batch} needs {si(c.memory_bytes, 'B')} but {hw.name} has "
            f"{si(hw.memory_bytes, 'B')}; the largest batch that fits at "
            f"{c.prompt_tokens + c.gen_tokens} tokens is {e.max_batch}: lower --batch, "
            "shorten --prompt/--gen, or use a smaller format")
