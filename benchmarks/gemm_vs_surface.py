"""The achievable layer's GEMM time against NVIDIA's measured GEMM tables, shape by shape.

    python benchmarks/gemm_vs_surface.py [system] [framework] [dtype]

Reads `roofline/data/surfaces/gemm.csv` (derived from aiconfigurator-core 0.12.0 by
benchmarks/derive/aic_surfaces.py: measured latency by M, N, K per device, engine and dtype)
and costs the same single GEMM with `cost.op_cost` on the device's achievable ceiling, no
engine (the hardware layer). Prints the median and spread of predicted / measured − 1 by M:
where the fraction-and-tile model of the achievable layer departs from measured kernels.
"""

from __future__ import annotations

import sys
from collections import defaultdict

import numpy as np
import surface_rows

from roofline.calc.cost import Ceilings, op_cost
from roofline.spec.catalog import load_hardware
from roofline.spec.operators import projection
from roofline.spec.precision import Precision


def main() -> None:
    system = sys.argv[1] if len(sys.argv) > 1 else "h100_sxm"
    framework = sys.argv[2] if len(sys.argv) > 2 else "vllm"
    dtype = sys.argv[3] if len(sys.argv) > 3 else "bf16"
    hw = load_hardware(surface_rows.DEVICES[system])
    p = Precision(weights=dtype, activations=dtype, kv="bf16")
    c = Ceilings.of(hw, p.compute, "achievable")
    rows = surface_rows.rows("gemm", system=system, framework=framework, dtype=dtype)
    if not rows:
        raise SystemExit(f"no {dtype} GEMM rows of {framework} on {system}")
    by_m: dict[int, list[float]] = defaultdict(list)
    for r in rows:
        m, n, k = int(r["m"]), int(r["n"]), int(r["k"])
        op = projection("gemm", m, k, n)
        t = float(op_cost(op, p, c).time_s)
        by_m[m].append(t / (float(r["latency_us"]) * 1e-6) - 1)
    print(f"{system} {framework} {dtype}: predicted / measured - 1 by M ({len(rows)} shapes x M)")
    print("| M | shapes | median | p10 | p90 |\n|---|---|---|---|---|")
    for m in sorted(by_m):
        e = np.array(by_m[m])
        q = np.quantile(e, [0.1, 0.5, 0.9])
        print(f"| {m} | {e.size} | {q[1]:+.0%} | {q[0]:+.0%} | {q[2]:+.0%} |")


if __name__ == "__main__":
    main()
