"""GEMM surfaces: an engine's measured dense GEMMs by M (aiconfigurator-core 0.12.0 tables,
roofline/data/surfaces/gemm_efficiency.csv) in place of the device's fractions."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import run_cli
from pydantic import ValidationError

from roofline.catalog import load_engine, load_hardware, load_model
from roofline.cost import step_cost
from roofline.hardware import Achievable
from roofline.operators import Step
from roofline.precision import Precision
from roofline.surfaces import gemm_surface

BF16 = Precision("bf16", "bf16", "bf16")


def test_the_surface_interpolates_in_m_and_holds_its_ends() -> None:
    s = gemm_surface("h100_sxm", "vllm", "bf16")
    assert s is not None and s.implementation == "torch.nn.functional.linear"
    # the table's rows (TFLOP/s): M = 1: 2.680, M = 2: 5.356, M = 4: 10.65, M = 32768: 760.5
    assert s.at(np.array([1.0]))[0] == pytest.approx(2.680e12)
    # M = 3: halfway from M = 2 to 4: 5.356 + 0.5 x (10.65 - 5.356) = 8.003
    assert s.at(np.array([3.0]))[0] == pytest.approx(8.003e12, rel=1e-3)
    # M = 8 measured 21.42: 8 / 21.42 = 0.3735 < 4 / 10.65 = 0.3756 time per unit, so the
    # running maximum holds M = 8 at 4's time per unit: 8 / 0.37559 = 21.30 TFLOP/s
    assert s.at(np.array([8.0]))[0] == pytest.approx(8 / (4 / 10.65e12), rel=1e-6)
    assert s.at(np.array([65536.0]))[0] == pytest.approx(760.5e12)  # held beyond M = 32768


def test_a_gemm_of_more_rows_never_takes_less_time() -> None:
    for system in ("h100_sxm", "h200_sxm", "b200_sxm", "a100_sxm", "l40s"):
        for eng in ("vllm", "sglang", "tensorrt-llm"):
            s = gemm_surface(system, eng, "bf16")
            if s is None:
                continue
            m = np.arange(1.0, 40000.0)
            t = m / s.at(m)
            assert np.all(np.diff(t) >= -1e-12 * t[1:]), (system, eng)  # rounding only


def test_a_decode_gemm_costs_its_flops_over_the_measured_rate() -> None:
    """Llama-3.1-8B, one sequence, one token, on an H100 under vLLM: the gate-and-up GEMM is
    2 x 14,336 x 4,096 = 117,440,512 weights a layer, 2 FLOP each a token, over 32 layers:
    7,516,192,768 FLOP at the table's 2.680 TFLOP/s (M = 1) = 2.8046 ms."""
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    c = step_cost(m, hw, Step(1, 1, 100), BF16, engine=load_engine("vllm"))
    up = next(o for o in c.ops if o.name == "mlp/up")
    assert up.flops == 7_516_192_768
    assert up.compute_s == pytest.approx(7_516_192_768 / 2.680e12)
    assert up.compute_s == pytest.approx(2.8046e-3, rel=1e-4)
    assert "measured, torch.nn.functional.linear bf16 on h100_sxm" in c.ceilings.source


def test_where_no_surface_applies_the_fractions_stay() -> None:
    m, hw, eng = load_model("llama-3.1-8b"), load_hardware("h100-sxm"), load_engine("vllm")
    step = Step(1, 1, 100)
    # the datasheet ceiling never reads a table
    assert step_cost(m, hw, step, BF16, "datasheet", engine=eng).ceilings.gemm_surface is None
    # weight-only int4 runs the engine's Marlin kernel, not the 16-bit table
    w4 = step_cost(m, hw, step, Precision("int4", "bf16", "bf16"), engine=eng)
    up = next(o for o in w4.ops if o.name == "mlp/up")
    assert up.compute_s != pytest.approx(up.flops / 2.680e12)
    # a device without tables, and an engine the tables were not measured under
    assert (
        step_cost(m, load_hardware("mi300x"), step, BF16, engine=eng).ceilings.gemm_surface is None
    )
    lc = step_cost(m, hw, step, BF16, engine=load_engine("llama.cpp"))
    assert lc.ceilings.gemm_surface is None


def test_a_measured_gemm_never_beats_the_datasheet() -> None:
    """Every table's median FLOP/s at every M is below the device's dense peak, and its decode
    GEMMs stream no faster than the datasheet bandwidth: the speed of light stays a bound."""
    for name in ("h100-sxm", "h200", "b200", "a100-sxm-80gb", "l40s"):
        hw = load_hardware(name)
        for eng in ("vllm", "sglang", "tensorrt-llm"):
            for dtype in ("bf16", "fp8"):
                s = gemm_surface(hw.achievable.gemm_surface, eng, dtype)
                if s is None:
                    continue
                assert s.flops_per_s.max() < hw.peak_flops_per_s(dtype)
                # M = 1: 2 FLOP per weight of (bits / 8) bytes
                bytes_per_s = s.flops_per_s[0] / 2 * (2 if dtype == "bf16" else 1)
                assert bytes_per_s < hw.memory_bandwidth_bytes_per_s


def test_an_unknown_surface_in_a_spec_is_refused() -> None:
    with pytest.raises(ValidationError, match="unknown GEMM surface 'h900_sxm'"):
        Achievable(gemm_surface="h900_sxm", source="x")


def test_the_estimate_names_the_origin(capsys) -> None:
    code, out, _ = run_cli(capsys, "estimate", "llama-3.1-8b", "--batch", "1", "--json")
    assert code == 0
    src = json.loads(out)["ceiling_source"]
    assert "dense GEMMs of N*K >= 4096^2 at both widths: measured" in src
    assert "under vllm 0.24.0" in src and "other GEMMs: the fractions" in src
