"""Speculative decoding in the serving simulator (`roofline.serve.speculation`): the draws, the
schedules worked out by hand, the step costs against `roofline.studies.speculative`, the KV pool the
drafter shares, and the command's refusals."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roofline.calc.placement import Parallel
from roofline.calc.stack import Stack
from roofline.serve.policy import POLICIES
from roofline.serve.simulate import Deployment, Pool, build_deployment, simulate
from roofline.serve.speculation import Speculation, accepted, inverse_log
from roofline.serve.stepcost import affine_spec, mixed_step_cost
from roofline.serve.workload import NO_PREFIX, Workload
from roofline.spec.catalog import engine_catalog, load_engine, load_hardware, load_model
from roofline.spec.precision import released
from roofline.studies.speculative import Drafter, speculative_cost

HEADS = Drafter(head_layer_fraction=0.1)


def workload(arrival, inp, out) -> Workload:
    n = len(arrival)
    return Workload(
        np.asarray(arrival, float),
        np.asarray(inp),
        np.asarray(out),
        np.full(n, NO_PREFIX),
        np.zeros(n, np.int64),
    )


# ---- the draws ----------------------------------------------------------------------------
@pytest.mark.parametrize("alpha", [0.3, 0.6, 0.9])
def test_accepted_drafts_follow_the_truncated_geometric(alpha):
    """P(A ≥ j) = α^j for j ≤ K, and A ≤ K: the mean yield A + 1 is (1 − α^(K+1)) / (1 − α).
    K = 4, 200,000 draws: each frequency within 0.005 (its standard error is ≤ 0.0012)."""
    k, n = 4, 200_000
    a = accepted(inverse_log(np.full(n, alpha)), k, np.random.default_rng(1))
    assert a.min() >= 0 and a.max() <= k
    for j in range(1, k + 1):
        assert np.mean(a >= j) == pytest.approx(alpha**j, abs=0.005)
    assert np.mean(a + 1) == pytest.approx((1 - alpha ** (k + 1)) / (1 - alpha), rel=0.005)


def test_acceptance_zero_and_one_are_exact():
    rng = np.random.default_rng(0)
    assert accepted(inverse_log(np.zeros(1000)), 5, rng).max() == 0
    assert accepted(inverse_log(np.ones(1000)), 5, rng).min() == 5


def test_per_request_acceptance_has_the_stated_mean_and_spread():
    """Beta with mean 0.7 and sd 0.1 over 100,000 requests: sample mean and sd within 0.003;
    no spread gives every request the mean."""
    rng = np.random.default_rng(2)
    a = Speculation(3, 0.7, HEADS, acceptance_sd=0.1).per_request(100_000, rng)
    assert a.mean() == pytest.approx(0.7, abs=0.003)
    assert a.std() == pytest.approx(0.1, abs=0.003)
    assert (a >= 0).all() and (a <= 1).all()
    np.testing.assert_array_equal(Speculation(3, 0.7, HEADS).per_request(10, rng), 0.7)
    # a spread too small to square is none (found by the property below: 1e-308² is 0)
    tiny = Speculation(3, 0.5, HEADS, acceptance_sd=1e-200)
    np.testing.assert_array_equal(tiny.per_request(10, rng), 0.5)


@pytest.mark.parametrize(
    ("k", "alpha", "sd"), [(0, 0.7, 0.0), (65, 0.7, 0.0), (3, 1.2, 0.0), (3, 0.9, 0.3)]
)
def test_speculation_refuses_what_cannot_be(k, alpha, sd):
    """K outside 1..64, α outside [0, 1], and a spread no beta on [0, 1] has
    (0.3² = 0.09 ≥ 0.9 · 0.1)."""
    from roofline.errors import InvalidInputError

    with pytest.raises(InvalidInputError):
        Speculation(k, alpha, HEADS, acceptance_sd=sd)


# ---- schedules worked out by hand (every step 1 s) ----------------------------------------
class OneSecond:
    """Every step takes 1 s, verifying or not."""

    def step_s(self, T, S, verify=0):
        return 1.0

    def decode_s(self, S, steps):
        return np.ones(steps)

    def verify_steps_s(self, S):
        return np.ones(S.shape[0])


# A (t=0), B (t=0.5), C (t=3), each P=4, G=5: the prefill yields token 1.
THREE = workload([0.0, 0.5, 3.0], [4, 4, 4], [5, 5, 5])


def speculating(alpha: float) -> Deployment:
    return Deployment(
        Pool(name="serve", timer=OneSecond(), kv_capacity_tokens=1000),
        1.0,
        speculation=Speculation(3, alpha, HEADS),
    )


def test_every_draft_accepted_finishes_in_one_verification():
    """K = 3, α = 1: a verification yields K + 1 = 4 tokens, all a request has left after its
    prefill. Chunked, budget 16: A prefill [0,1]; A verifies (4 of the budget) beside B's
    4-token prompt [1,2]: A done at 2, B's first token at 2; B verifies [2,3]; C prefill [3,4],
    verifies [4,5]."""
    p = POLICIES["chunked"].with_overrides(max_seqs=4, token_budget=16)
    r = simulate(THREE, p, speculating(1.0), max_seq_len=100)
    np.testing.assert_array_equal(r.first_token_s, [1, 2, 4])
    np.testing.assert_array_equal(r.finish_s, [2, 3, 5])
    c = r.counters
    assert (c.verifications, c.drafted_tokens, c.accepted_tokens) == (3, 9, 9)
    assert c.decode_tokens == 3 * 4  # each verification feeds K + 1 positions


def test_verifications_take_k_plus_1_of_the_token_budget():
    """K = 3, α = 0 (one token per step), chunked with a budget of 6: a verification takes 4 of
    it. A prefill [0,1]; A verifies + B chunk 2 [1,2]; A + B's last 2 [2,3] (B's first token
    at 3); A and B verify [3,4], [4,5] (8 > 6: no room for C, waiting since 3), A's fifth token
    at 5; B + C chunk 2 [5,6]; B + C's last 2 [6,7]: B done at 7, C's first token at 7; C
    verifies alone [7,11]. Without speculation C would be prefilled at [3,4] and finish at 8."""
    p = POLICIES["chunked"].with_overrides(max_seqs=4, token_budget=6)
    r = simulate(THREE, p, speculating(0.0), max_seq_len=100)
    np.testing.assert_array_equal(r.first_token_s, [1, 3, 7])
    np.testing.assert_array_equal(r.finish_s, [5, 7, 11])
    c = r.counters
    assert (c.verifications, c.accepted_tokens) == (12, 0)  # 4 per request, none accepted


def test_a_verification_yields_no_more_than_the_request_has_left():
    """G = 3, K = 3, α = 1: after the prefill's token the verification may keep 4 but the
    request needs 2: it finishes then, and 1 draft counts as accepted (the other token is the
    target's own)."""
    w = workload([0.0], [4], [3])
    r = simulate(
        w,
        POLICIES["chunked"].with_overrides(max_seqs=4, token_budget=16),
        speculating(1.0),
        max_seq_len=100,
    )
    assert r.finish_s[0] == 2.0
    assert (r.counters.verifications, r.counters.accepted_tokens) == (1, 1)


def test_static_batching_cannot_speculate():
    from roofline.errors import InvalidInputError

    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    with pytest.raises(InvalidInputError, match="continuous batching"):
        build_deployment(
            m, Stack.resolve(m, hw), POLICIES["static"], speculation=Speculation(2, 0.5, HEADS)
        )


# ---- step costs against roofline.studies.speculative ---------------------------------------------
@pytest.mark.parametrize("engine", engine_catalog().names())
def test_a_verification_never_costs_less_than_a_plain_decode_step(engine):
    """For every engine profile: B sequences verifying K drafts (T = K + 1, logits at each)
    cost at least their plain decode step (T = 1), on the simulator's fitted step cost."""
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    c = mixed_step_cost(m, Stack.resolve(m, hw, engine=load_engine(engine)))
    for B in (1, 8, 64):
        S = np.full(B, 1000.0)
        plain = c.step_s(np.ones(B), S)
        for k in (1, 2, 4, 8):
            assert c.step_s(np.full(B, k + 1.0), S, verify=B) >= plain * (1 - 1e-12)


def test_vectorised_verification_steps_equal_one_at_a_time():
    """`verify_steps_s` over rows of contexts = `step_s` of each row with every sequence
    verifying (draft model: its K passes over S, S + 1, ..., S + K − 1 included)."""
    from roofline.serve.speculation import speculative_timer

    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    spec = Speculation(4, 0.7, Drafter(model=load_model("llama-3.2-1b")))
    t = speculative_timer(m, Stack.resolve(m, hw), spec)
    S = np.array([[100.0, 2000.0, 37.0], [104.0, 2003.0, 41.0]])
    rows = t.verify_steps_s(S)
    for j in range(2):
        assert rows[j] == pytest.approx(t.step_s(np.full(3, 5.0), S[j], verify=3), rel=1e-12)


@pytest.mark.parametrize(("alpha", "tokens_per_step"), [(1.0, 4), (0.0, 1)])
@pytest.mark.parametrize("drafter", ["draft", "heads"])
def test_a_lone_request_decodes_at_the_cycle_of_speculate(alpha, tokens_per_step, drafter):
    """One request alone (P = 1024, G = 17, K = 3) on H100 with vLLM: every step is one cycle
    of `speculative_cost` (the target verifying K + 1 positions plus the drafter), costed there
    from `step_cost` directly. α = 1 yields K + 1 = 4 tokens a step, α = 0 one: TPOT =
    (E2E − TTFT) / (G − 1) = cycle / tokens per step. The cycle is taken at S = 1024 while the
    simulated contexts grow to 1040 (a few ‰ at most): within 1%."""
    m, hw = load_model("llama-3.1-8b"), affine_spec(load_hardware("h100-sxm"))
    stack = Stack.resolve(m, hw, engine=load_engine("vllm"))
    d = Drafter(model=load_model("llama-3.2-1b")) if drafter == "draft" else HEADS
    spec = Speculation(3, alpha, d)
    cycle = speculative_cost(m, d, stack, 3, alpha, batch=1, context=1024).cycle_s
    dep = build_deployment(m, stack, POLICIES["chunked"], speculation=spec)
    r = simulate(workload([0.0], [1024], [17]), POLICIES["chunked"], dep)
    tpot = (r.finish_s[0] - r.first_token_s[0]) / 16
    assert tpot == pytest.approx(cycle / tokens_per_step, rel=0.01)


def test_mtp_serves_deepseek_v3():
    """DeepSeek-V3 on 8 H200 with its MTP module (MLA, both attention paths): it runs, every
    request completes once, and K = 1 at α = 1 yields 2 tokens per verification."""
    m, hw = load_model("deepseek-v3"), load_hardware("h200")
    stack = Stack.resolve(m, hw, released(m), parallel=Parallel(8, 1, 1))
    spec = Speculation(1, 1.0, Drafter.mtp_of(m))
    dep = build_deployment(m, stack, POLICIES["chunked"], speculation=spec)
    r = simulate(workload([0.0, 0.1, 0.2], [512, 300, 700], [9, 5, 33]), POLICIES["chunked"], dep)
    assert (r.completions == 1).all()
    c = r.counters
    assert c.accepted_tokens == c.drafted_tokens == c.verifications


# ---- the drafter's memory ------------------------------------------------------------------
def test_the_draft_model_shares_the_kv_pool():
    """Llama 3.1 8B with Llama 3.2 1B as its draft on one H100, bf16. KV per token: target
    2 (K, V) · 32 layers · 8 KV heads · 128 · 2 B = 131,072 B; draft 2 · 16 · 8 · 64 · 2 B =
    32,768 B. The draft's weights, 1,235,814,400 parameters (its published total, embedding
    tied) · 2 B = 2.4716 GB, come off the memory the target's KV had. So
    tokens_without · 131,072 − tokens_with · 163,840 = 2.4716 GB, to a token of each."""
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    stack = Stack.resolve(m, hw)
    p = POLICIES["chunked"]
    plain = build_deployment(m, stack, p).pool.kv_capacity_tokens
    spec = Speculation(3, 0.7, Drafter(model=load_model("llama-3.2-1b")))
    with_draft = build_deployment(m, stack, p, speculation=spec)
    weights = 1_235_814_400 * 2
    assert plain * 131_072 - with_draft.pool.kv_capacity_tokens * 163_840 == pytest.approx(
        weights, abs=163_840 + 131_072
    )
    assert with_draft.kv_bytes_per_token == 131_072 + 32_768


# ---- the command ---------------------------------------------------------------------------
BASE = ["serve", "llama-3.1-8b", "--requests", "40", "--rate", "4"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--acceptance", "0.8"], "add --speculate"),
        (["--draft", "llama-3.2-1b"], "add --speculate"),
        (["--speculate", "3"], "needs one drafter"),
        (["--speculate", "3", "--mtp", "--heads", "0.1"], "needs one drafter"),
        (["--speculate", "3", "--draft", "llama-2-7b"], "vocabulary"),
        (["--speculate", "3", "--mtp"], "no multi-token-prediction"),
        (["--speculate", "3", "--heads", "0.1", "--policy", "static"], "continuous batching"),
        (
            [
                "--speculate",
                "3",
                "--heads",
                "0.1",
                "--acceptance",
                "0.9",
                "--acceptance-sd",
                "0.45",
            ],
            "no distribution",
        ),
        (["--speculate", "0", "--heads", "0.1"], "--speculate"),
        (["--speculate", "3", "--heads", "0.1", "--acceptance", "1.5"], "--acceptance"),
    ],
)
def test_serve_refuses_speculation_it_cannot_run(refused, args, says):
    refused(BASE + args, says)


