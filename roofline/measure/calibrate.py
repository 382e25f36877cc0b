"""Calibration: turn a results file into a HardwareSpec of what this machine achieves.

Held-out protocol: only the peak GEMMs, the bandwidth kernels, four single calibration
shapes that no validated point uses (`gemm_small`, `gemv_small`, `attention_small`,
`prefill_attention_small`), the sweep of the GEMMs decode steps run (`gemm_decode`) and the
eager chain of small operators (`eager_ops`) are used here. The GEMM sweep at N = K = 4096,
attention and whole decode/prefill steps are left for `validate`.

- matmul fraction per dtype = best achieved peak GEMM FLOP/s / datasheet peak (native dtypes
  only: an emulated bf16 on a CPU is reported by measure, never calibrated);
- bandwidth fraction = achieved read-only bandwidth over buffers ≥ 4x the last-level cache /
  datasheet bandwidth (decode streams weights and KV read-mostly, so the read kernel is the
  one it resembles);
- kernel overhead = the cost of one launch inside eager model code: the `eager_ops` chain
  (two RMSNorms with their residual adds and RoPE on q and k on one token: 24 launches as
  the calculator counts them) less its bytes, per launch; without that point (older results
  files), the smallest bandwidth point (a few KiB in a tight loop: launch and dispatch
  alone) less its bytes, which is also the floor every other fit here subtracts;
- small-M GEMM efficiency M½ (`roofline.calc.cost`): solving t = (FLOPs + 2·M½·weights) /
  achieved peak + overhead for M½, pooled over the points (Σ excess FLOPs / Σ 2·weights: the
  large matrices, which take most of a step, weigh as much as they cost); from the one
  `gemm_small` point (M = 8, a shape neither the sweep nor the models use) as
  `matmul_half_rows`, and per M from the `gemm_decode` sweep (every GEMM shape of the suite
  models' decode steps, M = 2, 4, … up to the largest batch) as `matmul_half_rows_by_m`,
  which the calculator reads instead when present; 0 when the GEMMs ran at their memory
  roofline (no evidence of a compute shortfall, the usual case on GPUs);
- gemv row cost and weight-stream fraction (`roofline.calc.cost`): from the `gemv_small` point
  (M = 1, rows shorter than any model's: K = 384 on CPUs, 256 on GPUs) and the sweep's M = 1
  points (every row length of the suite models), least squares of what each took beyond
  streaming its bytes at the bandwidth, t - overhead - bytes / bandwidth, on N rows and its
  weights streamed slower, W / bandwidth · (1 / fraction - 1), relative to each point's time
  (`gemv_terms`). A CPU gemv reads its weights row by row at about half the read kernel's
  bandwidth: with the row cost alone, long rows (a down projection, K = F) came out 21–29%
  fast and short ones 13–27% slow; 0 and 1 when they streamed at the bandwidth;
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
from typing import Any

import numpy as np
from pydantic import ValidationError

from ..errors import InvalidInputError, field_error
from ..spec.catalog import load_hardware
from ..spec.hardware import Achievable, HardwareSpec
from .kernel_ops import attention_op, eager_chain_op
from .results import Point, Results

CALIBRATION_FAMILIES = (
    "gemm_peak",
    "gemm_small",
    "gemv_small",
    "gemm_decode",
    "eager_ops",
    "attention_small",
    "prefill_attention_small",
    "bandwidth",
)
DRAM_LLC_MULTIPLE = 4


@dataclass(frozen=True)
class Achieved:
    """What the calibration kernels reached: the absolute ceilings (SI units) and every other
    measured term under its `roofline.spec.hardware.Achievable` field name and unit, so the spec
    `calibrated_spec` writes is built from them by name (one definition per term)."""

    matmul_flops_per_s: dict[str, float]
    bandwidth_bytes_per_s: float
    terms: dict[str, float | dict[int, float]]

    def __post_init__(self) -> None:
        unknown = set(self.terms) - set(Achievable.model_fields)
        if unknown:
            raise ValueError(f"calibration terms without an Achievable field: {unknown}")


#: A read this much faster than the DRAM read comes partly from cache: a working set there is
#: one the model's single DRAM bandwidth misprices by more than 40% of the ±25% step band.
CACHE_SPEEDUP = 0.10


def buffer_bytes(p: Point) -> float:
    """Bytes of one buffer of a bandwidth point (copy moves two, triad three)."""
    return p.bytes / {"copy": 2, "read": 1, "triad": 3}[p.kernel]


def is_dram_point(p: Point, llc_bytes: int | None) -> bool:
    """A bandwidth point whose buffers exceed the last-level cache several times."""
    return llc_bytes is None or buffer_bytes(p) >= DRAM_LLC_MULTIPLE * llc_bytes


def read_speedup(results: Results, working_set_bytes: float) -> tuple[float, float] | None:
    """How much faster than the DRAM read this machine re-reads a working set of that size:
    (buffer bytes, speedup - 1) of the largest read no larger than it (the conservative side:
    a smaller buffer is served more from cache), or None when every read is larger. A step
    whose working set reads more than CACHE_SPEEDUP faster is partly cache-resident, which the
    model's one DRAM bandwidth does not describe. Local, so one noisy read moves the verdict
    of the steps next to it only; as fine as the read sweep (`kernels.suite.cache_sweep_elems`:
    steps of 1.5x and 2x on CPUs)."""
    dram = achieved(results).bandwidth_bytes_per_s
    under = [
        (buffer_bytes(p), p.bytes_per_s)
        for p in results.family("bandwidth")
        if p.kernel == "read" and buffer_bytes(p) <= working_set_bytes
    ]
    if not under:
        return None
    size, rate = max(under)
    return size, rate / dram - 1


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
    sweep = results.family("gemm_decode")
    gemvs = results.family("gemv_small") + [p for p in sweep if p.shape["M"] == 1]
    gemv_row, gemv_fraction = gemv_terms(gemvs, bw, overhead)
    return Achieved(
        peaks,
        bw,
        terms={
            "kernel_overhead_us": eager_launch_s(results.family("eager_ops"), bw, overhead) * 1e6,
            "matmul_half_rows": half_rows(results.family("gemm_small"), peaks, bw, overhead),
            "matmul_half_rows_by_m": half_rows_by_m(sweep, peaks, bw, overhead),
            "gemv_row_ns": gemv_row * 1e9,
            "gemv_memory_fraction": gemv_fraction,
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


def eager_launch_s(points: list[Point], bw: float, floor_s: float) -> float:
    """Cost of one launch inside eager model code: the median over `eager_ops` points of
    (t - bytes / bw) / launches, at least the tight-loop floor `floor_s` (the floor itself
    without points: results written before the chain was measured)."""
    fits = []
    for p in points:
        op = eager_chain_op(**{d: p.shape[d] for d in ("D", "N", "K", "H")})
        fits.append(max((p.timing.median_s - p.bytes / bw) / op.launches, floor_s))
    return _median(fits, floor_s)


def half_rows_by_m(
    points: list[Point], peaks: dict[str, float], bw: float, overhead_s: float
) -> dict[int, float]:
    """M½ at each M ≥ 2 of the decode sweep: `half_rows` over that M's shapes."""
    by_m: dict[int, list[Point]] = {}
    for p in points:
        if p.shape["M"] >= 2 and p.dtype in peaks:
            by_m.setdefault(p.shape["M"], []).append(p)
    return {m: half_rows(ps, peaks, bw, overhead_s) for m, ps in sorted(by_m.items())}


