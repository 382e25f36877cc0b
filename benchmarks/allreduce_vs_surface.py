"""The all-reduce of the achievable layer against measured all-reduce curves, by size and GPUs.

    python benchmarks/allreduce_vs_surface.py [system] [engine] [implementation]

`roofline/data/surfaces/collectives.csv` (aiconfigurator-core 0.12.0, derived by
benchmarks/derive/aic_surfaces.py) holds NCCL's and each engine's own all-reduce latency by
message bytes and GPU count. `parallel.all_reduce_s` on the device's achievable link with the
engine's all-reduce profile is printed beside it as predicted / measured − 1.
"""

from __future__ import annotations

import sys

import surface_rows

from roofline.calc.parallel import Link, all_reduce_s
from roofline.spec.catalog import load_engine, load_hardware


def main() -> None:
    system = sys.argv[1] if len(sys.argv) > 1 else "h100_sxm"
    engine = sys.argv[2] if len(sys.argv) > 2 else "vllm"
    impl = sys.argv[3] if len(sys.argv) > 3 else "vLLM_custom_graph"
    hw, eng = load_hardware(surface_rows.DEVICES[system]), load_engine(engine)
    rows = surface_rows.rows(
        "collectives", system=system, collective="all_reduce", implementation=impl
    )
    print(f"{system} {impl} against all_reduce_s with the {engine} profile")
    print("| GPUs | bytes | measured | predicted | error |\n|---|---|---|---|---|")
    for r in rows:
        n, size = int(r["gpus"]), int(r["message_bytes"])
        link = Link.of(hw.interconnect, n, "achievable", eng)
        t = float(all_reduce_s(float(size), n, link))
        m = float(r["latency_us"]) * 1e-6
        print(f"| {n} | {size:,} | {m * 1e6:.1f} µs | {t * 1e6:.1f} µs | {t / m - 1:+.0%} |")


if __name__ == "__main__":
    main()
