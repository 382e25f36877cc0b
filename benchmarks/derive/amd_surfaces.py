"""Derive the AMD achievable surfaces from the cited kernel evidence (no aiconfigurator tables).

    python benchmarks/derive/amd_surfaces.py [EVIDENCE_DIR]

EVIDENCE_DIR defaults to ../shared/evidence/kernels beside the repository (its gemm.csv and
collectives.csv: one measured value per row, each row cited; README.md there). Standard
library only. Re-running on the same evidence writes identical bytes.

The surfaces have the representation of the NVIDIA ones (`roofline.spec.surfaces`,
benchmarks/derive/aic_surfaces.py), so `cost` and `parallel` read them the same way:
- roofline/data/surfaces/amd_gemm_efficiency.csv: fp8 GEMM achieved TFLOP/s by M on gfx942
  (MI300X), the median over the measured (N, K) with N*K >= 4096*4096 at each measured M, from
  AITER's tuned block-scaled fp8 GEMM (`gemm_a8w8_blockscale`, CK kernel; 1x128 activation and
  128x128 weight scales) in ROCm/aiter@e404860's tuned configs. One row set per engine that
  calls that kernel on ROCm, with the first release that calls it as framework_version:
  SGLang 0.4.5 (sglang/srt/layers/quantization/fp8_utils.py imports
  `aiter.gemm_a8w8_blockscale` on HIP; read in the sglang 0.4.5 and 0.4.10 wheels) and vLLM
  0.8.3 (vllm-project/vllm PR #14968, merged 2025-03, `VLLM_ROCM_USE_AITER_LINEAR`; the first
  release after the merge; not read in a wheel). An older release ran other kernels, so the
  surface is not assumed for it (`surfaces.measured_for`).
- roofline/data/surfaces/amd_collectives.csv: RCCL all-reduce latency by message bytes on 8
  MI300X (rccl-tests, one process per GPU, RCCL 2.22.3), under HIP-graph launch (RCCL_graph)
  and eager (RCCL_eager). Sizes with a printed latency keep it; sizes with only a printed
  busbw get latency = 2(n-1)/n * bytes / busbw (nccl-tests' definition of busbw), said in the
  header. The graph curve takes the eager sizes from 128 MiB up: at 16 MiB both launch modes
  print the same busbw (196.96 against 197.26 GB/s), so launch no longer matters there.
  RCCL is the library every vLLM and SGLang release on ROCm calls; their custom all-reduce
  kernels replace it only where faster, so the curve bounds their all-reduce from above.
- tests/fixtures/surfaces_amd/source_points.csv: every evidence row the surfaces use, as
  printed (before any aggregation), for tests/test_surfaces_amd.py.

Left out, and why: the bpreshuffle per-token fp8 GEMM (gemm-130..136: one shape, N*K below
4096^2); hipBLASLt 8192^3 / 16384^3 (gemm-137/138: clock pinned at 1005 MHz, the 16384^3
figure a reported bug); the block-scaled GEMM shapes with N*K below 4096^2 (gemm-104..115:
DeepSeek-V3 shapes; the NVIDIA surfaces hold the same size floor); bf16 (no gfx942 bf16 GEMM
by M in the evidence; MAMF is one asymptote); MI355X/MI350X (gfx950: no GEMM by M, no RCCL
table); the single-process Azure rccl-tests rows (coll-024..036: one process driving 8 GPUs,
not the engines' layout); SGLang's 4-GPU all-reduce (coll-125..139: the release is not
printed) and fused MoE (moe-058..070: the cost model reads no MoE surface yet).
"""

from __future__ import annotations

import csv
import io
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "roofline" / "data" / "surfaces"
FIXTURE = REPO / "tests" / "fixtures" / "surfaces_amd" / "source_points.csv"
DEFAULT_EVIDENCE = REPO.parent / "shared" / "evidence" / "kernels"

SYSTEM = "mi300x"
#: Weights of one GEMM instance below which a shape is left out (as in aic_surfaces.py).
MIN_WEIGHT_ELEMS = 4096 * 4096
#: Engines that call AITER's block-scaled fp8 GEMM on ROCm, and the first release that does.
BLOCKSCALE_ENGINES = (("sglang", "0.4.5"), ("vllm", "0.8.3"))
GEMM_LIBRARY = "AITER a8w8 blockscale GEMM (ck kernel, tuned)"
GEMM_IMPLEMENTATION = "aiter_a8w8_blockscale"
#: rccl-tests rows used: (first id, last id, implementation). coll-001..013 eager, coll-014..023
#: HIP graph; the graph curve borrows the eager rows at >= 128 MiB (module docstring).
RCCL_EAGER = tuple(f"coll-{i:03d}" for i in range(1, 14))
RCCL_GRAPH = tuple(f"coll-{i:03d}" for i in range(14, 24))
RCCL_LARGE = 128 << 20
RCCL_VERSION = "2.22.3"


