"""Attention surfaces: an engine's measured decode and prefill attention (aiconfigurator-core
0.12.0 tables, roofline/data/surfaces/{decode,prefill}_attention.csv) as efficiency against the
device's datasheet bandwidth (decode) or peak (prefill), by batch, work per sequence and the
heads' N·H, in place of the device's attention fractions."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest

from roofline.calc.cost import step_cost
from roofline.calc.parallel import parallel_step_cost
from roofline.calc.placement import Parallel
from roofline.calc.stack import Stack
from roofline.serve.stepcost import mixed_step_cost
from roofline.spec.catalog import load_engine, load_hardware, load_model
from roofline.spec.operators import Step
from roofline.spec.precision import Precision
from roofline.spec.surfaces import FRAMEWORKS, attention_surface, attention_work

SAMPLE = Path(__file__).parent / "fixtures" / "attention_surface_sample.csv"
ENGINE_OF = {fw: eng for eng, fw in FRAMEWORKS.items()}
#: the hardware spec whose `surface_system` each table's system is
DEVICE_OF = {"h100_sxm": "h100-sxm", "h200_sxm": "h200", "a100_sxm": "a100-sxm-80gb",
             "b200_sxm": "b200"}  # fmt: skip
BF16 = Precision("bf16", "bf16", "bf16")


def _sample() -> list[dict[str, str]]:
    with SAMPLE.open(newline="") as f:
        return list(csv.DictReader(ln for ln in f if not ln.startswith("#")))


def _surface(phase: str, system: str, engine: str, dtype: str = "bf16", kv: str = "bf16"):
    hw = load_hardware(DEVICE_OF[system])
    roof = hw.memory_bandwidth_bytes_per_s if phase == "decode" else hw.peak_flops_per_s(dtype)
    return attention_surface(system, engine, phase, dtype, kv, roof)


def test_the_surface_reproduces_the_kept_source_points() -> None:
    """Each raw point of the sample (a fixed stride through every phase, system, engine and KV
    dtype, before the medians and the rounding to 4 digits), costed from its own shape: B
    sequences of L tokens at (N, K, H) heads per GPU. Points of a kernel the engine's surface
    does not read (SGLang's flashinfer on B200, beside trtllm_mha) are left out."""
    errors: dict[str, list[float]] = {"decode": [], "prefill": []}
    for r in _sample():
        phase = "decode" if r["family"] == "decode_attention" else "prefill"
        s = _surface(phase, r["system"], ENGINE_OF[r["framework"]], r["dtype"], r["kv_dtype"])
        assert s is not None, r
        if s.implementation != r["implementation"]:
            continue
        N, K, H, B, L = (int(r[c]) for c in ("num_heads", "num_kv_heads", "head_dim", "batch",
                                              "length"))  # fmt: skip
        kvb = 1.0 if r["kv_dtype"] == "fp8" else 2.0
        work = attention_work(phase, B, L, N, K, H, kvb)
        t = float(s.time_s(work, B, N * H))
        errors[phase].append(t / (float(r["latency_us"]) * 1e-6) - 1)
    assert len(errors["decode"]) > 400 and len(errors["prefill"]) > 300
    for phase, e in errors.items():
        assert float(np.median(np.abs(e))) < 0.05, phase
        assert float(np.median(e)) == pytest.approx(0.0, abs=0.02), phase  # no direction


def test_a_decode_step_costs_the_measured_latency_per_layer() -> None:
    """Llama-3.1-8B (N = 32, K = 8, H = 128, 32 layers) decoding one sequence over 1,023 cached
    tokens on an H100 under vLLM: each layer's attention reads the cache of L = 1,024 tokens,
    exactly the measured point (B = 1, kv_tokens = 1,024) of vLLM 0.24.0's FA3 table, 13.58 us.
    Bytes per layer = Q + O 2·4096·2 = 16,384 + K,V read 1024·2·8·128·2 = 4,194,304 + the new
    token's K,V 2·8·128·2 = 4,096: 4,214,784 B (`attention_work`); the surface's efficiency
    there is 4,214,784 / (13.58e-6 s · 3.35e12 B/s) = 0.0926, so the op's memory time is
    32 · 13.58 us = 434.56 us, and its fixed time is its 3 launches per layer at the device's
    1.26 us each, 32 · 3 · 1.26 = 120.96 us: no engine `decode_fixed_us` on top (the table's
    latency holds it)."""
    m, hw, eng = load_model("llama-3.1-8b"), load_hardware("h100-sxm"), load_engine("vllm")
    c = step_cost(m, hw, Step(1, 1, 1023), BF16, engine=eng)
    att = next(o for o in c.ops if o.name == "attention/scores+av")
    assert float(att.act_bytes + att.kv_bytes) == 32 * 4_214_784
    assert float(att.memory_s) == pytest.approx(32 * 13.58e-6, rel=1e-9)
    assert att.overhead_s == pytest.approx(32 * 3 * 1.26e-6, rel=1e-9)
    s = c.ceilings.decode_attention
    assert s is not None
    assert float(s.efficiency(1, 4_214_784, 4096)) == pytest.approx(
        4_214_784 / (13.58e-6 * 3.35e12), rel=1e-9
    )


def test_between_measured_points_the_efficiency_is_linear_in_log_work() -> None:
    """At B = 1 between the measured kv_tokens 1,024 and 2,048 log2 efficiency is linear in
    log2 of the bytes per sequence (halfway in log2: the geometric mean of the two); at B = 3,
    between the measured rows B = 2 and 4, linear in log2 B (log2 3 − 1 = 0.585 of the way)."""
    s = _surface("decode", "h100_sxm", "vllm")
    assert s is not None
    w1 = float(attention_work("decode", 1, 1024, 32, 8, 128, 2.0))  # 4,214,784 B
    w2 = float(attention_work("decode", 1, 2048, 32, 8, 128, 2.0))  # 2048·4096 + 20,480
    assert w2 == 2048 * 4096 + 4096 + 16384
    e1, e2 = (float(s.efficiency(1, w, 4096)) for w in (w1, w2))
    mid = math.sqrt(w1 * w2)  # halfway in log2
    assert float(s.efficiency(1, mid, 4096)) == pytest.approx(math.sqrt(e1 * e2), rel=1e-12)
    e_b2, e_b4 = (float(s.efficiency(b, w1, 4096)) for b in (2, 4))
    t = math.log2(3) - 1  # 0.585 of the way from log2 2 = 1 to log2 4 = 2
    assert float(s.efficiency(3, w1, 4096)) == pytest.approx(e_b2 + t * (e_b4 - e_b2))


def test_outside_the_measured_range_the_ends_are_held_and_named() -> None:
    s = _surface("decode", "h100_sxm", "vllm")
    assert s is not None and s.batches == (1, 2048) and s.lengths == (2, 131072)
    w = float(attention_work("decode", 1, 1024, 32, 8, 128, 2.0))
    # a batch beyond the largest measured one reads the largest's row, and more heads
    # (N·H = 8192) than the largest layout (4096) read that layout
    assert float(s.efficiency(4096, w, 4096)) == float(s.efficiency(2048, w, 4096))
    assert float(s.efficiency(1, w, 8192)) == float(s.efficiency(1, w, 4096))
    assert "B 1-2048, 2-131072 KV tokens" in s.label and "held outside" in s.label
    # nothing reads above the datasheet roof
    assert float(np.max(s.efficiency(np.array([1, 64, 2048]), 1e12, 4096))) <= 1.0


def test_the_cache_dtype_picks_the_table_or_keeps_the_fractions() -> None:
    """An fp8 cache reads the fp8-KV table (a different kernel path: at B = 64 over 8k tokens
    the fp8 cache moves half the bytes but is not twice as fast), an int8 or fp32 cache has no
    table and keeps the fractions."""
    m, hw, eng = load_model("llama-3.1-8b"), load_hardware("h100-sxm"), load_engine("vllm")
    step = Step(64, 1, 8192)
    fp8 = step_cost(m, hw, step, Precision("bf16", "bf16", "fp8"), engine=eng).ceilings
    assert fp8.decode_attention is not None and fp8.decode_attention.kv_dtype == "fp8"
    bf = step_cost(m, hw, step, BF16, engine=eng).ceilings
    assert bf.decode_attention is not None and bf.decode_attention.kv_dtype == "bf16"
    for kv in ("int8", "fp32"):
        c = step_cost(m, hw, step, Precision("bf16", "bf16", kv), engine=eng).ceilings
        assert c.decode_attention is None and c.prefill_attention is None, kv


def test_where_no_surface_applies_the_fractions_stay() -> None:
    m, hw, vllm = load_model("llama-3.1-8b"), load_hardware("h100-sxm"), load_engine("vllm")
    step = Step(8, 1, 4096)
    # the datasheet ceiling never reads a table
    ds = step_cost(m, hw, step, BF16, "datasheet", engine=vllm).ceilings
    assert ds.decode_attention is None and ds.prefill_attention is None
    # a release older than the tables', no engine, a device or engine without tables
    for c in (
        step_cost(m, hw, step, BF16, engine=vllm.at("0.11.0")).ceilings,
        step_cost(m, hw, step, BF16).ceilings,
        step_cost(m, load_hardware("l40s"), step, BF16, engine=vllm).ceilings,
        step_cost(m, hw, step, BF16, engine=load_engine("llama.cpp")).ceilings,
    ):
        assert c.decode_attention is None and c.prefill_attention is None
        assert "attention: measured" not in c.source
    old = step_cost(m, hw, step, BF16, engine=vllm.at("0.11.0")).ceilings.source
    assert "attention: the fractions (the measured tables are of vllm 0.24.0, newer than" in old
    # a bidirectional step (a diffusion LM's) is not the prefill table's causal shape
    bi = step_cost(m, hw, Step(8, 512, 0, causal=False), BF16, engine=vllm)
    att = next(o for o in bi.ops if o.name == "attention/scores+av")
    rate = hw.peak_flops_per_s("bf16") * hw.achievable.matmul("bf16")
    frac = hw.achievable.attention_compute_fraction * vllm.attention.prefill_compute_fraction
    assert float(att.compute_s) == pytest.approx(float(att.flops) / (rate * frac))


def test_a_verify_step_reads_the_decode_table_and_never_costs_less() -> None:
    """A speculative verify step (K + 1 = 4 queries per sequence over the same cache) runs in
    the engine's decode kernel: it reads the decode table at its bytes (the cache, and Q, O and
    the new K, V of 4 tokens), so it never costs less than the plain decode step (the surface's
    time per call never falls as its work grows)."""
    m, hw, vllm = load_model("llama-3.1-8b"), load_hardware("h100-sxm"), load_engine("vllm")
    for B, S in ((1, 1000), (8, 4096), (64, 30000)):
        plain = step_cost(m, hw, Step(B, 1, S), BF16, engine=vllm)
        v = step_cost(m, hw, Step(B, 4, S, logits="all"), BF16, engine=vllm)
        a, b = (next(o for o in c.ops if o.name == "attention/scores+av") for c in (plain, v))
        s = v.ceilings.decode_attention
        assert s is not None
        assert float(b.memory_s) == pytest.approx(
            32 * float(s.time_s(float(b.act_bytes + b.kv_bytes) / 32, B, 4096)), rel=1e-12
        )
        assert float(b.time_s) >= float(a.time_s)


def test_a_prefill_costs_its_flops_over_the_measured_rate() -> None:
    """Llama-3.1-8B prefilling 8 prompts of 8,192 tokens on an H100 under vLLM: the measured
    point (B = 8, seq_tokens = 8,192) of the FA3 prefill table, 7,230 us per layer, so the
    attention's compute time is 32 · 7.230 ms = 231.36 ms; the estimate names the origin."""
    m, hw, eng = load_model("llama-3.1-8b"), load_hardware("h100-sxm"), load_engine("vllm")
    c = step_cost(m, hw, Step(8, 8192, 0), BF16, engine=eng)
    att = next(o for o in c.ops if o.name == "attention/scores+av")
    # FLOPs: 8 · 4 · (8192·8193/2) · 32 · 128 per layer
    assert float(att.flops) == 32 * 8 * 4 * (8192 * 8193 / 2) * 32 * 128
    assert float(att.compute_s) == pytest.approx(32 * 7230e-6, rel=1e-9)
    assert (
        "prefill attention: measured, vllm_flash_attn_fa3 bf16 KV on h100_sxm" in c.ceilings.source
    )


def test_the_simulator_reprices_decode_steps_of_mixed_contexts() -> None:
    """A decode step of 3 sequences over 100, 1,000 and 10,000 cached tokens: the simulator's
    attention reads the surface at B = 3 and the batch's mean bytes per sequence, the same as
    `estimate` of 3 sequences over their mean context (3,700 cached tokens, by the
    features, which are sums: 11,103 KV tokens = 3 · 3,701), so the two steps cost the same."""
    m, hw, eng = load_model("llama-3.1-8b"), load_hardware("h100-sxm"), load_engine("vllm")
    stack = Stack.resolve(m, hw, engine=eng, parallel=Parallel(tp=1))
    msc = mixed_step_cost(m, stack)
    S = np.array([100.0, 1000.0, 10000.0])
    sim = msc.step_s(np.ones(3), S)
    est = float(np.asarray(parallel_step_cost(m, stack, Step(3, 1, S.mean())).time_s))
    assert sim == pytest.approx(est, rel=1e-9)


def test_a_tp8_shard_reads_the_layout_of_its_heads_per_gpu() -> None:
    """Llama-3.1-70B (N = 64, K = 8, H = 128, 80 layers) at TP 8 holds N = 8, K = 1 per GPU:
    N·H = 1,024, the table's (8, 1, 128) layout, not the (32, 8, 128) one. Decoding 16
    sequences over 1,023 cached tokens is its measured point (B = 16, kv_tokens = 1,024),
    14.86 us per layer: 80 · 14.86 us = 1,188.8 us of attention memory time per GPU."""
    m, hw, eng = load_model("llama-3.1-70b"), load_hardware("h100-sxm"), load_engine("vllm")
    stack = Stack.resolve(m, hw, engine=eng, parallel=Parallel(tp=8))
    c = parallel_step_cost(m, stack, Step(16, 1, 1023)).compute
    att = next(o for o in c.ops if o.name == "attention/scores+av")
    # bytes per layer: 16 · (1024·2·1·128·2 + 2·1·128·2 + 2·8·128·2) = 16 · 528,896
    assert float(att.act_bytes + att.kv_bytes) == 80 * 16 * 528_896
    assert float(att.memory_s) == pytest.approx(80 * 14.86e-6, rel=1e-9)
