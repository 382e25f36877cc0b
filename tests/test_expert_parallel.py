"""Expert parallelism: E/n routed experts per GPU, data-parallel attention, two all-to-alls
per MoE layer."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.calc import memory
from roofline.calc.cost import step_cost
from roofline.calc.parallel import parallel_step_cost
from roofline.calc.phases import estimate
from roofline.calc.placement import Parallel, memory_per_gpu
from roofline.calc.stack import Stack
from roofline.cli import main
from roofline.errors import InvalidInputError
from roofline.spec.catalog import load_hardware, load_model
from roofline.spec.operators import ExpertShard, Step, busiest_rank_experts
from roofline.spec.precision import Precision

MOE_MODELS = [
    "mixtral-8x7b",
    "mixtral-8x22b",
    "qwen3-30b-a3b",
    "deepseek-v2-lite",
    "deepseek-v3",
    "jamba-v0.1",
    "minimax-text-01",
]


def _op(cost, name: str):
    return next(o for o in cost.ops if o.name == name)


def test_mixtral_ep2_weights_and_kv_per_gpu() -> None:
    """Mixtral-8x7B: L=32, D=4096, N·H=4096, K·H=1024, V=32000, E=8 experts of F=14336,
    gated (3 matrices). EP 2: 4 experts per GPU; attention, routers (D·8), norms, embedding
    and head on both. B=4 sequences over 2 GPUs: 2 each."""
    D = 4096
    layer = D * (4096 + 2 * 1024) + 4096 * D + 4 * 3 * D * 14336 + D * 8
    per_gpu = 32 * layer + (32 * 2 + 1) * D + 2 * 32000 * D
    mem = memory_per_gpu(load_model("mixtral-8x7b"), Precision(), Parallel(ep=2), 4, 1024, 1280)
    assert mem.weights_bytes == 2 * per_gpu  # bf16: 2 bytes per weight
    assert mem.weights_bytes == 2 * 24_154_214_400
    # KV of 2 sequences of 1280 tokens: 2·L·K·H per token, bf16
    assert mem.kv_cache_bytes == 2 * 1280 * 2 * 32 * 1024 * 2


def test_deepseek_v3_ep8_weights_per_gpu() -> None:
    """DeepSeek-V3: 58 MoE layers (61 − 3 dense) of 256 routed experts, gated, D=7168,
    F_expert=2048. EP 8 keeps 32 per GPU, so 58·(256 − 32)·3·7168·2048 weights live on the
    other ranks; fp8 = 1 byte each. The shared expert and routers stay on every GPU."""
    m, p = load_model("deepseek-v3"), Precision(weights="fp8")
    full = memory_per_gpu(m, p, Parallel(), 1, 1024, 1280).weights_bytes
    ep8 = memory_per_gpu(m, p, Parallel(ep=8), 1, 1024, 1280).weights_bytes
    assert full - ep8 == 58 * (256 - 32) * 3 * 7168 * 2048 * 1
    assert full - ep8 == 572_170_174_464


def test_deepseek_v3_ep8_decode_step() -> None:
    """B=64 decode sequences over EP 8 on H100 (NVLink 450 GB/s at 0.82, λ = 1 µs): each GPU runs
    attention for 8 of them; per MoE layer it dispatches and combines 8·k = 64 hidden states
    of D=7168 bf16 values, M = 8·1·8·7168·2 bytes, all-to-all (n−1)/n·M/β + (n−1)·λ, twice
    in each of the 58 MoE layers."""
    m, hw, p = load_model("deepseek-v3"), load_hardware("h100-sxm"), Precision()
    step = Step(64, 1, 2048)
    c = parallel_step_cost(m, Stack.resolve(m, hw, p, parallel=Parallel(ep=8)), step)
    M = 8 * 1 * 8 * 7168 * 2
    each = 7 / 8 * M / (0.82 * 450e9) + 7 * 1e-6  # at the link's 0.82 bus-bandwidth fraction
    assert c.comm_s == pytest.approx(2 * 58 * each, rel=1e-12)
    rank = step_cost(m, hw, Step(8, 1, 2048), p, shard=ExpertShard(8, 64))
    assert c.time_s == pytest.approx(rank.time_s + 2 * 58 * each, rel=1e-12)
    # routed experts on the busiest GPU: of 64·8 = 512 token-expert pairs, each lands on a
    # given GPU w.p. 1/8 (mean 64); the busiest of 8 gets E[max of 8 Binomial(512, 1/8)],
    # 2·3·D·F FLOPs each. It reads the experts the tokens touch among its 32: each w.p.
    # q = 1 − (1 − 8/256)^64 = 0.870, the busiest E[max of 8 Binomial(32, q)].
    experts = _op(c.compute, "moe/experts").op
    per_expert = 3 * 7168 * 2048
    pairs = _expected_max_binomial_by_hand(512, 1 / 8, 8)
    assert 64 * 1.1 < pairs < 64 * 1.3  # ≈ 75: the busiest rank has ~17% more than the mean
    assert experts.flops == pytest.approx(58 * 2 * pairs * per_expert, rel=1e-9)
    q = 1 - (1 - 8 / 256) ** 64
    touched = _expected_max_binomial_by_hand(32, q, 8)
    assert 32 * q < touched <= 32
    assert experts.weight_elems == pytest.approx(58 * touched * per_expert, rel=1e-9)
    # attention runs on the GPU's own 8 sequences
    assert (
        _op(c.compute, "mla/absorbed_scores").op.flops
        == _op(step_cost(m, hw, Step(8, 1, 2048), p), "mla/absorbed_scores").op.flops
    )


def _expected_max_binomial_by_hand(n: int, p: float, r: int) -> float:
    """E[max of r independent Binomial(n, p)] = Σ_{x=0}^{n−1} (1 − F(x)^r), with the CDF
    F(x) = Σ_{i≤x} C(n, i) p^i (1 − p)^(n−i) written out."""
    F = np.cumsum([math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(n + 1)])
    return float(sum(1 - F[x] ** r for x in range(n)))


def test_busiest_rank_at_batch_1_top8_of_256_on_ep8() -> None:
    """One token picks 8 of 256 experts; each of 8 ranks holds 32. The mean is 1 expert per
    rank; the busiest rank runs E[max of 8 Binomial(32, 1/32)] = 2.54 of them, against 2.56
    by simulation (the ranks' counts are not quite independent; docs/architectures.md)."""
    by_hand = _expected_max_binomial_by_hand(32, 1 / 32, 8)
    assert by_hand == pytest.approx(2.544, abs=1e-3)
    assert busiest_rank_experts(256, 8, 1, 8) == pytest.approx(by_hand, rel=1e-12)
    rng = np.random.default_rng(0)
    picks = np.argsort(rng.random((20_000, 256)), axis=1)[:, :8] // 32  # rank of each pick
    counts = np.stack([(picks == j).sum(axis=1) for j in range(8)], axis=1)
    assert by_hand == pytest.approx(counts.max(axis=1).mean(), rel=0.03)
    # without EP there is one rank: the mean, k experts
    assert busiest_rank_experts(256, 8, 1, 1) == pytest.approx(8)


@pytest.mark.parametrize(
    "name, ep", [("mixtral-8x7b", 2), ("qwen3-30b-a3b", 8), ("deepseek-v3", 8)]
)
def test_ep_busiest_rank_does_at_least_its_share(name: str, ep: int) -> None:
    """The busiest of n ranks runs at least 1/n of one GPU's expert work, and its excess over
    the mean shrinks as the batch grows (relative spread of a binomial ∝ 1/√(B·k))."""
    m, hw, p = load_model(name), load_hardware("h100-sxm"), Precision()
    step = Step(np.array([1, 16, 256]), 1, 1024)
    one = _op(step_cost(m, hw, step, p), "moe/experts").op
    rank = _op(
        parallel_step_cost(m, Stack.resolve(m, hw, p, parallel=Parallel(ep=ep)), step).compute,
        "moe/experts",
    ).op
    flops, weights = ep * rank.flops / one.flops, ep * rank.weight_elems / one.weight_elems
    assert np.all(flops >= 1) and np.all(weights >= 1 - 1e-12)
    assert flops[0] > flops[1] > flops[2] and flops[2] < 1.3


def test_ep_with_pp_shards_both() -> None:
    m, p = load_model("mixtral-8x7b"), Precision()
    both = memory_per_gpu(m, p, Parallel(ep=2, pp=2), 2, 1024, 1280)
    ep_only = memory_per_gpu(m, p, Parallel(ep=2), 2, 1024, 1280)
    assert both.kv_cache_bytes == ep_only.kv_cache_bytes / 2  # 16 of 32 layers, 1 sequence
    assert both.weights_bytes < ep_only.weights_bytes


def test_ep_max_batch_counts_every_gpu_of_the_group() -> None:
    m, hw, p = load_model("mixtral-8x7b"), load_hardware("h100-sxm"), Precision()
    e = estimate(m, Stack.resolve(m, hw, p, parallel=Parallel(ep=2)), [1], 1024, 256)
    one = memory_per_gpu(m, p, Parallel(ep=2), 1, 1024, 1280)
    # one GPU: usable 0.9 · 81,559 MiB; its b ≥ 8 sequences share one 8,192-token prefill
    # chunk's activations, and each adds its KV at 1280 tokens and a row of fp32 logits
    usable = 0.9 * 81_559 * 2**20
    chunk = memory.step_activation_bytes(m, p, 8192, 0)
    per_gpu = (usable - one.weights_bytes - chunk) // (one.kv_cache_bytes + m.vocab_size * 4)
    assert per_gpu >= 8
    assert e.max_batch == 2 * per_gpu
    assert memory_per_gpu(m, p, Parallel(ep=2), e.max_batch, 1024, 1280).total_bytes <= usable
    assert memory_per_gpu(m, p, Parallel(ep=2), e.max_batch + 1, 1024, 1280).total_bytes > usable


@settings(max_examples=30, deadline=None)
@given(
    st.sampled_from(MOE_MODELS),
    st.sampled_from([1, 2, 4, 8, 16]),
    st.sampled_from([1, 2, 4, 8, 16]),
    st.integers(1, 64),
)
def test_more_ep_never_more_weight_bytes_per_gpu(name: str, a: int, b: int, batch: int) -> None:
    m = load_model(name)
    lo, hi = sorted((a, b))
    try:
        w_hi = memory_per_gpu(m, Precision(), Parallel(ep=hi), batch, 16, 16)
        w_lo = memory_per_gpu(m, Precision(), Parallel(ep=lo), batch, 16, 16)
    except InvalidInputError:  # a degree that does not divide the experts is refused
        return
    assert w_hi.weights_bytes <= w_lo.weights_bytes
    assert w_hi.total_bytes <= w_lo.total_bytes


def test_cli_ep_json_shows_gpus_and_less_memory(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "mixtral-8x7b", "--hardware", "h100-sxm", "--batch", "1,16", "--json"]
    main(args)  # 93 GB of bf16 weights do not fit one 80 GiB GPU: said, not refused
    one = json.loads(capsys.readouterr().out)
    assert not any(c["fits"] for c in one["cases"]) and one["memory"]["binding"] == "weights"
    main([*args, "--ep", "2"])
    two = json.loads(capsys.readouterr().out)
    assert two["parallel"]["ep"] == 2 and two["parallel"]["gpus"] == 2
    for c1, c2 in zip(one["cases"], two["cases"], strict=True):
        assert c2["gpus"] == 2 and c2["fits"]
        assert c2["memory_bytes_per_gpu"] < c1["memory_bytes_per_gpu"]


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["estimate", "mixtral-8x7b", "--ep", "3"], "does not divide mixtral-8x7b's 8 routed"),
        (["estimate", "mixtral-8x7b", "--ep", "16"], "does not divide"),
        (["estimate", "mixtral-8x7b", "--ep", "2", "--tp", "2"], "with --tp 2"),
        (["estimate", "llama-3.1-8b", "--ep", "2"], "dense model"),
    ],
)
def test_cli_refuses_unmodelled_ep(argv: list[str], needle: str, refused) -> None:
    refused(argv, needle)
