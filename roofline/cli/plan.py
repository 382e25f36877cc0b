"""`roofline plan`: the cheapest deployment meeting a p95 TTFT/TPOT SLO at an arrival rate,
the cost/latency Pareto frontier, why the rest fails, and the commands that reproduce it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from ..errors import InvalidInputError
from ..plan import PlanResult, Requirement, Space, default_hardware, plan, precision_of
from ..serve.workload import from_trace
from ..spec.catalog import load_hardware, load_model
from ..studies.economics import parse_price_options
from . import app, common
from .common import JsonFlag, SpecsDir, int_list, print_json

Opt = typer.Option


def _names(text: str) -> tuple[str, ...]:
    return tuple(common.comma_items(text, "--hardware"))


def plan_formats(text: str) -> tuple[str, ...]:
    """`--formats`: formats separated by commas, a `group=format` item belonging to the format
    before it: 'bf16,experts=mxfp4,fp8' is (bf16 with MXFP4 experts) and fp8."""
    out: list[str] = []
    for item in common.comma_items(text, "--formats"):
        if "=" in item.split("/")[0]:
            if not out:
                raise InvalidInputError(
                    f"--formats: '{item}' names a tensor group before any format; "
                    "write the base format first, e.g. bf16,experts=mxfp4"
                )
            out[-1] = f"{out[-1]},{item}"
        else:
            out.append(item)
    return tuple(out)


def released_format(m) -> str:
    """The plan format of the model as released: its weights, and its KV when the format's
    shorthand would give another (DeepSeek-V3: fp8 weights and activations, a bf16 KV)."""
    from ..spec.precision import Precision, released

    p = released(m)
    return p.weights if Precision.uniform(p.weights).kv == p.kv else f"{p.weights}/{p.kv}"


def run_plan(
    model: str,
    rate: float | None,
    prompt: int,
    gen: int,
    trace: Path | None,
    slo_ttft: float,
    slo_tpot: float,
    hardware: str | None,
    max_gpus: int,
    formats: str,
    prices: list[str],
    tier: str,
    max_batches: str,
    serving: str,
    confirm_top: int,
    requests: int,
    seed: int,
    ceiling: str,
    engine: str,
    specs_dir: list[Path] | None,
    confidence: float = 0.0,
) -> PlanResult:
    """Parse and load everything `plan` needs, then call the core (shared with `plot plan`)."""
    roof, price_tier = common.ceiling(ceiling), common.price_tier(tier)
    dirs = specs_dir or ()
    m = load_model(model, dirs)
    table = parse_price_options(prices)
    if hardware is not None and not _names(hardware):
        raise InvalidInputError(
            "--hardware is empty; name the devices to search, or leave it out to search every "
            "priced device"
        )
    names = _names(hardware) if hardware else default_hardware(table, price_tier)
    loaded = [load_hardware(h, dirs) for h in names]
    # one device once, however it was named (an alias, a repeat)
    devices = list({d.name: d for d in loaded}.values())
    common.check_price_names(table, [d.name for d in devices])
    workload = None
    if trace is not None:
        if rate is not None:
            raise InvalidInputError("--trace sets the arrivals; drop --rate")
        workload = from_trace(trace)
        workload.check(m.max_context, m.name)
        span = float(workload.arrival_s.max() - workload.arrival_s.min())
        if workload.requests < 2 or span <= 0:
            raise InvalidInputError(f"{trace}: a trace needs at least two arrival times")
        rate = (workload.requests - 1) / span
        prompt = int(round(float(workload.input_tokens.mean())))
        gen = max(2, int(round(float(workload.output_tokens.mean()))))
    if rate is None:
        raise InvalidInputError("give --rate (requests per second) or --trace")
    if prompt + gen > m.max_context:
        common.NOTES.append(
            f"warning: prompt + gen = {prompt + gen:,} tokens exceed {m.name}'s trained context "
            f"of {m.max_context:,}; planned anyway (engines run past it with rope scaling)"
        )
    req = Requirement(rate, prompt, gen, slo_ttft, slo_tpot, confidence or None)
    asked = plan_formats(formats)
    mine = released_format(m)
    space = Space(
        tuple(d.name for d in devices),
        asked if mine in asked else (mine, *asked),
        max_gpus,
        *_max_batches(max_batches),
        serving=serving,  # type: ignore[arg-type]  # Space refuses an unknown one
        tier=price_tier,
        ceiling=roof,
    )
    eng = common.engine(engine, specs_dir)
    return plan(m, devices, req, space, table, workload, confirm_top, requests, seed, eng)


def _max_batches(text: str) -> tuple[tuple[int, ...], bool]:
    """'8,64,max' -> ((8, 64), True): the integers, and whether `max` (each replica's batch
    max, as `estimate --batch max`) is tried too."""
    items = [v.lower() for v in common.comma_items(text, "--max-batches")]
    asked_max = "max" in items
    rest = ",".join(v for v in items if v != "max")
    return (tuple(int_list(rest, "max batch")) if rest or not asked_max else ()), asked_max


def commands(r: PlanResult) -> tuple[str, ...]:
    """The `roofline estimate` and `roofline serve` command lines that reproduce the chosen
    deployment (none when nothing was chosen): the same engine, ceiling, workload and seed."""
    c, req = r.chosen, r.requirement
    if c is None:
        return ()
    p = precision_of(c.fmt)
    fmt = f"--weights {p.weights} --activations {p.activations}"
    par = c.parallel
    lay = "".join(
        f" --{k} {v}" for k, v in (("tp", par.tp), ("pp", par.pp), ("ep", par.ep)) if v > 1
    )
    n = max(1, round(c.concurrency))
    ceiling, engine = r.space.ceiling, r.engine
    est = (
        f"roofline estimate {r.model} --hardware {c.hardware}{lay} {fmt} --kv-format {p.kv} "
        f"--prompt {req.prompt_tokens} --gen {req.gen_tokens} --batch 1,{n},{c.max_batch} "
        f"--ceiling {ceiling} --engine {engine}"
    )
    serve = (
        f"roofline serve {r.model} --hardware {c.hardware}{lay} {fmt} --kv-format {p.kv} "
        f"--rate {req.rate_per_s:g} --requests {r.requests} --arrivals poisson "
        f"--lengths fixed --prompt {req.prompt_tokens} --gen "
        f"{req.gen_tokens} --seed {r.seed} --max-seqs {c.max_batch} "
        f"--slo-ttft {req.slo_ttft_s:g} --slo-tpot "
        f"{req.slo_tpot_s:g} --ceiling {ceiling} --engine {engine}"
    )
    if c.kind == "aggregated":
        serve += f" --replicas {c.replicas}"
        return est, serve
    serve += (
        f" --policy disaggregated --prefill-hardware {c.prefill_hardware} "
        f"--decode-hardware {c.hardware} --prefill-replicas {c.prefill_replicas} "
        f"--decode-replicas {c.replicas}"
    )
    pre = est.replace(f"--hardware {c.hardware}", f"--hardware {c.prefill_hardware}").replace(
        f"--batch 1,{n},{c.max_batch}", "--batch 1"
    )
    return pre, est, serve


def _ms(x: float) -> str:
    return "—" if not np.isfinite(x) else f"{x * 1e3:.1f} ms"


def _s(x: float) -> str:
    return "—" if not np.isfinite(x) else f"{x:.3f} s"


def _interval_line(iv: dict) -> str:
    """The chosen deployment's intervals: simulated p95 TTFT and TPOT, cost."""
    ttft, tpot = iv["ttft_p95_s"]["simulated"], iv["tpot_p95_s"]["simulated"]
    cost = iv["cost_per_million_tokens_usd"]["analytic"]
    return (
        f"its {iv['tpot_p95_s']['coverage']:.0%} intervals: p95 TTFT {_s(ttft['low'])}–"
        f"{_s(ttft['high'])}, p95 TPOT {_ms(tpot['low'])}–{_ms(tpot['high'])} (simulated), "
        f"${cost['low']:.3f}–{cost['high']:.3f} per million output tokens (TPOT: "
        f"{iv['tpot_p95_s']['basis']})"
    )


