"""Numeric formats: bits per element, and which hardware peak a compute dtype runs at.

Storage formats (weights, KV cache, activations) are described by their bits per element;
compute dtypes name the tensor-core peak in a HardwareSpec (`dense_peak_tflops[dtype]`).
"""

from __future__ import annotations

from .errors import InvalidInputError

#: Bits per stored element of the plain (non-grouped) formats.
STORAGE_BITS: dict[str, float] = {
    "fp32": 32,
    "bf16": 16,
    "fp16": 16,
    "fp8": 8,
    "int8": 8,
    "int4": 4,
}

#: Compute dtypes a hardware spec can quote a dense peak for.
COMPUTE_DTYPES: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4")


def bytes_per_element(fmt: str) -> float:
    """Bytes per element of a storage format (`bf16` -> 2.0, `int4` -> 0.5)."""
    try:
        return STORAGE_BITS[fmt] / 8
    except KeyError:
        known = ", ".join(STORAGE_BITS)
        raise InvalidInputError(f"unknown dtype '{fmt}'; use one of: {known}") from None
