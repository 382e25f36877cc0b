"""The roofline and the floors under it: the time of each operator of a step.

Three layers (DESIGN.md). `datasheet`: dense datasheet peak and bandwidth, no overheads —
time = max(FLOPs / peak, bytes / bandwidth), the speed of light and a lower bound on every
other figure. `achievable`: the device's `Achievable` terms (what the best kernels reach on
it) and, when an `EngineSpec` is given, the software stack's terms on top:

- compute ceiling = peak · matmul fraction; memory ceiling = bandwidth · bandwidth fraction;
- GEMM shape efficiency (`gemm_shape_efficiency`): a GEMM's output (M × N per layer) is cut
  into tiles of the device's GEMM kernel and the tiles run in waves over the compute units;
  a partial tile computes padding and a partial wave leaves units idle; each tile's prologue
  and epilogue cost K0 more steps of its K loop (K / (K + K0)). Off when the spec gives no
  tile or no compute-unit count;
- a fixed device time per kernel (launch, ramp-up, tail), `kernel_overhead_us` × launches:
  `Op.launches` kernels of an eager implementation, or one per operator instance
  (`Op.instances`) for an engine that fuses; a GEMM pays `gemm_overhead_us` instead (ramp to
  streaming bandwidth and the split-K tail of a skinny GEMM), and a decode attention call the
  engine kernel's `decode_fixed_us` on top (split-KV partials and their combine);
- attention kernels reach the engine's fraction of the memory roof (decode) and of the
  compute roof (prefill), times the device's own attention fractions (calibrated CPUs), or,
  where the engine's measured attention stands for it (`measured_attention_cost`,
  `roofline.spec.surfaces` "Attention"), the measured efficiency at the call's batch and work;
- GEMMs run the engine's kernel for their weight × activation width (w4a16, w8a16 dequantise
  in the kernel; some engines run their own 16-bit kernels): its fractions of the memory and
  compute ceilings; a width the engine does not list runs at the device's ceilings;
- host: without CUDA graphs every kernel costs the engine's `host_launch_us` on the host; the
  host runs ahead of the device, so a step takes max(device time, host launch time); every
  step also pays `host_step_us` (scheduling, sampling) that nothing hides;
- W8A8 (fp8 or int8 activations): a GEMM reads its input quantised and writes its output in
  16 bits, and every other operator works on the 16-bit residual stream (`activation_bytes`);
- small-M GEMM term M½ and gemv row cost: measured terms of calibrated CPUs (below).

CPU terms from `roofline calibrate` (module `roofline.measure.calibrate` says how each is
measured): a GEMM with M ≥ 2 rows per weight element reaches M / (M + M½) of the matmul
ceiling — compute time (FLOPs + 2·M½·weights) / peak, M½ read off the table measured at the
decode shapes when the spec has one (`half_rows_at`) — and a matrix-vector product (M < 2)
pays `gemv_row_ns` per weight row on top of streaming its weights at `gemv_memory_fraction` of
the memory ceiling.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, get_args

import numpy as np

from ..errors import InvalidInputError
from ..spec import llamacpp
from ..spec.engine import EngineSpec
from ..spec.forward import operators
from ..spec.hardware import Achievable, HardwareSpec
from ..spec.model import ModelSpec
from ..spec.operators import ArrayLike, ExpertShard, Op, Step
from ..spec.precision import Precision
from ..spec.surfaces import (
    MIN_WEIGHT_ELEMS,
    AttentionSurface,
    GemmSurface,
    MoeSurface,
    attention_surface,
    gemm_surface,
    measured_for,
    moe_surface,
)

Ceiling = Literal["datasheet", "achievable"]
CEILINGS: tuple[str, ...] = get_args(Ceiling)

#: Rows of the smallest tensor-core tile (mma m16n8k16): a GEMM of fewer rows still computes 16.
MIN_TILE_ROWS = 16


@dataclass(frozen=True)
class Ceilings:
    """The ceilings and terms one estimate runs against: the device's `Achievable` terms
    (`Achievable.identity` for the datasheet roofline) and the engine's, if any."""

    name: Ceiling
    flops_per_s: float  # matmul ceiling: peak · matmul fraction
    bytes_per_s: float  # memory ceiling: bandwidth · bandwidth fraction
    terms: Achievable
    source: str
    compute_units: int | None = None
    engine: EngineSpec | None = None
    attention_flops_per_s: float | None = None  # attention's own dtype; None: `flops_per_s`
    gemm_surface: GemmSurface | None = None  # the engine's measured dense GEMMs (`surfaces`)
    moe_surface: MoeSurface | None = None  # the engine's measured fused MoE (`surfaces`)
    #: the engine's measured attention (`surfaces.attention_surface`): decode, prefill
    decode_attention: AttentionSurface | None = None
    prefill_attention: AttentionSurface | None = None

    @classmethod
    def of(
        cls,
        hw: HardwareSpec,
        compute_dtype: str,
        ceiling: Ceiling,
        engine: EngineSpec | None = None,
        attention_dtype: str | None = None,
        moe_dtype: str | None = None,
        kv_dtype: str | None = None,
    ) -> Ceilings:
        """The ceilings of `hw` for matmuls at `compute_dtype` and attention at
        `attention_dtype` (`attention_dtype_of`; None: the matmuls' dtype); routed experts
        at `moe_dtype` (`moe_dtype_of`; None: no MoE surface); attention over a `kv_dtype`
        cache (the KV format's compute dtype; None: no attention surface)."""
        peak, bw = hw.peak_flops_per_s(compute_dtype), hw.memory_bandwidth_bytes_per_s
        att = attention_dtype or compute_dtype
        if att not in hw.dense_peak_tflops:  # no such peak (a V100's bf16): the matmuls' dtype
            att = compute_dtype
        att_peak = hw.peak_flops_per_s(att)
        if ceiling == "datasheet":
            a0 = Achievable.identity(hw.source)
            return cls("datasheet", peak, bw, a0, hw.source, attention_flops_per_s=att_peak)
        if ceiling == "achievable":
            a = hw.achievable
            source = a.source if engine is None else f"{a.source}; engine: {engine.source}"
            surface = (
                None
                if engine is None or not a.gemm_surface
                else gemm_surface(a.surface_system, engine.name, compute_dtype)
            )
            if surface is not None and engine is not None:
                if measured_for(engine.known_release, surface.version):
                    source = f"{surface_note(surface)}; {source}"
                else:
                    source = (
                        f"GEMMs: the fractions (the measured tables are of {surface.framework} "
                        f"{surface.version}, newer than {engine.flag}); {source}"
                    )
                    surface = None
            moe = (
                None
                if engine is None or not a.gemm_surface or moe_dtype is None
                else moe_surface(a.surface_system, engine.name, moe_dtype, engine.known_release)
            )
            if moe is not None and engine is not None:
                if measured_for(engine.known_release, moe.since):
                    source = f"routed experts: measured, {moe.label}; {source}"
                else:
                    moe = None
            dec, pre = (
                (None, None)
                if engine is None or not a.gemm_surface or kv_dtype is None
                else attention_surfaces(hw, engine, att, kv_dtype)
            )
            if dec is not None or pre is not None:
                source = f"{attention_note(dec, pre)}; {source}"
            elif engine is not None and a.gemm_surface and kv_dtype is not None:
                newer = attention_surface(
                    a.surface_system, engine.name, "decode", att, kv_dtype, bw
                )
                if newer is not None:  # a table, of a release newer than the engine's
                    source = (
                        f"attention: the fractions (the measured tables are of "
                        f"{newer.framework} {newer.version}, newer than {engine.flag}); {source}"
                    )
            return cls(
                "achievable",
                peak * a.matmul(compute_dtype),
                bw * a.memory_bandwidth_fraction,
                a,
                source,
                hw.compute_units,
                engine,
                att_peak * a.matmul(att),
                surface,
                moe,
                dec,
                pre,
            )
        raise InvalidInputError(f"unknown ceiling '{ceiling}'; use one of: {', '.join(CEILINGS)}")

    @property
    def kernel_overhead_s(self) -> float:
        return self.terms.kernel_overhead_us * 1e-6

    @property
    def ridge_point_flops_per_byte(self) -> float:
        """Intensity where this ceiling's compute and memory times are equal."""
        return self.flops_per_s / self.bytes_per_s


