"""Prediction intervals (`roofline.calc.intervals`): split-conformal bands from the published rows'
residuals, pooled up a fixed hierarchy, checked leave-one-source-out; values by hand."""

from __future__ import annotations

import json
import math

import pytest
from conftest import run_cli

from roofline.calc import intervals as iv
from roofline.serve.published import bundled_csv, load_rows, predict_all, residuals


def res(e: float, source: str = "A", metric: str = "tpot_s", engine: str = "vllm", **kw):
    """A residual whose log error is `e`: a TPOT predicted 1 s and measured exp(e) s."""
    fields = dict(gpus=1, batch=1.0, vendor="nvidia") | kw
    return iv.Residual(
        id="x",
        source=source,
        metric=metric,
        engine=engine,
        predicted=1.0,
        published=math.exp(e),
        **fields,
    )


def test_ranks_of_the_split_conformal_interval() -> None:
    # c = 0.8: ⌊(n+1)·0.1⌋ and ⌈(n+1)·0.9⌉; n = 9 is the least that has both
    assert iv._ranks(9, 0.8) == (1, 9)
    assert iv._ranks(8, 0.8) is None  # ⌈9·0.9⌉ = 9 > 8
    assert iv._ranks(20, 0.8) == (2, 19)  # ⌊2.1⌋, ⌈18.9⌉
    assert iv._ranks(19, 0.9) == (1, 19)  # ⌊20·0.05⌋, ⌈20·0.95⌉
    assert iv._ranks(18, 0.9) is None


def test_the_log_error_points_in_the_direction_of_time() -> None:
    # a TPOT predicted 10 ms and measured 12.5 ms: ln(1.25), the prediction optimistic
    t = iv.Residual(
        id="1",
        source="s",
        metric="tpot_s",
        engine="vllm",
        gpus=1,
        batch=1.0,
        vendor="nvidia",
        predicted=0.010,
        published=0.0125,
    )
    assert t.log_error == pytest.approx(math.log(1.25))
    # a rate predicted 125 tok/s and measured 100: the same optimism, the same sign
    r = iv.Residual(
        id="2",
        source="s",
        metric="decode_tokens_per_s",
        engine="vllm",
        gpus=1,
        batch=1.0,
        vendor="nvidia",
        predicted=125.0,
        published=100.0,
    )
    assert r.log_error == pytest.approx(math.log(1.25))
    # the band of a time is [t·low, t·high]; of a rate [r/high, r/low]
    b = iv.Band(0.9, 1.25, 0.8, "", 10)
    assert b.of_time(10.0) == pytest.approx((9.0, 12.5))
    assert b.of_rate(100.0) == pytest.approx((80.0, 100 / 0.9))


def test_a_class_with_enough_rows_gives_its_own_order_statistics() -> None:
    # 20 rows of one class, errors -0.10 ... 0.09: ranks 2 and 19 → -0.09 and 0.08
    ev = iv.Evidence([res((k - 10) / 100) for k in range(20)])
    b = ev.band(("decode", "1 GPU", "nvidia", "vllm", "<=8", "16-bit"), 0.8)
    assert (math.log(b.low), math.log(b.high)) == pytest.approx((-0.09, 0.08))
    assert b.rows == 20
    # errors all above 0 (the model always optimistic): the band still holds the prediction,
    # low = 1, high = exp(0.18) (ranks 2 and 19 of 0.00 ... 0.19)
    up = iv.Evidence([res(k / 100) for k in range(20)]).band(
        ("decode", "1 GPU", "nvidia", "vllm", "<=8", "16-bit"), 0.8
    )
    assert (up.low, math.log(up.high)) == (1.0, pytest.approx(0.18))
    assert "20 decode rows of 1 GPU, nvidia, vllm, batch <=8, 16-bit" in b.basis


