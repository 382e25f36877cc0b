"""Models costed as released (issue: "models are costed in a format nobody runs"): without
--dtype or --weights every command takes the checkpoint's formats (`checkpoint_weights`,
`checkpoint_activations`), and says so."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli

from roofline.spec.catalog import load_model
from roofline.spec.precision import group_params, released


def _estimate(capsys, *args: str) -> dict:
    code, out, err = run_cli(capsys, "estimate", *args, "--interval", "0", "--json")
    assert code == 0, err
    return json.loads(out)


def test_gpt_oss_120b_fits_one_h100_as_released(capsys) -> None:
    """gpt-oss-120b's checkpoint stores the routed experts in MXFP4 (4 bits + an 8-bit scale
    per 32: 4.25 bits) and the rest in bf16: experts · 4.25/8 + rest · 2 bytes, 65.2 GB, which
    fits one H100's usable 0.9 · 85.52 GB = 76.97 GB; at bf16 it was 234 GB and needed TP 4."""
    m = load_model("gpt-oss-120b")
    g = group_params(m)
    experts = g["experts"]
    rest = sum(g.values()) - experts
    by_hand = experts * 4.25 / 8 + rest * 2
    assert by_hand == pytest.approx(65.2e9, rel=0.002)
    d = _estimate(capsys, "gpt-oss-120b", "--batch", "1")
    assert d["weights_as_released"] is True
    assert d["precision"]["weights"] == "bf16,experts=mxfp4"
    assert d["cases"][0]["weights_bytes"] == pytest.approx(by_hand, rel=1e-12)
    assert d["cases"][0]["fits"] and d["max_batch"] > 0
    code, out, _ = run_cli(capsys, "estimate", "gpt-oss-120b", "--batch", "1")
    assert "(as released)" in out


def test_gpt_oss_20b_cost_as_released(capsys) -> None:
    # 13.75 GB of weights as released (41.8 GB at bf16)
    d = _estimate(capsys, "gpt-oss-20b", "--batch", "1")
    assert d["cases"][0]["weights_bytes"] == pytest.approx(13.75e9, rel=0.002)


def test_deepseek_v3_fits_eight_h200_as_released(capsys) -> None:
    """DeepSeek-V3's checkpoint is FP8 with dynamically quantised fp8 activations
    (config.json quantization_config); the embedding, LM head, norms and router stay bf16.
    At TP 8 on H200 (usable 0.9 · 143.77 GB = 129.4 GB) it fits, about 85 GB of weights per
    GPU; at bf16 it did not fit."""
    m = load_model("deepseek-v3")
    p = released(m)
    assert (p.weights, p.activations, p.kv) == (
        "fp8,embedding=bf16,lm_head=bf16,norms=bf16",
        "fp8",
        "bf16",
    )
    d = _estimate(capsys, "deepseek-v3", "--hardware", "h200", "--tp", "8", "--batch", "1")
    assert d["weights_as_released"] and d["precision"]["compute"] == "fp8"
    c = d["cases"][0]
    assert c["fits"] and 84e9 < c["weights_bytes"] < 86e9
    bf16 = _estimate(
        capsys, "deepseek-v3", "--hardware", "h200", "--tp", "8", "--batch", "1", "--dtype", "bf16"
    )
    assert not bf16["cases"][0]["fits"] and not bf16["weights_as_released"]


def test_a_model_without_released_formats_is_bf16() -> None:
    p = released(load_model("llama-3.1-8b"))
    assert (p.weights, p.activations, p.kv) == ("bf16", "bf16", "bf16")
