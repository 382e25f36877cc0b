"""The roofline: time of each operator = max(FLOPs / peak, bytes / bandwidth).

Two ceilings. `datasheet`: dense datasheet peak and bandwidth, no overheads (speed of light).
`achievable`: the spec's achievable fractions (or stated public defaults) plus a fixed cost
per kernel launch where the spec carries one (from `roofline calibrate`).
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

    @classmethod
    def of(cls, hw: HardwareSpec, compute_dtype: str, ceiling: Ceiling) -> Ceilings:
        peak, bw = hw.peak_flops_per_s(compute_dtype), hw.memory_bandwidth_bytes_per_s
        if ceiling == "datasheet":
            return cls("datasheet", peak, bw, 0.0, hw.source)
        if ceiling == "achievable":
            return cls("achievable", peak * hw.matmul_fraction(compute_dtype),
                       bw * hw.bandwidth_fraction(), hw.kernel_overhead_s(),
                       hw.achievable_source())
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


def op_cost(op: Op, p: Precision, c: Ceilings) -> OpCost:
    w = op.weight_elems * p.weight_bytes
    a = op.act_elems * p.activation_bytes
    kv = (op.kv_read_elems + op.kv_write_elems) * p.kv_bytes
    return OpCost(op, w, a, kv, compute_s=op.flops / c.flops_per_s,
                  memory_s=(w + a + kv) / c.bytes_per_s,
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
