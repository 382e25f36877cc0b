"""Achievable surfaces: what an engine's own GEMM kernels reach on a device, by M, measured.

A device's `Achievable` fractions give every GEMM the same share of the peak, whatever its M
(rows per weight: the batch's tokens). Measured kernels do not behave so: on an H100 under vLLM
a bf16 GEMM reaches 2.7 TFLOP/s at M = 1 (its weights stream at 2.7 TB/s), 315 at M = 128 and
~800 from M = 1,024 on. The surface is that curve, per device, engine and dtype, from the
measured kernel tables of NVIDIA's aiconfigurator-core 0.12.0 (`roofline/data/surfaces/
gemm_efficiency.csv`: the median over every measured (N, K) with N·K ≥ 4096² at each M = 1, 2,
4, …, 32,768; `benchmarks/derive/aic_surfaces.py` writes it, its `#` header names each table,
its version and its collection metadata).

A GEMM costs FLOPs / surface(M), interpolated linearly in M between the measured M (where a
GEMM's time never falls as M grows) and held at the ends (the estimate's `ceiling_source`
names the measured range: below M = 1 there is nothing, and beyond the largest M, 8,192 or
32,768, a GEMM sits on its plateau), when all of these hold:
- the device's spec names its tables (`Achievable.surface_system`: H100 SXM, H200, B200, B300,
  GB200, GB300, A100 SXM 80 GB, L40S) and the engine is one they were measured under
  (`FRAMEWORKS`: vLLM, SGLang, TensorRT-LLM);
- weights and activations are both 16-bit, or both fp8 (W8A8; the engines' scaled-mm kernels);
  weight-only formats run the engine's own kernels (`EngineSpec.matmul`);
- the GEMM is dense and of the tables' size: one weight matrix of N·K ≥ 4096² per instance
  (smaller GEMMs keep the fractions; MoE experts read the fused-MoE surface below).
Everything else keeps the fractions, and the estimate's `ceiling_source` says which origin each
has. Tables exist for one release per engine (vLLM 0.24.0, SGLang 0.5.14, TensorRT-LLM
1.3.0rc20; on A100 0.14.0 / 0.5.10 / 1.0.0). A table stands for its release and later ones
(`measured_for`): an older release asked for (`vllm@0.6.3`), or one nobody stated, keeps the
fractions, since a newer release's kernels are not assumed for it. The datasheet ceiling never
reads a surface. The serving simulator fits its step cost on the spec without the surfaces
(`serve.stepcost.affine_spec`: its cost is affine in the batch's tokens) and adds back what the
GEMM surface makes of each dense GEMM at the step's rows (`serve.stepcost.gemm_rows_delta`), so
its decode steps cost what `estimate` says.

An all-reduce of an engine with tables at its GPU count costs the engine's measured latency at
its message size (`all_reduce_surface`, read by `parallel.Link`: the same link in `estimate`
and in the simulator, whose collectives are costed exactly per step): log-log between the
measured sizes (256 B to 1 GiB), a larger message never faster.

AMD devices have no aiconfigurator tables; theirs come from the cited kernel evidence
(`../shared/evidence/kernels/`, `benchmarks/derive/amd_surfaces.py` writes
`amd_gemm_efficiency.csv` and `amd_collectives.csv` in the same columns, their `#` headers
naming every evidence row). System `mi300x` (gfx942, 304 CUs: MI300X, and MI325X, which runs
the same tuned kernels):
- fp8 GEMMs by M = 16 to 16,384 from AITER's tuned block-scaled fp8 GEMM, the kernel SGLang
  calls on ROCm from 0.4.5 and vLLM from 0.8.3 (older releases keep the fractions). Below the
  smallest measured M a GEMM takes that M's time (its weights stream the same: an fp8 GEMM on
  gfx942 takes 10.70 us at M = 1 and 10.72 us at M = 32, evidence gemm-130/131);
- all-reduce on 8 GPUs from rccl-tests (RCCL 2.22.3, one process per GPU), the HIP-graph
  curve for an engine that captures graphs, else the eager one. RCCL is what every vLLM and
  SGLang release on ROCm calls, their custom kernels only where faster, so the curve stands
  for any release (`AllReduceSurface.engine_release` '0') as an upper bound on its time.
- fused MoE in block-scaled fp8 from AITER's tuned fused-MoE kernel (below).
bf16 GEMMs and MI355X/MI350X (gfx950) keep the fractions: the evidence has no curve by M or
by bytes for them.

Attention (`attention_surface`; `decode_attention.csv` and `prefill_attention.csv`, written by
`benchmarks/derive/aic_surfaces.py` from the tables' generation and context attention at two
head layouts per GPU, (N, K, H) = (32, 8, 128) and (8, 1, 128)) is the efficiency of one call,
its work over its measured latency against the datasheet roof of the measured device (the one
whose spec names the system): decode, the bytes it moves (the cache of L tokens read, the new
token's K, V written, Q read and O written) against the memory bandwidth; prefill, the causal
FLOPs B·4·L(L + 1)/2·N·H against the peak at its dtype. It is read by the call's batch B, its
work per sequence and N·H per GPU: log2 efficiency linear in log2 work along each measured B
(time per call held non-decreasing by a running maximum), then linear in log2 B, then in log2
N·H between the layouts, held at every end (the label in `ceiling_source` names the measured B
and L). Work per sequence, not L, is the axis because it carries over between head layouts:
reading one layout's surface for the other's points, decode is 23% median off (bytes per
sequence) against 55-300% per table by (B, L); prefill 20% median, 73% p90 (FLOPs per sequence)
against 9-32% median but a p90 of up to 290% by (B, L). It applies to the softmax attention core
(`sdpa_op`; MLA and linear attention keep the fractions) of an engine whose table on the device
stands for its release (`measured_for`), attention in 16 bits (or fp8 where a prefill table
measured it) over a 16-bit cache (the bf16 tables) or an fp8 one (the fp8-KV tables); any other
cache keeps the fractions. A decode step (one token per sequence, or a speculative verify step
of K + 1, which the engines run in the same decode kernel) reads the decode table for its memory
time, any other causal step the prefill table for its compute time; the other roof keeps the
fractions, and the fixed time is the kernels' launch floor (a measured latency holds the
kernel's own fixed cost: no `decode_fixed_us`). The datasheet ceiling never reads it. The
serving simulator reprices the attention rows of each decode step on it
(`serve.stepcost.AttentionDecodeRows`: B the step's sequences, the bytes from its affine fit),
so a decode step costs what `estimate` says; prefill and mixed steps keep the fractions (a chunk
over a cached prefix is not the tables' shape). The kept sample of raw points
(tests/test_attention_surface.py, 959 points) comes back 0.01% median off; the largest, 35%, are
points whose latency dips below a shorter context's, which the running maximum lifts.

A MoE layer's routed experts (`moe_surface`, `moe_efficiency.csv`, written by
`benchmarks/derive/moe_surfaces.py` from every MoE shape of the aiconfigurator tables and, for
MI300X, AITER's tuned fused MoE, evidence moe-058..070) cost their own roofline,
max(FLOPs / peak, weight bytes / bandwidth) at the datasheet values of the measured device,
over the measured efficiency of a fused-MoE layer at the same m (tokens per touched expert,
the experts' M) and W (weight elements the layer reads per GPU): medians over the measured
shapes in cells of half a power of two on each axis, interpolated in log2 m along each W row
and then in log2 W, held at the ends. The two axes carry what a MoE layer's shape does to its
kernel: the fixed cost of routing and a grouped launch weighs on a small W, tiles fill with m.
It applies when the engine has a table of its MoE dtype on the device at or below its release
(16-bit; fp8 weights, block-scaled first; mxfp4 experts with 16-bit activations; nvfp4),
with the same rules as the GEMM surface: the datasheet ceiling never reads it, the serving
simulator runs without it (routed experts keep its affine fit), and an expert-parallel rank
reads it on the same axes (the tables' TP-split layouts). On the kept sample of raw points its
median error is 6.6% (tests/test_moe_surface.py): the spread between shapes of one (m, W).
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

import numpy as np

from ..units import UNKNOWN_RELEASE, version_key
from .operators import ArrayLike

#: The aiconfigurator systems with GEMM tables; a device names its own in its spec
#: (`Achievable.surface_system`, e.g. `surface_system: h100_sxm` in hardware_specs/h100-sxm.yaml).
SURFACE_SYSTEMS: tuple[str, ...] = (
    "a100_sxm",
    "b200_sxm",
    "b300_sxm",
    "gb200",
    "gb300",
    "h100_sxm",
    "h200_sxm",
    "l40s",
    "mi300x",
)
#: Systems whose surfaces come from ../shared/evidence/kernels/ (`amd_surfaces.py`), not from
#: aiconfigurator-core; their tables are the `amd_` files.
EVIDENCE_SYSTEMS: tuple[str, ...] = ("mi300x",)
#: Origin of each table's rows, for the estimate's `ceiling_source`.
AIC_ORIGIN = "aiconfigurator-core 0.12.0 tables"
AMD_ORIGIN = "../shared/evidence/kernels via benchmarks/derive/amd_surfaces.py"
#: Engine profile → the framework folder of the tables.
FRAMEWORKS: dict[str, str] = {"vllm": "vllm", "sglang": "sglang", "tensorrt-llm": "trtllm"}
#: Implementations of the tables that are special-purpose kernels, not the engine's default
#: GEMM for a dense layer of that dtype (block-scaled fp8, fp4, plugins).
_SPECIAL = ("deepgemm", "flashinfer", "cutedsl", "triton", "trt_flow_", "nvfp4")


def measured_for(release: str, table_version: str) -> bool:
    """A table measured on `table_version` stands for an engine of `release` ('' = the newest)
    when it was measured at or below that release: a newer release's kernels are not assumed
    for an older one, nor for a release nobody stated (`UNKNOWN_RELEASE`)."""
    if release == UNKNOWN_RELEASE:
        return False
    return not release or version_key(table_version) <= version_key(release)


#: Weights of one instance below which a GEMM is smaller than every shape the medians are over.
MIN_WEIGHT_ELEMS = 4096 * 4096


@dataclass(frozen=True, kw_only=True)
class GemmSurface:
    """Median achieved FLOP/s of one engine's dense GEMMs on one device, by M."""

    system: str
    framework: str
    version: str
    implementation: str
    dtype: str
    m: np.ndarray  # measured M, ascending
    flops_per_s: np.ndarray  # median over the shapes, FLOP/s
    origin: str = AIC_ORIGIN

    def at(self, rows: np.ndarray) -> np.ndarray:
        """Achieved FLOP/s at M = `rows`: linear in M between the measured M (a GEMM's time
        then never falls as M grows, `gemm_surface`), held at the largest M; below the
        smallest (M = 1 in the aiconfigurator tables, 16 in the AMD evidence) the smallest's
        time is held, so FLOP/s falls in proportion to M."""
        r = np.maximum(np.asarray(rows, dtype=float), 1.0)
        inside = np.interp(r, self.m, self.flops_per_s)
        return np.where(r < self.m[0], self.flops_per_s[0] * r / self.m[0], inside)

    @property
    def label(self) -> str:
        lo, hi = int(self.m[0]), int(self.m[-1])
        return (
            f"{self.implementation} {self.dtype} on {self.system} under {self.framework} "
            f"{self.version}, M {lo}-{hi} ({self.origin})"
        )


