"""Planning: the cheapest deployment that meets a TTFT/TPOT SLO at an arrival rate.

Search space: hardware × weight/KV format × TP/PP/EP × max batch B (the scheduler's max
sequences) × replicas m, and disaggregated prefill/decode pools (prefill device × decode device
× m_p prefill and m_d decode replicas, one parallel layout and format for both, as the simulator
runs them). Two stages:

1. Analytical screening of every point. Per (device, format, layout) one `phases.estimate` call
   over a grid of batch sizes b gives the prefill time of one prompt t_pf (B = 1, T = P) and the
   mean decode step time t(b) over the G − 1 steps; the rest is arithmetic on arrays. A replica
   receives λ = R/m requests per second (Poisson), each a prompt of P tokens and G output tokens,
   under continuous batching with whole-prompt (prefill-first) steps:
   - prefill share of time ρ = λ·t_pf (≥ 1: the replica cannot keep up);
   - decode concurrency N (Little's law, decodes pause while a prompt runs):
     N = λ·(G−1)·t(N) / (1 − ρ), the least fixed point on the grid; its p95 N + 1.645·√N
     (Poisson) must stay within the max batch B (otherwise requests queue for a slot, which the
     TTFT below does not model: the point counts as saturated), and N must fit the KV capacity
     (paged, `kv_capacity_tokens`) at the mean context P + G/2;
   - TPOT: t(N) plus the prompts that arrive during a request's decode, k of them at t_pf each,
     spread over its G − 1 tokens; k is Poisson with mean μ = λ·(G−1)·t(N)/(1−ρ) and its p95 is
     taken as μ + 1.645·√μ (normal approximation): TPOT₉₅ = t(N) + (μ + 1.645√μ)·t_pf/(G−1);
   - TTFT: the prompt queue is M/D/1 with service t_pf: mean wait W = ρ·t_pf / (2(1−ρ)), its tail
     taken exponential given a wait (Kingman's heavy-traffic approximation), P(wait > x) ≈
     ρ·exp(−x·ρ/W), so wait₉₅ = (W/ρ)·ln(20ρ) (0 when ρ ≤ 1/20); plus t_pf, plus one decode step
     t(N) already running: TTFT₉₅ = t_pf + wait₉₅ + t(N).
   Disaggregated: the prefill pool is the same M/D/1 queue with λ = R/m_p and no decode step to
   wait for; the decode pool has no prompt interruptions (ρ = 0, μ = 0) and adds the KV hand-off
   (P tokens over the prefill device's link) to the first decode token, spread over G − 1.
2. The serving simulator (`roofline.serve`) replays Poisson arrivals at the rate (or the trace)
   on the cheapest analytically feasible candidates; a candidate is chosen only when its
   simulated p95 TTFT and TPOT meet the SLO. Both numbers are reported.

Cost: GPUs are paid whether busy or not, so cost per million output tokens is the deployment's
$/hour over the R·G tokens/s it delivers at the offered rate (`economics`). Energy: each GPU's
average power from the time it spends in prefill (ρ) and decode steps and idle, through the power
model in `economics`.

The Pareto frontier is over (cost per million tokens, TPOT₉₅, TTFT₉₅), all minimised, among the
points that sustain the rate and fit in memory (whether or not they meet the SLO): a point is on
it when no other point is at least as good in all three and better in one.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from . import memory
from .cost import Ceiling
from .economics import (
    PriceTable,
    Tier,
    cost_per_million_tokens,
    joules_per_token,
    power_model,
    roof_utilisation,
)
from .engine import EngineSpec
from .errors import DoesNotFitError, InvalidInputError, RooflineError
from .hardware import HardwareSpec
from .model import ModelSpec
from .operators import Step
from .parallel import check, parallel_step_cost
from .phases import estimate
from .placement import Parallel, pp_stage, tp_shard
from .precision import Precision
from .serve.metrics import Summary
from .serve.policy import POLICIES, Policy
from .serve.simulate import build_deployment, kv_capacity_tokens, simulate
from .serve.workload import Lengths, Workload, synthetic
from .stack import Stack

#: z of the 95th percentile of a standard normal (the Poisson count of interrupting prompts).
Z95 = 1.645
#: Batch sizes the decode step time is evaluated at; other b are interpolated linearly.
BATCH_GRID_POINTS = 40
Serving = Literal["both", "aggregated", "disaggregated"]
SERVING: tuple[str, ...] = ("both", "aggregated", "disaggregated")


class InfeasibleError(RooflineError):
    """No deployment in the search space can meet the requirement; the message names the
    requirement that cannot be met and the closest achievable value."""


@dataclass(frozen=True)
class Requirement:
    """What must be served: R requests/s of P prompt and G output tokens, p95 SLOs."""

    rate_per_s: float
    prompt_tokens: int
    gen_tokens: int
    slo_ttft_s: float
    slo_tpot_s: float

    def __post_init__(self) -> None:
        if not self.rate_per_s > 0:
            raise InvalidInputError(f"`rate_per_s` must be positive, got {self.rate_per_s}")
        if self.prompt_tokens < 1 or self.gen_tokens < 2:
            raise InvalidInputError(
                "`prompt_tokens` must be at least 1 token and `gen_tokens` at least 2 "
                "(TPOT needs a token after the first)"
            )
        if not (self.slo_ttft_s > 0 and self.slo_tpot_s > 0):
            raise InvalidInputError("`slo_ttft_s` and `slo_tpot_s` must be positive seconds")

    @property
    def output_tokens_per_s(self) -> float:
        return self.rate_per_s * self.gen_tokens


@dataclass(frozen=True)
class Space:
    """The deployments searched."""

    hardware: tuple[str, ...]
    formats: tuple[str, ...] = ("bf16", "fp8", "int4-g128")
    max_gpus: int = 64
    max_batches: tuple[int, ...] = (8, 16, 32, 64, 128, 256, 512)
    tp: tuple[int, ...] = (1, 2, 4, 8)
    pp: tuple[int, ...] = (1, 2)
    ep: tuple[int, ...] = (1, 2, 4, 8)
    serving: Serving = "both"
    max_prefill_replicas: int = 8
    tier: Tier = "on-demand"
    ceiling: Ceiling = "achievable"

    def __post_init__(self) -> None:
        if not self.hardware:
            raise InvalidInputError("give at least one device to search (`hardware`)")
        if self.max_gpus < 1:
            raise InvalidInputError(f"`max_gpus` must be at least 1, got {self.max_gpus}")
        if not self.formats or not self.max_batches or min(self.max_batches) < 1:
            raise InvalidInputError("give at least one format and positive max batches")
        if self.serving not in SERVING:
            raise InvalidInputError(
                f"unknown `serving` '{self.serving}'; use one of: {', '.join(SERVING)}"
            )


def precision_of(fmt: str) -> Precision:
    """A plan format: `W` (as `--dtype W`) or `W/KV` (weights W, KV cache KV)."""
    w, _, kv = fmt.partition("/")
    base = Precision.uniform(w)
    return Precision(base.weights, base.activations, kv) if kv else base


# ---- stage 1: one table per (device, format, layout) ----------------------------------------
@dataclass(frozen=True)
class GroupTable:
    """Everything the screening needs about one replica shape: a device, a format and a
    tp × pp × ep layout. Times in seconds, per replica."""

    hardware: str
    fmt: str
    parallel: Parallel
    usd_per_gpu_hour: float
    t_prefill_s: float  # one prompt of P tokens, B = 1
    batch_grid: np.ndarray  # (K,) b, increasing, starting at 1
    tpot_grid_s: np.ndarray  # (K,) mean decode step at batch b over the G − 1 steps
    u_decode_grid: np.ndarray = field(default_factory=lambda: np.zeros(1))  # (K,) roof use
    u_prefill: float = 0.0
    kv_capacity_tokens: float = math.inf
    kv_bytes_per_token: float = 0.0  # one GPU's share, moved at a hand-off
    link_bytes_per_s: float = math.inf
    link_latency_s: float = 0.0
    idle_w: float = 0.0
    tdp_w: float = 0.0

    @property
    def gpus(self) -> int:
        return self.parallel.gpus_per_replica

    def tpot_at(self, n: np.ndarray) -> np.ndarray:
        """t(N): the step time at concurrency N (N < 1 runs one sequence)."""
        return np.interp(np.maximum(n, 1.0), self.batch_grid, self.tpot_grid_s)

    def u_decode_at(self, n: np.ndarray) -> np.ndarray:
        if self.u_decode_grid.size != self.batch_grid.size:
            return np.zeros_like(np.asarray(n, dtype=float))
        return np.interp(np.maximum(n, 1.0), self.batch_grid, self.u_decode_grid)

    def power_w(self, u: np.ndarray) -> np.ndarray:
        return self.idle_w + (self.tdp_w - self.idle_w) * np.clip(u, 0.0, 1.0)


@dataclass(frozen=True)
class Rejected:
    """A (device, format, layout) that cannot run at all, and why."""

    hardware: str
    fmt: str
    parallel: Parallel
    reason: str  # "memory: weights" or "unsupported"
    detail: str
    weights_bytes_per_gpu: float = math.nan
    capacity_bytes: float = math.nan


def _layouts(m: ModelSpec, hw: HardwareSpec, space: Space) -> list[Parallel]:
    """The tp × pp × ep layouts of at most max_gpus GPUs that split `m` and that `hw` links."""
    eps = space.ep if m.moe is not None else (1,)
    out = []
    for tp in space.tp:
        for pp in space.pp:
            for ep in eps:
                if (ep > 1 and tp > 1) or tp * pp * ep > space.max_gpus:
                    continue
                par = Parallel(tp, pp, ep)
                try:
                    check(m, hw, par)
                except InvalidInputError:
                    continue
                out.append(par)
    return out


def batch_grid(max_batch: int, points: int = BATCH_GRID_POINTS) -> np.ndarray:
    """Integers 1..max_batch, geometrically spaced, both ends included."""
    return np.unique(np.round(np.geomspace(1, max_batch, points))).astype(float)


def build_groups(
    model: ModelSpec,
    hardware: Sequence[HardwareSpec],
    req: Requirement,
    space: Space,
    prices: PriceTable,
    engine: EngineSpec | None = None,
) -> tuple[list[GroupTable], list[Rejected]]:
    """One `GroupTable` per runnable (device, format, layout); the others as `Rejected`."""
    P, G = req.prompt_tokens, req.gen_tokens
    grid = batch_grid(max(space.max_batches))
    policy = _policy(max(space.max_batches), False)
    groups: list[GroupTable] = []
    rejected: list[Rejected] = []
    for hw in hardware:
        price = prices.usd_per_gpu_hour(hw.name, space.tier)
        pm = power_model(hw)
        for fmt in space.formats:
            prec = precision_of(fmt)
            if not hw.supports(prec.compute):
                rejected.append(
                    Rejected(
                        hw.name,
                        fmt,
                        Parallel(),
                        "unsupported",
                        f"{hw.name} has no {prec.compute} compute",
                    )
                )
                continue
            for par in _layouts(model, hw, space):
                stack = Stack.resolve(model, hw, prec, space.ceiling, engine, par)
                w = float(memory.held(model, stack, 1, P, P + G).weights_bytes)
                try:
                    kv_tokens = kv_capacity_tokens(model, stack, policy)
                except DoesNotFitError as e:
                    rejected.append(
                        Rejected(hw.name, fmt, par, "memory: weights", str(e), w, hw.memory_bytes)
                    )
                    continue
                est = estimate(model, stack, [int(b) for b in grid], P, G)
                dec = parallel_step_cost(model, stack, Step(grid, 1, P + G // 2))
                u_dec = roof_utilisation(
                    dec.compute.flops, dec.compute.bytes, dec.time_s, hw, prec.compute
                )
                t_pf = est.cases[0].ttft_s
                u_pf = float(
                    roof_utilisation(est.prefill.flops, est.prefill.bytes, t_pf, hw, prec.compute)
                )
                ic = hw.interconnect
                groups.append(
                    GroupTable(
                        hw.name,
                        fmt,
                        par,
                        price,
                        t_pf,
                        grid,
                        np.array([c.tpot_s for c in est.cases]),
                        np.asarray(u_dec, dtype=float),
                        u_pf,
                        float(kv_tokens),
                        memory.kv_bytes_per_token(pp_stage(tp_shard(model, par.tp), par.pp), prec),
                        ic.bandwidth_bytes_per_s or math.inf,
                        ic.latency_us * 1e-6,
                        pm.idle_w,
                        pm.tdp_w,
                    )
                )
    return groups, rejected


# ---- the queueing arithmetic (module docstring) ---------------------------------------------
def concurrency(a: np.ndarray, g: GroupTable) -> np.ndarray:
    """Least N with N = a · t(N) on the batch grid (a = λ(G−1)/(1−ρ), per replica), linear
    between grid points; inf where a · t(b) > b for every b of the grid."""
    a = np.asarray(a, dtype=float)
    b, t = g.batch_grid, g.tpot_grid_s
    h = a[..., None] * t - b  # (…, K): > 0 while the batch limit b cannot carry the rate
    ok = h <= 0
    k = np.argmax(ok, axis=-1)
    found = ok.any(axis=-1)
    km = np.maximum(k - 1, 0)
    hk, hkm = (
        np.take_along_axis(h, k[..., None], -1)[..., 0],
        np.take_along_axis(h, km[..., None], -1)[..., 0],
    )
    bk, bkm = b[k], b[km]
    with np.errstate(invalid="ignore", divide="ignore"):
        between = bkm + (bk - bkm) * hkm / (hkm - hk)
    n = np.where(k == 0, a * t[0], between)
    return np.where(found, n, np.inf)


def wait_p95_s(rho: np.ndarray, service_s: float) -> np.ndarray:
    """p95 queueing delay of an M/D/1 queue: (W/ρ)·ln(20ρ), W = ρ·s / (2(1−ρ)); 0 if ρ ≤ 1/20."""
    rho = np.asarray(rho, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        w = rho * service_s / (2 * (1 - rho))
        tail = np.where(20 * rho > 1, w / rho * np.log(np.maximum(20 * rho, 1.0)), 0.0)
    return np.where(rho < 1, tail, np.inf)


@dataclass(frozen=True)
class PoolLatency:
    """Per-replica analytic results, arrays over the replica counts (and max batches)."""

    concurrency: np.ndarray
    ttft_p95_s: np.ndarray
    tpot_p95_s: np.ndarray
    prefill_share: np.ndarray  # ρ
    decode_share: np.ndarray  # share of time in decode steps
    stable: np.ndarray  # ρ < 1 and N finite


def aggregated_latency(g: GroupTable, lam: np.ndarray, gen: int) -> PoolLatency:
    """One pool doing prefill and decode, λ requests/s per replica (module docstring)."""
    lam = np.asarray(lam, dtype=float)
    rho = lam * g.t_prefill_s
    with np.errstate(invalid="ignore", divide="ignore"):
        a = np.where(rho < 1, lam * (gen - 1) / (1 - rho), np.inf)
    n = concurrency(np.where(np.isfinite(a), a, 0.0), g)
    n = np.where(np.isfinite(a), n, np.inf)
    t = g.tpot_at(np.where(np.isfinite(n), n, 1.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        mu = lam * (gen - 1) * t / (1 - rho)
        tpot = t + (mu + Z95 * np.sqrt(np.maximum(mu, 0))) * g.t_prefill_s / (gen - 1)
    ttft = g.t_prefill_s + wait_p95_s(rho, g.t_prefill_s) + t
    stable = (rho < 1) & np.isfinite(n)
    decode = np.minimum(np.maximum(1 - rho, 0), lam * (gen - 1) * t / np.maximum(n, 1.0))
    return PoolLatency(
        n,
        np.where(stable, ttft, np.inf),
        np.where(stable, tpot, np.inf),
        rho,
        np.where(stable, decode, 0.0),
        stable,
    )


def max_rate_per_replica(g: GroupTable, prompt: int, gen: int, max_batch: int) -> float:
    """The highest arrival rate (req/s) one aggregated replica sustains: ρ < 1, the p95
    concurrency within `max_batch` and the mean concurrency's KV within capacity, on a
    geometric grid of rates (0.8 % steps)."""
    lam = np.geomspace(1e-3, 1e4, 2000)
    lat = aggregated_latency(g, lam, gen)
    ok = (
        lat.stable
        & (peak_concurrency(lat.concurrency) <= max_batch)
        & (lat.concurrency * (prompt + gen / 2) <= g.kv_capacity_tokens)
    )
    return float(lam[ok].max()) if ok.any() else 0.0


def prefill_pool_ttft_p95_s(g: GroupTable, lam: np.ndarray) -> np.ndarray:
    """TTFT₉₅ of a prefill-only pool: t_pf + wait₉₅ of the M/D/1 prompt queue."""
    rho = np.asarray(lam, dtype=float) * g.t_prefill_s
    return g.t_prefill_s + wait_p95_s(rho, g.t_prefill_s)


def decode_pool_latency(g: GroupTable, lam: np.ndarray, gen: int, prompt: int) -> PoolLatency:
    """A decode-only pool fed by hand-offs: N = λ(G−1)·t(N), TPOT = t(N) + hand-off/(G−1)."""
    lam = np.asarray(lam, dtype=float)
    n = concurrency(lam * (gen - 1), g)
    t = g.tpot_at(np.where(np.isfinite(n), n, 1.0))
    handoff = g.link_latency_s + prompt * g.kv_bytes_per_token / g.link_bytes_per_s
    stable = np.isfinite(n)
    tpot = np.where(stable, t + handoff / (gen - 1), np.inf)
    decode = np.minimum(1.0, lam * (gen - 1) * t / np.maximum(n, 1.0))
    return PoolLatency(
        n, np.zeros_like(tpot), tpot, np.zeros_like(tpot), np.where(stable, decode, 0.0), stable
    )


# ---- the points -----------------------------------------------------------------------------
#: Why a point fails, in the order it is checked (the first failing reason is kept).
REASONS = (
    "meets SLO",
    "memory: KV cache",
    "throughput: saturated",
    "TTFT over SLO",
    "TPOT over SLO",
)
OK, KV, SATURATED, TTFT, TPOT = range(len(REASONS))


@dataclass(frozen=True)
class Points:
    """Every screened deployment as parallel arrays (one row each)."""

    kind: np.ndarray  # 0 aggregated, 1 disaggregated
    group: np.ndarray  # index of the (decode) group
    prefill_group: np.ndarray  # index of the prefill group (-1: aggregated)
    replicas: np.ndarray  # decode (or only) pool replicas
    prefill_replicas: np.ndarray  # 0: aggregated
    max_batch: np.ndarray
    gpus: np.ndarray
    usd_per_hour: np.ndarray
    cost_per_mtok: np.ndarray
    joules_per_token: np.ndarray
    ttft_p95_s: np.ndarray
    tpot_p95_s: np.ndarray
    concurrency: np.ndarray
    status: np.ndarray

    @property
    def size(self) -> int:
        return int(self.status.size)

    @classmethod
    def concat(cls, parts: list[Points]) -> Points:
        names = cls.__dataclass_fields__
        if not parts:
            return cls(**{k: np.zeros(0) for k in names})
        return cls(**{k: np.concatenate([getattr(p, k) for p in parts]) for k in names})


def peak_concurrency(n: np.ndarray) -> np.ndarray:
    """p95 of the number of sequences decoding, N + 1.645·√N (Poisson around the mean N):
    a max batch below it makes new requests queue for a slot, which the TTFT model omits."""
    with np.errstate(invalid="ignore"):
        return n + Z95 * np.sqrt(n)


def _status(
    stable: np.ndarray, kv_ok: np.ndarray, ttft: np.ndarray, tpot: np.ndarray, req: Requirement
) -> np.ndarray:
    s = np.full(ttft.shape, OK)
    s = np.where(tpot > req.slo_tpot_s, TPOT, s)
    s = np.where(ttft > req.slo_ttft_s, TTFT, s)
    s = np.where(stable, s, SATURATED)
    return np.where(kv_ok, s, KV)


def aggregated_points(groups: Sequence[GroupTable], req: Requirement, space: Space) -> Points:
    """Every (group, replicas m, max batch B) of single-pool serving."""
    parts = []
    B = np.asarray(space.max_batches, dtype=float)
    P, G = req.prompt_tokens, req.gen_tokens
    for i, g in enumerate(groups):
        m = np.arange(1, space.max_gpus // g.gpus + 1, dtype=float)
        lat = aggregated_latency(g, req.rate_per_s / m, G)
        n = lat.concurrency[:, None]  # (M, 1) against (nB,)
        stable = lat.stable[:, None] & (peak_concurrency(n) <= B[None, :])
        kv_ok = n * (P + G / 2) <= g.kv_capacity_tokens
        kv_ok = kv_ok | ~stable  # saturation is reported before memory for unstable points
        shape = (m.size, B.size)
        ttft = np.broadcast_to(lat.ttft_p95_s[:, None], shape)
        tpot = np.broadcast_to(lat.tpot_p95_s[:, None], shape)
        status = _status(stable, kv_ok, ttft, tpot, req)
        u = lat.prefill_share * g.u_prefill + lat.decode_share * g.u_decode_at(
            np.where(np.isfinite(lat.concurrency), lat.concurrency, 1.0)
        )
        power = g.power_w(u)  # (M,) per GPU
        gpus = m * g.gpus
        usd = gpus * g.usd_per_gpu_hour
        parts.append(
            Points(
                np.zeros(shape, int).ravel(),
                np.full(shape, i).ravel(),
                np.full(shape, -1).ravel(),
                np.broadcast_to(m[:, None], shape).ravel(),
                np.zeros(shape).ravel(),
                np.broadcast_to(B[None, :], shape).ravel(),
                np.broadcast_to(gpus[:, None], shape).ravel(),
                np.broadcast_to(usd[:, None], shape).ravel(),
                np.broadcast_to(
                    np.asarray(cost_per_million_tokens(usd, 1, req.output_tokens_per_s))[:, None],
                    shape,
                ).ravel(),
                np.broadcast_to(
                    np.asarray(joules_per_token(power, gpus, req.output_tokens_per_s))[:, None],
                    shape,
                ).ravel(),
                ttft.ravel(),
                tpot.ravel(),
                np.broadcast_to(n, shape).ravel(),
                status.ravel(),
            )
        )
    return Points.concat(parts)


def disaggregated_points(groups: Sequence[GroupTable], req: Requirement, space: Space) -> Points:
    """Every (prefill group, decode group of the same format and layout, m_p, m_d, B)."""
    parts = []
    B = np.asarray(space.max_batches, dtype=float)
    P, G = req.prompt_tokens, req.gen_tokens
    for i, gd in enumerate(groups):
        for j, gp in enumerate(groups):
            # one format and layout for both pools; the KV crosses the prefill device's link
            if (gp.fmt, gp.parallel) != (gd.fmt, gd.parallel) or math.isinf(gp.link_bytes_per_s):
                continue
            total = space.max_gpus // gd.gpus
            if total < 2:
                continue
            mp = np.arange(1, min(space.max_prefill_replicas, total - 1) + 1, dtype=float)
            md = np.arange(1, total, dtype=float)
            ttft_p = prefill_pool_ttft_p95_s(gp, req.rate_per_s / mp)  # (Mp,)
            dec = decode_pool_latency(gd, req.rate_per_s / md, G, P)  # (Md,)
            shape = (mp.size, md.size, B.size)
            fits = (mp[:, None] + md[None, :]) <= total  # (Mp, Md)
            n = dec.concurrency[None, :, None]
            stable = (
                np.isfinite(ttft_p)[:, None, None]
                & dec.stable[None, :, None]
                & (peak_concurrency(n) <= B[None, None, :])
            )
            stable = np.broadcast_to(stable, shape)
            kv_ok = (n * (P + G / 2) <= gd.kv_capacity_tokens) | ~stable
            kv_ok = np.broadcast_to(kv_ok, shape)
            ttft = np.broadcast_to(ttft_p[:, None, None], shape)
            tpot = np.broadcast_to(dec.tpot_p95_s[None, :, None], shape)
            status = _status(stable, kv_ok, ttft, tpot, req)
            rho_p = req.rate_per_s / mp * gp.t_prefill_s
            p_pre = gp.power_w(np.minimum(rho_p, 1) * gp.u_prefill)  # (Mp,)
            p_dec = gd.power_w(
                dec.decode_share
                * gd.u_decode_at(np.where(np.isfinite(dec.concurrency), dec.concurrency, 1.0))
            )  # (Md,)
            usd = (mp[:, None] * gp.usd_per_gpu_hour + md[None, :] * gd.usd_per_gpu_hour) * gd.gpus
            watts = (mp[:, None] * p_pre[:, None] + md[None, :] * p_dec[None, :]) * gd.gpus
            gpus = (mp[:, None] + md[None, :]) * gd.gpus
            keep = np.broadcast_to(fits[:, :, None], shape).ravel()

            def flat(x, keep=keep, shape=shape):
                return np.broadcast_to(x, shape).ravel()[keep]

            parts.append(
                Points(
                    flat(np.ones(shape, int)),
                    flat(np.full(shape, i)),
                    flat(np.full(shape, j)),
                    flat(md[None, :, None]),
                    flat(mp[:, None, None]),
                    flat(B[None, None, :]),
                    flat(gpus[:, :, None]),
                    flat(usd[:, :, None]),
                    flat(
                        np.asarray(cost_per_million_tokens(usd, 1, req.output_tokens_per_s))[
                            :, :, None
                        ]
                    ),
                    flat(
                        np.asarray(joules_per_token(watts, 1, req.output_tokens_per_s))[:, :, None]
                    ),
                    flat(ttft),
                    flat(tpot),
                    flat(n),
                    flat(status),
                )
            )
    return Points.concat(parts)


def pareto_mask(*objectives: np.ndarray) -> np.ndarray:
    """True for points no other point dominates (≤ in every objective, < in one), all
    minimised; identical points are kept together. Three objectives at most.

    Sweep in order of the first objective: a point is dominated by an earlier one when the
    frontier so far holds one with second ≤ and third ≤ its own (a staircase lookup: the
    frontier sorted by the second objective, running minimum of the third); the few that
    survive are checked against each other, and a last pass settles ties of the first."""
    x = np.stack([np.asarray(o, dtype=float) for o in objectives], axis=1)  # (n, k)
    if x.shape[1] < 3:
        x = np.concatenate([x, np.zeros((x.shape[0], 3 - x.shape[1]))], axis=1)
    uniq, inverse = np.unique(x, axis=0, return_inverse=True)  # sorted by the first column
    inverse = np.asarray(inverse).reshape(-1)

    def dominated(a: np.ndarray, by: np.ndarray) -> np.ndarray:
        le = (by[None, :, :] <= a[:, None, :]).all(-1)
        lt = (by[None, :, :] < a[:, None, :]).any(-1)
        return np.any(le & lt, axis=1)

    front = np.zeros((0, 3))
    chunk = 1024
    for s in range(0, uniq.shape[0], chunk):
        c = uniq[s : s + chunk]
        if front.shape[0]:
            f = front[np.argsort(front[:, 1], kind="stable")]
            best3 = np.minimum.accumulate(f[:, 2])
            k = np.searchsorted(f[:, 1], c[:, 1], side="right") - 1
            c = c[~((k >= 0) & (best3[np.maximum(k, 0)] <= c[:, 2]))]
        c = c[~dominated(c, c)]
        front = np.concatenate([front, c])
    front = front[~dominated(front, front)]
    keep = np.zeros(uniq.shape[0], bool)
    rows = {tuple(r) for r in front.tolist()}
    keep[[i for i, r in enumerate(uniq.tolist()) if tuple(r) in rows]] = True
    return keep[inverse]


# ---- candidates and the result --------------------------------------------------------------
@dataclass(frozen=True)
class SimCheck:
    """The simulator's verdict on a candidate."""

    ttft_p95_s: float
    tpot_p95_s: float
    slo_attainment: float
    requests: int
    meets_slo: bool
    elapsed_s: float


