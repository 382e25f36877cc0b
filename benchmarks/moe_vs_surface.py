"""The fused-MoE layer time of the achievable layer against NVIDIA's measured MoE tables.

    python benchmarks/moe_vs_surface.py [system] [framework]

`roofline/data/surfaces/moe.csv` (aiconfigurator-core 0.12.0, derived by
benchmarks/derive/aic_surfaces.py) measures one MoE layer of Qwen3-235B-A22B's shape (hidden
4096, expert width 1536, top-8 of 128 experts) split over 8 GPUs by tensor parallelism, by
tokens. The same layer is costed here from `parallel.parallel_step_cost` of qwen3-235b-a22b at
TP 8 (the routed experts, `moe/experts`, of one rank, divided by the model's 94 layers; the
router is a separate GEMM the tables do not time), hardware layer and the engine's profile,
and printed as predicted / measured − 1 by tokens. The engine profile reads the fused-MoE
surface (`roofline/data/surfaces/moe_efficiency.csv`, benchmarks/derive/moe_surfaces.py): its
cells are medians over every measured MoE shape, this one among them, so its column shows
how far the cross-shape surface sits from this shape's own points.
"""

from __future__ import annotations

import sys

import surface_rows

from roofline.calc.parallel import parallel_step_cost
from roofline.calc.placement import Parallel
from roofline.calc.stack import Stack
from roofline.spec.catalog import load_engine, load_hardware, load_model
from roofline.spec.operators import Step
from roofline.spec.precision import Precision


def main() -> None:
    system = sys.argv[1] if len(sys.argv) > 1 else "h100_sxm"
    framework = sys.argv[2] if len(sys.argv) > 2 else "vllm"
    rows = surface_rows.rows("moe", system=system, framework=framework, dtype="bf16", moe_tp="8")
    m, hw = load_model("qwen3-235b-a22b"), load_hardware(surface_rows.DEVICES[system])
    p = Precision(weights="bf16", activations="bf16", kv="bf16")
    print(f"{system} {framework} bf16 MoE layer, TP 8: predicted / measured - 1")
    print("| tokens | measured | hardware layer | engine profile |\n|---|---|---|---|")
    for r in rows:
        n = int(r["tokens"])
        out = []
        for eng in (None, load_engine("vllm" if framework == "vllm" else "sglang")):
            s = Stack.resolve(m, hw, p, "achievable", eng, Parallel(tp=8))
            c = parallel_step_cost(m, s, Step(n, 1, 0)).compute
            t = sum(float(o.time_s) for o in c.ops if o.op.name == "moe/experts") / m.layers
            out.append(t / (float(r["latency_us"]) * 1e-6) - 1)
        print(f"| {n} | {float(r['latency_us']):.1f} µs | {out[0]:+.0%} | {out[1]:+.0%} |")


if __name__ == "__main__":
    main()
