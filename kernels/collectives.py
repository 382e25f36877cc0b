"""Collective benchmark: all-reduce and all-to-all time vs message size, with torch.distributed.

Launched with `torch.multiprocessing.start_processes` (one process per rank; NCCL over the
GPUs, gloo over loopback on CPU); `benchmark_rank` also runs inside any initialised process
group, e.g. one torchrun started. Times are the median of `reps` runs after `warmup`, each
between barriers (CUDA events on GPU, perf_counter on CPU), on rank 0.
Bus bandwidth follows NCCL's convention so it is comparable across group sizes: all-reduce
busbw = M/t · 2(n−1)/n, all-to-all busbw = M/t · (n−1)/n, with M the bytes on each rank.
"""

from __future__ import annotations

import os
import socket
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from roofline.calc.parallel import Link, all_reduce_s, all_to_all_s
from roofline.spec.hardware import Interconnect

OPS: tuple[str, ...] = ("all-reduce", "all-to-all")
BUS_FACTOR = {"all-reduce": lambda n: 2 * (n - 1) / n, "all-to-all": lambda n: (n - 1) / n}


@dataclass(frozen=True)
class CollectiveResult:
    """One (collective, message size) point: measured on rank 0, and what the model predicts."""

    op: str
    world_size: int
    backend: str
    message_bytes: int  # M, bytes on each rank
    median_s: float
    min_s: float
    max_s: float
    reps: int
    predicted_s: float | None

    @property
    def bus_bandwidth_bytes_per_s(self) -> float:
        return self.message_bytes / self.median_s * BUS_FACTOR[self.op](self.world_size)

    def as_dict(self) -> dict:
        return asdict(self) | {"bus_bandwidth_bytes_per_s": self.bus_bandwidth_bytes_per_s}


def predicted_s(op: str, message_bytes: float, n: int, ic: Interconnect) -> float:
    """The calculator's cost of the same collective (roofline.calc.parallel): NCCL's ring on the
    spec's achievable link (bus-bandwidth fraction and hop latency), no engine call cost."""
    f = all_reduce_s if op == "all-reduce" else all_to_all_s
    return float(f(message_bytes, n, Link.of(ic, n, "achievable")))


def _time_op(op: str, buf: torch.Tensor, out: torch.Tensor, cuda: bool) -> float:
    dist.barrier()
    if cuda:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
    else:
        t0 = time.perf_counter()
    if op == "all-reduce":
        dist.all_reduce(buf)
    else:
        dist.all_to_all_single(out, buf)
    if cuda:
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) * 1e-3
    return time.perf_counter() - t0


def benchmark_rank(sizes_bytes: Sequence[int], reps: int, warmup: int) -> list[dict]:
    """Run every op and size in an initialised process group; rank 0's timings (others: [])."""
    n, rank = dist.get_world_size(), dist.get_rank()
    cuda = dist.get_backend() == "nccl"
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    rows = []
    for op in OPS:
        for size in sizes_bytes:
            elems = max(n, size // 4 // n * n)  # fp32, divisible by n for all-to-all
            buf = torch.ones(elems, dtype=torch.float32, device=device)
            out = torch.empty_like(buf)
            for _ in range(warmup):
                _time_op(op, buf, out, cuda)
            times = [_time_op(op, buf, out, cuda) for _ in range(reps)]
            rows.append(
                {
                    "op": op,
                    "message_bytes": elems * 4,
                    "median_s": statistics.median(times),
                    "min_s": min(times),
                    "max_s": max(times),
                }
            )
    return rows if rank == 0 else []


def _worker(
    rank: int,
    world_size: int,
    backend: str,
    port: int,
    sizes: Sequence[int],
    reps: int,
    warmup: int,
    queue,
) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if backend == "nccl":
        torch.cuda.set_device(rank)
    dist.init_process_group(
        backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size
    )
    try:
        rows = benchmark_rank(sizes, reps, warmup)
        if rank == 0:
            queue.put(rows)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_collectives(
    world_size: int,
    sizes_bytes: Sequence[int],
    interconnect: Interconnect | None,
    backend: str | None = None,
    reps: int = 20,
    warmup: int = 3,
) -> list[CollectiveResult]:
    """Spawn `world_size` ranks on this machine, time each collective and size, and pair each
    point with the model's prediction on `interconnect` (None without one or its bandwidth)."""
    backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    if backend == "nccl" and torch.cuda.device_count() < world_size:
        raise ValueError(
            f"{world_size} ranks need {world_size} GPUs, found {torch.cuda.device_count()}"
        )
    # CPU ranks fork (they inherit the imported torch instead of importing it again); CUDA
    # cannot be forked, so GPU ranks are spawned.
    method = "spawn" if backend == "nccl" else "fork"
    queue = mp.get_context(method).SimpleQueue()
    mp.start_processes(
        _worker,
        args=(world_size, backend, _free_port(), list(sizes_bytes), reps, warmup, queue),
        nprocs=world_size,
        start_method=method,
    )
    rows = queue.get()
    has_link = interconnect is not None and interconnect.bandwidth_bytes_per_s is not None
    return [
        CollectiveResult(
            r["op"],
            world_size,
            backend,
            r["message_bytes"],
            r["median_s"],
            r["min_s"],
            r["max_s"],
            reps,
            predicted_s(r["op"], r["message_bytes"], world_size, interconnect)
            if has_link and interconnect is not None
            else None,
        )
        for r in rows
    ]


def environment() -> dict:
    """What the numbers were measured on."""
    env = {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "cuda": torch.cuda.is_available(),
    }
    if torch.cuda.is_available():
        env["device"] = torch.cuda.get_device_name(0)
        env["gpus"] = torch.cuda.device_count()
    return env
