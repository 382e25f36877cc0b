"""The model terms validate relies on (small-M GEMM efficiency, per-kernel overhead), their
calibration, and validate's pass/fail logic, on synthetic numbers derived by hand. No torch."""

from __future__ import annotations

import pytest

from roofline.cost import Ceilings, effective_flops, gemm_rows, op_cost
from roofline.hardware import Achievable, HardwareSpec
from roofline.measure.calibrate import achieved, half_rows
from roofline.measure.kernel_ops import gemm_op, stream_op
from roofline.measure.results import DeviceInfo, Environment, Point, Results, Timing
from roofline.measure.validate import BANDS, validate
from roofline.operators import Op
from roofline.precision import Precision

FP32 = Precision.uniform("fp32")


def _hw(half: float = 0.0, overhead_us: float = 0.0) -> HardwareSpec:
    """100 GFLOP/s fp32, 10 GB/s, fractions 1: every number below is easy to do by hand."""
    return HardwareSpec(
        name="toy", display_name="toy", vendor="none", kind="cpu", memory_gb=1,
        memory_bandwidth_gb_per_s=10, dense_peak_tflops={"fp32": 0.1},
        achievable=Achievable(matmul_fraction={"fp32": 1.0}, memory_bandwidth_fraction=1.0,
                              kernel_overhead_us=overhead_us, matmul_half_rows=half,
                              source="test"), source="test")


def test_gemm_rows_read_off_the_operator():
    assert gemm_rows(gemm_op(16, 4096, 1024)) == 16  # 2·16·N·K / (2·N·K)
    moe = Op("moe/experts", "matmul", flops=2 * 64 * 2 * 300, weight_elems=8 * 300)
    assert gemm_rows(moe) == 16  # 64 tokens x top-2 over 8 touched experts
    assert gemm_rows(stream_op("read", 1000)) == 0  # not a matmul


def test_small_m_gemm_time_by_hand():
    # M=8, N=K=1000, M½=42: FLOPs 2·8·1e6 = 1.6e7, charged 1.6e7 + 2·42·1e6 = 1.0e8
    # -> 1.0e8 / 1e11 = 1.0 ms compute; bytes 4·(1e6 + 8·2000) = 4.064e6 -> 0.4064 ms
    op = gemm_op(8, 1000, 1000)
    assert effective_flops(op, 42) == pytest.approx(1.0e8)
    c = op_cost(op, FP32, Ceilings.of(_hw(42), "fp32", "achievable"))
    assert float(c.time_s) == pytest.approx(1.0e-3)
    # efficiency M / (M + M½) = 8/50: 1.6e7 FLOPs at 0.16 · 1e11
    assert float(c.compute_s) == pytest.approx(1.6e7 / (0.16 * 1e11))


def test_gemv_and_datasheet_are_untouched():
    gemv = gemm_op(1, 1000, 1000)  # M = 1: a gemv streams its weights, no packing term
    assert effective_flops(gemv, 42) == gemv.flops
    big = gemm_op(8, 1000, 1000)
    datasheet = op_cost(big, FP32, Ceilings.of(_hw(42), "fp32", "datasheet"))
    assert float(datasheet.compute_s) == pytest.approx(1.6e7 / 1e11)


def test_kernel_overhead_per_launch():
    # 12 launches x 5 µs on top of a 4e6-byte read at 10 GB/s (0.4 ms)
    op = Op("x", "elementwise", flops=0, act_elems=1_000_000, launches=12)
    c = op_cost(op, FP32, Ceilings.of(_hw(overhead_us=5), "fp32", "achievable"))
    assert float(c.time_s) == pytest.approx(0.4e-3 + 12 * 5e-6)


def _timing(s: float) -> Timing:
    return Timing(median_s=s, p20_s=s, p80_s=s, min_s=s, repeats=5, method="perf_counter")


