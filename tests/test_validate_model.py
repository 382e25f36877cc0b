"""The model terms validate relies on (small-M GEMM efficiency, per-kernel overhead, gemv row
cost, attention memory and compute fractions, eager launch counts), their
calibration, and validate's pass/fail logic, on synthetic numbers derived by hand. No torch."""

from __future__ import annotations

import pytest

from roofline.calc.cost import Ceilings, effective_flops, gemm_rows, gemv_rows_s, op_cost
from roofline.measure.calibrate import achieved, calibrated_spec, half_rows
from roofline.measure.kernel_ops import attention_op, gemm_op, stream_op
from roofline.measure.results import DeviceInfo, Environment, Point, Results, Timing
from roofline.measure.validate import BANDS, PROTOCOL, validate
from roofline.spec.catalog import load_model
from roofline.spec.forward import operators
from roofline.spec.hardware import Achievable, HardwareSpec
from roofline.spec.operators import Op, Step
from roofline.spec.precision import Precision

FP32 = Precision.uniform("fp32")


def _hw(half: float = 0.0, overhead_us: float = 0.0) -> HardwareSpec:
    """100 GFLOP/s fp32, 10 GB/s, fractions 1: every number below is easy to do by hand."""
    return HardwareSpec(
        name="toy",
        display_name="toy",
        vendor="none",
        kind="cpu",
        memory_bytes=2**30,
        memory_source="test",
        memory_bandwidth_gb_per_s=10,
        dense_peak_tflops={"fp32": 0.1},
        achievable=Achievable(
            matmul_fraction={"fp32": 1.0},
            memory_bandwidth_fraction=1.0,
            kernel_overhead_us=overhead_us,
            matmul_half_rows=half,
            source="test",
        ),
        source="test",
    )


def test_gemm_rows_read_off_the_operator():
    assert gemm_rows(gemm_op(16, 4096, 1024)) == 16  # 2·16·N·K / (2·N·K)
    moe = Op("moe/experts", "matmul", flops=2 * 64 * 2 * 300, weight_elems=8 * 300)
    assert gemm_rows(moe) == 16  # 64 tokens x top-2 over 8 touched experts
    assert gemm_rows(stream_op("read", 1000)) == 0  # not a matmul


def test_small_m_gemm_time_by_hand():
    # M=8, N=K=1000, M½=42: FLOPs 2·8·1e6 = 1.6e7, charged 1.6e7 + 2·42·1e6 = 1.0e8
    # -> 1.0e8 / 1e11 = 1.0 ms compute; bytes 4·(1e6 + 8·2000) = 4.064e6 -> 0.4064 ms
    op = gemm_op(8, 1000, 1000)
    assert effective_flops(op, _hw(42).achievable) == pytest.approx(1.0e8)
    c = op_cost(op, FP32, Ceilings.of(_hw(42), "fp32", "achievable"))
    assert float(c.time_s) == pytest.approx(1.0e-3)
    # efficiency M / (M + M½) = 8/50: 1.6e7 FLOPs at 0.16 · 1e11
    assert float(c.compute_s) == pytest.approx(1.6e7 / (0.16 * 1e11))


def test_gemv_and_datasheet_are_untouched():
    gemv = gemm_op(1, 1000, 1000)  # M = 1: a gemv streams its weights, no packing term
    assert effective_flops(gemv, _hw(42).achievable) == gemv.flops
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
    flops = float(op.flops)
    moved = float(op.weight_elems + op.act_elems + op.kv_read_elems + op.kv_write_elems) * 4
    return Point(
        family=family,
        kernel=kernel,
        name=f"{family} {shape}",
        dtype="fp32",
        shape=shape,
        flops=flops,
        bytes=moved,
        timing=_timing(s),
    )


def _results(points: list[Point]) -> Results:
    dev = DeviceInfo(
        kind="cpu",
        name="toy cpu",
        caches_bytes={"L3": 1024},
        datasheet_peak_flops_per_s={"fp32": 2e11},
        native_dtypes=("fp32",),
    )
    env = Environment(
        device=dev,
        torch_version="x",
        python_version="x",
        threads=1,
        started_at="t0",
        finished_at="t1",
    )
    return Results(suite="ci", complete=True, environment=env, points=tuple(points))


