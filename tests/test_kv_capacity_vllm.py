"""vLLM's KV pool by release range, derived by hand (`serve.simulate.kv_capacity_tokens`).

vLLM sizes the pool as gpu_memory_utilization x total - weights - the profile run's peak
activation - the memory it counts outside torch, in whole blocks of 16 tokens
(roofline/data/engine_releases.yaml `kv_profiler`, `kv_profile_run`). Every case: Llama-3.1-8B
(D = 4096, F = 14336 gated, V = 128256, 32 layers, 8 KV heads x 128), bf16 weights,
activations and KV, on an A100-SXM-80GB spec (C = 80 GiB = 85,899,345,920 B), f = 0.9:

    f x C = 0.9 x 85,899,345,920 = 77,309,411,328 B
    W (TP 1) = 8,030,261,248 params x 2 B = 16,060,522,496 B
    KV per token (TP 1) = 2 x 32 x 8 x 128 x 2 B = 131,072 B; a block of 16 = 2,097,152 B
    layer peak per token = (3D + 3F) x 2 B = (12,288 + 43,008) x 2 = 110,592 B
    sampler = 256 seqs x 128,256 x 38 B = 1,247,674,368 B (`VLLM_SAMPLER_PEAK_BYTES`)
    non-torch: 0.06 GiB = 64,424,509.44 B at TP 1, 0.35 GiB = 375,809,638.4 B at TP > 1,
    CUDA context 0.29 GiB = 311,385,128.96 B (0.6.4-0.6.x and V1 0.8.0-0.9.x only)
"""

from __future__ import annotations

import pytest

from roofline.calc.footprint import VLLM_SAMPLER_PEAK_BYTES, vllm_profile_activation_bytes
from roofline.calc.memory import vllm_release_terms
from roofline.calc.placement import Parallel, memory_per_gpu
from roofline.calc.stack import Stack
from roofline.serve.policy import Policy
from roofline.serve.simulate import kv_capacity_tokens
from roofline.spec.catalog import load_engine, load_hardware, load_model
from roofline.spec.precision import Precision

BF16 = Precision(weights="bf16", activations="bf16", kv="bf16")
GiB = 2**30


def tokens(engine, tp: int, seqs: int, step_tokens: int) -> int:
    m, hw = load_model("llama-3.1-8b"), load_hardware("a100-sxm-80gb")
    stack = Stack.resolve(
        m,
        hw,
        BF16,
        engine=engine,
        parallel=Parallel(tp=tp),
        memory_fraction=0.9,
        prefill_token_budget=step_tokens,
        max_num_seqs=seqs,
    )
    policy = Policy("continuous", max_seqs=seqs, token_budget=step_tokens)
    return kv_capacity_tokens(m, stack, policy)


def test_v0_up_to_063_no_context() -> None:
    # vllm@0.6.3 (the V0 range, free memory at worker start less free memory after the
    # profile: the CUDA context is not counted). 256 seqs over 8192 tokens (max(8192, 2048)).
    # layer = 8192 x 110,592 = 905,969,664 B
    # sampler (V0 keeps all 8192 hidden rows) = 8192 x 4096 x 2 + 1,247,674,368
    #         = 67,108,864 + 1,247,674,368 = 1,314,783,232 B  (> layer: the peak)
    # free = 77,309,411,328 - 16,060,522,496 - 1,314,783,232 - 64,424,509.44
    #      = 59,869,681,090.56 B ; / 2,097,152 = 28,548.09 -> 28,548 blocks x 16 = 456,768
    assert tokens(load_engine("vllm").at("0.6.3"), 1, 256, 8192) == 456_768


def test_v0_064_counts_the_context() -> None:
    # vllm 0.6.4: non-torch = used - torch, so the 0.29 GiB context comes off too:
    # free = 59,869,681,090.56 - 311,385,128.96 = 59,558,295,961.6 ; / 2,097,152 = 28,399.61
    # -> 28,399 x 16 = 454,384
    eng = load_engine("vllm").at("0.6.4").model_copy(update={"exact_release": "0.6.4"})
    assert tokens(eng, 1, 256, 8192) == 454_384