@lru_cache(maxsize=8)
def _table(name: str) -> tuple[dict[str, str], ...]:
    """The rows of a bundled surface (roofline/data/surfaces/NAME.csv), its `#` header skipped."""
    text = resources.files("roofline").joinpath(f"data/surfaces/{name}.csv").read_text()
    body = "\n".join(ln for ln in text.splitlines() if not ln.startswith("#"))
    return tuple(csv.DictReader(io.StringIO(body)))


@lru_cache(maxsize=256)
def gemm_surface(system: str | None, engine: str, dtype: str) -> GemmSurface | None:
    """The surface of `engine`'s dense `dtype` GEMMs on aiconfigurator system `system`; None
    where the tables have none (another system, engine or dtype)."""
    framework = FRAMEWORKS.get(engine)
    if system is None or framework is None or dtype not in ("bf16", "fp16", "fp8"):
        return None
    want = "bf16" if dtype == "fp16" else dtype
    evidence = system in EVIDENCE_SYSTEMS
    rows = [
        r
        for r in _table("amd_gemm_efficiency" if evidence else "gemm_efficiency")
        if r["system"] == system
        and r["framework"] == framework
        and r["dtype"] == want
        and not any(s in r["implementation"].lower() for s in _SPECIAL)
    ]
    impls = sorted({r["implementation"] for r in rows})
    if len(impls) != 1:  # none, or no single default kernel to read
        return None
    rows.sort(key=lambda r: int(r["m"]))
    m = np.asarray([int(r["m"]) for r in rows], dtype=float)
    flops = np.asarray([float(r["tflops_median"]) * 1e12 for r in rows])
    # A GEMM of more rows never takes less time: the medians at neighbouring M are over shapes
    # measured separately, so M / FLOP/s (time per unit of N·K) can dip by a few percent; the
    # surface takes its running maximum. Linear interpolation of FLOP/s in M between points
    # whose time grows keeps the time growing in between.
    time_per_m = np.maximum.accumulate(m / flops)
    return GemmSurface(
        system=system,
        framework=framework,
        version=rows[0]["framework_version"],
        implementation=impls[0],
        dtype=want,
        m=m,
        flops_per_s=m / time_per_m,
        origin=AMD_ORIGIN if evidence else AIC_ORIGIN,
    )