def _calibration_points() -> list[Point]:
    """Peak GEMM 1000³ in 20 ms -> 1e11 FLOP/s; read of 4e7 bytes in 4 ms -> 1e10 B/s;
    tiny read of 1024 elems (4096 B = 0.41 µs at 1e10) in 5.41 µs -> 5 µs overhead;
    gemm_small M=8 N=K=1000 in 1.005 ms -> ((1.005 - 0.005) ms · 1e11 - 1.6e7) / 2e6 = 42."""
    return [
        _point("gemm_peak", gemm_op(1000, 1000, 1000), "gemm", dict(M=1000, N=1000, K=1000), 0.02),
        _point("bandwidth", stream_op("read", 10_000_000), "read", dict(elems=10_000_000), 4e-3),
        _point("bandwidth", stream_op("read", 1024), "read", dict(elems=1024), 5.4096e-6),
        _point("gemm_small", gemm_op(8, 1000, 1000), "gemm", dict(M=8, N=1000, K=1000), 1.005e-3),
    ]


def test_calibration_recovers_hand_values():
    a = achieved(_results(_calibration_points()))
    assert a.matmul_flops_per_s["fp32"] == pytest.approx(1e11)
    assert a.bandwidth_bytes_per_s == pytest.approx(1e10)
    assert a.terms["kernel_overhead_us"] == pytest.approx(5)
    assert a.terms["matmul_half_rows"] == pytest.approx(42)


def test_half_rows_is_zero_for_a_memory_bound_small_gemm():
    # same GEMM at 0.41 ms: under its 0.4064 ms memory time + 5 µs overhead -> no shortfall
    p = _point("gemm_small", gemm_op(8, 1000, 1000), "gemm", dict(M=8, N=1000, K=1000), 0.41e-3)
    assert half_rows([p], {"fp32": 1e11}, 1e10, 5e-6) == 0.0


@pytest.mark.parametrize(
    "error,passes",
    [
        (0.0, True),
        (0.9 * BANDS["gemm_sweep"], True),
        (-0.9 * BANDS["gemm_sweep"], True),
        (1.1 * BANDS["gemm_sweep"], False),
        (-1.1 * BANDS["gemm_sweep"], False),
    ],
)
def test_validate_gate_on_synthetic_results(error, passes):
    # M=16 N=K=1000 on the toy machine, M½=42, 5 µs overhead:
    # (3.2e7 + 8.4e7) / 1e11 = 1.16 ms + 5 µs = 1.165 ms predicted; measured set so that
    # (predicted - measured) / measured = error
    predicted = 1.165e-3
    pts = _calibration_points() + [
        _point(
            "gemm_sweep",
            gemm_op(16, 1000, 1000),
            "gemm",
            dict(M=16, N=1000, K=1000),
            predicted / (1 + error),
        )
    ]
    v = validate(_results(pts), _hw(42, 5))
    row = v.rows[-1]
    assert row.predicted_s == pytest.approx(predicted)
    assert row.error == pytest.approx(error)
    assert v.passed is passes and row.passed is passes
    summary = {s.family: s for s in v.summaries()}["gemm_sweep"]
    assert summary.failures == (0 if passes else 1)
    assert all(r.passed for r in v.rows[:-1])  # the calibration points sit on their ceilings


def _hw_terms(
    memory: float = 1.0, compute: float = 1.0, row_ns: float = 0.0, gemv_fraction: float = 1.0
) -> HardwareSpec:
    """The toy machine with attention memory/compute fractions and a gemv row cost and
    weight-stream fraction."""
    return HardwareSpec(
        name="toy",
        display_name="toy",
        vendor="none",
        kind="cpu",
        memory_bytes=2**30,
        memory_source="test",
        memory_bandwidth_gb_per_s=10,
        dense_peak_tflops={"fp32": 0.1},
        achievable=Achievable(
            matmul_fraction={"fp32": 1.0},
            memory_bandwidth_fraction=1.0,
            attention_memory_fraction=memory,
            attention_compute_fraction=compute,
            gemv_row_ns=row_ns,
            gemv_memory_fraction=gemv_fraction,
            source="test",
        ),
        source="test",
    )


