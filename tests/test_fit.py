"""What fits, one definition (`memory.batch_fit`) behind estimate, kv, serve and the API; the
numbers derived by hand here from the specs' dimensions and the H100's 81,559 MiB."""

from __future__ import annotations

import dataclasses
import json

import pytest
from conftest import run_cli

from roofline.calc import memory
from roofline.calc.phases import estimate
from roofline.calc.placement import Parallel
from roofline.calc.stack import Stack
from roofline.serve.policy import POLICIES
from roofline.serve.simulate import kv_capacity_tokens
from roofline.spec.catalog import load_engine, load_hardware, load_model
from roofline.spec.precision import Precision

BF16 = Precision()
H100_BYTES = 81_559 * 2**20  # nvidia-smi memory.total, 'NVIDIA H100 80GB HBM3'
USABLE = 0.9 * H100_BYTES  # vLLM's gpu_memory_utilization default: 76,968,728,985.6 B
# Llama-2-13B: 13,015,864,320 params; L 40, D 5120, N = K 40, H 128, F 13824, V 32000
W13 = 13_015_864_320 * 2
KV13 = 2 * 40 * 40 * 128 * 2  # 819,200 B per token
# a step's live activations per token: residual and input (2D) and the gated FFN's fused
# gate-and-up output (2F) beside the activation's output (F), bf16
HIDDEN13 = (2 * 5120 + 3 * 13824) * 2  # 103,424 B
LOGITS13 = 32000 * 3 * 4  # fp32 logits, softmax and log-softmax while sampling, B per sequence
# the vLLM profile's reservation on an H100: its token budget over its 1,024 sequences
VLLM_SEQS = 1024
# what vLLM (newest range, V1, torch-native sampler) holds at its profile run's peak
# (`memory.vllm_profile_reserve_bytes`): the larger of a layer, n·(3D + 3F/tp)·2 B, and the
# sampler, seqs·D·2 B of sampled hidden states + seqs·V·38 B of logits sorted for top-k/top-p
# (`footprint.VLLM_SAMPLER_PEAK_BYTES`), plus the memory it counts outside torch, 0.06 GiB at
# TP 1 and 0.35 GiB at TP > 1 (`footprint.VLLM_NON_TORCH_TP1_BYTES`, `VLLM_NON_TORCH_TP_BYTES`)
NON_TORCH_TP1 = 0.06 * 2**30  # 64,424,509.44 B
NON_TORCH_TP = 0.35 * 2**30  # 375,809,638.4 B


