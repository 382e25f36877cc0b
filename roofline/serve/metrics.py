"""What users quote from a serving run, computed once from a `ServeResult`.

Per request: TTFT = first token − arrival; TPOT = (finish − first token) / (G − 1), for
requests with G > 1; E2E = finish − arrival. Throughput = generated tokens / (last finish −
first arrival). Goodput = requests meeting both SLOs per second over the same span.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InvalidInputError
from .simulate import ServeResult

if TYPE_CHECKING:
    from ..calc.stack import Stack

PERCENTILES = (50, 90, 95, 99)
TIMELINE_POINTS = 100


STEP_BAND_NOTE = "; the step-time band applied to the percentile (too narrow near saturation)"


def percentiles(x: np.ndarray) -> dict[str, float | None]:
    """{'p50': .., 'p90': .., 'p95': .., 'p99': .., 'mean': ..} in the unit of x; None when
    there is no sample (TPOT of requests that all generate one token: there is no second
    token to time)."""
    if not x.size:
        return {**{f"p{q}": None for q in PERCENTILES}, "mean": None}
    return {
        **{
            f"p{q}": float(v)
            for q, v in zip(PERCENTILES, np.percentile(x, PERCENTILES), strict=True)
        },
        "mean": float(x.mean()),
    }


def weighted_percentile(x: np.ndarray, w: np.ndarray, q: float) -> float:
    """The q-th percentile (linear interpolation, numpy's default) of the sample in which
    each x_i appears w_i times (whole-number weights), without building it: element k of the
    sorted repeated sample is the x whose cumulative count first exceeds k."""
    order = np.argsort(x, kind="stable")
    x, cum = x[order], np.cumsum(w[order])
    rank = q / 100 * (cum[-1] - 1)

    def at(k: int) -> float:
        return float(x[np.searchsorted(cum, k, side="right")])

    lo, hi = at(math.floor(rank)), at(math.ceil(rank))
    return lo + (hi - lo) * (rank - math.floor(rank))


def weighted_percentiles(x: np.ndarray, w: np.ndarray) -> dict[str, float | None]:
    """`percentiles` of the sample in which each x_i appears w_i times."""
    keep = w > 0
    x, w = x[keep], w[keep]
    if not x.size:
        return percentiles(x)
    return {
        **{f"p{q}": weighted_percentile(x, w, q) for q in PERCENTILES},
        "mean": float(np.average(x, weights=w)),
    }


LATENCY_METRICS = ("ttft", "tpot", "e2e")


@dataclass(frozen=True)
class Summary:
    """Metrics of one run under a TTFT/TPOT SLO."""

    result: ServeResult
    slo_ttft_s: float
    slo_tpot_s: float

    @property
    def ttft_s(self) -> np.ndarray:
        return self.result.first_token_s - self.result.workload.arrival_s

    @property
    def tpot_s(self) -> np.ndarray:
        """Per request; nan for single-token outputs (no token after the first)."""
        g = self.result.workload.output_tokens
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(
                g > 1, (self.result.finish_s - self.result.first_token_s) / (g - 1), np.nan
            )

    @property
    def e2e_s(self) -> np.ndarray:
        return self.result.finish_s - self.result.workload.arrival_s

    @property
    def itl_s(self) -> tuple[np.ndarray, np.ndarray]:
        """Every inter-token gap (s) and its count (`state.Gaps`): one per streamed output
        after a request's first, as `vllm bench serve` records ITL."""
        return self.result.gaps

    def latency_samples_s(self, metric: str) -> np.ndarray:
        """Defined samples of `ttft`, `tpot` or `e2e` (TPOT: requests with ≥ 2 tokens)."""
        if metric not in LATENCY_METRICS:
            raise InvalidInputError(
                f"unknown latency '{metric}'; use one of: {', '.join(LATENCY_METRICS)}"
            )
        x = getattr(self, f"{metric}_s")
        return x[~np.isnan(x)]

    @property
    def duration_s(self) -> float:
        return float(np.nanmax(self.result.finish_s) - self.result.workload.arrival_s.min())

    @property
    def requests_completed(self) -> int:
        return int(np.count_nonzero(self.result.completions == 1))

    @property
    def throughput_tokens_per_s(self) -> float:
        return float(self.result.workload.output_tokens.sum()) / self.duration_s

    @property
    def meets_slo(self) -> np.ndarray:
        tpot = np.nan_to_num(self.tpot_s, nan=0.0)
        return (self.ttft_s <= self.slo_ttft_s) & (tpot <= self.slo_tpot_s)

    @property
    def slo_attainment(self) -> float:
        return float(self.meets_slo.mean())

    @property
    def goodput_requests_per_s(self) -> float:
        return float(self.meets_slo.sum()) / self.duration_s

    def _weighted(self, pool: str | None, values: str) -> tuple[float, float]:
        """(busy-time-weighted mean, max) of a timeline column over a pool's replicas."""
        num = den = peak = 0.0
        for e in self.result.engines:
            if pool is not None and e.pool != pool:
                continue
            tl = e.timeline
            dt = np.asarray(tl.end_s) - np.asarray(tl.start_s)
            v = np.asarray(getattr(tl, values), dtype=float)
            num += float((v * dt).sum())
            den += float(dt.sum())
            peak = max(peak, float(v.max(initial=0.0)))
        return (num / den if den else 0.0), peak

    def kv(self) -> dict:
        """KV use per replica: allocated vs stored (internal fragmentation), prefix savings."""
        per_token = self.result.deployment.kv_bytes_per_token
        alloc_mean, alloc_peak = self._weighted(None, "kv_allocated_tokens")
        stored_mean, _ = self._weighted(None, "kv_stored_tokens")
        saving_mean, _ = self._weighted(None, "kv_shared_saving_tokens")
        capacity = max(p.kv_capacity_tokens for p in self.result.deployment.pools)
        return {
            "capacity_bytes": capacity * per_token,
            "allocated_mean_bytes": alloc_mean * per_token,
            "allocated_peak_bytes": alloc_peak * per_token,
            "fragmentation": 1 - stored_mean / alloc_mean if alloc_mean else 0.0,
            "prefix_sharing_saved_mean_bytes": saving_mean * per_token,
        }

    def utilisation(self) -> dict[str, float]:
        """Busy time / run duration, averaged over each pool's replicas."""
        out: dict[str, list[float]] = {}
        for e in self.result.engines:
            out.setdefault(e.pool, []).append(e.busy_s / self.duration_s)
        return {k: float(np.mean(v)) for k, v in out.items()}

    def timeline(self) -> dict:
        """Batch size and allocated KV summed over replicas, sampled at evenly spaced times."""
        t0 = float(self.result.workload.arrival_s.min())
        grid = np.linspace(t0, t0 + self.duration_s, TIMELINE_POINTS)
        seqs = np.zeros_like(grid)
        kv = np.zeros_like(grid)
        for e in self.result.engines:
            tl = e.timeline
            if not tl.end_s:
                continue
            start, end = np.asarray(tl.start_s), np.asarray(tl.end_s)
            i = np.searchsorted(end, grid, side="left")  # the step running at or after t
            inside = (i < end.size) & (start[np.minimum(i, end.size - 1)] <= grid)
            seqs += np.where(inside, np.asarray(tl.seqs)[np.minimum(i, end.size - 1)], 0)
            j = np.searchsorted(end, grid, side="right") - 1  # the last step done by t
            kv += np.where(j >= 0, np.asarray(tl.kv_allocated_tokens)[np.maximum(j, 0)], 0)
        return {
            "time_s": grid.tolist(),
            "batch_size": seqs.tolist(),
            "kv_allocated_bytes": (kv * self.result.deployment.kv_bytes_per_token).tolist(),
        }

    def intervals(self, stack: Stack, coverage: float) -> dict:
        """The interval of each TTFT, TPOT and E2E percentile: the step-time band of its
        quantity (`roofline.calc.intervals`: prefill for TTFT, decode for TPOT, e2e for E2E) for
        the stack's engine, GPUs and vendor at the run's mean batch, applied to the
        percentile. Queueing near saturation amplifies a step-time error, so close to the
        highest sustainable rate the band is too narrow; throughput below saturation is the
        offered load's and carries none. None on the datasheet ceiling (a bound)."""
        if stack.ceiling == "datasheet":
            return {}
        from ..calc.intervals import band_for

        mean_batch, _ = self._weighted(None, "seqs")
        out: dict = {}
        for name, quantity, values in (
            ("ttft_s", "prefill", self.ttft_s),
            ("tpot_s", "decode", self.tpot_s[~np.isnan(self.tpot_s)]),
            ("e2e_s", "e2e", self.e2e_s),
        ):
            band = band_for(
                quantity,
                stack.engine_name,
                stack.parallel.gpus_per_replica,
                max(mean_batch, 1.0),
                stack.hardware,
                coverage,
            )
            pct = percentiles(values)
            out[name] = {
                p: dict(zip(("low", "high"), band.of_time(v), strict=True))
                for p, v in pct.items()
                if v is not None and math.isfinite(v)
            } | {"coverage": coverage, "basis": band.basis + STEP_BAND_NOTE}
        return out

    def speculation(self) -> dict:
        """What the verifications did: drafts accepted of those made (vLLM's acceptance rate)
        and tokens each verification yielded (its mean acceptance length)."""
        c = self.result.counters
        return {
            "verifications": c.verifications,
            "drafted_tokens": c.drafted_tokens,
            "accepted_tokens": c.accepted_tokens,
            "acceptance_rate": c.accepted_tokens / c.drafted_tokens if c.drafted_tokens else None,
            "tokens_per_verification": (
                (c.accepted_tokens + c.verifications) / c.verifications if c.verifications else None
            ),
        }

    def as_dict(self, timeline: bool = True) -> dict:
        r, c = self.result, self.result.counters
        mean_batch, max_batch = self._weighted(None, "seqs")
        out = {
            "policy": r.policy.name,
            "requests": r.workload.requests,
            "requests_completed": self.requests_completed,
            "duration_s": self.duration_s,
            "throughput_tokens_per_s": self.throughput_tokens_per_s,
            "requests_per_s": self.requests_completed / self.duration_s,
            "ttft_s": percentiles(self.ttft_s),
            "tpot_s": percentiles(self.tpot_s[~np.isnan(self.tpot_s)]),
            "e2e_s": percentiles(self.e2e_s),
            "itl_s": weighted_percentiles(*self.itl_s),
            "slo": {
                "ttft_s": self.slo_ttft_s,
                "tpot_s": self.slo_tpot_s,
                "attainment": self.slo_attainment,
                "goodput_requests_per_s": self.goodput_requests_per_s,
            },
            "batch_size": {"mean": mean_batch, "max": max_batch},
            "kv": self.kv(),
            "utilisation": self.utilisation(),
            "preemptions": c.preemptions,
            "prefill_tokens": c.prefill_tokens,
            "prefix_hit_tokens": c.prefix_hit_tokens,
            "recomputed_tokens": c.recomputed_tokens,
            "padding_tokens": c.padding_tokens,
            "swap_s": c.swap_s,
        }
        if (spec := r.deployment.speculation) is not None:
            out["speculation"] = spec.as_dict() | self.speculation()
        if timeline:
            out["timeline"] = self.timeline()
        return out