def test_attention_fractions_scale_their_own_ceiling_of_attention_only():
    hw = Ceilings.of(_hw_terms(memory=0.4, compute=0.5), "fp32", "achievable")
    # decode B=1 S=999 N=K=1 H=100: KV read 1·1000·2·1·100 = 2e5, write 1·1·2·100 = 200,
    # Q+O 200 elems -> 4·200400 = 801600 B at 10 GB/s = 80.16 µs; memory fraction 0.4: 200.4 µs
    decode = op_cost(attention_op(1, 1, 999, 1, 1, 100), FP32, hw)
    assert float(decode.memory_s) == pytest.approx(801600 / 1e10 / 0.4)
    # compute: 4·1000 pairs·100 = 4e5 FLOPs at compute fraction 0.5 · 1e11 = 8 µs
    assert float(decode.compute_s) == pytest.approx(4e5 / (0.5 * 1e11))
    # causal prefill T=999 S=0: 999·1000/2 = 499500 pairs -> 4·499500·100 = 1.998e8 FLOPs at
    # 0.5 · 1e11 = 3.996 ms; bytes Q+O 2·999·100 + KV read 2·999·100 + write 2·999·100 =
    # 599400 elems · 4 = 2.3976e6 B at 0.4 · 10 GB/s = 0.5994 ms -> compute-bound, 3.996 ms
    prefill = op_cost(attention_op(1, 999, 0, 1, 1, 100), FP32, hw)
    assert float(prefill.compute_s) == pytest.approx(3.996e-3)
    assert float(prefill.memory_s) == pytest.approx(0.5994e-3)
    assert float(prefill.time_s) == pytest.approx(3.996e-3)
    # matmuls are untouched: M=1 N=K=1000 4·1_002_000 B at 10 GB/s; M=1000 2e9 FLOPs at 1e11
    assert float(op_cost(gemm_op(1, 1000, 1000), FP32, hw).memory_s) == pytest.approx(
        4 * 1_002_000 / 1e10
    )
    assert float(op_cost(gemm_op(1000, 1000, 1000), FP32, hw).compute_s) == pytest.approx(
        2e9 / 1e11
    )
    # the datasheet ceiling keeps the plain roofline
    sheet = op_cost(
        attention_op(1, 999, 0, 1, 1, 100),
        FP32,
        Ceilings.of(_hw_terms(memory=0.4, compute=0.5), "fp32", "datasheet"),
    )
    assert float(sheet.compute_s) == pytest.approx(1.998e8 / 1e11)
    assert float(sheet.memory_s) == pytest.approx(2.3976e6 / 1e10)


def test_catalog_specs_keep_attention_on_the_roofline():
    hw = _hw()  # an achievable block without the attention terms
    a = hw.achievable
    assert a.attention_memory_fraction == 1 and a.attention_compute_fraction == 1


def test_gemv_row_cost_by_hand():
    # M=1 N=K=1000: 4·(1e6 + 2000) B at 10 GB/s = 400.8 µs, + 1000 rows · 100 ns = 100 µs
    c = op_cost(
        gemm_op(1, 1000, 1000), FP32, Ceilings.of(_hw_terms(row_ns=100), "fp32", "achievable")
    )
    assert float(c.memory_s) == pytest.approx(400.8e-6 + 100e-6)
    assert float(gemv_rows_s(gemm_op(1, 1000, 1000), 100e-9)) == pytest.approx(100e-6)
    # M=8 is a GEMM (charged through M½), no row cost
    assert gemv_rows_s(gemm_op(8, 1000, 1000), 100e-9) == 0


