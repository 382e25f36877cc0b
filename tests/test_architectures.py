"""Architecture families in the one operator decomposition: layer groups, parameters, KV and
state sizes, MoE expert traffic, MLA decode modes, windows, sharing, and clear refusals.

Golden values are derived by hand here from the published configs, arithmetic written out."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from roofline.calc.cost import step_cost
from roofline.calc.memory import ContextFit, context_fit, kv_cache_bytes
from roofline.calc.placement import Parallel, memory_per_gpu, min_gpus_to_fit, tp_shard
from roofline.calc.stack import Stack
from roofline.cli import main
from roofline.spec.catalog import load_hardware, load_model, model_catalog
from roofline.spec.forward import operators
from roofline.spec.model import ModelSpec
from roofline.spec.operators import Step, attended_pairs, expected_experts_touched, kv_tokens_read
from roofline.spec.precision import Precision

BF16 = Precision()


def _variant(name: str, **update) -> ModelSpec:
    """A catalog spec with some fields changed, validated again."""
    data = load_model(name).model_dump()
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return ModelSpec.model_validate(data)


def _op_names(m: ModelSpec, step: Step) -> set[str]:
    return {op.name for op in operators(m, step)}


# ---- layer groups -------------------------------------------------------------------------
def _group_counts(m: ModelSpec) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = {}
    for g in m.layer_groups:
        key = (g.kind.mixer, g.kind.ffn)
        out[key] = out.get(key, 0) + g.count
    return out


def test_jamba_layer_groups() -> None:
    # 32 layers, attention at i % 8 == 4 (4 layers), MoE at i % 2 == 1 (16 layers);
    # 4 is even, so attention layers carry a dense MLP.
    assert _group_counts(load_model("jamba-v0.1")) == {
        ("ssm", "dense"): 12,
        ("ssm", "moe"): 16,
        ("global", "dense"): 4,
    }


def test_gemma3_and_minimax_patterns() -> None:
    # Gemma-3-27B: 62 layers, 5 local : 1 global -> 10 full cycles + 2 local = 52 local, 10 global
    g3 = load_model("gemma-3-27b")
    assert (g3.layers_with("local"), g3.layers_with("global")) == (52, 10)
    # MiniMax-Text-01: 80 layers, 7 linear : 1 softmax
    mm = load_model("minimax-text-01")
    assert (mm.layers_with("linear"), mm.layers_with("global")) == (70, 10)


def test_deepseek_v3_dense_first_layers() -> None:
    assert _group_counts(load_model("deepseek-v3")) == {
        ("global", "dense"): 3,
        ("global", "moe"): 58,
    }


# ---- parameters by hand --------------------------------------------------------------------
def test_deepseek_v2_lite_params_by_hand() -> None:
    D, N, V, L = 2048, 16, 102_400, 27
    q = D * N * (128 + 64)  # no q compression: 6,291,456
    kv_down = D * (512 + 64) + 512  # latent + rope key, latent norm
    kv_up = 512 * N * (128 + 128)  # K_nope and V: 2,097,152
    out = N * 128 * D
    attn = q + kv_down + kv_up + out
    assert attn == 13_763_072
    expert = 3 * D * 1_408  # gated: 8,650,752
    moe = 64 * expert + 2 * expert + D * 64  # routed + shared + router
    dense = 3 * D * 10_944
    total = 2 * V * D + L * attn + 26 * moe + dense + (2 * L + 1) * D
    assert total == 15_706_484_224
    m = load_model("deepseek-v2-lite")
    assert m.total_params == total
    # active: 6 of 64 routed experts per token -> 58 skipped per MoE layer
    assert m.active_params == total - 26 * 58 * expert  # 2.66B (card: "2.4B activated")


def test_mixtral_8x7b_params_by_hand() -> None:
    D, L = 4096, 32
    attn = D * (4096 + 2 * 1024) + 4096 * D  # 41,943,040
    moe = 8 * 3 * D * 14_336 + D * 8  # 1,409,318,912
    total = 2 * 32_000 * D + L * (attn + moe + 2 * D) + D
    assert total == 46_702_792_704
    m = load_model("mixtral-8x7b")
    assert m.total_params == total
    # active: 2 of 8 experts; the often-quoted 12.9B
    assert m.active_params == total - L * 6 * 3 * D * 14_336 == 12_879_925_248


def test_mamba_2p8b_params_and_state_by_hand() -> None:
    D, Di, N_s, R, L = 2560, 5120, 16, 160, 64
    mixer = (
        D * 2 * Di  # in_proj (x, z)
        + Di * 4
        + Di  # depthwise conv + bias
        + Di * (R + 2 * N_s)  # x_proj -> Δ, B, C
        + R * Di
        + Di  # dt_proj + bias
        + Di * N_s
        + Di  # A_log, D
        + Di * D
    )  # out_proj
    assert mixer == 41_241_600
    total = 50_280 * D + L * (mixer + D) + D  # tied embeddings, one norm per block
    m = load_model("mamba-2.8b")
    assert m.total_params == total == 2_768_345_600
    # state per layer: scan d_inner·d_state + conv window d_inner·d_conv
    assert m.state_elems_per_sequence == L * (Di * N_s + Di * 4) == 6_553_600


# ---- KV and state sizes ------------------------------------------------------------------
def test_claim_7_mla_576_values_per_token_per_layer() -> None:
    """Claim 7: MLA caches kv_lora_rank 512 + RoPE 64 = 576 values per token per layer,
    against 2·N·H for MHA over the same heads."""
    for name in ("deepseek-v2-lite", "deepseek-v3"):
        m = load_model(name)
        assert m.kv_elems_per_token == m.layers * (512 + 64)
    # DeepSeek-V2 has N = 128 heads of H = 128: the keys alone are N·H = 16,384 values per
    # token per layer (the seed's "~16,000 dims"); MHA caches K and V, 2·N·H = 32,768.
    assert 128 * 128 == 16_384
    assert round(2 * 128 * 128 / 576, 1) == 56.9
    assert load_model("deepseek-v3").kv_elems_per_token == 61 * 576 == 35_136


def test_claim_8_local_attention_flat_beyond_window() -> None:
    """Claim 8: KV ∝ L_global·S + L_local·min(S, W)."""
    m = load_model("characterai-style-illustrative")
    # 35 layers: 30 local, 5 global; KV shared by 3 consecutive same-kind layers
    # -> ceil(30/3) = 10 local owners, ceil(5/3) = 2 global owners; MQA: 2·1·128 per owner
    e = 2 * 1 * 128
    W = 1024
    for S in (512, 1024, 4096, 131_072):
        expected = 2 * (2 * S * e + 10 * min(S, W) * e)
        assert kv_cache_bytes(m, BF16, 1, S) == expected
    # all-local Mistral-7B-v0.1 stops growing at its window
    mv = load_model("mistral-7b-v0.1")
    assert (
        kv_cache_bytes(mv, BF16, 1, 4096)
        == kv_cache_bytes(mv, BF16, 1, 32_768)
        == 32 * 2 * 8 * 128 * 4096 * 2
    )


def test_claim_9_ssm_state_flat_in_context() -> None:
    m = load_model("mamba-2.8b")
    sizes = {float(kv_cache_bytes(m, BF16, 1, S)) for S in (1, 1024, 1_000_000)}
    assert sizes == {6_553_600 * 2}
    # the state never grows, so the model's trained context is what binds
    assert context_fit(m, Stack.resolve(m, load_hardware("h100-sxm"), BF16), 1) == ContextFit(
        m.max_context, "context"
    )


def test_linear_attention_state_per_head() -> None:
    m = load_model("minimax-text-01")
    # 70 linear layers · 64 heads · 128 x 128 (d_k x d_v), plus 10 softmax GQA layers' KV
    assert m.state_elems_per_sequence == 70 * 64 * 128 * 128
    assert m.kv_elems_per_token == 10 * 2 * 8 * 128


def test_jamba_cache_is_4_attention_layers_plus_28_states() -> None:
    m = load_model("jamba-v0.1")
    S = 8192
    state = 28 * (8192 * 16 + 8192 * 4)
    assert kv_cache_bytes(m, BF16, 1, S) == 2 * (4 * 2 * 8 * 128 * S + state)


# ---- operators: window, MLA, MoE ----------------------------------------------------------
@given(T=st.integers(1, 40), S=st.integers(0, 60), W=st.integers(1, 50))
def test_windowed_pairs_match_brute_force(T: int, S: int, W: int) -> None:
    brute = sum(min(S + t, W) for t in range(1, T + 1))
    assert attended_pairs(T, S, W) == brute
    assert attended_pairs(T, S) == sum(S + t for t in range(1, T + 1))
    # keys read: positions max(0, S - W + 1) .. S + T - 1
    assert kv_tokens_read(T, S, W) == S + T - max(0, S - W + 1)


# ---- chunked attention (Llama 4) ---------------------------------------------------------
@pytest.mark.parametrize(
    ("T", "S", "C", "pairs", "read"),
    [
        # prefill of 10 tokens, chunks of 4: positions 0-3 see 1, 2, 3, 4 (10), 4-7 again 10,
        # 8-9 see 1, 2 (3): 23 pairs; keys read: all 10 (S mod C = 0, plus T)
        (10, 0, 4, 10 + 10 + 3, 0 + 10),
        # decode at S = 5 (position 5, chunk 4-7): sees 4, 5 -> 2 pairs; reads 5 mod 4 + 1 = 2
        (1, 5, 4, 2, 1 + 1),
        # decode at a boundary, S = 8: position 8 opens a chunk, sees only itself
        (1, 8, 4, 1, 0 + 1),
        # 3 new tokens on S = 6, crossing the boundary at 8: positions 6, 7 see 3, 4; 8 sees 1
        (3, 6, 4, 3 + 4 + 1, 2 + 3),
        # the closed form: f(n) = q·C(C+1)/2 + r(r+1)/2; f(20) - f(7) with C = 8:
        # f(20) = 2·36 + 4·5/2 = 82, f(7) = 0 + 7·8/2 = 28 -> 54; read 7 + 13 = 20
        (13, 7, 8, 82 - 28, 7 + 13),
        # Scout's chunk of 8,192: a 10,000-token prefill is one full chunk (8192·8193/2 =
        # 33,558,528) plus 1,808 tokens (1808·1809/2 = 1,635,336)
        (10_000, 0, 8_192, 33_558_528 + 1_635_336, 10_000),
    ],
)
def test_chunked_pairs_and_kv_read_by_hand(T: int, S: int, C: int, pairs: int, read: int) -> None:
    assert attended_pairs(T, S, chunk=C) == pairs
    assert kv_tokens_read(T, S, chunk=C) == read


@given(T=st.integers(1, 40), S=st.integers(0, 60), C=st.integers(1, 20))
def test_chunked_pairs_match_brute_force(T: int, S: int, C: int) -> None:
    """Position p (0-based) attends to C·⌊p/C⌋ … p: p mod C + 1 keys."""
    assert attended_pairs(T, S, chunk=C) == sum(p % C + 1 for p in range(S, S + T))
    # keys read: from the start of the chunk holding position S to S + T − 1
    assert kv_tokens_read(T, S, chunk=C) == S + T - C * (S // C)
    assert kv_tokens_read(T, S, chunk=C) <= S + T


def test_chunked_pairs_broadcast_over_arrays() -> None:
    S = np.array([0, 3, 4, 7])
    assert attended_pairs(1, S, chunk=4).tolist() == [1, 4, 1, 4]
    assert kv_tokens_read(2, S, chunk=4).tolist() == [2, 5, 2, 5]


def test_scout_layers_and_kv_at_32k() -> None:
    """Llama 4 Scout: [chunked x3, global] over 48 layers -> 36 chunked (RoPE) layers and 12
    NoPE global ones (3, 7, ..., 47). At S = 32,768 a global layer holds all S tokens and a
    chunked one its allocation bound min(S, C) = 8,192; 2·K·H = 2·8·128 = 2,048 values per
    token and layer, 1 byte each in fp8."""
    m = load_model("llama-4-scout")
    assert [k.mixer for k in m.layer_kinds[:4]] == ["chunked", "chunked", "chunked", "global"]
    assert m.layers_with("global") == 12 and m.layers_with("chunked") == 36
    assert all(m.layer_kinds[i].mixer == "global" for i in range(3, 48, 4))
    e = 2 * 8 * 128
    expected = (12 * 32_768 + 36 * 8_192) * e  # 805,306,368 + 603,979,776
    assert expected == 1_409_286_144
    assert kv_cache_bytes(m, Precision(kv="fp8"), 1, 32_768) == expected
    assert kv_cache_bytes(m, BF16, 1, 32_768) == 2 * expected
    # below one chunk every layer holds all S tokens
    assert kv_cache_bytes(m, BF16, 1, 1_000) == 48 * 1_000 * e * 2


def test_scout_decode_operators_by_hand() -> None:
    """Decode at S = 10,000 (position 10,000 = 8192 + 1808): a chunked layer reads and attends
    the 1,808 cached tokens of its chunk plus the new one, a global layer all 10,001; per pair
    4·N·H FLOPs, per token read 2·K·H values."""
    m = load_model("llama-4-scout")
    ops = {o.name: o for o in operators(m, Step(1, 1, 10_000))}
    N, K, H = 40, 8, 128
    chunked, full = ops["chunked/scores+av"], ops["attention/scores+av"]
    assert chunked.flops == 36 * 4 * (1_808 + 1) * N * H
    assert chunked.kv_read_elems == 36 * (1_808 + 1) * 2 * K * H
    assert full.flops == 12 * 4 * 10_001 * N * H
    assert full.kv_read_elems == 12 * 10_001 * 2 * K * H
    assert chunked.kv_write_elems == 36 * 2 * K * H


def test_maverick_interleaves_moe_and_dense() -> None:
    """interleave_moe_layer_step 2: HF's moe_layers = range(1, 48, 2), the odd layers; the even
    ones run the dense MLP of intermediate_size_mlp 16,384."""
    m = load_model("llama-4-maverick")
    ffn = [k.ffn for k in m.layer_kinds]
    assert ffn[:4] == ["dense", "moe", "dense", "moe"] and m.layers_moe == 24
    assert [i for i, f in enumerate(ffn) if f == "moe"] == list(range(1, 48, 2))


def test_serve_refuses_chunked_attention_before_fitting() -> None:
    from roofline.errors import InvalidInputError
    from roofline.serve.stepcost import mixed_step_cost

    with pytest.raises(InvalidInputError, match="chunked attention .* cannot cost mixed batches"):
        mixed_step_cost(m4 := load_model("llama-4-scout"), Stack.resolve(m4, load_hardware("h200")))


@given(E=st.integers(1, 256), k_frac=st.floats(0.0, 1.0), n=st.integers(1, 10_000))
def test_expected_experts_touched_bounds(E: int, k_frac: float, n: int) -> None:
    k = max(1, round(k_frac * E))
    touched = expected_experts_touched(E, k, n)
    assert k - 1e-9 <= touched <= E + 1e-9
    assert expected_experts_touched(E, k, n + 1) >= touched - 1e-9


def test_moe_decode_weight_bytes_follow_experts_touched() -> None:
    m = load_model("mixtral-8x7b")
    expert_elems = 3 * 4096 * 14_336

    def experts_op(B: int):
        return next(o for o in operators(m, Step(B, 1, 100)) if o.name == "moe/experts")

    # B = 1: exactly k = 2 experts per layer; B = 64: 8·(1 − (3/4)^64) ≈ 8 per layer
    assert experts_op(1).weight_elems == pytest.approx(32 * 2 * expert_elems)
    assert experts_op(64).weight_elems == pytest.approx(32 * 8 * (1 - 0.75**64) * expert_elems)
    # FLOPs follow the k experts each token uses
    assert experts_op(64).flops == 32 * 2 * 64 * 2 * expert_elems


def test_mla_absorbed_vs_naive_decode() -> None:
    absorbed = _variant("deepseek-v2-lite", attention={"mla_decode": "absorbed"})
    naive = _variant("deepseek-v2-lite", attention={"mla_decode": "naive"})
    step = Step(1, 1, 8192)
    assert {"mla/kv_down", "mla/q_absorb", "mla/absorbed_scores", "mla/v_up"} <= _op_names(
        absorbed, step
    )
    assert {"mla/kv_down", "mla/kv_up", "mla/scores+av"} <= _op_names(naive, step)
    a = {o.name: o for o in operators(absorbed, step)}
    n = {o.name: o for o in operators(naive, step)}
    # both read the same latent cache: 27 layers · (8192 + 1) tokens · 576
    assert a["mla/absorbed_scores"].kv_read_elems == n["mla/kv_up"].kv_read_elems == 27 * 8193 * 576
    # naive up-projects every cached latent: 2·(S+1)·r·N·(nope + v) FLOPs per layer
    assert n["mla/kv_up"].flops == 27 * 2 * 8193 * 512 * 16 * 256


def test_mla_prefill_decompresses_and_decode_absorbs() -> None:
    """DeepSeek-V3 (61 MLA layers, N 128, r 512, R 64, nope 128, v 128). Per layer, a prefill
    of T = 4096 tokens on an empty cache has T(T+1)/2 = 8,390,656 causal pairs:
    absorbed: q_absorb + v_up 2·T·N·r·(n + v) = 137.4 GFLOP, scores 2·pairs·N·(2r + R)
    = 2,336.9 GFLOP; naive: kv_up 2·T·r·N·(n + v) = 137.4 GFLOP, scores 2·pairs·N·(n + R + v)
    = 687.3 GFLOP. The naive path is 3.0× cheaper, so prefill takes it; a decode step (T = 1,
    S = 4096) pays 2·4097·r·N·(n + v) = 137.4 GFLOP to decompress against 2·4097·N·(2r + R)
    = 1.14 GFLOP absorbed, so decode absorbs."""
    m = load_model("deepseek-v3")
    L, N, r, R, n, v, T = 61, 128, 512, 64, 128, 128, 4096
    pairs = T * (T + 1) // 2
    naive = 2 * T * r * N * (n + v) + 2 * pairs * N * (n + R + v)
    absorbed = 2 * T * N * r * (n + v) + 2 * pairs * N * (2 * r + R)
    assert absorbed / naive == pytest.approx(3.0, abs=0.01)  # 2474.3 / 824.7 GFLOP
    prefill = {o.name: o for o in operators(m, Step(1, T, 0))}
    assert {"mla/kv_up", "mla/scores+av"} <= set(prefill) and "mla/absorbed_scores" not in prefill
    assert prefill["mla/kv_up"].flops + prefill["mla/scores+av"].flops == L * naive
    decode = {o.name: o for o in operators(m, Step(1, 1, T))}
    assert "mla/absorbed_scores" in decode and "mla/kv_up" not in decode
    assert decode["mla/absorbed_scores"].flops == L * 2 * (T + 1) * N * (2 * r + R)
    # the cache read is the latent either way: (S + T) · (r + R) values per layer
    assert decode["mla/absorbed_scores"].kv_read_elems == L * (T + 1) * (r + R)
    assert prefill["mla/kv_up"].kv_read_elems == L * T * (r + R)


def test_shared_kv_layers_read_but_do_not_write() -> None:
    m = load_model("characterai-style-illustrative")
    core = {o.name: o for o in operators(m, Step(1, 1, 4096))}
    e = 2 * 1 * 128
    # every local layer reads min(S + 1, W) tokens; only the 10 owners write
    assert core["local/scores+av"].kv_read_elems == 30 * 1024 * e
    assert core["local/scores+av"].kv_write_elems == 10 * e


@pytest.mark.parametrize("name", [s.name for s in model_catalog().load_all()])
def test_estimate_runs_for_every_catalog_model(name: str, capsys) -> None:
    """On H200s, with the fewest GPUs (TP, then PP) that hold batch 8."""
    m = load_model(name)
    prompt = min(1024, m.max_context // 2)
    par = min_gpus_to_fit(m, load_hardware("h200"), BF16, 8, prompt, prompt + 16)
    main(
        [
            "estimate",
            name,
            "--hardware",
            "h200",
            "--batch",
            "1,8",
            "--prompt",
            str(prompt),
            "--gen",
            "16",
            "--tp",
            str(par.tp),
            "--pp",
            str(par.pp),
            "--json",
        ]
    )
    out = yaml.safe_load(capsys.readouterr().out)
    assert out["model"] == name and all(c["tpot_s"] > 0 for c in out["cases"])


@pytest.mark.parametrize(
    ("name", "family_ops"),
    [
        (
            "deepseek-v3",
            {
                "mla/kv_down",
                "mla/absorbed_scores",
                "moe/experts",
                "moe/shared_experts",
                "moe/router",
            },
        ),
        ("mixtral-8x7b", {"moe/router", "moe/experts"}),
        ("mamba-2.8b", {"ssm/in_proj", "ssm/conv", "ssm/scan", "ssm/out_proj"}),
        ("mamba2-2.7b", {"ssm/scan"}),
        ("jamba-v0.1", {"ssm/scan", "attention/scores+av", "moe/experts", "mlp/up"}),
        ("minimax-text-01", {"linear/state_update", "attention/scores+av", "moe/experts"}),
        ("gemma-2-9b", {"local/scores+av", "attention/scores+av"}),
        ("mistral-7b-v0.1", {"local/scores+av"}),
        ("llama-4-scout", {"chunked/scores+av", "attention/scores+av", "moe/shared_experts"}),
    ],
)
def test_breakdown_names_family_operators(name: str, family_ops: set[str], capsys) -> None:
    assert family_ops <= _op_names(load_model(name), Step(1, 1, 512))
    par = min_gpus_to_fit(load_model(name), load_hardware("h200"), BF16, 1, 512, 520)
    main(
        [
            "estimate",
            name,
            "--hardware",
            "h200",
            "--batch",
            "1",
            "--prompt",
            "512",
            "--gen",
            "8",
            "--tp",
            str(par.tp),
            "--pp",
            str(par.pp),
            "--breakdown",
        ]
    )
    out = capsys.readouterr().out
    assert all(op in out for op in family_ops)


def test_one_grid_call_for_hybrids() -> None:
    """B and S broadcast through every family's operators."""
    m = load_model("jamba-v0.1")
    B = np.array([1, 8, 64])[:, None]
    S = np.array([0, 1024, 65_536])[None, :]
    t = step_cost(m, load_hardware("h100-sxm"), Step(B, 1, S)).time_s
    assert t.shape == (3, 3) and np.all(np.diff(t, axis=0) > 0)


