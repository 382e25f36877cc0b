"""The GEMM model against kernel-level measurements: every GEMM row of a microbenchmarks CSV
(the columns of ../shared/reference/microbenchmarks.csv) with an M, N, K shape on a catalog
device, predicted as one operator on the achievable ceiling with no engine (`cost.op_cost`:
MAMF ceiling, tile and wave quantisation, K / (K + K0), the per-GEMM overhead).

Run from the repository root:
    python benchmarks/kernel_evidence.py [CSV]
Error = predicted time / measured time - 1 (positive: the model is slower than the kernel).
The MAMF rows are where the matmul fractions come from, so they check only the tile and K terms
on top; the DeepGEMM rows (H800, which has no catalog entry, predicted as an H100 SXM: the same
compute and memory) are independent evidence, M = 64 to 4096.
"""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

from roofline.calc.cost import Ceilings, op_cost
from roofline.errors import RooflineError
from roofline.spec.catalog import load_hardware
from roofline.spec.operators import Op
from roofline.spec.precision import Precision

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "reference" / "microbenchmarks.csv"
#: devices measured that have no catalog entry, and the catalog device of the same silicon
STAND_INS = {"h800-sxm": "h100-sxm"}


def shape(text: str) -> tuple[int, int, int] | None:
    """M, N, K of 'MxNxK 1024x9216x14336' or 'M=64, N=2112, K=7168'; None otherwise."""
    m = re.search(r"MxNxK (\d+)x(\d+)x(\d+)", text)
    if m:
        return int(m[1]), int(m[2]), int(m[3])
    d = dict(re.findall(r"\b([MNK])=(\d+)", text))
    return (int(d["M"]), int(d["N"]), int(d["K"])) if len(d) == 3 and "b=" not in text else None


def predicted_s(hw_name: str, dtype: str, M: int, N: int, K: int) -> float:
    """One GEMM of an M x N output over K: inputs and weights in `dtype`, a 16-bit output."""
    fmt = "fp8" if dtype.startswith("fp8") else dtype
    hw = load_hardware(STAND_INS.get(hw_name, hw_name))
    p = Precision(weights=fmt, activations=fmt, kv=fmt if fmt != "fp8" else "bf16")
    op = Op(
        "mlp/up",
        "matmul",
        flops=2 * M * N * K,
        weight_elems=N * K,
        act_elems=M * K + M * N,
        weight_rows=N,
    )
    return float(op_cost(op, p, Ceilings.of(hw, p.compute, "achievable")).time_s)


def main(path: Path) -> None:
    print("| id | device | dtype | M × N × K | measured | predicted | error |")
    print("|---|---|---|---|---|---|---|")
    for row in csv.DictReader(path.open(encoding="utf-8")):
        if row["kind"] != "gemm" or row["metric"] != "achieved_flops_per_s":
            continue
        mnk = shape(row["shape"])
        if mnk is None:
            continue
        M, N, K = mnk
        measured = 2 * M * N * K / float(row["value"])
        try:
            t = predicted_s(row["hardware"], row["dtype"], M, N, K)
        except RooflineError as e:
            print(
                f"| {row['id']} | {row['hardware']} | {row['dtype']} | {M}×{N}×{K} | — | — | {e} |"
            )
            continue
        print(
            f"| {row['id']} | {row['hardware']} | {row['dtype']} | {M}×{N}×{K} | "
            f"{measured * 1e6:.1f} µs | {t * 1e6:.1f} µs | {t / measured - 1:+.0%} |"
        )


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT)