# ---- all-reduce ------------------------------------------------------------------------------
#: Engine profile → its own all-reduce as the tables name it (under CUDA graphs, and eager).
#: The collectors timed each engine's all-reduce entry point, so the curves hold its own
#: switch to NCCL above its custom kernel's size limit (vLLM's eager curve meets NCCL's from
#: 4 MiB at 8 H100s).
ALL_REDUCE_IMPLEMENTATIONS: dict[str, tuple[str, str]] = {
    "vllm": ("vLLM_custom_graph", "vLLM_custom_eager"),
    "sglang": ("SGLang_CustomAllReduce_graph", "SGLang_CustomAllReduce_eager"),
    "tensorrt-llm": ("TRTLLM", "TRTLLM"),
}
#: On the evidence systems every engine's all-reduce is read off RCCL's own curves (module
#: docstring): under HIP graphs, and eager.
RCCL_IMPLEMENTATIONS: tuple[str, str] = ("RCCL_graph", "RCCL_eager")


@dataclass(frozen=True, kw_only=True)
class AllReduceSurface:
    """An engine's measured all-reduce on one system and GPU count: latency by message size."""

    system: str
    implementation: str
    version: str
    gpus: int
    message_bytes: np.ndarray  # ascending
    seconds: np.ndarray  # running maximum: a larger message never takes less time
    engine_release: str = ""  # the engine release it stands for from ('': `version`)
    origin: str = AIC_ORIGIN

    def at(self, message_bytes: np.ndarray) -> np.ndarray:
        """Seconds for messages of `message_bytes` per GPU: log-log interpolation between the
        measured sizes, the smallest's time below them, and the largest's bandwidth beyond."""
        m = np.maximum(np.asarray(message_bytes, dtype=float), 1.0)
        lx, ly = np.log(self.message_bytes), np.log(self.seconds)
        inside = np.exp(np.interp(np.log(m), lx, ly))
        beyond = self.seconds[-1] * m / self.message_bytes[-1]
        return np.where(m > self.message_bytes[-1], beyond, inside)

    @property
    def label(self) -> str:
        lo, hi = int(self.message_bytes[0]), int(self.message_bytes[-1])
        return (
            f"{self.implementation} on {self.gpus} GPUs of {self.system} ({self.version}), "
            f"{lo} B-{hi >> 20} MiB ({self.origin})"
        )

    @property
    def since(self) -> str:
        """The engine release from which the curve stands for the engine's all-reduce."""
        return self.engine_release or self.version


