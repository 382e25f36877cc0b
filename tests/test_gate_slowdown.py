"""The CPU gate catches a real 30% regression (issue 26): the ci suite measured with the
whole-step kernel (kernels/llama.py's forward) made 30% slower by a busy-wait after each call,
its kernels untouched; calibrated and validated as `roofline check` does, the decode steps'
median error moves to about -23%, beyond their ±20% bias band. One real run (~45 s)."""

from __future__ import annotations

import time

import pytest

torch = pytest.importorskip("torch")


def test_a_decode_step_30_percent_slower_fails_the_gate(monkeypatch):
    from kernels import llama, suite
    from roofline.measure.calibrate import calibrated_spec
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
    info = detect("cpu", 1)
    r = suite.run(info, "ci", ("fp32",))
    v = validate(r, calibrated_spec(r, "slowed.json"))
    steps = {s.family: s for s in v.summaries()}["decode_step"]
    # the median moves 23 points down from where this machine's model error puts it (-3% to
    # -14% in the committed checks): outside the bias band
    assert steps.median_error < -0.2 and steps.biased
    assert not v.passed