def test_a_thin_class_pools_up_widened_by_the_spread_between_classes() -> None:
    # 3 rows at batch 256 (errors 0.5) and 9 at batch 1 (0.00 ... 0.08), all vllm 16-bit on
    # 1 GPU: the batch-256 class is too thin (n = 3 < 9), so (decode, 1 GPU, nvidia, vllm)
    # with all 12 rows is used: ranks ⌊1.3⌋ = 1 and ⌈11.7⌉ = 12, i.e. [0.00, 0.50], centre
    # 0.25, half-width h = 0.25. Its classes one level down (by batch): medians 0.04 (batch
    # <= 8, 9 rows) and 0.5 (batch > 128, 3 rows): τ = |0.5 − 0.04| / √2 = 0.32527 (sample sd
    # of two). z(0.8) = 1.28155: h' = √(0.25² + (1.28155 · 0.32527)²) = √(0.0625 + 0.17377)
    # = 0.48608, band [0.25 − 0.48608, 0.25 + 0.48608] = [−0.23608, 0.73608]
    rows = [res(0.5, batch=256.0) for _ in range(3)] + [res(k / 100) for k in range(9)]
    ev = iv.Evidence(rows)
    b = ev.band(("decode", "1 GPU", "nvidia", "vllm", ">128", "16-bit"), 0.8)
    assert (math.log(b.low), math.log(b.high)) == pytest.approx((-0.23608, 0.73608), abs=2e-5)
    assert b.rows == 12 and "of 1 GPU, nvidia, vllm" in b.basis and "batch" not in b.basis
    assert "τ = 0.33" in b.basis
    # an engine with no rows pools over engines (one class below (decode, 1 GPU, nvidia):
    # vllm alone, so τ falls back to h / z and the width grows by √2)
    other = ev.band(("decode", "1 GPU", "nvidia", "sglang", "<=8", "16-bit"), 0.8)
    assert other.rows == 12 and "sglang there: 0 rows" in other.basis
    assert math.log(other.high) - math.log(other.low) == pytest.approx(0.5 * math.sqrt(2))


@pytest.mark.parametrize("coverage", [0.8, 0.9])
def test_a_class_with_no_rows_is_at_least_as_wide_as_its_parent(coverage: float) -> None:
    """30 rows over two batch classes of (decode, 1 GPU, nvidia, vllm), 15 each; a precision
    class with no rows pools to its parent (batch <= 8, 15 rows; at 90% those are too few,
    n < 19, and it pools to the 30) and never comes out narrower than it."""
    rows = [res((k - 15) / 50, batch=float(1 + k % 2 * 63)) for k in range(30)]
    ev = iv.Evidence(rows)
    key = ("decode", "1 GPU", "nvidia", "vllm", "<=8")
    parent = ev._by[key if coverage == 0.8 else key[:-1]]
    lo, hi = iv._ranks(parent.size, coverage) or (0, 0)
    width = parent[hi - 1] - parent[lo - 1]
    empty = ev.band(("decode", "1 GPU", "nvidia", "vllm", "<=8", "4-bit"), coverage)
    assert math.log(empty.high) - math.log(empty.low) >= width - 1e-12
    assert empty.rows == parent.size == (15 if coverage == 0.8 else 30)


def test_the_classes_of_a_row() -> None:
    assert iv.precision_class("bf16,experts=mxfp4") == "4-bit"  # experts hold most bytes
    assert iv.precision_class("fp8") == "8-bit" and iv.precision_class("q8_0") == "8-bit"
    assert iv.precision_class("unknown") == "16-bit" and iv.precision_class("q4_k_m") == "4-bit"
    assert [iv.batch_class(b) for b in (8, 9, 128, 129)] == ["<=8", "9-128", "9-128", ">128"]
    assert [iv.gpu_class(g) for g in (1, 2, 4, 8)] == ["1 GPU", "2 GPUs", "4+ GPUs", "4+ GPUs"]
    assert iv.source_of("gpustack/gpustack@47277d7 docs/a.md") == "gpustack/gpustack"


def test_no_class_with_enough_rows_gives_the_widest_band() -> None:
    b = iv.Evidence([res(0.1), res(-0.2), res(0.3)]).band(
        ("e2e", "1 GPU", "amd", "x", "<=8", "16-bit")
    )
    assert (math.log(b.low), math.log(b.high)) == pytest.approx((-0.2, 0.3))
    assert "widest" in b.basis