def sig4(x: float) -> str:
    """`x` to 4 significant digits, written without an exponent (as aic_surfaces.py)."""
    if x == 0:
        return "0"
    r = float(f"{x:.4g}")
    decimals = max(0, 3 - math.floor(math.log10(abs(r))))
    return f"{r:.{decimals}f}"


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default), q in [0, 100]."""
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def read(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def mnk(shape: str) -> tuple[int, int, int]:
    """'M=16 N=17408 K=5120' -> (16, 17408, 5120)."""
    parts = dict(p.split("=") for p in shape.split())
    return int(parts["M"]), int(parts["N"]), int(parts["K"])


def message_bytes(shape: str) -> int:
    """'8192 B (8 KiB)' -> 8192."""
    return int(shape.split()[0])


def gemm_points(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """The tuned block-scaled fp8 GEMM rows on gfx942 of a shape at least 4096^2."""
    out = []
    for r in rows:
        if r["hardware"] != SYSTEM or r["library"] != GEMM_LIBRARY:
            continue
        if r["metric"] != "achieved_flops" or r["unit"] != "FLOP/s":
            raise SystemExit(f"error: {r['id']}: expected achieved_flops in FLOP/s")
        _, n, k = mnk(r["shape_or_bytes"])
        if n * k >= MIN_WEIGHT_ELEMS:
            out.append(r)
    return sorted(out, key=lambda r: r["id"])


def gemm_efficiency(points: list[dict[str, str]]) -> list[list[str]]:
    """Per engine and M: shapes, TFLOP/s p25 / median / p75, median GB/s (bytes as aiter's
    tuner counts them: M*K + N*K fp8 + 2*M*N bf16 out)."""
    by_m: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for r in points:
        m, n, k = mnk(r["shape_or_bytes"])
        flops = float(r["value"])
        seconds = 2 * m * n * k / flops
        by_m[m].append((flops / 1e12, (m * k + n * k + 2 * m * n) / seconds / 1e9))
    out = []
    for framework, release in sorted(BLOCKSCALE_ENGINES):
        for m in sorted(by_m):
            vals = by_m[m]
            tf = [t for t, _ in vals]
            out.append(
                [
                    SYSTEM,
                    framework,
                    release,
                    GEMM_IMPLEMENTATION,
                    "fp8",
                    str(m),
                    str(len(vals)),
                    sig4(percentile(tf, 25)),
                    sig4(percentile(tf, 50)),
                    sig4(percentile(tf, 75)),
                    sig4(statistics.median(b for _, b in vals)),
                ]
            )
    return out


def rccl_latency_us(r: dict[str, str]) -> float:
    """A row's latency in microseconds: printed, or 2(n-1)/n * bytes / busbw."""
    if r["metric"] == "latency_out_of_place" and r["unit"] == "us":
        return float(r["value"])
    if r["metric"] == "busbw_out_of_place" and r["unit"] == "GB/s":
        n = int(r["gpus"])
        return (
            2 * (n - 1) / n * message_bytes(r["shape_or_bytes"]) / (float(r["value"]) * 1e9) * 1e6
        )
    raise SystemExit(f"error: {r['id']}: neither a latency in us nor a busbw in GB/s")


def rccl_points(rows: list[dict[str, str]]) -> dict[str, list[dict[str, str]]]:
    """The rows of each curve; a size with a printed latency does not also take its busbw."""
    by_id = {r["id"]: r for r in rows}
    missing = [i for i in RCCL_EAGER + RCCL_GRAPH if i not in by_id]
    if missing:
        raise SystemExit(f"error: evidence rows missing: {', '.join(missing)}")
    curves: dict[str, list[dict[str, str]]] = {}
    for name, ids in (("RCCL_eager", RCCL_EAGER), ("RCCL_graph", RCCL_GRAPH)):
        chosen = [by_id[i] for i in ids]
        if name == "RCCL_graph":
            chosen += [
                by_id[i]
                for i in RCCL_EAGER
                if message_bytes(by_id[i]["shape_or_bytes"]) >= RCCL_LARGE
            ]
        for r in chosen:
            if r["hardware"] != SYSTEM or r["op"] != "all_reduce" or r["gpus"] != "8":
                raise SystemExit(f"error: {r['id']} is not an all-reduce on 8 {SYSTEM}")
        sizes_with_latency = {
            message_bytes(r["shape_or_bytes"]) for r in chosen if r["metric"].startswith("latency")
        }
        curves[name] = [
            r
            for r in chosen
            if r["metric"].startswith("latency")
            or message_bytes(r["shape_or_bytes"]) not in sizes_with_latency
        ]
    return curves


def collectives(curves: dict[str, list[dict[str, str]]]) -> list[list[str]]:
    out = []
    for name in sorted(curves):
        for r in sorted(curves[name], key=lambda r: message_bytes(r["shape_or_bytes"])):
            out.append(
                [
                    SYSTEM,
                    "rccl",
                    RCCL_VERSION,
                    name,
                    r["dtype"],
                    "all_reduce",
                    r["gpus"],
                    str(message_bytes(r["shape_or_bytes"])),
                    sig4(rccl_latency_us(r)),
                ]
            )
    return out


def ids_of(rows: list[dict[str, str]]) -> str:
    return " ".join(sorted({r["id"] for r in rows}))