def render(r: PlanResult, frontier_rows: int) -> None:
    from rich.table import Table

    from .common import console

    q = r.requirement
    console.print(
        f"[bold]{r.model}[/]: {q.rate_per_s:g} req/s Poisson, P = {q.prompt_tokens}, G = "
        f"{q.gen_tokens}; SLO p95 TTFT ≤ {q.slo_ttft_s:g} s, TPOT ≤ {q.slo_tpot_s * 1e3:g} ms; "
        f"{r.space.ceiling} ceiling, engine {r.engine}, {r.space.tier} prices. Screened "
        f"{r.configurations:,} configurations analytically in {r.analytic_s:.2f} s; "
        f"simulated {len(r.confirmed)} in {r.simulated_s:.2f} s."
    )
    if q.confidence:
        console.print(
            f"SLO checked against the upper end of the {q.confidence:.0%} interval of TTFT and "
            "TPOT (the published residuals of each candidate's engine, GPUs and vendor; "
            "docs/accuracy.md), analytic and simulated alike; the tables show central values."
        )
    c = r.chosen
    if c is None and not r.confirmed:
        best = next((x for x in r.frontier if x.status == "meets SLO"), None)
        console.print(
            "[yellow]no candidate was simulated[/] (`--confirm 0`, or the simulator refused "
            "every one: see below)"
            + (f"; the cheapest that meets the SLO analytically: {best.label}" if best else ""),
            highlight=False,
        )
    elif c is None:
        console.print(
            "[red]none of the cheapest analytically feasible candidates met the SLO "
            "in the simulator[/]; see the confirmation table"
        )
    else:
        assert c.sim is not None
        console.print(
            f"[bold green]chosen[/]: {c.label} — {c.gpus} GPUs, ${c.usd_per_hour:.2f}/h, "
            f"${c.cost_per_million_tokens_usd:.3f} per million output tokens, "
            f"{c.joules_per_token:.3f} J/token; p95 TTFT {_s(c.ttft_p95_s)} analytic / "
            f"{_s(c.sim.ttft_p95_s)} simulated, p95 TPOT {_ms(c.tpot_p95_s)} / "
            f"{_ms(c.sim.tpot_p95_s)}"
        )
    if c is not None and c.intervals:
        console.print(_interval_line(c.intervals), highlight=False)
    if r.robust_choice:
        console.print(common.with_flags(r.robust_choice), highlight=False)
    t = Table(title="simulator confirmation of the cheapest analytic candidates")
    for col in (
        "deployment",
        "$/M tok",
        "J/tok",
        "TTFT p95 analytic",
        "TTFT p95 sim",
        "TPOT p95 analytic",
        "TPOT p95 sim",
        "meets SLO (sim)",
    ):
        t.add_column(col, justify="left" if col == "deployment" else "right")
    for x in r.confirmed:
        s = x.sim
        assert s is not None
        t.add_row(
            x.label,
            f"{x.cost_per_million_tokens_usd:.3f}",
            f"{x.joules_per_token:.3f}",
            _s(x.ttft_p95_s),
            _s(s.ttft_p95_s),
            _ms(x.tpot_p95_s),
            _ms(s.tpot_p95_s),
            "yes" if s.meets_slo else "no",
        )
    console.print(t)
    for label, why in r.unconfirmed:
        console.print(f"not simulated: {label} — {common.with_flags(why)}", highlight=False)
    f = Table(
        title=f"Pareto frontier: cost vs p95 TPOT and TTFT (analytic; "
        f"{min(frontier_rows, len(r.frontier))} of {len(r.frontier)} rows)"
    )
    for col in ("$/M tok", "TPOT p95", "TTFT p95", "J/tok", "deployment", "SLO"):
        f.add_column(col, justify="left" if col in ("deployment", "SLO") else "right")
    for x in r.frontier[:frontier_rows]:
        f.add_row(
            f"{x.cost_per_million_tokens_usd:.3f}",
            _ms(x.tpot_p95_s),
            _s(x.ttft_p95_s),
            f"{x.joules_per_token:.3f}",
            x.label,
            x.status,
        )
    console.print(f)
    j = Table(
        title="rejected regions: screened points per device and first failing reason "
        "(memory: weights and unsupported count layouts)"
    )
    for col in ("device", "reason", "points", "closest"):
        j.add_column(col, justify="right" if col == "points" else "left")
    for region in r.rejected:
        j.add_row(region.hardware, region.reason, f"{region.points:,}", region.closest)
    console.print(j)
    if cmds := commands(r):
        console.print("reproduce the chosen deployment:")
        for cmd in cmds:
            console.print(f"  {cmd}", soft_wrap=True, highlight=False)
    for hw, cite in r.prices.items():
        console.print(f"price {hw}: {cite}", highlight=False)