def attention_surfaces(
    hw: HardwareSpec, engine: EngineSpec, dtype: str, kv_dtype: str
) -> tuple[AttentionSurface | None, AttentionSurface | None]:
    """The engine's measured (decode, prefill) attention on `hw` computing in `dtype` over a
    `kv_dtype` cache, each where its table stands for the engine's release (`measured_for`):
    decode efficiencies against the datasheet bandwidth, prefill against the datasheet peak
    at `dtype` (the device the spec's `surface_system` names is the one measured)."""
    system = hw.achievable.surface_system
    dec = attention_surface(
        system, engine.name, "decode", dtype, kv_dtype, hw.memory_bandwidth_bytes_per_s
    )
    pre = (
        attention_surface(
            system, engine.name, "prefill", dtype, kv_dtype, hw.peak_flops_per_s(dtype)
        )
        if dtype in hw.dense_peak_tflops
        else None
    )
    return tuple(  # type: ignore[return-value]
        s if s is not None and measured_for(engine.known_release, s.version) else None
        for s in (dec, pre)
    )


def attention_note(dec: AttentionSurface | None, pre: AttentionSurface | None) -> str:
    """Where attention's times come from, in words (the estimate's `ceiling_source`)."""
    parts = [
        f"{phase} attention: measured, {s.label}"
        for phase, s in (("decode", dec), ("prefill", pre))
        if s is not None
    ]
    return "; ".join(parts) + "; other attention: the fractions"


