"""`roofline estimate`: TTFT, TPOT, E2E, throughput and memory for a model on a device."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

import typer

from ..calc.phases import estimate as run_estimate
from ..calc.phases import first_token_split
from ..calc.placement import Parallel
from ..spec.catalog import load_hardware, load_model
from . import app, common
from .common import (
    JsonFlag,
    MemoryFraction,
    PrefillTokenBudget,
    RequireFit,
    SpecsDir,
    positive,
    print_json,
    warn,
)

Opt = typer.Option


@app.command()
def estimate(
    model: Annotated[
        str, typer.Argument(help="model name, alias, or path to a YAML spec")
    ] = "llama-3.1-8b",
    hardware: common.Hardware = "h100-sxm",
    batch: Annotated[
        str,
        Opt(
            help="batch sizes B per replica, comma-separated; `max` is the most the engine runs "
            "at prompt+gen tokens (its KV pool and max_num_seqs)"
        ),
    ] = "1,16,64",
    prompt: common.Prompt = 1024,
    gen: common.Gen = 256,
    dtype: Annotated[
        str | None,
        Opt(
            help="shorthand for weights, activations and KV format (a weight-only format keeps "
            "bf16 activations and KV; default: as the model is released)"
        ),
    ] = None,
    weights: common.Weights = None,
    activations: common.Activations = None,
    kv_format: common.KvFormat = None,
    kv: common.KvAlias = None,
    tp: common.Tp = 1,
    pp: common.Pp = 1,
    ep: common.Ep = 1,
    replicas: Annotated[
        int,
        Opt(
            help="independent copies (throughput ×m)", callback=common.in_range(1, common.MAX_GPUS)
        ),
    ] = 1,
    ceiling: common.Ceiling = "achievable",
    engine: common.EngineOpt = common.DEFAULT_ENGINE,
    breakdown: Annotated[bool, Opt(help="per-operator FLOPs, bytes, intensity, bound")] = False,
    memory_fraction: MemoryFraction = None,
    prefill_token_budget: PrefillTokenBudget = None,
    require_fit: RequireFit = False,
    price: common.Price = None,
    price_tier: Annotated[str, Opt(help="on-demand or discounted")] = "on-demand",
    utilisation: Annotated[
        float,
        Opt(
            help="share of the time the GPUs serve batches back to "
            "back (idle the rest): sets cost and energy per token",
            callback=common.in_range(0, 1, open_low=True),
        ),
    ] = 1.0,
    power_cap: Annotated[
        float | None,
        Opt(
            "--power-cap",
            help="run each GPU under this power limit, W (default: its TDP): a step whose "
            "modelled power would exceed it runs its compute at a lower clock, and takes longer",
            callback=common.in_range(0, open_low=True),
        ),
    ] = None,
    interval: common.Interval = 0.8,
    json_out: JsonFlag = False,
    specs_dir: SpecsDir = None,
) -> None:
    """Estimate prefill and decode latency, throughput and memory per batch size."""
    m = load_model(model, specs_dir or ())
    hw = load_hardware(hardware, specs_dir or ())
    precision = common.precision(dtype, weights, activations, common.kv_format(kv_format, kv), m)
    stack = common.stack(
        m,
        hw,
        precision,
        ceiling,
        engine,
        specs_dir,
        Parallel(tp, pp, ep, replicas),
        memory_fraction=memory_fraction,
        prefill_token_budget=prefill_token_budget,
    )
    e = run_estimate(
        m,
        stack,
        common.batch_list(batch),
        positive(prompt, "--prompt"),
        positive(gen, "--gen"),
    )
    if power_cap is not None:
        from ..calc.phases import capped_estimate

        e = capped_estimate(e, power_cap)
    warn(e.warnings)
    from ..studies.economics import parse_price_options, priced_estimate

    prices = parse_price_options(price or [])
    common.check_price_names(prices, [hw.name])
    econ = priced_estimate(e, prices, common.price_tier(price_tier), utilisation, power_cap)
    econ = replace(econ, price_source=common.with_flags(econ.price_source))
    if json_out:
        out = e.as_dict(interval or None) | {"economics": econ.as_dict(e, interval or None)}
        if power_cap is not None:
            out["power_cap_w"] = power_cap
        if breakdown:
            out["breakdown"] = e.breakdown_dict()
        print_json(out)
    else:
        from ..render.report import breakdown_table, estimate_table, fit_lines, memory_table

        common.console.print(estimate_table(e, econ, interval or None))
        if e.batch_max is not None:
            bm = e.batch_max
            bound = (
                f"the engine's max_num_seqs ({bm['max_num_seqs']:,}; {bm['fits_in_memory']:,} "
                "would fit in memory)"
                if bm["binding"] == "max_num_seqs"
                else f"memory ({bm['binding']})"
            )
            common.console.print(f"batch max = {bm['batch']:,}: bound by {bound}.")
        for line in fit_lines(e):
            common.console.print(common.with_flags(line))
        if breakdown:
            common.console.print(memory_table(e.fit, e.hardware.display_name))
            b, P = e.cases[0].batch, e.cases[0].prompt_tokens
            par = e.parallel
            rank = "" if par.tp == 1 else f" (one of {par.tp} TP ranks)"
            if par.ep > 1:
                rank = (
                    f" (one of {par.ep} EP ranks: attention of "
                    f"{int(e.prefill.step.batch)} sequence(s), 1/{par.ep} of the experts)"
                )
            T = P - first_token_split(e.stack, P)
            common.console.print(
                breakdown_table(f"prefill: B={b}, T={T}, S=0{rank}", e.prefill, e.prefill_comm_s)
            )
            if T < P:
                common.console.print(
                    f"TTFT = this prefill + one decode step over the last prompt token "
                    f"(S={P - 1}): {e.engine.name if e.engine else ''} yields the first token "
                    "from a decode step (first_token in `roofline engines show`)"
                )
            common.console.print(
                breakdown_table(
                    f"decode (first step): B={b}, T=1, S={P}{rank}", e.decode, e.decode_comm_s
                )
            )
    if require_fit and e.shortfall is not None:
        e.shortfall.require(m.name, hw.name)
