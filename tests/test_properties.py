"""Invariants of the calculator, checked over many shapes with hypothesis."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.calc import memory
from roofline.calc.cost import step_cost
from roofline.calc.stack import Stack
from roofline.spec.catalog import hardware_catalog, load_hardware, load_model, model_catalog
from roofline.spec.operators import Step
from roofline.spec.precision import Precision

MODELS = model_catalog().names()
DEVICES = [h.name for h in hardware_catalog().load_all() if h.supports("bf16")]
P = Precision()

models = st.sampled_from(MODELS)
devices = st.sampled_from(DEVICES)
ceilings = st.sampled_from(["datasheet", "achievable"])
batches = st.integers(1, 4096)
contexts = st.integers(0, 32768)


@settings(max_examples=60, deadline=None)
@given(models, devices, ceilings, batches, batches, contexts, contexts)
def test_tpot_and_memory_never_fall_as_batch_or_context_grow(m, hw, ceiling, b1, b2, s1, s2):
    model, dev = load_model(m), load_hardware(hw)
    (b1, b2), (s1, s2) = sorted((b1, b2)), sorted((s1, s2))
    t = step_cost(
        model, dev, Step(np.array([b1, b2, b1]), 1, np.array([s1, s1, s2])), P, ceiling
    ).time_s
    # a chunked-attention layer (Llama 4) restarts at each chunk boundary: a token at position
    # C attends to itself alone, so its step may be faster than one at C - 1
    chunked = model.layers_with("chunked") > 0
    assert t[1] >= t[0] and (chunked or t[2] >= t[0])
    mem = memory.kv_cache_bytes(model, P, np.array([b1, b2, b1]), np.array([s1, s1, s2]))
    assert mem[1] >= mem[0] and mem[2] >= mem[0]
    stack = Stack.resolve(model, dev, P)
    assert memory.max_batch(model, stack, s2) <= memory.max_batch(model, stack, s1)


@settings(max_examples=60, deadline=None)
@given(models, devices, batches, contexts)
def test_decode_gemm_intensity_stays_below_batch(m, hw, B, S):
    cost = step_cost(load_model(m), load_hardware(hw), Step(B, 1, S), P, "datasheet")
    for o in cost.ops:
        if o.op.kind == "matmul":
            assert 0 < float(o.intensity_flops_per_byte) < B


@settings(max_examples=60, deadline=None)
@given(models, devices, ceilings, batches, st.integers(1, 8192), contexts)
def test_every_time_is_positive_and_finite(m, hw, ceiling, B, T, S):
    cost = step_cost(load_model(m), load_hardware(hw), Step(B, T, S), P, ceiling)
    for o in cost.ops:
        t = float(o.time_s)
        assert np.isfinite(t) and t >= 0
    assert np.isfinite(float(cost.time_s)) and float(cost.time_s) > 0


@settings(max_examples=30, deadline=None)
@given(models, devices)
def test_achievable_is_never_faster_than_the_datasheet(m, hw):
    model, dev = load_model(m), load_hardware(hw)
    step = Step(np.array([1, 64]), 1, np.array([128, 4096]))
    fast = step_cost(model, dev, step, P, "datasheet").time_s
    slow = step_cost(model, dev, step, P, "achievable").time_s
    assert np.all(slow >= fast)


@settings(max_examples=40, deadline=None)
@given(models, devices, st.integers(1, 32768), st.floats(0.5, 1.0), st.floats(0.5, 1.0))
def test_largest_batch_is_the_edge_and_grows_with_the_memory_fraction(m, hw, context, f1, f2):
    """`batch_fit`'s B fits and B + 1 does not (or nothing fits: the weights or the first
    sequence bind); a larger share of memory never fits fewer sequences."""
    from roofline.calc.placement import Parallel, memory_per_gpu

    model, dev = load_model(m), load_hardware(hw)
    (f1, f2) = sorted((f1, f2))
    fit = memory.batch_fit(model, Stack.resolve(model, dev, P, memory_fraction=f1), context)

    def total(b: int) -> float:
        return float(memory_per_gpu(model, P, Parallel(), b, context, context).total_bytes)

    usable = f1 * dev.memory_bytes
    if fit.max_batch:
        assert total(fit.max_batch) <= usable
    assert total(fit.max_batch + 1) > usable
    assert (fit.binding == "weights") == (float(fit.weights_bytes) > usable)
    assert (
        memory.max_batch(model, Stack.resolve(model, dev, P, memory_fraction=f2), context)
        >= fit.max_batch
    )
