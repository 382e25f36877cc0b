"""Wall-clock time of `roofline plan`'s two stages.

Search: Llama-3.1-70B, 10 req/s Poisson, P = 1024, G = 256, p95 TTFT ≤ 2 s, TPOT ≤ 50 ms, over
A100 SXM 80GB, H100 SXM, H200 and MI300X (and then every priced device), formats bf16, fp8,
int4-g128, TP 1-8 × PP 1-2, max batch 8-512, up to 64 GPUs, aggregated and disaggregated,
the vLLM engine profile (the CLI's default).
Stage 1 (analytic screening of every configuration) is timed over 3 runs after one untimed
warm-up (spec loading and the sharded-model cache are not part of a search); stage 2 is the
simulator confirming the 10 cheapest feasible candidates, 2000 requests each.
Run from the repository root: `PYTHONPATH=. python benchmarks/plan_speed.py`.
"""

from __future__ import annotations

import statistics
import time

from roofline.plan import (
    Requirement,
    Space,
    build_groups,
    default_hardware,
    frontier,
    plan,
    screen,
    shortlist,
)
from roofline.spec.catalog import load_engine, load_hardware, load_model
from roofline.studies.economics import load_prices

REQ = Requirement(10.0, 1024, 256, 2.0, 0.05)
RUNS = 3


def analytic(model, devices, space, prices, engine) -> tuple[int, float]:
    """(configurations, median seconds) of stage 1: groups, screening, frontier, shortlist."""
    times, n = [], 0
    for i in range(RUNS + 1):
        t0 = time.perf_counter()
        groups, rejected = build_groups(model, devices, REQ, space, prices, engine)
        points = screen(groups, REQ, space)
        frontier(points, groups)
        shortlist(points, groups, 10)
        if i:  # the first run warms the caches
            times.append(time.perf_counter() - t0)
        n = points.size + len(rejected)
    return n, statistics.median(times)


def main() -> None:
    m, prices, engine = load_model("llama-3.1-70b"), load_prices(), load_engine("vllm")
    for names in (("a100-sxm-80gb", "h100-sxm", "h200", "mi300x"), default_hardware(prices)):
        devices = [load_hardware(h) for h in names]
        space = Space(tuple(names))
        n, s = analytic(m, devices, space, prices, engine)
        print(
            f"analytic: {n:,} configurations over {len(names)} devices in {s:.2f} s "
            f"(median of {RUNS})"
        )
    names = ("a100-sxm-80gb", "h100-sxm", "h200", "mi300x")
    r = plan(
        m,
        [load_hardware(h) for h in names],
        REQ,
        Space(names),
        prices,
        confirm_top=10,
        requests=2000,
        engine=engine,
    )
    print(
        f"simulator: {len(r.confirmed)} candidates × 2000 requests in {r.simulated_s:.2f} s; "
        f"chosen {r.chosen.label if r.chosen else None}"
    )


if __name__ == "__main__":
    main()
