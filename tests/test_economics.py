"""Cost and energy per token: hand-derived cases, the price table and its overrides."""

from __future__ import annotations

import math

import numpy as np
import pytest

from roofline.calc.phases import estimate
from roofline.calc.power import power_terms
from roofline.calc.stack import Stack
from roofline.errors import InvalidInputError, SpecError
from roofline.spec.catalog import hardware_catalog, load_engine, load_hardware, load_model
from roofline.studies.economics import (
    cost_per_million_tokens,
    estimate_economics,
    joules_per_token,
    load_prices,
    parse_price_options,
)


def test_cost_per_million_tokens_by_hand():
    # 8 GPUs at $2.50/GPU-hour = $20/h = 20/3600 $/s; at 4000 tok/s that is
    # 20 / 3600 / 4000 = 1.3889e-6 $/token = $1.3889 per million tokens
    assert cost_per_million_tokens(2.5, 8, 4000) == pytest.approx(20 / 3600 / 4000 * 1e6)
    assert cost_per_million_tokens(2.5, 8, 4000) == pytest.approx(1.388889, rel=1e-6)


def test_joules_per_token_by_hand():
    # 2 GPUs at 500 W = 1000 J/s over 1000 tok/s = 1 J/token
    assert joules_per_token(500, 2, 1000) == pytest.approx(1.0)


def test_bundled_prices_and_overrides():
    t = load_prices()
    # the lower median of 6 providers' dated on-demand figures (benchmarks/derive/prices.py):
    # 3.85 Nebius, 3.99 RunPod, 4.29 Lambda, 6.1489 Vast.ai, 6.88 AWS, 12.29 Azure -> index 2
    assert t.usd_per_gpu_hour("h100-sxm") == 4.29  # Lambda 1x H100 SXM, read 2026-09-25
    # discounted: 2.69 RunPod community, 6.571 GCP spot -> index 0
    assert t.usd_per_gpu_hour("h100-sxm", "discounted") == 2.69  # Community Cloud
    o = parse_price_options(["h100-sxm=2.1", "mi300x=1"])
    assert o.usd_per_gpu_hour("h100-sxm") == 2.1
    assert o.usd_per_gpu_hour("h100-sxm", "discounted") == 2.1  # an override wins every tier
    assert o.citation("h100-sxm") == "given by the user"
    assert o.usd_per_gpu_hour("h200") == 4.5  # Nebius 4.5 and RunPod 4.59 -> the lower


def test_price_yaml_file(tmp_path):
    f = tmp_path / "prices.yaml"
    f.write_text(
        "devices:\n  h100-sxm:\n    on_demand_usd_per_gpu_hour: 1.5\n"
        "    source: contract\n    date: '2026-12-01'\n"
    )
    t = parse_price_options([str(f), "h200=3"])
    assert t.usd_per_gpu_hour("h100-sxm") == 1.5
    assert t.usd_per_gpu_hour("h200") == 3
    with pytest.raises(InvalidInputError, match="no on-demand price for a100-sxm-80gb"):
        t.usd_per_gpu_hour("a100-sxm-80gb")
    f.write_text("devices:\n  h100-sxm:\n    on_demand_usd_per_gpu_hour: -1\n")
    with pytest.raises(SpecError, match="on_demand_usd_per_gpu_hour"):
        parse_price_options([str(f)])


@pytest.mark.parametrize(
    "bad, needle",
    [("h100-sxm=abc", "not a number"), ("h100-sxm=0", "must be a positive, finite number")],
)
def test_bad_price_option(bad, needle):
    with pytest.raises(InvalidInputError, match=needle):
        parse_price_options([bad])


def test_missing_price_names_the_device_and_the_fix():
    """The core names the parameter (`price=...`); the CLI says it as the flag."""
    from roofline.cli.common import with_flags

    with pytest.raises(InvalidInputError, match="`price=gb200=USD_PER_GPU_HOUR`") as e:
        load_prices().usd_per_gpu_hour("gb200")
    assert with_flags(str(e.value)).endswith("pass --price gb200=USD_PER_GPU_HOUR")


def test_price_table_entries_are_catalog_devices_with_source_and_date():
    names = set(hardware_catalog().names())
    for name, e in load_prices().devices.items():
        assert name in names, name
        if e.on_demand_usd_per_gpu_hour is not None:
            assert e.source and e.date, name
        else:
            assert e.note, name  # a missing price says why


def test_estimate_economics_by_hand():
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    e = estimate(m, Stack.resolve(m, hw), [1, 64])
    full, half = estimate_economics(e, 3.49), estimate_economics(e, 3.49, utilisation=0.5)
    c = e.cases[1]
    # $3.49/h over B·G/E2E tokens/s, one GPU
    assert full[1].cost_per_million_tokens_usd == pytest.approx(
        3.49 / 3600 / c.throughput_tokens_per_s * 1e6
    )
    # busy half the time: the same $/h over half the tokens
    assert half[1].cost_per_million_tokens_usd == pytest.approx(
        2 * full[1].cost_per_million_tokens_usd
    )
    # batching spreads the same power over more tokens
    assert full[1].joules_per_token < full[0].joules_per_token
    pw = power_terms(hw)
    for x in full:
        assert pw.static_w < x.power_w <= pw.cap_w
    assert half[0].power_w == pytest.approx((full[0].power_w + pw.static_w) / 2)
    assert math.isclose(full[0].joules_per_token, full[0].power_w / full[0].tokens_per_s)
    with pytest.raises(InvalidInputError, match="utilisation"):
        estimate_economics(e, 3.49, utilisation=0)


