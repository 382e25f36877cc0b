"""Wall-clock time to simulate 10,000 requests with `roofline serve`'s core, per policy.

Workload: Llama 3.1 8B on H100 SXM, Poisson 10 req/s, lognormal prompts (mean 1024) and
outputs (mean 256), σ = 0.8, seed 0. Run from the repository root:
`PYTHONPATH=. python benchmarks/serve_speed.py` (or plain `python ...` once installed).
"""

from __future__ import annotations

import time

from roofline.catalog import load_hardware, load_model
from roofline.serve.policy import POLICIES
from roofline.serve.simulate import build_deployment, simulate
from roofline.serve.workload import Lengths, synthetic

REQUESTS = 10_000


def main() -> None:
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    w = synthetic(REQUESTS, 10.0, Lengths("lognormal", 1024, sigma=0.8),
                  Lengths("lognormal", 256, sigma=0.8), seed=0)
    for name, p in POLICIES.items():
        d = build_deployment(m, hw, p)
        t0 = time.perf_counter()
        r = simulate(w, p, d)
        elapsed = time.perf_counter() - t0
        steps = sum(len(e.timeline.end_s) for e in r.engines)
        print(f"{name:15s} {REQUESTS} requests in {elapsed:5.2f} s "
              f"({steps} timeline rows, {r.counters.preemptions} preemptions)")


if __name__ == "__main__":
    main()