@lru_cache(maxsize=256)
def all_reduce_surface(
    system: str | None, engine: str, gpus: int, graphs: bool
) -> AllReduceSurface | None:
    """`engine`'s own all-reduce on `gpus` GPUs of `system`, captured in CUDA graphs or eager;
    None where the tables have none (another system, engine or GPU count)."""
    impl = ALL_REDUCE_IMPLEMENTATIONS.get(engine)
    if system is None or impl is None:
        return None
    evidence = system in EVIDENCE_SYSTEMS
    if evidence:
        impl = RCCL_IMPLEMENTATIONS
    name = impl[0] if graphs else impl[1]
    rows = [
        r
        for r in _table("amd_collectives" if evidence else "collectives")
        if r["system"] == system
        and r["implementation"] == name
        and r["collective"] == "all_reduce"
        and int(r["gpus"]) == gpus
    ]
    if len(rows) < 2:
        return None
    rows.sort(key=lambda r: int(r["message_bytes"]))
    size = np.asarray([float(r["message_bytes"]) for r in rows])
    secs = np.maximum.accumulate(np.asarray([float(r["latency_us"]) * 1e-6 for r in rows]))
    version = rows[0]["framework_version"]
    if evidence:
        return AllReduceSurface(
            system=system,
            implementation=name,
            version=f"RCCL {version}",
            gpus=gpus,
            message_bytes=size,
            seconds=secs,
            engine_release="0",
            origin=AMD_ORIGIN,
        )
    return AllReduceSurface(
        system=system,
        implementation=name,
        version=version,
        gpus=gpus,
        message_bytes=size,
        seconds=secs,
    )


# ---- attention ---------------------------------------------------------------------------------
#: The KV-cache dtype of a case → the tables' `kv_dtype` (16-bit KV reads the bf16 tables).
ATTENTION_KV_DTYPES: dict[str, str] = {"bf16": "bf16", "fp16": "bf16", "fp8": "fp8"}
#: The two phases the tables measure: one query token per sequence over its cache (decode,
#: `decode_attention.csv`, axis `kv_tokens`) or a causal prompt on no cache (prefill,
#: `prefill_attention.csv`, axis `seq_tokens`).
ATTENTION_PHASES: dict[str, tuple[str, str]] = {
    "decode": ("decode_attention", "kv_tokens"),
    "prefill": ("prefill_attention", "seq_tokens"),
}


def attention_work(
    phase: str, B: ArrayLike, L: ArrayLike, N: int, K: int, H: int, kv_bytes: float
) -> ArrayLike:
    """What one measured attention call of B sequences does, in the unit its efficiency is of:
    decode, bytes moved, B·(L·2KH·kv + 2KH·kv + 2NH·2) (the cache of L = S + 1 tokens read,
    the new token's K, V written, Q read and O written in 16 bits: `operators.sdpa_op` at
    T = 1 priced as `cost.op_cost` prices it); prefill, FLOPs of a causal prompt of L tokens,
    B·4·L(L + 1)/2·N·H."""
    if phase == "decode":
        return B * (L * 2 * K * H * kv_bytes + 2 * K * H * kv_bytes + 2 * N * H * 2)
    return B * 4 * (L * (L + 1) / 2) * N * H


def _collapsed(a: np.ndarray, least: int = 1024) -> np.ndarray:
    """`a` with each axis along which all its values are equal cut to length 1 (it
    broadcasts back to `a`), when `a` has at least `least` values: a grid of batches ×
    lengths has one work per sequence per length, so a function of it is computed once per
    length, not once per point."""
    if a.size < least:
        return a
    for axis, n in enumerate(a.shape):
        if n > 1:
            first = a[(slice(None),) * axis + (slice(0, 1),)]
            if (a == first).all():
                a = first
    return a