def attention_surface_for(op: Op, c: Ceilings, step: Step | None) -> AttentionSurface | None:
    """The measured attention surface that costs `op` in `step`, if any: the core of a
    softmax attention layer (`operators.sdpa_op`; MLA's and linear attention's kernels are
    not the tables'); a decode step (`is_decode`: one new token per sequence, or a
    speculative verify step of K + 1, which the engines run in the same decode kernel over
    the same cache, so it reads the decode table at its bytes and never costs less than a
    plain step) on the decode table, any other causal step on the prefill table."""
    if step is None or op.kind != "attention" or not op.name.endswith("/scores+av"):
        return None
    if op.name.startswith("mla/"):  # MLA's naive path: decompressed K, V of its own shapes
        return None
    if is_decode(step):
        return c.decode_attention
    return c.prefill_attention if step.causal else None


def attention_heads_dim(op: Op, step: Step) -> float:
    """N·H per GPU of an attention core: Q read + O written, B·T·2·N·H elements in each of its
    `instances` layers (read at the step's first B and T: the same for all)."""
    act = np.asarray(op.act_elems, dtype=float).flat[0]
    bt = np.asarray(step.batch * step.new_tokens, dtype=float).flat[0]
    return float(act / (2 * bt * op.instances))


def surface_note(surface: GemmSurface) -> str:
    """Where the dense GEMMs' times come from, in words (the estimate's `ceiling_source`)."""
    return (
        f"dense GEMMs of N*K >= 4096^2 at both widths: measured, {surface.label}; other GEMMs: "
        "the fractions"
    )


def surface_applies(op: Op, p: Precision, c: Ceilings) -> bool:
    """A GEMM the ceiling's surface costs (`roofline.spec.surfaces`): dense, one weight matrix of
    the tables' size per instance, weights as wide as the activations it computes at."""
    if c.gemm_surface is None or op.kind != "matmul":
        return False
    N, W = op.weight_rows, op.weight_elems
    if not (isinstance(N, int | float) and isinstance(W, int | float)):
        return False  # ragged (per-expert) shapes
    if W / op.instances < MIN_WEIGHT_ELEMS:
        return False
    return weight_bits(p, op.group) == p.activation_format.element_bits


def moe_dtype_of(p: Precision) -> str | None:
    """The `surfaces.MOE_DTYPES` key of the routed experts' (weight, activation) formats:
    16-bit both; fp8 weights with fp8 or 16-bit activations (an fp8 checkpoint's fused MoE
    quantises its input in the kernel whatever the dense layers do: vLLM's and SGLang's fp8
    MoE methods run the W8A8 block-scaled kernels the tables measured as fp8_block); mxfp4
    weights with 16-bit activations; nvfp4 both. None for any other pair (their MoE kernels
    keep the fractions)."""
    w, a = p.group_formats()["experts"], p.activation_format
    if w.element_bits == 16 and a.element_bits == 16:
        return "bf16"
    if w.family == "float" and w.element_bits == 8 and a.element_bits in (8, 16):
        return "fp8"
    if w.name == "mxfp4" and a.element_bits == 16:
        return "w4a16_mxfp4"
    if w.name == a.name == "nvfp4":
        return "nvfp4"
    return None


def moe_surface_applies(op: Op, c: Ceilings) -> bool:
    """The routed experts of a MoE layer, on a ceiling with the engine's measured fused MoE."""
    return c.moe_surface is not None and op.kind == "matmul" and op.group == "experts"


