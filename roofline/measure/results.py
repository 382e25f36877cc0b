"""Versioned results of `roofline measure`: one JSON file, written atomically.

A results file holds the environment it was measured in, every measured point (shape,
calculator FLOPs and bytes, timing median and spread), the points skipped and why, and the
model specs the whole-step points were built from, so `validate` needs nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field, ValidationError, model_validator

from ..errors import InvalidInputError, SpecError, field_error
from ..files import read_text, replace_from
from ..frozen import Frozen
from ..model import ModelSpec

SCHEMA_VERSION: Literal[1] = 1
#: A results file larger than this is not one `measure` wrote (the full suite writes < 1 MB).
MAX_RESULTS_BYTES = 64 * 2**20
#: No kernel point is timed for longer than a day per call; a larger value is corrupt.
MAX_TIME_S = 86_400.0
#: FLOPs or bytes of one point beyond this (10³⁰) is no real shape.
MAX_COUNT = 1e30

Family = Literal[
    "gemm_peak",
    "gemm_small",
    "gemv_small",
    "attention_small",
    "prefill_attention_small",
    "gemm_decode",
    "eager_ops",
    "gemm_sweep",
    "bandwidth",
    "decode_attention",
    "prefill_attention",
    "decode_step",
    "prefill_step",
]
FAMILIES: tuple[str, ...] = (
    "gemm_peak",
    "gemm_small",
    "gemv_small",
    "attention_small",
    "prefill_attention_small",
    "gemm_decode",
    "eager_ops",
    "gemm_sweep",
    "bandwidth",
    "decode_attention",
    "prefill_attention",
    "decode_step",
    "prefill_step",
)


class Timing(Frozen):
    """Per-call wall time over `repeats` timed calls, seconds."""

    median_s: float = Field(gt=0, le=MAX_TIME_S)
    p20_s: float = Field(gt=0, le=MAX_TIME_S)
    p80_s: float = Field(gt=0, le=MAX_TIME_S)
    min_s: float = Field(gt=0, le=MAX_TIME_S)
    repeats: int = Field(ge=1, le=10**9)
    method: str = Field(description="perf_counter, cuda_events or cuda_graph")

    @model_validator(mode="after")
    def _ordered(self) -> Timing:
        if not self.min_s <= self.p20_s <= self.median_s <= self.p80_s:
            raise ValueError(
                "times must be ordered min <= p20 <= median <= p80, got "
                f"{self.min_s:g} / {self.p20_s:g} / {self.median_s:g} / {self.p80_s:g} s"
            )
        return self


#: The shape dimensions each kernel's point carries (validate rebuilds its operator from them).
KERNEL_DIMS: dict[str, tuple[str, ...]] = {
    "gemm": ("M", "N", "K"),
    "copy": ("elems",),
    "read": ("elems",),
    "triad": ("elems",),
    "sdpa": ("B", "T", "S", "N", "K", "H"),
    "eager": ("D", "N", "K", "H"),
    "model": ("B", "T", "S"),
}


#: The kernel each family times (a decode step timed as a GEMM would be predicted as one).
FAMILY_KERNELS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(
        ("gemm_peak", "gemm_small", "gemv_small", "gemm_decode", "gemm_sweep"), ("gemm",)
    ),
    "bandwidth": ("copy", "read", "triad"),
    **dict.fromkeys(
        ("attention_small", "prefill_attention_small", "decode_attention", "prefill_attention"),
        ("sdpa",),
    ),
    "eager_ops": ("eager",),
    "decode_step": ("model",),
    "prefill_step": ("model",),
}


class Point(Frozen):
    """One measured shape. FLOPs and bytes are the calculator's counts for this shape."""

    family: Family
    kernel: str = Field(description="gemm, copy, read, triad, sdpa, eager, model")
    name: str
    dtype: str
    shape: dict[str, int]
    model: str | None = Field(default=None, description="model spec name (whole steps)")
    flops: float = Field(ge=0, le=MAX_COUNT)
    bytes: float = Field(ge=0, le=MAX_COUNT)
    timing: Timing
    graph_timing: Timing | None = Field(default=None, description="CUDA-graph replay (GPU)")
    backend: str = ""
    native: bool = Field(default=True, description="False: dtype emulated on this device")

    @model_validator(mode="after")
    def _shape_of_kernel(self) -> Point:
        dims = KERNEL_DIMS.get(self.kernel)
        if dims is None:
            raise ValueError(f"unknown kernel '{self.kernel}'; known: {', '.join(KERNEL_DIMS)}")
        missing = [d for d in dims if d not in self.shape]
        if missing:
            raise ValueError(f"a {self.kernel} point needs shape {', '.join(missing)}")
        low = [d for d in dims if self.shape[d] < (0 if d == "S" else 1)]
        if low:
            raise ValueError(f"shape {low[0]} = {self.shape[low[0]]} of a {self.kernel} point")
        if self.kernel not in FAMILY_KERNELS[self.family]:
            raise ValueError(
                f"a {self.family} point times {' or '.join(FAMILY_KERNELS[self.family])}, "
                f"not '{self.kernel}'"
            )
        return self

    @property
    def flops_per_s(self) -> float:
        return self.flops / self.timing.median_s

    @property
    def bytes_per_s(self) -> float:
        return self.bytes / self.timing.median_s

    @property
    def intensity_flops_per_byte(self) -> float:
        return self.flops / self.bytes


