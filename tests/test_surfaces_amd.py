"""AMD surfaces (system `mi300x`): fp8 GEMMs by M from AITER's tuned block-scaled GEMM and RCCL
all-reduce by bytes on 8 MI300X, derived from ../shared/evidence/kernels by
benchmarks/derive/amd_surfaces.py into roofline/data/surfaces/amd_*.csv. The raw evidence
points are kept in tests/fixtures/surfaces_amd/source_points.csv."""

from __future__ import annotations

import csv
import math
import statistics
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from roofline.calc.cost import Ceilings, step_cost
from roofline.calc.parallel import Link, all_reduce_s
from roofline.spec.catalog import load_engine, load_hardware, load_model
from roofline.spec.operators import Step
from roofline.spec.precision import Precision
from roofline.spec.surfaces import all_reduce_surface, gemm_surface

SOURCE = Path(__file__).parent / "fixtures" / "surfaces_amd" / "source_points.csv"
FP8 = Precision("fp8", "fp8", "bf16")
TOLERANCE = 0.05


def source_points() -> list[dict[str, str]]:
    with SOURCE.open(encoding="utf-8") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def test_the_gemm_surface_reproduces_the_median_of_its_source_points() -> None:
    """At each measured M the surface reads the median FLOP/s of the evidence rows there."""
    by_m: dict[int, list[float]] = defaultdict(list)
    for p in source_points():
        if p["surface"] == "gemm_efficiency":
            by_m[int(p["m"])].append(float(p["flops_per_s"]))
    assert sorted(by_m) == [16, 64, 128, 256, 1024, 4096, 16384]
    for engine in ("sglang", "vllm"):
        s = gemm_surface("mi300x", engine, "fp8")
        assert s is not None and s.implementation == "aiter_a8w8_blockscale"
        errors = [
            abs(s.at(np.array([float(m)]))[0] / statistics.median(v) - 1) for m, v in by_m.items()
        ]
        assert statistics.median(errors) <= TOLERANCE, errors


@pytest.mark.parametrize("graphs, name", [(True, "RCCL_graph"), (False, "RCCL_eager")])
def test_the_all_reduce_surface_reproduces_its_source_points(graphs: bool, name: str) -> None:
    s = all_reduce_surface("mi300x", "sglang", 8, graphs)
    assert s is not None and s.implementation == name
    points = [p for p in source_points() if p["surface"] == name]
    assert len(points) >= 8
    errors = [
        abs(s.at(np.array([float(p["message_bytes"])]))[0] / (float(p["latency_us"]) * 1e-6) - 1)
        for p in points
    ]
    assert statistics.median(errors) <= TOLERANCE, errors


def test_a_gemm_on_mi300x_costs_its_flops_over_the_measured_rate() -> None:
    """Llama-3.1-8B, fp8 weights and activations, 64 sequences decoding on one MI300X under
    SGLang: gate-and-up is 2 x 14,336 x 4,096 = 117,440,512 weights a layer, M = 64 rows:
    2 x 64 x 117,440,512 x 32 layers = 481,036,337,152 FLOP. The surface at M = 64 is the
    median of gemm-117 (157.32) and gemm-124 (298.04 TFLOP/s) = 227.68, written 227.7:
    481,036,337,152 / 227.7e12 = 2.1126 ms."""
    m, hw = load_model("llama-3.1-8b"), load_hardware("mi300x")
    c = step_cost(m, hw, Step(64, 1, 100), FP8, engine=load_engine("sglang"))
    up = next(o for o in c.ops if o.name == "mlp/up")
    assert up.flops == 481_036_337_152
    assert up.compute_s == pytest.approx(481_036_337_152 / 227.7e12)
    assert up.compute_s == pytest.approx(2.1126e-3, rel=1e-4)
    assert "aiter_a8w8_blockscale fp8 on mi300x under sglang 0.4.5" in c.ceilings.source


