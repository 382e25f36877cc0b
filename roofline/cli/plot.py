"""`roofline plot roofline|batch|kv|serve`: charts from the same results the tables and JSON show.

Each command computes its results with the core (`phases.estimate`, `sweeps.kv_curve`, the
serving simulation through `serve.config.serve_runs`) and hands
them to `roofline.render.plots`, which only draws. Files are PNG or SVG by suffix; `plot batch`
without `--output` prints the frontier as a text table instead.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from ..calc.phases import estimate
from ..calc.placement import Parallel
from ..errors import InvalidInputError
from ..files import replace_from
from ..measure.results import load_results
from ..measure.validate import validation_of
from ..render import plots
from ..render.report import frontier_table
from ..serve.config import ServeConfig, serve_runs
from ..serve.sweep import sweep_rate
from ..spec.catalog import load_hardware, load_model
from ..spec.precision import Precision
from ..studies.sweeps import kv_curve
from . import app, common
from .common import DEFAULT_ENGINE, EngineOpt, SpecsDir, console, int_list, positive

plot_app = typer.Typer(
    help="Draw charts (PNG or SVG): roofline, latency-throughput frontier, "
    "KV cache / state memory, serving latency and throughput, "
    "deployment plan.",
    no_args_is_help=True,
)
app.add_typer(plot_app, name="plot")

Output = Annotated[Path, typer.Option("--output", "-o", help="chart file, .png or .svg")]
Dtype = common.Dtype
Ceiling = Annotated[str, typer.Option(help="datasheet (speed of light) or achievable")]
Models = Annotated[list[str], typer.Argument(help="model names, aliases or YAML paths")]
Devices = Annotated[
    list[str],
    typer.Option(*common.HARDWARE_FLAGS, help="device name, alias or YAML path (repeatable)"),
]
Device = Annotated[
    str, typer.Option(*common.HARDWARE_FLAGS, help="device name, alias or YAML path")
]
ModelOpt = Annotated[
    str | None,
    typer.Option("--model", "-m", help="model whose prefill and decode operators to place"),
]
Batches = Annotated[str, typer.Option(help="batch sizes B, comma-separated")]
TextOutput = Annotated[
    Path | None,
    typer.Option("--output", "-o", help="chart file, .png or .svg; without it, print a text table"),
]
TextFlag = Annotated[bool, typer.Option("--text", help="print the text table as well as the file")]


def _chart_path(path: Path | None) -> None:
    """Refuse, before any work, a chart path that could not be written at the end."""
    if path is None:
        return
    common.check_output(path, "chart")
    if path.suffix.lower() not in plots.FORMATS:
        raise InvalidInputError(f"cannot write '{path}': give a file ending in .png or .svg")


def _saved(fig: object, path: Path) -> None:
    """Draw `fig` into a temporary file beside `path`, then move it into place."""
    replace_from(path, lambda tmp: plots.save(fig, tmp))  # type: ignore[arg-type]
    console.print(f"wrote {path}")


@plot_app.command("roofline")
def roofline_cmd(
    output: Output,
    hardware: Device = "h100-sxm",
    model: ModelOpt = None,
    batch: Batches = "1,64",
    prompt: Annotated[
        int,
        typer.Option(
            help="prompt tokens P; decode is drawn at S = P",
            callback=common.in_range(1, common.MAX_TOKENS),
        ),
    ] = 1024,
    dtype: Dtype = None,
    ceiling: Ceiling = "achievable",
    engine: EngineOpt = DEFAULT_ENGINE,
    measured: Annotated[
        Path | None,
        typer.Option(
            help="results JSON of `roofline measure`: its kernels drawn beside the prediction "
            "(use the spec of the machine that measured, e.g. its calibrated YAML)"
        ),
    ] = None,
    specs_dir: SpecsDir = None,
) -> None:
    """Roofline of a device, with each operator of a model's prefill and decode steps."""
    _chart_path(output)
    roof = common.ceiling(ceiling)
    batches = int_list(batch, "batch size", flag="--batch")
    hw = load_hardware(hardware, specs_dir or ())
    estimates = []
    if model is not None:
        m = load_model(model, specs_dir or ())
        # gen = 1: the chart needs only the prefill step and the first decode step (S = P)
        precision = common.precision(dtype, None, None, None, m)
        stack = common.stack(m, hw, precision, roof, engine, specs_dir)
        estimates = [estimate(m, stack, [b], positive(prompt, "--prompt"), 1) for b in batches]
    points = load_results(measured).points if measured is not None else ()
    _saved(plots.roofline_chart(hw, estimates, points), output)


