"""Stage 1: every deployment of the space as rows of parallel arrays (`Points`), its status
(meets the SLO, or the first reason it fails), the Pareto frontier and the shortlist the
simulator confirms."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..calc.placement import Parallel
from ..calc.stack import Stack
from ..studies.economics import cost_per_million_tokens, joules_per_token
from .groups import GroupTable
from .queueing import (
    aggregated_latency,
    decode_pool_latency,
    peak_concurrency,
    prefill_pool_ttft_p95_s,
)
from .space import Requirement, Space

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
    ttft_floor_s: np.ndarray  # the TTFT no queueing can go below (`PoolLatency.ttft_floor_s`)

    @property
    def size(self) -> int:
        return int(self.status.size)

    @classmethod
    def concat(cls, parts: list[Points]) -> Points:
        names = cls.__dataclass_fields__
        if not parts:
            return cls(**{k: np.zeros(0) for k in names})
        return cls(**{k: np.concatenate([getattr(p, k) for p in parts]) for k in names})


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
    P, G = req.prompt_tokens, req.gen_tokens
    for i, g in enumerate(groups):
        B = g.tried(space)
        m = np.arange(1, space.max_gpus // g.gpus + 1, dtype=float)
        lat = aggregated_latency(g, req.rate_per_s / m, G)
        n = lat.concurrency[:, None]  # (M, 1) against (nB,)
        stable = lat.stable[:, None] & (peak_concurrency(n) <= B[None, :])
        kv_ok = n * (P + G / 2) <= g.kv_capacity_tokens
        kv_ok = kv_ok | ~stable  # saturation is reported before memory for unstable points
        shape = (m.size, B.size)
        ttft = np.broadcast_to(lat.ttft_p95_s[:, None], shape)
        tpot = np.broadcast_to(lat.tpot_p95_s[:, None], shape)
        status = _status(stable, kv_ok, ttft * g.ttft_factor, tpot * g.tpot_factor, req)
        u = lat.prefill_share * g.u_prefill + lat.decode_share * g.u_decode_at(
            np.where(np.isfinite(lat.concurrency), lat.concurrency, 1.0)
        )
        power = g.power_w(u)  # (M,) per GPU
        gpus = m * g.gpus
        usd = gpus * g.usd_per_gpu_hour
        parts.append(
            Points(
                kind=np.zeros(shape, int).ravel(),
                group=np.full(shape, i).ravel(),
                prefill_group=np.full(shape, -1).ravel(),
                replicas=np.broadcast_to(m[:, None], shape).ravel(),
                prefill_replicas=np.zeros(shape).ravel(),
                max_batch=np.broadcast_to(B[None, :], shape).ravel(),
                gpus=np.broadcast_to(gpus[:, None], shape).ravel(),
                usd_per_hour=np.broadcast_to(usd[:, None], shape).ravel(),
                cost_per_mtok=np.broadcast_to(
                    np.asarray(cost_per_million_tokens(usd, 1, req.output_tokens_per_s))[:, None],
                    shape,
                ).ravel(),
                joules_per_token=np.broadcast_to(
                    np.asarray(joules_per_token(power, gpus, req.output_tokens_per_s))[:, None],
                    shape,
                ).ravel(),
                ttft_p95_s=ttft.ravel(),
                tpot_p95_s=tpot.ravel(),
                concurrency=np.broadcast_to(n, shape).ravel(),
                status=status.ravel(),
                ttft_floor_s=np.broadcast_to(
                    (lat.ttft_floor_s * g.ttft_factor)[:, None], shape
                ).ravel(),
            )
        )
    return Points.concat(parts)


def disaggregated_points(groups: Sequence[GroupTable], req: Requirement, space: Space) -> Points:
    """Every (prefill group, decode group of the same format and layout, m_p, m_d, B)."""
    parts = []
    P, G = req.prompt_tokens, req.gen_tokens
    for i, gd in enumerate(groups):
        B = gd.tried(space)
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
            status = _status(stable, kv_ok, ttft * gp.ttft_factor, tpot * gd.tpot_factor, req)
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
                    kind=flat(np.ones(shape, int)),
                    group=flat(np.full(shape, i)),
                    prefill_group=flat(np.full(shape, j)),
                    replicas=flat(md[None, :, None]),
                    prefill_replicas=flat(mp[:, None, None]),
                    max_batch=flat(B[None, None, :]),
                    gpus=flat(gpus[:, :, None]),
                    usd_per_hour=flat(usd[:, :, None]),
                    cost_per_mtok=flat(
                        np.asarray(cost_per_million_tokens(usd, 1, req.output_tokens_per_s))[
                            :, :, None
                        ]
                    ),
                    joules_per_token=flat(
                        np.asarray(joules_per_token(watts, 1, req.output_tokens_per_s))[:, :, None]
                    ),
                    ttft_p95_s=flat(ttft),
                    tpot_p95_s=flat(tpot),
                    concurrency=flat(n),
                    status=flat(status),
                    # the prompt's prefill alone on the prefill device: the hand-off and the
                    # prefill queue only add to it
                    ttft_floor_s=flat(np.where(np.isfinite(ttft), gp.prefill_floor_s, np.inf))
                    * gp.ttft_factor,
                )
            )
    return Points.concat(parts)


def screen(groups: Sequence[GroupTable], req: Requirement, space: Space) -> Points:
    """Stage 1 over prepared groups: every aggregated and/or disaggregated point."""
    parts = []
    if space.serving in ("both", "aggregated"):
        parts.append(aggregated_points(groups, req, space))
    if space.serving in ("both", "disaggregated"):
        parts.append(disaggregated_points(groups, req, space))
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
    #: once confirmed: the 80% interval of its p95 TTFT and TPOT (analytic and simulated) and
    #: its cost (`roofline.calc.intervals`), each {low, high, coverage, basis}
    intervals: dict | None = None
    #: its (decode) group's resolved stack (`GroupTable.stack`; None: a group made by hand)
    stack: Stack | None = field(default=None, compare=False, repr=False)

    @property
    def label(self) -> str:
        lay = "" if self.parallel.gpus_per_replica == 1 else f" {self.parallel.label}"
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
        if self.intervals is not None:
            out["intervals"] = self.intervals
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
        kind="disaggregated" if dis else "aggregated",
        hardware=g.hardware,
        prefill_hardware=groups[int(points.prefill_group[i])].hardware if dis else None,
        fmt=g.fmt,
        parallel=g.parallel,
        max_batch=int(points.max_batch[i]),
        replicas=int(points.replicas[i]),
        prefill_replicas=int(points.prefill_replicas[i]),
        gpus=int(points.gpus[i]),
        usd_per_hour=float(points.usd_per_hour[i]),
        cost_per_million_tokens_usd=float(points.cost_per_mtok[i]),
        joules_per_token=float(points.joules_per_token[i]),
        ttft_p95_s=float(points.ttft_p95_s[i]),
        tpot_p95_s=float(points.tpot_p95_s[i]),
        concurrency=float(points.concurrency[i]),
        status=REASONS[int(points.status[i])],
        stack=g.stack,
    )


def shortlist(
    points: Points, groups: Sequence[GroupTable], k: int, req: Requirement | None = None
) -> list[Candidate]:
    """The k cheapest analytically feasible deployments, one per shape (device(s), format,
    layout, replicas), cheapest first: of the max batches of one shape, the one with the most
    SLO margin. With `req`, TTFT is judged by its lower bound (`Points.ttft_floor_s`, the
    prompt's prefill alone, no queue): a point that fails only on the M/D/1 TTFT estimate while
    its bound meets the SLO is shortlisted at its cost too, so the screen never rejects on TTFT
    what the simulator could accept, and the simulator decides. Without `req`, the analytic
    status alone (the frontier's and the tests' strict view)."""
    ok = np.flatnonzero(points.status == OK)
    if req is not None:
        tpot_factor = np.array([g.tpot_factor for g in groups])
        maybe = np.flatnonzero(
            (points.status == TTFT)
            & (points.ttft_floor_s <= req.slo_ttft_s)
            & (points.tpot_p95_s * tpot_factor[points.group.astype(int)] <= req.slo_tpot_s)
        )
        ok = np.concatenate((ok, maybe))
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


#: Objectives closer than this (relative) are one value on the frontier: a cost that differs
#: in the last bits of a float (the same deployment priced two ways) is not a trade-off.
FRONTIER_RTOL = 1e-9


def _settled(x: np.ndarray) -> np.ndarray:
    """`x` rounded to `FRONTIER_RTOL` of its magnitude (inf and 0 unchanged)."""
    x = np.asarray(x, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(np.isfinite(x) & (x != 0), 10.0 ** np.floor(np.log10(np.abs(x))), 1.0)
    digits = -int(round(math.log10(FRONTIER_RTOL)))
    return np.where(np.isfinite(x), np.round(x / scale, digits) * scale, x)


def frontier(points: Points, groups: Sequence[GroupTable]) -> list[Candidate]:
    """The Pareto frontier of (cost per million tokens, TPOT₉₅, TTFT₉₅) over the points that
    sustain the rate and fit in memory, cheapest first (one row per distinct triple)."""
    live = np.flatnonzero((points.status != SATURATED) & (points.status != KV))
    if not live.size:
        return []
    mask = pareto_mask(
        *(_settled(x[live]) for x in (points.cost_per_mtok, points.tpot_p95_s, points.ttft_p95_s))
    )
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