def test_the_gemm_surface_interpolates_in_m_and_holds_time_below_its_smallest_m() -> None:
    s = gemm_surface("mi300x", "sglang", "fp8")
    assert s is not None
    # M = 100: 36/64 of the way from M = 64 (227.7) to 128 (341.0): 227.7 + 0.5625 x 113.3
    assert s.at(np.array([100.0]))[0] == pytest.approx((227.7 + 0.5625 * 113.3) * 1e12)
    # M = 4, below the measured 16: M = 16's time (76.86 TFLOP/s at 16 rows), so 4/16 of it
    assert s.at(np.array([4.0]))[0] == pytest.approx(76.86e12 * 4 / 16)
    assert s.at(np.array([65536.0]))[0] == pytest.approx(826.4e12)  # held beyond M = 16384


def test_an_all_reduce_on_8_mi300x_reads_rccl() -> None:
    """TP 8 on MI300X under SGLang (HIP graphs): 64 KiB is measured, 9.14 us (coll-017);
    96 KiB is log-log between 64 KiB (9.14) and 128 KiB (9.51 us, coll-018):
    9.14 x (9.51 / 9.14)^(ln 1.5 / ln 2) = 9.14 x 1.04048^0.58496 = 9.3546 us."""
    hw = load_hardware("mi300x")
    link = Link.of(hw.interconnect, 8, "achievable", load_engine("sglang"), "mi300x")
    t = all_reduce_s(np.array([65536.0, 98304.0]), 8, link)
    assert t[0] == pytest.approx(9.14e-6)
    assert t[1] == pytest.approx(9.14e-6 * (9.51 / 9.14) ** (math.log(1.5) / math.log(2)))
    assert t[1] == pytest.approx(9.3546e-6, rel=1e-4)
    # 16 MiB on the graph curve is worked back from busbw: 1.75 x 16,777,216 B / 196.96 GB/s
    assert all_reduce_s(np.array([16777216.0]), 8, link)[0] == pytest.approx(149.1e-6)


def test_where_the_evidence_has_no_curve_the_fractions_stay() -> None:
    hw = load_hardware("mi300x")
    # the datasheet ceiling never reads a surface
    for eng in ("sglang", "vllm"):
        e = load_engine(eng)
        assert Ceilings.of(hw, "fp8", "datasheet", e).gemm_surface is None
        assert Link.of(hw.interconnect, 8, "datasheet", e, "mi300x").measured is None
    # an engine release older than the one that calls AITER's GEMM keeps the fractions
    assert Ceilings.of(hw, "fp8", "achievable", load_engine("sglang@0.4.2")).gemm_surface is None
    assert Ceilings.of(hw, "fp8", "achievable", load_engine("sglang@0.4.5")).gemm_surface
    assert Ceilings.of(hw, "fp8", "achievable", load_engine("vllm@0.7.3")).gemm_surface is None
    # bf16 has no curve by M on gfx942; no RCCL table at 4 GPUs; gfx950 has neither
    assert gemm_surface("mi300x", "vllm", "bf16") is None
    assert all_reduce_surface("mi300x", "vllm", 4, True) is None
    mi355x = load_hardware("mi355x")
    assert mi355x.achievable.surface_system is None
    assert Ceilings.of(mi355x, "fp8", "achievable", load_engine("vllm")).gemm_surface is None


def test_a_measured_amd_gemm_never_beats_the_datasheet() -> None:
    """The surface stays under MI300X's dense fp8 peak (2,614.9 TFLOP/s) at every M, and its
    weight streaming under the 5.3 TB/s HBM (fp8: 2 M FLOP per weight byte, so weight bytes/s =
    FLOP/s / 2M)."""
    hw = load_hardware("mi300x")
    s = gemm_surface("mi300x", "vllm", "fp8")
    assert s is not None
    m = np.arange(1.0, 20000.0)
    flops = s.at(m)
    assert np.all(flops < hw.peak_flops_per_s("fp8"))
    assert np.all(flops / (2 * m) < hw.memory_bandwidth_bytes_per_s)
    t = m / flops
    assert np.all(np.diff(t) >= -1e-12 * t[1:])  # more rows never take less time