@dataclass(frozen=True)
class Candidate:
    """One deployment with its analytic (and, once confirmed, simulated) numbers."""

    kind: str  # "aggregated" or "disaggregated"
    hardware: str  # the serving (decode) device
    prefill_hardware: str | None
    fmt: str
    parallel: Parallel
    max_batch: int
    replicas: int
    prefill_replicas: int
    gpus: int
    usd_per_hour: float
    cost_per_million_tokens_usd: float
    joules_per_token: float
    ttft_p95_s: float
    tpot_p95_s: float
    concurrency: float
    status: str
    sim: SimCheck | None = None

    @property
    def label(self) -> str:
        par = self.parallel
        lay = "".join(
            f" {k.upper()}{v}" for k, v in (("tp", par.tp), ("pp", par.pp), ("ep", par.ep)) if v > 1
        )
        if self.kind == "aggregated":
            return f"{self.replicas}× {self.hardware}{lay} {self.fmt} B≤{self.max_batch}"
        return (
            f"{self.prefill_replicas}× {self.prefill_hardware} prefill + {self.replicas}× "
            f"{self.hardware} decode{lay} {self.fmt} B≤{self.max_batch}"
        )

    def as_dict(self) -> dict:
        par = self.parallel
        out = {
            k: getattr(self, k)
            for k in (
                "kind",
                "hardware",
                "prefill_hardware",
                "fmt",
                "max_batch",
                "replicas",
                "prefill_replicas",
                "gpus",
                "usd_per_hour",
                "cost_per_million_tokens_usd",
                "joules_per_token",
                "ttft_p95_s",
                "tpot_p95_s",
                "concurrency",
                "status",
            )
        }
        out["parallel"] = {"tp": par.tp, "pp": par.pp, "ep": par.ep}
        out["label"] = self.label
        out["simulated"] = (
            None
            if self.sim is None
            else {
                "ttft_p95_s": self.sim.ttft_p95_s,
                "tpot_p95_s": self.sim.tpot_p95_s,
                "slo_attainment": self.sim.slo_attainment,
                "requests": self.sim.requests,
                "meets_slo": self.sim.meets_slo,
            }
        )
        return out


