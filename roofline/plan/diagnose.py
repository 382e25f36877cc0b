"""Why deployments fail: one clear error when nothing can run or an SLO is below every
roofline, the closest miss when no point meets the SLO, and the rejected regions per device."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..spec.model import ModelSpec
from .groups import GroupTable, Rejected
from .queueing import max_rate_per_replica
from .screen import KV, REASONS, SATURATED, TPOT, TTFT, Points, candidate
from .space import InfeasibleError, Requirement, Space


@dataclass(frozen=True)
class RejectedRegion:
    """How many points of one device fail for one reason, and the closest of them."""

    hardware: str
    reason: str
    points: int
    closest: str


def check_feasible(
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
        best = min(weights, key=lambda r: r.weights_bytes_per_gpu / r.usable_bytes)
        raise InfeasibleError(
            f"memory: {model.name} fits on none of {', '.join(space.hardware)} within "
            f"`max_gpus={space.max_gpus}` in {', '.join(space.formats)}; closest: "
            f"{best.weights_bytes_per_gpu / 1e9:.1f} GB of weights per GPU on {best.hardware} "
            f"{best.fmt} {best.parallel.label} "
            f"against {best.usable_bytes / 1e9:.1f} GB usable; raise `max_gpus` or use "
            "a narrower format"
        )
    floor_tpot = min(groups, key=lambda g: g.tpot_grid_s[0])
    if req.slo_tpot_s < floor_tpot.tpot_grid_s[0]:
        raise InfeasibleError(
            f"TPOT SLO {req.slo_tpot_s * 1e3:g} ms is below the {roof} of "
            f"every deployment searched: the fastest decode step (batch 1) is "
            f"{floor_tpot.tpot_grid_s[0] * 1e3:.2f} ms on {floor_tpot.hardware} "
            f"{floor_tpot.fmt} {floor_tpot.parallel.label}; raise `slo_tpot_s` to at least that"
        )
    floor_ttft = min(groups, key=lambda g: g.t_prefill_s)
    if req.slo_ttft_s < floor_ttft.t_prefill_s:
        raise InfeasibleError(
            f"TTFT SLO {req.slo_ttft_s * 1e3:g} ms is below the {roof} of "
            f"every deployment searched: the fastest prefill of {req.prompt_tokens} tokens is "
            f"{floor_ttft.t_prefill_s * 1e3:.2f} ms on {floor_ttft.hardware} {floor_ttft.fmt} "
            f"{floor_ttft.parallel.label}; raise `slo_ttft_s` to at least that"
        )


def no_point_meets(
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


def _capacity(groups: Sequence[GroupTable], hardware: str, req: Requirement, space: Space) -> str:
    """What one replica of `hardware` carries at best, per GPU (why fewer replicas saturate),
    at the largest max batch tried on it."""
    rates = {
        id(g): max_rate_per_replica(g, req.prompt_tokens, req.gen_tokens, _largest(g, space))
        for g in groups
        if g.hardware == hardware
    }
    best = max((g for g in groups if g.hardware == hardware), key=lambda g: rates[id(g)] / g.gpus)
    r = rates[id(best)]
    par = best.parallel
    return (
        f"a replica sustains at most {r:.3g} req/s, {r / best.gpus:.3g} per GPU "
        f"({best.fmt} {par.label}, B≤{_largest(best, space)}): "
        f"{req.rate_per_s:g} req/s needs ≥ {math.ceil(req.rate_per_s / r) if r else '∞'} "
        "replicas (prefill share ρ ≥ 1 or the batch limit below)"
    )


def _largest(g: GroupTable, space: Space) -> int:
    return int(g.tried(space).max())


def rejected_regions(
    points: Points,
    groups: Sequence[GroupTable],
    rejected: Sequence[Rejected],
    req: Requirement,
    space: Space,
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
                f"{best.usable_bytes / 1e9:.1f} GB usable ({best.fmt} "
                f"{best.parallel.label})"
            )
        )
        out.append(RejectedRegion(hardware=r[0], reason=r[1], points=len(rs), closest=closest))
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
                closest = _capacity(groups, name, req, space)
            out.append(
                RejectedRegion(
                    hardware=name, reason=REASONS[code], points=int(sel.sum()), closest=closest
                )
            )
    return out
