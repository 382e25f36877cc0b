"""Inter-token latency as `vllm bench serve` takes it: every gap between a request's streamed
outputs (`state.Gaps`), not each request's mean gap."""

from __future__ import annotations

import numpy as np
import pytest

from roofline.calc.stack import Stack
from roofline.serve.metrics import Summary, weighted_percentile
from roofline.serve.policy import POLICIES
from roofline.serve.simulate import Deployment, Pool, build_deployment, simulate
from roofline.serve.speculation import Speculation
from roofline.serve.workload import NO_PREFIX, Lengths, Workload, synthetic
from roofline.spec.catalog import load_hardware, load_model
from roofline.studies.speculative import Drafter


def workload(arrival, inp, out) -> Workload:
    n = len(arrival)
    return Workload(
        np.asarray(arrival, float),
        np.asarray(inp),
        np.asarray(out),
        np.full(n, NO_PREFIX),
        np.zeros(n, np.int64),
    )


class PerToken:
    """0.5 s per step plus 1 ms per new token."""

    def step_s(self, T, S):
        return 0.5 + 1e-3 * float(T.sum())

    def decode_s(self, S, steps):
        return np.full(steps, 0.5 + 1e-3 * S.size)


def test_a_prefill_chunk_shows_in_the_gaps():
    """Chunked, budget 200. A (t=0, P=4, G=3) prefills [0, 0.504]: its first token. B (t=0.5,
    P=100, G=2) is chunked beside A's decode: 0.5 + 0.101 = 0.601 s, A's second token at
    1.105 (a gap of 0.601) and B's first. Both then decode one step, 0.5 + 0.002 = 0.502 s:
    A's third token and B's second at 1.607. Gaps 0.601, 0.502, 0.502: p50 0.502, p99 at rank
    0.99 · 2 = 1.98 of the sorted three, 0.502 + 0.98 · 0.099 = 0.59902, mean 1.605 / 3.
    Each request's mean gap (TPOT) would have put the top at A's (1.607 − 0.504) / 2 = 0.5515."""
    p = POLICIES["chunked"].with_overrides(max_seqs=4, token_budget=200)
    d = Deployment(
        Pool(name="serve", timer=PerToken(), kv_capacity_tokens=1000), kv_bytes_per_token=1.0
    )
    s = Summary(simulate(workload([0.0, 0.5], [4, 100], [3, 2]), p, d, 200), 1.0, 1.0)
    gaps, counts = s.itl_s
    np.testing.assert_allclose(np.repeat(gaps, counts.astype(int)).round(9), [0.601, 0.502, 0.502])
    itl = s.as_dict()["itl_s"]
    assert itl["p50"] == pytest.approx(0.502)
    assert itl["p99"] == pytest.approx(0.59902)
    assert itl["mean"] == pytest.approx(1.605 / 3)


@pytest.fixture(scope="module")
def llama():
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    w = synthetic(
        300,
        12.0,
        Lengths("lognormal", 1024, sigma=0.8),
        Lengths("lognormal", 128, sigma=0.8),
        seed=4,
    )
    return m, Stack.resolve(m, hw), w


@pytest.mark.parametrize("name", list(POLICIES))
@pytest.mark.parametrize("speculate", [False, True])
def test_each_requests_gaps_add_up_to_its_decode_time(llama, name, speculate):
    """For every policy, speculating or not: the gaps sum to Σ (finish − first token) over the
    requests (a request's gaps telescope), and without speculation there is one gap per token
    after the first, Σ (G − 1); with it, one per verification."""
    m, stack, w = llama
    spec = Speculation(3, 0.6, Drafter(head_layer_fraction=0.2)) if speculate else None
    if spec is not None and name == "static":
        return  # refused (tests/test_serve_speculation.py)
    p = POLICIES[name]
    r = simulate(w, p, build_deployment(m, stack, p, speculation=spec))
    gaps, counts = r.gaps
    many = w.output_tokens > 1
    decode_s = float((r.finish_s - r.first_token_s)[many].sum())
    assert float((gaps * counts).sum()) == pytest.approx(decode_s, rel=1e-9)
    expected = r.counters.verifications if speculate else int((w.output_tokens - 1).sum())
    assert counts.sum() == expected


def test_preemptions_show_in_the_tail(llama):
    """KV for a few sequences only, recompute preemption: the gaps still add up, and the
    largest gap, over a preemption and the re-prefill, is many typical gaps long."""
    m, stack, w = llama
    p = POLICIES["continuous"]
    d = build_deployment(m, stack, p)
    tight = Deployment(
        Pool(name="serve", timer=d.pool.timer, kv_capacity_tokens=6000),
        d.kv_bytes_per_token,
        memory=d.memory,
    )
    r = simulate(w, p, tight)
    assert r.counters.preemptions > 0
    gaps, counts = r.gaps
    many = w.output_tokens > 1
    assert float((gaps * counts).sum()) == pytest.approx(
        float((r.finish_s - r.first_token_s)[many].sum()), rel=1e-9
    )
    median = weighted_percentile(gaps, counts, 50)
    assert gaps.max() > 10 * median
