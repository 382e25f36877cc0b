"""Highest arrival rate whose run still meets the SLO for a given share of requests."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import InvalidInputError
from .metrics import Summary

MAX_DOUBLINGS = 16


@dataclass(frozen=True)
class SweepResult:
    best_rate_per_s: float  # 0 when even the lowest rate tried misses the SLO
    attainment_target: float
    points: tuple[tuple[float, Summary], ...]  # every rate tried, in the order tried

    @property
    def best(self) -> Summary | None:
        ok = [s for r, s in self.points if r == self.best_rate_per_s]
        return ok[0] if ok else None


def sweep_rate(
    run: Callable[[float], Summary], start_rate_per_s: float, attainment: float, bisections: int = 8
) -> SweepResult:
    """Double (or halve) the rate from `start_rate_per_s` until the SLO attainment crosses
    `attainment`, then bisect between the last passing and first failing rate."""
    if not 0 < attainment <= 1:
        raise InvalidInputError(f"`attainment` must be in (0, 1], got {attainment}")
    points: list[tuple[float, Summary]] = []

    def ok(rate: float) -> bool:
        s = run(rate)
        points.append((rate, s))
        return s.slo_attainment >= attainment

    lo, hi = 0.0, start_rate_per_s
    if ok(hi):
        lo, hi = hi, 2 * hi
        for _ in range(MAX_DOUBLINGS):
            if not ok(hi):
                break
            lo, hi = hi, 2 * hi
    else:
        for _ in range(MAX_DOUBLINGS):
            hi /= 2
            if ok(hi):
                lo, hi = hi, 2 * hi
                break
        else:
            return SweepResult(0.0, attainment, tuple(points))
    for _ in range(bisections):
        mid = (lo + hi) / 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return SweepResult(lo, attainment, tuple(points))
