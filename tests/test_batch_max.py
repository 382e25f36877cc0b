"""`--batch max`: the most sequences the engine runs at once, and what binds it."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli

from roofline.catalog import load_engine, load_hardware, load_model
from roofline.phases import estimate
from roofline.placement import Parallel
from roofline.precision import Precision
from roofline.stack import Stack


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
    vLLM reserves its profile run whatever the batch: its 8,192-token budget over its 1,024
    sequences, 8192·(2·8192 + 3·14336)·2 = 973,078,528 B of hidden states (the gated FFN's
    gate-and-up 2F beside the activation's F, F/2 = 14,336 a rank) and 1024 · ⌈V/2⌉ = 64,128
    entries · 12 B (fp32 logits, softmax, log-softmax) = 788,004,864 B: 1,761,083,392 B.
    b = ⌊(0.9·150,754,820,096 − 36,329,504,768 − 1,761,083,392) / 209,715,200⌋
      = ⌊97,588,749,926.4 / 209,715,200⌋ = ⌊465.34⌋ = 465, under vLLM's max_num_seqs 1,024."""
    m, stack = load_model("llama-3.1-70b"), _70b_h200_tp2_fp8()
    e = estimate(m, stack, [1, 8, "max"], 1024, 256)
    assert e.fit.weights_bytes == 36_329_504_768
    profile = 8192 * (2 * 8192 + 3 * 14336) * 2 + 1024 * 64_128 * 12
    assert profile == 1_761_083_392
    assert (0.9 * 150_754_820_096 - 36_329_504_768 - profile) // 209_715_200 == 465
    assert [c.batch for c in e.cases] == [1, 8, 465]
    assert e.batch_max == {
        "batch": 465,
        "binding": "KV",
        "fits_in_memory": 465,
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
    assert "batch max = 465: bound by memory (KV)" in " ".join(out.split())
    code, out, err = run_cli(capsys, *args, "--batch", "1,8,max", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert [c["batch"] for c in d["cases"]] == [1, 8, 465] and d["batch_max"]["binding"] == "KV"


@pytest.mark.parametrize("text", ["max,0", "maximum", "1,,x"])
def test_bad_batch_lists_are_refused(refused, text) -> None:
    refused(["estimate", "--batch", text], "batch size")


# ---- plan: `--max-batches ...,max` -----------------------------------------------------
def _plan_groups(model: str, device: str, fmt: str, tp: int, batches: tuple[int, ...]):
    from roofline.economics import load_prices
    from roofline.plan.groups import build_groups
    from roofline.plan.space import Requirement, Space

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
    fp8 activations (W8A8), so the profile run's 8,192-token step reserves 1 B a value:
    8192·(2·8192 + 3·14336)·1 = 486,539,264 B instead of 973,078,528, beside the same
    788,004,864 B of fp32 sampling over 1,024 sequences: 1,274,544,128 B.
    b = ⌊(0.9·150,754,820,096 − 36,329,504,768 − 1,274,544,128) / 209,715,200⌋
      = ⌊98,075,289,190.4 / 209,715,200⌋ = ⌊467.66⌋ = 467."""
    profile = 8192 * (2 * 8192 + 3 * 14336) * 1 + 1024 * 64_128 * 12
    assert (0.9 * 150_754_820_096 - 36_329_504_768 - profile) // 209_715_200 == 467
    g = _plan_groups("llama-3.1-70b", "h200", "fp8/bf16", 2, (64,))
    assert g.batch_max == 467 and g.batch_max_binding == "KV"
    assert g.max_batches.tolist() == [64, 467]
    assert g.batch_grid.max() == 467  # decode step times reach the largest batch tried
    m = load_model("llama-3.1-70b")
    stack = Stack.resolve(
        m, load_hardware("h200"), Precision("fp8", "fp8", "bf16"), engine=load_engine("vllm"),
        parallel=Parallel(tp=2),
    )  # fmt: skip
    assert estimate(m, stack, ["max"], 1024, 256).batch_max["batch"] == 467


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
