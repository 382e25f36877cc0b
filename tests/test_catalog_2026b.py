"""Issue 41, second batch: the 2026 models whose every layer kind an existing mixer expresses
(Qwen3.5 and Qwen3.6: Gated DeltaNet + gated GQA, Qwen3-Next's mixers). Counts derived by hand
from the config.json files bundled in aiconfigurator-core 0.12.0
(aiconfigurator_core/model_configs/), published figures written here, not read from the specs.
"""

from __future__ import annotations

import pytest

from roofline.calc.footprint import kv_growth_elems_per_token
from roofline.spec.catalog import load_model

TOLERANCE = 0.005  # 0.5 %, as tests/test_model_catalog.py


def qwen3_5_vision_params(out_hidden: int) -> int:
    """The Qwen3.5 vision tower the specs leave out, from vision_config (depth 27, hidden 1,152,
    intermediate 4,304, patch 16, temporal patch 2, 3 channels, 2,304 position embeddings,
    spatial merge 2, no deepstack mergers) as transformers' Qwen3_5VisionModel builds it:
    Conv3d patch embedding with bias, learned position table, blocks of two LayerNorms, a fused
    qkv and an output projection with biases and a two-layer MLP with biases, then the patch
    merger: LayerNorm(1,152), fc1 4,608 -> 4,608 and fc2 4,608 -> out_hidden, with biases."""
    C = 1_152
    patch = 3 * 2 * 16 * 16 * C + C  # 1,770,624
    position = 2_304 * C  # 2,654,208
    block = 4 * C + (C * 3 * C + 3 * C) + (C * C + C) + (C * 4_304 + 4_304) + (4_304 * C + C)
    assert block == 15_239_504
    merged = 4 * C  # 2 x 2 patches: 4,608
    merger = 2 * C + (merged * merged + merged) + (merged * out_hidden + out_hidden)
    return patch + position + 27 * block + merger


def test_qwen3_5_vision_by_hand() -> None:
    # 1,770,624 + 2,654,208 + 27 x 15,239,504 + 2,304 + 21,238,272 = 437,132,016, + 4,609 x D
    assert qwen3_5_vision_params(0) == 437_132_016
    assert qwen3_5_vision_params(5_120) == 437_132_016 + 4_609 * 5_120  # 460,730,096


def test_qwen3_5_27b_by_hand() -> None:
    """Qwen/Qwen3.5-27B text_config: D = 5,120, 64 layers, 16 x (3 linear_attention, 1
    full_attention), dense F = 17,408, V = 248,320 untied."""
    D, F, V = 5_120, 17_408, 248_320
    # Gated DeltaNet: 16 key heads and 48 value heads of 128, conv kernel 4
    qk, v, vh = 16 * 128, 48 * 128, 48  # 2,048 and 6,144
    in_proj = D * (2 * qk + 2 * v)  # in_proj_qkv + in_proj_z: 83,886,080
    ba = D * 2 * vh  # in_proj_b, in_proj_a: 491,520
    conv = (2 * qk + v) * 4  # 40,960
    deltanet = in_proj + ba + conv + 2 * vh + 128 + v * D  # + dt_bias, A_log, norm(d_v), out
    assert deltanet == 115_876_064
    # Gated attention: 24 query heads and 4 kv heads of 256; q_proj doubled by the output gate
    q, kv = 24 * 256, 4 * 256
    attention = D * (2 * q + 2 * kv) + q * D + 2 * 256  # q(+gate), k, v, o, q/k norms
    assert attention == 104_858_112
    mlp = 3 * D * F  # 267,386,880
    norms = (2 * 64 + 1) * D  # two per layer and the final one: 660,480
    total = 48 * deltanet + 16 * attention + 64 * mlp + norms + 2 * V * D
    assert total == 26_895_998_464
    m = load_model("qwen3.5-27b")
    assert m.total_params == total
    assert m.active_params == total  # dense
    # state per sequence and layer: 48 x 128 x 128 recurrent + 3 x 10,240 conv inputs
    assert m.linear_attention is not None
    state = 48 * 128 * 128 + 3 * (2 * qk + v)  # 786,432 + 30,720
    assert m.linear_attention.state_elems(m) == state
    # per sequence: 48 deltanet layers' state (39,223,296 values, 78.4 MB at bf16), and only the
    # 16 attention layers cache per token, 2 x 4 x 256 values each: 32,768 values a token
    assert m.state_elems_per_sequence == 48 * state == 39_223_296
    assert kv_growth_elems_per_token(m) == 16 * 2 * 4 * 256 == 32_768


