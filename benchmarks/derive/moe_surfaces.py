"""Derive the bundled fused-MoE surface: the MoE layer's achieved share of its own roofline.

    pip download --no-deps aiconfigurator-core==0.12.0 -d /tmp/aic
    python benchmarks/derive/moe_surfaces.py \
        /tmp/aic/aiconfigurator_core-0.12.0-cp311-abi3-manylinux_2_28_x86_64.whl

Sources: the `moe_perf.parquet` tables of NVIDIA's aiconfigurator-core 0.12.0 (read as a zip,
never installed; `aic_surfaces.Wheel`), every MoE shape they measured, and for MI300X the
AITER fused-MoE rows moe-058..070 of ../shared/evidence/kernels/moe.csv.

Representation (it transfers across MoE shapes). One measured point is one MoE layer's
latency t on one GPU: hidden H, expert width I split over moe_tp GPUs (I/tp per GPU), top-k of
E experts, n tokens entering the layer. As `roofline.spec.forward._moe` costs that layer (uniform
routing, TP-split experts):
    pairs = n·k,  touched = E·(1 − (1 − k/E)^n)   (`operators.expected_experts_touched`),
    m = pairs / touched                            (tokens per touched expert: the GEMM's M),
    W = touched · 3·H·I/tp                         (weight elements the layer reads, gated),
    roof = max(2·m·W / peak, W·b / bandwidth)      (b: bytes per weight element of the dtype;
                                                    datasheet peak and bandwidth of the device,
                                                    hardware_specs/<device>.yaml),
    efficiency = roof / t.
The surface is the median efficiency over every measured point in each cell of (log2 m,
log2 W) rounded to multiples of 1/2 (`BIN`), per system, framework, dtype and kernel (the
kernel with the most points where a table measured several; non-gated and min-latency
kernels left out).
`roofline.spec.surfaces.MoeSurface` interpolates it in log2 m along each W row, then in log2 W.
TP layouts only (moe_ep = 1): an expert-parallel rank is read on the same axes.
Routing: balanced, else power_law_1.01 where a table has no balanced rows.

What is written:
- roofline/data/surfaces/moe_efficiency.csv (a `#` header with every table, version folder,
  collection metadata and the datasheet values used);
- tests/fixtures/moe_surface/sample.csv: raw points (before any aggregation), a fixed stride
  through each system, framework and dtype, for tests/test_moe_surface.py.
Re-running on the same wheel and evidence writes identical bytes.
"""

from __future__ import annotations

import argparse
import csv
import math
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from aic_surfaces import DATA, Wheel, newest, sig4, sig6, version_key, write_csv

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from roofline.spec.catalog import load_hardware  # noqa: E402
from roofline.spec.operators import expected_experts_touched  # noqa: E402

OUT = REPO / "roofline" / "data" / "surfaces" / "moe_efficiency.csv"
SAMPLE = REPO / "tests" / "fixtures" / "moe_surface" / "sample.csv"
EVIDENCE = REPO.parent / "shared" / "evidence" / "kernels" / "moe.csv"

#: aiconfigurator system -> roofline device spec (its datasheet peak and bandwidth)
DEVICES = {
    "a100_sxm": "a100-sxm-80gb",
    "h100_sxm": "h100-sxm",
    "h200_sxm": "h200",
    "b200_sxm": "b200",
    "b300_sxm": "b300",
    "gb200": "gb200",
    "gb300": "gb300",
    "l40s": "l40s",
    "mi300x": "mi300x",
}
FRAMEWORKS = ("vllm", "sglang", "trtllm")
#: table dtype -> (short name, bytes per weight element without scales, datasheet peak key)
DTYPES = {
    "bfloat16": ("bf16", 2.0, "bf16"),
    "fp8": ("fp8", 1.0, "fp8"),
    "fp8_block": ("fp8_block", 1.0, "fp8"),
    "nvfp4": ("nvfp4", 0.5, "fp4"),
    "w4a16_mxfp4": ("w4a16_mxfp4", 0.5, "bf16"),
}
#: kernels that are not the gated fused MoE a model's layer runs by default
SKIP_KERNELS = ("nongated", "min_latency")
ROUTING = ("balanced", "power_law_1.01")
SAMPLE_PER_GROUP = 12
#: cell width on the log2 m and log2 W axes
BIN = 0.5
#: the engine releases that call AITER's block-scaled fp8 fused MoE on ROCm (opt-in flags)
AITER_ENGINES = (("sglang", "0.4.5"), ("vllm", "0.8.3"))
AITER_SHAPE = re.compile(
    r"(\d+) tokens, model_dim (\d+), inter_dim (\d+), (\d+) experts, topk (\d+)"
)


