"""`roofline serve`: the mixed-batch step cost, hand-computed schedules, invariants, and
rejections of bad workloads."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import run_cli
from hypothesis import example, given, settings
from hypothesis import strategies as st

from roofline.calc.cost import step_cost
from roofline.calc.stack import Stack
from roofline.cli import main
from roofline.errors import InvalidInputError
from roofline.serve.metrics import Summary
from roofline.serve.policy import POLICIES, policy
from roofline.serve.simulate import Deployment, Pool, build_deployment, simulate
from roofline.serve.stepcost import mixed_step_cost, serving_step_cost
from roofline.serve.workload import NO_PREFIX, Lengths, Workload, synthetic
from roofline.spec.catalog import load_hardware, load_model, model_catalog
from roofline.spec.operators import Step
from roofline.spec.precision import released


class OneSecond:
    """Every step takes 1 s, whatever its batch: schedules can be checked by counting steps."""

    def step_s(self, T, S):
        return 1.0

    def decode_s(self, S, steps):
        return np.ones(steps)


class PerToken:
    """0.5 s per step plus 1 ms per new token (prefill costs more than decode)."""

    def step_s(self, T, S):
        return 0.5 + 1e-3 * float(T.sum())

    def decode_s(self, S, steps):
        return np.full(steps, 0.5 + 1e-3 * S.size)


def workload(arrival, inp, out, prefix_id=None, prefix_tokens=None) -> Workload:
    n = len(arrival)
    return Workload(
        np.asarray(arrival, float),
        np.asarray(inp),
        np.asarray(out),
        np.asarray(prefix_id if prefix_id is not None else [NO_PREFIX] * n),
        np.asarray(prefix_tokens if prefix_tokens is not None else [0] * n),
    )


def unified(timer, tokens=1000) -> Deployment:
    return Deployment(
        Pool(name="serve", timer=timer, kv_capacity_tokens=tokens), kv_bytes_per_token=1.0
    )


# ---- the mixed-batch evaluator against step_cost ------------------------------------------
@pytest.mark.parametrize("model", ["llama-3.1-8b", "gpt-3-175b", "falcon-40b", "qwen2.5-7b"])
@pytest.mark.parametrize("hardware", ["h100-sxm", "a10g"])
@pytest.mark.parametrize(
    ("B", "T", "S"), [(1, 1, 0), (64, 1, 1000), (8, 512, 0), (3, 2048, 100), (256, 1, 30000)]
)
def test_mixed_step_cost_equals_step_cost_for_uniform_batches(model, hardware, B, T, S):
    """Every step here has a row count on `stepcost.ROWS_GRID` (B·T = 1, 64, 4096, 6144, 256),
    where the non-affine GEMM terms the simulator adds back are exact."""
    m, hw = load_model(model), load_hardware(hardware)
    mixed = mixed_step_cost(m, Stack.resolve(m, hw)).step_s(
        np.full(B, T, float), np.full(B, S, float)
    )
    assert mixed == pytest.approx(float(step_cost(m, hw, Step(B, T, S)).time_s), rel=1e-9)


# MoE (experts touched by the step's tokens), sliding windows (W = 1024 or 4096: contexts
# inside, straddling and far beyond), SSM / linear-attention state, MLA, hybrids.
@pytest.mark.parametrize(
    "model",
    [
        "mixtral-8x7b",
        "qwen3-30b-a3b",
        "deepseek-v2-lite",
        "mistral-7b-v0.1",
        "gemma-2-9b",
        "gemma-3-27b",
        "characterai-style-illustrative",
        "mamba-2.8b",
        "mamba2-2.7b",
        "jamba-v0.1",
        "minimax-text-01",
    ],
)
@pytest.mark.parametrize(
    ("B", "T", "S"),
    [
        (1, 1, 0),
        (64, 1, 1000),
        (8, 512, 0),
        (3, 2048, 100),
        (256, 1, 30000),
        (5, 1, 4095),
        (2, 300, 3900),
        (7, 1, 9000),
        (1, 40, 1000),
    ],
)
def test_mixed_step_cost_is_exact_for_every_family(model, B, T, S):
    m, hw = load_model(model), load_hardware("h200")
    mixed = mixed_step_cost(m, Stack.resolve(m, hw)).step_s(
        np.full(B, T, float), np.full(B, S, float)
    )
    assert mixed == pytest.approx(
        float(serving_step_cost(m, Stack.resolve(m, hw), Step(B, T, S)).time_s), rel=1e-9
    )


@pytest.mark.parametrize("model", ["llama-3.1-8b", "mixtral-8x7b", "gemma-2-9b", "jamba-v0.1"])
def test_decode_stretch_equals_step_by_step(model):
    """k decode steps of sequences at different contexts (some crossing the window W = 4096)
    cost what the k single steps cost: Σ_j step_s(1, S + j)."""
    c = mixed_step_cost(mm := load_model(model), Stack.resolve(mm, load_hardware("h200")))
    S = np.array([0.0, 4090.0, 100.0, 5000.0, 4095.0])
    steps = c.decode_s(S, 12)
    one_by_one = [c.step_s(np.ones(S.size), S + j) for j in range(12)]
    np.testing.assert_allclose(steps, one_by_one, rtol=1e-12)


def test_window_caps_attention_beyond_it():
    """Mistral 7B v0.1 (every layer local, W = 4096): a decode at S = 20,000 costs what one at
    S = 4,095 costs (both attend W = 4096 keys), and less than the mixed cost without a cap."""
    c = mixed_step_cost(
        mm := load_model("mistral-7b-v0.1"), Stack.resolve(mm, load_hardware("h200"))
    )
    far = c.step_s(np.ones(8), np.full(8, 20_000.0))
    assert far == pytest.approx(c.step_s(np.ones(8), np.full(8, 4095.0)), rel=1e-12)


def test_moe_step_cost_follows_experts_touched():
    """Mixtral (E = 8, k = 2): a one-token step reads k = 2 experts per layer, a 64-token step
    nearly all 8 (8·(1 − (3/4)^64) = 7.99999): decode with 64 sequences costs far more weight
    bytes than with 1, which no affine function of tokens could fit beside the other probes."""
    m, hw = load_model("mixtral-8x7b"), load_hardware("h200")
    c = mixed_step_cost(m, Stack.resolve(m, hw))
    for B in (1, 2, 3, 64):
        assert c.step_s(np.ones(B), np.full(B, 500.0)) == pytest.approx(
            float(serving_step_cost(m, Stack.resolve(m, hw), Step(B, 1, 500)).time_s), rel=1e-9
        )


def test_mixed_batch_is_weights_once_plus_per_sequence_work():
    """A decode at S=100 beside a 64-token chunk costs less than the two steps apart: the
    weights are read once (the shared constant) instead of twice."""
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    c = mixed_step_cost(m, Stack.resolve(m, hw))
    both = c.step_s(np.array([1.0, 64.0]), np.array([100.0, 0.0]))
    apart = c.step_s(np.array([1.0]), np.array([100.0])) + c.step_s(
        np.array([64.0]), np.array([0.0])
    )
    assert both < apart


# ---- schedules worked out by hand (every step 1 s) ----------------------------------------
# Requests A (t=0), B (t=0.5), C (t=3), each P=4, G=5: a prefill yields token 1, each decode
# step one more, so a request needs its prefill step and 4 decode steps.
THREE = workload([0.0, 0.5, 3.0], [4, 4, 4], [5, 5, 5])


@pytest.mark.parametrize(
    ("name", "first", "finish"),
    [
        # prefill-first: A prefill [0,1]; B prefill [1,2] (decodes pause); A,B decode [2,3];
        # C prefill [3,4]; A,B,C decode [4,5] [5,6] [6,7]: A,B have 5 tokens at 7; C decodes [7,8].
        ("continuous", [1, 2, 4], [7, 7, 8]),
        # chunked: A [0,1]; A decode + B chunk [1,2]; [2,3]; A,B decode + C chunk [3,4];
        # A's 4th decode ends at 5, B's at 6, C's at 8.
        ("chunked", [1, 2, 4], [5, 6, 8]),
        # decode-first: A [0,1], B [1,2]; then the batch {A,B} decodes out [2,6] while C waits;
        # C prefill [6,7] and decodes [7,11].
        ("decode-first", [1, 2, 7], [6, 6, 11]),
        # static: batch {A} prefill [0,1], decodes [1,5]; batch {B,C} prefill [5,6], decodes [6,10].
        ("static", [1, 6, 6], [5, 10, 10]),
    ],
)
def test_hand_computed_schedules(name, first, finish):
    p = POLICIES[name].with_overrides(max_seqs=4, token_budget=16)
    r = simulate(THREE, p, unified(OneSecond()), max_seq_len=100)
    np.testing.assert_array_equal(r.first_token_s, first)
    np.testing.assert_array_equal(r.finish_s, finish)


@pytest.mark.parametrize(
    ("name", "first", "finish"),
    [
        # prefill-first: A prefills 3 of its 4 tokens [0,1] (no token); B [1,2]; A,B decode
        # [2,3]: their first tokens at 3; C prefills [3,4]; A,B,C decode [4,5] ... [7,8]: A, B
        # have 5 tokens at 8; C's first came at 5, its fifth at 9.
        ("continuous", [3, 3, 5], [8, 8, 9]),
        # static: {A} prefills [0,1], decodes 5 steps [1,6] (first token at 2); {B,C} prefill
        # [6,7] and decode [7,12] (first tokens at 8).
        ("static", [2, 8, 8], [6, 12, 12]),
    ],
)
def test_first_token_from_a_decode_step(name, first, finish):
    """An engine whose first token comes from a decode step (`first_token: decode`): a prompt
    of P tokens prefills P - 1, the decode step over the last one yields token 1, so every
    request takes one more step than in `test_hand_computed_schedules`; the tokens computed are
    the same, P - 1 + G."""
    p = POLICIES[name].with_overrides(max_seqs=4, token_budget=16)
    d = Deployment(
        Pool(name="serve", timer=OneSecond(), kv_capacity_tokens=1000),
        1.0,
        first_token_from_decode=True,
    )
    r = simulate(THREE, p, d, max_seq_len=100)
    np.testing.assert_array_equal(r.first_token_s, first)
    np.testing.assert_array_equal(r.finish_s, finish)
    c = r.counters
    assert (c.prefill_tokens, c.decode_tokens, c.padding_tokens) == (3 * 3, 3 * 5, 0)


def test_serve_ttft_of_a_first_token_decode_engine_is_prefill_of_p_minus_1_plus_a_step():
    """One request alone: TTFT = the step timer's prefill of P - 1 tokens + its decode step at
    S = P - 1 (lmdeploy), against the prefill of P tokens for an engine that samples token 1
    from the prefill (vllm)."""
    from roofline.spec.catalog import load_engine

    m, hw, P = load_model("llama-2-7b"), load_hardware("a100-sxm-80gb"), 128
    w = workload([0.0], [P], [4])
    for name, decode_first in (("lmdeploy", True), ("vllm", False)):
        d = build_deployment(
            m, Stack.resolve(m, hw, engine=load_engine(name)), POLICIES["continuous"]
        )
        assert d.first_token_from_decode is decode_first
        t = d.pool.timer
        expected = (
            t.step_s(np.array([P - 1.0]), np.zeros(1)) + t.decode_s(np.array([P - 1.0]), 1)[0]
            if decode_first
            else t.step_s(np.array([float(P)]), np.zeros(1))
        )
        r = simulate(w, POLICIES["continuous"], d)
        assert r.first_token_s[0] == pytest.approx(expected, rel=1e-12)


def test_disaggregated_hand_off_waits_for_the_kv_transfer():
    # KV of P=4 tokens at 1 B/token over 8 B/s + 0.25 s latency: 0.25 + 4/8 = 0.75 s.
    # A: prefill [0,1] -> decode pool at 1.75, decodes [1.75, 5.75].
    # B: prefill [1,2] -> 2.75 (a step boundary of A's decodes), finishes 2.75 + 4 = 6.75.
    # C: prefill [3,4] -> 4.75, finishes 8.75.
    d = Deployment(
        Pool(name="prefill", timer=OneSecond(), kv_capacity_tokens=1000),
        1.0,
        Pool(name="decode", timer=OneSecond(), kv_capacity_tokens=1000),
        kv_transfer_bytes_per_s=8.0,
        kv_transfer_latency_s=0.25,
    )
    r = simulate(THREE, POLICIES["disaggregated"].with_overrides(max_seqs=4, token_budget=16), d)
    np.testing.assert_array_equal(r.first_token_s, [1, 2, 4])
    np.testing.assert_array_equal(r.finish_s, [5.75, 6.75, 8.75])


def test_two_requests_with_token_dependent_step_cost():
    # Both arrive at 0 (P=100, P=300; G=3): prefill-first runs them in one step of 400 tokens:
    # 0.5 + 0.4 = 0.9 s. Two decode steps of 2 tokens: 0.502 s each -> 1.904 s.
    w = workload([0.0, 0.0], [100, 300], [3, 3])
    r = simulate(w, POLICIES["continuous"], unified(PerToken(), 10_000))
    np.testing.assert_allclose(r.first_token_s, [0.9, 0.9])
    np.testing.assert_allclose(r.finish_s, [0.9 + 2 * 0.502] * 2)


def test_prefix_cache_skips_the_shared_prompt():
    # Two requests share a 40-token prefix; block 16 -> 32 tokens (2 whole blocks) are cached
    # after the first prefill. The second arrives later and prefills only 48 - 32 = 16 tokens.
    w = workload([0.0, 5.0], [48, 48], [2, 2], prefix_id=[7, 7], prefix_tokens=[40, 40])
    r = simulate(w, POLICIES["chunked+prefix"], unified(PerToken()))
    assert r.counters.prefix_hit_tokens == 32
    assert r.counters.prefill_tokens == 48 + (48 - 32)
    # first token of B: 0.5 + 16 ms after it arrives
    assert r.first_token_s[1] == pytest.approx(5.0 + 0.5 + 0.016)


@pytest.mark.parametrize(
    ("kv", "allocated"),
    [
        # paged, 16-token blocks: ceil(20/16)·16 + ceil(33/16)·16 = 32 + 48 = 80
        ("paged", 80),
        # contiguous: 2 sequences x 50 reserved tokens = 100
        ("contiguous", 100),
    ],
)
def test_kv_fragmentation_formula(kv, allocated):
    w = workload([0.0, 0.0], [20, 33], [3, 3])
    r = simulate(
        w, POLICIES["continuous"].with_overrides(kv=kv), unified(OneSecond()), max_seq_len=50
    )
    tl = r.engines[0].timeline
    assert tl.kv_allocated_tokens[0] == allocated  # after the joint prefill step
    assert tl.kv_stored_tokens[0] == 20 + 33
    # waste = Σ (allocation − tokens): paged 12 + 15 = 27, contiguous 30 + 17 = 47
    assert allocated - tl.kv_stored_tokens[0] == {"paged": 27, "contiguous": 47}[kv]


# ---- invariants ---------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
# Two long requests in 8 blocks took each other's blocks forever (the decoder was preempted
# before a newer partial prompt); the simulator now preempts the newest admitted, as vLLM V1.
@example(17, 52057, "chunked", "recompute", 128, 1, "round-robin", True)
@example(22, 58229, "chunked+prefix", "recompute", 128, 1, "round-robin", True)
@given(
    n=st.integers(1, 25),
    seed=st.integers(0, 2**16),
    name=st.sampled_from(list(POLICIES)),
    preemption=st.sampled_from(["recompute", "swap"]),
    capacity=st.sampled_from([128, 300, 5000]),
    replicas=st.integers(1, 3),
    router=st.sampled_from(["round-robin", "least-loaded"]),
    decode_first=st.booleans(),
)
def test_invariants(n, seed, name, preemption, capacity, replicas, router, decode_first):
    rng = np.random.default_rng(seed)
    inp = rng.integers(1, 60, n)
    out = rng.integers(1, 60, n)
    w = workload(
        np.sort(rng.uniform(0, 20, n)),
        inp,
        out,
        prefix_id=rng.integers(-1, 2, n),
        prefix_tokens=np.minimum(inp, 20),
    )
    p = POLICIES[name].with_overrides(
        max_seqs=8,
        token_budget=32,
        router=router,
        **({} if name == "static" else {"preemption": preemption}),
    )
    pools = [
        Pool(name=x, timer=PerToken(), kv_capacity_tokens=capacity, replicas=replicas)
        for x in ("prefill", "decode")
    ]
    d = (
        Deployment(pools[0], 1.0, pools[1], 50.0, 0.01, first_token_from_decode=decode_first)
        if p.disaggregated
        else Deployment(
            Pool(name="serve", timer=PerToken(), kv_capacity_tokens=capacity, replicas=replicas),
            1.0,
            first_token_from_decode=decode_first,
        )
    )
    r = simulate(w, p, d)
    c = r.counters
    assert (r.completions == 1).all()  # every request completes exactly once
    # tokens conserved: each request ends with P + G - 1 tokens fed (its last is never fed);
    # recomputed KV is fed twice, prefix hits never
    assert c.prefill_tokens + c.decode_tokens == (
        int((inp + out - 1).sum()) + c.recomputed_tokens - c.prefix_hit_tokens
    )
    assert (r.first_token_s >= w.arrival_s).all()
    assert (r.finish_s >= r.first_token_s).all()
    for e in r.engines:
        tl = e.timeline
        start, end = np.asarray(tl.start_s), np.asarray(tl.end_s)
        assert (end > start).all() and (start[1:] >= end[:-1] - 1e-12).all()  # time monotone
        cap = {"serve": capacity, "prefill": capacity, "decode": capacity}[e.pool]
        assert max(tl.kv_allocated_tokens, default=0) <= cap  # memory within capacity


def test_littles_law_in_steady_state():
    """Time-averaged requests in the system = arrival rate x mean time in system (±10 %)."""
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    rate = 4.0
    w = synthetic(3000, rate, Lengths("lognormal", 512), Lengths("lognormal", 128), seed=3)
    r = simulate(
        w, POLICIES["chunked"], build_deployment(m, Stack.resolve(m, hw), POLICIES["chunked"])
    )
    e2e = r.finish_s - w.arrival_s
    lo, hi = np.quantile(w.arrival_s, [0.2, 0.8])  # skip warm-up and drain
    grid = np.linspace(lo, hi, 4000)
    in_system = (
        (w.arrival_s[None, :] <= grid[:, None]) & (r.finish_s[None, :] > grid[:, None])
    ).sum(axis=1)
    window = (w.arrival_s >= lo) & (w.arrival_s <= hi)
    assert in_system.mean() == pytest.approx(rate * e2e[window].mean(), rel=0.10)


def test_continuous_beats_static_on_a_mixed_workload():
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    w = synthetic(400, 8.0, Lengths("lognormal", 1024), Lengths("lognormal", 256), seed=1)
    s = {
        n: Summary(
            simulate(w, POLICIES[n], build_deployment(m, Stack.resolve(m, hw), POLICIES[n])),
            1.0,
            0.1,
        )
        for n in ("static", "continuous")
    }
    assert s["continuous"].throughput_tokens_per_s > s["static"].throughput_tokens_per_s
    assert np.percentile(s["continuous"].e2e_s, 95) < np.percentile(s["static"].e2e_s, 95)


# ---- CLI ----------------------------------------------------------------------------------


def test_cli_json_keys(capsys):
    code, out, _ = run_cli(
        capsys,
        "serve",
        "llama-3.1-8b",
        "--hardware",
        "h100-sxm",
        "--rate",
        "5",
        "--requests",
        "60",
        "--json",
    )
    assert code == 0
    d = json.loads(out)
    assert d["requests_completed"] == 60 and d["throughput_tokens_per_s"] > 0
    for k in ("ttft_s", "tpot_s", "e2e_s"):
        assert set(d[k]) >= {"p50", "p90", "p95", "p99"}
    assert len(d["timeline"]["batch_size"]) == len(d["timeline"]["kv_allocated_bytes"])


def test_cli_compare_lists_each_policy(capsys):
    code, out, _ = run_cli(
        capsys,
        "serve",
        "--requests",
        "40",
        "--json",
        "--compare",
        "static,continuous,chunked,disaggregated",
    )
    assert code == 0
    assert [d["policy"] for d in json.loads(out)["runs"]] == [
        "static",
        "continuous",
        "chunked",
        "disaggregated",
    ]


def test_cli_sweep_rate(capsys):
    code, out, _ = run_cli(
        capsys,
        "serve",
        "--requests",
        "40",
        "--json",
        "--sweep-rate",
        "--rate",
        "2",
        "--slo-ttft",
        "0.5",
        "--slo-tpot",
        "0.05",
    )
    assert code == 0
    d = json.loads(out)
    assert d["best_rate_per_s"] > 0
    assert d["at_best"]["slo"]["attainment"] >= 0.9


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (
            "neg.csv",
            "arrival_s,input_tokens,output_tokens\n0,10,5\n1,-3,5\n",
            "row 3: 'input_tokens' must be at least 1",
        ),
        (
            "long.csv",
            "arrival_s,input_tokens,output_tokens\n0,200000,5\n",
            "request 1: input + output = 200005 tokens exceeds",
        ),
        ("empty.csv", "arrival_s,input_tokens,output_tokens\n", "trace has no requests"),
        (
            "text.csv",
            "arrival_s,input_tokens,output_tokens\n0,ten,5\n",
            "row 2: 'input_tokens' must be a number",
        ),
        ("short.csv", "arrival_s,input_tokens,output_tokens\n0,10\n", "row 2: expected 3 fields"),
        ("nohead.csv", "arrival_s,input_tokens\n0,10\n", "row 1: header lacks column(s) output"),
        (
            "bad.jsonl",
            '{"arrival_s": 0, "input_tokens": 5, "output_tokens": 2}\n{oops\n',
            "row 2: not valid JSON",
        ),
        ("miss.jsonl", '{"arrival_s": 0, "input_tokens": 5}\n', "row 1: missing 'output_tokens'"),
    ],
)
def test_bad_traces_are_refused_with_row_and_reason(tmp_path, capsys, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    code, _, err = run_cli(capsys, "serve", "--trace", str(path))
    assert code == 1
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_trace_is_served(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(
                {
                    "arrival_s": i * 0.1,
                    "input_tokens": 100 + i,
                    "output_tokens": 20,
                    "prefix_id": 1,
                    "prefix_tokens": 64,
                }
            )
            for i in range(20)
        )
    )
    code, out, _ = run_cli(
        capsys, "serve", "--trace", str(path), "--policy", "chunked+prefix", "--json"
    )
    assert code == 0
    d = json.loads(out)
    assert d["requests_completed"] == 20 and d["prefix_hit_tokens"] > 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rate", "0"], "--rate must be positive"),
        (["--policy", "fifo"], "unknown policy 'fifo'"),
        (["--policy", "static", "--kv", "paged"], "static batching reserves contiguous KV"),
        (["--lengths", "zipf"], "unknown length distribution 'zipf'"),
        (["--hardware", "l4", "llama-3.1-70b"], "leave no KV memory on l4"),
    ],
)
def test_bad_options(capsys, args, message):
    code, _, err = run_cli(capsys, "serve", "--requests", "10", *args)
    assert code == 1 and message in err and err.count("\n") == 1


# ---- every catalog model: simulated, or refused in one line -------------------------------
CATALOG = model_catalog().names()
#: Catalog models whose bf16 weights do not fit one H200 (141 GB) with room for KV, and the
#: diffusion LM (not autoregressive): each is refused with one line.
REFUSED = {
    "deepseek-v3": "leave no KV memory",
    "deepseek-v3.1": "leave no KV memory",
    "deepseek-v3.2": "leave no KV memory",
    "kimi-k2": "leave no KV memory",
    "glm-5.1": "leave no KV memory",
    "glm-5": "leave no KV memory",
    "glm-4.7": "leave no KV memory",
    "kimi-k2.5": "leave no KV memory",
    "kimi-k2.6": "leave no KV memory",
    "minimax-m2.5": "leave no KV memory",
    "minimax-m2.7": "leave no KV memory",
    "qwen3-vl-235b-a22b": "leave no KV memory",
    "qwen3-next-80b-a3b": "leave no KV memory",
    # (qwen3.5-27b and qwen3.6-27b serve: vLLM V1 takes each running sequence's delta-net
    # state from the pool instead of reserving 1,024 of them, tests/test_state_in_pool.py)
    "qwen3.5-122b-a10b": "leave no KV memory",
    "qwen3.5-397b-a17b": "leave no KV memory",
    "mistral-large-2": "leave no KV memory",
    "gpt-3-175b": "leave no KV memory",
    "llama-2-70b": "leave no KV memory",
    "llama-3.1-405b": "leave no KV memory",
    "llama-3.1-70b": "leave no KV memory",
    "minimax-text-01": "leave no KV memory",
    "mixtral-8x22b": "leave no KV memory",
    "qwen2.5-72b": "leave no KV memory",
    "llama-3-70b": "leave no KV memory",
    "llama-3.3-70b": "leave no KV memory",
    "qwen3-235b-a22b": "leave no KV memory",
    "dbrx": "leave no KV memory",
    "llada-8b": "diffusion LM",
    "llama-4-scout": "the serving simulator cannot cost mixed batches of it yet",
    "llama-4-maverick": "the serving simulator cannot cost mixed batches of it yet",
}


@pytest.mark.parametrize("name", CATALOG)
def test_every_catalog_model_simulates_or_is_refused(name, capsys):
    args = [
        "serve",
        name,
        "--hardware",
        "h200",
        "--rate",
        "4",
        "--requests",
        "20",
        "--input-tokens",
        "300",
        "--output-tokens",
        "40",
        "--json",
    ]
    if name in REFUSED:
        with pytest.raises(SystemExit) as e:
            main(args)
        err = capsys.readouterr().err.strip()
        assert e.value.code == 1 and "\n" not in err and REFUSED[name] in err
        return
    m, hw, p = load_model(name), load_hardware("h200"), POLICIES["chunked"]
    w = synthetic(20, 4.0, Lengths("lognormal", 300), Lengths("lognormal", 40), seed=1)
    # as `serve` runs it: the model as released (gpt-oss-120b's MXFP4 experts fit one H200)
    d = build_deployment(m, Stack.resolve(m, hw, released(m)), p)
    r = simulate(w, p, d)
    assert (r.completions == 1).all()
    c = r.counters
    assert (
        c.prefill_tokens + c.decode_tokens
        == int((w.input_tokens + w.output_tokens - 1).sum()) + c.recomputed_tokens
    )
    assert (r.first_token_s > w.arrival_s).all() and (r.finish_s >= r.first_token_s).all()
    tl = r.engines[0].timeline
    assert max(tl.kv_allocated_tokens) <= d.pool.kv_capacity_tokens
    assert (np.diff(tl.end_s) > 0).all()
    # the step after the first prefill costs what step_cost says for that uniform shape
    first = np.argmin(w.arrival_s)
    assert tl.end_s[0] - tl.start_s[0] == pytest.approx(
        float(
            serving_step_cost(
                m, Stack.resolve(m, hw, released(m)), Step(1, int(w.input_tokens[first]), 0)
            ).time_s
        ),
        rel=1e-9,
    )
    main(args)
    out = json.loads(capsys.readouterr().out)
    assert out["requests_completed"] == 20


def test_mla_mixed_step_decompresses_the_chunk_and_absorbs_the_decode():
    """DeepSeek-V2-Lite: a step with one decode (S = 1000) and one 512-token prefill chunk
    costs the shared operators once, the absorbed attention for the decode and the naive
    (decompressed) attention for the chunk: more than either alone, less than both steps
    run apart (weights read once)."""
    from roofline.serve.stepcost import MlaPathsStepCost

    m, hw = load_model("deepseek-v2-lite"), load_hardware("h200")
    timer = mixed_step_cost(m, Stack.resolve(m, hw))
    assert isinstance(timer, MlaPathsStepCost)
    T, S = np.array([1.0, 512.0]), np.array([1000.0, 0.0])
    mixed = timer.step_s(T, S)
    stack = Stack.resolve(m, hw)  # as the simulator costs a uniform step (serving_step_cost)
    decode = float(serving_step_cost(m, stack, Step(1, 1, 1000)).time_s)
    chunk = float(serving_step_cost(m, stack, Step(1, 512, 0)).time_s)
    assert max(decode, chunk) < mixed < decode + chunk
    # and it is not the all-absorbed fit's cost of the same step
    assert mixed != pytest.approx(timer.absorbed.step_s(T, S), rel=1e-6)
    # uniform shapes take one path and match step_cost exactly
    assert timer.step_s(np.array([512.0]), np.array([0.0])) == pytest.approx(chunk, rel=1e-9)


@pytest.mark.parametrize(
    "call,api,argv,cli",
    [
        (
            lambda: policy("static").with_overrides(kv="paged"),
            "use `kv=contiguous` with it",
            ["serve", "--policy", "static", "--kv-layout", "paged"],
            "use --kv-layout contiguous with it",
        ),
        (
            lambda: policy("continuous").with_overrides(max_seqs=64, token_budget=8),
            "raise `token_budget`",
            ["serve", "--max-seqs", "64", "--token-budget", "8"],
            "raise --token-budget",
        ),
    ],
)
def test_core_errors_name_parameters_and_the_cli_says_flags(call, api, argv, cli, capsys):
    """The core names the parameter an API caller passed; the CLI prints that command's flag."""
    with pytest.raises(InvalidInputError) as e:
        call()
    assert api in str(e.value)
    with pytest.raises(SystemExit):
        main(argv)
    assert cli in capsys.readouterr().err


