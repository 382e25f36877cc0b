"""`roofline kv` and the seed claims 6 and 13 about KV cache size, derived by hand here."""

from __future__ import annotations

import json

import pytest

from roofline.calc.memory import kv_cache_bytes, weights_bytes
from roofline.cli import main
from roofline.spec.catalog import load_hardware, load_model
from roofline.spec.model import ModelSpec
from roofline.spec.precision import Precision

BF16 = Precision()


def _kv_json(capsys, *args: str) -> list[dict]:
    main(["kv", *args, "--json"])
    return json.loads(capsys.readouterr().out)


def test_json_fields(capsys) -> None:
    rows = _kv_json(capsys, "llama-3.1-8b", "mamba-2.8b", "--context", "4096")
    assert [r["model"] for r in rows] == ["llama-3.1-8b", "mamba-2.8b"]
    for r in rows:
        assert {
            "model",
            "context",
            "kv_bytes_per_token",
            "kv_bytes_per_sequence",
            "decode_read_bytes",
            "max_batch",
        } <= set(r)
    # Llama-3.1-8B: 2 · 32 layers · 8 kv heads · 128 · 2 B = 131,072 B per token
    assert rows[0]["kv_bytes_per_token"] == 2 * 32 * 8 * 128 * 2 == 131_072
    assert rows[0]["kv_bytes_per_sequence"] == 131_072 * 4096
    # the SSM state never grows: the model's trained context binds, never more
    assert rows[1]["max_context"] == load_model("mamba-2.8b").max_context
    assert rows[1]["max_context_binding"] == "context"


def test_claim_13_70b_at_128k(capsys) -> None:
    """Claim 13: 70B at 128K context. GQA (K = 8): 2 · 80 · 8 · 128 · 2 B · 131,072
    = 42,949,672,960 B = 42.9 GB = 40 GiB per sequence; ×32 = 1.37 TB. MHA (K = 64) would be
    8× that, 343.6 GB. The seed's "≈64 GB" matches neither."""
    gqa = 2 * 80 * 8 * 128 * 2 * 131_072
    assert gqa == 42_949_672_960 == 40 * 2**30
    mha = 2 * 80 * 64 * 128 * 2 * 131_072
    assert mha == 343_597_383_680
    assert 32 * gqa == pytest.approx(1.374e12, rel=1e-3)
    for seed_claim in (64e9, 64 * 2**30):  # read as GB or as GiB, it is 30 %+ off both
        assert abs(seed_claim - gqa) / gqa > 0.3 and abs(seed_claim - mha) / mha > 0.3

    (row,) = _kv_json(capsys, "llama-3.1-70b", "--context", "131072")
    assert row["kv_bytes_per_sequence"] == gqa
    mha_spec = ModelSpec.model_validate(
        {**load_model("llama-3.1-70b").model_dump(), "kv_heads": 64}
    )
    assert kv_cache_bytes(mha_spec, BF16, 1, 131_072) == mha


def test_claim_6_gqa_on_llama_2_13b() -> None:
    """Claim 6: Llama-2-13B with K = 8 kv heads instead of 40 (1:5) at S = 1024, bf16, H100
    (80 GB, 3.35 TB/s). KV per sequence 2 · 40 layers · 8 · 128 · 2 B · 1024 = 167.77 MB
    (MHA: 838.86 MB). Like the reference table, keep the MHA weights, 13,015,864,320 · 2 B
    = 26.03 GB, and shrink only the cache:
    B = 64: 26.03 + 64 · 0.16777 = 36.77 GB → / 3.35 TB/s = 10.98 ms, 5,830 tok/s;
    B = 256: 26.03 + 42.95 = 68.98 GB, fits in 80 GB (MHA needs 240.78 GB).
    A model trained with 8 kv heads also has smaller K/V projections:
    40 · 2 · 5120 · (5120 − 1024) = 1,677,721,600 fewer parameters, 22.68 GB of weights."""
    hw = load_hardware("h100-sxm")
    mha = load_model("llama-2-13b")
    gqa = ModelSpec.model_validate({**mha.model_dump(), "kv_heads": 8})
    w = weights_bytes(mha, BF16)
    assert w == 13_015_864_320 * 2
    assert mha.total_params - gqa.total_params == 40 * 2 * 5120 * (5120 - 1024) == 1_677_721_600
    assert kv_cache_bytes(gqa, BF16, 1, 1024) == 2 * 40 * 8 * 128 * 2 * 1024 == 167_772_160
    assert kv_cache_bytes(mha, BF16, 1, 1024) == 5 * 167_772_160
    total_64 = w + kv_cache_bytes(gqa, BF16, 64, 1024)
    assert total_64 == pytest.approx(36.77e9, rel=1e-3)
    step_s = total_64 / hw.memory_bandwidth_bytes_per_s
    assert step_s == pytest.approx(10.98e-3, rel=1e-3)
    assert 64 / step_s == pytest.approx(5_830, rel=1e-3)
    total_256 = w + kv_cache_bytes(gqa, BF16, 256, 1024)
    assert total_256 == pytest.approx(68.98e9, rel=1e-3) and total_256 < hw.memory_bytes
    assert w + kv_cache_bytes(mha, BF16, 256, 1024) == pytest.approx(240.78e9, rel=1e-3)


def test_kv_table_and_refusals(capsys) -> None:
    main(["kv", "deepseek-v3", "gemma-2-9b", "--context", "8192", "--hardware", "h200"])
    out = capsys.readouterr().out
    assert "deepseek-v3" in out and "gemma-2-9b" in out
    main(["kv", "llama-2-13b", "--context", "8192"])  # past the trained context: a warning
    out, err = capsys.readouterr()
    assert "llama-2-13b" in out
    assert err == (
        "warning: 8,192 tokens exceed llama-2-13b's trained context of 4,096; "
        "estimated anyway (engines run past it with rope scaling)\n"
    )
