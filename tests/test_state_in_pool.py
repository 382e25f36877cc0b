"""Hybrid models under vLLM V1 (from 0.10): each running sequence's recurrent state comes
from the KV pool, one block a request (`MambaManager`, vllm==0.11.0
vllm/v1/core/single_type_kv_cache_manager.py:529), instead of the V0 engine's state of
max_num_seqs sequences reserved up front (`memory.state_from_pool`). Qwen3.5-27B's numbers
are tests/test_catalog_2026b.py's, derived there from its config: 48 delta-net layers of
817,152 state values (39,223,296 a sequence) and 16 global-attention layers of 2·4·256 KV values
a token (g = 32,768 a token). No torch."""

from __future__ import annotations

import math

import numpy as np

from roofline.calc.footprint import TokenEquivalents, kv_growth_elems_per_token
from roofline.calc.memory import state_from_pool, vllm_profile_reserve_bytes
from roofline.calc.stack import Stack
from roofline.serve.policy import POLICIES
from roofline.serve.simulate import build_deployment, kv_capacity_tokens
from roofline.spec.catalog import load_engine, load_hardware, load_model

STATE = 39_223_296  # values a sequence
G = 32_768  # KV values a token of the global layers
#: bytes of state a sequence at a bf16 KV format, the delta-rule state at its fp32
#: (`state_dtype`): 48 · (48·128·128 · 4 B + 3 · 10,240 · 2 B) = 48 · 3,207,168 B
STATE_BYTES = 153_944_064


def _stack(engine: str) -> Stack:
    m = load_model("qwen3.5-27b")
    return Stack.resolve(m, load_hardware("h200"), engine=load_engine(engine))


def test_the_state_is_worth_its_values_over_g_tokens_from_the_first_token() -> None:
    """⌈39,223,296 / 32,768⌉ = ⌈1,197.0⌉ = 1,197 tokens more a sequence (1,197.0 exactly:
    39,223,296 = 1,197 · 32,768), none for a sequence of no tokens."""
    m = load_model("qwen3.5-27b")
    assert m.state_elems_per_sequence == STATE and kv_growth_elems_per_token(m) == G
    worth = TokenEquivalents.of(m, state=True)
    assert math.ceil(STATE / G) == 1197
    assert worth(np.array([0, 1, 500])).tolist() == [0, 1 + 1197, 500 + 1197]
    assert TokenEquivalents.of(m).identity  # without the state: one token each


def test_vllm_v1_reserves_no_state_up_front_and_v0_reserves_every_slot() -> None:
    """On one H200: the V0 engine (vllm@0.7) reserves the state of its 256 sequence slots,
    256 · 153,944,064 B = 39.41 GB = 601,344 tokens of 32,768 · 2 B; V1 (the newest range)
    reserves none. Their profile runs differ too (V1 samples 1,024 dummy sequences, V0 256:
    `memory.vllm_profile_reserve_bytes`), so the pools differ by 306,432 tokens less the
    difference of the two profile reserves over 65,536 B a token, to within two 16-token
    blocks."""
    v1, v0 = _stack("vllm"), _stack("vllm@0.7")
    assert state_from_pool(v1) and not state_from_pool(v0)
    m = load_model("qwen3.5-27b")
    t1 = kv_capacity_tokens(m, v1, POLICIES["chunked"])
    t0 = kv_capacity_tokens(m, v0, POLICIES["continuous"])
    reserved_tokens = 256 * STATE_BYTES / (G * 2)
    assert reserved_tokens == 601_344
    r1 = max(vllm_profile_reserve_bytes(m, v1, 1024, 8192) or [0.0])
    r0 = max(vllm_profile_reserve_bytes(m, v0, 256, 8192) or [0.0])
    assert abs((t1 - t0) - (reserved_tokens - (r1 - r0) / (G * 2))) <= 32
    # and the allocator counts the state per running sequence instead, at its bytes:
    # 153,944,064 B / 65,536 B a token = 2,349 tokens exactly
    d = build_deployment(m, v1, POLICIES["chunked"])
    assert d.kv_equivalents is not None and d.kv_equivalents(1) == 1 + 2349


def test_an_engine_with_no_pool_rule_keeps_the_reservation() -> None:
    assert not state_from_pool(_stack("sglang"))


def test_the_cache_charges_the_state_at_its_own_dtype() -> None:
    """One Qwen3.5-27B sequence of S = 1,000 tokens at a bf16 KV format holds 1,000 · 32,768 · 2 B
    of global-layer KV and 153,944,064 B of state, the delta-rule part at its fp32
    (`state_dtype`, tests/test_state_dtype.py): 65,536,000 + 153,944,064 = 219,480,064 B."""
    from roofline.calc.footprint import kv_cache_bytes, state_bytes_per_sequence
    from roofline.spec.precision import Precision

    m, bf16 = load_model("qwen3.5-27b"), Precision()
    assert bf16.kv_bytes == 2 and state_bytes_per_sequence(m, bf16) == STATE_BYTES
    assert kv_cache_bytes(m, bf16, 1, 1000) == 1000 * G * 2 + STATE_BYTES == 219_480_064
