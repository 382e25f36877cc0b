"""GuideLLM `guidellm benchmark` reports, v0.2 (no `metadata` block; checked on the real report
vllm-project/guidellm@f1dfdc6 tests/unit/entrypoints/assets/benchmarks_stripped.{json,yaml}):
`{"benchmarks": [...]}`, one entry per strategy of a sweep, each with `args.strategy`,
`request_totals`, `worker.backend_model`, the per-request records under `requests`, and
`metrics.<name>.successful` distribution summaries (`mean`, `median`, `percentiles.p001` ...
`p999`).

Definitions (guidellm@f1dfdc6 src/guidellm/benchmark/benchmark.py): `inter_token_latency_ms`
is (last − first token time) / (G − 1) per request, vLLM's TPOT, and is compared as TPOT;
`time_per_output_token_ms` divides by G instead and is not compared; GuideLLM reports no
pooled chunk gaps (no ITL). `request_latency` is in seconds, the `_ms` metrics in ms.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...errors import InvalidInputError
from .common import BenchmarkRun, Metrics, at, count, duration_limit, number

#: metric -> (quantity, seconds per unit)
LATENCIES = {
    "time_to_first_token_ms": ("ttft", 1e-3),
    "inter_token_latency_ms": ("tpot", 1e-3),
    "request_latency": ("e2el", 1.0),
}
THROUGHPUTS = {
    "output_tokens_per_second": "output_throughput",
    "requests_per_second": "request_throughput",
}
#: GuideLLM's percentile keys (p001 is the 0.1th): those at or above the median are kept
PERCENTILES = {
    "p50": "p50",
    "p75": "p75",
    "p90": "p90",
    "p95": "p95",
    "p99": "p99",
    "p999": "p99.9",
}
HINT = "give the whole GuideLLM report"


def is_guidellm(d: dict) -> bool:
    return isinstance(d.get("benchmarks"), list)


def read_guidellm(d: dict, src: str) -> list[BenchmarkRun]:
    meta = d.get("metadata")
    if isinstance(meta, dict) and meta.get("version") is not None:
        raise InvalidInputError(
            f"{src}: a GuideLLM report of schema version {meta['version']!r}; this version reads "
            "the v0.2 reports (no metadata block), the only ones checked on a real file"
        )
    if not d["benchmarks"]:
        raise InvalidInputError(f"{src}: the report lists no benchmarks; {HINT}")
    return [_benchmark(b, f"{src} benchmark {i}") for i, b in enumerate(d["benchmarks"])]


def _summary(b: dict, name: str, src: str) -> dict:
    s = at(b, f"metrics.{name}.successful", src, HINT)
    if not isinstance(s, dict):
        raise InvalidInputError(f"{src}: 'metrics.{name}.successful' must be a mapping; {HINT}")
    return s


def _load(strategy: dict, src: str) -> tuple[float, float, int | None, list[str]]:
    """(rate, burstiness, max concurrency, notes) of a v0.2 scheduling strategy."""
    kind = at(strategy, "type_", src, HINT)
    if kind == "synchronous":
        return math.inf, 1.0, 1, ["GuideLLM's synchronous strategy: one request at a time"]
    if kind == "concurrent":
        streams = at(strategy, "streams", src, HINT)
        return math.inf, 1.0, count(streams, "args.strategy.streams", src), []
    if kind == "throughput":
        cap = strategy.get("max_concurrency")
        conc = None if cap is None else count(cap, "args.strategy.max_concurrency", src)
        return math.inf, 1.0, conc, []
    if kind in ("constant", "poisson"):
        rate = number(at(strategy, "rate", src, HINT), "args.strategy.rate", src)
        notes = []
        if strategy.get("initial_burst"):
            notes.append(
                f"GuideLLM's initial burst of {math.floor(rate)} requests is not simulated"
            )
        return rate, math.inf if kind == "constant" else 1.0, None, notes
    raise InvalidInputError(
        f"{src}: strategy {str(kind)[:40]!r} ('args.strategy.type_') is not one of "
        "synchronous, concurrent, throughput, constant, poisson"
    )


def _benchmark(b: Any, src: str) -> BenchmarkRun:
    if not isinstance(b, dict):
        raise InvalidInputError(f"{src}: each benchmark must be a mapping; {HINT}")
    strategy = at(b, "args.strategy", src, HINT)
    rate, burstiness, conc, notes = _load(strategy if isinstance(strategy, dict) else {}, src)
    metrics = Metrics(src)
    for name, (quantity, scale) in LATENCIES.items():
        s = _summary(b, name, src)
        path = f"metrics.{name}.successful"
        metrics.read(f"{quantity}_mean", s.get("mean"), f"{path}.mean", scale)
        metrics.read(f"{quantity}_p50", s.get("median"), f"{path}.median", scale)
        percentiles = s.get("percentiles")
        if percentiles is not None and not isinstance(percentiles, dict):
            raise InvalidInputError(f"{src}: '{path}.percentiles' must be a mapping; {HINT}")
        for key, label in PERCENTILES.items():
            value = (percentiles or {}).get(key)
            if value is not None:
                metrics.read(f"{quantity}_{label}", value, f"{path}.percentiles.{key}", scale)
    for name, key in THROUGHPUTS.items():
        metrics.read(key, _summary(b, name, src).get("mean"), f"metrics.{name}.successful.mean")
    totals = at(b, "request_totals", src, HINT)
    done = count(at(totals, "successful", src, HINT), "request_totals.successful", src)
    if done < 1:
        raise InvalidInputError(
            f"{src}: 'request_totals.successful': no request succeeded; nothing to compare"
        )
    left = {k: totals.get(k) for k in ("incomplete", "errored") if totals.get(k)}
    if left:
        said = ", ".join(f"{count(v, f'request_totals.{k}', src)} {k}" for k, v in left.items())
        notes.append(f"{said} in the benchmark; the {done} successful requests are simulated")
    args = b.get("args")
    if isinstance(args, dict) and args.get("max_duration") is not None:
        limit_s = duration_limit(args["max_duration"], "args.max_duration", src)
        notes.append(f"the run ended on its {limit_s:g} s duration, not on a request count")
    inp, out = _per_request(b, done, src)
    paths = {
        "requests": "request_totals.successful",
        "max_concurrency": "args.strategy.streams",
        "request_rate": "args.strategy.rate",
        "duration_s": "duration",
    }
    if inp is None or out is None:
        mean_in = number(
            _summary(b, "prompt_token_count", src).get("mean"),
            "metrics.prompt_token_count.successful.mean",
            src,
        )
        mean_out = number(
            _summary(b, "output_token_count", src).get("mean"),
            "metrics.output_token_count.successful.mean",
            src,
        )
        paths |= {
            "mean_input_tokens": "metrics.prompt_token_count.successful.mean",
            "mean_output_tokens": "metrics.output_token_count.successful.mean",
        }
        notes.append(
            "the report keeps a sample of the requests, not all: every request at the mean input "
            "and output lengths"
        )
    else:
        mean_in, mean_out = float(inp.mean()), float(out.mean())
    notes.append(
        "GuideLLM's inter_token_latency_ms, (last − first token) / (G − 1) per request, compared "
        "as TPOT; its time_per_output_token_ms (over G) is not compared"
    )
    model = b.get("worker", {}).get("backend_model") if isinstance(b.get("worker"), dict) else None
    return BenchmarkRun(
        source=src,
        format="guidellm v0.2",
        model=model if isinstance(model, str) else None,
        requests=done,
        request_rate=rate,
        metrics=metrics,
        mean_input_tokens=mean_in,
        mean_output_tokens=mean_out,
        burstiness=burstiness,
        max_concurrency=conc,
        input_tokens=inp,
        output_tokens=out,
        duration_s=None if b.get("duration") is None else number(b["duration"], "duration", src),
        notes=tuple(notes),
        paths={**metrics.paths, **paths},
    )


def _per_request(b: dict, done: int, src: str) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The successful requests' prompt and output tokens, when the report keeps all of them."""
    reqs = b.get("requests")
    ok = reqs.get("successful") if isinstance(reqs, dict) else None
    if not isinstance(ok, list) or len(ok) != done:
        return None, None
    if not all(isinstance(r, dict) and "prompt_tokens" in r and "output_tokens" in r for r in ok):
        return None, None
    inp = [count(r["prompt_tokens"], "requests.successful[].prompt_tokens", src) for r in ok]
    out = [count(r["output_tokens"], "requests.successful[].output_tokens", src) for r in ok]
    if min(inp) < 1 or min(out) < 1:
        return None, None
    return np.array(inp, dtype=np.int64), np.array(out, dtype=np.int64)