def test_gemv_weight_stream_fraction_by_hand():
    """M=1 N=K=1000 at a weight-stream fraction of 0.5 and 100 ns a row: the 4e6 weight bytes
    take 400 µs at 10 GB/s, 800 µs at half of it; the 8,000 activation bytes stay at the
    ceiling (0.8 µs); + 1000 rows · 100 ns = 100 µs -> 900.8 µs. A GEMM of M = 8 streams at
    the ceiling: 4·(1e6 + 8000 + 8000) B = 406.4 µs."""
    hw = Ceilings.of(_hw_terms(row_ns=100, gemv_fraction=0.5), "fp32", "achievable")
    assert float(op_cost(gemm_op(1, 1000, 1000), FP32, hw).memory_s) == pytest.approx(900.8e-6)
    assert float(op_cost(gemm_op(8, 1000, 1000), FP32, hw).memory_s) == pytest.approx(406.4e-6)
    # on the datasheet ceiling the gemv is the plain roofline, 4·1_002_000 B at 10 GB/s
    sheet = Ceilings.of(_hw_terms(row_ns=100, gemv_fraction=0.5), "fp32", "datasheet")
    assert float(op_cost(gemm_op(1, 1000, 1000), FP32, sheet).memory_s) == pytest.approx(400.8e-6)


def test_calibration_separates_gemv_row_cost_from_its_weight_stream():
    """Two gemvs of one machine (bandwidth 1e10 B/s, 5 µs overhead: `_calibration_points`)
    whose rows cost 50 ns and whose weights stream at half the bandwidth:
    N=1000 K=1000: 5 + 0.8 activations + 400·2 weights + 50 = 855.8 µs;
    N=1000 K=4000: 4·(4e6 + 5000) B: 1600·2 weights + 2 activations + 50 + 5 = 3257 µs.
    The same rows at one length could be either term: the row cost alone, as before."""
    gemvs = [
        _point("gemv_small", gemm_op(1, 1000, 1000), "gemm", dict(M=1, N=1000, K=1000), 855.8e-6),
        _point("gemm_decode", gemm_op(1, 1000, 4000), "gemm", dict(M=1, N=1000, K=4000), 3257e-6),
    ]
    a = achieved(_results(_calibration_points() + gemvs))
    assert a.terms["gemv_row_ns"] == pytest.approx(50)
    assert a.terms["gemv_memory_fraction"] == pytest.approx(0.5)
    one = achieved(_results(_calibration_points() + gemvs[:1]))
    # (855.8 - 5 - 400.8) µs over 1000 rows = 450 ns a row, fraction 1
    assert one.terms["gemv_row_ns"] == pytest.approx(450)
    assert one.terms["gemv_memory_fraction"] == 1


def test_eager_launches_of_a_llama_decode_step():
    # tiny-llama-30m, 6 layers, RMSNorm, RoPE: norms 13·6 + 12 residual adds = 90;
    # qkv 6·(1 + 10 RoPE) = 66; attention 6·3 = 18; out, up, down 6 each; act 6·2 = 12;
    # embedding 1, lm_head 1 -> 206
    ops = operators(load_model("tiny-llama-30m"), Step(1, 1, 128))
    assert {o.name: o.launches for o in ops} == {
        "embedding": 1,
        "attention/qkv": 66,
        "attention/scores+av": 18,
        "attention/out": 6,
        "mlp/up": 6,
        "mlp/act": 12,
        "mlp/down": 6,
        "norms+residual": 90,
        "lm_head": 1,
    }
    rows = {o.name: o.weight_rows for o in ops}
    assert rows["attention/qkv"] == 6 * (512 + 2 * 256) and rows["lm_head"] == 8192
    assert rows["mlp/up"] == 6 * 2 * 1536 and rows["mlp/down"] == 6 * 512


