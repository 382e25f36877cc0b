"""The one shape every result file is read into (`BenchmarkRun`), and the checks of the values
taken from a file: numbers, counts, token lengths, statistic names.

Metric names: `<quantity>_<stat>` in seconds, quantity one of ttft, tpot (per request,
(E2E − TTFT) / (G − 1), averaged over requests), itl (every gap between streamed chunks,
pooled), e2el; stat `mean` or `p<q>` (`p50` is the median). Percentiles below the median and
standard deviations are not kept: a serving predictor is judged on its centre and its tail.
Rates: `output_throughput` (tokens/s) and `request_throughput` (requests/s), whole deployment.

Every value a reader takes from a file lands in a `BenchmarkRun`, which checks them all in one
place (`BenchmarkRun.__post_init__`): each in its plausible range, percentiles in order, TTFT
within E2E, the per-request lists as long as the request count. A refusal names the file and
the field's path in it, which the reader records beside the value (`Metrics.read`, `paths`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import InvalidInputError
from ..workload import MAX_REQUESTS, MAX_TOKENS, NO_PREFIX, Workload

QUANTITIES = ("ttft", "tpot", "itl", "e2el")
RATES = ("output_throughput", "request_throughput")
#: seconds per unit, for the units result files write beside a latency
UNITS = {"s": 1.0, "sec": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}

# Plausibility bounds: a value outside is a corrupt or hand-edited file, not a measurement. They
# are orders of magnitude beyond any real run (tests/fixtures/serving_files' largest: E2E
# 1.6e3 s, duration 1.8e3 s, 1.8e3 tokens/s, 8.4 requests/s; smallest latency 4.9 ms), so no
# real file meets them; their job is to stop 1e300 or 1e-300 before numpy.
#: seconds, a latency: 1 ns (a clock tick of perf_counter) to 1e6 s (11.6 days)
LATENCY_S = (1e-9, 1e6)
#: seconds a benchmark ran: up to 1e7 s (116 days)
MAX_DURATION_S = 1e7
#: requests/s, offered or completed: one per 1e6 s (11.6 days) to 1e7
REQUEST_RATE = (1e-6, 1e7)
#: tokens/s of a whole deployment: up to 1e9, ~5e5 × the fixtures' largest
MAX_OUTPUT_THROUGHPUT = 1e9
#: gamma shape of vllm bench's gaps (`--burstiness`): 1e-3 (one huge burst) to 1e3 (even)
BURSTINESS = (1e-3, 1e3)


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
    duration_s: float | None = None  # how long the benchmark ran, when the file says
    notes: tuple[str, ...] = field(default=())
    #: where each value was read in the file: a metric's or attribute's name -> its JSON path
    paths: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Every value in its range and consistent with the others, or one line naming the
        field of the file."""
        if not 1 <= self.requests <= MAX_REQUESTS:
            raise self._bad(
                "requests",
                f"{self.requests:,} requests; a run of 1 to {MAX_REQUESTS:,} is simulated "
                "(give `requests`)",
            )
        low, high = REQUEST_RATE
        if not (low <= self.request_rate <= high or self.request_rate == math.inf):
            raise self._bad(
                "request_rate",
                f"request rate must be positive, {low:g} to {high:g} requests/s or inf, got "
                f"{self.request_rate:g}",
            )
        low, high = BURSTINESS
        if not (low <= self.burstiness <= high or self.burstiness == math.inf):
            raise self._bad(
                "burstiness", f"burstiness {self.burstiness:g}; {low:g} to {high:g} (1: Poisson)"
            )
        if self.max_concurrency is not None and not 1 <= self.max_concurrency <= MAX_REQUESTS:
            raise self._bad(
                "max_concurrency",
                f"{self.max_concurrency:,} in flight at most; 1 to {MAX_REQUESTS:,}",
            )
        for name in ("mean_input_tokens", "mean_output_tokens"):
            value = getattr(self, name)
            if not 1 <= value <= MAX_TOKENS:
                raise self._bad(name, f"{value:g} tokens per request; 1 to {MAX_TOKENS:,}")
        if self.duration_s is not None and not 0 < self.duration_s <= MAX_DURATION_S:
            raise self._bad(
                "duration_s",
                f"a run of {self.duration_s:g} s; more than 0, up to {MAX_DURATION_S:g}",
            )
        self._check_lists()
        self._check_metrics()

    def _bad(self, name: str, what: str) -> InvalidInputError:
        return InvalidInputError(f"{self.source}: '{self.paths.get(name, name)}': {what}")

    def _check_lists(self) -> None:
        """The per-request lists hold one entry per simulated request."""
        for name in ("input_tokens", "output_tokens", "ttft_s", "itl_s"):
            values = getattr(self, name)
            if values is not None and len(values) != self.requests:
                raise self._bad(
                    name, f"{len(values):,} requests listed, the run has {self.requests:,}"
                )

    def _check_metrics(self) -> None:
        """Each metric finite and in range; per quantity the percentiles rising with q; TTFT
        no later than E2E at each statistic (every request's first token comes before its
        last, so each percentile and the mean do too)."""
        for name, value in self.metrics.items():
            quantity, _, stat = name.rpartition("_")
            if name == "output_throughput":
                low, high, unit = 0.0, MAX_OUTPUT_THROUGHPUT, "tokens/s"
            elif name == "request_throughput":
                low, high, unit = REQUEST_RATE[0], REQUEST_RATE[1], "requests/s"
            elif quantity in QUANTITIES and stat_label(stat) == stat:
                low, high, unit = LATENCY_S[0], LATENCY_S[1], "s"
            else:
                raise self._bad(name, "not a metric this version compares")
            if not (math.isfinite(value) and low <= value <= high and value > 0):
                raise self._bad(
                    name, f"{value:g} {unit}; a measurement is more than {low:g}, up to {high:g}"
                )
        for quantity in QUANTITIES:
            stats = sorted(
                (float(k.rpartition("_p")[2]), k)
                for k in self.metrics
                if k.startswith(f"{quantity}_p")
            )
            for (_, lo), (_, hi) in zip(stats, stats[1:], strict=False):
                if self.metrics[lo] > self.metrics[hi]:
                    raise self._bad(
                        hi,
                        f"{self.metrics[hi]:g} s, below '{self.paths.get(lo, lo)}' "
                        f"({self.metrics[lo]:g} s): percentiles out of order",
                    )
        for stat in (
            "mean",
            *(k.rpartition("_")[2] for k in self.metrics if k.startswith("ttft_")),
        ):
            ttft, e2e = self.metrics.get(f"ttft_{stat}"), self.metrics.get(f"e2el_{stat}")
            # 1e-5 s: the two decimals of ms AIPerf's CSV rounds to
            if ttft is not None and e2e is not None and ttft > e2e * (1 + 1e-9) + 1e-5:
                raise self._bad(
                    f"ttft_{stat}",
                    f"TTFT {ttft:g} s, later than '{self.paths.get(f'e2el_{stat}', 'e2el')}' "
                    f"{e2e:g} s",
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


class Metrics(dict[str, float]):
    """Metrics read from one file (name -> seconds or per second), and the path each was read
    at (`paths`), for `BenchmarkRun` to name in a refusal."""

    def __init__(self, src: str) -> None:
        super().__init__()
        self.src = src
        self.paths: dict[str, str] = {}

    def read(self, name: str, value: Any, path: str, scale: float = 1.0) -> None:
        self[name] = number(value, path, self.src) * scale
        self.paths[name] = path


def number(v: Any, what: str, src: str, allow_inf: bool = False) -> float:
    """A finite number >= 0 read from a file (`allow_inf`: also "inf", "Infinity", inf). A
    string is a number only where the format is text (CSV): `cell` converts those first."""
    if isinstance(v, bool) or v is None or isinstance(v, list | dict):
        raise InvalidInputError(f"{src}: '{what}' must be a number, got {str(v)[:40]!r}")
    if isinstance(v, str):
        if allow_inf and v.strip().lower() in ("inf", "infinity"):
            return math.inf
        raise InvalidInputError(f"{src}: '{what}' must be a number, got the text {v[:40]!r}")
    try:
        x = float(v)
    except (TypeError, ValueError, OverflowError):
        raise InvalidInputError(f"{src}: '{what}' must be a number, got {str(v)[:40]!r}") from None
    if math.isnan(x) or (math.isinf(x) and not allow_inf) or x < 0:
        raise InvalidInputError(f"{src}: '{what}' must be a finite number >= 0, got {v!r}")
    return x


def duration_limit(v: Any, what: str, src: str) -> float:
    """A run's time limit in seconds read from a file: more than 0, up to `MAX_DURATION_S`."""
    x = number(v, what, src)
    if not 0 < x <= MAX_DURATION_S:
        raise InvalidInputError(
            f"{src}: '{what}' is a limit of more than 0 s, up to {MAX_DURATION_S:g} s; got {v!r}"
        )
    return x


def share(v: Any, what: str, src: str, whole: float = 1.0) -> float:
    """A share of a whole read from a file: 0 to 1 (`whole` 100 for a percentage)."""
    x = number(v, what, src)
    if x > whole:
        raise InvalidInputError(f"{src}: '{what}' is a share of 0 to {whole:g}, got {v!r}")
    return x


def cell(text: str) -> float | str:
    """A CSV cell: its number ('1,234.5' -> 1234.5), or the text when it is none."""
    try:
        return float(text.replace(",", "").strip())
    except ValueError:
        return text.strip()


def count(v: Any, what: str, src: str, most: int = MAX_TOKENS) -> int:
    """A whole number 0 to `most` read from a file (requests, tokens, clients, GPUs): the
    default, a request's most tokens, is beyond any count a result file holds."""
    x = number(v, what, src)
    if x != int(x):
        raise InvalidInputError(f"{src}: '{what}' must be a whole number, got {v!r}")
    if x > most:
        raise InvalidInputError(f"{src}: '{what}' must be at most {most:,}, got {v!r}")
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
    if not all(isinstance(t, int | float) and not isinstance(t, bool) for t in v):
        raise InvalidInputError(f"{src}: '{what}' must be a list of numbers")
    try:
        x = np.asarray(v, dtype=float) * scale
    except OverflowError:
        raise InvalidInputError(f"{src}: '{what}' holds a number beyond a float") from None
    if x.ndim != 1 or not np.isfinite(x).all() or (x < 0).any() or (x > LATENCY_S[1]).any():
        raise InvalidInputError(f"{src}: '{what}' must hold latencies of 0 to {LATENCY_S[1]:g} s")
    return x


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
