"""The serving simulator's step against `estimate`'s on devices with non-affine GEMM terms
(the measured GEMM table by M, tile quantisation): the simulator fits the affine spec and adds
back what those terms make of a GEMM of the step's rows (`stepcost.gemm_rows_delta`), so a
decode step costs the same in both, and J/token of the same steady state agree (issue 39).
No torch."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from roofline.calc.parallel import parallel_step_cost
from roofline.calc.placement import Parallel
from roofline.calc.stack import Stack
from roofline.serve.stepcost import (
    ROWS_GRID,
    _interp_rows,
    affine_spec,
    gemm_rows_delta,
    mixed_step_cost,
)
from roofline.spec.catalog import load_engine, load_hardware, load_model
from roofline.spec.operators import Step


def _stack(model: str, device: str, tp: int = 1, engine: str | None = "vllm") -> Stack:
    m = load_model(model)
    eng = load_engine(engine) if engine else None
    return Stack.resolve(m, load_hardware(device), engine=eng, parallel=Parallel(tp=tp))


@pytest.mark.parametrize(
    ("model", "device", "tp"),
    [
        ("llama-3.1-8b", "h100-sxm", 1),
        ("llama-3.1-70b", "h200", 2),
        ("qwen2.5-7b", "a10g", 1),
    ],
)
@pytest.mark.parametrize("batch", [1, 7, 33, 320, 1024])
def test_a_decode_step_costs_what_estimate_says(model, device, tp, batch) -> None:
    """Every batch here is a point of the grid (every count to 256, every multiple of 64 to
    32,768), where the simulator's step is `estimate`'s to float precision."""
    m, stack = load_model(model), _stack(model, device, tp)
    est = float(np.asarray(parallel_step_cost(m, stack, Step(batch, 1, 1024)).time_s))
    sim = mixed_step_cost(m, stack).step_s(np.ones(batch), np.full(batch, 1024.0))
    assert sim == pytest.approx(est, rel=1e-9)


def test_the_difference_is_read_at_the_steps_rows_for_every_gemm() -> None:
    """A mixed step of one 2,000-token chunk and 31 decodes has 2,031 rows in every dense GEMM
    and 32 in the LM head: what it adds over the affine fit is the tabulated difference at 2,031
    for the GEMMs and at 32 for the LM head, nothing for attention."""
    m, stack = load_model("llama-3.1-8b"), _stack("llama-3.1-8b", "h100-sxm")
    aff = stack.on(affine_spec(stack.hardware))
    grid, delta = gemm_rows_delta(m, stack, aff)
    msc = mixed_step_cost(m, stack)
    T = np.array([2000.0] + [1.0] * 31)
    S = np.array([0.0] + [1024.0] * 31)
    x = msc.step_features(T, S)
    names = list(msc.names)
    lm = names.index("lm_head")
    add = _interp_rows(np.array(2031.0), grid, delta)
    add[..., lm] = _interp_rows(np.array(32.0), grid, delta)[..., lm]
    without = dataclasses.replace(msc, rows_delta=None)
    assert np.allclose(msc._op_s(x) - without._op_s(x), add)
    attention = [i for i, n in enumerate(names) if n.startswith("attention/scores")]
    assert attention
    assert all(add[..., i] == 0 for i in attention)


def test_no_difference_without_non_affine_terms_or_with_expert_parallelism() -> None:
    m = load_model("llama-3.1-8b")
    stack = _stack("llama-3.1-8b", "h100-sxm")
    affine = stack.on(affine_spec(stack.hardware))
    assert gemm_rows_delta(m, affine, affine) is None  # a spec with none of the terms
    moe = load_model("qwen3-30b-a3b")
    ep = Stack.resolve(
        moe, load_hardware("h100-sxm"), engine=load_engine("vllm"), parallel=Parallel(tp=2, ep=2)
    )
    assert gemm_rows_delta(moe, ep, ep.on(affine_spec(ep.hardware))) is None
    assert ROWS_GRID[0] == 1 and ROWS_GRID[255] == 256 and ROWS_GRID[-1] == 2**18
    assert {320, 6144, 32768} <= set(ROWS_GRID.tolist())