@plot_app.command("validate")
def validate_cmd(
    results: Annotated[Path, typer.Argument(help="results JSON from `roofline measure`")],
    output: Output,
    hardware: Annotated[
        str | None,
        typer.Option(
            *common.HARDWARE_FLAGS, help="predict on this spec instead of the calibrated one"
        ),
    ] = None,
    ceiling: Annotated[str | None, typer.Option(help="datasheet or achievable")] = None,
    specs_dir: SpecsDir = None,
) -> None:
    """Predicted vs measured time per point with each family's band (as `roofline validate`)."""
    _chart_path(output)
    roof = common.ceiling(ceiling) if ceiling else None
    v = validation_of(results, load_results(results), hardware, roof, None, specs_dir or ())
    _saved(plots.validation_chart(v), output)


@plot_app.command("batch")
def batch_cmd(
    models: Models,
    hardware: Devices = ["h100-sxm"],  # noqa: B006 (typer reads the default, never mutates it)
    batch: Batches = "1,2,4,8,16,32,64,128,256",
    prompt: common.Prompt = 1024,
    gen: common.Gen = 256,
    dtype: Dtype = None,
    ceiling: Ceiling = "achievable",
    engine: EngineOpt = DEFAULT_ENGINE,
    output: TextOutput = None,
    text: TextFlag = False,
    interval: common.Interval = 0.8,
    specs_dir: SpecsDir = None,
) -> None:
    """Latency-throughput frontier over batch sizes (one curve per model x device), with the
    TPOT interval shaded."""
    _chart_path(output)
    roof = common.ceiling(ceiling)
    batches = int_list(batch, "batch size", flag="--batch")
    specs = [load_model(m, specs_dir or ()) for m in models]
    devices = [load_hardware(h, specs_dir or ()) for h in hardware]
    P, G = positive(prompt, "--prompt"), positive(gen, "--gen")
    estimates = [
        estimate(
            m,
            common.stack(
                m, hw, common.precision(dtype, None, None, None, m), roof, engine, specs_dir
            ),
            batches,
            P,
            G,
        )
        for m in specs
        for hw in devices
    ]
    if output is not None:
        _saved(plots.frontier_chart(estimates, interval or None), output)
    if output is None or text:
        console.print(frontier_table(estimates))


@plot_app.command("kv")
def kv_cmd(
    models: Models,
    output: Output,
    hardware: Devices = ["h100-sxm"],  # noqa: B006 (typer reads the default, never mutates it)
    batch: Annotated[
        int,
        typer.Option(
            help="sequences B held at once", callback=common.in_range(1, common.MAX_BATCH)
        ),
    ] = 1,
    dtype: Annotated[str, typer.Option("--kv-format", "--dtype", help="KV cache format")] = "bf16",
    specs_dir: SpecsDir = None,
) -> None:
    """KV cache / state memory vs context length for several models (windows, MLA latents
    and SSM state included), with device memory lines."""
    _chart_path(output)
    curves = [
        kv_curve(load_model(m, specs_dir or ()), Precision(kv=dtype), positive(batch, "--batch"))
        for m in models
    ]
    devices = [load_hardware(h, specs_dir or ()) for h in hardware]
    _saved(plots.kv_chart(curves, devices), output)


