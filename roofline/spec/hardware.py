"""HardwareSpec: one accelerator's datasheet numbers (dense peaks only), with sources.

YAML values use the units in their field names (bytes, GB/s, TFLOP/s, MB, MHz, W); the
properties convert to SI base units (bytes/s, FLOP/s) for the calculator.

Device memory is stored in bytes, `memory_bytes`, with `memory_source` saying where the count
comes from. Accelerator memory is sold in binary units (an "80 GB" H100 holds 80 GiB of HBM), so
a decimal reading is ~7% short: the driver-visible total (nvidia-smi `memory.total`, MiB) where
one is published, else the vendor's capacity read as GiB.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, HttpUrl, field_validator, model_validator

from ..errors import InvalidInputError
from ..frozen import Frozen
from .dtypes import COMPUTE_DTYPES
from .surfaces import SURFACE_SYSTEMS

#: Public defaults for the `achievable` ceiling when a spec carries no fractions of its own.
#: Matmul: Maximum Achievable Matmul FLOPS (MAMF) table, stas00/ml-engineering
#: compute/accelerator/README.md @744d01e: bf16 80.3% H100 SXM, 86.9% A100 SXM; fp8 70.9% H100.
#: Bandwidth: large-copy measurements land at 85-92% of HBM spec (A800 PCIe 89%,
#: mli/transformers-benchmarks#4; H20 82%, NVIDIA/cuda-samples#366); 0.88 is the midpoint.
DEFAULT_MATMUL_FRACTION: dict[str, float] = {
    "fp32": 0.80,
    "tf32": 0.80,
    "bf16": 0.80,
    "fp16": 0.80,
    "fp8": 0.71,
    "fp6": 0.71,
    "fp4": 0.71,
    "int8": 0.71,
    "int4": 0.71,
}
DEFAULT_BANDWIDTH_FRACTION = 0.88
DEFAULT_ACHIEVABLE_SOURCE = (
    "public defaults: matmul from the MAMF table in stas00/ml-engineering "
    "compute/accelerator/README.md (bf16 0.80, fp8 0.71; fp6 and fp4, which it does not "
    "measure, take the fp8 figure); bandwidth 0.88 = midpoint of the "
    "85-92% large-copy measurements (mli/transformers-benchmarks#4, NVIDIA/cuda-samples#366)"
)

Fraction = float
#: |ln(measured / predicted)| above ln 100: a held-out point 100x off its prediction is no
#: calibration (the CPU gate's stay within ±0.4, docs/measurements/cpu-ci-calibrated.yaml),
#: and a band built from it would span ten decades.
MAX_CHECK_RESIDUAL = math.log(100)


class Interconnect(Frozen):
    """Scale-up link between devices of one node, and what collectives reach on it."""

    kind: Literal["nvlink", "pcie", "infiniband", "xgmi", "ici", "ethernet", "unified", "none"]
    bandwidth_gb_per_s_per_direction: float | None = Field(default=None, gt=0)
    latency_us: float = Field(
        default=1.0,
        ge=0,
        description=(
            "per-hop latency of a collective step (one ring hop: a send, a wait, a reduce)"
        ),
    )
    bus_bandwidth_fraction: Fraction = Field(
        default=1.0,
        gt=0,
        le=1,
        description=(
            "fraction of the per-direction link bandwidth a large all-reduce's bus bandwidth "
            "reaches (nccl-tests busbw)"
        ),
    )
    source: str = ""
    note: str = ""

    @property
    def bandwidth_bytes_per_s(self) -> float | None:
        b = self.bandwidth_gb_per_s_per_direction
        return None if b is None else b * 1e9


class Achievable(Frozen):
    """The terms of the `achievable` ceiling: what the best kernels reach on this device.

    One definition per term: each field is read by `roofline.calc.cost.Ceilings` by name, written by
    `roofline calibrate` by name, and its default is the public default (fractions) or no
    effect (fixed costs). `identity()` is the datasheet roofline: every term off."""

    matmul_fraction: dict[str, Fraction] = Field(
        default_factory=dict,
        description=(
            "best achieved matmul FLOP/s over the dense peak, per compute dtype; a dtype not "
            "given gets DEFAULT_MATMUL_FRACTION"
        ),
    )
    memory_bandwidth_fraction: Fraction = Field(
        default=DEFAULT_BANDWIDTH_FRACTION,
        gt=0,
        le=1,
        description="achieved streaming bandwidth over the datasheet bandwidth",
    )
    kernel_overhead_us: float = Field(
        default=0.0,
        ge=0,
        description=("fixed device time per kernel: launch, ramp-up and tail, microseconds"),
    )
    gemm_overhead_us: float = Field(
        default=0.0,
        ge=0,
        description=(
            "fixed device time per GEMM kernel beyond its bytes at the achievable bandwidth: "
            "ramp-up to streaming bandwidth, split reduction and tail, microseconds"
        ),
    )
    gemm_tile_k0: float = Field(
        default=0.0,
        ge=0,
        description=(
            "K0: an output tile's prologue and epilogue (pipeline fill, output conversion and "
            "store) cost as much as K0 more elements of its K loop, so a GEMM of inner dimension K "
            "reaches K / (K + K0) of the matmul ceiling"
        ),
    )
    surface_system: str | None = Field(
        default=None,
        description=(
            "the aiconfigurator-core 0.12.0 system whose measured kernel tables describe this "
            "device (`roofline.spec.surfaces`): its engines' dense GEMMs cost FLOPs / the measured "
            "FLOP/s at their M, and their all-reduce its measured latency at its size"
        ),
    )
    gemm_surface: bool = Field(
        default=True,
        description=(
            "whether dense GEMMs read the system's table (the serving simulator turns it off: "
            "FLOPs over a measured rate is not affine in the tokens)"
        ),
    )
    gemm_tile: tuple[int, int] | None = Field(
        default=None,
        description=(
            "(M, N) output tile of the device's large GEMM kernels: with `compute_units`, the "
            "tile and wave quantisation of `roofline.calc.cost.gemm_shape_efficiency`"
        ),
    )
    matmul_half_rows: float = Field(
        default=0.0,
        ge=0,
        description=(
            "M½: a GEMM of M ≥ 2 rows per weight reaches M / (M + M½) of the matmul ceiling"
        ),
    )
    matmul_half_rows_by_m: dict[int, float] = Field(
        default_factory=dict,
        description=(
            "M½ measured at these GEMM row counts M ≥ 2 (the decode shapes of a calibration "
            "sweep): interpolated in log M between them and held at the nearest outside; "
            "empty: `matmul_half_rows` at every M"
        ),
    )
    attention_memory_fraction: Fraction = Field(
        default=1.0,
        gt=0,
        le=1,
        description=("fraction of the memory ceiling attention kernels (kind 'attention') reach"),
    )
    attention_compute_fraction: Fraction = Field(
        default=1.0,
        gt=0,
        le=1,
        description=("fraction of the compute ceiling attention kernels (kind 'attention') reach"),
    )
    gemv_row_ns: float = Field(
        default=0.0,
        ge=0,
        description=("fixed cost per weight row of a matrix-vector product (M < 2), nanoseconds"),
    )
    gemv_memory_fraction: Fraction = Field(
        default=1.0,
        gt=0,
        le=1,
        description=(
            "fraction of the memory ceiling a matrix-vector product (M < 2) streams its "
            "weights at (a CPU GEMV, row by row, reads slower than a vectorised sum)"
        ),
    )
    source: str = DEFAULT_ACHIEVABLE_SOURCE

    @field_validator("matmul_fraction")
    @classmethod
    def _fractions_in_range(cls, v: dict[str, float]) -> dict[str, float]:
        for dtype, f in v.items():
            if dtype not in COMPUTE_DTYPES:
                raise ValueError(f"unknown compute dtype '{dtype}'")
            if not 0 < f <= 1:
                raise ValueError(f"fraction for {dtype} must be in (0, 1], got {f}")
        return v

    @field_validator("matmul_half_rows_by_m")
    @classmethod
    def _half_rows_table(cls, v: dict[int, float]) -> dict[int, float]:
        for rows, half in v.items():
            if rows < 2 or not 0 <= half < 1e9:
                raise ValueError(
                    f"M½ table entries need M ≥ 2 and 0 ≤ M½ < 1e9, got {rows}: {half}"
                )
        return dict(sorted(v.items()))

    @field_validator("gemm_tile")
    @classmethod
    def _tile_positive(cls, v: tuple[int, int] | None) -> tuple[int, int] | None:
        if v is not None and min(v) < 1:
            raise ValueError(f"gemm_tile sides must be at least 1, got {v}")
        return v

    @classmethod
    def identity(cls, source: str) -> Achievable:
        """The datasheet roofline: every fraction 1, every fixed cost 0, sourced by the
        datasheet `source`."""
        return cls(
            matmul_fraction=dict.fromkeys(COMPUTE_DTYPES, 1.0),
            memory_bandwidth_fraction=1.0,
            source=source.strip() or "the datasheet",
        )

    def terms_off_default(self) -> list[str]:
        """The terms that differ from their defaults (a matmul fraction equal to
        DEFAULT_MATMUL_FRACTION is the default)."""
        off = []
        for name, field in type(self).model_fields.items():
            value: Any = getattr(self, name)
            if name == "matmul_fraction":
                value = {d: f for d, f in value.items() if f != DEFAULT_MATMUL_FRACTION[d]}
            if name != "source" and value != field.get_default(call_default_factory=True):
                off.append(name)
        return off

    @model_validator(mode="after")
    def _terms_sourced(self) -> Achievable:
        """Terms other than the public defaults say where they come from: a source given,
        not blank (the default source describes the defaults only)."""
        off = self.terms_off_default()
        if off and ("source" not in self.model_fields_set or not self.source.strip()):
            raise ValueError(
                f"{', '.join(off)} differ from the public defaults, but achievable.source "
                "does not say where they come from; give achievable.source (the "
                "measurement, benchmark or paper)"
            )
        return self

    @field_validator("surface_system")
    @classmethod
    def _surface_known(cls, v: str | None) -> str | None:
        if v is not None and v not in SURFACE_SYSTEMS:
            raise ValueError(
                f"unknown surface system '{v}'; use one of: {', '.join(SURFACE_SYSTEMS)}"
            )
        return v

    def matmul(self, dtype: str) -> float:
        """Fraction of the dense `dtype` peak the best GEMMs reach."""
        return self.matmul_fraction.get(dtype, DEFAULT_MATMUL_FRACTION[dtype])


class HardwareSpec(Frozen):
    """One accelerator. `dense_peak_tflops` holds dense (non-sparse) peaks per compute dtype;
    integer dtypes are in TOPS under the same key."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    display_name: str
    aliases: tuple[str, ...] = ()
    vendor: str
    kind: Literal["gpu", "tpu", "npu", "cpu", "soc"] = "gpu"
    memory_bytes: int = Field(
        gt=0,
        description=(
            "device memory capacity in bytes: the driver-visible total (nvidia-smi memory.total "
            "MiB x 2^20) or the vendor's binary capacity (GiB x 2^30)"
        ),
    )
    memory_source: str = Field(min_length=1, description="where memory_bytes comes from")
    memory_bandwidth_gb_per_s: float = Field(gt=0)
    dense_peak_tflops: dict[str, float]
    l2_cache_mb: float | None = Field(default=None, gt=0)
    compute_units: int | None = Field(default=None, gt=0)
    boost_clock_mhz: float | None = Field(default=None, gt=0)
    interconnect: Interconnect = Interconnect(kind="none")
    tdp_w: float | None = Field(default=None, gt=0)
    achievable: Achievable = Achievable()
    confidence: Literal["high", "medium", "low", "measured"] = "medium"
    source: str = Field(min_length=1, description="where the datasheet values come from")
    source_url: HttpUrl | None = None
    notes: str = ""
    check_residuals: tuple[float, ...] = Field(
        default=(),
        description="ln(measured / predicted time) of the held-out points of the `roofline "
        "check` run this spec was calibrated from (`calibrate` writes them): predictions on it "
        "take their interval from these instead of the published rows; each within "
        "±MAX_CHECK_RESIDUAL",
    )

    @field_validator("check_residuals", mode="before")
    @classmethod
    def _residuals_are_numbers(cls, v: Any) -> Any:
        for i, x in enumerate(v if isinstance(v, list | tuple) else ()):
            if isinstance(x, bool):  # YAML `true` would be read as 1.0
                raise ValueError(f"residual {i} is {str(x).lower()}, not a number")
        return v

    @field_validator("check_residuals")
    @classmethod
    def _residuals_bounded(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        for i, x in enumerate(v):
            if abs(x) > MAX_CHECK_RESIDUAL:
                raise ValueError(
                    f"residual {i} is ln(measured / predicted) = {x:.4g}: a held-out point "
                    f"more than 100x off (|ln| > {MAX_CHECK_RESIDUAL:.2f}) is no calibration; "
                    "calibrate again (`roofline calibrate`)"
                )
        return v

    @field_validator("dense_peak_tflops")
    @classmethod
    def _peaks_valid(cls, v: dict[str, float]) -> dict[str, float]:
        if not v:
            raise ValueError("at least one dense peak is needed")
        for dtype, peak in v.items():
            if dtype not in COMPUTE_DTYPES:
                known = ", ".join(COMPUTE_DTYPES)
                raise ValueError(f"unknown compute dtype '{dtype}'; use {known}")
            if peak <= 0:
                raise ValueError(f"peak for {dtype} must be positive, got {peak}")
        return v

    @model_validator(mode="after")
    def _achievable_dtypes_exist(self) -> HardwareSpec:
        extra = set(self.achievable.matmul_fraction) - set(self.dense_peak_tflops)
        if extra:
            raise ValueError(f"achievable fraction given for dtypes without a peak: {extra}")
        return self

    # ---- derived values, SI units -------------------------------------------------------
    @property
    def memory_bandwidth_bytes_per_s(self) -> float:
        return self.memory_bandwidth_gb_per_s * 1e9

    def supports(self, dtype: str) -> bool:
        return dtype in self.dense_peak_tflops

    def peak_flops_per_s(self, dtype: str) -> float:
        """Dense datasheet peak for `dtype`, FLOP/s. Refuses a dtype the device lacks."""
        if dtype not in self.dense_peak_tflops:
            have = ", ".join(self.dense_peak_tflops)
            raise InvalidInputError(
                f"{self.name} has no {dtype} peak (it has: {have}); choose a supported dtype"
            )
        return self.dense_peak_tflops[dtype] * 1e12

    def ridge_point_flops_per_byte(self, dtype: str = "bf16") -> float:
        """Arithmetic intensity where compute and memory time are equal: peak / bandwidth."""
        return self.peak_flops_per_s(dtype) / self.memory_bandwidth_bytes_per_s