@dataclass(frozen=True, kw_only=True)
class OpCost:
    """An operator with its bytes and times under one precision and ceiling. Device time is
    max(compute, memory) + the fixed per-kernel time; `host_s` is the host's launch time for
    its kernels (0 under CUDA graphs), which the step compares with the device's."""

    op: Op
    weight_bytes: ArrayLike
    act_bytes: ArrayLike
    kv_bytes: ArrayLike
    compute_s: ArrayLike
    memory_s: ArrayLike
    overhead_s: float  # fixed device time of its kernels
    host_s: float = 0.0

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def flops(self) -> ArrayLike:
        return self.op.flops

    @property
    def bytes(self) -> ArrayLike:
        return self.weight_bytes + self.act_bytes + self.kv_bytes

    @property
    def intensity_flops_per_byte(self) -> ArrayLike:
        b = np.asarray(self.bytes, dtype=float)
        return np.divide(
            self.op.flops, b, out=np.zeros(np.broadcast(self.op.flops, b).shape), where=b > 0
        )

    @property
    def time_s(self) -> ArrayLike:
        """Device time of the operator's kernels."""
        return np.maximum(self.compute_s, self.memory_s) + self.overhead_s

    @property
    def compute_bound(self) -> ArrayLike:
        return self.compute_s > self.memory_s

    @property
    def attained_flops_per_s(self) -> ArrayLike:
        """FLOPs over predicted time: where the operator sits under the roofline."""
        return self.op.flops / self.time_s


def gemm_rows(op: Op) -> ArrayLike:
    """M, the rows each weight element multiplies: FLOPs / (2 · weight elements) of a matmul
    (B·T for a projection, tokens per touched expert for MoE); 0 for other operators."""
    if op.kind != "matmul":
        return 0
    w = op.weight_elems
    if isinstance(w, int | float):  # one weight matrix shape: no masked division needed
        return op.flops / (2 * w) if w > 0 else 0 * op.flops
    w = np.asarray(w, dtype=float)
    return np.divide(op.flops, 2 * w, out=np.zeros(np.broadcast(op.flops, w).shape), where=w > 0)


def gemm_shape_efficiency(
    M: ArrayLike,
    N: ArrayLike,
    tile: tuple[int, int],
    units: int,
    K: ArrayLike | None = None,
    k0: float = 0.0,
) -> ArrayLike:
    """Useful share of the tensor-core work a GEMM of an M × N output issues on `units`
    compute units with output tiles of (m, n) = (min(max(2^⌈log2 M⌉, 16), tile_M), tile_N),
    and, with an inner dimension K, the share of each tile's time spent in its K loop:

        tiles = ⌈M/m⌉·⌈N/n⌉,  waves = ⌈tiles/units⌉,
        efficiency = M·N / (waves·units·m·n) · K / (K + K0)

    Tile padding (M = 100 on 128-row tiles computes 128) and wave quantisation (33 tiles on
    32 units take two waves) both waste issued work. The tile rows follow M up to the
    kernel's tile, the way GEMM libraries pick a smaller tile for a skinny M; split-K, which
    libraries use to fill the units when tiles are few, is not modelled (conservative)."""
    M = np.maximum(np.asarray(M, dtype=float), 1.0)
    N = np.maximum(np.asarray(N, dtype=float), 1.0)
    tm_max, tn = tile
    tm = np.minimum(np.maximum(2.0 ** np.ceil(np.log2(M)), min(MIN_TILE_ROWS, tm_max)), tm_max)
    tiles = np.ceil(M / tm) * np.ceil(N / tn)
    waves = np.ceil(tiles / units)
    eff = M * N / (waves * units * tm * tn)
    if K is None or k0 == 0:
        return eff
    K = np.asarray(K, dtype=float)
    return eff * K / (K + k0)


def half_rows_at(t: Achievable, rows: ArrayLike) -> ArrayLike:
    """M½ of a GEMM of `rows` rows per weight: the measured table (`matmul_half_rows_by_m`)
    interpolated in log M and held at its ends, or the one `matmul_half_rows` without one."""
    table = t.matmul_half_rows_by_m
    if not table:
        return t.matmul_half_rows
    ms, halves = _table_arrays(tuple(table.items()))
    return np.interp(np.log2(np.maximum(np.asarray(rows, dtype=float), 2.0)), ms, halves)


@lru_cache(maxsize=64)
def _table_arrays(items: tuple[tuple[int, float], ...]) -> tuple[np.ndarray, np.ndarray]:
    return np.log2([m for m, _ in items]), np.asarray([h for _, h in items], dtype=float)


def effective_flops(op: Op, t: Achievable) -> ArrayLike:
    """FLOPs the compute ceiling is charged for: the op's FLOPs, plus 2·M½ per weight element
    for a GEMM of M ≥ 2 rows (so it runs at M / (M + M½) of the ceiling; see module doc)."""
    if op.kind != "matmul" or (t.matmul_half_rows == 0 and not t.matmul_half_rows_by_m):
        return op.flops
    rows = gemm_rows(op)
    return op.flops + np.where(rows >= 2, 2 * half_rows_at(t, rows) * op.weight_elems, 0)


