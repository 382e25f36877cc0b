"""GEMM surfaces: an engine's measured dense GEMMs by M (aiconfigurator-core 0.12.0 tables,
roofline/data/surfaces/gemm_efficiency.csv) in place of the device's fractions."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import run_cli
from pydantic import ValidationError

from roofline.calc.cost import step_cost
from roofline.spec.catalog import load_engine, load_hardware, load_model
from roofline.spec.hardware import Achievable
from roofline.spec.operators import Step
from roofline.spec.precision import Precision
from roofline.spec.surfaces import gemm_surface

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
                s = gemm_surface(hw.achievable.surface_system, eng, dtype)
                if s is None:
                    continue
                assert s.flops_per_s.max() < hw.peak_flops_per_s(dtype)
                # M = 1: 2 FLOP per weight of (bits / 8) bytes
                bytes_per_s = s.flops_per_s[0] / 2 * (2 if dtype == "bf16" else 1)
                assert bytes_per_s < hw.memory_bandwidth_bytes_per_s


def test_an_unknown_surface_in_a_spec_is_refused() -> None:
    with pytest.raises(ValidationError, match="unknown surface system 'h900_sxm'"):
        Achievable(surface_system="h900_sxm", source="x")


def test_the_estimate_names_the_origin(capsys) -> None:
    code, out, _ = run_cli(capsys, "estimate", "llama-3.1-8b", "--batch", "1", "--json")
    assert code == 0
    src = json.loads(out)["ceiling_source"]
    assert "dense GEMMs of N*K >= 4096^2 at both widths: measured" in src
    assert "under vllm 0.24.0" in src and "other GEMMs: the fractions" in src


def test_an_all_reduce_reads_the_engines_measured_curve() -> None:
    """Llama-3.1-8B at TP 8 on H100s under vLLM, 7 sequences decoding: each all-reduce moves
    7 x 4,096 x 2 B = 57,344 B per GPU. vLLM's all-reduce under CUDA graphs at 8 GPUs measured
    5.581 us at 32,768 B and 6.411 us at 65,536 B; log-log between them: 57,344 is
    ln(1.75)/ln(2) = 0.807 of the way, 5.581 x (6.411/5.581)^0.807 = 6.242 us."""
    from roofline.calc.parallel import parallel_step_cost
    from roofline.calc.placement import Parallel
    from roofline.calc.stack import Stack

    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    stack = Stack.resolve(m, hw, BF16, "achievable", load_engine("vllm"), Parallel(tp=8))
    ar = parallel_step_cost(m, stack, Step(7, 1, 100)).collectives[0]
    assert ar.message_bytes == 57_344 and ar.count == 2 * 32
    assert float(ar.each_s) == pytest.approx(6.242e-6, rel=1e-3)
    # no table at 3 GPUs, none on the datasheet ceiling: the link model
    three = Stack.resolve(m, hw, BF16, "achievable", load_engine("vllm"), Parallel(tp=3))
    assert three.hardware.achievable.surface_system == "h100_sxm"
    from roofline.calc.parallel import Link

    link = Link.of(hw.interconnect, 3, "achievable", load_engine("vllm"), "h100_sxm")
    assert link.measured is None
    assert (
        Link.of(hw.interconnect, 8, "datasheet", load_engine("vllm"), "h100_sxm").measured is None
    )


def test_a_larger_message_never_all_reduces_faster() -> None:
    from roofline.spec.surfaces import all_reduce_surface

    for system in ("h100_sxm", "h200_sxm", "b200_sxm", "a100_sxm", "l40s"):
        for eng in ("vllm", "sglang", "tensorrt-llm"):
            for n in (2, 4, 8):
                for graphs in (True, False):
                    s = all_reduce_surface(system, eng, n, graphs)
                    if s is None:
                        continue
                    m = np.geomspace(64, 4 << 30, 400)
                    t = s.at(m)
                    assert np.all(np.diff(t) >= -1e-12 * t[1:]), (system, eng, n, graphs)


def test_a_newer_releases_tables_are_not_assumed_for_an_older_one() -> None:
    """The tables are vLLM 0.24.0's: `--engine vllm@0.24.0` and a bare `vllm` (the newest) read
    them; vllm@0.11.0 (inside the newest range) and vllm@0.7.4 (the V0 range) keep the fractions
    and the link model, and the estimate says why."""
    from roofline.calc.parallel import Link
    from roofline.spec.surfaces import measured_for

    assert measured_for("", "0.24.0") and measured_for("0.24.0", "0.24.0")
    assert not measured_for("0.11.0", "0.24.0") and measured_for("0.27.1", "0.24.0")
    m, hw, vllm = load_model("llama-3.1-8b"), load_hardware("h100-sxm"), load_engine("vllm")
    step = Step(1, 1, 100)
    for version, measured in (("0.24.0", True), ("0.11.0", False), ("0.7.4", False)):
        eng = vllm.at(version)
        c = step_cost(m, hw, step, BF16, engine=eng)
        assert (c.ceilings.gemm_surface is not None) is measured, version
        link = Link.of(hw.interconnect, 8, "achievable", eng, "h100_sxm")
        assert (link.measured is not None) is measured, version
    old = step_cost(m, hw, step, BF16, engine=vllm.at("0.11.0")).ceilings.source
    assert "the measured tables are of vllm 0.24.0, newer than vllm@0.11.0" in old
    assert vllm.at("0.11.0").flag == "vllm@0.11.0" and vllm.flag == "vllm"
