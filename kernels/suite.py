"""Suites of points (`ci`, `quick`, `full`) per device kind, and the runner that times them.

A point is a family, a kernel and a shape. The runner builds each case, times it with the
harness, records the calculator's FLOPs and bytes for the shape, skips (and reports) sizes
that run out of memory, and stops cleanly on Ctrl-C keeping what it has measured.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

import torch

from roofline.errors import InvalidInputError
from roofline.files import signals_deferred
from roofline.measure.calibrate import CALIBRATION_FAMILIES, DRAM_LLC_MULTIPLE
from roofline.measure.kernel_ops import decode_gemm_shapes, op_flops_bytes
from roofline.measure.results import DeviceInfo, Environment, Family, Point, Results, Skipped
from roofline.spec.catalog import load_model
from roofline.spec.forward import operators
from roofline.spec.model import ModelSpec
from roofline.spec.operators import Step

from .llama import LlamaStack
from .micro import TORCH_DTYPES, Case, attention_case, eager_chain_case, gemm_case, stream_case
from .timing import Budget, time_cuda_graph, time_fn

SUITES = ("ci", "quick", "full")
#: Eager GPU points faster than this are also timed under a CUDA graph (launch-free).
GRAPH_BELOW_S = 50e-6
#: Timed seconds at least, per calibration point: every prediction inherits its noise, so
#: it is timed over long enough (≥ 0.5 s) for a short burst of other work to fall out of
#: the median. Not the `gemm_decode` sweep: its terms are pooled over its many shapes.
CALIBRATION_MEASURE_S = 0.5


@dataclass(frozen=True)
class PointSpec:
    family: Family
    kernel: str
    dtype: str
    shape: dict[str, int]
    model: str | None = None
    native: bool = True

    @property
    def name(self) -> str:
        dims = " ".join(f"{k}={v}" for k, v in self.shape.items())
        return f"{self.family} {self.model or self.kernel} {self.dtype} {dims}"


@dataclass(frozen=True)
class Plan:
    points: tuple[PointSpec, ...]
    budget: Budget
    models: tuple[str, ...] = field(default=())


def _attention(
    family: Family, dtype: str, B: int, T: int, S: int, N: int, K: int, H: int
) -> PointSpec:
    return PointSpec(family, "sdpa", dtype, dict(B=B, T=T, S=S, N=N, K=K, H=H))


def _steps(
    models: tuple[str, ...],
    dtype: str,
    batches: tuple[int, ...],
    contexts: tuple[int, ...],
    prompts: dict[str, tuple[int, ...]],
) -> list[PointSpec]:
    pts = [
        PointSpec("decode_step", "model", dtype, dict(B=B, T=1, S=S), m)
        for m in models
        for B in batches
        for S in contexts
    ]
    pts += [
        PointSpec("prefill_step", "model", dtype, dict(B=1, T=T, S=0), m)
        for m in models
        for T in prompts[m]
    ]
    return pts


def _decode_gemms(models: tuple[str, ...], dtype: str, batches: tuple[int, ...]) -> list[PointSpec]:
    """`gemm_decode` points: each model's decode GEMM shapes at M = 1, 2, 4, … up to the
    largest batch (once per shape the models share)."""
    rows = [1]
    while rows[-1] < max(batches):
        rows.append(rows[-1] * 2)
    shapes = dict.fromkeys(s for m in models for s in decode_gemm_shapes(load_model(m)))
    return [
        PointSpec("gemm_decode", "gemm", dtype, dict(M=M, N=N, K=K))
        for N, K in shapes
        for M in rows
    ]


def dram_elems(llc_bytes: int | None, itemsize: int) -> int:
    """Elements of a CPU bandwidth buffer that cannot be cache-resident: at least 128 MiB, and
    `DRAM_LLC_MULTIPLE` times the last-level cache the machine reports, rounded up to a
    multiple of 2^20 elements. A VM may report its host socket's whole L3 (480 MiB seen here,
    where a read reaches its DRAM plateau from 128 MiB): the buffer then grows with it rather
    than the calibration refusing a result it cannot class as DRAM."""
    least = DRAM_LLC_MULTIPLE * (llc_bytes or 0) // itemsize
    return max(128 * 2**20 // itemsize, -(-least // 2**20) * 2**20)


def cache_sweep_elems(dram: int) -> tuple[int, ...]:
    """Read buffers between the caches and DRAM (2^23 elements, then steps of 1.5x and 2x,
    below the `dram` size): how fast this machine re-reads a working set of each size, which
    `roofline.measure.calibrate.read_speedup` looks up for every whole step. A VM's caches
    need not be the ones it reports (a 480 MiB L3 whose reads settle from ~200 MiB), so this is
    measured, not read from sysfs."""
    sizes, n = [], 2**23
    while n < dram:
        sizes += [n] + ([n * 3 // 2] if n * 3 // 2 < dram else [])
        n *= 2
    return tuple(sizes)


def cpu_plan(suite: str, info: DeviceInfo, dtypes: tuple[str, ...]) -> Plan:
    """CPU: fp32 (bf16 is timed once, small, and flagged when the CPU emulates it)."""
    big = suite != "ci"
    d = dtypes[0]
    pts = [
        PointSpec("gemm_peak", "gemm", dt, dict(M=n, N=n, K=n), native=dt in info.native_dtypes)
        for dt in dtypes
        for n in (((1024, 2048) if big else (1024,)) if dt in info.native_dtypes else (256,))
    ]
    # calibration of the small-M efficiency (M½): one skinny GEMM of a shape neither the
    # sweep nor the models use
    pts += [PointSpec("gemm_small", "gemm", d, dict(M=8, N=4096, K=1024))]
    # calibration of the gemv row cost and of the attention fractions: one gemv with short rows
    # (K = 384), one decode attention shape (memory side) and one causal prefill attention
    # shape (compute side), none used by a validated point
    pts += [
        PointSpec("gemv_small", "gemm", d, dict(M=1, N=4096, K=384)),
        _attention("attention_small", d, 8, 1, 2048, 8, 4, 64),
        _attention("prefill_attention_small", d, 1, 384, 0, 8, 4, 64),
    ]
    # N = K = 4096 fp32: a 64 MiB weight (cycled through copies: read from DRAM every call)
    pts += [
        PointSpec("gemm_sweep", "gemm", d, dict(M=M, N=4096, K=4096))
        for M in ((1, 4, 16, 64, 256, 1024) if big else (1, 4, 16, 128))
    ]
    dram = dram_elems(info.last_level_cache_bytes, TORCH_DTYPES[d].itemsize)
    pts += [PointSpec("bandwidth", k, d, dict(elems=dram)) for k in ("copy", "read", "triad")]
    # the big suite's 2^24 is also the sweep's second power of two: each size once
    sweep = (2**10, 2**16, 2**22) + ((2**18, 2**24) if big else ()) + cache_sweep_elems(dram)
    sweep = tuple(dict.fromkeys(sweep))
    pts += [PointSpec("bandwidth", "read", d, dict(elems=n)) for n in sweep]
    attn = ((1, 1024, 8, 4), (4, 4096, 8, 4), (16, 1024, 8, 4), (4, 1024, 8, 8))
    pts += [
        _attention("decode_attention", d, B, 1, S, N, K, 64)
        for B, S, N, K in (attn if big else attn[1:3])
    ]
    pts += [
        _attention("prefill_attention", d, 1, T, 0, 8, 4, 64)
        for T in ((128, 512) if big else (256,))
    ]
    models = ("tiny-llama-30m", "tiny-llama-120m")
    batches = (1, 4, 16)
    # calibration of M½ by M and of the gemv row cost at the shapes decode steps run: every
    # GEMM of the models' decode step (their own N and K), M from 1 to the largest batch
    pts += _decode_gemms(models, d, batches)
    # calibration of the cost of one launch inside eager model code: the small operators of
    # one layer on one token (D, heads and head size of neither model)
    pts += [PointSpec("eager_ops", "eager", d, dict(D=640, N=10, K=2, H=64))]
    prompts: dict[str, tuple[int, ...]] = {m: (128, 512) if big else (128,) for m in models}
    pts += _steps(models, d, batches, (128, 1024), prompts)
    budget = Budget(0.02, 0.15, min_repeats=3) if suite == "ci" else Budget(0.2, 1.0)
    return Plan(tuple(pts), budget, models)


def cuda_plan(suite: str, info: DeviceInfo, dtypes: tuple[str, ...]) -> Plan:
    """GPU: real sizes. Bandwidth buffers 1 GiB (≫ any L2); Llama-3.1-8B whole steps."""
    big = suite == "full"
    d = dtypes[0]
    pts = [
        PointSpec("gemm_peak", "gemm", dt, dict(M=n, N=n, K=n))
        for dt in dtypes
        for n in (4096, 8192)
    ]
    pts += [PointSpec("gemm_small", "gemm", d, dict(M=8, N=8192, K=2048))]
    pts += [
        PointSpec("gemv_small", "gemm", d, dict(M=1, N=65536, K=256)),
        _attention("attention_small", d, 8, 1, 8192, 32, 8, 128),
        _attention("prefill_attention_small", d, 1, 2048, 0, 32, 8, 128),
    ]
    pts += [
        PointSpec("gemm_sweep", "gemm", d, dict(M=M, N=8192, K=8192))
        for M in (1, 4, 16, 64, 256, 1024, 4096, 16384)
    ]
    if fp8_native(info):  # the W8A8 GEMMs of FP8 recipes: their peak and the small-M regime
        pts += [PointSpec("gemm_peak", "gemm", "fp8", dict(M=n, N=n, K=n)) for n in (4096, 8192)]
        pts += [
            PointSpec("gemm_sweep", "gemm", "fp8", dict(M=M, N=N, K=K))
            for M in (16, 64, 128, 256, 512, 1024, 4096)
            for N, K in ((8192, 8192), (14336, 4096), (4096, 14336))
        ]
    dram = 2**29 // 2  # elements: 1 GiB of bf16 per buffer
    pts += [PointSpec("bandwidth", k, d, dict(elems=dram)) for k in ("copy", "read", "triad")]
    pts += [
        PointSpec("bandwidth", "read", d, dict(elems=n))
        for n in (2**12, 2**16, 2**20, 2**22, 2**24, 2**26)
    ]
    contexts = (1024, 4096, 16384, 65536) if big else (1024, 4096, 16384)
    pts += [
        _attention("decode_attention", d, B, 1, S, 32, K, 128)
        for B in (1, 8, 32)
        for S in contexts
        for K in (8, 32)
    ]
    pts += [_attention("prefill_attention", d, 1, T, 0, 32, 8, 128) for T in (1024, 4096)]
    models = ("llama-3.1-8b",)
    pts += _steps(
        models, d, (1, 4, 16, 64) if big else (1, 4, 16), (128, 1024), {"llama-3.1-8b": (128, 1024)}
    )
    budget = Budget(0.1, 0.5) if suite != "full" else Budget(0.2, 1.0)
    return Plan(tuple(pts), budget, models)


def fp8_native(info: DeviceInfo) -> bool:
    """FP8 tensor cores: NVIDIA compute capability 8.9 (Ada) and later."""
    cc = info.compute_capability
    return info.kind == "cuda" and cc is not None and tuple(map(int, cc.split("."))) >= (8, 9)


def plan(suite: str, info: DeviceInfo, dtypes: tuple[str, ...]) -> Plan:
    if suite not in SUITES:
        raise InvalidInputError(f"unknown suite '{suite}'; use one of: {', '.join(SUITES)}")
    bad = [dt for dt in dtypes if dt not in TORCH_DTYPES]
    if bad:
        raise InvalidInputError(f"cannot measure dtype '{bad[0]}'; use {', '.join(TORCH_DTYPES)}")
    return (cuda_plan if info.kind == "cuda" else cpu_plan)(suite, info, dtypes)


def default_dtypes(info: DeviceInfo) -> tuple[str, ...]:
    """GPU: bf16 first (the dtype every sweep uses), then fp16 and fp32. CPU: fp32, and bf16
    to show (not average in) emulation when the CPU lacks it."""
    if info.kind == "cuda":
        return ("bf16", "fp16", "fp32")
    return ("fp32", "bf16")


class _Models:
    """One LlamaStack per model, sized for the largest B and S + T of the plan."""

    def __init__(
        self, specs: dict[str, ModelSpec], points: tuple[PointSpec, ...], device: torch.device
    ) -> None:
        self.specs, self.points, self.device = specs, points, device
        self.built: dict[tuple[str, str], LlamaStack] = {}

    def get(self, p: PointSpec) -> LlamaStack:
        key = (p.model or "", p.dtype)
        if key not in self.built:
            self.built.clear()  # free the previous model before building the next
            mine = [q.shape for q in self.points if (q.model, q.dtype) == key]
            batch = max(s["B"] for s in mine)
            tokens = max(s["S"] + s["T"] for s in mine)
            self.built[key] = LlamaStack(
                self.specs[p.model or ""], batch, tokens, TORCH_DTYPES[p.dtype], self.device
            )
        return self.built[key]


def _case(p: PointSpec, device: torch.device, models: _Models, llc_bytes: int | None) -> Case:
    s = p.shape
    if p.kernel == "gemm":
        # CPU weights of memory-bound GEMMs are cycled to stay cold; GPUs flush L2 instead
        cold = 2 * (llc_bytes or 0) if device.type == "cpu" and p.family != "gemm_peak" else 0
        return gemm_case(s["M"], s["N"], s["K"], p.dtype, device, cold)
    if p.kernel in ("copy", "read", "triad"):
        return stream_case(p.kernel, s["elems"], p.dtype, device)
    if p.kernel == "eager":
        return eager_chain_case(s["D"], s["N"], s["K"], s["H"], p.dtype, device)
    if p.kernel == "sdpa":
        # CPU decode attention reads a cold cache, as in a step; prefill's is the one it wrote
        cold = 2 * (llc_bytes or 0) if device.type == "cpu" and s["T"] == 1 else 0
        B, T, S, N, K, H = (s[d] for d in "BTSNKH")
        return attention_case(B, T, S, N, K, H, p.dtype, device, cold)
    stack = models.get(p)
    tokens = torch.randint(0, stack.m.vocab_size, (s["B"], s["T"]), device=device)
    step = Step(s["B"], s["T"], s["S"])
    return Case(lambda: stack.forward(tokens, s["S"]), _model_op_sum(stack.m, step))


def _model_op_sum(m: ModelSpec, step: Step):
    """The whole step as one operator: the calculator's operators summed (for counts)."""
    from roofline.spec.operators import Op

    ops = operators(m, step)
    return Op(
        "step",
        "matmul",
        flops=sum(o.flops for o in ops),
        weight_elems=sum(o.weight_elems for o in ops),
        act_elems=sum(o.act_elems for o in ops),
        kv_read_elems=sum(o.kv_read_elems for o in ops),
        kv_write_elems=sum(o.kv_write_elems for o in ops),
    )