class Skipped(Frozen):
    name: str
    reason: str


class DeviceInfo(Frozen):
    """What detection found. GPU-only and CPU-only fields are None on the other kind."""

    kind: Literal["cpu", "cuda"]
    name: str
    index: int | None = None
    catalog_name: str | None = Field(default=None, description="matching catalog spec")
    catalog_note: str = ""
    memory_bytes: float | None = None
    # GPU
    driver: str | None = None
    compute_capability: str | None = None
    sm_count: int | None = None
    l2_bytes: int | None = None
    max_sm_clock_mhz: float | None = None
    max_mem_clock_mhz: float | None = None
    bus_width_bits: int | None = None
    theoretical_bandwidth_bytes_per_s: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz_at_start: float | None = None
    # CPU
    cores: int | None = None
    threads_used: int | None = None
    clock_mhz: float | None = None
    caches_bytes: dict[str, int] = Field(default_factory=dict)
    simd_flags: tuple[str, ...] = ()
    flops_per_cycle_per_core: dict[str, int] = Field(default_factory=dict)
    native_dtypes: tuple[str, ...] = ()
    datasheet_peak_flops_per_s: dict[str, float] = Field(default_factory=dict)
    datasheet_bandwidth_bytes_per_s: float | None = None
    datasheet_note: str = ""

    @property
    def last_level_cache_bytes(self) -> int | None:
        if self.kind == "cuda":
            return self.l2_bytes
        return max(self.caches_bytes.values()) if self.caches_bytes else None


class Environment(Frozen):
    device: DeviceInfo
    torch_version: str
    python_version: str
    threads: int = Field(description="torch intra-op threads during timing")
    flags: dict[str, str] = Field(default_factory=dict, description="tf32 and similar")
    started_at: str
    finished_at: str


class Results(Frozen):
    schema_version: Literal[1] = SCHEMA_VERSION
    suite: str
    complete: bool = Field(description="False when interrupted; points are what was measured")
    environment: Environment
    points: tuple[Point, ...]
    skipped: tuple[Skipped, ...] = ()
    models: dict[str, ModelSpec] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _models_recorded(self) -> Results:
        """Every whole-step point names a model spec held in `models` (validate needs it)."""
        for i, p in enumerate(self.points):
            if p.family in ("decode_step", "prefill_step") and p.model not in self.models:
                known = ", ".join(sorted(self.models)) or "none"
                raise ValueError(
                    f"point {i} '{p.name}' names model '{p.model}', which the "
                    f"file does not hold (it holds: {known})"
                )
        return self

    def family(self, family: str) -> list[Point]:
        return [p for p in self.points if p.family == family]


#: Runs of one suite whose median point deviates by more than this from run to run (the
#: median absolute deviation of its times over the runs, over their median) come from a
#: machine too noisy to judge a miss: 10% is 40% of the tightest band (±25%), so a miss there
#: could be the load as well as the code. `check` measures again, then says so (exit 2)
#: rather than fail or pass by luck. The MAD does not grow with the number of runs, as the
#: range does.
NOISY_SPREAD = 0.10


def run_spread(runs: Sequence[Results]) -> float:
    """How much the runs disagree: over the points every run measured, the median of each
    point's median absolute deviation over its median, of its per-run median times (0 for
    fewer than 2 runs)."""
    if len(runs) < 2:
        return 0.0
    times: dict[str, list[float]] = {}
    for r in runs:
        for p in r.points:
            times.setdefault(p.name, []).append(p.timing.median_s)
    spreads = [
        float(np.median(np.abs(np.asarray(t) - np.median(t))) / np.median(t))
        for t in times.values()
        if len(t) == len(runs) and np.median(t) > 0
    ]
    return float(np.median(spreads)) if spreads else 0.0


def median_of_runs(runs: Sequence[Results]) -> Results:
    """Several runs of one suite as one: each point is taken from the run whose median time
    is the median over runs (an odd number of runs picks a real measurement, never an
    average). On a noisy machine this damps a run that was slowed or sped up as a whole —
    calibration points included — without widening any band."""
    if not runs:
        raise InvalidInputError("no runs to combine")
    names = [p.name for p in runs[0].points]
    by_name = {
        n: sorted(
            (p for r in runs for p in r.points if p.name == n), key=lambda p: p.timing.median_s
        )
        for n in names
    }
    points = tuple(by_name[n][(len(by_name[n]) - 1) // 2] for n in names)
    skipped = {s.name: s for r in runs for s in r.skipped}
    return runs[0].model_copy(
        update={
            "points": points,
            "skipped": tuple(skipped.values()),
            "complete": all(r.complete for r in runs),
        }
    )


def write_results(results: Results, path: str | Path) -> Path:
    """Write atomically: a temporary file in the same folder, then `os.replace` (readers never
    see half a file; permissions as any new file's)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = results.model_dump_json(indent=1)
    return replace_from(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def load_results(path: str | Path) -> Results:
    path = Path(path)
    text = read_text(path, "results file", MAX_RESULTS_BYTES)
    try:
        return Results.model_validate_json(text)
    except ValidationError as e:
        raise SpecError(
            f"{path}: not a roofline results file (schema {SCHEMA_VERSION}): "
            f"{field_error(e)}; run `roofline measure -o FILE` to make one"
        ) from None
