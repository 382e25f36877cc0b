"""The roofline: time of each operator = max(FLOPs / peak, bytes / bandwidth).

Two ceilings. `datasheet`: dense datasheet peak and bandwidth, no overheads (speed of light).
`achievable`: the spec's achievable fractions (or stated public defaults) plus four terms a
spec may carry (from `roofline calibrate`; all off for catalog specs, which have no evidence):

- a fixed cost per kernel launch, `kernel_overhead_us` x `Op.launches` (dispatch and launch
  latency; dominates tiny kernels);
- small-M GEMM efficiency: a matmul with M ≥ 2 rows per weight element reaches
  M / (M + M½) of the matmul ceiling, i.e. its compute time is (FLOPs + 2·M½·weights) / peak —
  a cost per weight element independent of M (a BLAS packs the weight panel once per call
  and its micro-kernel runs short of rows). M = FLOPs / (2·weight elements) is read off the
  operator itself (MoE experts: tokens per touched expert). M = 1 is a matrix-vector product
  (BLAS gemv: no packing), which stays on the plain roofline;
- gemv row cost: a matmul with M < 2 (matrix-vector product) pays `gemv_row_ns` per weight
  row (`Op.weight_rows`, the output features) on top of streaming its bytes: memory time =
  bytes / bandwidth + rows · t_row. Each row is one dot product with its own setup, reduction
  and store, which a short row cannot hide. Evidence (this EPYC, MKL, 1 thread, cold weights,
  read kernel 11 GB/s): rows of K = 384-1024 floats take 65-185 ns each more than their bytes
  at that bandwidth (5-8 GB/s effective), rows of K = 1536-2560 none; rows of K = 4096 stream
  at 13 GB/s, faster than the read kernel, which this term cannot express (docs/measurement.md);
- attention efficiency: operators of kind "attention" reach `attention_memory_fraction` of
  the memory ceiling and `attention_compute_fraction` of the compute ceiling. Decode (1 query
  token) is memory-bound and prefill (causal, T ≫ 1) compute-bound, and one kernel reaches
  different fractions of the two roofs (torch's CPU flash attention, 1 thread: ~0.3 of the
  bandwidth in decode; see docs/measurement.md for prefill), so each side has its own
  term, calibrated on its own held-out shape. Catalog GPUs keep 1.0: no measured
  FlashAttention fraction is cited for them.
Every term applies to every operator of every device the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from .errors import InvalidInputError
from .hardware import HardwareSpec
from .model import ModelSpec
from .operators import ArrayLike, ExpertShard, Op, Step, operators
from .precision import Precision

Ceiling = Literal["datasheet", "achievable"]
CEILINGS: tuple[str, ...] = ("datasheet", "achievable")


@dataclass(frozen=True)
class Ceilings:
    """The compute and memory ceilings one estimate runs against."""

    name: Ceiling
    flops_per_s: float
    bytes_per_s: float
    kernel_overhead_s: float
    source: str
    matmul_half_rows: float = 0.0  # M½ of the small-M GEMM efficiency (achievable only)
    attention_memory_fraction: float = 1.0  # of the memory ceiling, for attention operators
    attention_compute_fraction: float = 1.0  # of the compute ceiling, for attention operators
    gemv_row_s: float = 0.0  # fixed cost per weight row of an M < 2 matmul

    @classmethod
    def of(cls, hw: HardwareSpec, compute_dtype: str, ceiling: Ceiling) -> Ceilings:
        peak, bw = hw.peak_flops_per_s(compute_dtype), hw.memory_bandwidth_bytes_per_s
        if ceiling == "datasheet":
            return cls("datasheet", peak, bw, 0.0, hw.source)
        if ceiling == "achievable":
            return cls("achievable", peak * hw.matmul_fraction(compute_dtype),
                       bw * hw.bandwidth_fraction(), hw.kernel_overhead_s(),
                       hw.achievable_source(), hw.matmul_half_rows(),
                       hw.attention_memory_fraction(), hw.attention_compute_fraction(),
                       hw.gemv_row_s())
        raise InvalidInputError(f"unknown ceiling '{ceiling}'; use one of: {', '.join(CEILINGS)}")

    @property
    def ridge_point_flops_per_byte(self) -> float:
        """Intensity where this ceiling's compute and memory times are equal."""
        return self.flops_per_s / self.bytes_per_s


