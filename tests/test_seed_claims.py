"""Seed claims 2-6, 11 (fp16 part), 19 reproduced with the calculator, derived by hand here.

Claim numbers refer to shared/reference/seed-claims.md. Every expected value is computed in
the test from the stated conditions; the calculator is never asked to check itself.
"""

from __future__ import annotations

import numpy as np
import pytest

from roofline.calc import memory
from roofline.calc.cost import step_cost
from roofline.calc.stack import Stack
from roofline.spec.catalog import load_hardware, load_model
from roofline.spec.operators import Step
from roofline.spec.precision import Precision

BF16 = Precision()  # 2 bytes for weights, activations and KV
H100_BW = 3.35e12  # B/s, NVIDIA H100 SXM5 datasheet
H100_BF16 = 989.4e12  # FLOP/s dense


@pytest.fixture(scope="module")
def llama13():
    return load_model("llama-2-13b")


@pytest.fixture(scope="module")
def h100():
    return load_hardware("h100-sxm")


def op(cost, name):
    return next(o for o in cost.ops if o.name == name)


# ---- claim 2: X(B×D)·W(D×F) intensity ≈ B when B ≪ D, F ---------------------------------
@pytest.mark.parametrize("B", [1, 4, 16, 64])
def test_claim2_gemm_intensity_is_batch(B, llama13, h100):
    # mlp/down is X(B×F)·W(F×D): FLOPs 2BFD; bytes 2(BF + FD + BD) at bf16
    D, F = 5120, 13824
    L = 40
    expected = (2 * B * F * D) / (2 * (B * F + F * D + B * D))
    c = op(step_cost(llama13, h100, Step(B, 1, 0), BF16, "datasheet"), "mlp/down")
    assert float(c.flops) == L * 2 * B * F * D
    assert float(c.intensity_flops_per_byte) == pytest.approx(expected, rel=1e-12)
    assert B * 0.98 < float(c.intensity_flops_per_byte) < B  # → B as D, F grow


# ---- claim 3: MLP intensity B·T; attention ≈ 1 in decode, independent of B ---------------
@pytest.mark.parametrize("B", [1, 8, 64, 256])
def test_claim3_decode_attention_intensity_below_one_whatever_B(B, llama13, h100):
    S = 1024
    # per layer, MHA (K = N = 40, H = 128): FLOPs 4·B·(S+1)·N·H; bytes: K,V read for S+1 tokens
    # and written for 1, Q read and O written: 2·B·(2(S+1)NH + 2NH + 2NH)
    NH = 40 * 128
    expected = 4 * B * (S + 1) * NH / (2 * B * (2 * (S + 1) * NH + 2 * NH + 2 * NH))
    c = op(step_cost(llama13, h100, Step(B, 1, S), BF16, "datasheet"), "attention/scores+av")
    assert float(c.intensity_flops_per_byte) == pytest.approx(expected, rel=1e-12)
    assert float(c.intensity_flops_per_byte) < 1


def test_claim3_prefill_intensities(llama13, h100):
    T = 2048
    c = step_cost(llama13, h100, Step(1, T, 0), BF16, "datasheet")
    # MLP: T ≪ D, F does not hold at 2048, but intensity grows with B·T and stays below it
    assert 0.5 * T < float(op(c, "mlp/down").intensity_flops_per_byte) < T
    # Causal prefill attention, MHA: FLOPs 4·NH·T(T+1)/2; bytes 2·(2T·NH write KV + 2T·NH
    # read KV + 2T·NH Q/O) = 12·T·NH → (T+1)/6. The seed's S/2 counts the full (non-causal)
    # score matrix and K,V read once without the cache write; causal masking halves FLOPs.
    NH = 40 * 128
    expected = 4 * NH * T * (T + 1) / 2 / (2 * (2 * T * NH + 2 * T * NH + 2 * T * NH))
    assert float(op(c, "attention/scores+av").intensity_flops_per_byte) == pytest.approx(
        expected, rel=1e-12
    )
    assert expected == pytest.approx((T + 1) / 6)