def _is_oom(e: BaseException) -> bool:
    return isinstance(e, torch.OutOfMemoryError) or (
        isinstance(e, RuntimeError) and "can't allocate memory" in str(e)
    )


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()


def run(
    info: DeviceInfo,
    suite: str,
    dtypes: tuple[str, ...],
    on_point: Callable[[int, int, str], None] = lambda i, n, name: None,
) -> Results:
    """Time every point of the suite; `on_point(i, n, name)` before each. Interrupted runs
    return what was measured with `complete=False`. CPU: torch runs `info.threads_used`
    intra-op threads (the count the datasheet peak was derived for)."""
    device = torch.device("cuda", info.index or 0) if info.kind == "cuda" else torch.device("cpu")
    if info.kind == "cpu":
        torch.set_num_threads(info.threads_used or 1)
    else:
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32; recorded below
    p = plan(suite, info, dtypes)
    specs = {name: load_model(name) for name in p.models}
    models = _Models(specs, p.points, device)
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    points: list[Point] = []
    skipped: list[Skipped] = []
    complete = True
    try:
        for i, ps in enumerate(p.points):
            on_point(i, len(p.points), ps.name)
            try:
                case = _case(ps, device, models, info.last_level_cache_bytes)
                budget = (
                    replace(p.budget, measure_s=max(p.budget.measure_s, CALIBRATION_MEASURE_S))
                    if ps.family in CALIBRATION_FAMILIES and ps.family != "gemm_decode"
                    else p.budget
                )
                timing = time_fn(case.fn, budget, device)
                graph = (
                    time_cuda_graph(case.fn, device)
                    if device.type == "cuda" and timing.median_s < GRAPH_BELOW_S
                    else None
                )
            except Exception as e:  # noqa: BLE001 - OOM is skipped; anything else re-raised
                fp8_refused = ps.dtype == "fp8" and isinstance(e, RuntimeError)
                if not (_is_oom(e) or fp8_refused):
                    raise
                # torch builds without an fp8 cuBLASLt path refuse _scaled_mm: skip, say why
                why = "out of memory" if _is_oom(e) else str(e).splitlines()[0][:200]
                skipped.append(Skipped(name=ps.name, reason=why))
                _sync(device)
                continue
            flops, nbytes = op_flops_bytes(case.op, ps.dtype)
            points.append(
                Point(
                    family=ps.family,
                    kernel=ps.kernel,
                    name=ps.name,
                    dtype=ps.dtype,
                    shape=ps.shape,
                    model=ps.model,
                    flops=flops,
                    bytes=nbytes,
                    timing=timing,
                    graph_timing=graph,
                    backend=case.backend,
                    native=ps.native,
                )
            )
            del case
            _sync(device)
        on_point(len(p.points), len(p.points), "done")
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM/SIGHUP raised as one by the CLI
        complete = False

    def finish(complete: bool) -> Results:
        env = Environment(
            device=info,
            torch_version=torch.__version__,
            python_version=f"{platform.python_implementation()} {sys.version.split()[0]}",
            threads=torch.get_num_threads(),
            flags={
                "cuda.matmul.allow_tf32": str(torch.backends.cuda.matmul.allow_tf32),
                "cpu_capability": str(torch.backends.cpu.get_cpu_capability()),
            },
            started_at=started,
            finished_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        )
        used = {pt.model for pt in points if pt.model}
        return Results(
            suite=suite,
            complete=complete,
            environment=env,
            points=tuple(points),
            skipped=tuple(skipped),
            models={k: v for k, v in specs.items() if k in used},
        )

    try:  # a signal while the points are packed up ends the run there: keep them
        with signals_deferred():
            return finish(complete)
    except KeyboardInterrupt:
        return finish(False)
