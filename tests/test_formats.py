"""Quantised weight formats: llama.cpp block types from their C structs, MLC group formats,
GPTQ/AWQ zero points, per-group formats and llama.cpp file-type mixes (issues 12.4-5, 14)."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli

from roofline.calc import memory
from roofline.calc.cost import step_cost
from roofline.calc.placement import Parallel, memory_per_gpu
from roofline.errors import InvalidInputError
from roofline.spec import llamacpp
from roofline.spec.catalog import load_hardware, load_model
from roofline.spec.dtypes import parse_format
from roofline.spec.forward import operators
from roofline.spec.operators import Step
from roofline.spec.precision import Precision, group_params

HALF = 2  # bytes of ggml_half (fp16)

# Bytes of one block and the weights it holds, member by member as ggml/src/ggml-common.h
# declares them (QK4_0 = QK8_0 = QK4_NL = 32, QK_K = 256).
BLOCKS = [
    ("q4_0", HALF + 32 // 2, 32),  # d; qs[16]              = 18
    ("q4_1", 2 * HALF + 32 // 2, 32),  # d, m; qs[16]           = 20
    ("q5_0", HALF + 4 + 32 // 2, 32),  # d; qh[4]; qs[16]       = 22
    ("q5_1", 2 * HALF + 4 + 32 // 2, 32),  # d, m; qh[4]; qs[16]    = 24
    ("q8_0", HALF + 32, 32),  # d; qs[32]              = 34
    ("q2_k", 256 // 16 + 256 // 4 + 2 * HALF, 256),  # scales[16]; qs[64]; d, dmin = 84
    ("q3_k", 256 // 8 + 256 // 4 + 12 + HALF, 256),  # hmask[32]; qs[64]; scales[12]; d = 110
    ("q4_k", 2 * HALF + 12 + 256 // 2, 256),  # d, dmin; scales[12]; qs[128] = 144
    ("q5_k", 2 * HALF + 12 + 256 // 8 + 256 // 2, 256),  # + qh[32]               = 176
    ("q6_k", 256 // 2 + 256 // 4 + 256 // 16 + HALF, 256),  # ql[128]; qh[64]; scales[16]; d = 210
    ("iq4_nl", HALF + 32 // 2, 32),  # d; qs[16]              = 18
    ("iq4_xs", HALF + 2 + 256 // 64 + 256 // 2, 256),  # d; scales_h; scales_l[4]; qs[128] = 136
]


@pytest.mark.parametrize(
    ("name", "block_bytes", "block_weights"), BLOCKS, ids=[b[0] for b in BLOCKS]
)
def test_gguf_bits_from_block_structs(name: str, block_bytes: int, block_weights: int) -> None:
    assert parse_format(name).bits == pytest.approx(8 * block_bytes / block_weights, rel=1e-12)


@pytest.mark.parametrize(
    ("name", "bits"),
    [
        ("Q4_0", 144 / 32),  # 32 x 4 bits + one fp16 scale = 144 bits per 32 weights = 4.5
        ("Q8_0", 272 / 32),  # 32 x 8 + 16 = 272 / 32 = 8.5
        ("Q4_K", 1152 / 256),  # 144 B = 1152 bits per 256 = 4.5
        ("Q6_K", 1680 / 256),  # 210 B = 1680 bits per 256 = 6.5625
        ("q4f16_1", 4 + 16 / 32),  # MLC: int4, groups of 32, one fp16 scale, symmetric = 4.5
        ("q4f32_1", 4 + 32 / 32),  # fp32 scale = 5.0
        ("q3f16_1", 3 + 16 / 40),  # int3 in groups of 40 = 3.4
    ],
)
def test_named_bits(name: str, bits: float) -> None:
    assert parse_format(name).bits == pytest.approx(bits, rel=1e-12)
    assert parse_format(name.lower()) == parse_format(name.upper())


def test_unknown_format_lists_the_known_ones() -> None:
    with pytest.raises(InvalidInputError, match="q4_k.*int4-g<N>"):
        parse_format("q4_k_xl")


# ---- weight-only checkpoints keep the ends in 16 bits (issue 12.5) ---------------------------
LLAMA2_7B = 6_738_415_616
ENDS_7B = 2 * 32_000 * 4_096 + 65 * 4_096  # embedding + LM head + 65 RMSNorm scales


def test_llama_2_7b_int4_g128_weighs_3_9_gb() -> None:
    """Embedding, LM head and norms in bf16 (2 B), the other weights at 4 + 20/128 bits."""
    m = load_model("llama-2-7b")
    assert (
        group_params(m)["embedding"] + group_params(m)["lm_head"] + group_params(m)["norms"]
        == ENDS_7B
    )
    expected = ENDS_7B * 2 + (LLAMA2_7B - ENDS_7B) * (4 + (16 + 4) / 128) / 8
    assert expected == pytest.approx(3.889e9, rel=1e-3)
    assert memory.weights_bytes(m, Precision("int4-g128")) == pytest.approx(expected, rel=1e-12)
    # the "not 3.58 GB" is every parameter at the old 4.25 bits
    zeros_at_16_bits = LLAMA2_7B * (16 - 4) / 128 / 8
    old = memory.weights_bytes(m, Precision.everywhere("int4-g128")) + zeros_at_16_bits
    assert old == pytest.approx(LLAMA2_7B * 4.25 / 8, rel=1e-12)


def test_group_overrides_and_errors() -> None:
    p = Precision("bf16,experts=mxfp4,lm_head=fp8")
    f = p.group_formats()
    assert (f["experts"].name, f["lm_head"].name, f["attention"].name) == ("mxfp4", "fp8", "bf16")
    for bad in ("bf16,foo=int4", "experts=mxfp4", "bf16,mlp=int3"):
        with pytest.raises(InvalidInputError):
            Precision(bad)


def test_uniform_takes_group_overrides() -> None:
    """--dtype 'bf16,experts=mxfp4': bf16 activations and KV, MXFP4 experts."""
    p = Precision.uniform("bf16,experts=mxfp4")
    assert (p.activations, p.kv, p.group_formats()["experts"].name) == ("bf16", "bf16", "mxfp4")
    assert Precision.uniform("Q4_K_M") == Precision("Q4_K_M", "bf16", "bf16")


def test_mixtral_experts_in_mxfp4() -> None:
    """Mixtral 8x7B: 32 layers x 8 experts x 3 x 4096 x 14336 routed weights at 4.25 bits
    (E8M0 scale per 32), everything else bf16."""
    m = load_model("mixtral-8x7b")
    routed = 32 * 8 * 3 * 4_096 * 14_336
    assert group_params(m)["experts"] == routed == m.routed_expert_params
    got = memory.weights_bytes(m, Precision("bf16,experts=mxfp4"))
    assert got == pytest.approx((m.total_params - routed) * 2 + routed * 4.25 / 8, rel=1e-12)


def test_group_params_add_up() -> None:
    for name in ("llama-2-7b", "mixtral-8x7b", "deepseek-v3", "jamba-v0.1", "gpt-j-6b"):
        m = load_model(name)
        assert sum(group_params(m).values()) == m.total_params, name


@pytest.mark.parametrize(
    ("model", "op", "group"),
    [
        ("llama-2-7b", "attention/qkv", "attention"),
        ("deepseek-v3", "mla/q_proj", "attention"),
        ("gemma-2-9b", "local/scores+av", "attention"),
        ("minimax-text-01", "linear/qkv", "attention"),
        ("llama-2-7b", "mlp/down", "mlp"),
        ("deepseek-v3", "moe/experts", "experts"),
        ("deepseek-v3", "moe/shared_experts", "shared_experts"),
        ("deepseek-v3", "moe/router", "router"),
        ("llama-2-7b", "embedding", "embedding"),
        ("llama-2-7b", "lm_head", "lm_head"),
        ("mamba-2.8b", "ssm/in_proj", "ssm"),
        ("llama-2-7b", "norms+residual", "norms"),
    ],
)
def test_operator_groups(model: str, op: str, group: str) -> None:
    """Every operator names the tensor group its weights are read from (`Op.group`); a mixer's
    come from its block's `param_group`, not from the operator's name."""
    ops = {o.name: o for o in operators(load_model(model), Step(1, 1, 16))}
    assert ops[op].group == group


def test_bytes_moved_follow_each_group() -> None:
    """Decode of Llama-2-7B with the MLP in int8 and the rest bf16: the MLP operators read 1 B
    per weight, attention and LM head 2 B."""
    m, hw = load_model("llama-2-7b"), load_hardware("h100-sxm")
    s = step_cost(m, hw, Step(1, 1, 128), Precision("bf16,mlp=int8"), "datasheet")
    by = {o.name: float(o.weight_bytes) for o in s.ops}
    assert by["mlp/up"] == 32 * 2 * 4_096 * 11_008 * 1
    assert by["mlp/down"] == 32 * 11_008 * 4_096 * 1
    assert by["attention/qkv"] == 32 * 3 * 4_096 * 4_096 * 2
    assert by["lm_head"] == 32_000 * 4_096 * 2


def test_tp_memory_keeps_group_formats() -> None:
    """TP 2 of Llama-2-7B int4-g128: each rank holds half of every group at its format."""
    m = load_model("llama-2-7b")
    p = Precision("int4-g128")
    mem = memory_per_gpu(m, p, Parallel(tp=2), 1, 128, 128)
    norms = 65 * 4_096 * 2  # replicated on both ranks
    whole = memory.weights_bytes(m, p)
    assert mem.weights_bytes == pytest.approx((whole - norms) / 2 + norms, rel=1e-12)


# ---- llama.cpp file types (per-tensor mixes) ------------------------------------------------
def test_use_more_bits_picks_half_of_32_layers() -> None:
    picked = [i for i in range(32) if llamacpp.use_more_bits(i, 32)]
    # i < 32/8 = 4, i >= 7*32/8 = 28, (i - 4) % 3 == 2
    assert picked == [0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31]


def test_llama_2_7b_q4_k_m_from_its_mix() -> None:
    """llama-quantize Q4_K_M on Llama-2-7B (llama_tensor_get_type): base Q4_K (4.5 bits);
    output.weight Q6_K (6.5625); attn_v and ffn_down Q6_K on the 16 use_more_bits layers;
    token_embd Q4_K; norms F32. D = 4096, F = 11008, V = 32000."""
    D, F, V = 4_096, 11_008, 32_000
    q4k, q6k = 4.5 / 8, 6.5625 / 8  # bytes per weight
    per_layer_q4k = 3 * D * D + 2 * D * F  # q, k, o, gate, up
    total = (
        V * D * q4k
        + V * D * q6k  # token_embd, output
        + 32 * per_layer_q4k * q4k
        + 16 * (D * D + F * D) * q6k
        + 16 * (D * D + F * D) * q4k  # attn_v, ffn_down
        + 65 * D * 4
    )  # norms, F32
    assert total == 4_080_263_168
    m = load_model("llama-2-7b")
    assert memory.weights_bytes(m, Precision("Q4_K_M")) == total
    # TheBloke/Llama-2-7B-GGUF lists llama-2-7b.Q4_K_M.gguf at 4.08 GB (tensor data + header)
    assert total == pytest.approx(4.08e9, rel=0.005)
    bits = Precision("q4_k_m").group_bits(m)
    assert bits["attention"] == pytest.approx((3 * 4.5 + 0.5 * 6.5625 + 0.5 * 4.5) / 4)
    assert bits["mlp"] == pytest.approx((2 * 4.5 + 0.5 * 6.5625 + 0.5 * 4.5) / 3)
    assert bits["lm_head"] == 6.5625 and bits["embedding"] == 4.5


def test_llama_2_7b_q4_0_file() -> None:
    """A llama.cpp Q4_0 *file* is Q4_0 everywhere but output.weight, which llama-quantize
    moves to Q6_K (llama_tensor_get_type), and the F32 norms: `q4_0,lm_head=q6_k`.
    (6,738,415,616 - 131,072,000 - 266,240)·18/32 + 131,072,000·210/256 + 266,240·4."""
    m = load_model("llama-2-7b")
    head, norms = 32_000 * 4_096, 65 * 4_096
    expected = (LLAMA2_7B - head - norms) * 18 / 32 + head * 210 / 256 + norms * 4
    assert expected == 3_825_065_984
    assert memory.weights_bytes(m, Precision("q4_0,lm_head=q6_k")) == expected
    # TheBloke/Llama-2-7B-GGUF lists llama-2-7b.Q4_0.gguf at 3.83 GB (tensor data + header)
    assert expected == pytest.approx(3.83e9, rel=0.005)


def test_mix_bytes_moved_match_memory_once_resolved() -> None:
    """With the precision fixed for the model, a decode step that reads every weight row
    (batch covering the vocabulary) moves the same weight bytes as memory holds."""
    m, hw = load_model("llama-2-7b"), load_hardware("h100-sxm")
    p = Precision("q4_k_m").for_model(m)
    s = step_cost(m, hw, Step(32_000, 1, 0), p, "datasheet")
    assert float(s.weight_bytes) == pytest.approx(memory.weights_bytes(m, p), rel=1e-12)


@pytest.mark.parametrize(
    ("mix", "attn_v", "ffn_down"),
    [
        ("q3_k_m", "2 x q5_k, rest q4_k", "first L/16 q5_k, rest q4_k"),
        ("q4_k_s", "first 4 q5_k", "first L/8 q5_k"),
    ],
)
def test_other_mixes_follow_their_rules(mix: str, attn_v: str, ffn_down: str) -> None:
    m = load_model("llama-2-7b")
    typed = llamacpp.tensor_types(mix, m)
    v = [f for t, f in typed if t.role == "attn_v"]
    down = [f for t, f in typed if t.role == "ffn_down"]
    if mix == "q3_k_m":
        assert v == ["q5_k"] * 2 + ["q4_k"] * 30
        assert down == ["q5_k"] * 2 + ["q4_k"] * 30  # 32 // 16 = 2
    else:
        assert v == ["q5_k"] * 4 + ["q4_k"] * 28
        assert down == ["q5_k"] * 4 + ["q4_k"] * 28  # 32 // 8 = 4
    assert {f for t, f in typed if t.role == "output"} == {"q6_k"}


def test_llama_70b_attn_v_promoted_to_q5_k() -> None:
    """llama.cpp treats 80-layer GQA llama models as 70B and bumps Q4_K attn_v to Q5_K."""
    typed = llamacpp.tensor_types("q4_k_s", load_model("llama-3.1-70b"))
    assert {f for t, f in typed if t.role == "attn_v"} == {"q5_k"}


def test_mix_tensors_cover_every_parameter() -> None:
    for name in ("llama-2-7b", "qwen2.5-7b", "mixtral-8x7b", "gemma-2-9b", "gpt-j-6b"):
        m = load_model(name)
        assert sum(t.elems for t in llamacpp.tensors(m)) == m.total_params, name


def test_estimate_runs_with_a_mix(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(
        capsys,
        "estimate",
        "llama-2-7b",
        "--hardware",
        "m2-ultra",
        "--weights",
        "Q4_K_M",
        "--batch",
        "1",
        "--json",
    )
    assert code == 0
    assert json.loads(out)["cases"][0]["weights_bytes"] == 4_080_263_168


@pytest.mark.parametrize(
    "name",
    [
        "llama-2-7b",
        "llama-3.1-70b",
        "mixtral-8x7b",
        "qwen3-30b-a3b",
        "gemma-3-27b",
        "gpt-oss-20b",
        "deepseek-v3",
        "jamba-v0.1",
    ],
)
def test_mixes_lie_between_their_block_types(name: str) -> None:
    """A K file type only promotes tensors above its base type (never past Q6_K, Q8_0 aside):
    all-Q3_K <= Q3_K_S <= Q3_K_M <= Q3_K_L <= all-Q6_K, likewise for Q4_K and Q5_K (norms
    and router F32 in every case)."""
    m = load_model(name)

    def w(fmt: str) -> float:
        return memory.weights_bytes(m, Precision(fmt))

    assert w("q3_k") <= w("q3_k_s") <= w("q3_k_m") <= w("q3_k_l") <= w("q6_k")
    assert w("q4_k") <= w("q4_k_s") <= w("q4_k_m") <= w("q6_k")
    assert w("q5_k") <= w("q5_k_s") <= w("q5_k_m") <= w("q6_k")


def test_an_fp8_checkpoint_keeps_its_ends_16_bit() -> None:
    """Defect: with fp8 weights and activations the embedding, LM head and norms were charged
    one byte; ModelOpt and llm-compressor fp8 checkpoints keep them in 16 bits. Llama-3.1-70B:
    70,553,706,496 params, of which embedding and LM head 2 · 128,256 · 8,192 = 2,101,346,304
    and norms 80 · 2 · 8,192 + 8,192 = 1,318,912 at 2 B, the rest at 1 B:
    70,553,706,496 + 2,101,346,304 + 1,318,912 = 72,656,371,712 B (72.66 GB, not 70.55)."""
    m = load_model("llama-3.1-70b")
    assert memory.weights_bytes(m, Precision.uniform("fp8")) == 72_656_371_712
    assert memory.weights_bytes(m, Precision.everywhere("fp8", "fp8", "fp8")) == 70_553_706_496
