"""Calibration: turn a results file into a HardwareSpec of what this machine achieves.

Held-out protocol: only the peak GEMMs, the bandwidth kernels and four single calibration
shapes that no validated point uses (`gemm_small`, `gemv_small`, `attention_small`,
`prefill_attention_small`) are used here. The GEMM sweep, attention and whole decode/prefill
steps are left for `validate`.

- matmul fraction per dtype = best achieved peak GEMM FLOP/s / datasheet peak (native dtypes
  only: an emulated bf16 on a CPU is reported by measure, never calibrated);
- bandwidth fraction = achieved read-only bandwidth over buffers ≥ 4x the last-level cache /
  datasheet bandwidth (decode streams weights and KV read-mostly, so the read kernel is the
  one it resembles);
- kernel overhead = time of the smallest bandwidth point (a few KiB: pure launch and
  dispatch cost) less its bytes at the achieved bandwidth;
- small-M GEMM efficiency M½ (`roofline.cost`): from the one `gemm_small` point (M = 8, a
  shape neither the sweep nor the models use), solving
  t = (FLOPs + 2·M½·weights) / achieved peak + overhead for M½; 0 when that GEMM ran at
  its memory roofline (no evidence of a compute shortfall, the usual case on GPUs).
- gemv row cost (`roofline.cost`): from the one `gemv_small` point (M = 1, rows shorter than
  any model's: K = 384 on CPUs, 256 on GPUs), (t - overhead - bytes / bandwidth) / N rows,
  0 when it streamed at the read bandwidth;
- attention memory fraction: from the one `attention_small` point (a decode shape, B = 8
  S = 2048 on CPUs: memory-bound), its memory roofline time bytes / bandwidth over
  (t - launches · overhead), capped at 1;
- attention compute fraction: from the one `prefill_attention_small` point (a causal prefill
  shape, T = 384 on CPUs, T = 2048 on GPUs: compute-bound), its compute roofline time
  FLOPs / achieved peak over (t - launches · overhead), capped at 1.
When the datasheet figure is unknown (CPU DRAM) or below what was achieved, the achieved
figure stands in for it with fraction 1, and the spec's notes say so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..catalog import load_hardware
from ..errors import InvalidInputError
from ..hardware import Achievable, HardwareSpec
from .kernel_ops import attention_op
from .results import Point, Results

CALIBRATION_FAMILIES = (
    "gemm_peak",
    "gemm_small",
    "gemv_small",
    "attention_small",
    "prefill_attention_small",
    "bandwidth",
)
DRAM_LLC_MULTIPLE = 4


@dataclass(frozen=True)
class Achieved:
    """What the calibration kernels reached: the absolute ceilings (SI units) and every other
    measured term under its `roofline.hardware.Achievable` field name and unit, so the spec
    `calibrated_spec` writes is built from them by name (one definition per term)."""

    matmul_flops_per_s: dict[str, float]
    bandwidth_bytes_per_s: float
    terms: dict[str, float]

    def __post_init__(self) -> None:
        unknown = set(self.terms) - set(Achievable.model_fields)
        if unknown:
            raise ValueError(f"calibration terms without an Achievable field: {unknown}")


def is_dram_point(p: Point, llc_bytes: int | None) -> bool:
    """A bandwidth point whose buffers exceed the last-level cache several times."""
    elems_bytes = p.bytes / {"copy": 2, "read": 1, "triad": 3}[p.kernel]
    return llc_bytes is None or elems_bytes >= DRAM_LLC_MULTIPLE * llc_bytes


def achieved(results: Results) -> Achieved:
    llc = results.environment.device.last_level_cache_bytes
    peaks: dict[str, float] = {}
    for p in results.family("gemm_peak"):
        if p.native:
            peaks[p.dtype] = max(peaks.get(p.dtype, 0.0), p.flops_per_s)
    bw_points = results.family("bandwidth")
    dram = [p for p in bw_points if is_dram_point(p, llc)]
    reads = [p for p in dram if p.kernel == "read"] or dram
    if not peaks or not reads:
        raise InvalidInputError(
            "the results lack a native peak GEMM or a bandwidth kernel over buffers "
            f"≥ {DRAM_LLC_MULTIPLE}x the last-level cache; re-run `roofline measure` to the end"
        )
    bw = max(p.bytes_per_s for p in reads)
    smallest = min(bw_points, key=lambda p: p.bytes)
    overhead = max(smallest.timing.median_s - smallest.bytes / bw, 0.0)
    return Achieved(
        peaks,
        bw,
        terms={
            "kernel_overhead_us": overhead * 1e6,
            "matmul_half_rows": half_rows(results.family("gemm_small"), peaks, bw, overhead),
            "gemv_row_ns": gemv_row_s(results.family("gemv_small"), bw, overhead) * 1e9,
            "attention_memory_fraction": attention_fraction(
                results.family("attention_small"), "memory", peaks, bw, overhead
            ),
            "attention_compute_fraction": attention_fraction(
                results.family("prefill_attention_small"), "compute", peaks, bw, overhead
            ),
        },
    )


def _median(xs: list[float], default: float) -> float:
    return float(sorted(xs)[len(xs) // 2]) if xs else default


def gemv_row_s(points: list[Point], bw: float, overhead_s: float) -> float:
    """Fixed cost per weight row of a gemv: the median over points of
    (t - overhead - bytes / bw) / N, at least 0 (0 without points)."""
    return _median(
        [max((p.timing.median_s - overhead_s - p.bytes / bw) / p.shape["N"], 0.0) for p in points],
        0.0,
    )


def attention_fraction(
    points: list[Point], side: str, peaks: dict[str, float], bw: float, overhead_s: float
) -> float:
    """Fraction of one ceiling (`side` "memory" or "compute") attention reaches: the median
    over points of that side's roofline time (bytes / bw or FLOPs / peak) over
    (t - launches · overhead), capped at 1 (1 without points)."""
    fits = []
    for p in points:
        if p.dtype not in peaks:
            continue
        op = attention_op(**{d: p.shape[d] for d in "BTSNKH"})
        roof = p.bytes / bw if side == "memory" else p.flops / peaks[p.dtype]
        spent = p.timing.median_s - op.launches * overhead_s
        fits.append(min(roof / spent, 1.0) if spent > 0 else 1.0)
    return _median(fits, 1.0)


def half_rows(points: list[Point], peaks: dict[str, float], bw: float, overhead_s: float) -> float:
    """M½ from skinny GEMMs: the median over points of ((t - overhead)·peak - FLOPs) / (2·W),
    W = K·N weight elements, M = FLOPs / (2·W); a point at or under its memory time gives 0."""
    fits = []
    for p in points:
        if p.dtype not in peaks:
            continue
        t = p.timing.median_s - overhead_s
        weights = p.shape["N"] * p.shape["K"]
        if t <= p.bytes / bw:
            fits.append(0.0)
        else:
            fits.append(max((t * peaks[p.dtype] - p.flops) / (2 * weights), 0.0))
    return _median(fits, 0.0)


def _base(results: Results) -> tuple[dict[str, float], float | None, str, str]:
    """Datasheet peaks (FLOP/s), bandwidth (B/s) or None, name and display name."""
    dev = results.environment.device
    if dev.catalog_name:
        hw = load_hardware(dev.catalog_name)
        return (
            {d: hw.peak_flops_per_s(d) for d in hw.dense_peak_tflops},
            hw.memory_bandwidth_bytes_per_s,
            hw.name,
            hw.display_name,
        )
    bw = dev.theoretical_bandwidth_bytes_per_s or dev.datasheet_bandwidth_bytes_per_s
    words = "".join(c if c.isalnum() else " " for c in dev.name.split(" (")[0].lower()).split()
    return dict(dev.datasheet_peak_flops_per_s), bw, "-".join(words) or dev.kind, dev.name


def calibrated_spec(results: Results, source: str | Path) -> HardwareSpec:
    """A HardwareSpec whose datasheet fields are the device's and whose `achievable` block
    holds the measured fractions and overhead, each traced to `source`."""
    a = achieved(results)
    peaks, bw, name, display = _base(results)
    notes = []
    fractions: dict[str, float] = {}
    for dtype, flops in a.matmul_flops_per_s.items():
        if dtype not in peaks or flops > peaks[dtype]:
            why = "no datasheet peak" if dtype not in peaks else "achieved above datasheet"
            notes.append(f"{dtype} peak = measured ({why})")
            peaks[dtype] = flops
        fractions[dtype] = round(flops / peaks[dtype], 4)
    if bw is None or a.bandwidth_bytes_per_s > bw:
        notes.append(
            "memory bandwidth = measured ("
            + ("datasheet bandwidth unknown" if bw is None else "achieved above datasheet")
            + ")"
        )
        bw = a.bandwidth_bytes_per_s
    env = results.environment
    src = (
        f"roofline calibrate {source}: measured {env.started_at} on {env.device.name}, "
        f"torch {env.torch_version}, {env.threads} threads; matmul = best peak GEMM per "
        "dtype, bandwidth = read-only kernel over buffers >= 4x LLC, kernel overhead = "
        "smallest bandwidth point, matmul_half_rows = the M=8 gemm_small point, "
        "gemv_row_ns = the M=1 gemv_small point, attention_memory_fraction = the decode "
        "attention_small point, attention_compute_fraction = the causal "
        "prefill_attention_small point"
    )
    return HardwareSpec(
        name=f"{name}-calibrated",
        display_name=f"{display} (calibrated)",
        vendor=display.split()[0].lower() if display else "unknown",
        kind="gpu" if env.device.kind == "cuda" else "cpu",
        memory_bytes=int(env.device.memory_bytes or 2**30),
        memory_source=(
            f"measured: total memory the runtime reports on {env.device.name}"
            if env.device.memory_bytes
            else "not measured: 1 GiB placeholder"
        ),
        memory_bandwidth_gb_per_s=bw / 1e9,
        dense_peak_tflops={d: f / 1e12 for d, f in peaks.items()},
        l2_cache_mb=(env.device.last_level_cache_bytes or 0) / 1e6 or None,
        achievable=Achievable(
            matmul_fraction=fractions,
            memory_bandwidth_fraction=round(a.bandwidth_bytes_per_s / bw, 4),
            **{k: round(v, 4) for k, v in a.terms.items()},  # type: ignore[arg-type]  # float terms, by name
            source=src,
        ),
        confidence="measured",
        source=src,
        notes="; ".join(notes + [env.device.datasheet_note or env.device.catalog_note]),
    )
