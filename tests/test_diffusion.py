"""Diffusion LM (LLaDA-8B) against autoregressive decoding of the same model."""

from __future__ import annotations

import json

import pytest

from roofline.calc.cost import step_cost
from roofline.calc.stack import Stack
from roofline.cli import main
from roofline.spec.catalog import load_hardware, load_model
from roofline.spec.operators import Step, attended_pairs
from roofline.studies.diffusion import compare_diffusion


def test_bidirectional_pairs() -> None:
    # every one of T positions attends to all S + T: T·(S + T); causal about half of it
    assert attended_pairs(768, 0, causal=False) == 768 * 768
    assert attended_pairs(768, 0) == 768 * 769 / 2


def test_diffusion_is_n_full_forwards() -> None:
    m, hw = load_model("llada-8b"), load_hardware("h100-sxm")
    c = compare_diffusion(m, Stack.resolve(m, hw), prompt=512, gen=256, steps=64)
    step = step_cost(m, hw, Step(1, 768, 0, logits="all", causal=False)).time_s
    assert c.diffusion_step_s == pytest.approx(float(step))
    assert c.diffusion_s == pytest.approx(64 * float(step))
    assert c.diffusion_tokens_per_s == pytest.approx(256 / c.diffusion_s)
    assert c.autoregressive_s == pytest.approx(
        c.autoregressive_ttft_s + 255 * c.autoregressive_tpot_s
    )


def test_fewer_steps_is_faster_and_one_token_per_step_is_slower() -> None:
    m, hw = load_model("llada-8b"), load_hardware("h100-sxm")
    # one token per step (N = L, LLaDA's default): each step is a compute-heavy forward
    # over P + L tokens, slower than a memory-bound decode step at B = 1
    assert compare_diffusion(m, Stack.resolve(m, hw), 512).diffusion_speedup < 1
    # 8 tokens per step: faster than autoregressive at B = 1
    assert compare_diffusion(m, Stack.resolve(m, hw), 512, steps=32).diffusion_speedup > 1


def test_cli_json_and_refusals(capsys) -> None:
    main(["diffusion", "llada-8b", "--steps", "64", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["steps"] == 64 and out["gen_tokens"] == 256
    with pytest.raises(SystemExit) as exc:
        main(["diffusion", "llama-3.1-8b"])
    assert exc.value.code == 1
    assert "has no diffusion block" in capsys.readouterr().err


def test_diffusion_checks_memory_like_estimate() -> None:
    """LLaDA-8B, B = 64 sequences of P + L = 512 + 256 tokens in one bidirectional step, no KV
    cache: weights + n·(2D + 3F)·2 B of activations (the gated FFN's gate-and-up output beside
    its activation's) + n·V·12 B of fp32 sampling (logits, softmax, log-softmax), n = 64·768,
    against 0.9 of an H100 SXM's 85,520,809,984 B (vLLM's memory fraction)."""
    from roofline.calc.memory import weights_bytes
    from roofline.spec.catalog import load_engine, load_hardware, load_model
    from roofline.spec.precision import Precision
    from roofline.studies.diffusion import compare_diffusion

    m, hw = load_model("llada-8b"), load_hardware("h100-sxm")
    c = compare_diffusion(m, Stack.resolve(m, hw, engine=load_engine("vllm")), 512, 256, 64, 64)
    n = 64 * (512 + 256)
    D, F, V = m.d_model, m.d_ff, m.vocab_size
    expected = weights_bytes(m, Precision()) + n * (2 * D + 3 * F) * 2 + n * V * 12
    assert c.memory_bytes == pytest.approx(expected)
    assert c.usable_bytes == pytest.approx(0.9 * 85_520_809_984)
    assert c.fits == (expected <= 0.9 * 85_520_809_984)