def _outer(a: tuple[int, ...], b: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    """Whether broadcasting shapes `a` and `b` to `shape` is their outer product with `a`'s
    axes first: then the broadcast, flattened, is the (a.size, b.size) table."""
    n = len(shape)
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    first = next((k for k in range(n) if b[k] != 1), n)  # b's first axis longer than 1
    return all(v == 1 for v in a[first:])


@dataclass(frozen=True)
class AttentionLayout:
    """One measured head layout of an attention surface: log2 efficiency on the grid of its
    measured batches (rows) × the log2 work per sequence of every measured length (columns; a
    row is linear between its own points and held past its ends, so sampling it at every
    row's points loses nothing)."""

    log2_nh: float  # log2 of the layout's N·H per GPU
    log2_b: np.ndarray  # (rows,) ascending
    log2_work: np.ndarray  # (columns,) ascending
    log2_eff: np.ndarray  # (rows, columns)
    # derived once (`__post_init__`), so that a read does the least work per point: the inner
    # breakpoints of each axis (searchsorted on them is the clipped segment index), each
    # segment's width, and each grid cell's rise to its right neighbour (0 past the last)
    _inner_work: np.ndarray = field(init=False, repr=False, compare=False)
    _inner_b: np.ndarray = field(init=False, repr=False, compare=False)
    _dx: np.ndarray = field(init=False, repr=False, compare=False)
    _db: np.ndarray = field(init=False, repr=False, compare=False)
    _rise: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        x, b, y = self.log2_work, self.log2_b, self.log2_eff
        rise = np.zeros_like(y)
        rise[:, :-1] = np.diff(y, axis=1)  # y[:, j + 1] - y[:, j]
        for name, value in (
            ("_inner_work", x[1:-1]),
            ("_inner_b", b[1:-1]),
            ("_dx", np.diff(x) if x.size > 1 else np.ones(1)),
            ("_db", np.diff(b) if b.size > 1 else np.ones(1)),
            ("_rise", rise),
        ):
            object.__setattr__(self, name, value)

    def efficiency(self, lb: np.ndarray, lw: np.ndarray) -> np.ndarray:
        """Efficiency at log2 B `lb` and log2 work per sequence `lw` (broadcast): log2
        efficiency linear in log2 work along each measured B, then efficiency linear in
        log2 B between the measured B; held at every end."""
        x, b, y = self.log2_work, self.log2_b, self.log2_eff
        # the segment of each point, clipped to the grid: searchsorted(x, v, right) - 1 held
        # within [0, columns - 2], which is searchsorted over the inner breakpoints alone
        j = np.searchsorted(self._inner_work, lw, side="right")
        i = np.searchsorted(self._inner_b, lb, side="right")
        tw = np.clip((lw - x[j]) / self._dx[j], 0.0, 1.0)
        tb = np.clip((lb - b[i]) / self._db[i], 0.0, 1.0)
        up = 1 if b.size > 1 else 0  # the measured B above (none: the one row twice)
        rows, nb, nw = y.shape[0], np.size(lb), np.size(lw)
        shape = np.broadcast_shapes(np.shape(lb), np.shape(lw))
        if rows * nw <= math.prod(shape):
            # fewer lengths than points (a grid of B × lengths): every measured row at each
            # length once, then each point reads its row and the one above (the same
            # arithmetic per point as below)
            at = np.exp2(y[:, j] + tw * self._rise[:, j]).reshape(rows, nw)
            rise = at[up:] - at[: rows - up] if up else np.zeros_like(at)
            if _outer(np.shape(lb), np.shape(lw), shape):  # B's axes, then the lengths'
                row, t = i.reshape(nb), tb.reshape(nb, 1)
                return (at[row] + t * rise[row]).reshape(shape)
            k = i * nw + np.arange(nw).reshape(np.shape(lw))
            return at.take(k) + tb * rise.take(k)
        nx = x.size
        k = i * nx + j  # (row i, column j) of the grid, and the row above
        flat, rise_flat = y.ravel(), self._rise.ravel()
        k_up = k + up * nx
        y0, y1 = flat.take(k), flat.take(k_up)
        lo = np.exp2(y0 + tw * rise_flat.take(k))
        return lo + tb * (np.exp2(y1 + tw * rise_flat.take(k_up)) - lo)


@dataclass(frozen=True)
class AttentionSurface:
    """Measured attention of one engine on one device and phase: the efficiency of a call
    (its work over its latency, against the device's datasheet roof: memory bandwidth for
    decode, the peak for prefill) by the call's batch B, its work per sequence and the query
    heads × head dim N·H per GPU of the measured head layouts."""

    system: str
    framework: str
    version: str
    implementation: str
    phase: str  # an `ATTENTION_PHASES` key
    kv_dtype: str
    layouts: tuple[AttentionLayout, ...]  # ascending N·H
    roof_per_s: float  # the datasheet bandwidth (B/s) or peak (FLOP/s) the efficiencies are of
    lengths: tuple[int, int]  # the measured L (KV tokens or prompt tokens per sequence)
    batches: tuple[int, int]
    origin: str = AIC_ORIGIN
    # whether the cap at 1 can bind (`efficiency`): a read interpolates between grid values
    # (log2 linear, then linear), so it stays within a few ulps of the largest; a surface
    # whose largest is below 1 - 1e-6 never reaches the cap
    _reaches_one: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        top = max(float(np.exp2(a.log2_eff.max())) for a in self.layouts)
        object.__setattr__(self, "_reaches_one", not top < 1 - 1e-6)  # NaN: keep the cap

    def efficiency(self, B: ArrayLike, work_per_seq: ArrayLike, nh: float) -> np.ndarray:
        """Efficiency of a call of B sequences doing `work_per_seq` each at N·H = `nh` per GPU:
        in each layout (`AttentionLayout.efficiency`: log2 efficiency linear in log2 work per
        sequence, so between two measured points a call of more work never takes less time,
        then linear in log2 B), then linear in log2 N·H between the layouts; held at every
        end. Capped at 1: nothing runs above its datasheet roof."""
        # B ≥ 1 (`Step`); no work (log2 0 = -inf) reads the smallest measured point
        batch, work = np.asarray(B, dtype=float), np.asarray(work_per_seq, dtype=float)
        shape = np.broadcast_shapes(batch.shape, work.shape)
        with np.errstate(divide="ignore"):
            lb = np.log2(batch)
            lw = np.log2(_collapsed(work))  # each distinct work per sequence once
        ln = float(np.log2(max(nh, 1.0)))
        first, last = self.layouts[0], self.layouts[-1]
        if ln <= first.log2_nh:
            eff = first.efficiency(lb, lw)
        elif ln >= last.log2_nh:
            eff = last.efficiency(lb, lw)
        else:
            k = next(k for k, a in enumerate(self.layouts) if a.log2_nh > ln) - 1
            a, b = self.layouts[k], self.layouts[k + 1]
            t = (ln - a.log2_nh) / (b.log2_nh - a.log2_nh)
            ea = a.efficiency(lb, lw)
            eff = ea + t * (b.efficiency(lb, lw) - ea)
        if self._reaches_one:
            eff = np.minimum(eff, 1.0)
        return eff if np.shape(eff) == shape else np.broadcast_to(eff, shape)

    def time_s(self, work: ArrayLike, B: ArrayLike, nh: float) -> np.ndarray:
        """Seconds of a call of B sequences doing `work` in all (bytes or FLOPs)."""
        w = np.asarray(work, dtype=float)
        b = np.asarray(B, dtype=float)
        return w / (self.roof_per_s * self.efficiency(b, w / b, nh))

    @property
    def label(self) -> str:
        unit = "KV tokens" if self.phase == "decode" else "prompt tokens"
        nh = "/".join(f"{round(2**a.log2_nh)}" for a in self.layouts)
        return (
            f"{self.implementation} {self.kv_dtype} KV on {self.system} under {self.framework} "
            f"{self.version}, B {self.batches[0]}-{self.batches[1]}, {self.lengths[0]}-"
            f"{self.lengths[1]} {unit}, N*H {nh}, held outside ({self.origin})"
        )


@lru_cache(maxsize=8)
def _attention_text(name: str) -> str:
    """A bundled attention table as text (roofline/data/surfaces/NAME.csv)."""
    return resources.files("roofline").joinpath(f"data/surfaces/{name}.csv").read_text()


def _attention_lines(name: str, system: str, framework: str) -> list[str]:
    """The header and the data lines of one system and engine of an attention table, unparsed:
    the rows are sorted by system, then framework, so theirs are one block of the ~7,000."""
    text = _attention_text(name)
    body = text.index("\nsystem,") + 1  # the header, after the `#` lines
    header = text[body : text.index("\n", body)]
    key = f"\n{system},{framework},"
    first = text.find(key)
    if first < 0:
        return [header]
    end = text.find("\n", text.rfind(key) + 1)
    return [header, *text[first + 1 : end if end >= 0 else len(text)].splitlines()]


@lru_cache(maxsize=64)
def attention_surface(
    system: str | None, engine: str, phase: str, dtype: str, kv_dtype: str, roof_per_s: float
) -> AttentionSurface | None:
    """`engine`'s measured `phase` attention on `system`, computing in `dtype` over a `kv_dtype`
    cache (keys of `ATTENTION_KV_DTYPES`), as efficiencies against `roof_per_s` (the datasheet
    bandwidth for decode, the peak at `dtype` for prefill, of the device the system names);
    None where the tables have none (another system, engine or dtype: the tables hold 16-bit
    and, for some prefill kernels, fp8 attention, over bf16 and fp8 caches)."""
    framework = FRAMEWORKS.get(engine)
    want, at = ATTENTION_KV_DTYPES.get(kv_dtype), ATTENTION_KV_DTYPES.get(dtype)
    if system is None or framework is None or want is None or at is None:
        return None
    if phase not in ATTENTION_PHASES:
        return None
    name, axis = ATTENTION_PHASES[phase]
    rows = [
        r
        for r in csv.DictReader(_attention_lines(name, system, framework))
        if r["kv_dtype"] == want and r["dtype"] == at
    ]
    if not rows:
        return None
    # one kernel per engine: where the tables measured two (SGLang on B200: trtllm_mha over
    # both layouts, flashinfer over one), the one measured over more points
    count: dict[str, int] = {}
    for r in rows:
        count[r["implementation"]] = count.get(r["implementation"], 0) + 1
    impl = max(sorted(count), key=lambda k: count[k])
    rows = [r for r in rows if r["implementation"] == impl]
    kvb = 1.0 if want == "fp8" else 2.0
    by_layout: dict[tuple[int, int, int], dict[int, list[tuple[float, float]]]] = {}
    for r in rows:
        N, K, H = int(r["num_heads"]), int(r["num_kv_heads"]), int(r["head_dim"])
        B, L = int(r["batch"]), int(r[axis])
        work = float(attention_work(phase, B, L, N, K, H, kvb))
        eff = work / (float(r["latency_us"]) * 1e-6 * roof_per_s)
        by_layout.setdefault((N, K, H), {}).setdefault(B, []).append((work / B, eff))
    if len({k[0] * k[2] for k in by_layout}) != len(by_layout):
        return None  # two layouts of one N·H: no single axis to read them on
    layouts = []
    for key in sorted(by_layout, key=lambda k: k[0] * k[2]):
        bs = sorted(by_layout[key])
        curves = []
        for b in bs:
            points = sorted(by_layout[key][b])
            per_seq = np.asarray([w for w, _ in points])
            measured = np.asarray([e for _, e in points])
            # a call of more work never takes less time: the points of one B were measured
            # one by one, so time per call (work / efficiency) takes its running maximum
            time = np.maximum.accumulate(per_seq / measured)
            curves.append((np.log2(per_seq), np.log2(per_seq / time)))
        x = np.asarray(sorted({float(v) for c in curves for v in c[0]}))  # (no np.unique:
        # it imports numpy.ma, 15 ms of an estimate's start)
        y = np.stack([np.interp(x, cx, cy) for cx, cy in curves])
        nh = float(np.log2(key[0] * key[2]))
        layouts.append(AttentionLayout(nh, np.log2(np.asarray(bs, dtype=float)), x, y))
    lengths = [int(r[axis]) for r in rows]
    batches = [int(r["batch"]) for r in rows]
    return AttentionSurface(
        system,
        framework,
        rows[0]["framework_version"],
        impl,
        phase,
        want,
        tuple(layouts),
        roof_per_s,
        (min(lengths), max(lengths)),
        (min(batches), max(batches)),
    )


# ---- fused MoE ---------------------------------------------------------------------------------
#: Bytes per weight element and the engine's MoE dtype for a (weight, activation) format pair
#: (`moe_dtype`): 16-bit both; W8A8 fp8 (block-scaled first: the fp8 MoE checkpoints published,
#: DeepSeek-V3/R1 and Qwen3's, are 128x128 block-scaled; per-tensor fp8 where a table has no
#: block-scaled kernel); mxfp4 experts with 16-bit activations (gpt-oss); nvfp4 both.
MOE_DTYPES: dict[str, tuple[str, ...]] = {
    "bf16": ("bf16",),
    "fp8": ("fp8_block", "fp8"),
    "w4a16_mxfp4": ("w4a16_mxfp4",),
    "nvfp4": ("nvfp4",),
}


@dataclass(frozen=True, kw_only=True)
class MoeSurface:
    """Measured fused-MoE layers of one engine on one device: efficiency against the layer's
    own roofline by (log2 W, log2 m), W the weight elements read per GPU, m tokens per touched
    expert (`benchmarks/derive/moe_surfaces.py`, `moe_efficiency.csv`)."""

    system: str
    framework: str
    version: str
    implementation: str
    dtype: str
    log2_w: np.ndarray  # the W rows, ascending
    rows: tuple[tuple[np.ndarray, np.ndarray], ...]  # per W row: (log2 m ascending, efficiency)
    peak_flops_per_s: float  # the datasheet values the efficiencies are against
    bytes_per_s: float
    weight_bytes: float  # bytes per weight element of the dtype (scales left out)
    engine_release: str = ""
    origin: str = AIC_ORIGIN

    def efficiency(self, m: np.ndarray, w: np.ndarray) -> np.ndarray:
        """Efficiency at m tokens per touched expert and W weight elements: linear in log2 m
        along each measured W row (held at the row's ends), then linear in log2 W between the
        rows whose m range holds m (every row where none does), held at the ends."""
        lm = np.log2(np.maximum(np.asarray(m, dtype=float), 1.0))
        lw = np.log2(np.maximum(np.asarray(w, dtype=float), 1.0))
        lm, lw = np.broadcast_arrays(lm, lw)
        per_row = np.stack([np.interp(lm, x, y) for x, y in self.rows])  # (rows, ...)
        cover = np.stack([(lm >= x[0] - 0.25) & (lm <= x[-1] + 0.25) for x, _ in self.rows])
        cover = np.where(cover.any(axis=0), cover, True)
        rows = np.arange(len(self.rows)).reshape((-1,) + (1,) * lm.ndim)
        ws = self.log2_w.reshape(rows.shape)
        # the nearest covering rows at or below W and at or above it (either one held alone)
        below = np.where(cover & (ws <= lw), rows, -1).max(axis=0)
        above = np.where(cover & (ws >= lw), rows, len(self.rows)).min(axis=0)
        below = np.where(below < 0, above, below)
        above = np.where(above >= len(self.rows), below, above)
        y0 = np.take_along_axis(per_row, below[None], axis=0)[0]
        y1 = np.take_along_axis(per_row, above[None], axis=0)[0]
        w0, w1 = self.log2_w[below], self.log2_w[above]
        t = np.where(w1 > w0, (lw - w0) / np.where(w1 > w0, w1 - w0, 1.0), 0.0)
        return y0 + t * (y1 - y0)

    def terms_s(
        self, flops: ArrayLike, weight_elems: ArrayLike, instances: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """(compute, memory) seconds of `instances` fused-MoE layers of `flops` FLOPs reading
        `weight_elems` weight elements in all: each roof of the layers' shape over the measured
        efficiency at their m and W (the larger is the layers' time)."""
        f = np.asarray(flops, dtype=float)
        w = np.asarray(weight_elems, dtype=float)
        safe = np.where(w > 0, w, 1.0)
        eff = self.efficiency(f / (2 * safe), safe / max(instances, 1))
        compute = np.where(w > 0, f / self.peak_flops_per_s / eff, 0.0)
        memory = np.where(w > 0, w * self.weight_bytes / self.bytes_per_s / eff, 0.0)
        return compute, memory

    @property
    def since(self) -> str:
        return self.engine_release or self.version

    @property
    def label(self) -> str:
        return (
            f"{self.implementation} {self.dtype} on {self.system} under {self.framework} "
            f"{self.since}, W 2^{self.log2_w[0]:g}-2^{self.log2_w[-1]:g} elements "
            f"({self.origin})"
        )


#: The bundled fused-MoE tables: the current releases' (`moe_surfaces.py`) and older releases'
#: kernels (`moe_release_surfaces.py`), each with the origin its rows cite and the first release
#: it no longer stands for ('': none). vLLM's Triton block-fp8 table stops at 0.11.0, where
#: DeepGEMM became the default block-fp8 MoE kernel on Hopper (vllm 0.10.2 envs.py:974-975
#: `VLLM_USE_DEEP_GEMM` default "0"; vllm 0.11.0 envs.py:1148-1149 default "1").
MOE_TABLES: dict[str, tuple[str, str]] = {
    "moe_efficiency": ("", ""),
    "moe_release_efficiency": (
        "vLLM PR #13932 via benchmarks/derive/moe_release_surfaces.py",
        "0.11.0",
    ),
}


def _stands_for(release: str, version: str, until: str) -> bool:
    """A table measured at `version` stands for `release` ('' = the newest) when measured at or
    below it (`measured_for`) and the release is older than `until`, the first release that ran
    another kernel ('': none did)."""
    if not measured_for(release, version):
        return False
    return not until or (bool(release) and version_key(release) < version_key(until))


@lru_cache(maxsize=256)
def moe_surface(
    system: str | None, engine: str, dtype: str, release: str = ""
) -> MoeSurface | None:
    """The surface of `engine`'s fused MoE at `dtype` (a `MOE_DTYPES` key) on `system` for an
    engine of `release` ('' = the newest): of the tables measured at or below that release
    (`measured_for`), the newest; None where the tables and the evidence have none."""
    framework = FRAMEWORKS.get(engine)
    if system is None or framework is None or dtype not in MOE_DTYPES:
        return None
    table = [
        (r, origin, until)
        for name, (origin, until) in MOE_TABLES.items()
        for r in _table(name)
        if r["system"] == system and r["framework"] == framework
    ]
    for want in MOE_DTYPES[dtype]:
        versions = {
            r["framework_version"]
            for r, _, until in table
            if r["dtype"] == want and _stands_for(release, r["framework_version"], until)
        }
        if versions:
            version = max(versions, key=version_key)
            break
    else:
        return None
    picked = [
        (r, o) for r, o, _ in table if r["dtype"] == want and r["framework_version"] == version
    ]
    rows = [r for r, _ in picked]
    by_w: dict[float, list[tuple[float, float]]] = {}
    for r in rows:
        by_w.setdefault(float(r["log2_w"]), []).append(
            (float(r["log2_m"]), float(r["efficiency_median"]))
        )
    ws = sorted(by_w)
    curves = tuple(
        (np.asarray([x for x, _ in sorted(by_w[w])], dtype=float),
         np.asarray([y for _, y in sorted(by_w[w])]))
        for w in ws
    )  # fmt: skip
    r0, origin = picked[0]
    evidence = system in EVIDENCE_SYSTEMS
    # evidence systems and older releases name their engine release; aiconfigurator's tables
    # stand for the release they were collected on (`MoeSurface.since`: the same version)
    own = evidence or bool(origin)
    return MoeSurface(
        system=system,
        framework=framework,
        version=r0["framework_version"],
        implementation=r0["implementation"],
        dtype=r0["dtype"],
        log2_w=np.asarray(ws, dtype=float),
        rows=curves,
        peak_flops_per_s=float(r0["peak_tflops"]) * 1e12,
        bytes_per_s=float(r0["bandwidth_tbs"]) * 1e12,
        weight_bytes=float(r0["weight_bytes"]),
        engine_release=r0["framework_version"] if own else "",
        origin=origin or (AMD_ORIGIN if evidence else AIC_ORIGIN),
    )
