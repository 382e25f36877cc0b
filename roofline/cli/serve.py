"""`roofline serve`: simulate a serving stack on a workload and report latency percentiles,
throughput, goodput, KV use; compare policies or sweep the arrival rate."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ..calc.placement import Parallel
from ..errors import InvalidInputError
from ..render import serve as render
from ..serve.config import ServeConfig
from ..serve.policy import ENGINE_POLICY, POLICIES
from ..studies.speculative import MAX_DRAFT_TOKENS
from . import app, common
from .common import JsonFlag, SpecsDir

Opt = typer.Option


class _Out:
    """`render.serve` prints here: JSON on stdout, tables and lines on the console (created
    on first use: a `--json` run never imports rich's console)."""

    def json(self, obj: dict) -> None:
        common.print_json(obj)

    def print(self, item: Any, *, highlight: bool | None = None) -> None:
        common.console.print(item, highlight=highlight)

    def flags(self, text: str) -> str:
        return common.with_flags(text)


@app.command()
def serve(
    model: Annotated[str, typer.Argument(help="model name, alias, or YAML path")] = "llama-3.1-8b",
    hardware: Annotated[
        str, Opt(*common.HARDWARE_FLAGS, help="device of every replica")
    ] = "h100-sxm",
    rate: common.ServeRate = common.SERVE_RATE,
    requests: common.Requests = common.REQUESTS,
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
    from_file: Annotated[
        Path | None,
        Opt(
            "--from",
            help="a serving benchmark result (any file validate --serving reads; its first run): "
            "rerun its requests, arrival rate and client concurrency",
        ),
    ] = None,
    max_concurrency: Annotated[
        int | None,
        Opt(
            help="clients in flight at most: each sends its next request when one finishes "
            "(vllm bench serve --max-concurrency)",
            callback=common.in_range(1, common.MAX_BATCH),
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
    policy_name: Annotated[
        str,
        Opt(
            "--policy",
            help=f"{ENGINE_POLICY} (the engine's own scheduler: vLLM V1 and SGLang chunk prompts "
            f"and cache prefixes; continuous where none is characterised), {', '.join(POLICIES)}",
        ),
    ] = ENGINE_POLICY,
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
    dtype: Annotated[
        str | None,
        Opt(help="weights, activations and KV format (default: as the model is released)"),
    ] = None,
    weights: common.Weights = None,
    activations: common.Activations = None,
    kv_format: Annotated[
        str | None,
        Opt(
            "--kv-format",
            help="KV-cache number format (overrides --dtype; --kv-layout is the allocation)",
        ),
    ] = None,
    tp: common.Tp = 1,
    pp: common.Pp = 1,
    ep: common.Ep = 1,
    ceiling: common.Ceiling = "achievable",
    engine: common.EngineOpt = common.DEFAULT_ENGINE,
    speculate: Annotated[
        int | None,
        Opt(
            "--speculate",
            help="speculative decoding: K tokens drafted and verified per decode step "
            "(with --draft, --mtp or --heads)",
            callback=common.in_range(1, MAX_DRAFT_TOKENS),
        ),
    ] = None,
    draft: Annotated[
        str | None, Opt(help="--speculate: the draft model (the target's vocabulary)")
    ] = None,
    mtp: Annotated[
        bool,
        Opt("--mtp", help="--speculate: draft with the target's multi-token-prediction module"),
    ] = False,
    eagle: Annotated[
        bool,
        Opt("--eagle", help="--speculate: draft with an EAGLE head (one layer of the target's)"),
    ] = False,
    heads: Annotated[
        float | None,
        Opt(
            help="--speculate: draft heads (Medusa), each costing this fraction of a target layer",
            callback=common.in_range(0, 100, open_low=True),
        ),
    ] = None,
    acceptance: Annotated[
        float,
        Opt(
            help="--speculate: mean per-token acceptance α over requests",
            callback=common.in_range(0, 1),
        ),
    ] = 0.7,
    acceptance_sd: Annotated[
        float,
        Opt(
            help="--speculate: standard deviation of α across requests (beta-distributed; "
            "0: every request at the mean)",
            callback=common.in_range(0, 0.5),
        ),
    ] = 0.0,
    slo_ttft: common.SloTtft = 1.0,
    slo_tpot: common.SloTpot = 0.1,
    sweep: Annotated[bool, Opt("--sweep-rate", help="highest rate meeting the SLO")] = False,
    slo_attainment: common.SloAttainment = 0.9,
    price: common.Price = None,
    interval: common.Interval = 0.8,
    json_out: JsonFlag = False,
    specs_dir: SpecsDir = None,
) -> None:
    """Simulate serving: TTFT/TPOT/E2E percentiles, throughput, goodput, KV and batch use."""
    from ..studies.economics import parse_price_options

    prices = parse_price_options(price or [])  # read before the simulation: a bad file fails fast
    from ..spec.catalog import load_model

    if trace is not None and from_file is not None:
        raise InvalidInputError("give --trace or --from, not both")
    # options of another mode (a synthetic workload, speculation, the disaggregated
    # policy) are refused before the command runs: roofline/cli/applies.py
    prec = common.precision(
        dtype, weights, activations, kv_format, load_model(model, tuple(specs_dir or ()))
    )
    overrides = dict(
        max_seqs=max_seqs,
        token_budget=token_budget,
        kv=kv or kv_layout_alias,
        block_size=block_size,
        preemption=preemption,
        prefix_caching=prefix_caching,
        router=router,
    )
    config = ServeConfig(
        model=model,
        hardware=hardware,
        policies=tuple(
            common.comma_items(compare, "--compare", "policy") if compare else [policy_name]
        ),
        requests=requests,
        arrivals=arrivals,  # type: ignore[arg-type]  # checked by `synthetic`
        lengths=lengths,  # type: ignore[arg-type]  # checked by `Lengths`
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        sigma=sigma,
        trace=trace,
        benchmark=from_file,
        max_concurrency=max_concurrency,
        prefix_tokens=prefix_tokens,
        seed=seed,
        slo_ttft=slo_ttft,
        slo_tpot=slo_tpot,
        precision=prec,
        ceiling=common.ceiling(ceiling),
        specs_dir=tuple(specs_dir or ()),
        max_seq_len=max_seq_len,
        memory_fraction=memory_fraction,
        replicas=replicas,
        prefill_replicas=prefill_replicas,
        decode_replicas=decode_replicas,
        prefill_hardware=prefill_hardware,
        decode_hardware=decode_hardware,
        overrides=overrides,
        parallel=Parallel(tp, pp, ep),
        engine=engine,
        speculate=speculate,
        acceptance=acceptance,
        acceptance_sd=acceptance_sd,
        draft=draft,
        mtp=mtp,
        eagle=eagle,
        heads=heads,
    )
    render.serve(
        config,
        prices,
        _Out(),
        rate=rate,
        sweep=sweep,
        slo_attainment=slo_attainment,
        interval=interval,
        compared=compare is not None,
        json_out=json_out,
        notes=common.NOTES,
    )