# ---- claim 4: Llama 2 13B on H100, batch 1, 1024 cached tokens: ≈ 8 ms, ≈ 124 tok/s -------
def decode_bytes_llama13(B: int, S: int, kv_heads: int = 40) -> float:
    """Bytes one decode step of Llama-2-13B moves at bf16, written out by hand."""
    L, D, N, H, F, V = 40, 5120, 40, 128, 13824, 32000
    K = kv_heads
    qkv_w = D * (N + 2 * K) * H
    params_read = (
        B * D  # embedding: only the B gathered rows
        + L * (qkv_w + N * H * D + 3 * D * F)  # attention and MLP matrices
        + (2 * L + 1) * D  # RMSNorm scales
        + D * V  # LM head
    )
    kv = L * B * ((S + 1) * 2 * K * H + 2 * K * H)  # read S+1 tokens' K,V; write 1
    acts = (
        B * D  # embedding output
        + L
        * B
        * (
            (D + (N + 2 * K) * H)
            + 2 * N * H
            + (N * H + D)  # qkv, attn Q/O, out
            + (D + 2 * F)
            + 3 * F
            + (F + D)
        )  # mlp up, act, down
        + (2 * L + 1) * 3 * B * D  # norms + residual
        + B * (D + V)  # LM head
    )
    return 2 * (params_read + kv + acts)


def test_claim4_batch1_decode(llama13, h100):
    S = 1024
    t = float(step_cost(llama13, h100, Step(1, 1, S), BF16, "datasheet").time_s)
    # Every operator is memory-bound at B=1, so the step time is bytes / bandwidth.
    assert t == pytest.approx(decode_bytes_llama13(1, S) / H100_BW, rel=1e-9)
    # The seed's ≈8 ms / ≈124 tok/s: 13,015,449,600 params · 2 B + 838.9 MB KV = 26.87 GB
    # / 3.35 TB/s = 8.02 ms. We read 163.8M fewer embedding weights (only the gathered row),
    # hence 1.2% less.
    seed_s = (13_015_449_600 * 2 + 40 * 1024 * 2 * 5120 * 2) / H100_BW
    assert seed_s == pytest.approx(8.02e-3, abs=0.005e-3)
    assert t == pytest.approx(seed_s, rel=0.015)
    assert 1 / t == pytest.approx(125, rel=0.015)