def _attention_calibration_points() -> list[Point]:
    """gemv_small M=1 N=K=1000 in 5 µs + 400.8 µs + 1000 · 100 ns = 505.8 µs -> 100 ns per row;
    decode attention_small B=1 S=999 N=K=1 H=100: memory roofline 801600 B / 1e10 = 80.16 µs,
    measured 80.16 / 0.4 + 3 launches · 5 µs = 215.4 µs -> memory fraction 0.4;
    causal prefill_attention_small B=1 T=999 S=0 N=K=1 H=100: compute roofline
    1.998e8 / 1e11 = 1.998 ms, measured 1.998 / 0.5 + 3 · 5 µs = 4.011 ms -> compute fraction
    0.5 (its memory roofline, 0.24 ms, plays no part)."""
    return [
        _point("gemv_small", gemm_op(1, 1000, 1000), "gemm", dict(M=1, N=1000, K=1000), 505.8e-6),
        _point(
            "attention_small",
            attention_op(1, 1, 999, 1, 1, 100),
            "sdpa",
            dict(B=1, T=1, S=999, N=1, K=1, H=100),
            215.4e-6,
        ),
        _point(
            "prefill_attention_small",
            attention_op(1, 999, 0, 1, 1, 100),
            "sdpa",
            dict(B=1, T=999, S=0, N=1, K=1, H=100),
            4.011e-3,
        ),
    ]


def test_calibration_of_row_cost_and_attention_fractions():
    a = achieved(_results(_calibration_points() + _attention_calibration_points()))
    assert a.terms["gemv_row_ns"] == pytest.approx(100)
    assert a.terms["attention_memory_fraction"] == pytest.approx(0.4)
    assert a.terms["attention_compute_fraction"] == pytest.approx(0.5)
    # none of these points: the terms stay off
    plain = achieved(_results(_calibration_points()))
    assert plain.terms["gemv_row_ns"] == 0
    assert plain.terms["gemv_memory_fraction"] == 1
    assert plain.terms["attention_memory_fraction"] == 1
    assert plain.terms["attention_compute_fraction"] == 1


def test_calibrated_spec_predicts_a_held_out_prefill_attention():
    spec = calibrated_spec(
        _results(_calibration_points() + _attention_calibration_points()), "toy.json"
    )
    assert spec.achievable is not None
    assert spec.achievable.attention_memory_fraction == pytest.approx(0.4)
    assert spec.achievable.attention_compute_fraction == pytest.approx(0.5)
    # prefill T=499 (not the calibration shape): 499·500/2 = 124750 pairs · 4 · 100 =
    # 4.99e7 FLOPs at 0.5 · 1e11 = 998 µs (memory 6·499·100·4 B = 1.1976e6 B at 0.4 · 1e10 =
    # 299.4 µs) + 3 launches · 5 µs = 1.013 ms; measured 1.013 ms -> error 0
    held_out = _point(
        "prefill_attention",
        attention_op(1, 499, 0, 1, 1, 100),
        "sdpa",
        dict(B=1, T=499, S=0, N=1, K=1, H=100),
        1.013e-3,
    )
    v = validate(
        _results(_calibration_points() + _attention_calibration_points() + [held_out]), spec
    )
    assert v.rows[-1].predicted_s == pytest.approx(1.013e-3)
    assert v.passed
    assert "prefill_attention_small" in PROTOCOL and "attention_small" in PROTOCOL


def test_median_of_runs_takes_each_points_median_run():
    from pathlib import Path

    from roofline.measure.results import load_results, median_of_runs

    committed = Path(__file__).parent.parent / "docs" / "measurements" / "cpu-ci.json"

    def run(times_s: dict[str, float]):
        base = load_results(committed)
        pts = tuple(
            p.model_copy(
                update={
                    "timing": Timing(
                        median_s=times_s[p.name],
                        p20_s=times_s[p.name],
                        p80_s=times_s[p.name],
                        min_s=times_s[p.name],
                        repeats=1,
                        method="perf_counter",
                    )
                }
            )
            for p in base.points
            if p.name in times_s
        )
        return base.model_copy(update={"points": pts})

    names = [p.name for p in load_results(committed).points][:2]
    a, b = names
    runs = [run({a: 3.0, b: 1.0}), run({a: 1.0, b: 5.0}), run({a: 2.0, b: 4.0})]
    combined = {p.name: p.timing.median_s for p in median_of_runs(runs).points}
    # a: runs give 3, 1, 2 -> median 2; b: 1, 5, 4 -> median 4 (not an average: 3.33)
    assert combined == {a: 2.0, b: 4.0}