# ---- closed loop: a client concurrency limit (vllm bench serve --max-concurrency) ----------
def test_one_client_sends_each_request_when_the_last_finishes():
    """One client, every step 1 s (OneSecond), prompts of 10 and 3 generated tokens, all
    "arriving" at 0: the prefill step yields token 1, two decode steps tokens 2 and 3, so a
    request takes 3 s; request i is sent at 3i s and finishes at 3i + 3; TTFT 1 s and E2E 3 s
    for every one (timed from the send, as the benchmark times them)."""
    w = workload([0.0] * 4, [10] * 4, [3] * 4)
    r = simulate(w, POLICIES["chunked"], unified(OneSecond()), max_concurrency=1)
    assert r.workload.arrival_s.tolist() == [0.0, 3.0, 6.0, 9.0]
    assert r.finish_s.tolist() == [3.0, 6.0, 9.0, 12.0]
    s = Summary(r, 10.0, 10.0)
    assert s.ttft_s.tolist() == [1.0] * 4 and s.e2e_s.tolist() == [3.0] * 4


@pytest.mark.parametrize("clients", [1, 2, 5])
def test_never_more_requests_in_flight_than_clients(clients):
    rng = np.random.default_rng(clients)
    n = 30
    w = workload(np.zeros(n), rng.integers(1, 60, n), rng.integers(1, 40, n))
    r = simulate(w, POLICIES["chunked"], unified(PerToken(), 5000), max_concurrency=clients)
    sent, done = r.workload.arrival_s, r.finish_s
    assert (r.completions == 1).all()
    for t in np.unique(sent):  # in flight just after each send: sent by then, not yet done
        assert int(((sent <= t) & (done > t)).sum()) <= clients
    assert max(r.engines[0].timeline.seqs) <= clients
    # the first `clients` go out at once; each later one waits for a finish
    assert (sent[:clients] == 0).all() and (sent[clients:] > 0).all()
    assert set(sent[clients:]) <= set(done)


