"""Issue 41: Nemotron-H (NemotronHForCausalLM) layers hold ONE block each, a Mamba-2 mixer, an
attention mixer, a MoE FFN or a dense MLP, as `hybrid_override_pattern` lists them (M, *, E, -).
A `layer_pattern` that names FFN entries (`dense`, `moe`) is single-block: a mixer layer has no
FFN, an FFN layer no mixer (`NO_MIXER`). Nemotron 3 Nano 30B-A3B is derived here by hand from
its config.json (aiconfigurator-core 0.12.0's bundled copy, the spec's source):

D 2,688, L 52 = 23 M + 23 E + 6 *, V 131,072 (untied), one RMSNorm a layer + the final one.
Mamba-2: heads 64 x head_dim 64 = d_inner 4,096, d_state 128, n_groups G 8, conv 4 (+ bias).
Attention: N 32, K 2, H 128. MoE: E 128 routed experts of F_e 1,856, top-6, plain (up, down)
squared-ReLU, one shared expert of F_s 3,712, router D x E.
"""

from __future__ import annotations

import pytest

from roofline.calc.footprint import kv_cache_bytes, state_bytes_per_sequence
from roofline.spec.catalog import load_model
from roofline.spec.forward import operators
from roofline.spec.mixers import Mamba2
from roofline.spec.model import LayerKind, ModelSpec
from roofline.spec.operators import Step
from roofline.spec.precision import Precision

NAME = "nemotron-3-nano-30b-a3b"
PATTERN = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"  # config.json
LETTER = {"ssm": "M", "global": "*"}  # and mixer "none" with a moe FFN: E

D, V = 2688, 131_072
# Mamba-2 layer:
#   d_inner = 64·64 = 4,096; conv_dim = d_inner + 2·G·d_state = 4,096 + 2·8·128 = 6,144
#   in_proj D → (z, x, B, C, Δ) = 2·4,096 + 2·8·128 + 64 = 10,304 wide: 2,688·10,304 = 27,697,152
#   conv1d 6,144·(4 + 1 bias) = 30,720; dt_bias, A_log, D 3·64 = 192; gated norm 4,096
#   out_proj 4,096·2,688 = 11,010,048
MAMBA = 27_697_152 + 30_720 + 192 + 4_096 + 11_010_048  # = 38,742,208
# attention layer: q 2,688·4,096 = 11,010,048; k, v 2·2,688·256 = 1,376,256; o 11,010,048
ATTENTION = 11_010_048 + 1_376_256 + 11_010_048  # = 23,396,352
# MoE layer: one expert 2·2,688·1,856 = 9,977,856; 128 of them 1,277,165,568;
#   shared 2·2,688·3,712 = 19,955,712; router 2,688·128 = 344,064
EXPERT = 9_977_856
MOE = 128 * EXPERT + 19_955_712 + 344_064  # = 1,297,465,344
NORMS = (52 + 1) * D  # = 142,464
EMBEDDING = LM_HEAD = V * D  # = 352,321,536


def test_the_pattern_is_the_configs_letter_for_letter() -> None:
    m = load_model(NAME)
    letters = "".join(LETTER.get(k.mixer, "E") for k in m.layer_kinds)
    assert letters == PATTERN
    assert [(k.mixer, k.ffn) for k in m.layer_kinds if k.mixer == "none"] == [("none", "moe")] * 23
    assert {k.ffn for k in m.layer_kinds if k.mixer != "none"} == {"none"}
    assert [(g.kind.mixer, g.kind.ffn, g.count) for g in m.layer_groups] == [
        ("ssm", "none", 23),
        ("none", "moe", 23),
        ("global", "none", 6),
    ]


def test_parameter_count_by_hand() -> None:
    """23·38,742,208 = 891,070,784 (ssm) + 6·23,396,352 = 140,378,112 (attention)
    + 23·1,297,465,344 = 29,841,702,912 (moe) + 142,464 (norms) + 2·352,321,536 (embedding,
    LM head) = 31,577,937,344: 0.07 % under the report's 31.6B (within the catalog's 0.5 %)."""
    m = load_model(NAME)
    p = m.params
    assert MAMBA == 38_742_208 and ATTENTION == 23_396_352 and MOE == 1_297_465_344
    assert (p.ssm, p.attention, p.moe, p.mlp) == (23 * MAMBA, 6 * ATTENTION, 23 * MOE, 0)
    assert (p.norms, p.embedding, p.lm_head) == (NORMS, EMBEDDING, LM_HEAD)
    assert p.total == 31_577_937_344
    assert m.published_params == 31_600_000_000
    assert abs(p.total - m.published_params) / m.published_params < 0.005


