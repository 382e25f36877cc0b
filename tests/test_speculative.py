"""Speculative decoding: closed form, its Monte-Carlo check, the lossless guarantee, costs."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.calc.cost import step_cost
from roofline.calc.stack import Stack
from roofline.cli import main
from roofline.spec.catalog import load_hardware, load_model
from roofline.spec.operators import Step
from roofline.studies.speculative import (
    Drafter,
    break_even_acceptance,
    expected_tokens_per_step,
    speculative_cost,
)

# A toy vocabulary of 6 tokens: target p, draft q (fixed, so acceptance is i.i.d.).
P = np.array([0.30, 0.25, 0.20, 0.15, 0.07, 0.03])
Q = np.array([0.10, 0.35, 0.25, 0.05, 0.15, 0.10])
ALPHA = np.minimum(P, Q).sum()  # acceptance of one drafted token: Σ min(p, q) = 0.73


@pytest.mark.parametrize(
    "alpha, k, tokens",
    [
        (0.0, 4, 1.0),  # every draft rejected: only the target's own token
        (1.0, 4, 5.0),  # all accepted plus the bonus token: K + 1
        (0.5, 1, 1.5),  # 1 + 0.5
        (0.5, 3, 1 + 0.5 + 0.25 + 0.125),
        (0.8, 4, (1 - 0.8**5) / (1 - 0.8)),  # 3.3616
    ],
)
def test_expected_tokens_golden(alpha: float, k: int, tokens: float) -> None:
    assert expected_tokens_per_step(alpha, k) == pytest.approx(tokens, rel=1e-12)


def _simulate_cycles(k: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """Tokens produced by n cycles: draft x ~ q, accept with min(1, p(x)/q(x)); a cycle
    stops at the first rejection (+1 resampled token) or after K accepts (+1 bonus token)."""
    drafts = rng.choice(len(Q), size=(n, k), p=Q)
    accept = rng.random((n, k)) < np.minimum(1, P[drafts] / Q[drafts])
    accepted_prefix = np.cumprod(accept, axis=1).sum(axis=1)
    return accepted_prefix + 1


@pytest.mark.parametrize("k", [1, 3, 6])
def test_monte_carlo_agrees_with_closed_form(k: int) -> None:
    rng = np.random.default_rng(1234)
    tokens = _simulate_cycles(k, 200_000, rng)
    closed = expected_tokens_per_step(ALPHA, k)
    stderr = tokens.std() / np.sqrt(tokens.size)
    assert abs(tokens.mean() - closed) < 4 * stderr


def test_accepted_tokens_follow_the_target_distribution() -> None:
    """The lossless guarantee: x ~ q kept w.p. min(1, p/q), else resampled from
    norm(max(0, p − q)), is distributed exactly as p."""
    rng = np.random.default_rng(99)
    n = 400_000
    x = rng.choice(len(Q), size=n, p=Q)
    keep = rng.random(n) < np.minimum(1, P[x] / Q[x])
    residual = np.maximum(P - Q, 0)
    residual /= residual.sum()
    out = np.where(keep, x, rng.choice(len(P), size=n, p=residual))
    freq = np.bincount(out, minlength=len(P)) / n
    assert np.abs(freq - P).max() < 4 * np.sqrt(0.25 / n)  # 4 σ of the widest binomial
    # the draft alone is visibly different: the test would catch a lossy rule
    assert np.abs(np.bincount(x, minlength=len(P)) / n - P).max() > 0.1


def test_cycle_costs_come_from_the_calculator() -> None:
    t, d, hw = load_model("llama-3.1-8b"), load_model("llama-3.2-1b"), load_hardware("h100-sxm")
    c = speculative_cost(
        t, Drafter(model=d), Stack.resolve(t, hw), k=4, acceptance=0.8, batch=2, context=1000
    )
    assert c.target_step_s == pytest.approx(float(step_cost(t, hw, Step(2, 1, 1000)).time_s))
    assert c.verify_s == pytest.approx(
        float(step_cost(t, hw, Step(2, 5, 1000, logits="all")).time_s)
    )
    drafts = [float(step_cost(d, hw, Step(2, 1, 1000 + i)).time_s) for i in range(4)]
    assert c.draft_s == pytest.approx(sum(drafts))
    tokens = (1 - 0.8**5) / (1 - 0.8)
    assert c.speedup == pytest.approx(c.target_step_s * tokens / (sum(drafts) + c.verify_s))


@settings(max_examples=30, deadline=None)
@given(st.floats(0, 1), st.integers(1, 8), st.sampled_from([1, 16, 256]))
def test_speedup_at_most_k_plus_one(alpha: float, k: int, batch: int) -> None:
    t, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    for drafter in (Drafter(model=load_model("llama-3.2-1b")), Drafter(head_layer_fraction=0.5)):
        c = speculative_cost(t, drafter, Stack.resolve(t, hw), k=k, acceptance=alpha, batch=batch)
        assert 0 < c.speedup <= k + 1


def test_heads_cost_a_fraction_of_one_layer() -> None:
    t, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    c = speculative_cost(
        t, Drafter(head_layer_fraction=0.5), Stack.resolve(t, hw), k=3, acceptance=0.7
    )
    plain = float(step_cost(t, hw, Step(1, 1, 1024)).time_s)
    fewer = t.model_validate(t.model_dump() | {"layers": 31})
    layer = plain - float(step_cost(fewer, hw, Step(1, 1, 1024)).time_s)
    assert c.draft_s == pytest.approx(3 * 0.5 * layer)
    assert 0.9 * plain / 32 < layer < plain / 32  # a layer is most, not all, of 1/L of a step


def test_break_even_is_where_speedup_is_one() -> None:
    t, d, hw = (
        load_model("llama-3.1-8b"),
        Drafter(model=load_model("llama-3.2-1b")),
        load_hardware("h100-sxm"),
    )
    a = break_even_acceptance(t, d, Stack.resolve(t, hw), k=4)
    assert 0 < a < 1
    assert speculative_cost(t, d, Stack.resolve(t, hw), k=4, acceptance=a).speedup == pytest.approx(
        1, rel=1e-6
    )


def test_llama_3_2_1b_params_by_hand() -> None:
    """config.json: V=128256, D=2048, F=8192, L=16, N=32, K=8, H=64, tied embeddings."""
    embedding = 128_256 * 2_048  # 262,668,288, shared with the LM head
    attention = 2_048 * 32 * 64 * 2 + 2_048 * 8 * 64 * 2  # q, o + k, v: 10,485,760
    mlp = 3 * 2_048 * 8_192  # 50,331,648
    total = embedding + 16 * (attention + mlp + 2 * 2_048) + 2_048
    assert total == 1_235_814_400
    assert load_model("llama-3.2-1b").total_params == total


def test_cli_speculate_json(capsys: pytest.CaptureFixture[str]) -> None:
    main(
        [
            "speculate",
            "llama-3.1-8b",
            "--draft",
            "llama-3.2-1b",
            "--hardware",
            "h100-sxm",
            "--k",
            "1..8",
            "--acceptance",
            "0.6,0.85",
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert len(out["cases"]) == 16
    for case in out["cases"]:
        assert {"k", "acceptance", "expected_tokens_per_step", "speedup"} <= set(case)
    best = {b["acceptance"]: b["best_k"] for b in out["best_k"]}
    assert best[0.85] >= best[0.6]  # better drafts justify longer drafts


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["speculate", "llama-3.1-8b", "--draft", "llama-3.2-1b", "--acceptance", "1.2"], "[0, 1]"),
        (
            ["speculate", "llama-3.1-8b", "--draft", "llama-3.2-1b", "--acceptance", "-0.1"],
            "[0, 1]",
        ),
        (["speculate", "llama-3.1-8b", "--draft", "llama-2-7b"], "vocabulary"),
        (["speculate", "llama-3.1-8b"], "--draft"),
        (["speculate", "llama-3.1-8b", "--draft", "llama-3.2-1b", "--k", "0"], "at least 1"),
        (
            [
                "speculate",
                "llama-3.1-8b",
                "--draft",
                "llama-3.2-1b",
                "--hardware",
                "a100-sxm-80gb",
                "--dtype",
                "fp8",
            ],
            "no fp8",
        ),
    ],
)
def test_cli_refuses(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 1
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1


def test_target_and_draft_must_fit_together(capsys) -> None:
    """Llama-3.1-70B (70,553,706,496 params) drafted by Llama-3.1-8B (8,030,261,248) in bf16:
    141.1 + 16.06 GB of weights alone exceed one H100's 0.9 · 81,559 MiB = 76.97 GB usable.
    Over TP 4 with fp8 weights each GPU holds about (70.55e9 + 8.03e9) / 4 · 1 B ≈ 19.6 GB."""
    from conftest import run_cli

    code, out, _ = run_cli(
        capsys,
        "speculate",
        "llama-3.1-70b",
        "--draft",
        "llama-3.1-8b",
        "--k",
        "4",
        "--acceptance",
        "0.8",
        "--json",
    )
    assert code == 0
    (mem,) = json.loads(out)["memory"]
    weights = (70_553_706_496 + 8_030_261_248) * 2
    # KV at S + K + 1 = 1029 tokens: 2 · (80 + 32) layers · 8 kv heads · 128 · 2 B per token
    kv = 1029 * 2 * (80 + 32) * 8 * 128 * 2
    assert mem["fits"] is False
    # the rest is one step's activations of each model: under 0.2% of the weights
    assert mem["target_bytes"] + mem["draft_bytes"] - kv == pytest.approx(weights, rel=2e-3)
    assert mem["usable_bytes"] == pytest.approx(0.9 * 81_559 * 2**20)
    code, _, err = run_cli(
        capsys, "speculate", "llama-3.1-70b", "--draft", "llama-3.1-8b", "--k", "4", "--require-fit"
    )
    assert code == 1 and "and its draft need" in err and err.count("\n") == 1
    code, out, _ = run_cli(
        capsys,
        "speculate",
        "llama-3.1-70b",
        "--draft",
        "llama-3.1-8b",
        "--k",
        "4",
        "--tp",
        "4",
        "--weights",
        "fp8",
        "--json",
    )
    data = json.loads(out)
    assert code == 0 and data["memory"][0]["fits"] is True
    assert data["parallel"]["tp"] == 4 and data["precision"]["weights"] == "fp8"
    # the draft's quarter: fp8 body, embedding and LM head (2 · 128,256 · 4096 params) kept in
    # bf16 by weight-only formats, plus its KV of 2 of 8 kv heads at 1029 tokens
    ends = 2 * 128_256 * 4096
    draft = ((8_030_261_248 - ends) * 1 + ends * 2) / 4 + 1029 * 2 * 32 * 2 * 128 * 2
    assert data["memory"][0]["draft_bytes"] == pytest.approx(draft, rel=0.01)


# ---- issue 24: a verify step never costs less than a plain one; one host step per cycle ----
@pytest.mark.parametrize("engine", ["vllm", "sglang", "tensorrt-llm", "llama.cpp"])
@pytest.mark.parametrize(("target", "tp"), [("llama-3.1-70b", 4), ("llama-3.1-8b", 1)])
def test_verify_step_costs_at_least_a_plain_step(engine: str, target: str, tp: int) -> None:
    """Verifying K + 1 positions reads the same weights and KV as a plain decode step and
    computes more, in the same decode attention kernel (its fixed cost included) under the
    same CUDA graph: it can never be cheaper. Before, the decode attention fixed cost and the
    graphs vanished for T > 1 (17.40 ms against 18.33 ms for Llama-3.1-70B at TP 4)."""
    from roofline.calc.placement import Parallel
    from roofline.spec.catalog import load_engine
    from roofline.studies.speculative import Drafter, speculative_cost

    m = load_model(target)
    stack = Stack.resolve(
        m, load_hardware("h100-sxm"), engine=load_engine(engine), parallel=Parallel(tp=tp)
    )
    for batch in (1, 8, 64):
        for k in (1, 2, 4, 8):
            c = speculative_cost(m, Drafter(load_model("llama-3.2-1b")), stack, k, 0.7, batch)
            assert c.verify_s >= c.target_step_s, (engine, batch, k)


def test_draft_steps_pay_no_per_step_host_time() -> None:
    """vLLM's host_step_us (0.3 ms: scheduling and input preparation) is paid once per cycle,
    by the verify step; each of the K draft passes runs inside that engine step. So K draft
    passes cost K · (their step time − 0.3 ms)."""
    from roofline.calc.parallel import parallel_step_cost
    from roofline.spec.catalog import load_engine
    from roofline.studies.speculative import Drafter, speculative_cost

    target, draft = load_model("llama-3.1-8b"), load_model("llama-3.2-1b")
    vllm = load_engine("vllm")
    assert vllm.host_step_us == 300
    stack = Stack.resolve(target, load_hardware("h100-sxm"), engine=vllm)
    k = 4
    c = speculative_cost(target, Drafter(draft), stack, k, 0.7, 1, 1024)
    ds = stack.for_model(draft)
    full = sum(float(parallel_step_cost(draft, ds, Step(1, 1, 1024 + i)).time_s) for i in range(k))
    assert c.draft_s == pytest.approx(full - k * 300e-6, rel=1e-9)


# ---- multi-token prediction (DeepSeek-V3's MTP module) -------------------------------------
def test_mtp_module_of_deepseek_v3_by_hand() -> None:
    """One MoE layer of DeepSeek-V3 (D = 7,168, 128 MLA heads, q_lora 1,536, kv_lora 512, RoPE
    64, 256 routed experts and 1 shared of F = 2,048):
      q_a 7168·1536 + norm 1536 + q_b 1536·128·192     = 48,760,320
      kv_a 7168·(512 + 64) + norm 512 + kv_b 512·128·256 = 20,906,496
      o 128·128·7168                                   = 117,440,512
      routed 256·3·7168·2048 + shared 3·7168·2048      = 11,318,329,344
      router 256·7168 + two norms 2·7168               = 1,849,344
      layer                                            = 11,507,286,016
    With eh_proj (2·7168·7168 = 102,760,448) and its own copies of the embedding and LM head
    (2·129,280·7,168 = 1,853,358,080) the checkpoint's module is 13.46B, the 14B by which the
    Hub's 685B exceeds the report's 671B (both rounded to the billion)."""
    from roofline.studies.speculative import mtp_module, mtp_projection

    layer = (
        7168 * 1536 + 1536 + 1536 * 128 * 192
        + 7168 * 576 + 512 + 512 * 128 * 256
        + 128 * 128 * 7168
        + 257 * 3 * 7168 * 2048
        + 256 * 7168 + 2 * 7168
    )  # fmt: skip
    assert layer == 11_507_286_016
    target = load_model("deepseek-v3")
    module = mtp_module(target)
    outer = 2 * 129_280 * 7_168 + 7_168  # embedding, LM head, final norm of the 1-layer model
    assert module.total_params == layer + outer
    eh = int(mtp_projection(target, 1).weight_elems)
    assert eh == 2 * 7168 * 7168 == 102_760_448
    assert abs(layer + eh + outer - 14e9) < 1e9  # 685B − 671B, each rounded to 1B


def test_mtp_draft_costs_k_module_passes_and_holds_no_second_embedding() -> None:
    """K = 2 MTP passes: two decode steps of the one-layer module (no per-step host time)
    plus two eh_proj GEMMs; the pair's memory adds the module's layer and eh_proj, not a
    second embedding or LM head (1/8 of each per GPU at TP 8)."""
    from roofline.calc.placement import Parallel
    from roofline.spec.catalog import load_engine
    from roofline.spec.precision import released
    from roofline.studies.speculative import (
        Drafter,
        mtp_projection,
        mtp_projection_s,
        pair_fit,
        speculative_cost,
    )

    target = load_model("deepseek-v3")
    stack = Stack.resolve(
        target, load_hardware("h200"), released(target), engine=load_engine("vllm"),
        parallel=Parallel(tp=8),
    )  # fmt: skip
    d = Drafter.mtp_of(target)
    c = speculative_cost(target, d, stack, 2, 0.85, 1, 1024)
    ms = stack.for_model(d.model)
    module_steps = sum(
        float(parallel_step_cost_s(d.model, ms, Step(1, 1, 1024 + i))) for i in range(2)
    )
    assert c.draft_s == pytest.approx(module_steps + 2 * mtp_projection_s(target, stack, 1))
    plain = pair_fit(target, d.model, stack, 1, 1024, 2)
    shared = pair_fit(target, d.model, stack, 1, 1024, 2, mtp=True)
    p, prec = d.model.params, stack.precision
    tables = p.embedding * prec.weight_bytes_for("embedding") + p.lm_head * prec.weight_bytes_for(
        "lm_head"
    )
    eh = mtp_projection(target, 1).weight_elems * prec.weight_bytes_for(None)
    assert plain.draft_bytes - shared.draft_bytes == pytest.approx(tables / 8 - eh)
    assert d.mtp and speculative_cost(target, d, stack, 1, 1.0).verify_s >= c.target_step_s


def parallel_step_cost_s(m, stack, step) -> float:
    """A decode step's time without the engine's per-step host time (a draft pass)."""
    from roofline.calc.parallel import parallel_step_cost

    c = parallel_step_cost(m, stack, step)
    return float(c.time_s - c.compute.host_step_s)


def test_mtp_needs_a_module(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        main(["speculate", "llama-3.1-8b", "--mtp"])
    err = capsys.readouterr().err.strip()
    assert e.value.code == 1 and "\n" not in err and "no multi-token-prediction module" in err
    with pytest.raises(SystemExit) as e:
        main(["speculate", "deepseek-v3", "--mtp", "--heads", "0.5"])
    assert e.value.code == 1 and "one of them" in capsys.readouterr().err


# ---- EAGLE heads ---------------------------------------------------------------------------
def test_an_eagle_head_is_one_target_layer_and_its_fc():
    """Llama 3.1 8B's EAGLE head: one of its decoder layers, q 4096·4096 = 16,777,216,
    k and v 4096·1024 = 4,194,304 each, o 16,777,216 (attention 41,943,040), gate, up and down
    3·4096·14336 = 176,160,768; norms 2 per layer + the final one, 3·4096 = 12,288. Beside the
    target on one GPU in bf16 it holds those and its fc, 2·4096·4096 = 33,554,432, not the
    embedding or LM head it shares: 251,670,528 · 2 B = 503,341,056 B."""
    from roofline.studies.speculative import Drafter, draft_weights_bytes

    m = load_model("llama-3.1-8b")
    d = Drafter.eagle_of(m)
    p = d.model.params
    assert (d.model.layers, p.attention, p.mlp, p.norms) == (1, 41_943_040, 176_160_768, 12_288)
    stack = Stack.resolve(m, load_hardware("h100-sxm"))
    assert draft_weights_bytes(m, d.model, stack, mtp=True) == 503_341_056


@pytest.mark.parametrize("target", ["mixtral-8x7b", "gemma-2-9b", "mamba-2.8b", "llama-4-scout"])
def test_an_eagle_head_of_a_target_it_cannot_read_is_refused(refused, target):
    refused(["speculate", target, "--eagle"], "EAGLE head of it is not modelled")
    refused(["serve", target, "--speculate", "2", "--eagle"], "EAGLE head of it is not modelled")


def test_eagle_drafts_in_speculate_and_serve(capsys):
    """A pass of the head (its layer, fc and the shared LM head) costs less than the plain
    target step of 32 layers; `serve` drafts with it too."""
    from conftest import run_cli

    code, out, err = run_cli(
        capsys, "speculate", "llama-3.1-8b", "--eagle", "--k", "1", "--acceptance", "0.7", "--json"
    )
    assert code == 0, err
    case = json.loads(out)["cases"][0]
    assert 0 < case["draft_s"] < case["target_step_s"]
    assert json.loads(out)["draft"].startswith("an EAGLE head")
    code, out, err = run_cli(
        capsys, "serve", "llama-3.1-8b", "--requests", "30", "--speculate", "3", "--eagle", "--json"
    )
    assert code == 0, err
    assert json.loads(out)["speculation"]["draft"].startswith("an EAGLE head")
