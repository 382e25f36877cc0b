"""The achievable and engine layers, term by term, each derived by hand on a small case, and the
datasheet roofline kept as a lower bound under every engine."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.calc.cost import Ceilings, gemm_shape_efficiency, op_cost, step_cost
from roofline.calc.parallel import parallel_step_cost
from roofline.calc.phases import estimate
from roofline.calc.placement import Parallel
from roofline.calc.stack import Stack
from roofline.spec.catalog import engine_catalog, load_engine, load_hardware, load_model
from roofline.spec.engine import EngineSpec
from roofline.spec.hardware import Achievable, HardwareSpec
from roofline.spec.operators import Op, Step
from roofline.spec.precision import Precision


def _hw(**terms) -> HardwareSpec:
    """A toy GPU: 100 TFLOP/s bf16, 1 TB/s, 100 compute units, every fraction 1."""
    return HardwareSpec(
        name="toy",
        display_name="toy",
        vendor="none",
        memory_bytes=80 * 2**30,
        memory_source="test: 80 GiB",
        memory_bandwidth_gb_per_s=1000,
        dense_peak_tflops={"bf16": 100},
        compute_units=100,
        achievable=Achievable(
            matmul_fraction={"bf16": 1.0}, memory_bandwidth_fraction=1.0, source="test", **terms
        ),
        source="test",
    )


def _engine(**fields) -> EngineSpec:
    base = dict(
        name="toy-engine",
        display_name="toy",
        version="0",
        launches="fused",
        cuda_graphs=False,
        host_launch_us=0.0,
        host_step_us=0.0,
        attention=dict(
            kernel="k", decode_memory_fraction=1.0, prefill_compute_fraction=1.0, source="test"
        ),
        all_reduce=dict(kind="ring", latency_us=0.0, source="test"),
        source="test",
    )
    return EngineSpec.model_validate(base | fields)


BF16 = Precision()


# ---- wave quantisation -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "M, N, units, expected",
    [
        # M = 128 rows on 128-row tiles, N = 4096 → 32 tiles on 108 units: one wave, 32 busy
        (128, 4096, 108, 128 * 4096 / (1 * 108 * 128 * 128)),
        # M = 1 still computes a 16-row tile (the smallest MMA): 1/16 of each tile is useful
        (1, 4096, 108, 1 * 4096 / (1 * 108 * 16 * 128)),
        # M = 200 pads to two 128-row tiles; N = 4352 = 34 tiles → 68 tiles, one wave of 132
        (200, 4352, 132, 200 * 4352 / (1 * 132 * 128 * 128)),
        # 133 tiles on 132 units take two waves: half the second wave is idle
        (128, 133 * 128, 132, 128 * 133 * 128 / (2 * 132 * 128 * 128)),
        # a full machine: 8 × 33 = 264 tiles = exactly two waves of 132, nothing wasted
        (1024, 33 * 128, 132, 1.0),
    ],
)
def test_gemm_shape_efficiency_by_hand(M: int, N: int, units: int, expected: float) -> None:
    assert gemm_shape_efficiency(M, N, (128, 128), units) == pytest.approx(expected, rel=1e-12)


def test_tile_prologue_and_epilogue_cost_k0_steps_of_the_k_loop() -> None:
    """M = 1024 on 128-row tiles, N = 33 · 128 on 132 units: 8 · 33 = 264 tiles, two full
    waves; K = 512 with K0 = 512 halves the useful share, K = 4096 keeps 4096 / 4608."""
    full = gemm_shape_efficiency(1024, 33 * 128, (128, 128), 132)
    assert full == pytest.approx(1.0)
    assert gemm_shape_efficiency(1024, 33 * 128, (128, 128), 132, 512, 512) == pytest.approx(0.5)
    assert gemm_shape_efficiency(1024, 33 * 128, (128, 128), 132, 4096, 512) == pytest.approx(
        4096 / 4608
    )


def test_wave_quantisation_slows_the_compute_side_of_a_matmul() -> None:
    """M = 128, N = K = 4096 (one layer): 2·128·4096² FLOPs at 100 TFLOP/s · 32/100 busy."""
    op = Op(
        "mm",
        "matmul",
        flops=2 * 128 * 4096 * 4096,
        weight_elems=4096 * 4096,
        act_elems=128 * 2 * 4096,
        weight_rows=4096,
    )
    plain = op_cost(op, BF16, Ceilings.of(_hw(), "bf16", "achievable"))
    tiled = op_cost(op, BF16, Ceilings.of(_hw(gemm_tile=(128, 128)), "bf16", "achievable"))
    assert plain.compute_s == pytest.approx(2 * 128 * 4096**2 / 100e12)
    assert tiled.compute_s == pytest.approx(2 * 128 * 4096**2 / (100e12 * 32 / 100))
    assert tiled.memory_s == plain.memory_s  # bytes are not tiled


# ---- fixed per-kernel costs ------------------------------------------------------------------
def test_launch_count_times_floor_eager_and_fused() -> None:
    """An elementwise operator in 4 layers, 6 eager kernels per layer (24 launches): eager
    pays 24 × 2 µs, a fusing engine one kernel per instance, 4 × 2 µs."""
    op = Op("norm", "elementwise", flops=0, act_elems=1000, launches=24, instances=4)
    hw = _hw(kernel_overhead_us=2.0)
    eager = op_cost(op, BF16, Ceilings.of(hw, "bf16", "achievable", _engine(launches="eager")))
    fused = op_cost(op, BF16, Ceilings.of(hw, "bf16", "achievable", _engine()))
    assert eager.overhead_s == pytest.approx(24 * 2e-6)
    assert fused.overhead_s == pytest.approx(4 * 2e-6)


def test_gemm_overhead_replaces_the_floor_once_per_gemm() -> None:
    """A projection in 3 layers with RoPE (eager: 1 GEMM + 10 elementwise kernels per layer):
    33 launches at the 2 µs floor, plus (8 − 2) µs more for each of the 3 GEMM kernels."""
    op = Op(
        "qkv",
        "matmul",
        flops=2 * 3 * 64 * 64,
        weight_elems=3 * 64 * 64,
        weight_rows=3 * 64,
        launches=33,
        instances=3,
    )
    c = Ceilings.of(_hw(kernel_overhead_us=2.0, gemm_overhead_us=8.0), "bf16", "achievable")
    assert op_cost(op, BF16, c).overhead_s == pytest.approx(33 * 2e-6 + 3 * (8 - 2) * 1e-6)


def test_engine_extra_kernels_ride_on_attention_layers() -> None:
    """A fused engine with 2 extra kernels per layer (RoPE, KV write): the attention core of
    32 layers launches 32 · (1 + 2) = 96 kernels."""
    op = Op("attention/scores+av", "attention", flops=1, kv_read_elems=1, launches=96, instances=32)
    c = Ceilings.of(
        _hw(kernel_overhead_us=1.0), "bf16", "achievable", _engine(extra_launches_per_layer=2)
    )
    assert op_cost(op, BF16, c).overhead_s == pytest.approx(96 * 1e-6)


def test_decode_attention_fixed_cost_only_in_decode() -> None:
    op = Op("attention/scores+av", "attention", flops=1, kv_read_elems=1, instances=32)
    eng = _engine(
        attention=dict(
            kernel="k",
            decode_memory_fraction=1.0,
            prefill_compute_fraction=1.0,
            decode_fixed_us=12.0,
            source="test",
        )
    )
    c = Ceilings.of(_hw(), "bf16", "achievable", eng)
    assert op_cost(op, BF16, c, decode=True).overhead_s == pytest.approx(32 * 12e-6)
    assert op_cost(op, BF16, c, decode=False).overhead_s == 0


# ---- host ------------------------------------------------------------------------------------
def test_host_launches_bound_a_step_of_tiny_kernels() -> None:
    """tiny-llama-30m decode under an eager engine at 50 µs per launch: the device finishes
    long before the host has launched every kernel, so the step is Σ launches · 50 µs + the
    per-step host time; under CUDA graphs the host launch term vanishes."""
    m, hw = load_model("tiny-llama-30m"), _hw()
    eng = _engine(launches="eager", host_launch_us=50.0, host_step_us=300.0)
    s = step_cost(m, hw, Step(1, 1, 16), BF16, engine=eng)
    launches = sum(o.op.launches for o in s.ops)
    assert s.host_launch_s == pytest.approx(launches * 50e-6)
    assert bool(s.host_bound)
    assert float(s.time_s) == pytest.approx(launches * 50e-6 + 300e-6)
    graphed = step_cost(
        m, hw, Step(1, 1, 16), BF16, engine=eng.model_copy(update={"cuda_graphs": True})
    )
    assert graphed.host_launch_s == 0
    assert float(graphed.time_s) == pytest.approx(float(graphed.device_s) + 300e-6)


def test_breakdown_terms_add_up_to_the_step() -> None:
    m, hw = load_model("llama-2-7b"), load_hardware("a100-sxm-80gb")
    for name in ("hf-transformers", "tensorrt-llm", "vllm"):
        s = step_cost(m, hw, Step(1, 1, 1024), BF16, engine=load_engine(name))
        assert sum(float(v) for v in s.terms_s.values()) == pytest.approx(float(s.time_s))


# ---- engine GEMM kernels ---------------------------------------------------------------------
def test_weight_only_kernel_streams_at_its_fraction() -> None:
    """w4a16 at batch 1 on a Marlin-like kernel reaching 0.5 of the bandwidth: a 4096² int4
    weight (0.5 B per element, no groups) streams in 4096² · 0.5 B / (0.5 · 1 TB/s)."""
    op = Op("mm", "matmul", flops=2 * 4096 * 4096, weight_elems=4096 * 4096, weight_rows=4096)
    eng = _engine(
        matmul={
            "w4a16": dict(kernel="k", memory_fraction=0.5, compute_fraction=0.25, source="test")
        }
    )
    p = Precision(weights="int4", activations="bf16")
    c = op_cost(op, p, Ceilings.of(_hw(), "bf16", "achievable", eng))
    assert c.memory_s == pytest.approx(4096 * 4096 * 0.5 / (0.5 * 1e12))
    assert c.compute_s == pytest.approx(2 * 4096 * 4096 / (0.25 * 100e12))
    # bf16 weights are not weight-only: the same engine runs them at the device's ceilings
    full = op_cost(op, BF16, Ceilings.of(_hw(), "bf16", "achievable", eng))
    assert full.memory_s == pytest.approx(4096 * 4096 * 2 / 1e12)


def test_engine_matmul_widths_are_checked() -> None:
    with pytest.raises(ValueError, match="w<4|8|16>a<8|16>"):
        _engine(
            matmul={
                "int4": dict(kernel="k", memory_fraction=0.5, compute_fraction=0.5, source="test")
            }
        )


# ---- collectives with the engine's all-reduce -----------------------------------------------
def test_tp_all_reduce_uses_the_engine_algorithm_and_residual_format() -> None:
    """Llama-2-7B decode, B = 1, TP 4 on H100 SXM (450 GB/s at 0.82, λ = 1 µs) under a one-shot
    all-reduce of 4 µs per call: 64 calls of (n−1)·M/β + λ + 4 µs, M = D · 2 bytes even with
    fp8 activations (the residual stays bf16)."""
    m, hw = load_model("llama-2-7b"), load_hardware("h100-sxm")
    eng = _engine(all_reduce=dict(kind="one-shot", latency_us=4.0, source="test"))
    p = Precision(weights="fp8", activations="fp8", kv="fp8")
    c = parallel_step_cost(
        m, Stack.resolve(m, hw, p, "achievable", eng, Parallel(tp=4)), Step(1, 1, 100)
    )
    M = 4096 * 2
    each = 3 * M / (0.82 * 450e9) + 1e-6 + 4e-6
    assert float(c.comm_s) == pytest.approx(2 * 32 * each, rel=1e-12)


# ---- every bundled profile -------------------------------------------------------------------
def test_every_engine_profile_loads_with_sources() -> None:
    specs = engine_catalog().load_all()
    assert {"hf-transformers", "gpt-fast", "vllm", "sglang", "tensorrt-llm", "llama.cpp"} <= {
        e.name for e in specs
    }
    for e in specs:
        assert e.source and e.attention.source and e.all_reduce.source, e.name
        assert all(k.source for k in e.matmul.values()), e.name


# ---- the datasheet roofline stays a lower bound ----------------------------------------------
ENGINES = [None, *engine_catalog().names()]


@settings(max_examples=60, deadline=None)
@given(
    model=st.sampled_from(
        ["llama-2-7b", "mixtral-8x7b", "mistral-7b-v0.1", "qwen2.5-7b", "deepseek-v2-lite"]
    ),
    hardware=st.sampled_from(["a100-sxm-80gb", "h100-sxm", "l40s", "rtx-4090", "mi300x"]),
    engine=st.sampled_from(ENGINES),
    batch=st.integers(1, 256),
    context=st.integers(0, 3000),
    new=st.sampled_from([1, 1, 7, 128, 512]),
    weights=st.sampled_from(["bf16", "int8", "int4-g128"]),
)
def test_no_engine_predicts_faster_than_the_datasheet(
    model, hardware, engine, batch, context, new, weights
) -> None:
    m, hw = load_model(model), load_hardware(hardware)
    p = Precision(
        weights=weights,
        activations="bf16" if hw.supports("bf16") else "fp16",
        kv="bf16" if hw.supports("bf16") else "fp16",
    )
    eng = load_engine(engine) if engine else None
    step = Step(batch, new, context)
    fast = float(step_cost(m, hw, step, p, "datasheet").time_s)
    real = float(step_cost(m, hw, step, p, "achievable", engine=eng).time_s)
    assert real >= fast * (1 - 1e-12)


@pytest.mark.parametrize("tp", [2, 8])
def test_tp_with_an_engine_is_never_faster_than_the_datasheet(tp: int) -> None:
    m, hw = load_model("llama-2-70b"), load_hardware("a100-sxm-80gb")
    for name in engine_catalog().names():
        real = estimate(
            m,
            Stack.resolve(m, hw, engine=load_engine(name), parallel=Parallel(tp=tp)),
            [1, 64],
            128,
            64,
        )
        fast = estimate(
            m, Stack.resolve(m, hw, ceiling="datasheet", parallel=Parallel(tp=tp)), [1, 64], 128, 64
        )
        for r, f in zip(real.cases, fast.cases, strict=True):
            assert r.ttft_s >= f.ttft_s and r.tpot_s >= f.tpot_s, name


# ---- the CLI ---------------------------------------------------------------------------------
def test_estimate_names_its_engine(capsys) -> None:
    code, out, _ = run_cli(
        capsys,
        "estimate",
        "llama-2-7b",
        "--engine",
        "trt-llm",
        "--json",
        "--batch",
        "1",
        "--breakdown",
    )
    d = json.loads(out)
    assert code == 0 and d["engine"] == "tensorrt-llm"
    dec = d["breakdown"]["decode"]
    assert dec["engine"] == "tensorrt-llm"
    assert sum(dec["terms"].values()) == pytest.approx(dec["time_s"])
    code, out, _ = run_cli(capsys, "estimate", "llama-2-7b", "--ceiling", "datasheet", "--json")
    assert json.loads(out)["engine"] is None


def test_hf_slower_than_tensorrt_llm_and_the_terms_say_why(capsys) -> None:
    """The seeds' naive deployment against a tuned one: the same kernels' bytes, but eager
    launches the host cannot keep up with."""
    m, hw = load_model("llama-2-7b"), load_hardware("a100-sxm-80gb")
    hf, trt = (
        step_cost(m, hw, Step(1, 1, 1024), BF16, engine=load_engine(n))
        for n in ("hf-transformers", "tensorrt-llm")
    )
    assert float(hf.time_s) > 1.5 * float(trt.time_s)
    assert bool(hf.host_bound) and not bool(trt.host_bound)
    assert float(hf.terms_s["host_exposed_s"]) > 0 == float(trt.terms_s["host_exposed_s"])


def test_unknown_engine_is_one_line(refused) -> None:
    refused(["estimate", "--engine", "vllmm"], "unknown engine 'vllmm'; did you mean")


def test_engines_list_and_show(capsys) -> None:
    code, out, _ = run_cli(capsys, "engines", "list", "--json")
    assert code == 0 and "tensorrt-llm" in {e["name"] for e in json.loads(out)}
    code, out, _ = run_cli(capsys, "engines", "show", "sglang")
    assert code == 0 and json.loads(out)["attention"]["kernel"].startswith("FlashInfer")


def test_serve_names_its_engine(capsys) -> None:
    code, out, _ = run_cli(
        capsys, "serve", "tiny-llama-30m", "--requests", "10", "--engine", "sglang", "--json"
    )
    assert code == 0 and json.loads(out)["engine"] == "sglang"


def test_serve_pure_decode_steps_skip_host_launches_under_graphs() -> None:
    from roofline.serve.stepcost import mixed_step_cost

    m, hw = load_model("llama-2-7b"), load_hardware("a100-sxm-80gb")
    eng = load_engine("vllm")
    c = mixed_step_cost(m, Stack.resolve(m, hw, BF16, "achievable", eng))
    decode = c.step_s(np.ones(4), np.full(4, 100.0))
    # a dense model's decode step costs in the simulator what `estimate` says: graphs replay it
    # without host launches in both
    ref = step_cost(m, hw, Step(4, 1, 100), BF16, engine=eng)
    assert decode == pytest.approx(float(ref.time_s), rel=1e-9)


# ---- first token from a decode step (LMDeploy TurboMind 0.1.0a1) ----------------------------
def test_first_token_from_a_decode_step_adds_one_step_to_ttft() -> None:
    """TTFT = prefill of P - 1 tokens + one decode step over S = P - 1 cached tokens. With 1 s
    of host time per step and a 30M-parameter model on a 100 TFLOP/s, 1 TB/s toy GPU (kernels
    of microseconds), the prefill engine's TTFT is one step, ~1 s, and the decode engine's
    two, ~2 s; TPOT, the steps after the first token, is the same."""
    m, hw, P = load_model("tiny-llama-30m"), _hw(), 128
    slow = dict(host_step_us=1e6)
    prefill = estimate(m, Stack.resolve(m, hw, engine=_engine(**slow)), [1], P, 16).cases[0]
    decoder = _engine(first_token="decode", first_token_source="test", **slow)
    decode_first = estimate(m, Stack.resolve(m, hw, engine=decoder), [1], P, 16).cases[0]
    assert prefill.ttft_s == pytest.approx(1.0, rel=1e-3)
    assert decode_first.ttft_s == pytest.approx(2.0, rel=1e-3)
    assert decode_first.tpot_s == prefill.tpot_s
    e = _engine(first_token="decode", first_token_source="test")
    split = estimate(m, Stack.resolve(m, hw, engine=e), [1], P, 16).cases[0].ttft_s
    pieces = (
        step_cost(m, hw, Step(1, P - 1, 0), engine=e).time_s
        + step_cost(m, hw, Step(1, 1, P - 1), engine=e).time_s
    )
    assert split == pytest.approx(float(pieces), rel=1e-12)
    # a one-token prompt is that decode step alone
    one = estimate(m, Stack.resolve(m, hw, engine=e), [1], 1, 16).cases[0].ttft_s
    assert one == pytest.approx(float(step_cost(m, hw, Step(1, 1, 0), engine=e).time_s))


def test_first_token_decode_needs_a_source() -> None:
    with pytest.raises(ValueError, match="first_token_source"):
        _engine(first_token="decode")


# ---- W8A8: only a GEMM's input is 8-bit -----------------------------------------------------
def test_w8a8_quantises_gemm_inputs_and_keeps_the_residual_16_bit() -> None:
    """One projection, B·T = 4 rows, K = 64 → N = 32: input 4·64 = 256 elements at 1 byte
    (fp8), output 4·32 = 128 at 2 bytes (bf16): 512 B. A norm over the same 4·64 input and
    output (512 elements) moves 16-bit values: 1024 B. In bf16 the GEMM is 384 · 2 = 768 B."""
    from roofline.calc.cost import activation_bytes

    mm = Op("mlp/up", "matmul", flops=2 * 4 * 64 * 32, weight_elems=64 * 32, act_elems=4 * 96,
            weight_rows=32)  # fmt: skip
    norm = Op("norms", "elementwise", flops=0, act_elems=2 * 4 * 64)
    w8a8 = Precision(weights="fp8", activations="fp8", kv="fp8")
    assert activation_bytes(mm, w8a8) == pytest.approx(256 * 1 + 128 * 2)
    assert activation_bytes(norm, w8a8) == pytest.approx(512 * 2)
    assert activation_bytes(mm, BF16) == pytest.approx(384 * 2)
