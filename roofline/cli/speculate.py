"""`roofline speculate`: speed-up of speculative decoding with a draft model or draft heads."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from ..catalog import load_hardware, load_model
from ..cost import CEILINGS
from ..errors import InvalidInputError
from ..precision import Precision
from ..speculative import (
    Drafter,
    best_k,
    break_even_acceptance,
    check_acceptance,
    speculative_cost,
)
from ..units import seconds
from . import app, common
from .common import JsonFlag, SpecsDir, console, int_list, print_json

Opt = typer.Option


def k_values(text: str) -> list[int]:
    """'1..8' -> [1, ..., 8]; '1,2,4' -> [1, 2, 4]."""
    if ".." in text:
        lo, _, hi = text.partition("..")
        try:
            values = list(range(int(lo), int(hi) + 1))
        except ValueError:
            raise InvalidInputError(f"--k must look like 1..8 or 1,2,4, got '{text}'") from None
        if not values:
            raise InvalidInputError(f"--k range '{text}' is empty")
        return int_list(",".join(map(str, values)), "--k")
    return int_list(text, "--k")


def probabilities(text: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise InvalidInputError(f"--acceptance must be comma-separated numbers, got '{text}'"
                                ) from None
    for v in values:
        check_acceptance(v)
    if not values:
        raise InvalidInputError("give at least one acceptance rate")
    return values


@app.command()
def speculate(
    target: Annotated[str, typer.Argument(help="target model name, alias or YAML path")],
    draft: Annotated[str | None, Opt(help="draft model (same vocabulary as the target)")] = None,
    heads: Annotated[float | None, Opt(
        help="draft-free heads (Medusa/EAGLE) instead of a draft: cost of one head as a "
             "fraction of one target layer")] = None,
    hardware: Annotated[str, Opt("--hardware", "-h", help="device name, alias, or YAML path")
                        ] = "h100-sxm",
    k: Annotated[str, Opt("--k", help="draft tokens per step K: a range 1..8 or a list")
                 ] = "1..8",
    acceptance: Annotated[str, Opt(help="per-token acceptance rates α, comma-separated")
                          ] = "0.6,0.85",
    batch: Annotated[str, Opt(help="batch sizes B, comma-separated")] = "1",
    context: Annotated[int, Opt(help="cached tokens S when the cycle runs")] = 1024,
    dtype: Annotated[str, Opt(help="weights, activations and KV format of both models")
                     ] = "bf16",
    ceiling: Annotated[str, Opt(help="datasheet (speed of light) or achievable")] = "achievable",
    engine: common.EngineOpt = common.DEFAULT_ENGINE,
    json_out: JsonFlag = False,
    specs_dir: SpecsDir = None,
) -> None:
    """Expected tokens per target step, speed-up, best K and break-even acceptance."""
    if ceiling not in CEILINGS:
        raise InvalidInputError(f"unknown ceiling '{ceiling}'; use one of: {', '.join(CEILINGS)}")
    if (draft is None) == (heads is None):
        raise InvalidInputError("give --draft MODEL or --heads FRACTION (one of them)")
    t = load_model(target, specs_dir or ())
    drafter = Drafter(model=load_model(draft, specs_dir or ()) if draft else None,
                      head_layer_fraction=heads)
    hw = load_hardware(hardware, specs_dir or ())
    ks, alphas, batches = k_values(k), probabilities(acceptance), int_list(batch, "batch size")
    precision = Precision.uniform(dtype)
    eng = common.engine(engine, specs_dir) if ceiling == "achievable" else None
    args = dict(hw=hw, context=context, precision=precision, ceiling=ceiling, engine=eng)
    grid = {(b, a): [speculative_cost(t, drafter, k=kk, acceptance=a, batch=b, **args)
                     for kk in ks] for b in batches for a in alphas}
    even = {(b, kk): break_even_acceptance(t, drafter, k=kk, batch=b, **args)
            for b in batches for kk in ks}
    drafted_by = drafter.model.name if drafter.model else f"heads at {heads} of a layer each"
    if json_out:
        print_json({
            "target": t.name, "draft": drafted_by, "hardware": hw.name, "context": context,
            "precision": precision.weights, "ceiling": ceiling,
            "engine": eng.name if eng else None,
            "cases": [{"batch": b} | c.as_dict() for (b, _), cs in grid.items() for c in cs],
            "best_k": [{"batch": b, "acceptance": a, "best_k": best_k(cs),
                        "speedup": max(c.speedup for c in cs)} for (b, a), cs in grid.items()],
            "break_even_acceptance": [{"batch": b, "k": kk, "acceptance": v}
                                      for (b, kk), v in even.items()],
        })
        return
    for b in batches:
        first = grid[(b, alphas[0])][0]
        table = Table(title=f"speculative decoding: {t.display_name} drafted by {drafted_by} "
                            f"on {hw.display_name}, B={b}, S={context}, {dtype}; plain target "
                            f"step {seconds(first.target_step_s)}")
        table.add_column("K", justify="right")
        table.add_column("draft", justify="right")
        table.add_column("verify", justify="right")
        for a in alphas:
            table.add_column(f"tokens/step α={a}", justify="right")
            table.add_column(f"speed-up α={a}", justify="right")
        table.add_column("break-even α", justify="right")
        for i, kk in enumerate(ks):
            row = [str(kk), seconds(grid[(b, alphas[0])][i].draft_s),
                   seconds(grid[(b, alphas[0])][i].verify_s)]
            for a in alphas:
                c = grid[(b, a)][i]
                row += [f"{c.expected_tokens_per_step:.2f}", f"{c.speedup:.2f}×"]
            v = even[(b, kk)]
            row.append("never pays" if v is None else f"{v:.2f}")
            table.add_row(*row)
        console.print(table)
        console.print("best K: " + ", ".join(
            f"α={a}: K={best_k(grid[(b, a)])} ({max(c.speedup for c in grid[(b, a)]):.2f}×)"
            for a in alphas))
