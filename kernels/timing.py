"""Timing harness, after triton.testing.do_bench's discipline.

First call outside timing; warm-up and repeats sized by a time budget from an estimate of
one call; per-call timing; median and p20/p80. GPU: CUDA events around each call, a 256 MiB
(or 2 x L2) buffer zeroed before each call to flush L2, one synchronize at the end. CPU:
perf_counter around each call with torch's thread count fixed by the caller.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from roofline.measure.results import Timing

L2_FLUSH_BYTES = 256 * 1024**2


@dataclass(frozen=True)
class Budget:
    """Seconds of warm-up and of timed calls per point, and bounds on the repeat count."""

    warmup_s: float
    measure_s: float
    min_repeats: int = 5
    max_repeats: int = 1000


def _summary(times_s: list[float], method: str) -> Timing:
    t = np.asarray(times_s)
    return Timing(
        median_s=float(np.median(t)),
        p20_s=float(np.quantile(t, 0.2)),
        p80_s=float(np.quantile(t, 0.8)),
        min_s=float(t.min()),
        repeats=len(t),
        method=method,
    )


def _repeats(estimate_s: float, seconds: float, b: Budget) -> int:
    return int(min(b.max_repeats, max(b.min_repeats, seconds / max(estimate_s, 1e-9))))


def time_cpu(fn: Callable[[], object], b: Budget) -> Timing:
    fn()  # first call: allocations, oneDNN primitive creation
    start = time.perf_counter()
    fn()
    estimate_s = time.perf_counter() - start
    for _ in range(_repeats(estimate_s, b.warmup_s, b) if b.warmup_s > 0 else 0):
        fn()
    times = []
    for _ in range(_repeats(estimate_s, b.measure_s, b)):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return _summary(times, "perf_counter")


def _flush_buffer(device: torch.device) -> torch.Tensor:
    l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 0
    return torch.empty(max(L2_FLUSH_BYTES, 2 * l2) // 4, dtype=torch.int32, device=device)


def time_cuda(fn: Callable[[], object], b: Budget, device: torch.device) -> Timing:
    flush = _flush_buffer(device)
    fn()
    torch.cuda.synchronize(device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        flush.zero_()
        fn()
    end.record()
    torch.cuda.synchronize(device)
    estimate_s = start.elapsed_time(end) / 5 / 1e3  # includes the flush: a safe over-estimate
    for _ in range(_repeats(estimate_s, b.warmup_s, b)):
        fn()
    n = _repeats(estimate_s, b.measure_s, b)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for s, e in zip(starts, ends, strict=True):
        flush.zero_()  # outside the events: L2 is cold for every call, the flush is not timed
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize(device)
    times = [s.elapsed_time(e) / 1e3 for s, e in zip(starts, ends, strict=True)]
    return _summary(times, "cuda_events")


def time_cuda_graph(
    fn: Callable[[], object], device: torch.device, calls: int = 20, replays: int = 10
) -> Timing:
    """Device time of tiny kernels without launch overhead: `calls` back-to-back calls
    captured in one CUDA graph (on a side stream, as capture requires), replayed `replays`
    times; each sample is replay time / calls. No L2 flush: these are warm-cache figures."""
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        fn()  # warm-up on the capture stream (cuBLAS workspaces are per stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(calls):
                fn()
    torch.cuda.current_stream(device).wait_stream(stream)
    graph.replay()
    torch.cuda.synchronize(device)
    times = []
    for _ in range(replays):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        graph.replay()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / 1e3 / calls)
    return _summary(times, "cuda_graph")


def time_fn(fn: Callable[[], object], b: Budget, device: torch.device) -> Timing:
    if device.type == "cuda":
        return time_cuda(fn, b, device)
    return time_cpu(fn, b)