def test_leave_one_source_out_coverage_by_hand() -> None:
    # source A: errors 0.00 ... 0.09 (10 rows); source B: the same ten; source C: one row at
    # 0.5. Without A, the class holds B and C (11 rows: ranks ⌊1.2⌋ = 1, ⌈10.8⌉ = 11, i.e.
    # [0.00, 0.50]): A's 10 rows are inside. Without B, likewise. Without C, the 20 rows of A
    # and B give ranks 2 and 19: [0.00, 0.09], and C's 0.5 is outside. 20 of 21 covered.
    rows = [res(k / 100, "A") for k in range(10)] + [res(k / 100, "B") for k in range(10)]
    rows.append(res(0.5, "C"))
    c = iv.loso_coverage(rows, 0.8)
    assert c.overall == pytest.approx(20 / 21)
    assert c.by_source == {"A": (10, 10), "B": (10, 10), "C": (0, 1)}
    assert not c.within_gate  # 95% > 90%: too wide for an 80% interval


def test_the_bundled_residuals_are_the_current_predictions() -> None:
    """roofline/data/residuals.csv is what the model predicts today for every bundled row;
    after a change to the model, `roofline validate --published --write-residuals
    roofline/data/residuals.csv` refreshes it."""
    now = residuals(predict_all(load_rows(bundled_csv())))
    stored = iv.read_residuals(iv.bundled_path())
    assert [r.id for r in stored] == [r.id for r in now]
    for a, b in zip(stored, now, strict=True):
        assert (a.metric, a.engine, a.gpus, a.batch, a.vendor) == (
            b.metric,
            b.engine,
            b.gpus,
            b.batch,
            b.vendor,
        )
        assert a.predicted == pytest.approx(b.predicted, rel=1e-9), a.id


def test_the_bundled_coverage_is_within_the_gate() -> None:
    c = iv.loso_coverage(iv.bundled().residuals, 0.8)
    assert c.rows >= 300
    assert iv.LOSO_GATE[0] <= c.overall <= iv.LOSO_GATE[1]
    for name in iv.CHECKED_CLASSES:  # every checked class has rows and is reported
        assert c.by_class[name][1] > 0, name


def test_estimate_json_carries_an_interval_per_figure(capsys) -> None:
    code, out, _ = run_cli(capsys, "estimate", "llama-3.1-8b", "--batch", "1,64", "--json")
    assert code == 0
    d = json.loads(out)
    for case in d["cases"]:
        i = case["intervals"]
        assert set(i) == {
            "ttft_s",
            "tpot_s",
            "e2e_s",
            "decode_tokens_per_s",
            "throughput_tokens_per_s",
            "memory_bytes_per_gpu",
        }
        for name, band in i.items():
            assert band["low"] < band["high"] and band["coverage"] == 0.8, name
        # a time and its rate come from one band: low TPOT is high tok/s
        tpot, rate = i["tpot_s"], i["decode_tokens_per_s"]
        assert rate["high"] == pytest.approx(case["batch"] / tpot["low"])
        assert "split-conformal over" in tpot["basis"]
    money = d["economics"]["cases"][0]["intervals"]
    assert "half-widths in quadrature" in money["joules_per_output_token"]["basis"]
    assert "power rows" in money["power_w_per_gpu"]["basis"]
    # --interval 0 drops them, the datasheet ceiling (a bound) has none
    code, out, _ = run_cli(capsys, "estimate", "llama-3.1-8b", "--interval", "0", "--json")
    assert "intervals" not in json.loads(out)["cases"][0]
    code, out, _ = run_cli(capsys, "estimate", "llama-3.1-8b", "--ceiling", "datasheet", "--json")
    assert json.loads(out)["cases"][0]["intervals"] == {}


def test_a_coverage_outside_0_1_is_one_clear_line(capsys) -> None:
    code, _, err = run_cli(capsys, "estimate", "llama-3.1-8b", "--interval", "1.5")
    assert code != 0 and "--interval must be" in err and "Traceback" not in err


def test_serve_percentiles_carry_the_step_time_band(capsys) -> None:
    code, out, _ = run_cli(capsys, "serve", "--requests", "100", "--json")
    assert code == 0
    d = json.loads(out)
    iv_ = d["intervals"]
    # the band of each percentile is one multiplicative band of its quantity's class: the
    # same factor over p50 and p95
    for name in ("ttft_s", "tpot_s", "e2e_s"):
        lo50, lo95 = (
            iv_[name]["p50"]["low"] / d[name]["p50"],
            iv_[name]["p95"]["low"] / d[name]["p95"],
        )
        assert lo50 == pytest.approx(lo95)
        assert iv_[name]["p95"]["low"] < iv_[name]["p95"]["high"]
        assert "too narrow near saturation" in iv_[name]["basis"]
    assert "throughput_tokens_per_s" not in iv_  # the offered load's, below saturation
    code, out, _ = run_cli(capsys, "serve", "--requests", "50", "--interval", "0", "--json")
    assert "intervals" not in json.loads(out)


