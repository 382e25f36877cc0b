"""The one shape every result file is read into (`BenchmarkRun`), and the checks of the values
taken from a file: numbers, counts, token lengths, statistic names.

Metric names: `<quantity>_<stat>` in seconds, quantity one of ttft, tpot (per request,
(E2E − TTFT) / (G − 1), averaged over requests), itl (every gap between streamed chunks,
pooled), e2el; stat `mean` or `p<q>` (`p50` is the median). Percentiles below the median and
standard deviations are not kept: a serving predictor is judged on its centre and its tail.
Rates: `output_throughput` (tokens/s) and `request_throughput` (requests/s), whole deployment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import InvalidInputError
from ..workload import MAX_REQUESTS, NO_PREFIX, Workload

QUANTITIES = ("ttft", "tpot", "itl", "e2el")
RATES = ("output_throughput", "request_throughput")
#: seconds per unit, for the units result files write beside a latency
UNITS = {"s": 1.0, "sec": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


@dataclass(frozen=True, kw_only=True)
class BenchmarkRun:
    """One measured serving run: its workload and its metrics (seconds, or per second)."""

    source: str
    format: str
    model: str | None
    requests: int
    request_rate: float  # requests/s offered; inf: all sent at once
    metrics: dict[str, float]
    mean_input_tokens: float
    mean_output_tokens: float
    #: gamma shape of the gaps (1: Poisson), as vllm bench draws them; inf: evenly spaced
    burstiness: float = 1.0
    max_concurrency: int | None = None  # clients in flight at most (a closed loop)
    input_tokens: np.ndarray | None = None  # per request, when the file has them
    output_tokens: np.ndarray | None = None
    ttft_s: np.ndarray | None = None  # per request, measured, when the file has them
    itl_s: tuple[np.ndarray, ...] | None = None  # per request: its gaps between chunks
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not 1 <= self.requests <= MAX_REQUESTS:
            raise InvalidInputError(
                f"{self.source}: {self.requests:,} requests; a run of 1 to {MAX_REQUESTS:,} "
                "is simulated (give `requests`)"
            )
        if not (self.request_rate > 0):
            raise InvalidInputError(f"{self.source}: request rate must be positive")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise InvalidInputError(f"{self.source}: max concurrency must be at least 1")
        if not (self.mean_input_tokens >= 1 and self.mean_output_tokens >= 1):
            raise InvalidInputError(
                f"{self.source}: mean input and output lengths must be at least 1 token"
            )

    def workload(self, seed: int = 0) -> Workload:
        """The requests the benchmark sent: gamma gaps of shape `burstiness` at the rate (vllm
        bench: scale 1 / (rate · burstiness), first request at 0), evenly spaced gaps of
        1 / rate for an infinite shape (GuideLLM's constant rate), all at 0 for an infinite
        rate; the per-request lengths when the file lists them, else every request at the mean
        lengths."""
        n = self.requests
        if math.isinf(self.request_rate):
            arrival = np.zeros(n)
        elif math.isinf(self.burstiness):
            arrival = np.arange(n) / self.request_rate
        else:
            rng = np.random.default_rng(seed)
            gaps = rng.gamma(self.burstiness, 1.0 / (self.request_rate * self.burstiness), n)
            arrival = np.concatenate(([0.0], np.cumsum(gaps[:-1])))
        inp, out = self.input_tokens, self.output_tokens
        if inp is None or out is None or inp.size != n or out.size != n:
            inp = np.full(n, max(1, round(self.mean_input_tokens)))
            out = np.full(n, max(1, round(self.mean_output_tokens)))
        return Workload(
            arrival,
            np.asarray(inp, dtype=np.int64),
            np.asarray(out, dtype=np.int64),
            np.full(n, NO_PREFIX),
            np.zeros(n, dtype=np.int64),
        )

    @property
    def lengths_label(self) -> str:
        kind = "per request" if self.input_tokens is not None else "fixed at the means"
        return f"P≈{self.mean_input_tokens:.0f} G≈{self.mean_output_tokens:.0f} ({kind})"

    @property
    def load_label(self) -> str:
        if math.isinf(self.request_rate):
            rate = "all at once"
        elif math.isinf(self.burstiness):
            rate = f"{self.request_rate:g} req/s evenly spaced"
        else:
            rate = f"{self.request_rate:g} req/s"
        cap = f", ≤{self.max_concurrency} in flight" if self.max_concurrency else ""
        return f"{self.requests} requests, {rate}{cap}"


def number(v: Any, what: str, src: str, allow_inf: bool = False) -> float:
    """A finite number >= 0 read from a file (`allow_inf`: also "inf", "Infinity", inf)."""
    if isinstance(v, bool) or v is None:
        raise InvalidInputError(f"{src}: '{what}' must be a number, got {v!r}")
    if isinstance(v, str) and allow_inf and v.strip().lower() in ("inf", "infinity"):
        return math.inf
    try:
        x = float(v)
    except (TypeError, ValueError, OverflowError):
        raise InvalidInputError(f"{src}: '{what}' must be a number, got {str(v)[:40]!r}") from None
    if math.isnan(x) or (math.isinf(x) and not allow_inf) or x < 0:
        raise InvalidInputError(f"{src}: '{what}' must be a finite number >= 0, got {v!r}")
    return x


def count(v: Any, what: str, src: str) -> int:
    x = number(v, what, src)
    if x != int(x):
        raise InvalidInputError(f"{src}: '{what}' must be a whole number, got {v!r}")
    return int(x)


def lengths(v: Any, what: str, src: str, allow_zero: bool = False) -> np.ndarray | None:
    """Per-request token counts (None when absent); `allow_zero` for a failed request's."""
    if v is None:
        return None
    if not isinstance(v, list) or not v or len(v) > MAX_REQUESTS:
        raise InvalidInputError(f"{src}: '{what}' must be a list of token counts")
    out = np.array([count(x, what, src) for x in v], dtype=np.int64)
    if not allow_zero and out.min() < 1:
        raise InvalidInputError(f"{src}: '{what}' has a request of no tokens")
    return out


def seconds_array(v: Any, what: str, src: str, scale: float = 1.0) -> np.ndarray:
    """A list of latencies (finite, >= 0) in seconds."""
    if not isinstance(v, list):
        raise InvalidInputError(f"{src}: '{what}' must be a list of latencies")
    try:
        x = np.asarray(v, dtype=float)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{src}: '{what}' must be a list of numbers") from None
    if x.ndim != 1 or not np.isfinite(x).all() or (x < 0).any():
        raise InvalidInputError(f"{src}: '{what}' must hold finite latencies >= 0")
    return x * scale


def stat_label(stat: str) -> str | None:
    """A statistic's name in a metric name: mean/avg -> mean, median/p50 -> p50, p99.9 -> p99.9;
    None for one not kept (std, min, max, percentiles below the median)."""
    s = stat.strip().lower()
    if s in ("mean", "avg"):
        return "mean"
    if s == "median":
        return "p50"
    if s.startswith("p"):
        try:
            q = float(s[1:])
        except ValueError:
            return None
        return f"p{q:g}" if 50 <= q <= 100 else None
    return None


def at(d: Any, path: str, src: str, hint: str) -> Any:
    """The value at a dotted `path` of nested mappings, or one line naming the missing key."""
    node = d
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            raise InvalidInputError(f"{src}: no '{path}' (truncated?); {hint}")
        node = node[key]
    return node