def test_qwen3_5_35b_a3b_by_hand() -> None:
    """Qwen/Qwen3.5-35B-A3B: D = 2,048, 40 layers, every one MoE: 256 experts of F = 512,
    top-8, one shared expert of 512; Gated DeltaNet 16/32 heads of 128; attention 16/2 of 256."""
    D, V = 2_048, 248_320
    qk, v, vh = 16 * 128, 32 * 128, 32
    deltanet = D * (2 * qk + 2 * v) + D * 2 * vh + (2 * qk + v) * 4 + 2 * vh + 128 + v * D
    assert deltanet == 33_718_464  # 25,165,824 + 131,072 + 32,768 + 64 + 128 + 8,388,608
    q, kv = 16 * 256, 2 * 256
    attention = D * (2 * q + 2 * kv) + q * D + 2 * 256
    assert attention == 27_263_488
    expert = 3 * D * 512  # 3,145,728
    moe = 256 * expert + expert + D * 256  # routed, shared, router: 808,976,384
    assert moe == 808_976_384
    # 1,011,553,920 + 272,634,880 + 32,359,055,360 + 165,888 (norms) + 1,017,118,720 (tables)
    total = 30 * deltanet + 10 * attention + 40 * moe + (2 * 40 + 1) * D + 2 * V * D
    assert total == 34_660_528_768
    m = load_model("qwen3.5-35b-a3b")
    assert m.total_params == total
    assert m.active_params == total - 40 * (256 - 8) * expert  # 3,454,907,008


# (spec, the card's figure, whether the figure counts the vision encoder, where it comes from)
# The 27B card lists its 27B under "Language Model"; the MoE names are the whole
# vision-language checkpoint's, as Qwen3-VL's are (tests/test_model_catalog.py).
PUBLISHED = [
    ("qwen3.5-27b", 27e9, False, "Qwen/Qwen3.5-27B card @3b29628: Language Model, 27B"),
    ("qwen3.6-27b", 27e9, False, "the name; Qwen3.5-27B's shapes and card"),
    ("qwen3.5-35b-a3b", 35e9, True, "the name, 35B-A3B"),
    ("qwen3.6-35b-a3b", 35e9, True, "the name, 35B-A3B"),
    ("qwen3.5-122b-a10b", 122e9, True, "the name, 122B-A10B"),
    ("qwen3.5-397b-a17b", 397e9, True, "SGLang cookbook, mlx-community card copy: 397B total"),
]


@pytest.mark.parametrize(("name", "published", "vision", "source"), PUBLISHED)
def test_params_against_the_card(name: str, published: float, vision: bool, source: str) -> None:
    m = load_model(name)
    assert m.published_params == published
    count = m.total_params + (qwen3_5_vision_params(m.d_model) if vision else 0)
    rel = abs(count - published) / published
    # text only: 27B -0.39 %; with the vision tower: 35B +0.31 %, 122B +0.46 %, 397B -0.05 %
    assert rel <= TOLERANCE, f"{name}: {count:,} vs {published:,.0f} ({source}): {rel:.3%}"


@pytest.mark.parametrize(
    ("name", "active"),
    [
        ("qwen3.5-35b-a3b", 3),
        ("qwen3.6-35b-a3b", 3),
        ("qwen3.5-122b-a10b", 10),
        ("qwen3.5-397b-a17b", 17),
    ],
)
def test_active_rounds_to_the_name(name: str, active: int) -> None:
    """Qwen's activated figure counts the embedding and LM head: 3.45B, 9.77B and 17.35B with
    them round to 3, 10 and 17 (2.44B, 8.25B and 15.31B without them would not)."""
    assert round(load_model(name).active_params / 1e9) == active


def test_qwen3_6_has_qwen3_5_shapes() -> None:
    for a, b in (("qwen3.5-27b", "qwen3.6-27b"), ("qwen3.5-35b-a3b", "qwen3.6-35b-a3b")):
        x, y = load_model(a), load_model(b)
        assert (x.total_params, x.active_params) == (y.total_params, y.active_params)


# (spec, device, tp, weights or None for the released format)
ESTIMATES = [
    ("qwen3.5-27b", "h200", 1, None),
    ("qwen3.6-27b", "h200", 1, None),
    ("qwen3.5-35b-a3b", "h200", 1, None),
    ("qwen3.6-35b-a3b", "h200", 1, None),
    ("qwen3.5-122b-a10b", "h200", 4, None),
    ("qwen3.5-397b-a17b", "h200", 8, None),
    ("qwen3.5-397b-a17b", "b200", 8, "bf16,experts=nvfp4"),  # nvidia/...-NVFP4
]


@pytest.mark.parametrize(("name", "device", "tp", "weights"), ESTIMATES)
def test_estimate_runs(
    name: str, device: str, tp: int, weights: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from conftest import run_cli

    extra = ["--weights", weights] if weights else []
    code, out, err = run_cli(
        capsys,
        "estimate",
        name,
        "--hardware",
        device,
        "--tp",
        str(tp),
        "--batch",
        "1,8",
        "--prompt",
        "1024",
        "--gen",
        "16",
        "--json",
        *extra,
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["model"] == name
    assert all(c["fits"] and c["tpot_s"] > 0 for c in doc["cases"])
    assert weights is None or weights in out
