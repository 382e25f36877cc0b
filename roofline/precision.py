"""Which formats a step stores and computes in.

`weights`, `activations` and `kv` are storage formats (bytes per element); `compute` is the
dtype whose tensor-core peak the matmuls run at. By default compute follows activations.
"""

from __future__ import annotations

from dataclasses import dataclass

from .dtypes import COMPUTE_DTYPES, bytes_per_element
from .errors import InvalidInputError


@dataclass(frozen=True)
class Precision:
    weights: str = "bf16"
    activations: str = "bf16"
    kv: str = "bf16"

    def __post_init__(self) -> None:
        for fmt in (self.weights, self.activations, self.kv):
            bytes_per_element(fmt)  # raises on an unknown format

    @classmethod
    def uniform(cls, dtype: str) -> Precision:
        return cls(weights=dtype, activations=dtype, kv=dtype)

    @property
    def compute(self) -> str:
        """The dtype matmuls run at: the activation dtype (weights are converted to it)."""
        if self.activations not in COMPUTE_DTYPES:
            raise InvalidInputError(f"no compute peak for activation dtype '{self.activations}'")
        return self.activations

    @property
    def weight_bytes(self) -> float:
        return bytes_per_element(self.weights)

    @property
    def activation_bytes(self) -> float:
        return bytes_per_element(self.activations)

    @property
    def kv_bytes(self) -> float:
        return bytes_per_element(self.kv)