@app.command("plan")
def plan_cmd(
    model: Annotated[str, typer.Argument(help="model name, alias, or YAML path")],
    rate: common.PlanRate = None,
    prompt: common.PlanPrompt = 1024,
    gen: common.PlanGen = 256,
    trace: Annotated[
        Path | None,
        Opt(
            help="CSV/JSONL trace (arrival_s, input_tokens, "
            "output_tokens): its arrivals and mean lengths"
        ),
    ] = None,
    slo_ttft: common.P95Ttft = common.PLAN_SLO_TTFT,
    slo_tpot: common.P95Tpot = common.PLAN_SLO_TPOT,
    hardware: common.PlanDevices = None,
    max_gpus: common.MaxGpus = common.MAX_GPUS_SEARCHED,
    formats: common.Formats = common.FORMATS,
    price: common.Price = None,
    price_tier: Annotated[str, Opt(help="on-demand or discounted")] = "on-demand",
    max_batches: common.MaxBatches = common.MAX_BATCHES,
    serving: common.Serving = "both",
    confirm_top: Annotated[
        int,
        Opt("--confirm", help="candidates the simulator checks", callback=common.in_range(0, 1000)),
    ] = 10,
    requests: common.Requests = common.REQUESTS,
    seed: Annotated[
        int,
        Opt(
            help="random seed of the simulated arrivals",
            callback=common.in_range(0, common.MAX_SEED),
        ),
    ] = 0,
    ceiling: common.Ceiling = "achievable",
    engine: common.EngineOpt = common.DEFAULT_ENGINE,
    frontier_rows: Annotated[
        int, Opt(help="frontier rows printed (JSON: all)", callback=common.in_range(0, 10**6))
    ] = 15,
    confidence: Annotated[
        float,
        Opt(
            help="check the SLO against the upper end of the TTFT/TPOT interval of this "
            "coverage (0.9: the robust choice); 0: the central p95",
            callback=common.in_range(0, 0.99),
        ),
    ] = 0.0,
    json_out: JsonFlag = False,
    specs_dir: SpecsDir = None,
) -> None:
    """Search devices × formats × TP/PP/EP × max batch × replicas (and disaggregated pools)
    for the cheapest deployment meeting the SLO at the rate; confirm it in the simulator."""
    r = run_plan(
        model,
        rate,
        prompt,
        gen,
        trace,
        slo_ttft,
        slo_tpot,
        hardware,
        max_gpus,
        formats,
        price or [],
        price_tier,
        max_batches,
        serving,
        confirm_top,
        requests,
        seed,
        ceiling,
        engine,
        specs_dir,
        confidence,
    )
    if json_out:
        print_json({**r.as_dict(), "commands": list(commands(r))})
    else:
        render(r, frontier_rows)
