"""Numeric formats: effective bits per element, and which hardware peak a compute dtype runs at.

A storage format (weights, KV cache, activations) costs its element bits plus the share of
its quantisation metadata. Group-wise formats keep one scale (and maybe one zero point) per
group of g elements, so they cost

    bits = element_bits + (scale_bits + zero_bits) / g + super_scale_bits / (g · super_group)

where the last term is double quantisation: the per-group scales are themselves quantised and
share one higher-precision scale per `super_group` groups (QLoRA's NF4-DQ).

llama.cpp (GGUF) block types fit the same formula: a K-quant super-block of 256 weights holds
sub-blocks of g weights, each with a 4-8-bit scale (and min), plus one or two fp16 super-scales
per super-block. The `block_bytes` of each one is checked against its C struct in the tests.
Names are case-insensitive (`Q4_K` = `q4_k`).

Compute dtypes name the tensor-core peak in a HardwareSpec (`dense_peak_tflops[dtype]`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from ..errors import InvalidInputError

#: Compute dtypes a hardware spec can quote a dense peak for.
COMPUTE_DTYPES: tuple[str, ...] = (
    "fp32",
    "tf32",
    "bf16",
    "fp16",
    "fp8",
    "fp6",
    "fp4",
    "int8",
    "int4",
)


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
    ecosystem: Literal["", "gguf", "mlc"] = ""  # checkpoints of these quantise embedding and head
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

    @property
    def weight_only(self) -> bool:
        """Run as weights only unless activations are asked in it too: a storage format with
        no matmul of its own, or a block-scaled one (MXFP4, NVFP4, MXFP6, GGUF), whose W4A4
        tensor-core path needs a device with that peak (Blackwell, MI355X) and activations
        quantised to it; the kernels that run it everywhere dequantise to 16 bits."""
        return self.compute is None or self.group is not None


_PER_CHANNEL = (
    "one scale per output channel: 16/D_in bit per weight (< 0.01 for D_in >= 2048) is not counted"
)

#: The named formats. Group sizes and scale dtypes follow each format's definition:
#: NF4 and NF4-DQ: Dettmers et al., QLoRA (2023) §3 (blocks of 64, fp32 absmax; DQ: 8-bit
#: absmax with one fp32 scale per 256 blocks). MXFP4: OCP Microscaling Formats spec v1.0
#: (blocks of 32, E8M0 8-bit scale; MXFP6 the same blocks of 6-bit elements). NVFP4: NVIDIA
#: Blackwell (blocks of 16, E4M3 8-bit scale; the one fp32 per-tensor scale is not counted).
#: As activations, the three run at the device's fp4 or fp6 tensor-core peak (W4A4, W6A6).
_BASE: tuple[Format, ...] = (
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
    Format(
        "nf4-dq", 4, "float", None, group=64, scale_bits=8, super_group=256, super_scale_bits=32
    ),
    Format("mxfp4", 4, "float", "fp4", group=32, scale_bits=8),
    Format("nvfp4", 4, "float", "fp4", group=16, scale_bits=8),
    Format("mxfp6", 6, "float", "fp6", group=32, scale_bits=8, note="mxfp6 e2m3/e3m2"),
)

#: llama.cpp block types, from the structs in ggml/src/ggml-common.h (QK4_0 = QK8_0 = 32,
#: QK_K = 256; ggml_half is fp16). `zero_bits` holds the per-block min of the "_1" and K types.
#:   block_q4_0 {d; qs[16]}                       18 B / 32  -> 4.5 bits
#:   block_q4_1 {d, m; qs[16]}                    20 B / 32  -> 5.0
#:   block_q5_0 {d; qh[4]; qs[16]}                22 B / 32  -> 5.5
#:   block_q5_1 {d, m; qh[4]; qs[16]}             24 B / 32  -> 6.0
#:   block_q8_0 {d; qs[32]}                       34 B / 32  -> 8.5
#:   block_q2_K {scales[16]; qs[64]; d, dmin}     84 B / 256 -> 2.625 (4-bit scale+min per 16)
#:   block_q3_K {hmask[32]; qs[64]; scales[12]; d} 110 B / 256 -> 3.4375 (6-bit scale per 16)
#:   block_q4_K {d, dmin; scales[12]; qs[128]}   144 B / 256 -> 4.5 (6-bit scale+min per 32)
#:   block_q5_K {d, dmin; scales[12]; qh[32]; qs[128]} 176 B / 256 -> 5.5
#:   block_q6_K {ql[128]; qh[64]; scales[16]; d} 210 B / 256 -> 6.5625 (int8 scale per 16)
#:   block_iq4_nl {d; qs[16]}                     18 B / 32  -> 4.5 (non-linear 4-bit codebook)
#:   block_iq4_xs {d; scales_h; scales_l[4]; qs[128]} 136 B / 256 -> 4.25 (6-bit scale per 32)
_GGUF: tuple[Format, ...] = tuple(
    Format(
        name,
        bits,
        "int",
        None,
        group=g,
        scale_bits=sb,
        zero_bits=zb,
        super_group=sg,
        super_scale_bits=ssb,
        ecosystem="gguf",
        note=f"llama.cpp {name.upper()}",
    )
    for name, bits, g, sb, zb, sg, ssb in (
        ("q4_0", 4, 32, 16, 0, None, 0),
        ("q4_1", 4, 32, 16, 16, None, 0),
        ("q5_0", 5, 32, 16, 0, None, 0),
        ("q5_1", 5, 32, 16, 16, None, 0),
        ("q8_0", 8, 32, 16, 0, None, 0),
        ("q2_k", 2, 16, 4, 4, 16, 32),
        ("q3_k", 3, 16, 6, 0, 16, 16),
        ("q4_k", 4, 32, 6, 6, 8, 32),
        ("q5_k", 5, 32, 6, 6, 8, 32),
        ("q6_k", 6, 16, 8, 0, 16, 16),
        ("iq4_nl", 4, 32, 16, 0, None, 0),
        ("iq4_xs", 4, 32, 6, 0, 8, 16),
    )
)

#: MLC-LLM group quantisation (python/mlc_llm/quantization/quantization.py): `q4f16_1` and
#: `q4f16_0` are int4 in groups of 32 with one fp16 scale, symmetric (no zero point; the two
#: differ only in weight layout, NK vs KN); `q4f32_1` the same with an fp32 scale; `q3f16_1`
#: int3 in groups of 40. All set quantize_embedding and quantize_final_fc.
_MLC: tuple[Format, ...] = tuple(
    Format(name, bits, "int", None, group=g, scale_bits=sb, ecosystem="mlc", note=f"MLC-LLM {name}")
    for name, bits, g, sb in (
        ("q4f16_1", 4, 32, 16),
        ("q4f16_0", 4, 32, 16),
        ("q4f32_1", 4, 32, 32),
        ("q3f16_1", 3, 40, 16),
    )
)

FORMATS: dict[str, Format] = {f.name: f for f in (*_BASE, *_GGUF, *_MLC)}

_GROUPED = re.compile(r"^(int4|int8)-g([1-9][0-9]*)(-sym|-z16)?$")


@lru_cache(maxsize=1024)
def parse_format(name: str) -> Format:
    """A format by name, case-insensitively. `int4-g128` / `int8-g64`: integer weights in
    groups of g with an fp16 scale and a zero point at the element width per group (GPTQ and
    AWQ pack their zeros as int4 / int8: int4-g128 = 4 + (16 + 4)/128 = 4.156 bits);
    `int4-g128-sym`: symmetric, scale only (Marlin, GPTQ sym=True: 4 + 16/128 = 4.125 bits);
    `int4-g64-z16`: a 16-bit zero beside the scale (gpt-fast / torchao tinygemm pack
    scales_and_zeros as bf16 pairs: 4 + 32/64 = 4.5 bits)."""
    key = name.strip().lower()
    if key in FORMATS:
        return FORMATS[key]
    m = _GROUPED.match(key)
    if m:
        base = FORMATS[m.group(1)]
        zero = {None: base.element_bits, "-sym": 0, "-z16": 16}[m.group(3)]
        return Format(
            key,
            base.element_bits,
            "int",
            None,
            group=int(m.group(2)),
            scale_bits=16,
            zero_bits=zero,
        )
    known = ", ".join([*FORMATS, "int4-g<N>[-sym|-z16]", "int8-g<N>[-sym|-z16]"])
    raise InvalidInputError(f"unknown dtype '{name}'; use one of: {known}")


def bytes_per_element(fmt: str) -> float:
    """Effective bytes per element of a storage format (`bf16` -> 2.0, `int4-g128` -> 0.5195)."""
    return parse_format(fmt).bytes
