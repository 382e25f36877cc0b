"""Fused-MoE surfaces of older engine releases (roofline/data/surfaces/moe_release_efficiency.csv,
written by benchmarks/derive/moe_release_surfaces.py from vLLM PR #13932's Triton fused-MoE
timings on H100): a table measured at release R stands for R and later until the next table."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from roofline.calc.parallel import parallel_step_cost
from roofline.calc.placement import Parallel
from roofline.calc.stack import Stack
from roofline.spec.catalog import load_engine, load_hardware, load_model
from roofline.spec.operators import Step, expected_experts_touched
from roofline.spec.precision import Precision
from roofline.spec.surfaces import moe_surface
from roofline.units import UNKNOWN_RELEASE

SAMPLE = Path(__file__).parent / "fixtures" / "moe_release_surface" / "sample.csv"
FP8_W = Precision("fp8", "bf16", "bf16")  # DeepSeek-V3's block-scaled fp8 checkpoint


def _sample() -> list[dict[str, str]]:
    with SAMPLE.open(newline="") as f:
        return list(csv.DictReader(ln for ln in f if not ln.startswith("#")))


def test_one_measured_layer_by_hand() -> None:
    """Evidence moe-040: vLLM's Triton fused MoE, DeepSeek-V3 TP-8 shard on one H100, 128
    tokens, 1732.33 us. touched = 256·(1 − (248/256)^128) = 256·(1 − 0.017175) = 251.603;
    m = 128·8 / 251.603 = 4.0699 (log2 2.025: cell 2); W = 251.603 · 3·7168·256 =
    251.603 · 5,505,024 = 1.38508e9 (log2 30.367: cell 30.5). Roofline: bytes 1.38508e9 /
    3.35e12 B/s = 413.46 us (FLOPs 2·4.0699·1.38508e9 / 1.9789e15 = 5.70 us); efficiency
    413.46 / 1732.33 = 0.2387, the table's (30.5, 2) cell. Read back at the same (m, W):
    log2 m 2.025 between cells 2 (0.2387) and 3 (0.2433): 0.2387 + 0.025·0.0046 = 0.23881,
    W below the lowest row, held; 413.46 / 0.23881 = 1731.3 us, 0.06% off."""
    touched = float(expected_experts_touched(256, 8, 128))
    assert touched == pytest.approx(251.603, rel=1e-5)
    w = touched * 3 * 7168 * 256
    assert w == pytest.approx(1.38508e9, rel=1e-5)
    s = moe_surface("h100_sxm", "vllm", "fp8", "0.7.4.dev181")
    assert s is not None and s.version == "0.7.4" and s.dtype == "fp8_block"
    assert s.bytes_per_s == 3.35e12
    assert float(s.efficiency(np.array(1024 / touched), np.array(w))) == pytest.approx(
        0.23881, abs=2e-5
    )
    compute, memory = s.terms_s(2 * 128 * 8 * 3 * 7168 * 256, w, 1)
    assert float(memory) * 1e6 == pytest.approx(1731.3, rel=2e-4)
    assert float(memory) > float(compute)


def test_the_table_stands_for_the_device_it_was_measured_on() -> None:
    """Measured on H100 only: an H200 (more bandwidth, its own tuned config in vLLM 0.7.3)
    reads no table of that release (the derivation's `--h200` what-if is not bundled)."""
    assert moe_surface("h200_sxm", "vllm", "fp8", "0.7.4") is None
    assert moe_surface("h100_sxm", "vllm", "fp8", "0.7.4") is not None


@pytest.mark.parametrize(
    ("engine", "release", "version"),
    [
        ("vllm", "0.7.4.dev181", "0.7.4"),  # the PR's own line
        ("vllm", "0.10.2", "0.7.4"),  # later, while Triton is the default kernel
        # 0.11.0 makes DeepGEMM the default (envs.py VLLM_USE_DEEP_GEMM "1"): no table
        ("vllm", "0.11.0", None),
        ("vllm", "0.24.0", "0.24.0"),  # the next table (aiconfigurator)
        ("vllm", "", "0.24.0"),  # the newest
        ("vllm", "0.7.3", None),  # older than every table
        ("vllm", UNKNOWN_RELEASE, None),
        ("sglang", "0.4.3", None),  # no table of SGLang's kernels of that release
    ],
)
def test_the_newest_table_at_or_below_the_release(
    engine: str, release: str, version: str | None
) -> None:
    s = moe_surface("h100_sxm", engine, "fp8", release)
    assert (s.version if s is not None else None) == version


def test_the_surface_reproduces_every_source_point() -> None:
    """Every raw point (H100, as measured), costed from its own shape.
    Measured: median |error| 0.46%, at most 6.2% (a point read between cell centres)."""
    errors = []
    for r in _sample():
        s = moe_surface(r["system"], "vllm", "fp8", r["framework_version"])
        assert s is not None and s.version == r["framework_version"], r
        H, inter, k, E, tp, n = (
            int(r[c]) for c in ("hidden", "inter", "topk", "experts", "moe_tp", "tokens")
        )
        w = float(expected_experts_touched(E, k, n)) * 3 * H * inter / tp
        compute, memory = s.terms_s(2 * n * k * 3 * H * inter / tp, w, 1)
        errors.append(float(max(compute, memory)) / (float(r["latency_us"]) * 1e-6) - 1)
    assert len(errors) == 24
    assert float(np.median(np.abs(errors))) < 0.01
    assert float(np.max(np.abs(errors))) < 0.07


def test_a_release_inside_an_older_range_keeps_its_own_number() -> None:
    """`vllm@0.7.4` runs the V0 range's behaviour (its profile starts at 0.0.0) but is release
    0.7.4 for the kernel tables: the dstack rows' `0.7.4.dev181` nightly must read the 0.7.4
    table, not stand for 0.0.0."""
    e = load_engine("vllm@0.7.4")
    assert e.release == "0.0.0" and e.known_release == "0.7.4" and e.flag == "vllm@0.7.4"


def test_deepseek_v3_on_h100_under_vllm_0_10_reads_the_older_table() -> None:
    """One decode token, TP 8: 8 touched experts of 5,505,024 elements each per GPU, W =
    44,040,192 (log2 25.39, below every row: held at the 30.5 row), m = 1 (held at cell 2):
    efficiency 0.2387; 44,040,192 B / 3.35e12 B/s = 13.146 us / 0.2387 = 55.07 us per layer."""
    m, hw = load_model("deepseek-v3"), load_hardware("h100-sxm")
    s = Stack.resolve(m, hw, FP8_W, "achievable", load_engine("vllm@0.10.2"), Parallel(tp=8))
    c = parallel_step_cost(m, s, Step(1, 1, 0)).compute
    assert c.ceilings.moe_surface is not None and c.ceilings.moe_surface.version == "0.7.4"
    experts = next(o for o in c.ops if o.op.name == "moe/experts")
    assert float(experts.memory_s) / 58 * 1e6 == pytest.approx(
        44_040_192 / 3.35e12 / 0.2387 * 1e6, rel=1e-3
    )
    assert "vLLM PR #13932" in c.ceilings.source
