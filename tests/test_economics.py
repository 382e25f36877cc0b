"""Cost and energy per token: hand-derived cases, the price table and its overrides."""

from __future__ import annotations

import math

import pytest

from roofline.catalog import hardware_catalog, load_hardware, load_model
from roofline.cost import Ceilings
from roofline.economics import (
    IDLE_FRACTION_OF_TDP,
    MEMORY_ROOF_POWER_SHARE,
    cost_per_million_tokens,
    estimate_economics,
    joules_per_token,
    load_prices,
    parse_price_options,
    power_model,
    roof_utilisation,
)
from roofline.errors import InvalidInputError, SpecError
from roofline.phases import estimate
from roofline.stack import Stack


def test_cost_per_million_tokens_by_hand():
    # 8 GPUs at $2.50/GPU-hour = $20/h = 20/3600 $/s; at 4000 tok/s that is
    # 20 / 3600 / 4000 = 1.3889e-6 $/token = $1.3889 per million tokens
    assert cost_per_million_tokens(2.5, 8, 4000) == pytest.approx(20 / 3600 / 4000 * 1e6)
    assert cost_per_million_tokens(2.5, 8, 4000) == pytest.approx(1.388889, rel=1e-6)


def test_joules_per_token_by_hand():
    # 2 GPUs at 500 W = 1000 J/s over 1000 tok/s = 1 J/token
    assert joules_per_token(500, 2, 1000) == pytest.approx(1.0)


def test_power_model_idle_and_tdp():
    pm = power_model(load_hardware("h100-sxm"))
    # idle = 80.3 W / 700 W x 700 W = 80.3 W; full = TDP; half way = 80.3 + 0.5 x 619.7
    assert pm.idle_w == pytest.approx(80.3)
    assert pm.power_w(0.0) == pytest.approx(80.3)
    assert pm.power_w(1.0) == pytest.approx(700.0)
    assert pm.power_w(0.5) == pytest.approx(80.3 + 0.5 * 619.7)
    assert pm.power_w(3.0) == pytest.approx(700.0)  # clipped
    assert pytest.approx(0.1147, abs=1e-4) == IDLE_FRACTION_OF_TDP


def test_roof_utilisation_memory_and_compute():
    hw = load_hardware("h100-sxm")
    c = Ceilings.of(hw, "bf16", "achievable")
    bw, peak = c.bytes_per_s, c.flops_per_s  # achievable β and F
    # a 1 s step streaming β bytes and no FLOPs sits on the memory roof only
    assert roof_utilisation(0.0, bw, 1.0, hw, "bf16") == pytest.approx(MEMORY_ROOF_POWER_SHARE)
    # (267 - 80.3) / (700 - 80.3) = 0.30127
    assert pytest.approx(0.30127, abs=1e-5) == MEMORY_ROOF_POWER_SHARE
    assert roof_utilisation(peak, 0.0, 1.0, hw, "bf16") == pytest.approx(1.0)
    assert roof_utilisation(peak / 4, 0.0, 1.0, hw, "bf16") == pytest.approx(0.25)


def test_power_model_refuses_a_spec_without_tdp():
    hw = load_hardware("h100-sxm").model_copy(update={"tdp_w": None})
    with pytest.raises(InvalidInputError, match="tdp_w"):
        power_model(hw)


def test_bundled_prices_and_overrides():
    t = load_prices()
    assert t.usd_per_gpu_hour("h100-sxm") == 3.49  # RunPod Secure Cloud, read 2026-09-25
    assert t.usd_per_gpu_hour("h100-sxm", "discounted") == 2.69  # Community Cloud
    o = parse_price_options(["h100-sxm=2.1", "mi300x=1"])
    assert o.usd_per_gpu_hour("h100-sxm") == 2.1
    assert o.usd_per_gpu_hour("h100-sxm", "discounted") == 2.1  # an override wins every tier
    assert o.citation("h100-sxm") == "given by the user"
    assert o.usd_per_gpu_hour("h200") == 4.59


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
    pm = power_model(hw)
    for x in full:
        assert pm.idle_w < x.power_w <= pm.tdp_w
    assert half[0].power_w == pytest.approx((full[0].power_w + pm.idle_w) / 2)
    assert math.isclose(full[0].joules_per_token, full[0].power_w / full[0].tokens_per_s)
    with pytest.raises(InvalidInputError, match="utilisation"):
        estimate_economics(e, 3.49, utilisation=0)


def test_serve_economics_by_hand():
    from roofline.economics import serve_economics
    from roofline.serve.metrics import Summary
    from roofline.serve.policy import POLICIES
    from roofline.serve.simulate import build_deployment, simulate
    from roofline.serve.workload import Lengths, synthetic

    m, h100, h200 = load_model("llama-3.1-8b"), load_hardware("h100-sxm"), load_hardware("h200")
    w = synthetic(100, 4.0, Lengths("fixed", 256), Lengths("fixed", 64), seed=0)
    p = POLICIES["disaggregated"]
    d = build_deployment(m, Stack.resolve(m, h100), p, prefill_hw=h100, decode_hw=h200)
    s = Summary(simulate(w, p, d), 1.0, 0.1)
    e = serve_economics(s, {"h100-sxm": h100, "h200": h200}, load_prices())
    # one H100 prefill replica ($3.49/h) + one H200 decode replica ($4.59/h)
    assert e.usd_per_hour == pytest.approx(3.49 + 4.59)
    assert e.cost_per_million_tokens_usd == pytest.approx(
        8.08 / 3600 / s.throughput_tokens_per_s * 1e6
    )
    T = s.duration_s
    busy = [x.busy_s for x in s.result.engines]  # prefill engine, then decode engine
    joules = (700 * busy[0] + 80.3 * (T - busy[0])) + (700 * busy[1] + 80.3 * (T - busy[1]))
    assert e.joules_per_token_upper == pytest.approx(joules / (100 * 64))


def test_serve_prints_cost_line(capsys):
    from roofline.cli import main

    main(["serve", "llama-3.1-8b", "--requests", "50", "--hardware", "h100-sxm"])
    out = capsys.readouterr().out
    assert "cost: $3.49/h" in out and "per million output tokens" in out and "J/token" in out


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