def gemv_terms(points: list[Point], bw: float, overhead_s: float) -> tuple[float, float]:
    """Row cost (s) and weight-stream fraction of a gemv: the least-squares solution of
    t - overhead - bytes / bw = N·row + (W / bw)·(1/fraction - 1) over the points (W: weight
    bytes), each residual relative to the point's time, so that every row length of the
    models counts alike and one noisy large matrix (the LM head) cannot set both terms; row ≥ 0
    and fraction ≤ 1 (the other term fitted alone when one is at its bound). Points of a
    single row length cannot tell the two apart: they give the row cost alone. (0, 1)
    without points or when they streamed at the bandwidth."""
    if not points:
        return 0.0, 1.0
    t = np.array([p.timing.median_s for p in points])
    rows = np.array([float(p.shape["N"]) for p in points]) / t
    weights = np.array([p.bytes * _weight_share(p) for p in points]) / bw / t
    excess = np.array([p.timing.median_s - overhead_s - p.bytes / bw for p in points]) / t

    def alone(x: np.ndarray) -> float:
        return max(float(x @ excess / (x @ x)), 0.0)

    if len({p.shape["K"] for p in points}) < 2:
        return alone(rows), 1.0
    (row, slower), *_ = np.linalg.lstsq(np.stack([rows, weights], axis=1), excess, rcond=None)
    if slower < 0:
        return alone(rows), 1.0
    if row < 0:
        row, slower = 0.0, alone(weights)
    return float(row), 1 / (1 + float(slower))