def candidate(points: Points, i: int, groups: Sequence[GroupTable]) -> Candidate:
    g = groups[int(points.group[i])]
    dis = int(points.kind[i]) == 1
    return Candidate(
        "disaggregated" if dis else "aggregated",
        g.hardware,
        groups[int(points.prefill_group[i])].hardware if dis else None,
        g.fmt,
        g.parallel,
        int(points.max_batch[i]),
        int(points.replicas[i]),
        int(points.prefill_replicas[i]),
        int(points.gpus[i]),
        float(points.usd_per_hour[i]),
        float(points.cost_per_mtok[i]),
        float(points.joules_per_token[i]),
        float(points.ttft_p95_s[i]),
        float(points.tpot_p95_s[i]),
        float(points.concurrency[i]),
        REASONS[int(points.status[i])],
    )


@dataclass(frozen=True)
class RejectedRegion:
    """How many points of one device fail for one reason, and the closest of them."""

    hardware: str
    reason: str
    points: int
    closest: str


@dataclass(frozen=True)
class PlanResult:
    model: str
    requirement: Requirement
    space: Space
    configurations: int
    analytic_s: float
    simulated_s: float
    chosen: Candidate | None
    confirmed: tuple[Candidate, ...]
    frontier: tuple[Candidate, ...]
    rejected: tuple[RejectedRegion, ...]
    commands: tuple[str, ...]
    prices: dict[str, str]
    engine: str = "none"
    unconfirmed: tuple[tuple[str, str], ...] = ()  # (candidate, why the simulator refused it)

    def as_dict(self) -> dict:
        r = self.requirement
        return {
            "model": self.model,
            "requirement": {
                "rate_per_s": r.rate_per_s,
                "prompt_tokens": r.prompt_tokens,
                "gen_tokens": r.gen_tokens,
                "slo_ttft_p95_s": r.slo_ttft_s,
                "slo_tpot_p95_s": r.slo_tpot_s,
            },
            "configurations": self.configurations,
            "analytic_s": self.analytic_s,
            "simulated_s": self.simulated_s,
            "chosen": None if self.chosen is None else self.chosen.as_dict(),
            "confirmed": [c.as_dict() for c in self.confirmed],
            "frontier": [c.as_dict() for c in self.frontier],
            "rejected": [vars(x) for x in self.rejected],
            "engine": self.engine,
            "unconfirmed": [{"label": k, "reason": v} for k, v in self.unconfirmed],
            "commands": list(self.commands),
            "prices": self.prices,
        }