def test_serve_economics_by_hand():
    """Disaggregated: an H100 prefill replica and an H200 decode replica. Each replica's energy
    is its recorded steps at their power plus the static power over the rest of the run."""
    from roofline.serve.metrics import Summary
    from roofline.serve.policy import POLICIES
    from roofline.serve.simulate import build_deployment, simulate
    from roofline.serve.workload import Lengths, synthetic
    from roofline.studies.economics import serve_economics, timeline_busy_share

    m, h100, h200 = load_model("llama-3.1-8b"), load_hardware("h100-sxm"), load_hardware("h200")
    w = synthetic(100, 4.0, Lengths("fixed", 256), Lengths("fixed", 64), seed=0)
    p = POLICIES["disaggregated"]
    d = build_deployment(m, Stack.resolve(m, h100), p, prefill_hw=h100, decode_hw=h200)
    s = Summary(simulate(w, p, d), 1.0, 0.1)
    e = serve_economics(s, {"h100-sxm": h100, "h200": h200}, load_prices())
    # one H100 prefill replica ($4.29/h) + one H200 decode replica ($4.50/h): bundled table
    assert e.usd_per_hour == pytest.approx(4.29 + 4.5)
    assert e.cost_per_million_tokens_usd == pytest.approx(
        8.79 / 3600 / s.throughput_tokens_per_s * 1e6
    )
    T, joules = s.duration_s, 0.0
    for x, pool, hw in zip(s.result.engines, d.pools, (h100, h200), strict=True):
        tl, pw = x.timeline, power_terms(hw)
        dt = np.asarray(tl.end_s) - np.asarray(tl.start_s)
        b = timeline_busy_share(m, pool.stack, tl, 256 + 64 / 2)
        joules += float(np.sum(pw.power_w(b) * dt)) + pw.static_w * (T - dt.sum())
        assert b.min() > 0 and b.max() <= 1
    assert e.joules_per_token == pytest.approx(joules / (100 * 64))
    assert e.power_w == pytest.approx(joules / (2 * T))
    # a run that idles most of the time sits between static power and the cap
    assert 72.0 < e.power_w < 700


def test_estimate_and_serve_agree_on_one_steady_state():
    """The same deployment, B = 32 sequences of P = 1024 and G = 256 sent together, held by
    static batching (prefill all, then decode all): `estimate` at batch 32 and `serve` of that
    burst run the same steps, so their J/token agree within 5%."""
    from roofline.serve.metrics import Summary
    from roofline.serve.policy import policy
    from roofline.serve.simulate import build_deployment, simulate
    from roofline.serve.workload import NO_PREFIX, Workload
    from roofline.studies.economics import serve_economics

    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    stack = Stack.resolve(m, hw, engine=load_engine("vllm"))
    est = estimate(m, stack, [32], 1024, 256)
    by_estimate = estimate_economics(est, 3.49)[0].joules_per_token
    B = 32
    w = Workload(
        np.zeros(B), np.full(B, 1024), np.full(B, 256), np.full(B, NO_PREFIX), np.zeros(B, int)
    )
    p = policy("static", stack.engine).on(stack.memory)
    s = Summary(simulate(w, p, build_deployment(m, stack, p)), math.inf, math.inf)
    by_serve = serve_economics(s, {hw.name: hw}, load_prices()).joules_per_token
    assert by_serve == pytest.approx(by_estimate, rel=0.05)


def test_serve_prints_cost_line(capsys):
    from roofline.cli import main

    main(["serve", "llama-3.1-8b", "--requests", "50", "--hardware", "h100-sxm"])
    out = capsys.readouterr().out
    assert "cost: $4.29/h" in out and "per million output tokens" in out and "J/token" in out


def test_estimate_json_carries_cost_and_energy(capsys) -> None:
    """`estimate --price h100-sxm=2 --json`: $2/GPU-hour over one GPU's throughput,
    2 / 3600 / (B·G / E2E) · 1e6 dollars per million output tokens."""
    import json

    from conftest import run_cli

    code, out, _ = run_cli(
        capsys, "estimate", "llama-3.1-8b", "--batch", "1,16", "--price", "h100-sxm=2", "--json"
    )
    d = json.loads(out)
    assert code == 0 and d["economics"]["price_usd_per_gpu_hour"] == 2.0
    for case, econ in zip(d["cases"], d["economics"]["cases"], strict=True):
        expected = 2.0 / 3600 / case["throughput_tokens_per_s"] * 1e6
        assert econ["cost_per_million_output_tokens_usd"] == pytest.approx(expected)
        assert econ["joules_per_output_token"] == pytest.approx(
            econ["power_w_per_gpu"] / case["throughput_tokens_per_s"]
        )


def test_unpriced_device_says_how_to_price_it(capsys) -> None:
    import json

    from conftest import run_cli

    code, out, _ = run_cli(capsys, "estimate", "llama-3.1-8b", "-H", "gaudi2", "--json")
    d = json.loads(out)
    assert code == 0 and d["economics"]["cases"] == []
    assert "--price gaudi2=USD" in d["economics"]["price_source"]