def _weight_share(p: Point) -> float:
    """Share of a GEMM point's bytes that are its weights: N·K of N·K + M·K + M·N elements."""
    M, N, K = (float(p.shape[d]) for d in "MNK")
    return N * K / (N * K + M * K + M * N)


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
    """M½ from skinny GEMMs, pooled over the points: Σ ((t - overhead)·peak - FLOPs) / Σ 2·W
    (W = K·N weight elements; M = FLOPs / (2·W)), a point at or under its memory time adding
    nothing to the numerator; pooled, so it reproduces their summed time."""
    excess = weights = 0.0
    for p in points:
        if p.dtype not in peaks:
            continue
        t = p.timing.median_s - overhead_s
        weights += 2 * p.shape["N"] * p.shape["K"]
        if t > p.bytes / bw:
            excess += max(t * peaks[p.dtype] - p.flops, 0.0)
    return excess / weights if weights else 0.0


def _rounded(v: float | dict[int, float]) -> float | dict[int, float]:
    return {k: round(x, 4) for k, x in v.items()} if isinstance(v, dict) else round(v, 4)


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
        "smallest bandwidth point or, when measured, the eager_ops chain per launch, "
        "matmul_half_rows = the M=8 gemm_small point, matmul_half_rows_by_m = the "
        "gemm_decode sweep per M (pooled over its points), gemv_row_ns and "
        "gemv_memory_fraction = the M=1 gemv_small and gemm_decode points (least "
        "squares), attention_memory_fraction = the decode "
        "attention_small point, attention_compute_fraction = the causal "
        "prefill_attention_small point"
    )
    fields = dict(
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
        achievable=dict(
            matmul_fraction=fractions,
            memory_bandwidth_fraction=round(a.bandwidth_bytes_per_s / bw, 4),
            **{k: _rounded(v) for k, v in a.terms.items()},  # the terms, by name
            source=src,
        ),
        confidence="measured",
        source=src,
        notes="; ".join(notes + [env.device.datasheet_note or env.device.catalog_note]),
    )
    return validated_spec(fields, source)


def validated_spec(fields: dict[str, Any], source: str | Path) -> HardwareSpec:
    """The calibrated spec of `fields`, or an InvalidInputError naming the term the results
    of `source` would give out of range (a negative launch cost, a fraction that rounds to
    0, a held-out point 100x off): a fit of contradictory results is refused, not written."""
    try:
        return HardwareSpec.model_validate(fields)
    except ValidationError as e:
        raise InvalidInputError(
            f"{source}: calibration refused: {field_error(e)}; the measurements contradict "
            "each other: re-run `roofline measure`"
        ) from None