def point(H: int, inter: int, k: int, E: int, tp: int, n: int, us: float, peak: float,
          bw: float, b: float) -> dict:  # fmt: skip
    """The cell coordinates and efficiency of one measured layer (module docstring)."""
    touched = float(expected_experts_touched(E, k, n))
    m = n * k / touched
    W = touched * 3 * H * inter / tp
    roof = max(2 * m * W / peak, W * b / bw)
    return {"m": m, "w": W, "eff": roof / (us * 1e-6)}


def cell(x: float) -> float:
    """The cell centre of `x` on the log2 axis: log2 x rounded to a multiple of `BIN`."""
    return round(math.log2(x) / BIN) * BIN


def datasheet(system: str, peak_key: str) -> tuple[float, float, str]:
    hw = load_hardware(DEVICES[system])
    return hw.peak_flops_per_s(peak_key), hw.memory_bandwidth_bytes_per_s, hw.name


def aic_groups(wheel: Wheel, lines: list[str]) -> dict[tuple, list[dict]]:
    groups: dict[tuple, list[dict]] = {}
    for system in DEVICES:
        if system == "mi300x":
            continue
        for fw in FRAMEWORKS:
            for dt, (short, b, pk) in DTYPES.items():

                def keep(r: dict, dt: str = dt) -> bool:
                    return (
                        r["moe_dtype"] == dt
                        and int(r["moe_ep_size"]) == 1
                        and r["distribution"] in ROUTING
                        and not any(s in r["kernel_source"] for s in SKIP_KERNELS)
                    )

                found = newest(wheel, system, "moe", fw, "moe_perf", keep)
                if not found:
                    continue
                src, rows = found
                routing = next(d for d in ROUTING if any(r["distribution"] == d for r in rows))
                count: dict[str, int] = defaultdict(int)
                for r in rows:
                    count[r["kernel_source"]] += r["distribution"] == routing
                kernel = sorted(count, key=lambda s: (-count[s], s))[0]
                rows = [
                    r for r in rows if r["distribution"] == routing and r["kernel_source"] == kernel
                ]
                peak, bw, device = datasheet(system, pk)
                pts = []
                for r in rows:
                    H, inter = int(r["hidden_size"]), int(r["inter_size"])
                    k, E = int(r["topk"]), int(r["num_experts"])
                    tp, n, us = int(r["moe_tp_size"]), int(r["num_tokens"]), r["latency"] * 1e3
                    p = point(H, inter, k, E, tp, n, us, peak, bw, b)
                    p.update(hidden=H, inter=inter, topk=k, experts=E, moe_tp=tp, tokens=n,
                             latency_us=us)  # fmt: skip
                    pts.append(p)
                key = (system, fw, src.version, kernel, short)
                groups[key] = pts
                others = sorted(set(count) - {kernel})
                lines += [
                    f"- {system} {fw} {src.version} {short}: {src.path}",
                    f"    kernel {kernel} ({len(pts)} points, routing {routing})"
                    + (f"; also measured: {' '.join(others)}" if others else ""),
                    f"    version folders {' '.join(src.present)}",
                    "    collection_meta.yaml: " + "; ".join(f"{a}={v}" for a, v in src.meta),
                    f"    datasheet: {device} {pk} {peak / 1e12:g} TFLOP/s, {bw / 1e12:g} TB/s",
                ]
    return groups


def aiter_groups(lines: list[str]) -> dict[tuple, list[dict]]:
    """MI300X: AITER's tuned block-scaled fp8 fused MoE (evidence moe-058..070), one GPU."""
    peak, bw, device = datasheet("mi300x", "fp8")
    pts, ids = [], []
    with EVIDENCE.open(newline="") as f:
        for r in csv.DictReader(f):
            if r["hardware"] != "mi300x" or r["kind"] != "fused_moe" or "AITER" not in r["library"]:
                continue
            shape = AITER_SHAPE.fullmatch(r["shape_or_bytes"])
            assert shape is not None, r["id"]
            n, H, inter, E, k = (int(x) for x in shape.groups())
            us = float(r["value"])
            p = point(H, inter, k, E, 1, n, us, peak, bw, 1.0)
            p.update(hidden=H, inter=inter, topk=k, experts=E, moe_tp=1, tokens=n, latency_us=us)
            pts.append(p)
            ids.append(r["id"])
    lines += [
        f"- mi300x: ../shared/evidence/kernels/moe.csv rows {ids[0]}..{ids[-1]} ({len(ids)} "
        "points): AITER fused MoE, tuned 1-stage kernel, per-1x128 fp8 (ROCm/aiter@e404860",
        "    aiter/configs/model_configs/a8w8_blockscale_tuned_fmoe_glm5_1.csv); one GPU, the "
        "shapes as tuned (moe_tp 1);",
        "    engines calling it for block-scaled fp8 MoE: sglang 0.4.5 (srt/layers/quantization/"
        "fp8.py: aiter asm_moe with block_shape, under CK_MOE=1),",
        "    vllm 0.8.3 (model_executor/layers/fused_moe/rocm_aiter_fused_moe.py: "
        "fmoe_fp8_blockscale_g1u1, under VLLM_ROCM_USE_AITER=1 and",
        "    VLLM_ROCM_USE_AITER_FP8_BLOCK_SCALED_MOE=1), read in their wheels;",
        f"    datasheet: {device} fp8 {peak / 1e12:g} TFLOP/s, {bw / 1e12:g} TB/s",
    ]
    return {("mi300x", fw, v, "aiter_fmoe_fp8_blockscale", "fp8_block"): pts
            for fw, v in AITER_ENGINES}  # fmt: skip


