"""Fused-MoE surfaces: an engine's measured MoE layers as efficiency against the layer's own
roofline, by tokens per touched expert and weights read (roofline/data/surfaces/
moe_efficiency.csv, written by benchmarks/derive/moe_surfaces.py), read by the routed experts."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest

from roofline.calc.cost import moe_dtype_of, step_cost
from roofline.calc.parallel import parallel_step_cost
from roofline.calc.placement import Parallel
from roofline.calc.stack import Stack
from roofline.serve.stepcost import affine_spec
from roofline.spec.catalog import load_engine, load_hardware, load_model
from roofline.spec.operators import Step, expected_experts_touched
from roofline.spec.precision import Precision
from roofline.spec.surfaces import FRAMEWORKS, MoeSurface, moe_surface

SAMPLE = Path(__file__).parent / "fixtures" / "moe_surface" / "sample.csv"
ENGINE_OF = {fw: eng for eng, fw in FRAMEWORKS.items()}
KEY_OF = {"bf16": "bf16", "fp8": "fp8", "fp8_block": "fp8", "w4a16_mxfp4": "w4a16_mxfp4",
          "nvfp4": "nvfp4"}  # fmt: skip
FP8_W = Precision("fp8", "bf16", "bf16")  # an fp8 checkpoint under vLLM / SGLang (W8A16 dense)


def _sample() -> list[dict[str, str]]:
    with SAMPLE.open(newline="") as f:
        return list(csv.DictReader(ln for ln in f if not ln.startswith("#")))


def test_the_surface_reproduces_the_kept_source_points() -> None:
    """Each raw point of the sample (a fixed stride through every system, engine and dtype,
    before any aggregation), costed from its own shape: n tokens, top-k of E experts, hidden H,
    expert width I over moe_tp GPUs. Measured: median |error| 6.6%, so a 2-axis surface (m, W)
    leaves the spread between shapes of the same m and W (a third axis, the expert slice,
    brings it to 2-7% on three tables, at about twice the rows; not bundled)."""
    errors = []
    for r in _sample():
        s = moe_surface(r["system"], ENGINE_OF[r["framework"]], KEY_OF[r["dtype"]])
        assert s is not None, r
        if s.dtype != r["dtype"] or s.version != r["framework_version"]:
            continue  # fp8 per-tensor where the same engine has block-scaled fp8 first
        H, inter, k, E, tp, n = (
            int(r[c]) for c in ("hidden", "inter", "topk", "experts", "moe_tp", "tokens")
        )
        touched = float(expected_experts_touched(E, k, n))
        w = touched * 3 * H * inter / tp
        compute, memory = s.terms_s(2 * n * k * 3 * H * inter / tp, w, 1)
        errors.append(float(max(compute, memory)) / (float(r["latency_us"]) * 1e-6) - 1)
    assert len(errors) > 800
    assert float(np.median(np.abs(errors))) < 0.07
    assert float(np.median(errors)) == pytest.approx(0.0, abs=0.03)  # no direction


def test_a_hand_built_surface_interpolates_in_log_m_then_log_w() -> None:
    s = MoeSurface(
        system="x", framework="vllm", version="0", implementation="k", dtype="fp8_block",
        log2_w=np.array([20.0, 22.0]),
        rows=(
            (np.array([0.0, 4.0]), np.array([0.2, 0.6])),
            (np.array([0.0, 4.0]), np.array([0.4, 0.8])),
        ),
        peak_flops_per_s=1e12, bytes_per_s=1e12, weight_bytes=1.0,
    )  # fmt: skip
    # m = 4 (log2 2): row 20 at 0.2 + 2/4 x 0.4 = 0.4, row 22 at 0.6; W = 2^21: halfway, 0.5
    assert s.efficiency(np.array(4.0), np.array(2.0**21)) == pytest.approx(0.5)
    # W = 2^21 elements at m = 4: 2 x 4 x 2^21 = 16,777,216 FLOPs at 1e12 FLOP/s = 16.78 us,
    # 2^21 bytes at 1e12 B/s = 2.097 us; each over the efficiency 0.5
    c, m = s.terms_s(16_777_216.0, 2.0**21, 1)
    assert float(c) == pytest.approx(16_777_216 / 1e12 / 0.5)
    assert float(m) == pytest.approx(2**21 / 1e12 / 0.5)
    # beyond the rows (W = 2^30, m = 64): held at row 22's last point, 0.8
    assert s.efficiency(np.array(64.0), np.array(2.0**30)) == pytest.approx(0.8)


def test_deepseek_v3_at_one_token_on_mi300x_costs_aiters_measured_layer() -> None:
    """DeepSeek-V3 fp8 on 8 MI300X under SGLang 0.5.13, one token. Per GPU and MoE layer
    (58 of 61 layers): 8 touched experts (E·(1 − (1 − 8/256)^1) = 8), each 3 x 7168 x 2048/8
    = 5,505,024 elements; W = 44,040,192 = 2^25.39, m = 1. The surface rows covering log2 m
    = 0 are log2 W 25.5 (efficiency 0.1189, moe_efficiency.csv) and 28: W below 25.5 holds
    0.1189. Roofline: bytes 44,040,192 / 5.3e12 B/s = 8.3095 us (> FLOPs 88,080,384 /
    2.6149e15 = 0.0337 us); over 0.1189: 69.886 us per layer (AITER: 67.4 us, moe-058)."""
    m, hw = load_model("deepseek-v3"), load_hardware("mi300x")
    s = Stack.resolve(m, hw, FP8_W, "achievable", load_engine("sglang@0.5.13"), Parallel(tp=8))
    c = parallel_step_cost(m, s, Step(1, 1, 0)).compute
    assert c.ceilings.moe_surface is not None
    experts = next(o for o in c.ops if o.op.name == "moe/experts")
    per_layer = float(experts.memory_s) / 58
    assert per_layer == pytest.approx(44_040_192 / 5.3e12 / 0.1189, rel=1e-4)
    assert per_layer * 1e6 == pytest.approx(69.886, rel=1e-4)
    assert "routed experts: measured" in c.ceilings.source


def test_older_releases_the_datasheet_and_the_simulator_keep_the_fractions() -> None:
    m, hw = load_model("deepseek-v3"), load_hardware("mi300x")
    step = Step(1, 1, 0)
    old = step_cost(m, hw, step, FP8_W, "achievable", engine=load_engine("sglang@0.4.2"))
    assert old.ceilings.moe_surface is None  # AITER's block-scaled fused MoE from 0.4.5
    new = step_cost(m, hw, step, FP8_W, "achievable", engine=load_engine("sglang@0.5.13"))
    assert new.ceilings.moe_surface is not None
    affine = step_cost(m, affine_spec(hw), step, FP8_W, engine=load_engine("sglang@0.5.13"))
    assert affine.ceilings.moe_surface is None
    ds = step_cost(m, hw, step, FP8_W, "datasheet", engine=load_engine("sglang@0.5.13"))
    assert ds.ceilings.moe_surface is None
    experts = next(o for o in ds.ops if o.op.name == "moe/experts")
    # datasheet: max(compute, every byte at 5.3 TB/s), no overheads, no efficiency
    t = max(float(experts.compute_s), float(experts.bytes) / 5.3e12)
    assert float(experts.time_s) == pytest.approx(t)
    assert float(experts.memory_s) == pytest.approx(float(experts.bytes) / 5.3e12)


def test_formats_map_to_the_tables_dtypes() -> None:
    assert moe_dtype_of(Precision("bf16", "bf16", "bf16")) == "bf16"
    assert moe_dtype_of(FP8_W) == "fp8"
    assert moe_dtype_of(Precision("fp8", "fp8", "fp8")) == "fp8"
    assert moe_dtype_of(Precision("bf16,experts=mxfp4", "bf16", "bf16")) == "w4a16_mxfp4"
    assert moe_dtype_of(Precision("int4-g128", "bf16", "bf16")) is None
    s = moe_surface("h100_sxm", "vllm", "fp8")
    assert s is not None and s.dtype == "fp8_block"  # block-scaled first
    assert moe_surface("h100_sxm", "llama.cpp", "bf16") is None
    assert moe_surface(None, "vllm", "bf16") is None


def test_the_bundled_surface_is_finite_and_positive() -> None:
    for system in ("h100_sxm", "h200_sxm", "b200_sxm", "a100_sxm", "mi300x"):
        s = moe_surface(system, "vllm", "bf16" if system != "mi300x" else "fp8")
        assert s is not None
        m = np.array([1.0, 3.0, 50.0, 4000.0])
        w = np.array([1e6, 3e7, 1e9, 2e10])
        e = s.efficiency(m, w)
        assert np.all(np.isfinite(e)) and np.all(e > 0) and np.all(e < 2)
        assert math.isclose(float(s.efficiency(np.array(1.0), np.array(1e6))), float(e[0]))
