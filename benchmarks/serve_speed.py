"""Wall-clock time to simulate 10,000 requests with `roofline serve`'s core, per policy.

Workload: Llama 3.1 8B on H100 SXM (then Mixtral 8x7B, MoE; Gemma 2 9B, sliding window;
Mamba 2.8B, SSM; each on H200; then Llama 3.1 8B speculating, K = 3 drafted by Llama 3.2 1B at
α = 0.7), Poisson 10 req/s, lognormal prompts (mean 1024) and outputs (mean 256), σ = 0.8,
seed 0. Run from the repository root:
`PYTHONPATH=. python benchmarks/serve_speed.py` (or plain `python ...` once installed).
"""

from __future__ import annotations

import time

from roofline.calc.stack import Stack
from roofline.serve.policy import POLICIES
from roofline.serve.simulate import build_deployment, simulate
from roofline.serve.speculation import Speculation
from roofline.serve.workload import Lengths, synthetic
from roofline.spec.catalog import load_hardware, load_model
from roofline.studies.speculative import Drafter

REQUESTS = 10_000
RUNS = [
    ("llama-3.1-8b", "h100-sxm", tuple(POLICIES)),
    ("mixtral-8x7b", "h200", ("continuous", "chunked")),
    ("gemma-2-9b", "h200", ("continuous", "chunked")),
    ("mamba-2.8b", "h200", ("continuous", "chunked")),
]


def main() -> None:
    w = synthetic(
        REQUESTS,
        10.0,
        Lengths("lognormal", 1024, sigma=0.8),
        Lengths("lognormal", 256, sigma=0.8),
        seed=0,
    )
    spec = Speculation(3, 0.7, Drafter(model=load_model("llama-3.2-1b")))
    for model, hardware, names, speculation in [
        *((m, hw, names, None) for m, hw, names in RUNS),
        ("llama-3.1-8b", "h100-sxm", ("continuous", "chunked"), spec),
    ]:
        m, hw = load_model(model), load_hardware(hardware)
        for name in names:
            p = POLICIES[name]
            d = build_deployment(m, Stack.resolve(m, hw), p, speculation=speculation)
            t0 = time.perf_counter()
            r = simulate(w, p, d)
            elapsed = time.perf_counter() - t0
            steps = sum(len(e.timeline.end_s) for e in r.engines)
            print(
                f"{model:13s} {hardware:9s} {name + ' +spec' * bool(speculation):15s} "
                f"{REQUESTS} requests in {elapsed:5.2f} s "
                f"({steps} timeline rows, {r.counters.preemptions} preemptions)"
            )


if __name__ == "__main__":
    main()