# ---- the search -----------------------------------------------------------------------------
def _policy(max_batch: int, disaggregated: bool) -> Policy:
    """The scheduler a candidate runs: B max sequences, the engine's step token budget (fixed
    on the candidate's stack, `Policy.on`)."""
    base = POLICIES["disaggregated" if disaggregated else "continuous"]
    return base.with_overrides(max_seqs=max_batch)


def _infeasible_checks(
    model: ModelSpec,
    groups: Sequence[GroupTable],
    rejected: Sequence[Rejected],
    req: Requirement,
    space: Space,
    engine: str = "none",
) -> None:
    """One clear error when the model fits nowhere or an SLO is below every roofline."""
    roof = f"{space.ceiling} roofline" + (f" (engine {engine})" if engine != "none" else "")
    if not groups:
        weights = [r for r in rejected if r.reason == "memory: weights"]
        if not weights:
            raise InfeasibleError(
                f"no device in {', '.join(space.hardware)} can run {model.name} in "
                f"{', '.join(space.formats)} (formats unsupported or layouts that do not "
                "split the model); add devices or formats"
            )
        best = min(weights, key=lambda r: r.weights_bytes_per_gpu / r.capacity_bytes)
        raise InfeasibleError(
            f"memory: {model.name} fits on none of {', '.join(space.hardware)} within "
            f"`max_gpus={space.max_gpus}` in {', '.join(space.formats)}; closest: "
            f"{best.weights_bytes_per_gpu / 1e9:.1f} GB of weights per GPU on {best.hardware} "
            f"{best.fmt} TP{best.parallel.tp} PP{best.parallel.pp} EP{best.parallel.ep} "
            f"against {best.capacity_bytes / 1e9:.0f} GB (90% usable); raise `max_gpus` or use "
            "a narrower format"
        )
    floor_tpot = min(groups, key=lambda g: g.tpot_grid_s[0])
    if req.slo_tpot_s < floor_tpot.tpot_grid_s[0]:
        raise InfeasibleError(
            f"TPOT SLO {req.slo_tpot_s * 1e3:g} ms is below the {roof} of "
            f"every deployment searched: the fastest decode step (batch 1) is "
            f"{floor_tpot.tpot_grid_s[0] * 1e3:.2f} ms on {floor_tpot.hardware} "
            f"{floor_tpot.fmt} TP{floor_tpot.parallel.tp}; raise `slo_tpot_s` to at least that"
        )
    floor_ttft = min(groups, key=lambda g: g.t_prefill_s)
    if req.slo_ttft_s < floor_ttft.t_prefill_s:
        raise InfeasibleError(
            f"TTFT SLO {req.slo_ttft_s * 1e3:g} ms is below the {roof} of "
            f"every deployment searched: the fastest prefill of {req.prompt_tokens} tokens is "
            f"{floor_ttft.t_prefill_s * 1e3:.2f} ms on {floor_ttft.hardware} {floor_ttft.fmt} "
            f"TP{floor_ttft.parallel.tp}; raise `slo_ttft_s` to at least that"
        )


