"""What `roofline serve` prints: the runs of a `ServeConfig` (every policy, or a rate sweep of
one) as one JSON object or as tables, the interval and timeline lines and the cost line.

The CLI declares the options, checks which apply, builds the `ServeConfig` and hands it here
with an `Out` to print on; rich is imported only for tables (`serve_report`), so a `--json`
run never loads it."""

from __future__ import annotations

from typing import Any, Protocol

from ..errors import InvalidInputError, RooflineError
from ..serve.config import ServeConfig, serve_runs
from ..serve.metrics import Summary
from ..serve.sweep import sweep_rate
from ..studies.economics import PriceTable, serve_economics
from .shapes import header


class Out(Protocol):
    """Where the output goes: one JSON object, or items printed in order (a table, a line)."""

    def json(self, obj: dict) -> None: ...

    def print(self, item: Any, *, highlight: bool | None = None) -> None: ...

    def flags(self, text: str) -> str:
        """A core message with its parameters said as the command's flags."""
        ...


def serve_economics_dict(
    summary: Summary, devices: dict, gpus_per_replica: int, prices: PriceTable
) -> dict | None:
    """The JSON of a serve run's cost and energy (`devices`: the loaded spec of each pool's
    device, by name; `prices`: the price table of `price`), None when a device has no price."""
    try:
        return serve_economics(summary, devices, prices, gpus_per_replica).as_dict()
    except RooflineError:
        return None


def cost_line(
    summary: Summary, devices: dict, gpus_per_replica: int, prices: PriceTable, out: Out
) -> str:
    """One line of cost and energy for a serve run (on-demand prices of `prices`), or why not."""
    try:
        e = serve_economics(summary, devices, prices, gpus_per_replica)
    except RooflineError as err:
        return f"cost: not shown ({out.flags(str(err))})"
    return (
        f"cost: ${e.usd_per_hour:.2f}/h, ${e.cost_per_million_tokens_usd:.3f} per million "
        f"output tokens at the simulated throughput; energy {e.joules_per_token:.3f} J/token "
        f"({e.power_w:.0f} W per GPU: each step at its busy share, idle at static power)"
    )


def serve(
    config: ServeConfig,
    prices: PriceTable,
    out: Out,
    *,
    rate: float,
    sweep: bool,
    slo_attainment: float,
    interval: float,
    compared: bool,
    json_out: bool,
    notes: list[str] | None = None,
) -> None:
    """Simulate `config` and print it on `out`: with `sweep`, the highest rate meeting the SLO
    for `slo_attainment` of requests; otherwise each policy at `rate` (`compared`: the policies
    were asked for as a comparison, so the JSON holds them under `runs` only), as one JSON
    object with `json_out`, else as tables and lines. `interval`: the
    coverage of each run's prediction interval (0: none); `notes` collects what the workloads
    said."""
    runs = serve_runs(config, notes)
    prices.check_names(runs.devices)
    m, hw, policies = runs.model, runs.hardware, runs.policies
    head = header(m.name, runs.stack) | {"workload": config.workload_dict(rate)}
    if (config.trace is not None or config.benchmark is not None) and sweep:
        raise InvalidInputError(
            "`sweep` scales synthetic arrivals; it cannot use `trace` or `from_file`"
        )
    if sweep:
        if len(policies) > 1:
            raise InvalidInputError("`sweep` runs one `policy_name`; drop `compare`")
        result = sweep_rate(lambda r: runs.run(0, r), rate, slo_attainment)
        if json_out:
            best = result.best
            out.json(
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
            from .serve_report import sweep_table

            out.print(sweep_table(result))
        return
    summaries = [runs.run(i, rate) for i in range(len(policies))]
    gpus = config.parallel.gpus_per_replica
    if json_out:

        def econ(s: Summary) -> dict:
            return {"economics": serve_economics_dict(s, runs.devices, gpus, prices)}

        def bands(s: Summary) -> dict:
            return {"intervals": s.intervals(runs.stack, interval)} if interval else {}

        rows = [{**s.as_dict(), **econ(s), **bands(s)} for s in summaries]
        # one shape: `runs` holds every policy's run; a single run also sits at the top level
        out.json({**head, **(rows[0] if not compared else {}), "runs": rows})
        return
    from .serve_report import interval_line, summary_table, timeline_lines

    prec, par = config.precision, config.parallel
    group = "" if par.gpus_per_replica == 1 else f" × {par.gpus_per_replica} ({par.label})"
    formats = (
        prec.weights
        if prec.weights == prec.activations == prec.kv
        else (f"weights {prec.weights}, activations {prec.activations}, KV {prec.kv}")
    )
    out.print(
        summary_table(
            f"{m.display_name} on {hw.display_name}{group} ({formats}, "
            f"{config.ceiling}, engine {runs.stack.engine_name}) — "
            f"{config.workload_label(rate)}; SLO TTFT ≤ {config.slo_ttft:g} s, "
            f"TPOT ≤ {config.slo_tpot:g} s",
            summaries,
        )
    )
    if interval:
        for s in summaries:
            if line := interval_line(s, runs.stack, interval, len(summaries) > 1):
                out.print(line, highlight=False)
    if len(summaries) == 1:
        for line in timeline_lines(summaries[0]):
            out.print(line)
        out.print(cost_line(summaries[0], runs.devices, gpus, prices, out))