# ---- refusals -----------------------------------------------------------------------------
BASE = dict(
    name="bad",
    display_name="bad",
    family="test",
    source="test",
    layers=4,
    d_model=64,
    heads=4,
    kv_heads=2,
    head_dim=16,
    d_ff=128,
    vocab_size=100,
    max_context=1024,
)


@pytest.mark.parametrize(
    ("update", "message"),
    [
        ({"kv_heads": 3}, "must be a multiple of kv_heads"),
        ({"moe": {"experts": 4, "top_k": 8, "expert_d_ff": 32}}, "top_k (8) exceeds experts (4)"),
        (
            {"layer_pattern": ["local"], "attention": {"sliding_window": 4096}},
            "sliding_window (4096) exceeds max_context (1024)",
        ),
        ({"layer_pattern": ["local", "mlp"]}, "layer_pattern.1"),
        ({"layer_pattern": ["local", "global"]}, "sliding_window is not set"),
        ({"layer_pattern": ["chunked", "global"]}, "attention_chunk_size is not set"),
        ({"attention": {"attention_chunk_size": 256}}, "no layer is 'chunked'"),
        (
            {"layer_pattern": ["chunked"], "attention": {"attention_chunk_size": 4096}},
            "attention_chunk_size (4096) exceeds max_context (1024)",
        ),
        ({"layer_pattern": ["ssm"]}, "no ssm block"),
        ({"attention": {"kind": "mha"}}, "kind 'mha' needs kv_heads = heads"),
        ({"attention": {"kind": "mla", "kv_lora_rank": 32}}, "kind 'mla' needs qk_rope_head_dim"),
        ({"attention": {"kv_share_map": [0, 2, 2, 3]}}, "kv_share_map[1] = 2"),
        ({"attention": {"kv_share": 2, "kv_share_map": [0, 0, 2, 2]}}, "not both"),
        (
            {"moe": {"experts": 4, "top_k": 2, "expert_d_ff": 32, "dense_first_layers": 4}},
            "no layer is a MoE layer",
        ),
    ],
)
def test_self_contradicting_specs_are_refused(
    tmp_path: Path, capsys, update: dict, message: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({**BASE, **update}))
    with pytest.raises(SystemExit) as exc:
        main(["models", "show", str(path)])
    assert exc.value.code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