def test_a_calibrated_spec_uses_its_own_check_residuals() -> None:
    """A spec `calibrate` wrote carries the held-out errors of its own check run; predictions
    on it take their band from those: 20 errors -0.10 … 0.09 give ranks 2 and 19 at 80%,
    a time × exp(-0.09) … exp(0.08) (above the datasheet time, which is far lower)."""
    from roofline.calc.phases import estimate
    from roofline.calc.stack import Stack
    from roofline.spec.catalog import load_hardware, load_model

    hw = load_hardware("h100-sxm").model_copy(
        update={"check_residuals": tuple((k - 10) / 100 for k in range(20))}
    )
    m = load_model("llama-3.1-8b")
    e = estimate(m, Stack.resolve(m, hw), [4], 512, 64)
    c = e.cases[0]
    band = e.case_intervals(c, 0.8)["tpot_s"]
    assert band["low"] == pytest.approx(c.tpot_s * math.exp(-0.09))
    assert band["high"] == pytest.approx(c.tpot_s * math.exp(0.08))
    assert "this machine's `roofline check`" in band["basis"]
    # too few for the coverage: the published rows again
    few = hw.model_copy(update={"check_residuals": (0.1, 0.2)})
    e2 = estimate(m, Stack.resolve(m, few), [4], 512, 64)
    assert "decode rows of" in e2.case_intervals(e2.cases[0], 0.8)["tpot_s"]["basis"]


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

MODELS = ("llama-3.1-8b", "mixtral-8x7b", "gemma-2-9b", "mamba-2.8b", "deepseek-v2-lite")
DEVICES = ("h100-sxm", "a100-sxm-80gb", "mi300x", "l40s")


@settings(max_examples=25, deadline=None)
@given(
    model=st.sampled_from(MODELS),
    device=st.sampled_from(DEVICES),
    batch=st.integers(1, 256),
    engine=st.sampled_from(("vllm", "tensorrt-llm", "llama.cpp", None)),
)
def test_the_interval_holds_the_prediction_and_respects_the_speed_of_light(
    model, device, batch, engine
) -> None:
    """low ≤ central ≤ high for every figure, and a time's low end is never below the
    datasheet roofline's time of the same case (a rate's high end never above its rate)."""
    from roofline.calc.phases import estimate
    from roofline.calc.stack import Stack
    from roofline.spec.catalog import load_engine, load_hardware, load_model

    m, hw = load_model(model), load_hardware(device)
    eng = load_engine(engine) if engine else None
    e = estimate(m, Stack.resolve(m, hw, engine=eng), [batch], 512, 64)
    ds = estimate(m, Stack.resolve(m, hw, ceiling="datasheet"), [batch], 512, 64).cases[0]
    c = e.cases[0]
    for name, band in e.case_intervals(c, 0.8).items():
        v = float(getattr(c, name))
        assert band["low"] <= v * (1 + 1e-12) and v <= band["high"] * (1 + 1e-12), name
        if name in ("ttft_s", "tpot_s", "e2e_s"):
            assert band["low"] >= min(getattr(ds, name), v) * (1 - 1e-12), name
        if name in ("decode_tokens_per_s", "throughput_tokens_per_s"):
            assert band["high"] <= max(getattr(ds, name), v) * (1 + 1e-12), name


def test_speculate_and_diffusion_carry_intervals(capsys) -> None:
    code, out, _ = run_cli(
        capsys, "speculate", "llama-3.1-8b", "--draft", "llama-3.2-1b", "--k", "2", "--json"
    )
    assert code == 0
    case = json.loads(out)["cases"][0]
    for name in ("cycle_s", "target_step_s", "time_per_token_s"):
        b = case["intervals"][name]
        assert b["low"] <= case[name] <= b["high"], name
    assert "speedup" not in case["intervals"]  # a ratio whose errors cancel: not evidenced
    code, out, _ = run_cli(capsys, "diffusion", "--json")
    d = json.loads(out)
    assert d["intervals"]["diffusion_s"]["low"] <= d["diffusion_s"]
    assert "no published diffusion-LM row" in d["intervals"]["diffusion_s"]["basis"]
