"""Tensor/pipeline parallel and replicas: sharded model, collectives, memory per GPU."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.calc.cost import step_cost
from roofline.calc.parallel import Link, all_reduce_s, all_to_all_s, parallel_step_cost, send_recv_s
from roofline.calc.phases import estimate
from roofline.calc.placement import Parallel, memory_per_gpu, min_gpus_to_fit, tp_shard
from roofline.calc.stack import Stack
from roofline.cli import main
from roofline.errors import InvalidInputError
from roofline.spec.catalog import load_hardware, load_model
from roofline.spec.hardware import Interconnect
from roofline.spec.operators import Step
from roofline.spec.precision import Precision

NVLINK = Interconnect(
    kind="nvlink", bandwidth_gb_per_s_per_direction=450, latency_us=1.0, bus_bandwidth_fraction=0.8
)


def test_collective_formulas() -> None:
    """Achievable link: β = 450 GB/s · 0.8 bus fraction, λ = 1 µs per hop, no engine."""
    M = 1e6  # bytes per GPU
    link = Link.of(NVLINK, 8, "achievable")
    beta = 0.8 * 450e9
    assert all_reduce_s(M, 4, link) == pytest.approx(2 * 3 / 4 * M / beta + 2 * 3 * 1e-6)
    assert all_to_all_s(M, 8, link) == pytest.approx(7 / 8 * M / beta + 7 * 1e-6)
    assert send_recv_s(M, link) == pytest.approx(M / beta + 1e-6)
    assert all_reduce_s(M, 1, link) == 0
    # the datasheet link is the speed of light: full bandwidth, no latency
    assert all_reduce_s(M, 4, Link.of(NVLINK, 4)) == pytest.approx(2 * 3 / 4 * M / 450e9)


@pytest.mark.parametrize(
    "algorithm, expected",
    [
        # 8 GPUs, M = 64 KiB, β = 360 GB/s, λ = 1 µs, call = 5 µs
        ("ring", 2 * 7 / 8 * 65536 / 360e9 + 2 * 7 * 1e-6 + 5e-6),
        ("two-shot", 2 * 7 / 8 * 65536 / 360e9 + 2 * 1e-6 + 5e-6),
        ("one-shot", 7 * 65536 / 360e9 + 1e-6 + 5e-6),
    ],
)
def test_all_reduce_algorithms(algorithm: str, expected: float) -> None:
    link = Link(360e9, hop_s=1e-6, call_s=5e-6, algorithm=algorithm)  # type: ignore[arg-type]
    assert all_reduce_s(65536, 8, link) == pytest.approx(expected)


def test_one_shot_falls_back_to_the_ring_for_large_messages() -> None:
    """32 MiB over 8 GPUs: one-shot would move 7·M = 235 MB per GPU, the ring 2·7/8·M."""
    M, link = 32 * 2**20, Link(360e9, hop_s=1e-6, call_s=5e-6, algorithm="one-shot")
    ring = 2 * 7 / 8 * M / 360e9 + 14 * 1e-6 + 5e-6
    assert all_reduce_s(M, 8, link) == pytest.approx(ring)


def test_tp4_shard_of_llama_70b() -> None:
    """N=64, K=8, F=28672, V=128256 over 4 ranks: 16 q heads, 2 kv heads, F 7168, V 32064.
    Weights per rank: 80·(D·(16+2·2)·128 + 16·128·D + 3·D·7168) + 2·32064·D + 161·D."""
    m = load_model("llama-3.1-70b")
    r = tp_shard(m, 4)
    assert (r.heads, r.kv_heads, r.d_ff, r.vocab_size) == (16, 2, 7168, 32064)
    D = 8192
    per_rank = (
        80 * (D * (16 + 2 * 2) * 128 + 16 * 128 * D + 3 * D * 7168)
        + 2 * 32064 * D
        + (80 * 2 + 1) * D
    )
    assert r.total_params == per_rank
    mem = memory_per_gpu(m, Precision(weights="fp8"), Parallel(tp=4), 1, 1024, 1280)
    # fp8 weights with bf16 activations are weight-only: the embedding and LM head shards
    # (2·32064·D) and the norms (161·D) stay bf16, the rest is 1 byte per weight
    ends = 2 * 32064 * D + (80 * 2 + 1) * D
    assert mem.weights_bytes == (per_rank - ends) * 1 + ends * 2
    # a W8A8 fp8 checkpoint keeps the same ends 16-bit (ModelOpt, llm-compressor)
    w8a8 = memory_per_gpu(m, Precision("fp8", "fp8"), Parallel(tp=4), 1, 1024, 1280)
    assert w8a8.weights_bytes == (per_rank - ends) * 1 + ends * 2
    every = memory_per_gpu(
        m, Precision.everywhere("fp8", "fp8", "fp8"), Parallel(tp=4), 1, 1024, 1280
    )
    assert every.weights_bytes == per_rank * 1  # fp8 everywhere: 1 byte per weight
    # KV per GPU: 2·L·(K/4)·H per token at 2 bytes
    assert mem.kv_cache_bytes == 1280 * 2 * 80 * 2 * 128 * 2


def test_tp_larger_than_kv_heads_replicates_them() -> None:
    r = tp_shard(load_model("llama-3.1-70b"), 16)  # 8 kv heads over 16 ranks: 1 each
    assert (r.heads, r.kv_heads) == (4, 1)


def test_tp_step_adds_two_all_reduces_per_layer() -> None:
    m, hw = load_model("llama-3.1-70b"), load_hardware("h100-sxm")
    p, step = Precision(), Step(8, 1, 2048)
    c = parallel_step_cost(m, Stack.resolve(m, hw, p, parallel=Parallel(tp=8)), step)
    rank = step_cost(tp_shard(m, 8), hw, step, p)
    M = 8 * 1 * 8192 * 2  # B·T·D bf16 bytes
    # h100-sxm: 450 GB/s per direction at its 0.82 bus fraction, λ = 1 µs per ring hop
    each = 2 * 7 / 8 * M / (0.82 * 450e9) + 2 * 7 * 1e-6
    assert c.time_s == pytest.approx(rank.time_s + 2 * 80 * each, rel=1e-12)


def test_pp_buys_memory_not_latency() -> None:
    m, hw, p = load_model("llama-3.1-70b"), load_hardware("h100-sxm"), Precision()
    step = Step(1, 1, 1024)
    one = parallel_step_cost(m, Stack.resolve(m, hw, p, parallel=Parallel(tp=4)), step)
    two = parallel_step_cost(m, Stack.resolve(m, hw, p, parallel=Parallel(tp=4, pp=2)), step)
    handoff = 8192 * 2 / (0.82 * 450e9) + 1e-6  # B·T·D bf16 bytes over one link + λ
    assert two.time_s == pytest.approx(one.time_s + handoff, rel=1e-12)
    m1 = memory_per_gpu(m, p, Parallel(tp=4), 1, 1024, 1280)
    m2 = memory_per_gpu(m, p, Parallel(tp=4, pp=2), 1, 1024, 1280)
    D = 8192
    per_layer = D * (16 + 2 * 2) * 128 + 16 * 128 * D + 3 * D * 7168  # one TP-4 rank's layer
    # a stage of 40 layers holds the embedding or the head (V/4·D each), not both; its norms
    # are 40·2 + the final one; bf16 = 2 bytes
    assert m2.weights_bytes == 2 * (40 * per_layer + (40 * 2 + 1) * D + 32064 * D)
    assert m2.kv_cache_bytes == m1.kv_cache_bytes / 2


def test_replicas_multiply_throughput_only() -> None:
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    one = estimate(m, Stack.resolve(m, hw), [4], 512, 64).cases[0]
    three = estimate(m, Stack.resolve(m, hw, parallel=Parallel(replicas=3)), [4], 512, 64).cases[0]
    assert three.tpot_s == one.tpot_s and three.ttft_s == one.ttft_s
    assert three.throughput_tokens_per_s == pytest.approx(3 * one.throughput_tokens_per_s)
    assert three.memory_bytes_per_gpu == one.memory_bytes_per_gpu
    assert three.gpus == 3


@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from(["llama-3.1-8b", "llama-3.1-70b", "llama-2-13b", "qwen2.5-7b"]),
    st.sampled_from([1, 2, 4, 8]),
    st.sampled_from([1, 2, 4, 8]),
)
def test_more_tp_never_more_weight_bytes_per_gpu(name: str, a: int, b: int) -> None:
    m = load_model(name)
    lo, hi = sorted((a, b))
    try:
        w_hi = memory_per_gpu(m, Precision(), Parallel(tp=hi), 1, 16, 16).weights_bytes
    except InvalidInputError:  # a degree that does not split this model is refused elsewhere
        return
    assert w_hi <= memory_per_gpu(m, Precision(), Parallel(tp=lo), 1, 16, 16).weights_bytes


def test_min_gpus_to_fit() -> None:
    h100 = load_hardware("h100-sxm")
    # 70B bf16 = 141 GB: TP 2 puts 70.6 GB on each 80 GB GPU
    assert min_gpus_to_fit(
        load_model("llama-3.1-70b"), h100, Precision(), 1, 1024, 2048
    ) == Parallel(tp=2)
    # 405B bf16 = 812 GB: TP 8 leaves 101 GB per GPU, so two stages of TP 8
    assert min_gpus_to_fit(
        load_model("llama-3.1-405b"), h100, Precision(), 1, 1024, 2048
    ) == Parallel(tp=8, pp=2)


def test_estimate_json_has_gpus_and_memory_per_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    main(
        [
            "estimate",
            "llama-3.1-70b",
            "--hardware",
            "h100-sxm",
            "--tp",
            "4",
            "--weights",
            "fp8",
            "--kv",
            "fp8",
            "--batch",
            "1,8",
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    for case in out["cases"]:
        assert case["gpus"] == 4
        assert case["memory_bytes_per_gpu"] == pytest.approx(
            case["weights_bytes"] + case["kv_cache_bytes"] + case["activation_bytes"]
        )
        assert case["memory_bytes"] == pytest.approx(4 * case["memory_bytes_per_gpu"])
        assert case["fits"]


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["estimate", "llama-3.1-8b", "--tp", "3"], "does not divide"),
        (["estimate", "llama-3.1-70b", "--tp", "12"], "does not divide"),
        (["estimate", "llama-3.1-8b", "--tp", "0"], "at least 1"),
        (["estimate", "llama-3.1-8b", "--ep", "2"], "no experts"),
        (["estimate", "llama-3.1-8b", "--pp", "64"], "exceeds"),
        (["estimate", "llama-3.1-8b", "--hardware", "m3-max", "--tp", "2"], "no interconnect"),
    ],
)
def test_cli_refuses_bad_parallelism(argv: list[str], needle: str, refused) -> None:
    refused(argv, needle)