@pytest.mark.parametrize(
    "name",
    [
        "llama-3.1-8b",
        "gemma-2-9b",
        "gemma-3-27b",
        "jamba-v0.1",
        "characterai-style-illustrative",
        "deepseek-v2-lite",
    ],
)
@pytest.mark.parametrize("batch", [1, 7])
def test_max_context_is_the_edge_of_memory(name: str, batch: int) -> None:
    """The longest context is the last S that fits (S + 1 does not), or the model's trained
    context when memory would allow more; on the datasheet capacity (fraction 1)."""
    m, hw = load_model(name), load_hardware("h200")
    fit = context_fit(m, Stack.resolve(m, hw, BF16, memory_fraction=1.0), batch)
    longest = fit.max_context

    def total(s: int) -> float:
        return float(memory_per_gpu(m, BF16, Parallel(), batch, s, s).total_bytes)

    assert total(longest) <= hw.memory_bytes
    if fit.binding == "context":
        assert longest == m.max_context
    else:
        assert fit.binding == "KV" and longest < m.max_context
        assert total(longest + 1) > hw.memory_bytes


def test_tensor_parallel_splits_experts_like_mlps() -> None:
    """Mixtral-8x7B on TP 2: heads, kv heads, every expert's F and the vocabulary halve;
    router and norms are replicated."""
    D, L = 4096, 32
    attn = D * (16 * 128 + 2 * 4 * 128) + 16 * 128 * D  # 20,971,520
    moe = 8 * 3 * D * (14_336 // 2) + D * 8  # 704,675,840
    total = 2 * 16_000 * D + L * (attn + moe + 2 * D) + D
    assert tp_shard(load_model("mixtral-8x7b"), 2).total_params == total == 23_352_053_760


def test_tensor_parallel_of_ssm_is_refused(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["estimate", "mamba-2.8b", "--tp", "2"])
    assert exc.value.code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "SSM (Mamba) layers is not modelled" in err


def test_gated_deltanet_decode_step_by_hand() -> None:
    """One decode token of one Qwen3-Next DeltaNet layer: the state update reads and writes the
    32 x 128 x 128 state (524,288 values each way) and does S·k, the rank-1 update and S·q,
    2·128·128 FLOPs each per value head: 6·32·16,384 = 3,145,728 FLOPs; the projections are
    2·(2048·12,352) and 2·(4096·2048) FLOPs."""
    from roofline.spec.catalog import load_model
    from roofline.spec.operators import Step

    m = load_model("qwen3-next-80b-a3b")
    kind = next(k for k in m.layer_kinds if k.mixer == "linear")
    ops = {o.name: o for o in m.linear_attention.ops(m, Step(1, 1, 4096), kind)}
    upd = ops["deltanet/state_update"]
    assert upd.flops == 6 * 32 * 128 * 128 == 3_145_728
    assert upd.kv_read_elems == upd.kv_write_elems == 32 * 128 * 128
    assert ops["deltanet/in_proj"].flops == 2 * 2048 * (2 * 2048 + 2 * 4096 + 64)
    assert ops["deltanet/out"].flops == 2 * 4096 * 2048
    # the state does not grow with the context: the same step at S = 100k reads the same
    far = {o.name: o for o in m.linear_attention.ops(m, Step(1, 1, 100_000), kind)}
    assert far["deltanet/state_update"].kv_read_elems == upd.kv_read_elems