def gemv_rows_s(
    op: Op, row_s: float, weight_s: ArrayLike = 0.0, fraction: float = 1.0
) -> ArrayLike:
    """What a matrix-vector product (M < 2) costs beyond streaming its bytes at the memory
    ceiling: `Op.weight_rows` x `row_s`, and its weights (`weight_s` at the ceiling) streamed
    at `fraction` of it; 0 for GEMMs of M ≥ 2 (charged through M½ instead; see module doc)."""
    if (row_s == 0 and fraction == 1) or op.kind != "matmul":
        return 0
    slower = np.asarray(weight_s) * (1 / fraction - 1)
    return np.where(gemm_rows(op) < 2, op.weight_rows * row_s + slower, 0)


def activation_bytes(op: Op, p: Precision) -> ArrayLike:
    """Activation bytes an operator moves. A GEMM reads its input in the activation format
    and writes its output in the residual format (`Precision.residual_bytes`: 16-bit when
    the GEMM inputs are quantised, W8A8); every other operator works on the 16-bit residual
    stream. A GEMM's output is flops · N / (2 · weights) elements (B·T·N per instance), its
    input the rest of `Op.act_elems`."""
    act, res = p.activation_bytes, p.residual_bytes
    if act == res:
        return op.act_elems * act
    if op.kind != "matmul":
        return op.act_elems * res
    w = np.asarray(op.weight_elems, dtype=float)
    out = np.divide(
        op.flops * np.asarray(op.weight_rows, dtype=float),
        2 * w,
        out=np.zeros(np.broadcast(op.flops, w).shape),
        where=w > 0,
    )
    return (op.act_elems - out) * act + out * res


@lru_cache(maxsize=4096)
def weight_bits(p: Precision, group: str | None) -> int:
    """Element bits of the weights an operator of tensor group `group` multiplies (`Op.group`:
    a weight-only checkpoint keeps the LM head 16-bit, so its GEMM is not a w4a16 one)."""
    return (p.group_formats()[group] if group else p.weight_format).element_bits


def launches(op: Op, engine: EngineSpec | None) -> int:
    """Kernels the operator launches: eager `Op.launches`; fused, one per instance, plus the
    engine's `extra_launches_per_layer` (RoPE, KV-cache write) on each attention layer."""
    if engine is None or engine.launches == "eager":
        return op.launches
    extra = engine.extra_launches_per_layer if op.kind == "attention" else 0
    return op.instances * (1 + extra)


def shape_efficiencies(ops: list[Op], c: Ceilings) -> list[ArrayLike | None]:
    """`gemm_shape_efficiency` of every matmul of a step (None for other operators, or when
    the ceiling has no tile term), the M-dependent terms computed once per distinct M."""
    tile, units = c.terms.gemm_tile, c.compute_units
    out: list[ArrayLike | None] = [None] * len(ops)
    if tile is None or not units:
        return out
    k0 = c.terms.gemm_tile_k0
    tm_max, tn = tile
    rows: dict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for i, op in enumerate(ops):
        if op.kind != "matmul":
            continue
        N, W = op.weight_rows, op.weight_elems
        if not (isinstance(N, int | float) and isinstance(W, int | float) and N > 0):
            out[i] = gemm_shape_efficiency(  # ragged (per-expert) shapes: the general form
                gemm_rows(op), np.asarray(N, dtype=float) / op.instances, tile, units,
                np.asarray(W, dtype=float) / np.asarray(N), k0,
            )  # fmt: skip
            continue
        M = np.asarray(gemm_rows(op), dtype=float)
        key = (M.shape, M.tobytes())
        if key not in rows:  # tile rows and row tiles of this M (shared by the projections)
            Mc = np.maximum(M, 1.0)
            tm = np.minimum(
                np.maximum(2.0 ** np.ceil(np.log2(Mc)), min(MIN_TILE_ROWS, tm_max)), tm_max
            )
            rows[key] = (Mc, tm, np.ceil(Mc / tm))
        Mc, tm, m_tiles = rows[key]
        n = max(N / op.instances, 1.0)
        K = W / N
        waves = np.ceil(m_tiles * math.ceil(n / tn) / units)
        eff = Mc * n / (waves * units * tm * tn)
        out[i] = eff * (K / (K + k0)) if k0 else eff
    return out