def _no_point_meets(
    points: Points, groups: Sequence[GroupTable], req: Requirement, space: Space
) -> InfeasibleError:
    stable = (points.status != SATURATED) & (points.status != KV)
    if not stable.any():
        return InfeasibleError(
            f"throughput: no deployment within `max_gpus={space.max_gpus}` sustains "
            f"{req.rate_per_s:g} req/s (every one saturates its prefill or its batch limit, or "
            "runs out of KV memory); raise `max_gpus` or lower `rate_per_s`"
        )
    miss = np.maximum(points.ttft_p95_s / req.slo_ttft_s, points.tpot_p95_s / req.slo_tpot_s)
    i = int(np.argmin(np.where(stable, miss, np.inf)))
    c = candidate(points, i, groups)
    which = "TTFT" if c.ttft_p95_s / req.slo_ttft_s >= c.tpot_p95_s / req.slo_tpot_s else "TPOT"
    return InfeasibleError(
        f"{which}: no deployment within `max_gpus={space.max_gpus}` meets p95 TTFT ≤ "
        f"{req.slo_ttft_s:g} s and TPOT ≤ {req.slo_tpot_s * 1e3:g} ms at {req.rate_per_s:g} "
        f"req/s; closest: TTFT {c.ttft_p95_s:.3g} s, TPOT {c.tpot_p95_s * 1e3:.3g} ms "
        f"({c.label}); relax the SLO, raise `max_gpus` or lower `rate_per_s`"
    )


