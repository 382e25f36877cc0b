"""Issue 41: Qwen3.5 / Qwen3.6 keep the gated-delta-net recurrent state in fp32 under vLLM and
the conv window at the model dtype; the tool charged all of it at the KV format, half of the
recurrent part. The checkpoint's `mamba_ssm_dtype: float32` is now the mixer's `state_dtype:
fp32`, and `MixerBlock.state_bytes` charges the recurrent part at it.

Evidence (vLLM source, wheels read with `pip download --no-deps vllm==V`):
- vllm==0.17.0 vllm/model_executor/models/config.py:625-638 (0.34.0: :1293-1306)
  `Qwen3_5ForConditionalGenerationConfig`: mamba_ssm_cache_dtype "auto" becomes the HF
  config's `mamba_ssm_dtype`. 0.17.0 is the first release with qwen3_5.py (0.16.0 has none).
- layers/mamba/mamba_utils.py `_mamba_state_dtype` (0.17.0 :55-65, 0.34.0 :106-116): the
  conv state at mamba_cache_dtype ("auto": the model dtype), the temporal (recurrent) state at
  mamba_ssm_cache_dtype; `gated_delta_net_state_dtype` returns both (0.17.0 :79, 0.34.0 :130;
  0.11.0 :74 took no ssm dtype and gave both the model dtype).
- Qwen3-Next (no config class, no mamba_ssm_dtype) and Mamba/Jamba (`MambaModelConfig` sets no
  ssm dtype) keep "auto", the model dtype: no `state_dtype` in their specs.
"""

from __future__ import annotations

import pytest

from roofline.spec.catalog import load_model
from roofline.spec.mixers import STATE_DTYPE_BYTES, GatedDeltaNet, Mamba2


def _state_bytes(name: str, kv_bytes: float) -> float:
    m = load_model(name)
    return sum(
        g.count * m.mixer_block(g.kind.mixer).state_bytes(m, kv_bytes) for g in m.layer_groups
    )


def test_qwen35_27b_state_per_sequence_before_and_after() -> None:
    """Qwen3.5-27B: 48 of 64 layers are delta-net (16 x (3 linear, 1 global)), Vh 48, Kh 16,
    d_k = d_v = 128, conv kernel 4.
    recurrent a layer: Vh·d_k·d_v = 48·128·128 = 786,432 values
    conv a layer: (kernel − 1)·(2·Kh·d_k + Vh·d_v) = 3·(4,096 + 6,144) = 30,720 values
    before (all at the bf16 KV format): 48·(786,432 + 30,720)·2 B = 48·1,634,304 = 78,446,592 B
    after (recurrent at fp32): 48·(786,432·4 + 30,720·2) B = 48·3,207,168 = 153,944,064 B
    (the 153.9 MB vLLM allocates, as the spec's notes say)."""
    m = load_model("qwen3.5-27b")
    block = m.mixer_block("linear")
    assert isinstance(block, GatedDeltaNet) and block.state_dtype == "fp32"
    assert block.recurrent_state_elems(m) == 786_432
    assert block.state_elems(m) - block.recurrent_state_elems(m) == 30_720
    before = 48 * (786_432 + 30_720) * 2
    assert before == m.state_elems_per_sequence * 2 == 78_446_592
    after = 48 * (786_432 * 4 + 30_720 * 2)
    assert after == _state_bytes("qwen3.5-27b", 2) == 153_944_064
    # at an fp8 KV format only the conv window shrinks: 48·(786,432·4 + 30,720·1) B
    assert _state_bytes("qwen3.5-27b", 1) == 48 * (786_432 * 4 + 30_720) == 152_469_504


@pytest.mark.parametrize(
    "name",
    [
        "qwen3.5-27b",
        "qwen3.5-35b-a3b",
        "qwen3.5-122b-a10b",
        "qwen3.5-397b-a17b",
        "qwen3.6-27b",
        "qwen3.6-35b-a3b",
    ],
)
def test_every_qwen35_checkpoint_declares_an_fp32_state(name: str) -> None:
    """Each of their configs says mamba_ssm_dtype float32 (the specs' sources)."""
    m = load_model(name)
    assert m.mixer_block("linear").state_dtype == "fp32"


@pytest.mark.parametrize("name", ["qwen3-next-80b-a3b", "mamba-2.8b", "mamba2-2.7b", "jamba-v0.1"])
def test_a_state_without_a_declared_dtype_stays_at_the_kv_format(name: str) -> None:
    m = load_model(name)
    for kv_bytes in (1, 2):
        assert _state_bytes(name, kv_bytes) == m.state_elems_per_sequence * kv_bytes


def test_an_fp32_mamba2_state_widens_the_scan_only() -> None:
    """Mamba-2 (Nemotron-H's mixer, which vLLM from 0.20.0 keeps at fp32 by default:
    NemotronHForCausalLMConfig.DEFAULT_MAMBA_SSM_CACHE_DTYPE): of d_inner·d_state + conv_dim·d_conv
    only d_inner·d_state is at 4 B. Toy: D 256, expand 2, d_state 16, head_dim 64, 1 group,
    d_conv 4: d_inner 512, conv_dim 512 + 2·16 = 544; at bf16 512·16·4 + 544·4·2 = 37,120 B."""
    m = load_model("mamba2-2.7b").model_copy(update={"d_model": 256})
    spec = {"kind": "mamba2", "d_state": 16, "d_conv": 4, "head_dim": 64}
    plain, wide = Mamba2(**spec), Mamba2(**spec, state_dtype="fp32")
    assert (wide.recurrent_state_elems(m), wide.state_elems(m)) == (8_192, 8_192 + 2_176)
    assert plain.state_bytes(m, 2) == (8_192 + 2_176) * 2
    assert wide.state_bytes(m, 2) == 8_192 * STATE_DTYPE_BYTES["fp32"] + 2_176 * 2 == 37_120


def test_an_unknown_state_dtype_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="state_dtype"):
        GatedDeltaNet(
            kind="gated_deltanet",
            key_heads=1,
            value_heads=1,
            key_head_dim=1,
            value_head_dim=1,
            state_dtype="fp64",
        )
