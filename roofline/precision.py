"""Which formats a step stores and computes in, and which tensor-core peak its matmuls get.

`weights`, `activations` and `kv` are storage formats (effective bytes per element, group-wise
metadata included); `compute` is the dtype whose peak the matmuls run at. It follows the kernel
that really runs: the activation format sets it, and narrower weights are dequantised inside the
kernel — w4a16 (AWQ/GPTQ/Marlin) and w8a16 run at the bf16/fp16 peak, w8a8 at the int8 peak,
fp8 weights with fp8 activations at the fp8 peak. A compute dtype the device lacks is refused
by the hardware spec (`HardwareSpec.peak_flops_per_s`), never given some other peak.
"""

from __future__ import annotations

from dataclasses import dataclass

from .dtypes import Format, parse_format
from .errors import InvalidInputError
from .hardware import HardwareSpec


@dataclass(frozen=True)
class Precision:
    weights: str = "bf16"
    activations: str = "bf16"
    kv: str = "bf16"

    def __post_init__(self) -> None:
        w, a = self.weight_format, self.activation_format
        parse_format(self.kv)  # raises on an unknown format
        if a.compute is None:
            raise InvalidInputError(
                f"'{a.name}' is a weight/KV storage format with no matmul of its own; "
                "use it with --weights or --kv and pick --activations bf16, fp16, fp8 or int8")
        if w.element_bits > a.element_bits:
            raise InvalidInputError(
                f"weights {w.name} are wider than activations {a.name}: no kernel multiplies "
                f"them; quantise the weights to {a.name} or narrower, or widen --activations")

    @classmethod
    def uniform(cls, dtype: str) -> Precision:
        """One format for all three; a storage-only weight format (int4-g128, nf4, mxfp4...)
        keeps bf16 activations and KV, the way weight-only kernels run it."""
        if parse_format(dtype).compute is None:
            return cls(weights=dtype)
        return cls(weights=dtype, activations=dtype, kv=dtype)

    @property
    def weight_format(self) -> Format:
        return parse_format(self.weights)

    @property
    def activation_format(self) -> Format:
        return parse_format(self.activations)

    @property
    def kv_format(self) -> Format:
        return parse_format(self.kv)

    @property
    def compute(self) -> str:
        """The dtype matmuls run at: the activation format's (weights are converted to it)."""
        return self.activation_format.compute  # type: ignore[return-value]  # checked in init

    @property
    def weight_bytes(self) -> float:
        return self.weight_format.bytes

    @property
    def activation_bytes(self) -> float:
        return self.activation_format.bytes

    @property
    def kv_bytes(self) -> float:
        return self.kv_format.bytes

    def check(self, hw: HardwareSpec) -> None:
        """Refuse a compute dtype `hw` has no tensor-core peak for, saying what would run."""
        if not hw.supports(self.compute):
            have = ", ".join(hw.dense_peak_tflops)
            raise InvalidInputError(
                f"{hw.name} has no {self.compute} compute (it has: {have}); keep the "
                f"{self.weights} weights but set --activations to one it has (weight-only "
                "kernels dequantise to bf16/fp16)")