def test_v1_080_range() -> None:
    # vllm@0.8.3 (range 0.8.0-0.8.4, V1): 256 seqs over 2048 tokens
    # layer = 2048 x 110,592 = 226,492,416 B
    # sampler (V1 keeps the 256 sampled rows) = 256 x 4096 x 2 + 1,247,674,368
    #         = 2,097,152 + 1,247,674,368 = 1,249,771,520 B  (the peak)
    # non-torch = 0.06 + 0.29 GiB = 375,809,638.4 B (device-level accounting)
    # free = 77,309,411,328 - 16,060,522,496 - 1,249,771,520 - 375,809,638.4
    #      = 59,623,307,673.6 ; / 2,097,152 = 28,430.61 -> 28,430 x 16 = 454,880
    assert tokens(load_engine("vllm").at("0.8.3"), 1, 256, 2048) == 454_880


def test_v1_085_range_same_accounting() -> None:
    # vllm@0.8.5 (range 0.8.5-0.9): the same profiler as 0.8.3 (engine_releases.yaml), 454,880
    assert tokens(load_engine("vllm").at("0.8.5"), 1, 256, 2048) == 454_880


def test_v1_newest_growth_only() -> None:
    # vllm 0.10+ (the newest range): non-torch is the growth since start, 0.06 GiB at TP 1:
    # free = 77,309,411,328 - 16,060,522,496 - 1,249,771,520 - 64,424,509.44
    #      = 59,934,692,802.56 ; / 2,097,152 = 28,579.09 -> 28,579 x 16 = 457,264
    assert tokens(load_engine("vllm"), 1, 256, 2048) == 457_264


def test_v1_newest_tp2() -> None:
    # TP 2: F/2 = 7168 per GPU, the sampler on the full vocabulary (logits gathered on the
    # sampling rank), non-torch 0.35 GiB; KV per token per GPU 65,536 B, block 1,048,576 B
    # layer = 2048 x (3 x 4096 + 3 x 7168) x 2 = 138,412,032 B ; sampler 1,249,771,520 B
    m = load_model("llama-3.1-8b")
    w = float(memory_per_gpu(m, BF16, Parallel(tp=2), 1, 1, 1).weights_bytes)
    assert w == 8_030_527_488  # half the sharded matrices + the replicated norms (placement)
    # free = 77,309,411,328 - 8,030,527,488 - 1,249,771,520 - 375,809,638.4
    #      = 67,653,302,681.6 ; / 1,048,576 = 64,519.22 -> 64,519 x 16 = 1,032,304
    assert tokens(load_engine("vllm"), 2, 256, 2048) == 1_032_304


def test_not_vllm_has_no_vllm_terms() -> None:
    m, hw = load_model("llama-3.1-8b"), load_hardware("a100-sxm-80gb")
    assert vllm_release_terms(Stack.resolve(m, hw, BF16, engine=load_engine("sglang"))) is None
    v = vllm_release_terms(Stack.resolve(m, hw, BF16, engine=load_engine("vllm").at("0.6.3")))
    assert v == (False, pytest.approx(0.06 * GiB))


def test_profile_peak_matches_printed_components() -> None:
    # kv010 (vllm 0.8.1 V0, Qwen2.5-7B: D 3584, V 152064; 6600 tokens, 256 seqs) printed
    # "PyTorch activation peak memory takes 1.43GiB": the sampler is the peak,
    # 6600 x 3584 x 2 + 256 x 152064 x 38 = 47,308,800 + 1,479,278,592 = 1,526,587,392 B
    # = 1.4218 GiB, within 0.6% of 1.43 (printed to 0.01 GiB)
    q = load_model("qwen2.5-7b")
    peak = vllm_profile_activation_bytes(q, BF16, 6600, 256, q.vocab_size, v1=False)
    assert peak == 1_526_587_392
    assert peak / GiB == pytest.approx(1.43, abs=0.01)
    # kv006 / kv007 (vllm 0.6.4, Llama-3.1-8B, 20000 / 29000 tokens): peak_torch_memory
    # 17.06 / 17.98 GiB, a slope of 0.92 GiB per 9000 tokens; the layer peak's slope is
    # 9000 x 110,592 B = 0.9270 GiB
    m = load_model("llama-3.1-8b")
    slope = vllm_profile_activation_bytes(
        m, BF16, 29000, 256, m.vocab_size, v1=False
    ) - vllm_profile_activation_bytes(m, BF16, 20000, 256, m.vocab_size, v1=False)
    assert slope == 9000 * 110_592
    assert slope / GiB == pytest.approx(17.98 - 17.06, abs=0.015)
    assert VLLM_SAMPLER_PEAK_BYTES == 38