def _point(family: str, op: Op, kernel: str, shape: dict, s: float) -> Point:
    flops, moved = float(op.flops), float(op.weight_elems + op.act_elems) * 4
    return Point(family=family, kernel=kernel, name=f"{family} {shape}", dtype="fp32",
                 shape=shape, flops=flops, bytes=moved, timing=_timing(s))


def _results(points: list[Point]) -> Results:
    dev = DeviceInfo(kind="cpu", name="toy cpu", caches_bytes={"L3": 1024},
                     datasheet_peak_flops_per_s={"fp32": 2e11}, native_dtypes=("fp32",))
    env = Environment(device=dev, torch_version="x", python_version="x", threads=1,
                      started_at="t0", finished_at="t1")
    return Results(suite="ci", complete=True, environment=env, points=tuple(points))


def _calibration_points() -> list[Point]:
    """Peak GEMM 1000³ in 20 ms -> 1e11 FLOP/s; read of 4e7 bytes in 4 ms -> 1e10 B/s;
    tiny read of 1024 elems (4096 B = 0.41 µs at 1e10) in 5.41 µs -> 5 µs overhead;
    gemm_small M=8 N=K=1000 in 1.005 ms -> ((1.005 - 0.005) ms · 1e11 - 1.6e7) / 2e6 = 42."""
    return [
        _point("gemm_peak", gemm_op(1000, 1000, 1000), "gemm", dict(M=1000, N=1000, K=1000),
               0.02),
        _point("bandwidth", stream_op("read", 10_000_000), "read", dict(elems=10_000_000),
               4e-3),
        _point("bandwidth", stream_op("read", 1024), "read", dict(elems=1024), 5.4096e-6),
        _point("gemm_small", gemm_op(8, 1000, 1000), "gemm", dict(M=8, N=1000, K=1000),
               1.005e-3),
    ]


def test_calibration_recovers_hand_values():
    a = achieved(_results(_calibration_points()))
    assert a.matmul_flops_per_s["fp32"] == pytest.approx(1e11)
    assert a.bandwidth_bytes_per_s == pytest.approx(1e10)
    assert a.kernel_overhead_s == pytest.approx(5e-6)
    assert a.matmul_half_rows == pytest.approx(42)


def test_half_rows_is_zero_for_a_memory_bound_small_gemm():
    # same GEMM at 0.41 ms: under its 0.4064 ms memory time + 5 µs overhead -> no shortfall
    p = _point("gemm_small", gemm_op(8, 1000, 1000), "gemm", dict(M=8, N=1000, K=1000),
               0.41e-3)
    assert half_rows([p], {"fp32": 1e11}, 1e10, 5e-6) == 0.0


@pytest.mark.parametrize("error,passes", [(0.0, True), (0.9 * BANDS["gemm_sweep"], True),
                                          (-0.9 * BANDS["gemm_sweep"], True),
                                          (1.1 * BANDS["gemm_sweep"], False),
                                          (-1.1 * BANDS["gemm_sweep"], False)])
def test_validate_gate_on_synthetic_results(error, passes):
    # M=16 N=K=1000 on the toy machine, M½=42, 5 µs overhead:
    # (3.2e7 + 8.4e7) / 1e11 = 1.16 ms + 5 µs = 1.165 ms predicted; measured set so that
    # (predicted - measured) / measured = error
    predicted = 1.165e-3
    pts = _calibration_points() + [_point("gemm_sweep", gemm_op(16, 1000, 1000), "gemm",
                                          dict(M=16, N=1000, K=1000), predicted / (1 + error))]
    v = validate(_results(pts), _hw(42, 5))
    row = v.rows[-1]
    assert row.predicted_s == pytest.approx(predicted)
    assert row.error == pytest.approx(error)
    assert v.passed is passes and row.passed is passes
    summary = {s.family: s for s in v.summaries()}["gemm_sweep"]
    assert summary.failures == (0 if passes else 1)
    assert all(r.passed for r in v.rows[:-1])  # the calibration points sit on their ceilings
