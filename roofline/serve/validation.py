"""A measured serving run (`benchmarks.BenchmarkRun`) rerun in the simulator: the same requests,
arrival process and client concurrency, on a stack the user names (what the file cannot say),
under the engine's own scheduler; every metric the file reports beside its prediction.

Metrics and how the simulator gives each (`metrics.Summary`):
- TTFT, TPOT, E2E: per request, from the send time (the benchmark's clock), percentiles as the
  benchmark takes them (numpy's linear interpolation, as vLLM and genai-perf use);
- ITL (vLLM: every gap between streamed outputs): every gap the simulator's requests stream
  (`state.Gaps`): a decode step a prefill chunk lengthens, a preemption, a hand-off show in its
  tail as in the measured one;
- throughputs: output tokens and completed requests over the span from the first send to the
  last finish (vLLM's benchmark duration).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..calc.stack import Stack
from ..errors import InvalidInputError
from ..spec.model import ModelSpec
from .benchmarks import BenchmarkRun
from .metrics import Summary, weighted_percentile
from .policy import engine_default, policy
from .simulate import build_deployment, simulate

#: the metrics a gate checks by default: medians and throughput, the figures a serving
#: predictor is judged by (tails depend on the benchmark's own noise)
GATED = ("ttft_p50", "tpot_p50", "itl_p50", "e2el_p50", "output_throughput")


@dataclass(frozen=True)
class MetricRow:
    metric: str  # "ttft_p50", "output_throughput", ...
    predicted: float
    measured: float
    unit: str  # "s", "tokens/s", "requests/s"
    note: str = ""

    @property
    def error(self) -> float:
        """predicted / measured − 1 (+: the prediction is higher)."""
        return self.predicted / self.measured - 1 if self.measured > 0 else math.nan

    def as_dict(self) -> dict:
        return {
            "metric": self.metric,
            # null: the simulation has no sample of the quantity (a TPOT of one-token outputs)
            "predicted": self.predicted if math.isfinite(self.predicted) else None,
            "measured": self.measured,
            "unit": self.unit,
            "error": self.error if math.isfinite(self.error) else None,
            "note": self.note,
        }


@dataclass(frozen=True)
class ServingComparison:
    run: BenchmarkRun
    policy: str
    rows: tuple[MetricRow, ...]
    notes: tuple[str, ...]

    def worst(self, metrics: tuple[str, ...] = GATED) -> float:
        """The largest |error| among `metrics` the file reports (0 when none)."""
        errs = [abs(r.error) for r in self.rows if r.metric in metrics and math.isfinite(r.error)]
        return max(errs, default=0.0)

    def as_dict(self) -> dict:
        r = self.run
        return {
            "source": r.source,
            "format": r.format,
            "model_in_file": r.model,
            # the keys of `serve --json`'s workload (ServeConfig.workload_dict) where they mean
            # the same: mean lengths, the rate (null: all sent at once), the gamma shape of the
            # gaps (null: evenly spaced, GuideLLM's constant strategy); strict JSON, no Infinity
            "workload": {
                "requests": r.requests,
                "rate_per_s": None if math.isinf(r.request_rate) else r.request_rate,
                "burstiness": None if math.isinf(r.burstiness) else r.burstiness,
                "max_concurrency": r.max_concurrency,
                "prompt_tokens": r.mean_input_tokens,
                "gen_tokens": r.mean_output_tokens,
                "lengths": "per request" if r.input_tokens is not None else "fixed at the means",
            },
            "policy": self.policy,
            "metrics": [row.as_dict() for row in self.rows],
            "notes": list(self.notes),
        }


def _samples(s: Summary) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
    """Per-request samples of each latency and their weights (None: one per request)."""
    tpot = s.tpot_s
    many = ~np.isnan(tpot)
    return {
        "ttft": (s.ttft_s, None),
        "tpot": (tpot[many], None),
        "itl": s.itl_s,
        "e2el": (s.e2e_s, None),
    }


def _predict(s: Summary, metric: str) -> float:
    if metric == "output_throughput":
        return s.throughput_tokens_per_s
    if metric == "request_throughput":
        return s.requests_completed / s.duration_s
    quantity, _, stat = metric.partition("_")
    x, w = _samples(s)[quantity]
    if not x.size:
        return math.nan
    if stat == "mean":
        return float(np.average(x, weights=w))
    q = float(stat[1:])
    return float(np.percentile(x, q)) if w is None else weighted_percentile(x, w, q)


def compare(
    run: BenchmarkRun,
    model: ModelSpec,
    stack: Stack,
    policy_name: str | None = None,
    seed: int = 0,
    replicas: int = 1,
) -> ServingComparison:
    """Rerun `run`'s workload on `stack` and put each reported metric beside its prediction;
    `replicas` identical copies of the stack share the load behind the policy's router (a
    benchmark run against a load-balanced service)."""
    name = policy_name or engine_default(stack.engine)
    p = policy(name, stack.engine).on(stack.memory)
    if p.disaggregated:
        raise InvalidInputError("a benchmark run is compared on one pool; pick another policy")
    w = run.workload(seed)
    w.check(model.max_context, model.name)
    deployment = build_deployment(model, stack, p, replicas)
    result = simulate(w, p, deployment, max_concurrency=run.max_concurrency)
    s = Summary(result, math.inf, math.inf)
    rows = []
    for metric, measured in sorted(run.metrics.items(), key=lambda kv: _order(kv[0])):
        unit = {"output_throughput": "tokens/s", "request_throughput": "requests/s"}.get(
            metric, "s"
        )
        rows.append(MetricRow(metric, _predict(s, metric), measured, unit))
    notes = list(run.notes)
    if not math.isinf(run.request_rate) and math.isinf(run.burstiness):
        notes.append("evenly spaced arrivals at the rate")
    elif not math.isinf(run.request_rate) and run.burstiness != 1.0:
        notes.append(f"gamma arrivals of shape {run.burstiness:g} (vllm bench's burstiness)")
    if replicas > 1:
        notes.append(f"{replicas} replicas share the load ({p.router} routing)")
    return ServingComparison(run, name, tuple(rows), tuple(notes))


def _order(metric: str) -> tuple[int, float]:
    quantity, _, stat = metric.partition("_")
    if quantity in ("output", "request"):
        return (9, 0.0)
    rank = ("ttft", "tpot", "itl", "e2el").index(quantity)
    return (rank, -1.0 if stat == "mean" else float(stat[1:]))
