"""The all-reduce of the achievable layer against measured all-reduce curves, by size and GPUs.

    python benchmarks/allreduce_vs_surface.py [system] [engine] [implementation]

`roofline/data/surfaces/collectives.csv` (aiconfigurator-core 0.12.0, derived by
benchmarks/derive/aic_surfaces.py) holds NCCL's and each engine's own all-reduce latency by
message bytes and GPU count. `parallel.all_reduce_s` on the device's achievable link with the
engine's all-reduce profile is printed beside it as predicted / measured − 1.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

from roofline.catalog import load_engine, load_hardware
from roofline.parallel import Link, all_reduce_s

SURFACE = Path(__file__).resolve().parents[1] / "roofline" / "data" / "surfaces"
DEVICES = {
    "h100_sxm": "h100-sxm",
    "h200_sxm": "h200",
    "a100_sxm": "a100-sxm-80gb",
    "b200_sxm": "b200",
}


def main() -> None:
    system = sys.argv[1] if len(sys.argv) > 1 else "h100_sxm"
    engine = sys.argv[2] if len(sys.argv) > 2 else "vllm"
    impl = sys.argv[3] if len(sys.argv) > 3 else "vLLM_custom_graph"
    hw, eng = load_hardware(DEVICES[system]), load_engine(engine)
    rows = [
        r
        for r in csv.DictReader(
            line for line in (SURFACE / "collectives.csv").open() if not line.startswith("#")
        )
        if r["system"] == system and r["collective"] == "all_reduce" and r["implementation"] == impl
    ]
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