def _capacity(groups: Sequence[GroupTable], hardware: str, req: Requirement, max_batch: int) -> str:
    """What one replica of `hardware` carries at best, per GPU (why fewer replicas saturate)."""
    rates = {
        id(g): max_rate_per_replica(g, req.prompt_tokens, req.gen_tokens, max_batch)
        for g in groups
        if g.hardware == hardware
    }
    best = max((g for g in groups if g.hardware == hardware), key=lambda g: rates[id(g)] / g.gpus)
    r = rates[id(best)]
    par = best.parallel
    return (
        f"a replica sustains at most {r:.3g} req/s, {r / best.gpus:.3g} per GPU "
        f"({best.fmt} TP{par.tp} PP{par.pp} EP{par.ep}, B≤{max_batch}): "
        f"{req.rate_per_s:g} req/s needs ≥ {math.ceil(req.rate_per_s / r) if r else '∞'} "
        "replicas (prefill share ρ ≥ 1 or the batch limit below)"
    )


def _rejected_regions(
    points: Points,
    groups: Sequence[GroupTable],
    rejected: Sequence[Rejected],
    req: Requirement,
    max_batch: int,
) -> list[RejectedRegion]:
    out = []
    for r in sorted({(x.hardware, x.reason) for x in rejected}):
        rs = [x for x in rejected if (x.hardware, x.reason) == r]
        best = min(rs, key=lambda x: x.weights_bytes_per_gpu if x.reason != "unsupported" else 0)
        closest = (
            best.detail
            if best.reason == "unsupported"
            else (
                f"{best.weights_bytes_per_gpu / 1e9:.1f} GB weights/GPU vs "
                f"{best.capacity_bytes / 1e9:.0f} GB ({best.fmt} TP{best.parallel.tp} "
                f"PP{best.parallel.pp})"
            )
        )
        out.append(RejectedRegion(r[0], r[1], len(rs), closest))
    # a point is charged to the device that fails it: TTFT to the prefill pool's, the rest to
    # the decode (or only) pool's
    names = [g.hardware for g in groups]
    hw = np.array(names)[points.group.astype(int)] if points.size else np.array([])
    pre = np.where(points.prefill_group >= 0, points.prefill_group, points.group).astype(int)
    hw_pre = np.array(names)[pre] if points.size else np.array([])
    for name in sorted(set(hw.tolist())):
        for code in (KV, SATURATED, TTFT, TPOT):
            sel = ((hw_pre if code == TTFT else hw) == name) & (points.status == code)
            if not sel.any():
                continue
            if code in (TTFT, TPOT):
                metric = points.ttft_p95_s if code == TTFT else points.tpot_p95_s
                slo = req.slo_ttft_s if code == TTFT else req.slo_tpot_s
                i = int(np.flatnonzero(sel)[np.argmin(metric[sel])])
                value, limit = (
                    (f"{metric[i]:.4g} s", f"{slo:g} s")
                    if code == TTFT
                    else (f"{metric[i] * 1e3:.3g} ms", f"{slo * 1e3:g} ms")
                )
                closest = f"best p95 {value} vs SLO {limit} ({candidate(points, i, groups).label})"

            elif code == KV:
                i = int(np.flatnonzero(sel)[0])
                g = groups[int(points.group[i])]
                closest = (
                    f"needs {points.concurrency[i]:.0f} sequences, KV holds "
                    f"{g.kv_capacity_tokens / (req.prompt_tokens + req.gen_tokens / 2):.0f}"
                    f" ({candidate(points, i, groups).label})"
                )
            else:
                closest = _capacity(groups, name, req, max_batch)
            out.append(RejectedRegion(name, REASONS[code], int(sel.sum()), closest))
    return out


