"""The energy band (`roofline.calc.intervals`, "energy"): power per GPU and J per output token
get bands from the measured-power rows' residuals, in the classes and split-conformal ranks of
the time bands, widened by the spread between sources; values by hand."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from conftest import run_cli

from roofline.calc import intervals as iv
from roofline.calc import power
from roofline.serve.published import load_rows, predict_all

ROOT = Path(__file__).resolve().parents[1]
KEY = ("power", "1 GPU", "nvidia", "vllm", "<=8", "16-bit")
Z80 = 1.2815515655446004  # the normal quantile of (1 + 0.8) / 2


def power_row(e: float, source: str, weights: str = "bf16", batch: float = 1.0) -> iv.Residual:
    """A power row predicted 1 W and measured exp(e) W: log error e."""
    return iv.Residual(
        id="x",
        source=source,
        metric="power_w",
        engine="vllm",
        gpus=1,
        batch=batch,
        vendor="nvidia",
        predicted=1.0,
        published=math.exp(e),
        weights=weights,
    )


# source A: -0.2 -0.1 0.0 0.1 0.2 (median 0.0); source B: 0.0 ... 0.4 (median 0.2)
ROWS = [power_row(k / 10, "A") for k in range(-2, 3)] + [power_row(k / 10, "B") for k in range(5)]


def test_the_power_band_by_hand() -> None:
    # 10 rows of one class: ranks ⌊11·0.1⌋ = 1 and ⌈11·0.9⌉ = 10, the extremes -0.2 and 0.4:
    # centre 0.1, half-width 0.3. Sources: τ_s = sd(0.0, 0.2) = 0.2/√2 = 0.141421, so
    # h = √(0.3² + (1.281552 · 0.141421)²) = √(0.09 + 0.032847) = 0.350496:
    # [exp(0.1 − 0.350496), exp(0.1 + 0.350496)] = [0.778415, 1.569090]
    ev = iv.EnergyEvidence(ROWS)
    assert ev.tau_source == pytest.approx(0.2 / math.sqrt(2))
    b = ev.band(KEY, 0.8)
    assert (b.low, b.high) == pytest.approx((0.778415, 1.569090), rel=1e-5)
    assert b.rows == 10 and "2 sources' medians τ_s = 0.14" in b.basis


def test_the_energy_band_adds_the_time_band_in_quadrature() -> None:
    # time: 9 e2e rows 0.0 ... 0.8 (ranks 1 and 9: [0, 0.8], centre 0.4, half-width 0.4).
    # J: centre 0.1 + 0.4 = 0.5, h = √(0.350496² + 0.4²) = √0.282847 = 0.531834:
    # [exp(-0.031834), exp(1.031834)] = [0.968667, 2.806208]
    time = iv.Evidence(
        [
            iv.Residual(
                id="t",
                source="T",
                metric="e2e_s",
                engine="vllm",
                gpus=1,
                batch=1.0,
                vendor="nvidia",
                predicted=1.0,
                published=math.exp(k / 10),
            )
            for k in range(9)
        ]
    )
    j = iv.Residual(
        id="j",
        source="C",
        metric="joules_per_output_token",
        engine="vllm",
        gpus=1,
        batch=1.0,
        vendor="nvidia",
        predicted=1.0,
        published=2.0,
    )
    b = iv.energy_row_band(j, iv.EnergyEvidence(ROWS), time, 0.8)
    assert (b.low, b.high) == pytest.approx((0.968667, 2.806208), rel=1e-5)
    assert "log centres added, half-widths in quadrature" in b.basis


def test_a_class_with_no_rows_is_at_least_as_wide_as_its_parent() -> None:
    # no 4-bit row: the class pools to the batch level (the same 10 rows), widened by the
    # between-class spread; one class of 3+ rows below it, so τ = h/z and h grows by √2:
    # 0.3·√2 = 0.424264, then the sources: √(0.18 + 0.032847) = 0.461354,
    # [exp(0.1 − 0.461354), exp(0.1 + 0.461354)] = [0.696732, 1.753044]
    ev = iv.EnergyEvidence(ROWS)
    child = ev.band((*KEY[:-1], "4-bit"), 0.8)
    assert (child.low, child.high) == pytest.approx((0.696732, 1.753044), rel=1e-5)
    parent = ev.band(KEY, 0.8)  # the parent's rows' own band (all its rows are 16-bit)
    assert math.log(child.high / child.low) >= math.log(parent.high / parent.low)


def test_the_bundled_energy_residuals_are_the_current_predictions() -> None:
    """roofline/data/energy-residuals.csv is what the model predicts today for every energy
    row; refresh it with `python benchmarks/derive/energy_rows.py --write-residuals`."""
    sys.path.insert(0, str(ROOT / "benchmarks" / "derive"))
    from energy_rows import energy_residuals

    now = energy_residuals(predict_all(load_rows(ROOT / "roofline/data/published-energy.csv")))
    stored = iv.read_residuals(iv.energy_path())
    assert [r.id for r in stored] == [r.id for r in now]
    for a, b in zip(stored, now, strict=True):
        assert (a.metric, a.engine, a.gpus, a.batch, a.vendor) == (
            b.metric,
            b.engine,
            b.gpus,
            b.batch,
            b.vendor,
        )
        assert a.predicted == pytest.approx(b.predicted, rel=1e-9), a.id


def test_the_bundled_energy_coverage() -> None:
    """Each source's power and J rows against the bands of the others' power rows: inside the
    time bands' gate, and every source held out in turn (an issue and a pull request of one
    repository are one source)."""
    res = iv.read_residuals(iv.energy_path())
    c = iv.energy_loso_coverage(res, iv.bundled(), 0.8)
    assert c.rows == len(res) >= 50
    assert iv.LOSO_GATE[0] <= c.overall <= iv.LOSO_GATE[1]
    assert set(c.by_quantity) == {"power", "energy"}
    assert "SemiAnalysisAI/InferenceX" in c.by_source


def test_estimate_json_gives_power_and_energy_their_bands(capsys) -> None:
    code, out, _ = run_cli(capsys, "estimate", "llama-3.1-8b", "--batch", "1", "--json")
    assert code == 0
    econ = json.loads(out)["economics"]["cases"][0]
    w, j = econ["intervals"]["power_w_per_gpu"], econ["intervals"]["joules_per_output_token"]
    assert w["low"] <= econ["power_w_per_gpu"] <= w["high"] <= 700.0  # H100 SXM: a 700 W cap
    assert j["low"] <= econ["joules_per_output_token"] <= j["high"]
    assert "power rows" in w["basis"] and "in quadrature" in j["basis"]


# ---- a power cap (`roofline.calc.phases.capped_estimate`) -----------------------------------
def test_the_clock_exponent_is_the_sweep_s_prefill_pair() -> None:
    # S9 prefill (PW135, PW136): 9,893 tok/s at 350 W, 5,941 at 200 W; RTX 3090 idle 17.5 W.
    # 1/α = ln(5941/9893) / ln(182.5/332.5) = -0.50994 / -0.59992 = 0.85007: α = 1.1764
    inv = math.log(5941 / 9893) / math.log((200 - 17.5) / (350 - 17.5))
    assert inv == pytest.approx(0.85007, abs=1e-5)
    assert round(1 / inv, 2) == power.CLOCK_POWER_EXPONENT


def terms(cap_w: float) -> power.PowerTerms:
    act = power.Activity(stream=0.5, attention=0.5, source="test")
    return power.PowerTerms(static_w=100, dynamic_w=600, cap_w=cap_w, activity=act, origin="")


def test_the_clock_share_under_a_cap_by_hand() -> None:
    # a step of 1 s: 0.2 s of compute, 0.8 s of memory waits (a_s = 0.5). Uncapped (s = 1):
    # b = (0.2 + 0.5·0.8) / 1 = 0.6, P = 100 + 600·0.6 = 460 W. At s = 0.5 the compute takes
    # 0.4 s: b = (0.4 + 0.4) / 1.2 = 2/3, and with α = 1 P = 100 + 600·0.5·(2/3) = 300 W.
    # So a 300 W cap gives s = 0.5 and a step of 1.2 s; a 500 W cap (above 460 W) s = 1.
    t = power.BusyTerms(compute_s=0.2, stream_s=0.8, attention_s=0.0, step_s=1.0)
    assert float(power.clock_share(t, terms(300), alpha=1.0)) == pytest.approx(0.5, abs=1e-9)
    assert float(power.clock_share(t, terms(500), alpha=1.0)) == 1.0
    # all compute, α = 2: 100 + 600·s² = 400 W gives s = √0.5
    c = power.BusyTerms(compute_s=1.0, stream_s=0.0, attention_s=0.0, step_s=1.0)
    assert float(power.clock_share(c, terms(400), alpha=2.0)) == pytest.approx(math.sqrt(0.5))


def test_a_cap_stretches_estimate_and_holds_its_power(capsys) -> None:
    args = ("estimate", "llama-3.1-8b", "--batch", "1,64", "--json")
    runs = {}
    for cap in (None, "700", "400"):  # H100 SXM: TDP 700 W
        code, out, err = run_cli(capsys, *args, *(("--power-cap", cap) if cap else ()))
        assert code == 0, err
        runs[cap] = json.loads(out)
    base, at_tdp, low = runs[None], runs["700"], runs["400"]
    # at the TDP, the default limit, nothing changes
    assert [c["tpot_s"] for c in at_tdp["cases"]] == [c["tpot_s"] for c in base["cases"]]
    for b, c, e in zip(base["cases"], low["cases"], low["economics"]["cases"], strict=True):
        assert c["ttft_s"] > b["ttft_s"] and c["tpot_s"] >= b["tpot_s"]
        assert e["power_w_per_gpu"] <= 400.0 + 1e-9
    assert low["power_cap_w"] == 400.0


def test_a_cap_at_or_below_static_power_is_one_clear_line(capsys) -> None:
    code, _, err = run_cli(capsys, "estimate", "llama-3.1-8b", "--power-cap", "50")
    assert code == 1 and "static power (72 W)" in err and "Traceback" not in err
