"""`roofline serve` on parallel replicas: step costs exact against `parallel_step_cost`, KV
capacity from per-GPU memory, and the refusals `roofline estimate` makes."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import run_cli

from roofline.calc.placement import Parallel
from roofline.calc.stack import Stack
from roofline.errors import DoesNotFitError
from roofline.serve.policy import POLICIES
from roofline.serve.simulate import build_deployment, simulate
from roofline.serve.stepcost import mixed_step_cost, serving_step_cost
from roofline.serve.workload import Lengths, synthetic
from roofline.spec.catalog import load_hardware, load_model
from roofline.spec.operators import Step

SHAPES = [
    (1, 1, 0),
    (7, 1, 500),
    (3, 128, 0),
    (13, 1, 3000),
    (2, 37, 100),
    (64, 1, 1024),
    (5, 512, 2000),
]


@pytest.mark.parametrize(
    ("model", "par"),
    [
        ("llama-3.1-70b", Parallel(tp=2)),
        ("llama-3.1-70b", Parallel(tp=4)),
        ("llama-3.1-8b", Parallel(tp=2, pp=2)),
        ("mixtral-8x7b", Parallel(ep=2)),
        ("mixtral-8x7b", Parallel(tp=4)),
    ],
)
def test_mixed_step_cost_equals_parallel_step_cost_for_uniform_batches(model, par):
    m, hw = load_model(model), load_hardware("h100-sxm")
    c = mixed_step_cost(m, Stack.resolve(m, hw, parallel=par))
    for B, T, S in SHAPES:
        ref = float(serving_step_cost(m, Stack.resolve(m, hw, parallel=par), Step(B, T, S)).time_s)
        assert c.step_s(np.full(B, T, float), np.full(B, S, float)) == pytest.approx(ref, rel=1e-9)
        if T == 1:  # the decode stretch: step j runs over S + j cached tokens
            steps = c.decode_s(np.full(B, S, float), 3)
            for j in range(3):
                ref_j = float(
                    serving_step_cost(
                        m, Stack.resolve(m, hw, parallel=par), Step(B, 1, S + j)
                    ).time_s
                )
                assert steps[j] == pytest.approx(ref_j, rel=1e-9)


def test_tp4_llama_70b_serves_where_one_h100_does_not_fit():
    m, hw, p = load_model("llama-3.1-70b"), load_hardware("h100-sxm"), POLICIES["continuous"]
    with pytest.raises(DoesNotFitError):
        build_deployment(m, Stack.resolve(m, hw), p)
    d = build_deployment(m, Stack.resolve(m, hw, parallel=Parallel(tp=4)), p)
    # KV per token on one of 4 TP ranks: 2 (K and V) · L 80 · K/tp = 8/4 kv heads · H 128
    # · 2 bytes (bf16) = 81,920 bytes
    assert d.kv_bytes_per_token == 2 * 80 * 2 * 128 * 2
    # capacity: 90 % of 81,559 MiB (85.52e9 B) = 76.97e9 B, less a quarter of the ~70.6e9
    # parameters' 2 bytes (35.3e9) leaves < 41.7 GB, so below 41.7e9 / 81,920 ≈ 509,033 tokens,
    # and above 40 GB of it (the step activations take well under 1.7 GB)
    assert 40e9 / 81920 < d.pool.kv_capacity_tokens < 41.7e9 / 81920
    w = synthetic(200, 4.0, Lengths("lognormal", 1024), Lengths("lognormal", 256), seed=2)
    r = simulate(w, p, d)
    c = r.counters
    assert (r.completions == 1).all()
    assert c.prefill_tokens + c.decode_tokens == (
        int((w.input_tokens + w.output_tokens - 1).sum())
        + c.recomputed_tokens
        - c.prefix_hit_tokens
    )
    assert (r.first_token_s >= w.arrival_s).all() and (r.finish_s >= r.first_token_s).all()
    for e in r.engines:
        assert max(e.timeline.kv_allocated_tokens) <= d.pool.kv_capacity_tokens


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["serve", "llama-3.1-70b", "--tp", "3"], "does not divide"),
        (["serve", "llama-3.1-8b", "--ep", "2"], "dense model"),
        (["serve", "mixtral-8x7b", "--ep", "2", "--tp", "2"], "not modelled"),
        (["serve", "mixtral-8x7b", "--ep", "3"], "routed experts"),
        (["serve", "llama-3.1-8b", "--pp", "40"], "exceeds"),
        (["serve", "llama-3.1-8b", "--tp", "0"], "at least 1"),
        (["serve", "llama-3.1-70b", "--requests", "10"], "no KV memory"),
        (["serve", "llama-3.1-8b", "--weights", "bf16", "--activations", "fp8"], "wider"),
        (["plot", "serve", "llama-3.1-70b", "--tp", "3", "--output", "x.png"], "does not divide"),
    ],
)
def test_cli_refuses_in_one_line(capsys, args, says):
    code, out, err = run_cli(capsys, *args)
    assert code == 1 and says in err and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_one_shot_all_reduce_falls_back_to_the_ring_inside_serving() -> None:
    """vLLM's one-shot all-reduce on TP 4: piecewise in the message size (one-shot for small
    steps, the ring for a 2048-token prefill), costed exactly by the simulator on both sides."""
    from roofline.spec.catalog import load_engine

    m, hw, eng = load_model("llama-3.1-70b"), load_hardware("h100-sxm"), load_engine("vllm")
    par = Parallel(tp=4)
    c = mixed_step_cost(m, Stack.resolve(m, hw, engine=eng, parallel=par))
    for B, T, S in ((4, 1, 500), (1, 2048, 0), (2, 512, 100)):
        ref = float(
            serving_step_cost(
                m, Stack.resolve(m, hw, engine=eng, parallel=par), Step(B, T, S)
            ).time_s
        )
        got = c.step_s(np.full(B, T, float), np.full(B, S, float))
        assert got == pytest.approx(ref, rel=1e-9)
