"""Versioned results of `roofline measure`: one JSON file, written atomically.

A results file holds the environment it was measured in, every measured point (shape,
calculator FLOPs and bytes, timing median and spread), the points skipped and why, and the
model specs the whole-step points were built from, so `validate` needs nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Literal, get_args

import numpy as np
from pydantic import Field, ValidationError, field_validator, model_validator

from ..errors import InvalidInputError, SpecError, field_error
from ..files import read_text, replace_from
from ..frozen import Frozen
from ..spec.catalog import hardware_name, load_hardware
from ..spec.dtypes import COMPUTE_DTYPES
from ..spec.model import ModelSpec
from ..units import si

SCHEMA_VERSION: Literal[1] = 1
#: A results file larger than this is not one `measure` wrote (the full suite writes < 1 MB).
MAX_RESULTS_BYTES = 64 * 2**20
#: No kernel point is timed for longer than a day per call; a larger value is corrupt.
MAX_TIME_S = 86_400.0
#: FLOPs or bytes of one point beyond this (10³⁰) is no real shape.
MAX_COUNT = 1e30
#: No timer here resolves a call shorter than 10 ns (perf_counter ticks in tens of ns, a CUDA
#: event in 0.5 µs, and the fastest kernel measured, a few KiB read on a CPU, takes ~1 µs).
MIN_TIME_S = 1e-8
#: The timer each kind of device times its points with (`kernels.timing`); a CUDA point also
#: carries a CUDA-graph replay (`Point.graph_timing`).
TIMERS: dict[str, str] = {"cpu": "perf_counter", "cuda": "cuda_events"}
GRAPH_TIMER = "cuda_graph"
#: Device memory outside 1 MiB .. 1 PiB is no device (the largest hosts hold tens of TiB).
MIN_MEMORY_BYTES = 2**20
MAX_MEMORY_BYTES = 2**50
MAX_THREADS = 2**16
#: How far a measured FLOP/s may exceed the datasheet peak before the label is not this
#: device's. A CPU's peak is derived from the clock detection read, which may be the current
#: 'cpu MHz' with turbo unknown: the Xeon VM's fp32 GEMM reached 1.29x it
#: (docs/measurements/cpu-ci-xeon.json). No boost doubles a clock; `calibrate` takes a
#: measured peak above the datasheet's, and says so, up to this factor.
PEAK_SLACK = 2.0

Positive = Annotated[float, Field(gt=0, le=MAX_COUNT)]
Count = Annotated[int, Field(ge=1, le=2**62)]

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
FAMILIES: tuple[str, ...] = get_args(Family)


class Timing(Frozen):
    """Per-call wall time over `repeats` timed calls, seconds."""

    median_s: float = Field(gt=0, le=MAX_TIME_S)
    p20_s: float = Field(gt=0, le=MAX_TIME_S)
    p80_s: float = Field(gt=0, le=MAX_TIME_S)
    min_s: float = Field(gt=0, le=MAX_TIME_S)
    repeats: int = Field(ge=1, le=10**9)
    method: str = Field(description="perf_counter, cuda_events or cuda_graph")

    @field_validator("method")
    @classmethod
    def _known_timer(cls, v: str) -> str:
        known = (*TIMERS.values(), GRAPH_TIMER)
        if v not in known:
            raise ValueError(f"unknown timer '{v}'; `measure` times with {', '.join(known)}")
        return v

    @model_validator(mode="after")
    def _ordered(self) -> Timing:
        if not self.min_s <= self.p20_s <= self.median_s <= self.p80_s:
            raise ValueError(
                "times must be ordered min <= p20 <= median <= p80, got "
                f"{self.min_s:g} / {self.p20_s:g} / {self.median_s:g} / {self.p80_s:g} s"
            )
        if self.min_s < MIN_TIME_S:
            raise ValueError(
                f"min_s = {self.min_s:g} s is shorter than any timer resolves "
                f"({MIN_TIME_S:g} s): not a measurement"
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

    @field_validator("dtype")
    @classmethod
    def _known_dtype(cls, v: str) -> str:
        return _compute_dtype(v)

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


def _compute_dtype(v: str) -> str:
    if v not in COMPUTE_DTYPES:
        raise ValueError(f"unknown dtype '{v}'; use one of: {', '.join(COMPUTE_DTYPES)}")
    return v


class Skipped(Frozen):
    name: str
    reason: str


class DeviceInfo(Frozen):
    """What detection found. GPU-only and CPU-only fields are None on the other kind."""

    kind: Literal["cpu", "cuda"]
    name: str
    index: int | None = Field(default=None, ge=0)
    catalog_name: str | None = Field(default=None, description="matching catalog spec")
    catalog_note: str = ""
    memory_bytes: float | None = Field(default=None, ge=MIN_MEMORY_BYTES, le=MAX_MEMORY_BYTES)
    # GPU (NVML facts: informational, 0 where a driver reports nothing)
    driver: str | None = None
    compute_capability: str | None = None
    sm_count: int | None = Field(default=None, ge=1, le=2**20)
    l2_bytes: int | None = Field(default=None, ge=0, le=MAX_MEMORY_BYTES)
    max_sm_clock_mhz: float | None = Field(default=None, ge=0, le=1e6)
    max_mem_clock_mhz: float | None = Field(default=None, ge=0, le=1e6)
    bus_width_bits: int | None = Field(default=None, ge=0, le=2**20)
    theoretical_bandwidth_bytes_per_s: Positive | None = None
    power_limit_w: float | None = Field(default=None, ge=0, le=1e6)
    sm_clock_mhz_at_start: float | None = Field(default=None, ge=0, le=1e6)
    # CPU
    cores: int | None = Field(default=None, ge=1, le=MAX_THREADS)
    threads_used: int | None = Field(default=None, ge=1, le=MAX_THREADS)
    clock_mhz: float | None = Field(default=None, gt=0, le=1e6)
    caches_bytes: dict[str, Count] = Field(default_factory=dict)
    simd_flags: tuple[str, ...] = ()
    flops_per_cycle_per_core: dict[str, Count] = Field(default_factory=dict)
    native_dtypes: tuple[str, ...] = ()
    datasheet_peak_flops_per_s: dict[str, Positive] = Field(default_factory=dict)
    datasheet_bandwidth_bytes_per_s: Positive | None = None
    datasheet_note: str = ""

    @field_validator("flops_per_cycle_per_core", "datasheet_peak_flops_per_s")
    @classmethod
    def _dtype_keys(cls, v: dict[str, float]) -> dict[str, float]:
        for dtype in v:
            _compute_dtype(dtype)
        return v

    @field_validator("native_dtypes")
    @classmethod
    def _dtypes(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(_compute_dtype(d) for d in v)

    @property
    def last_level_cache_bytes(self) -> int | None:
        if self.kind == "cuda":
            return self.l2_bytes
        return max(self.caches_bytes.values()) if self.caches_bytes else None


class Environment(Frozen):
    device: DeviceInfo
    torch_version: str
    python_version: str
    threads: int = Field(ge=1, le=MAX_THREADS, description="torch intra-op threads during timing")
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
    """A results file, its schema and its consistency (`contradiction`) checked; a UTF-8
    byte-order mark (some editors write one) is read past."""
    path = Path(path)
    text = read_text(path, "results file", MAX_RESULTS_BYTES).removeprefix("\ufeff")
    try:
        results = Results.model_validate_json(text)
    except ValidationError as e:
        raise SpecError(
            f"{path}: not a roofline results file (schema {SCHEMA_VERSION}): "
            f"{field_error(e)}; run `roofline measure -o FILE` to make one"
        ) from None
    return check_results(results, path)


def check_results(results: Results, path: str | Path) -> Results:
    """`results`, or a SpecError naming the file and the field its environment contradicts
    its points in (`contradiction`)."""
    found = contradiction(results)
    if found is None:
        return results
    field, why = found
    raise SpecError(f"{path}: field '{field}': {why}")


def _point(i: int, p: Point) -> str:
    return f"point {i} ('{p.name}')"


def _foreign_timing(p: Point, kind: str) -> str | None:
    """How `p` was timed, where a `kind` device does not time so, or None."""
    if p.timing.method != TIMERS[kind]:
        return f"was timed by {p.timing.method}"
    if p.graph_timing is not None and (kind != "cuda" or p.graph_timing.method != GRAPH_TIMER):
        return f"carries a graph replay timed by {p.graph_timing.method}"
    return None


def contradiction(r: Results) -> tuple[str, str] | None:
    """The first field of `r` that contradicts its points, with why and what to do, or None.
    A results file is one device's measurements: its points were timed by that device's timer,
    on a torch build that runs it, against a catalog spec of its kind whose peak they do not
    beat by more than PEAK_SLACK, in a memory that holds their buffers, with the threads the
    CPU peak was derived for; each shape is measured once (a second copy would weigh twice in
    every fit)."""
    env, dev = r.environment, r.environment.device
    relabel = "re-run `roofline measure` on the device, or correct the label"
    shapes: dict[tuple, int] = {}
    names: dict[str, int] = {}
    for i, p in enumerate(r.points):
        shape = (p.kernel, p.dtype, p.model, tuple(sorted(p.shape.items())))
        if shape in shapes or p.name in names:
            what = "shape" if shape in shapes else "name"
            first = shapes.get(shape, names.get(p.name))
            return f"points.{i}", (
                f"{_point(i, p)} has the {what} of point {first}: each shape is measured "
                "once (a copy weighs twice in the fits); remove one (`roofline check` "
                "combines runs: each point is the median run's)"
            )
        shapes[shape], names[p.name] = i, i
    for i, p in enumerate(r.points):
        if (timed := _foreign_timing(p, dev.kind)) is not None:
            return "environment.device.kind", (
                f"'{dev.kind}', but {_point(i, p)} {timed}, which a {dev.kind} device does "
                f"not use (it times by {TIMERS[dev.kind]}); {relabel}"
            )
    if dev.kind == "cuda" and "+cpu" in env.torch_version:
        return "environment.device.kind", (
            f"'cuda', but torch {env.torch_version} is a CPU-only build; {relabel}"
        )
    peaks, peak_field = dict(dev.datasheet_peak_flops_per_s), "datasheet_peak_flops_per_s"
    if dev.catalog_name is not None:
        name = hardware_name(dev.catalog_name)
        if name is None:
            return "environment.device.catalog_name", (
                f"'{dev.catalog_name}' is no catalog spec; give one of `roofline hardware "
                "list`, or remove it (calibrate then uses the measured peaks)"
            )
        hw = load_hardware(name)
        if hw.kind != {"cuda": "gpu", "cpu": "cpu"}[dev.kind]:
            return "environment.device.catalog_name", (
                f"'{dev.catalog_name}' is a {hw.kind} spec, but the points were timed on a "
                f"{dev.kind} ({TIMERS[dev.kind]}); {relabel}"
            )
        peaks = {d: hw.peak_flops_per_s(d) for d in hw.dense_peak_tflops}
        peak_field = "catalog_name"
    for i, p in enumerate(r.points):
        peak = peaks.get(p.dtype)
        if p.native and peak is not None and p.flops_per_s > PEAK_SLACK * peak:
            field = "catalog_name" if peak_field == "catalog_name" else f"{peak_field}.{p.dtype}"
            return f"environment.device.{field}", (
                f"the {p.dtype} peak is {si(peak, 'FLOP/s')}, but {_point(i, p)} reached "
                f"{si(p.flops_per_s, 'FLOP/s')}, over {PEAK_SLACK:g}x it: not this device's "
                "datasheet; correct it, or remove it (calibrate then uses the measured peak)"
            )
    if dev.memory_bytes is not None:
        for i, p in enumerate(r.points):
            if p.kernel != "model" and p.bytes > dev.memory_bytes:  # a step's bytes re-read
                return "environment.device.memory_bytes", (
                    f"{si(dev.memory_bytes, 'B')}, but {_point(i, p)} moves "
                    f"{si(p.bytes, 'B')} of buffers it holds there; correct the memory size"
                )
    if dev.kind == "cpu" and dev.threads_used is not None:
        if dev.threads_used != env.threads:
            return "environment.threads", (
                f"torch ran {env.threads} thread(s), but the CPU peak is for "
                f"environment.device.threads_used = {dev.threads_used}; make them agree"
            )
        if dev.cores is not None and dev.threads_used > dev.cores:
            return "environment.device.threads_used", (
                f"{dev.threads_used} threads on {dev.cores} cores; make them agree"
            )
    return None