@plot_app.command("serve")
def serve_cmd(
    model: Annotated[str, typer.Argument(help="model name, alias, or YAML path")],
    output: Output,
    hardware: Device = "h100-sxm",
    rate: common.ServeRate = common.SERVE_RATE,
    requests: common.Requests = common.REQUESTS,
    compare: Annotated[
        str, typer.Option(help="comma-separated policies, same workload")
    ] = "static,continuous,chunked",
    latency: Annotated[
        str, typer.Option(help="latency whose CDF is drawn: ttft, tpot, e2e")
    ] = "e2e",
    input_tokens: common.MeanPrompt = 1024,
    output_tokens: common.MeanGen = 256,
    seed: common.Seed = 0,
    sweep: Annotated[
        bool,
        typer.Option(
            "--sweep-rate",
            help="also draw throughput vs arrival rate, each policy swept to its SLO limit",
        ),
    ] = False,
    slo_ttft: common.SloTtft = 1.0,
    slo_tpot: common.SloTpot = 0.1,
    slo_attainment: common.SloAttainment = 0.9,
    dtype: Dtype = None,
    weights: common.Weights = None,
    activations: common.Activations = None,
    kv_format: common.KvFormat = None,
    tp: common.Tp = 1,
    pp: common.Pp = 1,
    ep: common.Ep = 1,
    ceiling: Ceiling = "achievable",
    engine: EngineOpt = DEFAULT_ENGINE,
    interval: common.Interval = 0.8,
    specs_dir: SpecsDir = None,
) -> None:
    """Serving simulation: latency CDF per policy at --rate, and with --sweep-rate the
    throughput each policy reaches at every arrival rate its SLO sweep tried."""
    _chart_path(output)
    config = ServeConfig(
        model=model,
        hardware=hardware,
        policies=tuple(common.comma_items(compare, "--compare", "policy")),
        requests=requests,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        seed=seed,
        slo_ttft=slo_ttft,
        slo_tpot=slo_tpot,
        precision=common.precision(
            dtype, weights, activations, kv_format, load_model(model, tuple(specs_dir or ()))
        ),
        ceiling=common.ceiling(ceiling),
        specs_dir=tuple(specs_dir or ()),
        parallel=Parallel(tp, pp, ep),
        engine=engine,
    )
    runs = serve_runs(config, common.NOTES)
    summaries = {p.name: runs.run(i, rate) for i, p in enumerate(runs.policies)}
    samples = {name: s.latency_samples_s(latency) for name, s in summaries.items()}
    bands = {}
    for name, s in summaries.items():
        iv = s.intervals(runs.stack, interval) if interval else {}
        p50 = iv.get(f"{latency}_s", {}).get("p50")
        if p50:
            mid = float(np.percentile(samples[name], 50))
            bands[name] = (p50["low"] / mid, p50["high"] / mid)
    sweeps = []
    if sweep:
        for i, p in enumerate(runs.policies):
            points = sorted(
                sweep_rate(partial(runs.run, i), rate, slo_attainment).points,
                key=lambda point: point[0],
            )
            sweeps.append(
                plots.RateSweep(
                    p.name, [r for r, _ in points], [s.throughput_tokens_per_s for _, s in points]
                )
            )
    name = {"ttft": "TTFT", "tpot": "TPOT", "e2e": "end-to-end latency"}[latency]
    title = (
        f"{model} on {hardware} ({engine} engine): {requests} requests, Poisson "
        f"{rate:g}/s, P≈{input_tokens} G≈{output_tokens}, seed {seed}"
    )
    _saved(plots.serve_chart(samples, sweeps, name, title, bands), output)


@plot_app.command("plan")
def plan_cmd(
    model: Annotated[str, typer.Argument(help="model name, alias, or YAML path")],
    output: Output,
    rate: common.PlanRate = None,
    prompt: common.PlanPrompt = 1024,
    gen: common.PlanGen = 256,
    slo_ttft: common.P95Ttft = common.PLAN_SLO_TTFT,
    slo_tpot: common.P95Tpot = common.PLAN_SLO_TPOT,
    hardware: common.PlanDevices = None,
    max_gpus: common.MaxGpus = common.MAX_GPUS_SEARCHED,
    formats: common.Formats = common.FORMATS,
    price: common.Price = None,
    max_batches: common.MaxBatches = common.MAX_BATCHES,
    serving: common.Serving = "both",
    requests: common.Requests = common.REQUESTS,
    engine: EngineOpt = DEFAULT_ENGINE,
    ceiling: Ceiling = "achievable",
    specs_dir: SpecsDir = None,
) -> None:
    """`roofline plan`'s Pareto frontier (cost vs p95 TPOT and TTFT) with the chosen point."""
    _chart_path(output)
    from .plan import run_plan

    r = run_plan(
        model,
        rate,
        prompt,
        gen,
        None,
        slo_ttft,
        slo_tpot,
        hardware,
        max_gpus,
        formats,
        price or [],
        "on-demand",
        max_batches,
        serving,
        10,
        requests,
        0,
        ceiling,
        engine,
        specs_dir,
    )

    def point(c) -> plots.PlanPoint:
        return plots.PlanPoint(c.label, c.cost_per_million_tokens_usd, c.tpot_p95_s, c.ttft_p95_s)

    chosen = point(r.chosen) if r.chosen else None
    title = (
        f"{r.model}, {r.requirement.rate_per_s:g} req/s, P = {prompt}, G = {gen}: "
        f"{len(r.frontier)} frontier points of {r.configurations:,} screened"
    )
    _saved(
        plots.plan_chart([point(c) for c in r.frontier], chosen, slo_tpot, slo_ttft, title), output
    )