# ---- claim 5: batch 64 and 256; 256 needs ≈ 240 GB, beyond one H100 ----------------------
@pytest.mark.parametrize(
    "B, seed_gb, seed_ms, seed_tok_s", [(64, 79.72, 23.8, 2689), (256, 240.78, 71.9, 3562)]
)
def test_claim5_large_batches(B, seed_gb, seed_ms, seed_tok_s, llama13, h100):
    S = 1024
    kv_per_seq = 40 * S * 2 * 5120 * 2  # L · S · 2 · N·H · 2 B = 838,860,800 B
    weights = 13_015_864_320 * 2
    mem = memory.weights_bytes(llama13, BF16) + memory.kv_cache_bytes(llama13, BF16, B, S)
    assert mem == weights + B * kv_per_seq
    assert mem / 1e9 == pytest.approx(seed_gb, abs=0.01)  # norms add 0.8 MB to the seed's
    t = float(step_cost(llama13, h100, Step(B, 1, S), BF16, "datasheet").time_s)
    assert t == pytest.approx(decode_bytes_llama13(B, S) / H100_BW, rel=1e-9)  # memory-bound
    assert t * 1e3 == pytest.approx(seed_ms, rel=0.015)
    assert B / t == pytest.approx(seed_tok_s, rel=0.015)
    # One H100 holds 81,559 MiB = 85,520,809,984 B (nvidia-smi), not the 80e9 B a decimal
    # reading of "80 GB" gave (that gave 64 sequences). On the full capacity (datasheet layer,
    # no reserve), a prompt of S = 1024 tokens prefilled in one 8,192-token chunk
    # (8192 · (2·5120 + 3·13824) · 2 B = 847.2 MB: residual and input, and the gated FFN's
    # gate-and-up output beside its activation's) and 32000 · 12 B of fp32 sampling a sequence:
    # floor((85,520,809,984 − 26,031,728,640 − 847,249,408) / (838,860,800 + 384,000)) = 69.
    # The verdict is unchanged: 256 sequences (240.78 GB) are far beyond one H100.
    capacity = 81_559 * 2**20
    chunk = 8192 * (2 * 5120 + 3 * 13824) * 2
    assert chunk == 847_249_408
    per_seq = kv_per_seq + 32000 * 12
    assert (capacity - weights - chunk) // per_seq == 69
    assert (
        memory.max_batch(llama13, Stack.resolve(llama13, h100, BF16, memory_fraction=1.0), S) == 69
    )
    assert weights + 256 * kv_per_seq > capacity
    # with vLLM's default 0.9 of it usable: floor((76,968,728,985.6 − 26.03e9 − 847.2 MB)
    # / 839,244,800) = 59
    assert (
        memory.max_batch(llama13, Stack.resolve(llama13, h100, BF16), S)
        == int((0.9 * capacity - weights - chunk) // per_seq)
        == 59
    )


# ---- claim 6: GQA 1:5 (K = 8) on Llama 2 13B ---------------------------------------------
@pytest.mark.parametrize(
    "B, seed_gb, seed_ms, seed_tok_s", [(64, 36.77, 11.0, 5831), (256, 68.98, 20.6, 12432)]
)
def test_claim6_gqa(B, seed_gb, seed_ms, seed_tok_s, llama13, h100):
    S = 1024
    gqa = llama13.model_copy(update={"kv_heads": 8})
    kv_per_seq = 40 * S * 2 * 8 * 128 * 2  # = 167,772,160 B, 1/5 of MHA
    assert memory.kv_cache_bytes(gqa, BF16, 1, S) == kv_per_seq
    # The seed keeps the MHA weight bytes (only the cache shrinks):
    seed_mem = memory.weights_bytes(llama13, BF16) + memory.kv_cache_bytes(gqa, BF16, B, S)
    assert seed_mem / 1e9 == pytest.approx(seed_gb, abs=0.01)
    assert seed_mem / H100_BW * 1e3 == pytest.approx(seed_ms, rel=0.01)
    # A real K=8 model also has 5x smaller K/V projections: 2·L·D·(N−K)·H fewer weights.
    saved = 2 * 40 * 5120 * (40 - 8) * 128 * 2
    assert memory.weights_bytes(llama13, BF16) - memory.weights_bytes(gqa, BF16) == saved
    t = float(step_cost(gqa, h100, Step(B, 1, S), BF16, "datasheet").time_s)
    assert t == pytest.approx(decode_bytes_llama13(B, S, kv_heads=8) / H100_BW, rel=1e-9)
    assert t < seed_ms * 1e-3 and B / t > seed_tok_s
    # and B = 256 fits on one H100 (usable 0.9 · 85.52 GB = 76.97 GB > 68.98 GB + 0.6 GB of
    # activations), where MHA stopped at 59
    assert memory.max_batch(gqa, Stack.resolve(gqa, h100, BF16), S) >= 256


# ---- claim 11 (fp16 part): 7B fp16 = 13.48 GB, 6.74 ms floor on 2 TB/s -----------------------
def test_claim11_fp16_floor():
    m = load_model("llama-2-7b")
    w = memory.weights_bytes(m, Precision.uniform("fp16"))
    assert w == 6_738_415_616 * 2  # published count incl. norms; the seed's 6,738,149,376 excl.
    assert w / 1e9 == pytest.approx(13.48, abs=0.005)
    assert w / 2.0e12 * 1e3 == pytest.approx(6.74, abs=0.005)


# ---- claim 19: throughput gains plateau as B grows ---------------------------------------
def test_claim19_throughput_plateau(llama13, h100):
    S = 1024
    B = np.array([1, 16, 64, 256, 1024, 8192])
    tok_s = B / step_cost(llama13, h100, Step(B, 1, S), BF16, "datasheet").time_s
    assert np.all(np.diff(tok_s) > 0)
    # As B → ∞ each sequence costs its own KV read plus its share of matmul FLOPs (the
    # matmuls turn compute-bound): tok/s → 1 / (KV bytes / BW + 2 · matmul params / peak).
    kv_seq = (S + 2) * 40 * 2 * 5120 * 2
    matmul_params = 13_015_864_320 - 32000 * 5120 - 81 * 5120  # no embedding, no norms
    limit = 1 / (kv_seq / H100_BW + 2 * matmul_params / H100_BF16)
    assert tok_s[-1] == pytest.approx(limit, rel=0.02)  # activations/weights: the last 1%
    assert tok_s[-1] < H100_BW / kv_seq
    gains = tok_s[1:] / tok_s[:-1]
    assert gains[-1] < gains[2] < gains[0]


# ---- claim 17: prefill is O(n²); doubling the prompt multiplies TTFT by 2…4 ---------------
def test_claim17_prefill_doubling_is_between_two_and_four():
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    # Llama-3.1-8B: L 32, D 4096, N 32, K 8, H 128, F 14336, V 128256. At P ≥ 4k the layer
    # matmuls and attention are compute-bound: FLOPs 2·P·(layer params) + 4·L·N·H·P(P+1)/2
    # (causal scores and ·V), linear + quadratic in P. The elementwise ops (SiLU·mul reads 2F
    # writes F per token; each of 2L+1 norms with its residual moves 3·D per token), the
    # embedding gather (P rows in, P out) and the last position's LM head (D·V weights) are
    # memory-bound at 2 bytes per element.
    L, D, N, K, H, F, V = 32, 4096, 32, 8, 128, 14336, 128256
    layer_params = D * (N + 2 * K) * H + N * H * D + 3 * D * F

    def ttft_s(P: int) -> float:
        compute = 2 * P * L * layer_params + 4 * L * N * H * P * (P + 1) / 2
        memory = 2 * (L * P * 3 * F + (2 * L + 1) * 3 * P * D + 2 * P * D + D * V)
        return compute / H100_BF16 + memory / H100_BW

    for P in (4096, 16384, 32768):
        t1 = float(step_cost(m, hw, Step(1, P, 0), BF16, "datasheet").time_s)
        t2 = float(step_cost(m, hw, Step(1, 2 * P, 0), BF16, "datasheet").time_s)
        assert t1 == pytest.approx(ttft_s(P), rel=0.01)  # LM head's activations etc.: < 1%
        assert 2 < t2 / t1 < 4
        assert t2 / t1 == pytest.approx(ttft_s(2 * P) / ttft_s(P), rel=0.01)
    # the quadratic share grows with P, so the doubling factor rises towards 4
    ratio = [ttft_s(2 * P) / ttft_s(P) for P in (1024, 8192, 65536)]
    assert ratio[0] < ratio[1] < ratio[2] < 4


# ---- claim 10: an 8B target with a 1B draft speeds decoding up about 2× ---------------------
def test_claim10_speculative_decoding_about_two_x():
    from roofline.studies.speculative import Drafter, speculative_cost

    t, d, hw = load_model("llama-3.1-8b"), load_model("llama-3.2-1b"), load_hardware("h100-sxm")
    alpha = 0.8
    best = max(
        (
            speculative_cost(
                t, Drafter(model=d), Stack.resolve(t, hw, ceiling="datasheet"), k, alpha
            )
            for k in range(1, 9)
        ),
        key=lambda c: c.speedup,
    )
    # Leviathan et al. 2023: speed-up = (1 − α^(K+1)) / ((1 − α)(K·c + 1)) with c the draft /
    # target step cost ratio; at batch 1 both steps are memory-bound, so c ≈ the ratio of the
    # bytes each reads: (1.24e9 + its KV) / (8.03e9 + its KV) ≈ 0.16 (bf16, S = 1024).
    c = best.draft_s / best.k / best.target_step_s
    assert 0.13 < c < 0.2
    # verification over K+1 tokens costs about one plain step while memory-bound
    assert best.verify_s == pytest.approx(best.target_step_s, rel=0.05)
    k = best.k
    hand = (1 - alpha ** (k + 1)) / ((1 - alpha) * (k * c + best.verify_s / best.target_step_s))
    assert best.speedup == pytest.approx(hand, rel=1e-9)
    assert 1.8 < best.speedup < 2.6  # the seed's "≈2×"