def test_active_parameters_by_hand() -> None:
    """A token skips 128 − 6 = 122 experts in each of 23 layers: 23·122·9,977,856 =
    27,997,863,936; active 31,577,937,344 − that = 3,580,073,408 (the report's 3.6B with
    embeddings), 3,227,751,872 without the embedding table (its 3.2B)."""
    m = load_model(NAME)
    assert m.active_params == 31_577_937_344 - 23 * 122 * EXPERT == 3_580_073_408
    assert m.active_params - EMBEDDING == 3_227_751_872


def test_mamba2_heads_set_d_inner_apart_from_d_model() -> None:
    """Nemotron-H sizes the mixer by mamba_num_heads·mamba_head_dim (4,096), not expand·D
    (2·2,688 = 5,376); without num_heads the old rule holds."""
    m = load_model(NAME)
    block = m.mixer_block("ssm")
    assert isinstance(block, Mamba2)
    assert (block.d_inner(m), block.heads(m), block.conv_dim(m)) == (4_096, 64, 6_144)
    plain = Mamba2(kind="mamba2", d_state=128, d_conv=4, head_dim=64, n_groups=8)
    assert plain.d_inner(m) == 2 * D == 5_376


@pytest.mark.parametrize(
    ("kv", "kv_bytes", "total"),
    [
        # bf16: KV 2,048·3,072·2 = 12,582,912; state 23·(524,288·4 + 24,576·2) = 49,364,992
        ("bf16", 2, 12_582_912 + 49_364_992),
        # fp8: KV 2,048·3,072·1 = 6,291,456; state 23·(524,288·4 + 24,576·1) = 48,799,744
        ("fp8", 1, 6_291_456 + 48_799_744),
    ],
)
def test_kv_and_state_bytes_per_sequence(kv: str, kv_bytes: int, total: int) -> None:
    """KV: 6 attention layers · 2·K·H = 6·2·2·128 = 3,072 values a token. State: 23 Mamba
    layers of d_inner·d_state = 4,096·128 = 524,288 scan values, at the checkpoint's fp32
    (`state_dtype`, mamba_ssm_cache_dtype float32), and conv_dim·d_conv = 6,144·4 = 24,576
    conv values at the KV format. One sequence of S = 2,048 tokens (the six serving rows')."""
    m, p = load_model(NAME), Precision(kv=kv)
    assert m.kv_elems_per_token == 6 * 2 * 2 * 128 == 3_072
    assert m.state_elems_per_sequence == 23 * (524_288 + 24_576) == 12_623_872
    assert state_bytes_per_sequence(m, p) == 23 * (524_288 * 4 + 24_576 * kv_bytes)
    assert kv_cache_bytes(m, p, 1, 2048) == 2048 * 3_072 * kv_bytes + state_bytes_per_sequence(m, p)
    assert kv_cache_bytes(m, p, 1, 2048) == total


def test_one_decode_step_reads_by_hand() -> None:
    """B 1, T 1, S 1,000. Weights read (elements), one token touching its k = 6 experts:
    Mamba 23·(27,697,152 + 30,720 (conv weights and bias) + 192 (scan: dt_bias, A, D)
      + 11,010,048) = 23·38,738,112 = 890,976,576 (the gated norm's 4,096 is not an operator)
    attention 6·23,396,352 = 140,378,112
    MoE 23·(344,064 router + 6·9,977,856 experts + 19,955,712 shared) = 23·80,166,912
      = 1,843,838,976
    norms 142,464, one embedding row 2,688, LM head 352,321,536
    total 3,227,660,352 elements = 6,455,320,704 B at bf16. Cache read: the 6 attention layers'
    1,001 tokens · 512 values = 3,075,072, the 23 Mamba layers' 12,623,872 state values."""
    m = load_model(NAME)
    ops = {o.name: o for o in operators(m, Step(batch=1, new_tokens=1, cached_tokens=1000))}
    mamba = 23 * (27_697_152 + 30_720 + 192 + 11_010_048)
    moe = 23 * (344_064 + 6 * EXPERT + 19_955_712)
    assert (mamba, moe) == (890_976_576, 1_843_838_976)
    weights = mamba + 6 * ATTENTION + moe + NORMS + D + LM_HEAD
    assert weights == 3_227_660_352
    assert sum(float(o.weight_elems) for o in ops.values()) == pytest.approx(weights, abs=1e-3)
    assert 2 * weights == 6_455_320_704
    kv_read = sum(float(o.kv_read_elems) for o in ops.values())
    assert kv_read == 6 * 1_001 * 512 + 12_623_872
    # no FFN operator runs on a mixer layer, no mixer operator on an FFN layer
    assert not any(name.startswith("mlp/") for name in ops)


# ---- the single-block pattern on a toy model ---------------------------------------------------
TOY = {
    "name": "toy-single-block",
    "display_name": "toy",
    "family": "toy",
    "source": "test",
    "layers": 4,
    "d_model": 64,
    "heads": 4,
    "kv_heads": 2,
    "head_dim": 16,
    "d_ff": 96,
    "mlp": "plain",
    "vocab_size": 100,
    "max_context": 1024,
    "norms_per_layer": 1,
}