def wrap(prefix: str, words: str, width: int = 96) -> list[str]:
    lines, line = [], prefix
    for w in words.split():
        if len(line) + 1 + len(w) > width and line.strip() != "#":
            lines.append(line)
            line = "#    "
        line += " " + w
    lines.append(line)
    return lines


def sources(rows: list[dict[str, str]]) -> list[str]:
    out = []
    for src in sorted({r["source"] for r in rows}):
        ids = ids_of([r for r in rows if r["source"] == src])
        out += wrap("#  -", f"{src}: {ids}")
    return out


def render(header: list[str], columns: list[str], rows: list[list[str]]) -> str:
    buf = io.StringIO()
    for line in header:
        buf.write(line + "\n")
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)
    return buf.getvalue()


def main(argv: list[str]) -> int:
    evidence = Path(argv[0]) if argv else DEFAULT_EVIDENCE
    try:
        gemm_rows = read(evidence / "gemm.csv")
        coll_rows = read(evidence / "collectives.csv")
    except OSError as err:
        print(f"error: cannot read the kernel evidence in {evidence}: {err}", file=sys.stderr)
        return 1
    g = gemm_points(gemm_rows)
    curves = rccl_points(coll_rows)
    c_used = sorted(
        {r["id"]: r for v in curves.values() for r in v}.values(), key=lambda r: r["id"]
    )
    common = [
        "# derived by benchmarks/derive/amd_surfaces.py from ../shared/evidence/kernels/ (re-run",
        "#   it; do not edit by hand); values 4 significant digits; every evidence row id below",
    ]
    gemm_header = [
        "# roofline achievable surface (AMD): fp8 GEMM achieved throughput by M on gfx942",
        *common,
        "# kernel: AITER gemm_a8w8_blockscale (CK, tuned; fp8-e4m3fnuz, 1x128 activation and",
        "#   128x128 weight scales, bf16 out), timings from the tuner output columns (us, tflops,",
        "#   bw) of ROCm/aiter@e404860 tuned configs, gfx942 with 304 CUs (MI300X; MI325X reports",
        "#   the same)",
        "# tflops: median (p25, p75) over the (N, K) with N*K >= 4096^2 measured at each M;",
        "#   gb_per_s_median: (M*K + N*K + 2*M*N) bytes / time, aiter's tuner convention",
        "# framework_version: the first release of the engine that calls this kernel on ROCm",
        "#   (sglang 0.4.5: srt/layers/quantization/fp8_utils.py, read in its wheel; vllm 0.8.3:",
        "#   vllm-project/vllm PR #14968, merged 2025-03); the timings are the same kernel's",
        f"# evidence rows used ({len(g)}):",
        *sources(g),
    ]
    coll_header = [
        "# roofline achievable surface (AMD): RCCL all-reduce latency by message bytes, 8 MI300X",
        *common,
        "# rccl-tests all_reduce_perf, one process per GPU (mpirun -np 8), fp32, out of place;",
        "#   RCCL_graph: -G 1 (HIP graph launch); RCCL_eager: graph 0",
        "# latency_us: as printed, or 2(n-1)/n * message_bytes / busbw where only busbw is",
        "#   printed (4 MiB and up); RCCL_graph takes the eager rows from 128 MiB up (at 16 MiB",
        "#   both launch modes print the same busbw: coll-011 197.26, coll-023 196.96 GB/s)",
        f"# evidence rows used ({len(c_used)}):",
        *sources(c_used),
    ]
    gemm_cols = [
        "system",
        "framework",
        "framework_version",
        "implementation",
        "dtype",
        "m",
        "shapes",
        "tflops_p25",
        "tflops_median",
        "tflops_p75",
        "gb_per_s_median",
    ]
    coll_cols = [
        "system",
        "framework",
        "framework_version",
        "implementation",
        "dtype",
        "collective",
        "gpus",
        "message_bytes",
        "latency_us",
    ]
    fixture_rows = [
        [r["id"], "gemm_efficiency", *mnk(r["shape_or_bytes"]), "", r["value"], ""] for r in g
    ] + [
        [
            r["id"],
            name,
            "",
            "",
            "",
            message_bytes(r["shape_or_bytes"]),
            "",
            sig4(rccl_latency_us(r)),
        ]
        for name in sorted(curves)
        for r in sorted(curves[name], key=lambda r: r["id"])
    ]
    files = {
        OUT / "amd_gemm_efficiency.csv": render(gemm_header, gemm_cols, gemm_efficiency(g)),
        OUT / "amd_collectives.csv": render(coll_header, coll_cols, collectives(curves)),
        FIXTURE: render(
            [
                "# raw evidence points behind the AMD surfaces, as printed in",
                "#   ../shared/evidence/kernels/{gemm,collectives}.csv (written by",
                "#   benchmarks/derive/amd_surfaces.py); latency_us of a busbw row:",
                "#   2(n-1)/n * bytes / busbw",
            ],
            ["id", "surface", "m", "n", "k", "message_bytes", "flops_per_s", "latency_us"],
            [[str(x) for x in row] for row in fixture_rows],
        ),
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
