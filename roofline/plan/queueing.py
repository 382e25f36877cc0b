"""The queueing arithmetic of the screen (the package docstring states it): decode concurrency
by Little's law, the M/D/1 prompt queue's p95 wait, p95 TTFT and TPOT of an aggregated replica,
a prefill pool and a decode pool, as arrays over arrival rates."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .groups import GroupTable

#: z of the 95th percentile of a standard normal (the Poisson count of interrupting prompts).
Z95 = 1.645


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
    #: a lower bound on any request's TTFT: its prompt's prefill alone, no queue, no step
    #: shared with other sequences (`GroupTable.prefill_floor_s`). The M/D/1 figure above
    #: serves prompts one at a time where the engine's chunked prefill batches them, so it
    #: runs high (0.76 s against 0.30 s simulated in one documented case); the screen rejects
    #: on TTFT only by this bound.
    ttft_floor_s: np.ndarray
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
        concurrency=n,
        ttft_p95_s=np.where(stable, ttft, np.inf),
        tpot_p95_s=np.where(stable, tpot, np.inf),
        ttft_floor_s=np.where(stable, g.prefill_floor_s, np.inf),
        prefill_share=rho,
        decode_share=np.where(stable, decode, 0.0),
        stable=stable,
    )


def peak_concurrency(n: np.ndarray) -> np.ndarray:
    """p95 of the number of sequences decoding, N + 1.645·√N (Poisson around the mean N):
    a max batch below it makes new requests queue for a slot, which the TTFT model omits."""
    with np.errstate(invalid="ignore"):
        return n + Z95 * np.sqrt(n)


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
        concurrency=n,
        ttft_p95_s=np.zeros_like(tpot),
        tpot_p95_s=tpot,
        ttft_floor_s=np.zeros_like(tpot),
        prefill_share=np.zeros_like(tpot),
        decode_share=np.where(stable, decode, 0.0),
        stable=stable,
    )