def test_a_dense_entry_is_an_mlp_layer_without_a_mixer() -> None:
    """Nemotron-H's '-': layer_pattern [global, dense] over 4 layers is 2 attention layers of
    D·(N·H + 2·K·H) + N·H·D = 64·(64 + 64) + 64·64 = 12,288 and 2 MLP layers of 2·D·F =
    2·64·96 = 12,288, no FFN on the first, no mixer on the second."""
    m = ModelSpec.model_validate(TOY | {"layer_pattern": ["global", "dense"]})
    assert m.layer_kinds == (LayerKind("global", "none"), LayerKind("none", "dense")) * 2
    assert (m.params.attention, m.params.mlp) == (2 * 12_288, 2 * 12_288)
    assert m.kv_elems_per_token == 2 * 2 * 2 * 16


def test_without_ffn_entries_the_pattern_keeps_its_meaning() -> None:
    """[global] alone: every layer attention + the dense FFN of d_ff, as before."""
    m = ModelSpec.model_validate(TOY | {"layer_pattern": ["global"]})
    assert not m.single_block and set(m.layer_kinds) == {LayerKind("global", "dense")}


@pytest.mark.parametrize(
    ("update", "message"),
    [
        ({"layer_pattern": ["global", "moe"]}, "'moe' layers but no moe block"),
        (
            {
                "layer_pattern": ["global", "moe"],
                "moe": {"experts": 4, "top_k": 2, "expert_d_ff": 32, "period": 2, "offset": 1},
            },
            "places the MoE layers itself",
        ),
        ({"layer_pattern": ["global", "dense"], "d_ff": 0}, "need d_ff > 0"),
    ],
)
def test_single_block_specs_that_contradict_themselves_are_refused(
    update: dict, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        ModelSpec.model_validate(TOY | update)


# ---- `models import` of a NemotronHForCausalLM config.json -------------------------------------
#: the keys of the Nano config.json the importer reads (values as the bundled copy has them)
NANO_CONFIG = {
    "architectures": ["NemotronHForCausalLM"],
    "model_type": "nemotron_h",
    "attention_bias": False,
    "conv_kernel": 4,
    "expand": 2,
    "head_dim": 128,
    "hidden_size": 2688,
    "hybrid_override_pattern": PATTERN,
    "intermediate_size": 1856,
    "mamba_head_dim": 64,
    "mamba_num_heads": 64,
    "mamba_proj_bias": False,
    "mamba_ssm_cache_dtype": "float32",
    "max_position_embeddings": 262144,
    "mlp_bias": False,
    "mlp_hidden_act": "relu2",
    "moe_intermediate_size": 1856,
    "moe_shared_expert_intermediate_size": 3712,
    "n_groups": 8,
    "n_routed_experts": 128,
    "n_shared_experts": 1,
    "num_attention_heads": 32,
    "num_experts_per_tok": 6,
    "num_hidden_layers": 52,
    "num_key_value_heads": 2,
    "ssm_state_size": 128,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "use_bias": False,
    "use_conv_bias": True,
    "vocab_size": 131072,
}


def test_the_importer_reads_the_config_into_the_catalog_spec() -> None:
    from roofline.importers.hf import spec_from_hf_config

    got = spec_from_hf_config(NANO_CONFIG, "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "t")
    want = load_model(NAME)
    assert got.layer_kinds == want.layer_kinds
    assert (got.ssm, got.moe, got.attention) == (want.ssm, want.moe, want.attention)
    assert got.params == want.params and got.total_params == 31_577_937_344


@pytest.mark.parametrize(
    ("update", "message"),
    [
        ({"hybrid_override_pattern": PATTERN[:-1]}, "must be 52 letters"),
        ({"hybrid_override_pattern": PATTERN[:-1] + "X"}, "must be 52 letters"),
        ({"moe_latent_size": 1024}, "latent MoE"),  # Nemotron 3 Super / Ultra
        ({"mlp_bias": True}, "biases"),
    ],
)
def test_the_importer_refuses_what_it_cannot_read(update: dict, message: str) -> None:
    from roofline.errors import SpecError
    from roofline.importers.hf import spec_from_hf_config

    with pytest.raises(SpecError, match=message):
        spec_from_hf_config(NANO_CONFIG | update, "n", "t")


def test_a_pipeline_cut_keeps_each_stage_its_own_blocks() -> None:
    """PP 2 splits the 52 layers 26 + 26 (vLLM's get_pp_indices); each stage's layers are its
    half of the config's pattern, the rotated layer_pattern carrying the MoE placement."""
    from roofline.calc.placement import pp_stages

    stages = pp_stages(load_model(NAME), 2)
    halves = ["".join(LETTER.get(k.mixer, "E") for k in s.layer_kinds) for s in stages]
    assert halves == [PATTERN[:26], PATTERN[26:]]