def table(groups: dict[tuple, list[dict]]) -> list[list[str]]:
    out = []
    for key in sorted(groups, key=lambda k: (*k[:2], version_key(k[2]), *k[3:])):
        system, fw, version, kernel, short = key
        b, pk = next((v[1], v[2]) for v in DTYPES.values() if v[0] == short)
        peak, bw, _ = datasheet(system, pk)
        cells: dict[tuple[int, int], list[float]] = defaultdict(list)
        for p in groups[key]:
            cells[(cell(p["w"]), cell(p["m"]))].append(p["eff"])
        for (lw, lm), effs in sorted(cells.items()):
            out.append(
                [system, fw, version, kernel, short, f"{lw:g}", f"{lm:g}", str(len(effs)),
                 sig4(statistics.median(effs)), f"{peak / 1e12:g}", f"{bw / 1e12:g}", f"{b:g}"]
            )  # fmt: skip
    return out


def sample(groups: dict[tuple, list[dict]]) -> list[list[str]]:
    out = []
    for key in sorted(groups, key=lambda k: (*k[:2], version_key(k[2]), *k[3:])):
        pts = sorted(
            groups[key],
            key=lambda p: (p["hidden"], p["inter"], p["topk"], p["experts"], p["moe_tp"],
                           p["tokens"], p["latency_us"]),
        )  # fmt: skip
        stride = max(1, math.ceil(len(pts) / SAMPLE_PER_GROUP))
        for p in pts[stride // 2 :: stride]:
            out.append(
                [*key, *(str(p[c]) for c in ("hidden", "inter", "topk", "experts", "moe_tp",
                                              "tokens")), sig6(p["latency_us"])]
            )  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("wheel", type=Path, help="aiconfigurator_core-*.whl (pip download)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--sample", type=Path, default=SAMPLE)
    args = parser.parse_args(argv)
    wheel = Wheel(args.wheel)
    lines: list[str] = []
    groups = aic_groups(wheel, lines)
    groups.update(aiter_groups(lines))
    head = [
        "# roofline achievable surface: fused MoE layer efficiency against its own roofline,",
        "#   by tokens per touched expert (m) and weight elements read (W), per GPU",
        "# written by benchmarks/derive/moe_surfaces.py (re-run it; do not edit by hand) from",
        f"#   aiconfigurator-core 0.12.0, wheel {args.wheel.name}",
        f"#   sha256 {wheel.sha256}, tables under {DATA}/<system>/moe/,",
        "#   and ../shared/evidence/kernels/moe.csv (MI300X)",
        "# efficiency = max(2*m*W/peak, W*weight_bytes/bandwidth) / measured latency, with",
        "#   touched = E*(1-(1-k/E)^n), m = n*k/touched, W = touched*3*H*I/moe_tp (the script);",
        "#   log2_w, log2_m: log2 W and log2 m rounded to multiples of 0.5; efficiency_median",
        "#   over the cell's points (points); peak_tflops, bandwidth_tbs: the device's datasheet",
        "#   values used;",
        "#   weight_bytes: bytes per weight element of the dtype, scales left out",
        "# sources:",
        *(f"# {ln}" for ln in lines),
    ]
    cols = ("system", "framework", "framework_version", "implementation", "dtype", "log2_w",
            "log2_m", "points", "efficiency_median", "peak_tflops", "bandwidth_tbs",
            "weight_bytes")  # fmt: skip
    rows = table(groups)
    write_csv(args.out, head, cols, rows)
    smp = sample(groups)
    write_csv(
        args.sample,
        [
            "# raw fused-MoE points (before aggregation), a fixed stride through each system,",
            "# framework and dtype of roofline/data/surfaces/moe_efficiency.csv; written by",
            f"# benchmarks/derive/moe_surfaces.py from {args.wheel.name} and the MI300X evidence",
        ],
        (
            "system",
            "framework",
            "framework_version",
            "implementation",
            "dtype",
            "hidden",
            "inter",
            "topk",
            "experts",
            "moe_tp",
            "tokens",
            "latency_us",
        ),  # fmt: skip
        smp,
    )
    print(f"{args.out}: {len(rows)} rows, {args.out.stat().st_size} bytes; sample {len(smp)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
