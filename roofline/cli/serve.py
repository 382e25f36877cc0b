"""`roofline serve`: simulate a serving stack on a workload and report latency percentiles,
throughput, goodput, KV use; compare policies or sweep the arrival rate."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from ..catalog import load_hardware, load_model
from ..cost import CEILINGS
from ..errors import InvalidInputError
from ..hardware import HardwareSpec
from ..memory import memory_terms
from ..model import ModelSpec
from ..parallel import Parallel
from ..serve.metrics import Summary
from ..serve.policy import POLICIES, Policy, policy
from ..serve.report import summary_table, sweep_table, timeline_lines
from ..serve.simulate import build_deployment, simulate
from ..serve.sweep import sweep_rate
from ..serve.workload import Lengths, from_trace, synthetic
from . import app, common
from .common import JsonFlag, SpecsDir, console, print_json

Opt = typer.Option


def prepare_runs(
    model: str,
    hardware: str,
    names: list[str],
    requests: int = 2000,
    arrivals: str = "poisson",
    lengths: str = "lognormal",
    input_tokens: int = 1024,
    output_tokens: int = 256,
    sigma: float = 0.8,
    trace: Path | None = None,
    prefix_tokens: int = 0,
    seed: int = 0,
    slo_ttft: float = 1.0,
    slo_tpot: float = 0.1,
    dtype: str = "bf16",
    ceiling: str = "achievable",
    specs_dir: list[Path] | None = None,
    max_seq_len: int | None = None,
    memory_fraction: float | None = None,
    replicas: int = 1,
    prefill_replicas: int = 1,
    decode_replicas: int = 1,
    prefill_hardware: str | None = None,
    decode_hardware: str | None = None,
    overrides: dict | None = None,
    weights: str | None = None,
    activations: str | None = None,
    kv_format: str | None = None,
    tp: int = 1,
    pp: int = 1,
    ep: int = 1,
    engine: str = common.DEFAULT_ENGINE,
) -> tuple[ModelSpec, HardwareSpec, list[Policy], Callable[[int, float], Summary]]:
    """Load the specs, policies and deployments once; `run(i, rate)` simulates policy i on the
    workload at `rate` and summarises it (shared by `serve` and `plot serve`)."""
    if ceiling not in CEILINGS:
        raise InvalidInputError(f"unknown ceiling '{ceiling}'; use one of: {', '.join(CEILINGS)}")
    dirs = specs_dir or ()
    m = load_model(model, dirs)
    hw = load_hardware(hardware, dirs)
    pre_hw = load_hardware(prefill_hardware, dirs) if prefill_hardware else None
    dec_hw = load_hardware(decode_hardware, dirs) if decode_hardware else None
    policies = [policy(n.strip()).with_overrides(**(overrides or {})) for n in names]
    prec = common.precision(dtype, weights, activations, kv_format)
    par = Parallel(tp, pp, ep)
    eng = common.engine(engine, specs_dir)
    fraction, _ = memory_terms(eng if ceiling == "achievable" else None, ceiling, memory_fraction)
    inputs = Lengths(
        lengths,
        input_tokens,
        high=m.max_context,
        sigma=sigma,  # type: ignore[arg-type]
        low=1,
        uniform_high=2 * input_tokens - 1,
    )
    outputs = Lengths(
        lengths,
        output_tokens,
        high=m.max_context,
        sigma=sigma,  # type: ignore[arg-type]
        low=1,
        uniform_high=2 * output_tokens - 1,
    )

    def workload(r: float):
        w = (
            from_trace(trace, prefix_tokens)
            if trace is not None
            else synthetic(
                requests,
                r,
                inputs,
                outputs,
                arrivals,
                seed,
                prefix_tokens,  # type: ignore[arg-type]
                m.max_context,
            )
        )
        if w.truncated:
            note = (
                f"note: {w.truncated} of {w.requests} generated requests cut to fit "
                f"{m.name}'s {m.max_context:,}-token context"
            )
            if note not in common.NOTES:
                common.NOTES.append(note)
        w.check(m.max_context, m.name)
        return w

    deployments = [
        build_deployment(
            m,
            hw,
            p,
            prec,
            ceiling,
            replicas,
            pre_hw,
            dec_hw,  # type: ignore[arg-type]
            prefill_replicas,
            decode_replicas,
            fraction,
            par,
            eng,
        )
        for p in policies
    ]

    def run(i: int, r: float) -> Summary:
        return Summary(
            simulate(workload(r), policies[i], deployments[i], max_seq_len), slo_ttft, slo_tpot
        )

    return m, hw, policies, run


@app.command()
def serve(
    model: Annotated[str, typer.Argument(help="model name, alias, or YAML path")] = "llama-3.1-8b",
    hardware: Annotated[
        str, Opt(*common.HARDWARE_FLAGS, help="device of every replica")
    ] = "h100-sxm",
    rate: Annotated[
        float, Opt(help="mean arrivals per second", callback=common.in_range(0, 1e6, open_low=True))
    ] = 5.0,
    requests: Annotated[
        int, Opt(help="requests to simulate", callback=common.in_range(1, common.MAX_REQUESTS))
    ] = 2000,
    arrivals: Annotated[str, Opt(help="poisson or fixed (equal gaps)")] = "poisson",
    lengths: Annotated[str, Opt(help="fixed, uniform (1..2·mean-1) or lognormal")] = "lognormal",
    input_tokens: common.MeanPrompt = 1024,
    output_tokens: common.MeanGen = 256,
    sigma: Annotated[
        float, Opt(help="lognormal shape σ", callback=common.in_range(0, 10, open_low=True))
    ] = 0.8,
    trace: Annotated[
        Path | None,
        Opt(
            help="CSV/JSONL trace: arrival_s, input_tokens, "
            "output_tokens[, prefix_id, prefix_tokens]"
        ),
    ] = None,
    prefix_tokens: Annotated[
        int,
        Opt(
            help="shared system-prompt tokens on every request "
            "(trace: default length of a prefix_id)",
            callback=common.in_range(0, common.MAX_TOKENS),
        ),
    ] = 0,
    seed: common.Seed = 0,
    policy_name: Annotated[str, Opt("--policy", help=", ".join(POLICIES))] = "continuous",
    compare: Annotated[str | None, Opt(help="comma-separated policies, same workload")] = None,
    max_seqs: Annotated[
        int | None,
        Opt(help="max sequences per step", callback=common.in_range(1, common.MAX_BATCH)),
    ] = None,
    token_budget: Annotated[
        int | None,
        Opt(help="max new tokens (B·T) per step", callback=common.in_range(1, common.MAX_TOKENS)),
    ] = None,
    kv: Annotated[str | None, Opt("--kv-layout", help="paged or contiguous KV allocation")] = None,
    kv_layout_alias: Annotated[
        str | None, Opt("--kv", hidden=True, help="deprecated: use --kv-layout")
    ] = None,
    block_size: Annotated[
        int | None, Opt(help="tokens per KV block (paged)", callback=common.in_range(1, 10**6))
    ] = None,
    preemption: Annotated[str | None, Opt(help="recompute or swap when KV runs out")] = None,
    prefix_caching: Annotated[
        bool | None, Opt("--prefix-caching/--no-prefix-caching", help="share prefix KV blocks")
    ] = None,
    router: Annotated[str | None, Opt(help="round-robin or least-loaded")] = None,
    replicas: Annotated[
        int, Opt(help="replicas behind the router", callback=common.in_range(1, common.MAX_GPUS))
    ] = 1,
    prefill_replicas: Annotated[
        int,
        Opt(help="disaggregated: prefill instances", callback=common.in_range(1, common.MAX_GPUS)),
    ] = 1,
    decode_replicas: Annotated[
        int,
        Opt(help="disaggregated: decode instances", callback=common.in_range(1, common.MAX_GPUS)),
    ] = 1,
    prefill_hardware: Annotated[str | None, Opt(help="disaggregated: prefill device")] = None,
    decode_hardware: Annotated[str | None, Opt(help="disaggregated: decode device")] = None,
    memory_fraction: common.MemoryFraction = None,
    max_seq_len: Annotated[
        int | None,
        Opt(
            help="contiguous KV reserved per sequence (default: longest request)",
            callback=common.in_range(1, common.MAX_TOKENS),
        ),
    ] = None,
    dtype: Annotated[str, Opt(help="weights, activations and KV format")] = "bf16",
    weights: common.Weights = None,
    activations: common.Activations = None,
    kv_format: Annotated[
        str | None,
        Opt(
            "--kv-format",
            help="KV-cache number format (overrides --dtype; --kv-layout is the allocation)",
        ),
    ] = None,
    tp: Annotated[
        int,
        Opt(help="tensor-parallel GPUs per replica", callback=common.in_range(1, common.MAX_GPUS)),
    ] = 1,
    pp: Annotated[
        int,
        Opt(
            help="pipeline-parallel stages per replica",
            callback=common.in_range(1, common.MAX_GPUS),
        ),
    ] = 1,
    ep: Annotated[
        int,
        Opt(
            help="expert-parallel GPUs per replica (MoE models)",
            callback=common.in_range(1, common.MAX_GPUS),
        ),
    ] = 1,
    ceiling: Annotated[str, Opt(help="datasheet or achievable")] = "achievable",
    engine: common.EngineOpt = common.DEFAULT_ENGINE,
    slo_ttft: common.SloTtft = 1.0,
    slo_tpot: common.SloTpot = 0.1,
    sweep: Annotated[bool, Opt("--sweep-rate", help="highest rate meeting the SLO")] = False,
    slo_attainment: common.SloAttainment = 0.9,
    json_out: JsonFlag = False,
    specs_dir: SpecsDir = None,
) -> None:
    """Simulate serving: TTFT/TPOT/E2E percentiles, throughput, goodput, KV and batch use."""
    m, hw, policies, run = prepare_runs(
        model,
        hardware,
        compare.split(",") if compare else [policy_name],
        requests,
        arrivals,
        lengths,
        input_tokens,
        output_tokens,
        sigma,
        trace,
        prefix_tokens,
        seed,
        slo_ttft,
        slo_tpot,
        dtype,
        ceiling,
        specs_dir,
        max_seq_len,
        memory_fraction,
        replicas,
        prefill_replicas,
        decode_replicas,
        prefill_hardware,
        decode_hardware,
        dict(
            max_seqs=max_seqs,
            token_budget=token_budget,
            kv=kv or kv_layout_alias,
            block_size=block_size,
            preemption=preemption,
            prefix_caching=prefix_caching,
            router=router,
        ),
        weights,
        activations,
        kv_format,
        tp,
        pp,
        ep,
        engine,
    )
    engine_name = engine if ceiling == "achievable" else "none"
    prec = common.precision(dtype, weights, activations, kv_format)
    head = common.header(
        m.name, hw.name, prec, ceiling, common.engine(engine, specs_dir), Parallel(tp, pp, ep)
    ) | {
        "workload": {
            "trace": str(trace) if trace else None,
            "requests": requests,
            "arrivals": arrivals,
            "rate_per_s": rate,
            "lengths": lengths,
            "prompt_tokens": input_tokens,
            "gen_tokens": output_tokens,
            "prefix_tokens": prefix_tokens,
            "seed": seed,
        }
    }
    if trace is not None and sweep:
        raise InvalidInputError("--sweep-rate scales synthetic arrivals; it cannot use --trace")
    if sweep:
        if len(policies) > 1:
            raise InvalidInputError("--sweep-rate runs one --policy; drop --compare")
        result = sweep_rate(lambda r: run(0, r), rate, slo_attainment)
        if json_out:
            best = result.best
            print_json(
                {
                    **head,
                    "best_rate_per_s": result.best_rate_per_s,
                    "slo_attainment": slo_attainment,
                    "points": [
                        {"rate_per_s": r, **s.as_dict(timeline=False)} for r, s in result.points
                    ],
                    "at_best": best.as_dict() if best else None,
                }
            )
        else:
            console.print(sweep_table(result))
        return
    summaries = [run(i, rate) for i in range(len(policies))]
    if json_out:

        def econ(s: Summary) -> dict:
            return {"economics": common.serve_economics_dict(s, hw, tp * pp * ep)}

        runs = [{**s.as_dict(), **econ(s)} for s in summaries]
        # one shape: `runs` holds every policy's run; a single run also sits at the top level
        print_json({**head, **(runs[0] if not compare else {}), "runs": runs})
        return
    source = (
        f"trace {trace}"
        if trace
        else (
            f"{requests} requests, {arrivals} {rate:g}/s, {lengths} P≈{input_tokens} "
            f"G≈{output_tokens}"
            f"{f', shared prefix {prefix_tokens}' if prefix_tokens else ''}, seed {seed}"
        )
    )
    group = "" if tp * pp * ep == 1 else f" × {tp * pp * ep} (TP {tp}, PP {pp}, EP {ep})"
    p = common.precision(dtype, weights, activations, kv_format)
    formats = (
        p.weights
        if p.weights == p.activations == p.kv
        else (f"weights {p.weights}, activations {p.activations}, KV {p.kv}")
    )
    console.print(
        summary_table(
            f"{m.display_name} on {hw.display_name}{group} ({formats}, "
            f"{ceiling}, engine {engine_name}) — "
            f"{source}; SLO TTFT ≤ {slo_ttft:g} s, TPOT ≤ {slo_tpot:g} s",
            summaries,
        )
    )
    if len(summaries) == 1:
        for line in timeline_lines(summaries[0]):
            console.print(line)
        console.print(common.cost_line(summaries[0], hw, tp * pp * ep))
