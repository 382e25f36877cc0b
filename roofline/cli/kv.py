"""`roofline kv`: KV cache or recurrent state per token and per sequence, side by side."""

from __future__ import annotations

from typing import Annotated

import typer

from ..calc.memory import cache_summary
from ..calc.placement import Parallel
from ..render.report import kv_table
from ..spec.catalog import load_hardware, load_model
from . import app, common
from .common import (
    JsonFlag,
    MemoryFraction,
    PrefillTokenBudget,
    SpecsDir,
    console,
    positive,
    print_json,
    warn,
)


@app.command()
def kv(
    models: Annotated[list[str], typer.Argument(help="model names, aliases, or YAML paths")],
    context: common.Context = 4096,
    hardware: common.Hardware = "h100-sxm",
    kv_dtype: Annotated[
        str, typer.Option("--kv-format", "--kv-dtype", help="KV cache / state number format")
    ] = "bf16",
    weights_dtype: Annotated[
        str | None,
        typer.Option(
            "--weights",
            "--weights-dtype",
            help="weights format, for what fits (default: each model as released)",
        ),
    ] = None,
    kv: common.KvAlias = None,
    tp: common.Tp = 1,
    pp: common.Pp = 1,
    ep: common.Ep = 1,
    engine: common.EngineOpt = common.DEFAULT_ENGINE,
    memory_fraction: MemoryFraction = None,
    prefill_token_budget: PrefillTokenBudget = None,
    json_out: JsonFlag = False,
    specs_dir: SpecsDir = None,
) -> None:
    """Compare what each model keeps per token and per sequence, and what fits beside it."""
    positive(context, "--context")
    hw = load_hardware(hardware, specs_dir or ())
    kv_format = common.kv_format(None, kv) or kv_dtype
    par = Parallel(tp, pp, ep)
    specs = [load_model(m, specs_dir or ()) for m in models]

    stacks = [
        common.stack(
            m,
            hw,
            common.precision(None, weights_dtype, None, kv_format, m),
            "achievable",
            engine,
            specs_dir,
            par,
            memory_fraction=memory_fraction,
            prefill_token_budget=prefill_token_budget,
        )
        for m in specs
    ]
    rows = [cache_summary(m, st, context) for m, st in zip(specs, stacks, strict=True)]
    warn([w for r in rows for w in r.warnings])
    if json_out:
        print_json(
            [
                common.header(r.model, st) | r.as_dict() | {"note": common.with_flags(r.note)}
                for r, st in zip(rows, stacks, strict=True)
            ]
        )
    else:
        console.print(kv_table(rows, hw.display_name))