@dataclass(frozen=True)
class OpCost:
    """An operator with its bytes and times under one precision and ceiling."""

    op: Op
    weight_bytes: ArrayLike
    act_bytes: ArrayLike
    kv_bytes: ArrayLike
    compute_s: ArrayLike
    memory_s: ArrayLike
    overhead_s: float

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
        return self.op.flops / self.bytes

    @property
    def time_s(self) -> ArrayLike:
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
    w = np.asarray(op.weight_elems, dtype=float)
    return np.divide(op.flops, 2 * w, out=np.zeros(np.broadcast(op.flops, w).shape),
                     where=w > 0)


def effective_flops(op: Op, half_rows: float) -> ArrayLike:
    """FLOPs the compute ceiling is charged for: the op's FLOPs, plus 2·M½ per weight element
    for a GEMM of M ≥ 2 rows (so it runs at M / (M + M½) of the ceiling; see module doc)."""
    if half_rows == 0 or op.kind != "matmul":
        return op.flops
    return op.flops + np.where(gemm_rows(op) >= 2, 2 * half_rows * op.weight_elems, 0)


def gemv_rows_s(op: Op, row_s: float) -> ArrayLike:
    """Row cost of a matrix-vector product: `Op.weight_rows` x `row_s` when M < 2, else 0
    (GEMMs of M ≥ 2 are charged through M½ instead; see module doc)."""
    if row_s == 0 or op.kind != "matmul":
        return 0
    return np.where(gemm_rows(op) < 2, op.weight_rows * row_s, 0)


def op_cost(op: Op, p: Precision, c: Ceilings) -> OpCost:
    w = op.weight_elems * p.weight_bytes_for(op.name)
    a = op.act_elems * p.activation_bytes
    kv = (op.kv_read_elems + op.kv_write_elems) * p.kv_bytes
    attn = op.kind == "attention"
    mem_eff = c.attention_memory_fraction if attn else 1.0
    flop_eff = c.attention_compute_fraction if attn else 1.0
    return OpCost(op, w, a, kv,
                  compute_s=effective_flops(op, c.matmul_half_rows) / (c.flops_per_s * flop_eff),
                  memory_s=(w + a + kv) / (c.bytes_per_s * mem_eff)
                  + gemv_rows_s(op, c.gemv_row_s),
                  overhead_s=op.launches * c.kernel_overhead_s)


@dataclass(frozen=True)
class StepCost:
    """All operators of one step; totals are derived from them."""

    step: Step
    ops: tuple[OpCost, ...]
    ceilings: Ceilings

    @property
    def time_s(self) -> ArrayLike:
        return sum(o.time_s for o in self.ops)

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


def step_cost(model: ModelSpec, hw: HardwareSpec, step: Step,
              precision: Precision = Precision(), ceiling: Ceiling = "achievable",
              shard: ExpertShard | None = None) -> StepCost:
    """Cost of one forward step: every operator on the roofline of `hw` (on one
    expert-parallel rank when `shard` is given, see `operators.ExpertShard`)."""
    c = Ceilings.of(hw, precision.compute, ceiling)
    ops = operators(model, step, shard)
    return StepCost(step, tuple(op_cost(op, precision, c) for op in ops), c)


def decode_step_s(model: ModelSpec, hw: HardwareSpec, batch: ArrayLike, context: ArrayLike,
                  precision: Precision = Precision(), ceiling: Ceiling = "achievable") -> ArrayLike:
    """Time of one decode step (T=1) for B sequences over S cached tokens, seconds.
    B and S broadcast: `decode_step_s(m, hw, B[:, None], S[None, :])` is a whole grid."""
    return step_cost(model, hw, Step(batch, 1, context), precision, ceiling).time_s


def prefill_s(model: ModelSpec, hw: HardwareSpec, batch: ArrayLike, prompt: ArrayLike,
              precision: Precision = Precision(), ceiling: Ceiling = "achievable") -> ArrayLike:
    """Time of prefilling B prompts of T tokens each (S=0), seconds."""
    return step_cost(model, hw, Step(batch, prompt, 0), precision, ceiling).time_s