def test_clients_enough_for_everyone_is_the_open_loop():
    w = workload([0.0, 0.5, 0.5, 2.0], [30, 20, 10, 5], [5, 4, 3, 2])
    p, d = POLICIES["chunked"], unified(PerToken())
    open_loop, closed = simulate(w, p, d), simulate(w, p, d, max_concurrency=4)
    assert closed.finish_s.tolist() == open_loop.finish_s.tolist()
    assert closed.workload.arrival_s.tolist() == w.arrival_s.tolist()


def test_closed_loop_refuses_disaggregated_serving():
    pools = [
        Pool(name=x, timer=PerToken(), kv_capacity_tokens=1000, replicas=1)
        for x in ("prefill", "decode")
    ]
    d = Deployment(pools[0], 1.0, pools[1], 50.0, 0.01)
    w = workload([0.0], [10], [3])
    with pytest.raises(InvalidInputError, match="aggregated"):
        simulate(w, POLICIES["disaggregated"], d, max_concurrency=1)


@pytest.mark.parametrize(
    ("engine", "expected"),
    [("vllm", "chunked+prefix"), ("sglang", "continuous+prefix"), ("tensorrt-llm", "continuous")],
)
def test_serve_and_plan_run_the_engines_own_scheduler_by_default(engine, expected, capsys):
    """vLLM V1 always chunks prefill and caches prefixes (vllm.yaml scheduler_source); SGLang
    too; an engine whose scheduler is not characterised keeps continuous batching. plan's
    simulated check runs the same policy as the `serve` line it prints."""
    from roofline.plan.space import scheduler_policy
    from roofline.spec.catalog import load_engine

    code, out, _ = run_cli(
        capsys, "serve", "llama-3.2-1b", "--requests", "20", "--engine", engine, "--json"
    )
    assert code == 0 and json.loads(out)["policy"] == expected
    assert scheduler_policy(64, False, load_engine(engine)).name == expected


def test_a_preemption_livelock_stops_with_its_state(monkeypatch) -> None:
    """Issue 42: once in six runs the invariant test spun for minutes. A scheduler that keeps
    evicting (here: any preemption beyond a limit set to zero, under a KV pool of 64 tokens
    that 4 requests of 30 + 30 outgrow) stops with one message naming its counts and time,
    instead of hanging."""
    import roofline.serve.schedulers as sch

    w = workload([0, 0, 0, 0], [30] * 4, [30] * 4)
    p = POLICIES["continuous"].with_overrides(max_seqs=4, token_budget=64)
    ok = simulate(w, p, unified(PerToken(), 64))
    assert ok.counters.preemptions > 0 and (ok.completions == 1).all()  # pressure, served
    monkeypatch.setattr(sch, "PREEMPTIONS_PER_REQUEST", 0)
    monkeypatch.setattr(sch, "LIVELOCK_SLACK", 0)
    with pytest.raises(RuntimeError, match=r"preemption livelock: 1 preemptions for 4 requests"):
        simulate(w, p, unified(PerToken(), 64))
