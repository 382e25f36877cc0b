"""Derive the fused-MoE surfaces of older engine releases: the kernels an engine ran before the
tables of `moe_surfaces.py` were measured.

    pip download --no-deps aiconfigurator-core==0.12.0 -d /tmp/aic
    python benchmarks/derive/moe_release_surfaces.py \
        /tmp/aic/aiconfigurator_core-0.12.0-cp311-abi3-manylinux_2_28_x86_64.whl

Source: vLLM PR #13932 (https://github.com/vllm-project/vllm/pull/13932, opened 2025-02-26 on
vLLM main after the 0.7.3 release, so the 0.7.4 development line), table 'H100 results':
`benchmarks/kernels/benchmark_moe.py --dtype=fp8_w8a8 -tp TP --model deepseek-ai/DeepSeek-V3`,
one H100 running the per-rank shard of DeepSeek-V3's routed experts (E = 256, top-8, hidden
H = 7168, expert width 2048 split over TP: N = 2·2048/TP = 4096, 2048, 1024, 512), 128x128
block-scaled fp8, the whole MoE layer (routing, permute, both expert GEMMs). The 'Triton'
columns are vLLM's default fused MoE of that release (`fused_moe.py`, `fused_experts` with
`block_shape`); DeepGEMM was the PR's opt-in (`--use-deep-gemm`) and is left out. Cells quoted
in ../shared/evidence/kernels/moe.csv (moe-038, 040, 042, 044, 046, 048) are read from there;
the other cells (TP 2 and 4; batches 256, 1024, 1536) are quoted from the PR in `PR_13932`.

Representation: as `moe_surfaces.py` (its `point`, `cell` and `table`): efficiency against the
layer's own roofline by m (tokens per touched expert) and W (weight elements per GPU), medians
in half-octave cells. The table stands for vLLM 0.7.4 and later, until the next measured table
(0.24.0, aiconfigurator): `roofline.spec.surfaces.moe_surface` takes the newest table at or
below the engine's release.

H200 (`h200_sxm`): same SMs (132) and clocks as the H100 SXM, 4.8 TB/s against 3.35 TB/s. An
efficiency against each device's own roofline transfers only where the kernel streams at the
bandwidth; a kernel at a quarter of it is held by its SM-side work, whose time does not
shrink with more bandwidth. The aiconfigurator tables measured the same kernels on both
(`TRANSFER_TABLE`: every shape of the vLLM 0.24.0 fp8_block `moe_perf` table measured on both
systems): the median of t_H100 / t_H200 by the H100 point's efficiency (deciles) is
1.05–1.09 below an efficiency of 0.4 and 1.29–1.33 from 0.6 on (the bandwidth ratio is 1.43).
So an H100 point of efficiency e would be taken to H200 as t_H200 = t_H100 / r(e), r the
median ratio of e's decile. That transfer is NOT bundled (`--h200` writes it, for a what-if):
vLLM 0.7.3 runs these shapes on H200 with its own tuned config (GROUP_SIZE_M differs), which
nobody timed, and one published run contradicts the transferred table: DeepSeek-R1 on 8x H200
under vLLM 0.7.4.dev measures 72 ms a token at 128 concurrent sequences (dstack), where the
transferred table alone gives 1.64 ms x 58 MoE layers = 95 ms. A kernel table stands for the
device it was measured on, as every other surface does. The tiles are
the same: the vllm 0.7.3 wheel ships no H100 config for these shapes (the PR's runs took
`get_default_config`: 64x128x128, 4 warps, 3 stages), and its H200 file for TP 8
(`E=256,N=256,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json`) holds those
tiles from 24 to 2,048 tokens (GROUP_SIZE_M aside).

What is written:
- roofline/data/surfaces/moe_release_efficiency.csv (the columns of moe_efficiency.csv; a `#`
  header naming every evidence row and PR cell, the transfer ratios and the datasheets);
- tests/fixtures/moe_release_surface/sample.csv: every raw point (H100 as measured, H200 as
  transferred), for tests/test_moe_release_surface.py.
Re-running on the same wheel and evidence writes identical bytes.
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
from pathlib import Path

from aic_surfaces import Wheel, newest, sig4, sig6, write_csv
from moe_surfaces import EVIDENCE, datasheet, point, table

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "roofline" / "data" / "surfaces" / "moe_release_efficiency.csv"
SAMPLE = REPO / "tests" / "fixtures" / "moe_release_surface" / "sample.csv"

#: DeepSeek-V3's routed experts (config.json: hidden_size, moe_intermediate_size,
#: n_routed_experts, num_experts_per_tok)
H, INTER, E, TOPK = 7168, 2048, 256, 8
#: the release the PR measured (vLLM main after 0.7.3) and its default kernel's name here
FRAMEWORK, VERSION, KERNEL, DTYPE = "vllm", "0.7.4", "triton_fused_moe_fp8_block", "fp8_block"
PR = "https://github.com/vllm-project/vllm/pull/13932"
#: evidence rows of the Triton column (batch tokens, TP) -> row id
EVIDENCE_IDS = {(128, 1): "moe-038", (128, 8): "moe-040", (512, 1): "moe-042",
                (512, 8): "moe-044", (2048, 1): "moe-046", (2048, 8): "moe-048"}  # fmt: skip
#: the PR's 'H100 results' Triton column, us, by (batch tokens, TP), for the cells the evidence
#: file does not quote (rows 128-2048 of the table; its 3072+ rows are incomplete in the copy read)
PR_13932 = {
    (128, 2): 6025.39, (128, 4): 3121.16,
    (256, 1): 12782.98, (256, 2): 6164.44, (256, 4): 3236.88, (256, 8): 1728.73,
    (512, 2): 6631.64, (512, 4): 3433.29,
    (1024, 1): 13322.31, (1024, 2): 6800.41, (1024, 4): 3546.83, (1024, 8): 1892.75,
    (1536, 1): 13777.98, (1536, 2): 7037.34, (1536, 4): 3677.90, (1536, 8): 1988.70,
    (2048, 2): 10111.40, (2048, 4): 5230.76,
}  # fmt: skip
#: the aiconfigurator table whose shapes measured on both H100 and H200 give the transfer
TRANSFER_TABLE = ("vllm", "fp8_block")
SHAPE_COLS = ("hidden", "inter", "topk", "experts", "moe_tp", "tokens")


def pr_points() -> tuple[list[tuple[int, int, float, str]], list[str]]:
    """(tokens, TP, latency us, origin) of every Triton cell: evidence rows, then PR cells."""
    found: dict[tuple[int, int], tuple[float, str]] = {}
    with EVIDENCE.open(newline="") as f:
        for r in csv.DictReader(f):
            for key, rid in EVIDENCE_IDS.items():
                if r["id"] == rid:
                    assert (
                        "Triton" in r["library"]
                        and f"batch {key[0]} tokens" in (r["shape_or_bytes"])
                    ), rid
                    found[key] = (float(r["value"]), rid)
    assert len(found) == len(EVIDENCE_IDS), sorted(found)
    for key, us in PR_13932.items():
        found[key] = (us, f"PR #13932 table (batch {key[0]}, TP {key[1]})")
    pts = [(n, tp, us, origin) for (n, tp), (us, origin) in sorted(found.items())]
    lines = [
        f"- h100_sxm vllm {VERSION} {DTYPE}: {PR} 'H100 results', Triton columns, "
        f"DeepSeek-V3 (H {H}, I {INTER}, top-{TOPK} of {E}) at TP 1, 2, 4, 8,",
        "    batches 128..2048 tokens (one GPU running the rank's shard);",
        "    ../shared/evidence/kernels/moe.csv rows "
        + ", ".join(f"{v} (batch {k[0]}, TP {k[1]})" for k, v in sorted(EVIDENCE_IDS.items()))
        + ";",
        f"    the PR's table for the other {len(PR_13932)} cells (TP 2 and 4; batches 256, "
        "1024, 1536)",
    ]
    return pts, lines


def transfer_ratios(wheel: Wheel) -> tuple[dict[int, float], list[str]]:
    """Median t_H100 / t_H200 over the shapes measured on both, by the H100 efficiency decile."""
    fw, dt = TRANSFER_TABLE
    peak, bw, _ = datasheet("h100_sxm", "fp8")
    lat: dict[str, dict[tuple, float]] = {}
    srcs = []
    for system in ("h100_sxm", "h200_sxm"):

        def keep(r: dict) -> bool:
            return (
                r["moe_dtype"] == dt
                and int(r["moe_ep_size"]) == 1
                and (r["distribution"] == "balanced")
            )

        found = newest(wheel, system, "moe", fw, "moe_perf", keep)
        assert found is not None, system
        src, rows = found
        srcs.append(f"{src.path}")
        lat[system] = {
            (r["kernel_source"], *(int(r[c]) for c in ("hidden_size", "inter_size", "topk",
             "num_experts", "moe_tp_size", "num_tokens"))): r["latency"] * 1e3
            for r in rows
        }  # fmt: skip
    by_decile: dict[int, list[float]] = {}
    a, b = lat["h100_sxm"], lat["h200_sxm"]
    for key in sorted(set(a) & set(b)):
        _, hid, inter, k, e, tp, n = key
        eff = point(hid, inter, k, e, tp, n, a[key], peak, bw, 1.0)["eff"]
        by_decile.setdefault(min(int(eff * 10), 9), []).append(a[key] / b[key])
    ratios = {d: statistics.median(v) for d, v in sorted(by_decile.items())}
    lines = [
        "- h200_sxm: the H100 points taken to H200 by the measured time ratio of the same",
        f"    kernels on both: {' and '.join(srcs)}",
        "    (balanced routing, moe_ep 1, every shape on both); median t_H100/t_H200 by the",
        "    H100 point's efficiency decile: "
        + ", ".join(f"{d / 10:.1f}+ {sig4(r)} ({len(by_decile[d])})" for d, r in ratios.items()),
    ]
    return ratios, lines


def groups_of(pts: list[tuple[int, int, float, str]], ratios: dict[int, float] | None) -> dict:
    """The H100 points as measured; with `ratios`, also taken to H200 (the `--h200` what-if)."""
    peak1, bw1, _ = datasheet("h100_sxm", "fp8")
    peak2, bw2, _ = datasheet("h200_sxm", "fp8")
    h100, h200 = [], []
    for n, tp, us, _ in pts:
        p = point(H, INTER, TOPK, E, tp, n, us, peak1, bw1, 1.0)
        shape = dict(zip(SHAPE_COLS, (H, INTER, TOPK, E, tp, n), strict=True))
        h100.append({**p, **shape, "latency_us": us})
        if ratios is None:
            continue
        us2 = us / ratios[min(int(p["eff"] * 10), 9)]
        h200.append({**point(H, INTER, TOPK, E, tp, n, us2, peak2, bw2, 1.0), **shape,
                     "latency_us": us2})  # fmt: skip
    groups = {("h100_sxm", FRAMEWORK, VERSION, KERNEL, DTYPE): h100}
    if ratios is not None:
        groups[("h200_sxm", FRAMEWORK, VERSION, KERNEL, DTYPE)] = h200
    return groups


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("wheel", type=Path, help="aiconfigurator_core-*.whl (pip download)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--sample", type=Path, default=SAMPLE)
    parser.add_argument(
        "--h200", action="store_true", help="also write the H100 -> H200 transfer (a what-if)"
    )
    args = parser.parse_args(argv)
    wheel = Wheel(args.wheel)
    pts, lines = pr_points()
    ratios = None
    if args.h200:
        ratios, more = transfer_ratios(wheel)
        lines += more
    groups = groups_of(pts, ratios)
    for system, pk in (("h100_sxm", "fp8"), ("h200_sxm", "fp8"))[: 2 if args.h200 else 1]:
        peak, bw, device = datasheet(system, pk)
        lines.append(f"- datasheet {system}: {device} fp8 {peak / 1e12:g} TFLOP/s, "
                     f"{bw / 1e12:g} TB/s")  # fmt: skip
    head = [
        "# roofline achievable surface of older engine releases: fused MoE layer efficiency",
        "#   against its own roofline, by tokens per touched expert (m) and weight elements",
        "#   read (W), per GPU; the columns of moe_efficiency.csv",
        "# written by benchmarks/derive/moe_release_surfaces.py (re-run it; do not edit by hand)",
        *(
            [
                f"#   from vLLM PR #13932 and, for the H100 -> H200 transfer, {args.wheel.name}",
                f"#   sha256 {wheel.sha256}",
            ]
            if args.h200
            else ["#   from vLLM PR #13932 (measured on H100 only)"]
        ),  # fmt: skip
        "# a table stands for its framework_version and later releases, until the next table",
        "#   (moe_efficiency.csv); efficiency, touched, m, W as in moe_surfaces.py",
        "# sources:",
        *(f"# {ln}" for ln in lines),
    ]
    cols = ("system", "framework", "framework_version", "implementation", "dtype", "log2_w",
            "log2_m", "points", "efficiency_median", "peak_tflops", "bandwidth_tbs",
            "weight_bytes")  # fmt: skip
    rows = table(groups)
    write_csv(args.out, head, cols, rows)
    smp = [
        [*key, *(str(p[c]) for c in SHAPE_COLS), sig6(p["latency_us"])]
        for key, ps in groups.items()
        for p in sorted(ps, key=lambda p: (p["moe_tp"], p["tokens"]))
    ]
    write_csv(
        args.sample,
        [
            "# raw fused-MoE points of roofline/data/surfaces/moe_release_efficiency.csv",
            "# (before aggregation; h200_sxm, with --h200, as transferred); written by",
            "# benchmarks/derive/moe_release_surfaces.py",
        ],
        (
            "system",
            "framework",
            "framework_version",
            "implementation",
            "dtype",
            *SHAPE_COLS,
            "latency_us",
        ),  # fmt: skip
        smp,
    )
    assert not any(math.isnan(float(r[8])) for r in rows)
    print(f"{args.out}: {len(rows)} rows, {args.out.stat().st_size} bytes; sample {len(smp)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
