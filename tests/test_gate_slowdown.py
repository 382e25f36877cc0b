"""The CPU gate catches a real 30% regression (issue 26): the ci suite measured with the
whole-step kernel (kernels/llama.py's forward) made 30% slower by a busy-wait after each call,
its kernels untouched; calibrated and validated as `roofline check` does, the decode steps'
median error moves to about -23%, beyond their ±20% bias band. One real run of the points
the check reads (~45 s): the calibration kernels and the decode steps; the ci suite's other
validated families (GEMM sweep, attention, prefill steps) neither calibrate nor move the
decode steps' error, so they are not timed here (tests/test_measure.py and `.ci/run`'s
`roofline check` time them)."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")


def test_a_decode_step_30_percent_slower_fails_the_gate(monkeypatch):
    from kernels import llama, suite
    from roofline.measure.calibrate import CALIBRATION_FAMILIES, calibrated_spec
    from roofline.measure.device import detect
    from roofline.measure.validate import validate

    forward = llama.LlamaStack.forward

    def slower(self, tokens, start):
        t0 = time.perf_counter()
        out = forward(self, tokens, start)
        until = time.perf_counter() + 0.3 * (time.perf_counter() - t0)
        while time.perf_counter() < until:
            pass
        return out

    monkeypatch.setattr(llama.LlamaStack, "forward", slower)
    plan = suite.plan

    def read_points(*args):  # what calibrates, and what the check reads
        p = plan(*args)
        keep = (*CALIBRATION_FAMILIES, "decode_step")
        return replace(p, points=tuple(q for q in p.points if q.family in keep))

    monkeypatch.setattr(suite, "plan", read_points)
    info = detect("cpu", 1)
    r = suite.run(info, "ci", ("fp32",))
    v = validate(r, calibrated_spec(r, "slowed.json"))
    steps = {s.family: s for s in v.summaries()}["decode_step"]
    # the median moves 23 points down from where this machine's model error puts it (-3% to
    # -14% in the committed checks): outside the bias band
    assert steps.median_error < -0.2 and steps.biased
    assert not v.passed
