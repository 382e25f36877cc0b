"""Stage 2: a candidate replayed in the serving simulator on its loaded devices."""

from __future__ import annotations

import time
from collections.abc import Mapping

import numpy as np

from ..calc.cost import Ceiling
from ..calc.intervals import DEFAULT_COVERAGE, band_for
from ..calc.stack import Stack
from ..serve.metrics import Summary
from ..serve.simulate import build_deployment, simulate
from ..serve.workload import Workload
from ..spec.engine import EngineSpec
from ..spec.hardware import HardwareSpec
from ..spec.model import ModelSpec
from .screen import Candidate, SimCheck
from .space import Requirement, precision_of, robust_factors, scheduler_policy


def candidate_stack(
    model: ModelSpec,
    c: Candidate,
    hardware: Mapping[str, HardwareSpec],
    ceiling: Ceiling,
    engine: EngineSpec | None,
) -> Stack:
    """The stack `c` was screened on (`Candidate.stack`, resolved once when its group was
    built); resolved here only for a candidate made by hand without one."""
    if c.stack is not None:
        return c.stack
    return Stack.resolve(
        model, hardware[c.hardware], precision_of(c.fmt), ceiling, engine, c.parallel
    )


def confirm(
    model: ModelSpec,
    c: Candidate,
    workload: Workload,
    req: Requirement,
    hardware: Mapping[str, HardwareSpec],
    ceiling: Ceiling,
    engine: EngineSpec | None = None,
) -> SimCheck:
    """Run the serving simulator on `c`, its devices taken from the loaded `hardware` (by
    name), and read its p95 TTFT and TPOT."""
    t0 = time.perf_counter()
    dis = c.kind == "disaggregated"
    hw = hardware[c.hardware]
    stack = candidate_stack(model, c, hardware, ceiling, engine)
    pol = scheduler_policy(c.max_batch, dis, engine).on(stack.memory)
    d = build_deployment(
        model,
        stack,
        pol,
        replicas=c.replicas if not dis else 1,
        prefill_hw=hardware[c.prefill_hardware or c.hardware] if dis else None,
        decode_hw=hw if dis else None,
        prefill_replicas=c.prefill_replicas or 1,
        decode_replicas=c.replicas if dis else 1,
    )
    s = Summary(simulate(workload, pol, d), req.slo_ttft_s, req.slo_tpot_s)
    ttft = float(np.percentile(s.latency_samples_s("ttft"), 95))
    tpot = float(np.percentile(s.latency_samples_s("tpot"), 95))
    done = s.requests_completed == workload.requests
    f_ttft, f_tpot = robust_factors(stack, req.confidence)
    return SimCheck(
        ttft_p95_s=ttft,
        tpot_p95_s=tpot,
        slo_attainment=s.slo_attainment,
        requests=workload.requests,
        meets_slo=bool(
            done and ttft * f_ttft <= req.slo_ttft_s and tpot * f_tpot <= req.slo_tpot_s
        ),
        elapsed_s=time.perf_counter() - t0,
    )


def candidate_intervals(
    model: ModelSpec,
    c: Candidate,
    hardware: Mapping[str, HardwareSpec],
    ceiling: Ceiling,
    engine: EngineSpec | None,
    coverage: float = DEFAULT_COVERAGE,
) -> dict:
    """The interval of a candidate's p95 TTFT (prefill band, on its prefill device) and TPOT
    (decode band), analytic and simulated, and of its cost per token (e2e band): the
    step-time bands of `roofline.calc.intervals` applied to the queueing figures, too narrow near
    saturation. Empty on the datasheet ceiling (a bound)."""
    if ceiling == "datasheet":
        return {}
    stack = candidate_stack(model, c, hardware, ceiling, engine)
    pre = hardware[c.prefill_hardware or c.hardware]
    args = (stack.engine_name, c.parallel.gpus_per_replica, max(c.concurrency, 1.0))
    bands = {
        "ttft_p95_s": band_for("prefill", *args, pre, coverage),
        "tpot_p95_s": band_for("decode", *args, stack.hardware, coverage),
        "cost_per_million_tokens_usd": band_for("e2e", *args, stack.hardware, coverage),
    }
    out: dict = {}
    for name, band in bands.items():
        values = {"analytic": float(getattr(c, name))}
        if c.sim is not None and name != "cost_per_million_tokens_usd":
            values["simulated"] = getattr(c.sim, name)
        out[name] = {
            k: dict(zip(("low", "high"), band.of_time(v), strict=True)) for k, v in values.items()
        } | {"coverage": coverage, "basis": band.basis}
    return out
