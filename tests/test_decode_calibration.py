"""The calibration of decode shapes (the `gemm_decode` sweep: M½ by M and the pooled gemv row
cost) and of the launch cost in eager code (`eager_ops`), and how the calculator uses them;
every expected value derived by hand in the comments. No torch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roofline.calc.cost import Ceilings, effective_flops, half_rows_at, op_cost
from roofline.errors import RooflineError
from roofline.measure.calibrate import achieved, gemv_terms, half_rows, half_rows_by_m
from roofline.measure.kernel_ops import (
    EAGER_CHAIN_LAUNCHES,
    decode_gemm_shapes,
    eager_chain_op,
    gemm_op,
)
from roofline.measure.results import Point, load_results
from roofline.spec.catalog import load_model
from roofline.spec.hardware import Achievable
from roofline.spec.precision import Precision
from tests.test_validate_model import _calibration_points, _hw, _point, _results

FP32 = Precision.uniform("fp32")
PEAKS = {"fp32": 1e11}  # the toy machine of tests/test_validate_model.py: 100 GFLOP/s
BW = 1e10  # 10 GB/s


def _gemm(M: int, N: int, K: int, s: float, family: str = "gemm_decode") -> Point:
    return _point(family, gemm_op(M, N, K), "gemm", dict(M=M, N=N, K=K), s)


def test_half_rows_is_pooled_over_shapes_by_their_weights():
    # M=4, N=K=1000 (W 1e6) in 1.0 ms; M=4, N=2000 K=1000 (W 2e6) in 2.4 ms; overhead 0.
    # excess FLOPs: 1e-3·1e11 - 8e6 = 9.2e7 and 2.4e-3·1e11 - 1.6e7 = 2.24e8
    # pooled: (9.2e7 + 2.24e8) / (2·1e6 + 2·2e6) = 3.16e8 / 6e6 = 52.67
    # (per-point fits 46 and 56: their median would be 56, their mean 51)
    pts = [_gemm(4, 1000, 1000, 1.0e-3), _gemm(4, 2000, 1000, 2.4e-3)]
    assert half_rows(pts, PEAKS, BW, 0.0) == pytest.approx(3.16e8 / 6e6)


def test_half_rows_by_m_keys_each_row_count():
    # overhead 5 µs. M=2: 0.5 ms on N=K=1000 -> (0.495e-3·1e11 - 4e6) / 2e6 = 22.75;
    # M=8: 1.005 ms -> (1e8 - 1.6e7) / 2e6 = 42; the M=1 point is the row cost's, not the table's
    pts = [_gemm(M, 1000, 1000, s) for M, s in ((1, 0.5e-3), (2, 0.5e-3), (8, 1.005e-3))]
    table = half_rows_by_m(pts, PEAKS, BW, 5e-6)
    assert set(table) == {2, 8}
    assert table[2] == pytest.approx(22.75)
    assert table[8] == pytest.approx(42)


def test_gemv_row_cost_is_pooled_over_rows():
    # N=1000 K=1000: bytes 4·(1e6 + 2000) = 4.008e6 -> 400.8 µs; in 500.8 µs -> 100 µs over
    # 1000 rows; N=3000 K=1000: 4·(3e6 + 4000) -> 1201.6 µs; in 1501.6 µs -> 300 µs over 3000
    # rows; least squares over rows (one row length: no stream term) (1000·100 + 3000·300) µs
    # / (1000² + 3000²) rows = 100 ns
    pts = [_gemm(1, 1000, 1000, 500.8e-6), _gemm(1, 3000, 1000, 1501.6e-6)]
    row, fraction = gemv_terms(pts, BW, 0.0)
    assert row == pytest.approx(100e-9) and fraction == 1


def test_table_interpolates_in_log_m_and_holds_at_its_ends():
    t = Achievable(matmul_half_rows=99, matmul_half_rows_by_m={2: 10, 8: 30}, source="test")
    # log2 4 = 2, halfway between log2 2 = 1 and log2 8 = 3 -> 20; beyond 8 held at 30;
    # below 2 held at 10; the scalar 99 is not used once there is a table
    assert half_rows_at(t, 4) == pytest.approx(20)
    assert half_rows_at(t, 64) == pytest.approx(30)
    assert half_rows_at(t, 2) == pytest.approx(10)
    # M=4 N=K=1000: FLOPs 8e6 + 2·20·1e6 = 4.8e7 charged; a gemv (M=1) pays no M½
    assert effective_flops(gemm_op(4, 1000, 1000), t) == pytest.approx(4.8e7)
    assert effective_flops(gemm_op(1, 1000, 1000), t) == 2e6


def test_table_sets_the_gemm_time():
    hw = _hw()
    a = hw.achievable.model_copy(update={"matmul_half_rows_by_m": {2: 10, 8: 30}})
    hw = hw.model_copy(update={"achievable": a})
    # M=4 N=K=1000 on 1e11 FLOP/s: 4.8e7 / 1e11 = 0.48 ms compute > memory 4.008e6 / 1e10 s
    c = op_cost(gemm_op(4, 1000, 1000), FP32, Ceilings.of(hw, "fp32", "achievable"))
    assert float(c.time_s) == pytest.approx(0.48e-3)


def test_table_entries_are_checked():
    with pytest.raises(ValueError, match="M ≥ 2"):
        Achievable(matmul_half_rows_by_m={1: 5.0}, source="test")
    with pytest.raises(ValueError, match="M½"):
        Achievable(matmul_half_rows_by_m={4: -1.0}, source="test")


def test_eager_chain_launches_and_bytes_by_hand():
    # two RMSNorms of 6 launches plus a residual add each, RoPE on q and k of 5 each: 24
    assert EAGER_CHAIN_LAUNCHES == 2 * (6 + 1) + 2 * 5 == 24
    op = eager_chain_op(D=640, N=10, K=2, H=64)
    # norm: 6 launches x (read + write) 640 + add 3·640 = 9600, twice; RoPE 5 x 2 x 12·64
    assert op.act_elems == 2 * (6 * 2 * 640 + 3 * 640) + 5 * 2 * 12 * 64 == 26880
    assert op.launches == 24


def test_eager_ops_point_sets_the_launch_cost():
    # the chain above in 170.752 µs: bytes 26880·4 = 107,520 B -> 10.752 µs at 1e10 B/s;
    # (170.752 - 10.752) µs / 24 launches = 6.667 µs; the tight-loop floor (5 µs) is the
    # fallback and the lower bound
    op = eager_chain_op(640, 10, 2, 64)
    chain = _point("eager_ops", op, "eager", dict(D=640, N=10, K=2, H=64), 170.752e-6)
    a = achieved(_results(_calibration_points() + [chain]))
    assert a.terms["kernel_overhead_us"] == pytest.approx(160 / 24)
    assert achieved(_results(_calibration_points())).terms["kernel_overhead_us"] == pytest.approx(5)


def test_decode_sweep_shapes_of_tiny_llama_by_hand():
    # tiny-llama-30m: D 512, 8 heads / 4 KV heads of 64, F 1536, vocab 8192:
    # qkv N = 512 + 2·4·64 = 1024; out 512 x 512; gate+up N = 2·1536; down K = 1536; head
    assert decode_gemm_shapes(load_model("tiny-llama-30m")) == [
        (1024, 512),
        (512, 512),
        (3072, 512),
        (512, 1536),
        (8192, 512),
    ]


@pytest.mark.parametrize(
    "change, says",
    [
        (lambda p: p["shape"].pop("M"), "needs shape M"),
        (lambda p: p.update(kernel="conv"), "unknown kernel 'conv'"),
        (lambda p: p["shape"].update(N=0), "shape N = 0"),
    ],
)
def test_a_point_without_its_shape_is_refused_in_one_line(tmp_path, change, says):
    doc = json.loads(Path("docs/measurements/cpu-ci.json").read_text())
    gemm = next(p for p in doc["points"] if p["kernel"] == "gemm")
    change(gemm)
    f = tmp_path / "r.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(RooflineError, match=says) as e:
        load_results(f)
    assert "\n" not in str(e.value)
