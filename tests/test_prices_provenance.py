"""Prices with their provenance (issue 39 item 4): every price the tool uses names its provider,
tier, date and URL; one stated rule (benchmarks/derive/prices.py) chooses it from the evidence
rows and regenerates the bundled table byte for byte; `hardware show` prints it."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest
from conftest import run_cli

from roofline.studies.economics import load_prices

ROOT = Path(__file__).parent.parent
_spec = importlib.util.spec_from_file_location(
    "derive_prices", ROOT / "benchmarks/derive/prices.py"
)
assert _spec and _spec.loader
prices = importlib.util.module_from_spec(_spec)
sys.modules["derive_prices"] = prices  # dataclasses look their module up
_spec.loader.exec_module(prices)


def _row(provider: str, usd: str, date: str, tier: str = "on-demand", note: str = "") -> object:
    return prices.Row("H100 SXM 80GB", provider, tier, usd, date, "https://example.com/p", note)


def test_every_priced_device_names_provider_tier_date_and_url():
    table = load_prices()
    priced = 0
    for name, e in table.devices.items():
        for tier in ("on-demand", "discounted"):
            p = e.provenance(tier)
            if p["usd_per_gpu_hour"] is None:
                continue
            priced += 1
            assert p["provider"], (name, tier)
            assert p["tier"] in ("on-demand", "spot", "community", "reserved"), (name, tier)
            assert (p["tier"] == "on-demand") == (tier == "on-demand"), (name, tier)
            assert re.fullmatch(r"\d{4}-\d{2}(-\d{2})?", str(p["date"])), (name, tier, p["date"])
            assert str(p["url"]).startswith("https://"), (name, tier, p["url"])
            assert p["considered"], (name, tier)  # the figures it was chosen from
            # the chosen figure is one of those considered, under its provider's name
            assert any(
                c.startswith(f"{p['provider']} {p['usd_per_gpu_hour']:g} ") for c in p["considered"]
            ), (name, tier)
            assert table.citation(name, tier).endswith(f"read {p['date']}")
    assert priced >= 25  # 18 on-demand and 11 discounted figures at the time of writing


def test_lower_median_rule_on_three_rows():
    # Provider A read twice: its newer figure (2.00, 2026-01-02) replaces the older 1.00.
    # Per provider: A 2.00, B 3.00 -> sorted [2.00, 3.00]; lower median = index (2-1)//2 = 0.
    rows = [
        _row("A", "1.00", "2026-01-01"),
        _row("A", "2.00", "2026-01-02"),
        _row("B", "3.00", "2026-01-01"),
    ]
    c = prices.choose(rows)
    assert (c.row.provider, c.row.price) == ("A", 2.0)
    assert [(r.provider, r.price) for r in c.per_provider] == [("A", 2.0), ("B", 3.0)]
    # three providers 5, 1, 3 -> sorted [1, 3, 5]; the median (index 1) is 3 (C)
    c = prices.choose(
        [_row("A", "5", "2026-01-01"), _row("B", "1", "2026-01-01"), _row("C", "3", "2026-01-01")]
    )
    assert (c.row.provider, c.row.price) == ("C", 3.0)
    # the same day twice: the provider's cheaper offer (1.50 of 1.50 and 2.50); an undated row
    # (0.10) is not used: [1.50, 4.00] -> index 0 = 1.50
    c = prices.choose(
        [
            _row("A", "2.50", "2026-01-01"),
            _row("A", "1.50", "2026-01-01"),
            _row("B", "4.00", "2026-01-01"),
            _row("C", "0.10", "not shown (catalog commit)"),
        ]
    )
    assert (c.row.provider, c.row.price) == ("A", 1.5)
    assert prices.choose([_row("C", "0.10", "not shown")]) is None


def test_row_checks_correct_the_mislabelled_tiers():
    # RunPod Community Cloud is labelled on-demand in the evidence: the community tier
    used, _ = prices.check(_row("RunPod", "2.69", "2026-09-25", note="Community Cloud"))
    assert used.tier == "community"
    # deploybase's "Spot" column is RunPod Community Cloud (checked against two rows)
    r = prices.Row(
        "RTX 5090 32GB", "RunPod", "spot", "0.69", "2026-03", "https://deploybase.ai/x", ""
    )
    assert prices.check(r)[0].tier == "community"
    # a serverless per-second rate is not a GPU rental
    r = prices.Row(
        "L4 24GB",
        "RunPod",
        "on-demand",
        "0.684",
        "x",
        "https://docs.runpod.io/serverless/pricing",
        "",
    )
    assert prices.check(r)[0] is None
    # a plain provider row passes unchanged
    assert prices.check(_row("Lambda", "4.29", "2026-09-25"))[0].tier == "on-demand"


def test_the_two_fixed_rows():
    t = load_prices()
    # TensorWave MI300X $1.50 is an on-demand rate: considered on-demand, never "community"
    mi = t.devices["mi300x"]
    assert "TensorWave 1.5 (on-demand, 2026-05-18)" in mi.considered_on_demand
    assert mi.discounted_kind != "community" and mi.discounted_provider != "TensorWave"
    # L4: the $0.44 "spot" came from deploybase's mislabelled column; no L4 spot row remains
    assert t.devices["l4"].discounted_usd_per_gpu_hour is None
    assert t.devices["l4"].on_demand_usd_per_gpu_hour == 0.78


@pytest.mark.skipif(not prices.DEFAULT_CSV.exists(), reason="needs ../shared/evidence")
def test_the_script_regenerates_the_bundled_table_byte_for_byte():
    text, _, _ = prices.build(prices.DEFAULT_CSV)
    assert text == prices.OUT.read_text(encoding="utf-8")


def test_hardware_show_prints_the_price_and_its_provenance(capsys):
    code, out, err = run_cli(capsys, "hardware", "show", "h100-sxm")
    assert code == 0, err
    p = json.loads(out)["price_usd_per_gpu_hour"]
    od = p["on-demand"]
    assert od["usd_per_gpu_hour"] == load_prices().usd_per_gpu_hour("h100-sxm") == 4.29
    assert (od["provider"], od["tier"], od["date"]) == ("Lambda", "on-demand", "2026-09-25")
    assert od["url"].startswith("https://github.com/tgarg01/silybench-data/")
    assert p["discounted"]["tier"] == "community" and "lower median" in p["rule"]
    # an unpriced device says why
    code, out, _ = run_cli(capsys, "hardware", "show", "gb200")
    p = json.loads(out)["price_usd_per_gpu_hour"]
    assert p["on-demand"]["usd_per_gpu_hour"] is None and "rack-scale" in p["note"]
