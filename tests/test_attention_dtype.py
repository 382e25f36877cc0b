"""Precision per operator: attention computes at its own dtype, 16 bits unless the KV cache
is fp8 and the kernel computes in fp8 (`cost.attention_dtype_of`), so fp8 linear layers do not
double attention's speed (issue: a 32k-token prefill of Llama-3.1-8B in fp8 on H100 came out
22% too fast)."""

from __future__ import annotations

import pytest

from roofline.calc.cost import attention_dtype_of, step_cost
from roofline.spec.catalog import load_engine, load_hardware, load_model
from roofline.spec.operators import Step
from roofline.spec.precision import Precision

W8A8 = Precision(weights="fp8", activations="fp8", kv="bf16")
W8A8_KV8 = Precision(weights="fp8", activations="fp8", kv="fp8")


@pytest.mark.parametrize(
    ("precision", "ceiling", "engine", "dtype"),
    [
        (W8A8, "datasheet", None, "bf16"),  # bf16 KV: attention at 16 bits everywhere
        (W8A8, "achievable", "vllm", "bf16"),
        (W8A8_KV8, "datasheet", None, "fp8"),  # the speed of light allows fp8 attention
        (W8A8_KV8, "achievable", None, "fp8"),  # the hardware layer alone likewise
        (W8A8_KV8, "achievable", "vllm", "bf16"),  # vLLM's profile: no fp8 attention kernel
        (Precision(weights="int4-g128", activations="fp16", kv="bf16"), "datasheet", None, "fp16"),
    ],
)
def test_attention_dtype(precision, ceiling, engine, dtype) -> None:
    eng = load_engine(engine) if engine else None
    assert attention_dtype_of(precision, ceiling, eng) == dtype


def test_w8a8_attention_runs_at_the_bf16_peak_on_the_datasheet() -> None:
    """A 4,096-token prefill of Llama-3.1-8B on an H100 SXM, W8A8 with bf16 KV, datasheet
    ceiling: the attention op's compute time is its FLOPs over the dense bf16 peak, 989.4
    TFLOP/s (hardware_specs/h100-sxm.yaml), not the fp8 peak of 1,978.9; the linear layers
    keep the fp8 one."""
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    c = step_cost(m, hw, Step(1, 4096, 0), W8A8, "datasheet")
    att = [o for o in c.ops if o.op.kind == "attention"]
    mm = [o for o in c.ops if o.op.kind == "matmul"]
    assert att and mm
    for o in att:
        assert float(o.compute_s) == pytest.approx(float(o.flops) / 989.4e12, rel=1e-9)
    for o in mm:
        assert float(o.compute_s) == pytest.approx(float(o.flops) / 1978.9e12, rel=1e-9)