def attention_dtype_of(p: Precision, ceiling: Ceiling, engine: EngineSpec | None) -> str:
    """The dtype attention computes in: the activations' dtype when 16 bits or wider, else bf16,
    whatever the linear layers run at, unless the KV cache is fp8 and the kernel computes in
    fp8: always on the datasheet ceiling and the hardware layer alone (the speed of light
    allows it), with an engine only when its attention kernel does (`fp8_compute`). So an fp8
    checkpoint's W8A8 GEMMs do not make its attention twice as fast."""
    a = p.activation_format
    base = a.compute if a.element_bits >= 16 else "bf16"  # fp32 activations keep fp32
    if p.kv_format.compute != "fp8":
        return str(base)
    eng = engine if ceiling == "achievable" else None
    return "fp8" if eng is None or eng.attention.fp8_compute else str(base)


def host_launch_s(e: EngineSpec | None, graphs: bool, launches: int) -> float:
    """The host's time to launch an operator's kernels, s: none under a CUDA graph or without
    an engine profile, else the engine's per-launch cost (`host_launch_us`) each."""
    return 0.0 if e is None or graphs else launches * e.host_launch_us * 1e-6


def op_cost(
    op: Op,
    p: Precision,
    c: Ceilings,
    graphs: bool = False,
    decode: bool = False,
    shape_eff: ArrayLike | None = None,
    step: Step | None = None,
) -> OpCost:
    """Bytes and times of one operator (module docstring). `graphs`: the step is replayed
    from a CUDA graph, so its kernels cost the host nothing; `decode`: one new token per
    sequence (the engine's decode attention kernel and its fixed cost); `shape_eff`: the
    matmul's GEMM shape efficiency if already computed (`shape_efficiencies`); `step`: the
    step the operator runs in (its batch, for a measured attention surface)."""
    w = op.weight_elems * p.weight_bytes_for(op.group)
    a = activation_bytes(op, p)
    kv = (op.kv_read_elems + op.kv_write_elems) * p.kv_bytes
    t, e = c.terms, c.engine
    mem_eff: ArrayLike = 1.0
    flop_eff: ArrayLike = 1.0
    n = launches(op, e)
    fixed_s = n * c.kernel_overhead_s
    att = attention_surface_for(op, c, step)
    if att is not None:  # the engine's measured attention at this batch and length
        assert step is not None
        return measured_attention_cost(op, p, c, att, step, graphs, w, a, kv)
    if op.kind == "attention":
        mem_eff, flop_eff = t.attention_memory_fraction, t.attention_compute_fraction
        if e is not None:
            mem_eff *= e.attention.decode_memory_fraction
            flop_eff *= e.attention.prefill_compute_fraction
            if decode:
                fixed_s += op.instances * e.attention.decode_fixed_us * 1e-6
    elif moe_surface_applies(op, c):  # the engine's measured fused MoE (`surfaces`)
        assert c.moe_surface is not None
        compute_s, memory_s = c.moe_surface.terms_s(op.flops, op.weight_elems, op.instances)
        host = host_launch_s(e, graphs, n)
        return OpCost(
            op=op,
            weight_bytes=w,
            act_bytes=a,
            kv_bytes=kv,
            compute_s=compute_s,
            memory_s=memory_s,
            overhead_s=fixed_s,
            host_s=host,
        )
    elif surface_applies(op, p, c):  # the engine's measured GEMMs at this M (`surfaces`)
        assert c.gemm_surface is not None
        host = host_launch_s(e, graphs, n)
        return OpCost(
            op=op,
            weight_bytes=w,
            act_bytes=a,
            kv_bytes=kv,
            compute_s=op.flops / c.gemm_surface.at(np.asarray(gemm_rows(op))),
            memory_s=(w + a + kv) / c.bytes_per_s,
            overhead_s=fixed_s,  # the tables' latencies hold the GEMM's own ramp and tail
            host_s=host,
        )
    elif op.kind == "matmul":
        k = (
            e.matmul_kernel(weight_bits(p, op.group), p.activation_format.element_bits)
            if e is not None and e.matmul
            else None
        )
        if k is not None:  # the engine's own kernel: its measured fractions include its tiling
            mem_eff, flop_eff = k.memory_fraction, k.compute_fraction
        elif shape_eff is not None:
            flop_eff = shape_eff
        elif t.gemm_tile is not None and c.compute_units:
            rows_per_instance = np.asarray(op.weight_rows, dtype=float) / op.instances
            inner = np.asarray(op.weight_elems, dtype=float) / np.asarray(op.weight_rows)
            flop_eff = gemm_shape_efficiency(
                gemm_rows(op),
                rows_per_instance,
                t.gemm_tile,
                c.compute_units,
                inner,
                t.gemm_tile_k0,
            )
        # one GEMM kernel per instance pays the GEMM overhead, the rest (RoPE...) the floor
        fixed_s += op.instances * max(t.gemm_overhead_us * 1e-6 - c.kernel_overhead_s, 0.0)
    host = host_launch_s(e, graphs, n)
    return OpCost(
        op=op,
        weight_bytes=w,
        act_bytes=a,
        kv_bytes=kv,
        compute_s=effective_flops(op, t)
        / ((c.attention_flops_per_s or c.flops_per_s) if op.kind == "attention" else c.flops_per_s)
        / flop_eff,
        memory_s=(w + a + kv) / (c.bytes_per_s * mem_eff)
        + gemv_rows_s(
            op, t.gemv_row_ns * 1e-9, w / (c.bytes_per_s * mem_eff), t.gemv_memory_fraction
        ),
        overhead_s=fixed_s,
        host_s=host,
    )


