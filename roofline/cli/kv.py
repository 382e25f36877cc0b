"""`roofline kv`: KV cache or recurrent state per token and per sequence, side by side."""

from __future__ import annotations

from typing import Annotated

import typer

from ..catalog import load_hardware, load_model
from ..memory import cache_summary
from ..precision import Precision
from ..report import kv_table
from . import app, common
from .common import JsonFlag, SpecsDir, console, positive, print_json


@app.command()
def kv(
    models: Annotated[list[str], typer.Argument(help="model names, aliases, or YAML paths")],
    context: common.Context = 4096,
    hardware: common.Hardware = "h100-sxm",
    kv_dtype: Annotated[str, typer.Option("--kv-format", "--kv-dtype",
                                          help="KV cache / state number format")] = "bf16",
    weights_dtype: Annotated[str, typer.Option("--weights", "--weights-dtype",
                                               help="weights format (for what fits)")] = "bf16",
    kv: common.KvAlias = None,
    json_out: JsonFlag = False,
    specs_dir: SpecsDir = None,
) -> None:
    """Compare what each model keeps per token and per sequence, and what fits beside it."""
    positive(context, "--context")
    hw = load_hardware(hardware, specs_dir or ())
    p = Precision(weights=weights_dtype, activations="bf16",
                  kv=common.kv_format(None, kv) or kv_dtype)
    rows = [cache_summary(load_model(m, specs_dir or ()), hw, p, context) for m in models]
    if json_out:
        print_json([r.as_dict() for r in rows])
    else:
        console.print(kv_table(rows, hw.display_name))