def test_one_max_batch_across_estimate_kv_and_serve(capsys):
    """Llama-2-13B, bf16, one H100 under vLLM (1,024 sequences), 1024 + 256 tokens, a 2,048-token
    prefill budget, 0.9 usable. vLLM reserves its profile run whatever the batch: a layer of
    2,048 tokens, 2048 · (3 · 5120 + 3 · 13824) · 2 = 232,783,872 B, or the sampler over 1,024
    sequences, 1024 · 5120 · 2 + 1024 · 32000 · 38 = 10,485,760 + 1,245,184,000 =
    1,255,669,760 B, the larger; plus 64,424,509.44 B outside torch: 1,320,094,269.44 B.
    (76,968,728,985.6 − 26,031,728,640 − 1,320,094,269.44) / (1280 · 819,200) = 47.32 → 47."""
    layer = 2048 * (3 * 5120 + 3 * 13824) * 2
    sampler = VLLM_SEQS * 5120 * 2 + VLLM_SEQS * 32000 * 38
    assert (layer, sampler) == (232_783_872, 1_255_669_760)
    profile = max(layer, sampler) + NON_TORCH_TP1
    by_hand = int((USABLE - W13 - profile) // (1280 * KV13))
    assert by_hand == 47
    m, hw = load_model("llama-2-13b"), load_hardware("h100-sxm")
    vllm = load_engine("vllm")
    e = estimate(
        m, Stack.resolve(m, hw, BF16, engine=vllm, prefill_token_budget=2048), [1], 1024, 256
    )
    assert e.max_batch == by_hand and e.fit.binding == "KV"
    code, out, _ = run_cli(
        capsys, "kv", "llama-2-13b", "--context", "1280", "--prefill-token-budget", "2048", "--json"
    )
    assert code == 0 and json.loads(out)[0]["max_batch"] == by_hand
    code, out, _ = run_cli(
        capsys, "estimate", "llama-2-13b", "--prefill-token-budget", "2048", "--json"
    )
    assert code == 0 and json.loads(out)["max_batch"] == by_hand
    # serve reserves the same profile run, 2,048 tokens over its 1,024 sequences, and counts
    # whole 16-token blocks as vLLM does: (76,968,728,985.6 − 26,031,728,640 −
    # 1,320,094,269.44) / (16 · 819,200) = 3,785.4 → 3,785 blocks = 60,560 tokens, 47 of 1280
    policy = dataclasses.replace(POLICIES["continuous"], max_seqs=VLLM_SEQS, token_budget=2048)
    stack = Stack.resolve(m, hw, BF16, engine=vllm, prefill_token_budget=2048)
    tokens = kv_capacity_tokens(m, stack, policy)
    assert tokens == int((USABLE - W13 - profile) // (16 * KV13)) * 16 == 60_560
    assert tokens // 1280 == by_hand


def test_prefill_budget_charges_one_chunk_not_the_batch():
    """16 prompts of 1024 tokens: 16,384 tokens at once without a budget; 8,192 per chunk under
    vLLM's default budget; a decode step of 10,000 sequences is 10,000 tokens."""
    assert memory.prefill_step_tokens(16, 1024, None) == 16_384
    assert memory.prefill_step_tokens(16, 1024, 8192) == 8192
    assert memory.prefill_step_tokens(4, 1024, 8192) == 4096
    assert memory.prefill_step_tokens(10_000, 1024, 8192) == 10_000
    m = load_model("llama-2-13b")
    assert memory.peak_activation_bytes(m, BF16, 16, 1024) == 8192 * HIDDEN13 + 16 * LOGITS13


def test_binding_limits_are_named():
    hw = load_hardware("h100-sxm")
    # 70,553,706,496 params · 2 B = 141.1 GB > 76.97 GB usable: the weights bind
    f = memory.batch_fit(m70 := load_model("llama-3.1-70b"), Stack.resolve(m70, hw, BF16), 4096)
    assert f.max_batch == 0 and f.binding == "weights" and f.kv_room_bytes == 0
    # Llama-2-13B at 4096 tokens: KV of 3.36 GB a sequence fills the room
    f = memory.batch_fit(m13 := load_model("llama-2-13b"), Stack.resolve(m13, hw, BF16), 4096)
    assert f.binding == "KV"
    assert f.max_batch == int((USABLE - W13 - 8192 * HIDDEN13) // (4096 * KV13 + LOGITS13)) == 14
    # a 1-token context on a 1024-token prompt: each sequence holds 819 kB of KV but its row of
    # the whole-batch prefill holds 1024 · 103,424 B = 105.9 MB: the activations bind
    f = memory.batch_fit(m13, Stack.resolve(m13, hw, BF16, prefill_token_budget=None), 1, 1024)
    assert f.binding == "activations"


def test_kv_caps_the_context_at_the_model_limit(capsys):
    """Llama-3.1-8B (8,030,261,248 params, 131,072 B of KV per token, limit 131,072 tokens)
    under vLLM on an H100 (1,024 sequences, 8,192 tokens a step): its profile run reserves the
    larger of a layer, 8192 · (3 · 4096 + 3 · 14336) · 2 = 905,969,664 B, and the sampler,
    1024 · 4096 · 2 + 1024 · 128,256 · 38 = 4,999,086,080 B, plus 64,424,509.44 B outside
    torch: 5,063,510,589.44 B; one sequence could hold (76,968,728,985.6 − 16,060,522,496 −
    5,063,510,589.44) / 131,072 B = 426,061 tokens; the model's trained context binds."""
    code, out, _ = run_cli(capsys, "kv", "llama-3.1-8b", "--context", "8192", "--json")
    (row,) = json.loads(out)
    sampler = VLLM_SEQS * 4096 * 2 + VLLM_SEQS * 128_256 * 38
    assert sampler == 4_999_086_080 > 8192 * (3 * 4096 + 3 * 14336) * 2
    room = USABLE - 8_030_261_248 * 2 - sampler - NON_TORCH_TP1
    assert 420_000 < room / 131_072 < 430_000
    assert row["max_context"] == 131_072 and row["max_context_binding"] == "context"
    # max batch at 8192 tokens: 55,844,695,900.16 / (8192 · 131,072 B) = 52.01 → 52
    assert row["max_batch"] == int(room // (8192 * 131_072)) == 52
    assert row["memory"]["capacity_bytes"] == H100_BYTES
    assert row["memory"]["reserve_bytes"] == pytest.approx(0.1 * H100_BYTES)


def test_kv_says_when_the_weights_fill_the_device_and_takes_tp(capsys):
    code, out, _ = run_cli(capsys, "kv", "llama-3.1-70b", "--context", "4096", "--json")
    (row,) = json.loads(out)
    assert row["max_batch"] == 0 and row["max_batch_binding"] == "weights"
    assert "exceed the usable" in row["note"]
    code, out, _ = run_cli(capsys, "kv", "llama-3.1-70b", "--context", "4096")
    assert "weights fill the" in out
    # TP 2: each GPU holds 4 of 8 kv heads, 2 · 80 · 4 · 128 · 2 B = 163,840 B per token; vLLM's
    # profile run of 8,192 tokens over 1,024 sequences: a layer of D = 8192 and F/2 = 14,336
    # wide rows, 8192 · (3 · 8192 + 3 · 14336) · 2 = 1,107,296,256 B, or the sampler on the rank
    # that samples, over the whole vocabulary (the logits are gathered), 1024 · 8192 · 2 +
    # 1024 · 128,256 · 38 = 5,007,474,688 B, the larger; plus 375,809,638.4 B outside torch
    # at TP > 1. Weights per GPU from the sharded spec: (76,968,728,985.6 − w −
    # 5,383,284,326.4) / (4096 · 163,840) = 1.5 → 1.
    code, out, _ = run_cli(
        capsys, "kv", "llama-3.1-70b", "--context", "4096", "--tp", "2", "--json"
    )
    (row,) = json.loads(out)
    w = row["memory"]["weights_bytes"]
    assert w == pytest.approx(70_553_706_496, rel=1e-3)  # half of 141.1 GB, norms replicated
    profile = max(8192 * (3 * 8192 + 3 * 14336) * 2, VLLM_SEQS * (8192 * 2 + 128_256 * 38))
    assert profile == 5_007_474_688
    assert row["max_batch"] == int((USABLE - w - profile - NON_TORCH_TP) // (4096 * 163_840)) == 1
    # the larger consumer names the binding: the profile's 5.38 GB over one sequence's 0.67 GB
    assert row["max_batch_binding"] == "activations"


def test_memory_fraction_is_a_parameter_of_the_core():
    m, hw = load_model("llama-2-13b"), load_hardware("h100-sxm")
    full = memory.max_batch(m, Stack.resolve(m, hw, BF16, memory_fraction=1.0), 1280, 1024)
    seeds_h100 = memory.max_batch(m, Stack.resolve(m, hw, BF16, memory_fraction=0.92), 1280, 1024)
    assert full == int((H100_BYTES - W13 - 8192 * HIDDEN13) // (1280 * KV13 + LOGITS13)) == 55
    assert (
        seeds_h100
        == int((0.92 * H100_BYTES - W13 - 8192 * HIDDEN13) // (1280 * KV13 + LOGITS13))
        == 49
    )
    with pytest.raises(Exception, match="`memory_fraction`"):
        memory.max_batch(m, Stack.resolve(m, hw, BF16, memory_fraction=0), 1280)
    assert (
        memory.max_batch(m, Stack.resolve(m, hw, BF16, parallel=Parallel(tp=2)), 1280, 1024)
        > 2 * full * 0.9
    )


@pytest.mark.parametrize(
    "engine, fraction, budget",
    [
        # engine_specs/: SGLang mem_fraction_static 0.88, chunked_prefill_size 8192; llama.cpp
        # 0.95 of memory and 512-token batches; `none`: the defaults, vLLM's 0.9 and 8192
        ("sglang", 0.88, 8192),
        ("llama.cpp", 0.95, 512),
        ("none", 0.9, 8192),
    ],
)
def test_the_engine_profile_supplies_fraction_and_budget(capsys, engine, fraction, budget):
    """Llama-2-13B, 1024 + 256 tokens: (f · 85,520,809,984 − 26,031,728,640 − N · 75,776)
    / (1280 · 819,200 + 128,000); SGLang: (75,258,312,785.9 − 26.03e9 − 620.8 MB)
    / 1,048,988,800 = 46.3 → 46."""
    code, out, _ = run_cli(capsys, "estimate", "llama-2-13b", "--engine", engine, "--json")
    data = json.loads(out)
    assert code == 0
    assert data["memory"]["memory_fraction"] == fraction
    assert data["memory"]["prefill_token_budget"] == budget
    expected = int((fraction * H100_BYTES - W13 - budget * HIDDEN13) // (1280 * KV13 + LOGITS13))
    assert data["max_batch"] == expected
    if engine == "sglang":
        assert expected == 46
    code, out, _ = run_cli(
        capsys, "kv", "llama-2-13b", "--context", "1280", "--engine", engine, "--json"
    )
    assert json.loads(out)[0]["max_batch"] == expected
