"""`roofline kv`: KV cache or recurrent state per token and per sequence, side by side."""

from __future__ import annotations

from typing import Annotated

import typer

from ..catalog import load_hardware, load_model
from ..memory import cache_summary, memory_terms
from ..parallel import Parallel
from ..precision import Precision
from ..report import kv_table
from . import app, common
from .common import (
    JsonFlag,
    MemoryFraction,
    PrefillTokenBudget,
    SpecsDir,
    console,
    positive,
    print_json,
    token_budget,
    warn,
)


@app.command()
def kv(
    models: Annotated[list[str], typer.Argument(help="model names, aliases, or YAML paths")],
    context: Annotated[int, typer.Option(help="context S per sequence, tokens")] = 4096,
    hardware: Annotated[str, typer.Option("--hardware", "-h", help="device name or YAML path")
                        ] = "h100-sxm",
    kv_dtype: Annotated[str, typer.Option(help="KV cache / state format")] = "bf16",
    weights_dtype: Annotated[str, typer.Option(help="weights format (for what fits)")] = "bf16",
    tp: Annotated[int, typer.Option(help="tensor-parallel GPUs")] = 1,
    pp: Annotated[int, typer.Option(help="pipeline-parallel stages")] = 1,
    ep: Annotated[int, typer.Option(help="expert-parallel GPUs (MoE models)")] = 1,
    engine: common.EngineOpt = common.DEFAULT_ENGINE,
    memory_fraction: MemoryFraction = None,
    prefill_token_budget: PrefillTokenBudget = None,
    json_out: JsonFlag = False,
    specs_dir: SpecsDir = None,
) -> None:
    """Compare what each model keeps per token and per sequence, and what fits beside it."""
    positive(context, "--context")
    hw = load_hardware(hardware, specs_dir or ())
    p = Precision(weights=weights_dtype, activations="bf16", kv=kv_dtype)
    par = Parallel(tp, pp, ep)
    fraction, budget = memory_terms(common.engine(engine, specs_dir), "achievable",
                                    memory_fraction, token_budget(prefill_token_budget))
    rows = [cache_summary(load_model(m, specs_dir or ()), hw, p, context, par,
                          memory_fraction=fraction, prefill_token_budget=budget)
            for m in models]
    warn([w for r in rows for w in r.warnings])
    if json_out:
        print_json([r.as_dict() for r in rows])
    else:
        console.print(kv_table(rows, hw.display_name))