def test_serve_speculates_and_reports_what_the_drafts_did(capsys):
    import json

    from conftest import run_cli

    code, out, err = run_cli(
        capsys,
        *BASE,
        "--speculate",
        "3",
        "--draft",
        "llama-3.2-1b",
        "--acceptance",
        "0.6",
        "--json",
    )
    assert code == 0, err
    d = json.loads(out)["speculation"]
    assert (d["k"], d["acceptance"], d["draft"]) == (3, 0.6, "llama-3.2-1b")
    # accepted of drafted is E[min(A, K)] / K; with α = 0.6, K = 3: (0.6 + 0.36 + 0.216) / 3
    # = 0.392, within the sampling noise of a few thousand drafts
    assert d["acceptance_rate"] == pytest.approx(0.392, abs=0.05)
    code, out, err = run_cli(capsys, *BASE, "--speculate", "2", "--heads", "0.2")
    assert code == 0, err
    assert "drafts accepted" in out


# ---- properties over random workloads ------------------------------------------------------
@pytest.fixture(scope="module")
def eight_b():
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    return m, Stack.resolve(m, hw, engine=load_engine("vllm"))


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    k=st.integers(1, 8),
    alpha=st.floats(0.0, 1.0),
    sd=st.floats(0.0, 0.3),
    policy=st.sampled_from(["continuous", "chunked", "decode-first"]),
    lengths=st.lists(st.tuples(st.integers(1, 3000), st.integers(1, 300)), min_size=1, max_size=12),
    gap=st.floats(0.0, 0.2),
    seed=st.integers(0, 2**16),
)
def test_speculative_serving_conserves_tokens(eight_b, k, alpha, sd, policy, lengths, gap, seed):
    """Whatever the K, acceptance, spread, policy and requests: every request finishes once,
    after its first token; the tokens the verifications yield (accepted drafts + one each) are
    the G − 1 each request generates after its prefill's token (no preemption: the KV pool is
    far larger than these requests); K drafts per verification; a request's gaps add up to
    its finish − first token."""
    from hypothesis import assume

    assume(sd == 0 or sd**2 < alpha * (1 - alpha))
    m, stack = eight_b
    spec = Speculation(k, alpha, HEADS, acceptance_sd=sd)
    w = workload(np.arange(len(lengths)) * gap, [p for p, _ in lengths], [g for _, g in lengths])
    p = POLICIES[policy]
    r = simulate(w, p, build_deployment(m, stack, p, speculation=spec), seed=seed)
    c = r.counters
    assert (r.completions == 1).all() and c.preemptions == 0
    assert (r.finish_s >= r.first_token_s).all() and (r.first_token_s >= w.arrival_s).all()
    assert c.accepted_tokens + c.verifications == int((w.output_tokens - 1).sum())
    assert c.drafted_tokens == k * c.verifications and c.accepted_tokens <= c.drafted_tokens
    gaps, counts = r.gaps
    assert float((gaps * counts).sum()) == pytest.approx(
        float((r.finish_s - r.first_token_s).sum()), rel=1e-9, abs=1e-12
    )
