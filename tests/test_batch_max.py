"""`--batch max`: the most sequences the engine runs at once, and what binds it."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli

from roofline.calc.phases import estimate
from roofline.calc.placement import Parallel
from roofline.calc.stack import Stack
from roofline.spec.catalog import load_engine, load_hardware, load_model
from roofline.spec.precision import Precision


def _70b_h200_tp2_fp8() -> Stack:
    m = load_model("llama-3.1-70b")
    return Stack.resolve(
        m, load_hardware("h200"), Precision(weights="fp8"), engine=load_engine("vllm"),
        parallel=Parallel(tp=2),
    )  # fmt: skip


def test_batch_max_of_llama_70b_on_two_h200_in_fp8_by_hand() -> None:
    """Llama-3.1-70B, fp8 weights (weight-only: embedding, LM head and norms stay bf16), TP 2 on
    H200 (143,771 MiB = 150,754,820,096 B, vLLM claims 0.9 of it), P + G = 1024 + 256 tokens.

    One GPU's weights, D = 8192, F = 28672, L = 80, V = 128,256, 8 kv heads of H = 128:
      attention per layer per rank  8192·(4096 + 2·512 + 4096) = 75,497,472   (q, k, v, o)
      MLP per layer per rank        3·8192·14336            = 352,321,536
      80 layers at 1 B              80·427,819,008          = 34,225,520,640 B
      norms (replicated) at 2 B     (2·80 + 1)·8192·2       = 2,637,824 B
      embedding + LM head at 2 B    2·⌈128256/2⌉·8192·2     = 2,101,346,304 B
      W                                                      = 36,329,504,768 B
    KV per sequence per GPU at 1280 tokens, bf16: 80·2·(8/2)·128·2·1280 = 209,715,200 B.
    vLLM reserves its profile run whatever the batch (`memory.vllm_profile_reserve_bytes`): the
    larger of a layer of its 8,192-token budget, 8192·(3·8192 + 3·14336)·2 = 1,107,296,256 B
    (residual, normed input and a D-wide output beside the gated FFN's gate-and-up 2F and the
    activation's F, F/2 = 14,336 a rank), and the sampler over its 1,024 sequences on the rank
    that samples, 1024·8192·2 B of hidden states + 1024·128,256 entries · 38 B (16-bit logits,
    their fp32 copy, the sort's values, indices and temporaries) = 5,007,474,688 B; plus
    0.35 GiB = 375,809,638.4 B outside torch at TP > 1: 5,383,284,326.4 B.
    b = ⌊(0.9·150,754,820,096 − 36,329,504,768 − 5,383,284,326.4) / 209,715,200⌋
      = ⌊93,966,548,992 / 209,715,200⌋ = ⌊448.07⌋ = 448, under vLLM's max_num_seqs 1,024."""
    m, stack = load_model("llama-3.1-70b"), _70b_h200_tp2_fp8()
    e = estimate(m, stack, [1, 8, "max"], 1024, 256)
    assert e.fit.weights_bytes == 36_329_504_768
    sampler = 1024 * 8192 * 2 + 1024 * 128_256 * 38
    assert sampler == 5_007_474_688 > 8192 * (3 * 8192 + 3 * 14336) * 2
    profile = sampler + 0.35 * 2**30
    assert (0.9 * 150_754_820_096 - 36_329_504_768 - profile) // 209_715_200 == 448
    assert [c.batch for c in e.cases] == [1, 8, 448]
    assert e.batch_max == {
        "batch": 448,
        "binding": "KV",
        "fits_in_memory": 448,
        "max_num_seqs": 1024,
    }
    assert all(c.fits for c in e.cases)
    assert e.cases[2].throughput_tokens_per_s > e.cases[1].throughput_tokens_per_s


def test_batch_max_stops_at_the_schedulers_limit() -> None:
    """Llama-3.2-1B on one H200 fits thousands of 1,280-token sequences; vLLM schedules at
    most max_num_seqs = 1,024 of them (vllm.yaml), so `max` is 1,024 and says why."""
    m, hw = load_model("llama-3.2-1b"), load_hardware("h200")
    e = estimate(m, Stack.resolve(m, hw, engine=load_engine("vllm")), ["max"], 1024, 256)
    assert e.cases[0].batch == 1024 and e.fit.max_batch > 1024
    assert e.batch_max["binding"] == "max_num_seqs"
    # with no engine there is no scheduler limit: memory binds
    bare = estimate(m, Stack.resolve(m, hw), ["max"], 1024, 256)
    assert bare.cases[0].batch == bare.fit.max_batch and bare.batch_max["binding"] == "KV"


def test_batch_max_when_nothing_fits_is_shown_not_fitting() -> None:
    m, hw = load_model("llama-3.1-405b"), load_hardware("h100-sxm")
    e = estimate(m, Stack.resolve(m, hw), ["max"], 1024, 256)
    assert e.fit.max_batch == 0 and e.batch_max["binding"] == "weights"
    assert e.cases[0].batch == 1 and not e.cases[0].fits and e.shortfall is not None


def test_the_cli_prints_the_batch_and_its_binding(capsys) -> None:
    args = ["estimate", "llama-3.1-70b", "--hardware", "h200", "--tp", "2", "--weights", "fp8"]
    code, out, err = run_cli(capsys, *args, "--batch", "max")
    assert code == 0, err
    assert "batch max = 448: bound by memory (KV)" in " ".join(out.split())
    code, out, err = run_cli(capsys, *args, "--batch", "1,8,max", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert [c["batch"] for c in d["cases"]] == [1, 8, 448] and d["batch_max"]["binding"] == "KV"


@pytest.mark.parametrize("text", ["max,0", "maximum", "1,,x"])
def test_bad_batch_lists_are_refused(refused, text) -> None:
    refused(["estimate", "--batch", text], "batch size")


# ---- plan: `--max-batches ...,max` -----------------------------------------------------
def _plan_groups(model: str, device: str, fmt: str, tp: int, batches: tuple[int, ...]):
    from roofline.plan.groups import build_groups
    from roofline.plan.space import Requirement, Space
    from roofline.studies.economics import load_prices

    space = Space(
        (device,), (fmt,), max_gpus=tp, max_batches=batches, batch_max=True,
        tp=(tp,), pp=(1,), ep=(1,), serving="aggregated",
    )  # fmt: skip
    req = Requirement(1.0, 1024, 256, 1.0, 0.05)
    hw = load_hardware(device)
    engine = load_engine("vllm")
    groups, _ = build_groups(load_model(model), [hw], req, space, load_prices(), engine)
    (g,) = [g for g in groups if g.parallel.tp == tp]
    return g


def test_plan_tries_each_replicas_batch_max_as_estimate_resolves_it() -> None:
    """plan's `max` is estimate's, tried beside the integers asked for. Llama-3.1-70B TP 2 on
    H200 in plan format fp8/bf16: the weights and 16-bit KV of the hand derivation above, but
    fp8 activations (W8A8), so the profile run holds 1 B a value: the sampler's hidden states
    1024·8192·1 B + the same 1024·128,256·38 B of logits (the sort runs on them, not on the
    activations) = 4,999,086,080 B, over the layer's 8192·(3·8192 + 3·14336)·1 = 553,648,128;
    plus 375,809,638.4 B outside torch: 5,374,895,718.4 B.
    b = ⌊(0.9·150,754,820,096 − 36,329,504,768 − 5,374,895,718.4) / 209,715,200⌋
      = ⌊93,974,937,600 / 209,715,200⌋ = ⌊448.11⌋ = 448."""
    profile = 1024 * 8192 * 1 + 1024 * 128_256 * 38 + 0.35 * 2**30
    assert (0.9 * 150_754_820_096 - 36_329_504_768 - profile) // 209_715_200 == 448
    g = _plan_groups("llama-3.1-70b", "h200", "fp8/bf16", 2, (64,))
    assert g.batch_max == 448 and g.batch_max_binding == "KV"
    assert g.max_batches.tolist() == [64, 448]
    assert g.batch_grid.max() == 448  # decode step times reach the largest batch tried
    m = load_model("llama-3.1-70b")
    stack = Stack.resolve(
        m, load_hardware("h200"), Precision("fp8", "fp8", "bf16"), engine=load_engine("vllm"),
        parallel=Parallel(tp=2),
    )  # fmt: skip
    assert estimate(m, stack, ["max"], 1024, 256).batch_max["batch"] == 448


def test_plan_batch_max_stops_at_max_num_seqs() -> None:
    """Llama-3.2-1B on one H200 holds thousands of sequences; vLLM schedules 1,024."""
    g = _plan_groups("llama-3.2-1b", "h200", "bf16", 1, ())
    assert (g.batch_max, g.batch_max_binding) == (1024, "max_num_seqs")
    assert g.max_batches.tolist() == [1024]


@pytest.mark.parametrize(
    ("text", "parsed"),
    [("8,64,max", ((8, 64), True)), ("max", ((), True)), ("16", ((16,), False))],
)
def test_plan_max_batches_option(text: str, parsed: tuple) -> None:
    from roofline.cli.plan import _max_batches

    assert _max_batches(text) == parsed