def measured_attention_cost(
    op: Op,
    p: Precision,
    c: Ceilings,
    att: AttentionSurface,
    step: Step,
    graphs: bool,
    w: ArrayLike,
    a: ArrayLike,
    kv: ArrayLike,
) -> OpCost:
    """An attention core on a measured surface. Each of its `instances` layers is one call of
    B sequences: decode moves (a + kv) / instances bytes per call at the surface's efficiency
    against the datasheet bandwidth (memory time), prefill computes FLOPs / instances per call
    at its efficiency against the datasheet peak (compute time); the other roof keeps the
    fractions, and the fixed time is the kernels' launch floor alone (the tables' latencies
    hold the engine kernel's own fixed cost, so no `decode_fixed_us`)."""
    t, e = c.terms, c.engine
    B = np.asarray(step.batch, dtype=float)
    nh = attention_heads_dim(op, step)
    mem_eff, flop_eff = t.attention_memory_fraction, t.attention_compute_fraction
    if e is not None:
        mem_eff *= e.attention.decode_memory_fraction
        flop_eff *= e.attention.prefill_compute_fraction
    n = launches(op, e)
    compute_s: ArrayLike
    memory_s: ArrayLike
    if att.phase == "decode":
        compute_s = op.flops / ((c.attention_flops_per_s or c.flops_per_s) * flop_eff)
        memory_s = op.instances * att.time_s((a + kv) / op.instances, B, nh)
    else:
        compute_s = op.instances * att.time_s(np.asarray(op.flops) / op.instances, B, nh)
        memory_s = (w + a + kv) / (c.bytes_per_s * mem_eff)
    host = host_launch_s(e, graphs, n)
    return OpCost(
        op=op,
        weight_bytes=w,
        act_bytes=a,
        kv_bytes=kv,
        compute_s=compute_s,
        memory_s=memory_s,
        overhead_s=n * c.kernel_overhead_s,
        host_s=host,
    )


@dataclass(frozen=True)
class StepCost:
    """All operators of one step; totals are derived from them. The host runs ahead of the
    device, so the step takes max(device time, host launch time) plus the host's per-step work
    (`host_step_s`: scheduling, sampling) that nothing hides."""

    step: Step
    ops: tuple[OpCost, ...]
    ceilings: Ceilings
    host_step_s: float = 0.0

    @property
    def device_s(self) -> ArrayLike:
        return sum(o.time_s for o in self.ops)

    @property
    def host_launch_s(self) -> float:
        return float(sum(o.host_s for o in self.ops))

    @property
    def host_bound(self) -> ArrayLike:
        """The host launches kernels slower than the device runs them."""
        return self.host_launch_s > self.device_s

    @property
    def time_s(self) -> ArrayLike:
        return np.maximum(self.device_s, self.host_launch_s) + self.host_step_s

    @property
    def terms_s(self) -> dict[str, ArrayLike]:
        """The step time split into its named terms; they add up to `time_s`."""
        roofline = sum(np.maximum(o.compute_s, o.memory_s) for o in self.ops)
        return {
            "roofline_s": roofline,
            "fixed_s": sum(o.overhead_s for o in self.ops),
            "host_exposed_s": np.maximum(self.host_launch_s - self.device_s, 0.0),
            "host_step_s": self.host_step_s,
        }

    def as_dict(self) -> dict:
        """Per-operator terms and the step's totals (scalar steps only)."""

        def f(v: ArrayLike) -> float:
            return float(np.asarray(v))

        ops = [
            {
                "name": o.name,
                "kind": o.op.kind,
                "flops": f(o.flops),
                "weight_bytes": f(o.weight_bytes),
                "activation_bytes": f(o.act_bytes),
                "kv_bytes": f(o.kv_bytes),
                "intensity_flops_per_byte": f(o.intensity_flops_per_byte),
                "bound": "compute" if bool(o.compute_bound) else "memory",
                "compute_s": f(o.compute_s),
                "memory_s": f(o.memory_s),
                "fixed_s": f(o.overhead_s),
                "host_launch_s": f(o.host_s),
                "time_s": f(o.time_s),
            }
            for o in self.ops
        ]
        return {
            "ceiling": self.ceilings.name,
            "engine": self.ceilings.engine.flag if self.ceilings.engine else None,
            "operators": ops,
            "device_s": f(self.device_s),
            "host_launch_s": self.host_launch_s,
            "host_bound": bool(self.host_bound),
            "terms": {k: f(v) for k, v in self.terms_s.items()},
            "time_s": f(self.time_s),
        }

    @property
    def flops(self) -> ArrayLike:
        return sum(o.flops for o in self.ops)

    @property
    def bytes(self) -> ArrayLike:
        return sum(o.bytes for o in self.ops)

    @property
    def weight_bytes(self) -> ArrayLike:
        return sum(o.weight_bytes for o in self.ops)

    @property
    def kv_bytes(self) -> ArrayLike:
        return sum(o.kv_bytes for o in self.ops)

    @property
    def intensity_flops_per_byte(self) -> ArrayLike:
        return self.flops / self.bytes