def commands(
    model: str,
    c: Candidate,
    req: Requirement,
    requests: int,
    seed: int,
    ceiling: str,
    engine: str = "none",
) -> tuple[str, ...]:
    """The `roofline estimate` and `roofline serve` command lines that reproduce `c` (with
    `engine`, the profile's name or `none`)."""
    p = precision_of(c.fmt)
    fmt = f"--weights {p.weights} --activations {p.activations}"
    par = c.parallel
    lay = "".join(
        f" --{k} {v}" for k, v in (("tp", par.tp), ("pp", par.pp), ("ep", par.ep)) if v > 1
    )
    n = max(1, round(c.concurrency))
    est = (
        f"roofline estimate {model} --hardware {c.hardware}{lay} {fmt} --kv-format {p.kv} "
        f"--prompt {req.prompt_tokens} --gen {req.gen_tokens} --batch 1,{n},{c.max_batch} "
        f"--ceiling {ceiling} --engine {engine}"
    )
    serve = (
        f"roofline serve {model} --hardware {c.hardware}{lay} {fmt} --kv-format {p.kv} "
        f"--rate {req.rate_per_s:g} --requests {requests} --arrivals poisson "
        f"--lengths fixed --prompt {req.prompt_tokens} --gen "
        f"{req.gen_tokens} --seed {seed} --max-seqs {c.max_batch} "
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


def confirm(
    model: ModelSpec,
    c: Candidate,
    workload: Workload,
    req: Requirement,
    hardware: Mapping[str, HardwareSpec],
    ceiling: Ceiling,
    engine: EngineSpec | None = None,
) -> SimCheck:
    """Run the serving simulator on `c`, its devices taken from the loaded `hardware` (by
    name), and read its p95 TTFT and TPOT."""
    t0 = time.perf_counter()
    dis = c.kind == "disaggregated"
    hw = hardware[c.hardware]
    stack = Stack.resolve(model, hw, precision_of(c.fmt), ceiling, engine, c.parallel)
    pol = _policy(c.max_batch, dis).on(stack.memory)
    d = build_deployment(
        model,
        stack,
        pol,
        replicas=c.replicas if not dis else 1,
        prefill_hw=hardware[c.prefill_hardware or c.hardware] if dis else None,
        decode_hw=hw if dis else None,
        prefill_replicas=c.prefill_replicas or 1,
        decode_replicas=c.replicas if dis else 1,
    )
    s = Summary(simulate(workload, pol, d), req.slo_ttft_s, req.slo_tpot_s)
    ttft = float(np.percentile(s.latency_samples_s("ttft"), 95))
    tpot = float(np.percentile(s.latency_samples_s("tpot"), 95))
    done = s.requests_completed == workload.requests
    return SimCheck(
        ttft,
        tpot,
        s.slo_attainment,
        workload.requests,
        bool(done and ttft <= req.slo_ttft_s and tpot <= req.slo_tpot_s),
        time.perf_counter() - t0,
    )


def screen(groups: Sequence[GroupTable], req: Requirement, space: Space) -> Points:
    """Stage 1 over prepared groups: every aggregated and/or disaggregated point."""
    parts = []
    if space.serving in ("both", "aggregated"):
        parts.append(aggregated_points(groups, req, space))
    if space.serving in ("both", "disaggregated"):
        parts.append(disaggregated_points(groups, req, space))
    return Points.concat(parts)


def shortlist(points: Points, groups: Sequence[GroupTable], k: int) -> list[Candidate]:
    """The k cheapest analytically feasible deployments, one per shape (device(s), format,
    layout, replicas): of the max batches of one shape, the one with the most SLO margin."""
    ok = np.flatnonzero(points.status == OK)
    order = ok[
        np.lexsort(
            (np.maximum(points.ttft_p95_s[ok], points.tpot_p95_s[ok]), points.cost_per_mtok[ok])
        )
    ]
    seen: set = set()
    out: list[Candidate] = []
    for i in order:
        key = (
            int(points.kind[i]),
            int(points.group[i]),
            int(points.prefill_group[i]),
            int(points.replicas[i]),
            int(points.prefill_replicas[i]),
        )
        if key in seen:
            continue
        seen.add(key)
        out.append(candidate(points, int(i), groups))
        if len(out) == k:
            break
    return out


def frontier(points: Points, groups: Sequence[GroupTable]) -> list[Candidate]:
    """The Pareto frontier of (cost per million tokens, TPOT₉₅, TTFT₉₅) over the points that
    sustain the rate and fit in memory, cheapest first (one row per distinct triple)."""
    live = np.flatnonzero((points.status != SATURATED) & (points.status != KV))
    if not live.size:
        return []
    mask = pareto_mask(points.cost_per_mtok[live], points.tpot_p95_s[live], points.ttft_p95_s[live])
    idx = live[mask]
    idx = idx[np.lexsort((points.tpot_p95_s[idx], points.cost_per_mtok[idx]))]
    out, seen = [], set()
    for i in idx:
        key = (
            round(float(points.cost_per_mtok[i]), 9),
            float(points.tpot_p95_s[i]),
            float(points.ttft_p95_s[i]),
        )
        if key not in seen:
            seen.add(key)
            out.append(candidate(points, int(i), groups))
    return out


def plan(
    model: ModelSpec,
    hardware: Sequence[HardwareSpec],
    req: Requirement,
    space: Space,
    prices: PriceTable,
    workload: Workload | None = None,
    confirm_top: int = 10,
    requests: int = 1000,
    seed: int = 0,
    engine: EngineSpec | None = None,
) -> PlanResult:
    """Screen the whole space analytically, confirm the cheapest feasible candidates in the
    simulator, and return the chosen deployment, the frontier and the rejected regions.
    `workload` defaults to `requests` Poisson arrivals at the rate, fixed P and G."""
    t0 = time.perf_counter()
    loaded = {hw.name: hw for hw in hardware}
    groups, rejected = build_groups(model, hardware, req, space, prices, engine)
    engine_name = engine.name if engine is not None else "none"
    _infeasible_checks(model, groups, rejected, req, space, engine_name)
    points = screen(groups, req, space)
    front = frontier(points, groups)
    regions = _rejected_regions(points, groups, rejected, req, max(space.max_batches))
    # more than `confirm_top`: a candidate the simulator refuses makes room for the next one
    short = shortlist(points, groups, 3 * confirm_top)
    analytic_s = time.perf_counter() - t0
    if not short:
        raise _no_point_meets(points, groups, req, space)
    t1 = time.perf_counter()
    if workload is None:
        workload = synthetic(
            requests,
            req.rate_per_s,
            Lengths("fixed", req.prompt_tokens),
            Lengths("fixed", req.gen_tokens),
            "poisson",
            seed,
        )
    checked: list[Candidate] = []
    refused: list[tuple[str, str]] = []
    for c in short:
        if len(checked) == confirm_top:
            break
        try:
            sim = confirm(model, c, workload, req, loaded, space.ceiling, engine)
        except (DoesNotFitError, InvalidInputError) as err:
            refused.append((c.label, str(err)))
            continue
        checked.append(replace(c, sim=sim))
    simulated_s = time.perf_counter() - t1
    passed = [c for c in checked if c.sim is not None and c.sim.meets_slo]
    chosen = passed[0] if passed else None
    cmds = (
        commands(model.name, chosen, req, workload.requests, seed, space.ceiling, engine_name)
        if chosen
        else ()
    )
    used = {g.hardware for g in groups}
    return PlanResult(
        model.name,
        req,
        space,
        points.size + len(rejected),
        analytic_s,
        simulated_s,
        chosen,
        tuple(checked),
        tuple(front),
        tuple(regions),
        cmds,
        {h: prices.citation(h, space.tier) for h in sorted(used)},
        engine_name,
        tuple(refused),
    )


def default_hardware(prices: PriceTable, tier: Tier = "on-demand") -> tuple[str, ...]:
    """The catalog devices the price table prices (the datacenter GPUs)."""
    return tuple(sorted(n for n in prices.devices if prices.has(n, tier)))
