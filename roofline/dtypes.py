"""Numeric formats: effective bits per element, and which hardware peak a compute dtype runs at.

A storage format (weights, KV cache, activations) costs its element bits plus the share of
its quantisation metadata. Group-wise formats keep one scale (and maybe one zero point) per
group of g elements, so they cost

    bits = element_bits + (scale_bits + zero_bits) / g + super_scale_bits / (g · super_group)

where the last term is double quantisation: the per-group scales are themselves quantised and
share one higher-precision scale per `super_group` groups (QLoRA's NF4-DQ).

Compute dtypes name the tensor-core peak in a HardwareSpec (`dense_peak_tflops[dtype]`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from .errors import InvalidInputError

#: Compute dtypes a hardware spec can quote a dense peak for.
COMPUTE_DTYPES: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4")


@dataclass(frozen=True)
class Format:
    """One storage format. `compute` is the tensor-core dtype a matmul runs at when this is
    the activation format; None for storage-only formats (they are dequantised in the kernel)."""

    name: str
    element_bits: int
    family: Literal["float", "int"]
    compute: str | None
    group: int | None = None  # g, elements sharing one scale (None: per tensor/channel)
    scale_bits: int = 0
    zero_bits: int = 0
    super_group: int | None = None  # groups sharing one second-level scale (double quant)
    super_scale_bits: int = 0
    note: str = ""

    @property
    def overhead_bits(self) -> float:
        """Metadata bits per element: (scale + zero)/g + super_scale/(g · super_group)."""
        if self.group is None:
            return 0.0
        bits = (self.scale_bits + self.zero_bits) / self.group
        if self.super_group is not None:
            bits += self.super_scale_bits / (self.group * self.super_group)
        return bits

    @property
    def bits(self) -> float:
        """Effective bits per element, metadata included."""
        return self.element_bits + self.overhead_bits

    @property
    def bytes(self) -> float:
        return self.bits / 8


_PER_CHANNEL = ("one scale per output channel: 16/D_in bit per weight (< 0.01 for D_in >= 2048) "
                "is not counted")

#: The named formats. Group sizes and scale dtypes follow each format's definition:
#: NF4 and NF4-DQ: Dettmers et al., QLoRA (2023) §3 (blocks of 64, fp32 absmax; DQ: 8-bit
#: absmax with one fp32 scale per 256 blocks). MXFP4: OCP Microscaling Formats spec v1.0
#: (blocks of 32, E8M0 8-bit scale). NVFP4: NVIDIA Blackwell (blocks of 16, E4M3 8-bit
#: scale; the one fp32 per-tensor scale is not counted).
FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("fp32", 32, "float", "fp32"),
    Format("tf32", 32, "float", "tf32", note="stored as fp32, multiplied at tf32"),
    Format("bf16", 16, "float", "bf16"),
    Format("fp16", 16, "float", "fp16"),
    Format("fp8", 8, "float", "fp8", note="fp8 e4m3"),
    Format("fp8-e4m3", 8, "float", "fp8"),
    Format("fp8-e5m2", 8, "float", "fp8"),
    Format("int8", 8, "int", "int8", note=_PER_CHANNEL),
    Format("int4", 4, "int", "int4", note=_PER_CHANNEL),
    Format("nf4", 4, "float", None, group=64, scale_bits=32),
    Format("nf4-dq", 4, "float", None, group=64, scale_bits=8, super_group=256,
           super_scale_bits=32),
    Format("mxfp4", 4, "float", None, group=32, scale_bits=8),
    Format("nvfp4", 4, "float", None, group=16, scale_bits=8),
)}

_GROUPED = re.compile(r"^(int4|int8)-g([1-9][0-9]*)$")


def parse_format(name: str) -> Format:
    """A format by name. `int4-g128` / `int8-g64`: integer weights in groups of g with an fp16
    scale and an fp16 zero point per group (GPTQ/AWQ-style asymmetric), 32/g bits of overhead."""
    if name in FORMATS:
        return FORMATS[name]
    m = _GROUPED.match(name)
    if m:
        base = FORMATS[m.group(1)]
        return Format(name, base.element_bits, "int", None, group=int(m.group(2)),
                      scale_bits=16, zero_bits=16)
    known = ", ".join([*FORMATS, "int4-g<N>", "int8-g<N>"])
    raise InvalidInputError(f"unknown dtype '{name}'; use one of: {known}")


def bytes_per_element(fmt: str) -> float:
    """Effective bytes per element of a storage format (`bf16` -> 2.0, `int4-g128` -> 0.53125)."""
    return parse_format(fmt).bytes