#: The most positions a speculative verify step scores per sequence (K + 1, K ≤ 64).
MAX_VERIFY_TOKENS = 65


def is_decode(step: Step) -> bool:
    """A decode step: one new token per sequence, or the K + 1 positions of a speculative
    verify step (logits at every position over a cached context). Engines run both with their
    decode attention kernel (FlashAttention/FlashInfer take K + 1 queries per sequence in the
    same paged call) and capture both in CUDA graphs (vLLM V1 captures uniform decode batches
    of 1 + num_speculative_tokens queries), so a verify step pays the decode kernel's fixed
    cost and no host launches: it can never cost less than a plain step."""
    T = np.asarray(step.new_tokens)
    if np.all(T == 1):
        return True
    return bool(
        step.logits == "all"
        and step.causal
        and np.all(T <= MAX_VERIFY_TOKENS)
        and np.all(np.asarray(step.cached_tokens) > 0)
    )


def step_cost(
    model: ModelSpec,
    hw: HardwareSpec,
    step: Step,
    precision: Precision = Precision(),
    ceiling: Ceiling = "achievable",
    shard: ExpertShard | None = None,
    engine: EngineSpec | None = None,
) -> StepCost:
    """Cost of one forward step: every operator on the ceilings of `hw` and, for the
    achievable ceiling, the terms of `engine` (on one expert-parallel rank when `shard` is
    given, see `operators.ExpertShard`). The datasheet ceiling ignores the engine."""
    att = attention_dtype_of(precision, ceiling, engine)
    moe = moe_dtype_of(precision) if model.moe is not None else None
    kv = precision.kv_format.compute
    c = Ceilings.of(hw, precision.compute, ceiling, engine, att, moe, kv)
    eng = c.engine  # none on the datasheet ceiling
    if (
        precision.model_bits is None
        and precision.weights.split(",")[0].strip().lower() in llamacpp.MIXES
    ):
        precision = precision.for_model(model)  # a llama.cpp file type places tensors per layer
    decode = is_decode(step)
    graphs = eng is not None and eng.cuda_graphs and decode
    ops = operators(model, step, shard)
    host_step = 0.0 if eng is None else eng.host_step_us * 1e-6
    effs = shape_efficiencies(ops, c)
    return StepCost(
        step,
        tuple(
            op_cost(op, precision, c, graphs, decode, eff, step)
            for op, eff in zip(ops, effs, strict=True)
        ),
        c,
        host_step,
    )


def decode_step_s(
    model: ModelSpec,
    hw: HardwareSpec,
    batch: ArrayLike,
    context: ArrayLike,
    precision: Precision = Precision(),
    ceiling: Ceiling = "achievable",
    engine: EngineSpec | None = None,
) -> ArrayLike:
    """Time of one decode step (T=1) for B sequences over S cached tokens, seconds.
    B and S broadcast: `decode_step_s(m, hw, B[:, None], S[None, :])` is a whole grid."""
    return step_cost(model, hw, Step(batch, 1, context), precision, ceiling, engine=engine).time_s


def prefill_s(
    model: ModelSpec,
    hw: HardwareSpec,
    batch: ArrayLike,
    prompt: ArrayLike,
    precision: Precision = Precision(),
    ceiling: Ceiling = "achievable",
    engine: EngineSpec | None = None,
) -> ArrayLike:
    """Time of prefilling B prompts of T tokens each (S=0), seconds."""
    return step_cost(model, hw, Step(batch, prompt, 0), precision, ceiling, engine=engine).time_s
