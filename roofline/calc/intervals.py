"""Prediction intervals from the validation evidence: how far off a prediction has been, where
the tool has been checked against published measurements of real engines.

Residuals. Each predicted row of the published data set (`roofline.serve.published`) gives a log
residual in the direction of time, e = ln(measured time / predicted time): for a time metric
(TTFT, TPOT, E2E) ln(measured / predicted), for a rate (tok/s) ln(predicted / measured), for
memory ln(measured / predicted) bytes. A predicted time t then lies in
[t·exp(q_lo), t·exp(q_hi)] and a rate r in [r·exp(−q_hi), r·exp(−q_lo)], q the quantiles below.
The residuals of the bundled data set are stored in `roofline/data/residuals.csv` (written by
`roofline validate --published --write-residuals`, checked current by the tests), so a
prediction reads them without re-predicting the rows.

Classes. A residual belongs to a class: quantity (decode: TPOT and decode tok/s; prefill: TTFT
and prefill tok/s; e2e: E2E and throughput; memory) × GPUs per replica (1, 2, 4+) × the device's
vendor × engine profile × batch (≤ 8, 9–128, > 128) × weight precision (16-bit, 8-bit, 4-bit).
A prediction takes the interval of its own class when it holds enough rows, else pools up the
hierarchy `LEVELS` (dropping precision, then batch, engine, vendor and GPUs in turn). A pooled
band is never a dense sibling's: it is the parent's, widened by the spread between the parent's
classes one level down (`between_class_log_sd`): in log space the half-width h of the parent
becomes √(h² + (z·τ)²) about the same centre, z the normal quantile of the coverage, τ the
standard deviation of the medians of those classes (with under two such classes, τ = h / z: the
width grows by √2). So a class with no rows gets a band at least as wide as its parent's. The
interval's `basis` names the level used, its row count and the widening.

Method: split-conformal, equal-tailed. For coverage c over the n residuals of a class, sorted,
the interval runs from order statistic ⌊(n+1)(1−c)/2⌋ to ⌈(n+1)(1+c)/2⌉ (1-based); a class
whose n is too small for those ranks to exist (n < 9 at c = 0.8, n < 19 at c = 0.9) pools up.
The band is widened to hold the prediction itself (low ≤ 1 ≤ high), and a predicted time's
low end never goes below the datasheet roofline's time for the same case, nor a rate's high
end above its rate (the speed of light; `phases.Estimate.case_intervals`). Exchangeability is
the method's assumption: a new case must be like the rows of its class.

Energy (the section at the end): power per GPU and J per output token take bands from the
measured-power rows (`roofline/data/energy-residuals.csv`) in the same classes and ranks,
widened by the spread between their sources; the time bands never see those rows.

Honest coverage (`loso_coverage`): for each source in turn, the intervals are built without its
rows and its rows are checked against them. This is still optimistic for the model itself,
which was built while reading these sources; independent checks on unseen sources are the
final word (docs/accuracy.md).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from statistics import NormalDist
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InvalidInputError

if TYPE_CHECKING:
    from ..spec.hardware import HardwareSpec

#: The quantity each published metric measures, and whether it is a rate (inverse time).
QUANTITY = {
    "decode_tokens_per_s": "decode",
    "tpot_s": "decode",
    "ttft_s": "prefill",
    "prefill_tokens_per_s": "prefill",
    "e2e_s": "e2e",
    "throughput_tokens_per_s": "e2e",
    "memory_bytes": "memory",
    "power_w": "power",
    "joules_per_output_token": "energy",
}
#: The quantities of the measured-power rows (`roofline/data/energy-residuals.csv`): they stay
#: out of the time bands' evidence.
ENERGY_QUANTITIES = ("power", "energy")
RATES = ("decode_tokens_per_s", "prefill_tokens_per_s", "throughput_tokens_per_s")
DEFAULT_COVERAGE = 0.8
#: The CI gate: leave-one-source-out coverage of the default interval must stay in this range.
LOSO_GATE = (0.70, 0.90)
COLUMNS = (
    "id",
    "source",
    "metric",
    "engine",
    "gpus",
    "batch",
    "vendor",
    "predicted",
    "published",
    "weights",
)


def source_of(source: str) -> str:
    """'gpustack/gpustack@47277d7 docs/performance-lab/...' → 'gpustack/gpustack'."""
    words = source.split()
    return words[0].split("@")[0] if words else ""


def batch_class(batch: float) -> str:
    return "<=8" if batch <= 8 else "9-128" if batch <= 128 else ">128"


def gpu_class(gpus: int) -> str:
    return "1 GPU" if gpus <= 1 else "2 GPUs" if gpus == 2 else "4+ GPUs"


def precision_class(weights: str) -> str:
    """The bits most weight bytes are stored in: a mixed format (`bf16,experts=mxfp4`) goes
    by its experts, which hold most of an MoE's weights."""
    w = weights.lower().split("experts=")[-1].split(",")[0].strip()
    if w in ("", "unknown", "bf16", "fp16", "fp32", "tf32"):
        return "16-bit"
    if w.startswith(("fp8", "int8", "q8", "w8")):
        return "8-bit"
    return "4-bit"


@dataclass(frozen=True, kw_only=True)
class Residual:
    """One published row against its prediction (module docstring)."""

    id: str
    source: str
    metric: str
    engine: str  # the profile the row was predicted with ("none": the hardware layer)
    gpus: int
    batch: float
    vendor: str
    predicted: float
    published: float
    weights: str = ""

    @property
    def quantity(self) -> str:
        return QUANTITY[self.metric]

    @property
    def log_error(self) -> float:
        """ln(measured time / predicted time): > 0 when the prediction was optimistic."""
        r = math.log(self.published / self.predicted)
        return -r if self.metric in RATES else r

    @property
    def key(self) -> tuple[str, ...]:
        return key_of(self.quantity, self.engine, self.gpus, self.batch, self.vendor, self.weights)

    @property
    def source_name(self) -> str:
        """The repository or site the row comes from, without revision or document
        ('pytorch-labs/gpt-fast'): a team's documents are held out together."""
        return source_of(self.source)


#: Names of the hierarchy's levels, most specific first (prefixes of `Residual.key`).
FIELDS = ("quantity", "GPUs", "vendor", "engine", "batch", "precision")
LEVELS = tuple(FIELDS[:n] for n in range(len(FIELDS), -1, -1))
#: Rows a class needs before the spread of its median counts in the between-class term.
MIN_CLASS_ROWS = 3


@dataclass(frozen=True)
class Band:
    """A multiplicative interval in the direction of time: a time t lies in
    [t·low, t·high], a rate r in [r/high, r/low]."""

    low: float
    high: float
    coverage: float
    basis: str
    rows: int

    def of_time(self, t: float) -> tuple[float, float]:
        return t * self.low, t * self.high

    def of_rate(self, r: float) -> tuple[float, float]:
        return r / self.high, r / self.low

    def as_dict(self, value: float, rate: bool = False) -> dict:
        lo, hi = self.of_rate(value) if rate else self.of_time(value)
        return {"low": lo, "high": hi, "coverage": self.coverage, "basis": self.basis}


def _ranks(n: int, coverage: float) -> tuple[int, int] | None:
    """1-based order statistics of the split-conformal interval, None if n is too small."""
    # rounded first: (9 + 1)·(1 − 0.8)/2 is 0.99999… in floating point, not 1
    lo = math.floor(round((n + 1) * (1 - coverage) / 2, 9))
    hi = math.ceil(round((n + 1) * (1 + coverage) / 2, 9))
    return (lo, hi) if lo >= 1 and hi <= n else None


def check_coverage(coverage: float) -> float:
    if not 0 < coverage < 1:
        raise InvalidInputError(
            f"`interval` coverage must be between 0 and 1 (0.8 for 80%), got {coverage}"
        )
    return coverage


class Evidence:
    """Residuals grouped by class, turning into bands on demand."""

    def __init__(self, residuals: Sequence[Residual]) -> None:
        self.residuals = tuple(residuals)
        self._by: dict[tuple[str, ...], np.ndarray] = {}
        groups: dict[tuple[str, ...], list[float]] = {}
        for r in self.residuals:
            for depth in {len(level) for level in LEVELS}:
                groups.setdefault(r.key[:depth], []).append(r.log_error)
        self._by = {k: np.sort(np.array(v)) for k, v in groups.items()}

    def band(self, key: tuple[str, ...], coverage: float = DEFAULT_COVERAGE) -> Band:
        """The band of the most specific level of `key` with enough rows; a pooled one widened
        by the spread between that level's classes (module docstring); with no level able to
        carry `coverage`, the widest band of the evidence."""
        check_coverage(coverage)
        for level in LEVELS:
            depth = len(level)
            e = self._by.get(key[:depth])
            ranks = _ranks(0 if e is None else e.size, coverage)
            if e is None or ranks is None:
                continue
            lo, hi = (float(e[r - 1]) for r in ranks)
            tau = 0.0
            if depth < len(FIELDS):  # pooled: widen by the spread between its classes
                z = NormalDist().inv_cdf((1 + coverage) / 2)
                tau = self.between_class_log_sd(key[:depth], (hi - lo) / 2 / z)
                mid, h = (lo + hi) / 2, math.hypot((hi - lo) / 2, z * tau)
                lo, hi = mid - h, mid + h
            lo, hi, more = self.widened(lo, hi, coverage)
            return Band(
                min(math.exp(lo), 1.0),  # the band holds the prediction itself
                max(math.exp(hi), 1.0),
                coverage,
                _basis(key, level, int(e.size), self._by.get(key[:4], np.zeros(0)).size, tau)
                + more,
                int(e.size),
            )
        return self.widest(coverage, f"no class of {key[0]} rows holds enough rows")

    def widened(self, lo: float, hi: float, coverage: float) -> tuple[float, float, str]:
        """A further widening of a band's log ends, and its words; none for the time rows
        (`EnergyEvidence` widens by the spread between sources)."""
        return lo, hi, ""

    def between_class_log_sd(self, parent: tuple[str, ...], fallback: float) -> float:
        """τ: the standard deviation of the median log errors of `parent`'s classes one level
        down that hold `MIN_CLASS_ROWS` or more; `fallback` with fewer than two of them."""
        depth = len(parent) + 1
        medians = [
            float(np.median(v))
            for k, v in self._by.items()
            if len(k) == depth and k[:-1] == parent and v.size >= MIN_CLASS_ROWS
        ]
        return float(np.std(medians, ddof=1)) if len(medians) >= 2 else fallback

    def widest(self, coverage: float, why: str) -> Band:
        """The extremes of every residual: the band of a case with no evidence near it."""
        e = self._by.get((), np.zeros(0))
        if not e.size:
            return Band(0.0, math.inf, coverage, f"{why}; no evidence at all", 0)
        return Band(
            math.exp(min(float(e[0]), 0.0)),
            math.exp(max(float(e[-1]), 0.0)),
            coverage,
            f"{why}: the widest error of all {e.size} published rows",
            int(e.size),
        )


def _basis(
    key: tuple[str, ...], level: tuple[str, ...], n: int, engine_rows: int, tau: float
) -> str:
    """What the band was built from: 'split-conformal over 12 decode rows of 1 GPU, nvidia,
    gpt-fast, batch <=8, 16-bit'; when the engine's own rows are too few, how many it has; a
    pooled band's widening."""
    named = dict(zip(FIELDS, key, strict=True))
    where = (
        ", ".join(f"batch {named[f]}" if f == "batch" else named[f] for f in level[1:])
        or "every device and engine"
    )
    text = f"split-conformal over {n} {named['quantity'] if level else 'published'} rows of {where}"
    if len(level) < 4:
        text += f" ({named['engine']} there: {engine_rows} rows, too few for this coverage)"
    if len(level) < len(FIELDS):
        text += f"; pooled, widened by the between-class spread τ = {tau:.2f} (log)"
    return text


# ---- the bundled residuals ------------------------------------------------------------------
def bundled_path() -> Path:
    return Path(str(resources.files("roofline") / "data" / "residuals.csv"))


def write_residuals(residuals: Iterable[Residual], path: str | Path) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for r in residuals:
            w.writerow(
                [
                    r.id,
                    r.source,
                    r.metric,
                    r.engine,
                    r.gpus,
                    f"{r.batch:g}",
                    r.vendor,
                    repr(r.predicted),
                    repr(r.published),
                    r.weights,
                ]
            )


def read_residuals(path: str | Path) -> list[Residual]:
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return [
        Residual(
            id=r["id"],
            source=r["source"],
            metric=r["metric"],
            engine=r["engine"],
            gpus=int(r["gpus"]),
            batch=float(r["batch"]),
            vendor=r["vendor"],
            predicted=float(r["predicted"]),
            published=float(r["published"]),
            weights=r.get("weights", ""),
        )
        for r in rows
    ]


@lru_cache(maxsize=1)
def bundled() -> Evidence:
    """The evidence of the bundled data set's residuals."""
    return Evidence(read_residuals(bundled_path()))


# ---- honest coverage ------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Coverage:
    """Leave-one-source-out coverage: share of rows inside the band built without their
    source, overall, per quantity and per source."""

    coverage: float
    overall: float
    rows: int
    by_quantity: dict[str, tuple[int, int]]  # covered, rows
    by_source: dict[str, tuple[int, int]]
    by_gpus: dict[str, tuple[int, int]] = field(default_factory=dict)
    by_class: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def within_gate(self) -> bool:
        return LOSO_GATE[0] <= self.overall <= LOSO_GATE[1]

    def as_dict(self) -> dict:
        return {
            "coverage": self.coverage,
            "loso_coverage": self.overall,
            "rows": self.rows,
            "gate": list(LOSO_GATE),
            "within_gate": self.within_gate,
            "by_quantity": {k: {"covered": c, "rows": n} for k, (c, n) in self.by_quantity.items()},
            "by_source": {k: {"covered": c, "rows": n} for k, (c, n) in self.by_source.items()},
            "by_gpus": {k: {"covered": c, "rows": n} for k, (c, n) in self.by_gpus.items()},
            "by_class": {k: {"covered": c, "rows": n} for k, (c, n) in self.by_class.items()},
        }


#: The classes whose leave-one-source-out coverage is reported on its own.
CHECKED_CLASSES = {
    "1 GPU": lambda r: r.gpus <= 1,
    "several GPUs": lambda r: r.gpus > 1,
    "AMD": lambda r: r.vendor == "amd",
    "vLLM or SGLang": lambda r: r.engine in ("vllm", "sglang"),
    "batch > 128": lambda r: r.batch > 128,
}


def tally_coverage(
    coverage: float,
    checked: Iterable[tuple[str, Residual, Band]],
    classes: dict[str, Callable[[Residual], bool]] | None = None,
) -> Coverage:
    """The coverage of (source, row, the band it was given) triples: how many rows lie inside
    their band, overall and by quantity, source, GPU class and each of `classes`."""
    by_q: dict[str, list[int]] = {}
    by_s: dict[str, list[int]] = {}
    by_g: dict[str, list[int]] = {}
    by_c: dict[str, list[int]] = {}
    classes = classes or {}
    for source, r, b in checked:
        inside = int(math.log(b.low) <= r.log_error <= math.log(b.high)) if b.low > 0 else 1
        by_q.setdefault(r.quantity, []).append(inside)
        by_s.setdefault(source, []).append(inside)
        by_g.setdefault(gpu_class(r.gpus), []).append(inside)
        for name, member in classes.items():
            if member(r):
                by_c.setdefault(name, []).append(inside)
    flat = [x for v in by_s.values() for x in v]
    return Coverage(
        coverage=coverage,
        overall=float(np.mean(flat)) if flat else math.nan,
        rows=len(flat),
        by_quantity={k: (sum(v), len(v)) for k, v in sorted(by_q.items())},
        by_source={k: (sum(v), len(v)) for k, v in sorted(by_s.items())},
        by_gpus={k: (sum(v), len(v)) for k, v in sorted(by_g.items())},
        by_class={k: (sum(by_c[k]), len(by_c[k])) for k in classes if k in by_c},
    )


def loso_coverage(residuals: Sequence[Residual], coverage: float = DEFAULT_COVERAGE) -> Coverage:
    """Coverage of the `coverage` band, each source's rows against the others' evidence."""
    check_coverage(coverage)

    def checked() -> Iterator[tuple[str, Residual, Band]]:
        for source in sorted({r.source_name for r in residuals}):
            evidence = Evidence([r for r in residuals if r.source_name != source])
            for r in (r for r in residuals if r.source_name == source):
                yield source, r, evidence.band(r.key, coverage)

    return tally_coverage(coverage, checked(), CHECKED_CLASSES)


# ---- a prediction's intervals ---------------------------------------------------------------
#: The figures of an estimate case: the quantity whose residuals bound each, and whether it is
#: a rate. Cost per token scales with the time a token takes (e2e). Power per GPU and energy
#: per token have bands of their own, from the measured-power rows (`power_band`,
#: `energy_band`; "Energy" below).
FIGURES: dict[str, tuple[str, bool]] = {
    "ttft_s": ("prefill", False),
    "tpot_s": ("decode", False),
    "e2e_s": ("e2e", False),
    "decode_tokens_per_s": ("decode", True),
    "throughput_tokens_per_s": ("e2e", True),
    "memory_bytes_per_gpu": ("memory", False),
    "cost_per_million_output_tokens_usd": ("e2e", False),
    "power_w_per_gpu": ("power", False),
    "joules_per_output_token": ("energy", False),
}


def key_of(
    quantity: str, engine: str, gpus: int, batch: float, vendor: str, weights: str = ""
) -> tuple[str, ...]:
    """The class of a case, in the order of `FIELDS`."""
    return (
        quantity,
        gpu_class(gpus),
        vendor,
        engine,
        batch_class(batch),
        precision_class(weights),
    )


def machine_band(residuals: Sequence[float], coverage: float) -> Band | None:
    """The band of a calibrated spec's own held-out `roofline check` points
    (`HardwareSpec.check_residuals`), None when they are too few for `coverage`."""
    e = np.sort(np.asarray(residuals, dtype=float))
    ranks = _ranks(e.size, coverage)
    if ranks is None:
        return None
    lo, hi = ranks
    return Band(
        min(math.exp(e[lo - 1]), 1.0),
        max(math.exp(e[hi - 1]), 1.0),
        coverage,
        f"split-conformal over the {e.size} held-out points of this machine's `roofline "
        "check` (the calibrated spec's own evidence, in place of the published rows)",
        int(e.size),
    )


def band_for(
    quantity: str,
    engine: str,
    gpus: int,
    batch: float,
    hw: HardwareSpec,
    coverage: float = DEFAULT_COVERAGE,
    evidence: Evidence | None = None,
    weights: str = "",
) -> Band:
    """The band of a `quantity` predicted for `engine` on `gpus` GPUs per replica at batch
    `batch` on device `hw` with weights stored as `weights`: the device's own check residuals
    when its spec carries enough of them, else the published rows' of the case's class."""
    own = machine_band(hw.check_residuals, coverage) if hw.check_residuals else None
    if own is not None:
        return own
    ev = evidence or bundled()
    return ev.band(key_of(quantity, engine, gpus, batch, hw.vendor, weights), coverage)


def intervals_of(
    values: dict[str, float],
    engine: str,
    gpus: int,
    batch: float,
    hw: HardwareSpec,
    coverage: float = DEFAULT_COVERAGE,
    evidence: Evidence | None = None,
    weights: str = "",
) -> dict[str, dict]:
    """The interval of every figure of `values` that `FIGURES` names, for a case run by
    `engine` on `gpus` GPUs per replica at batch `batch` on device `hw` (`band_for`)."""
    out = {}
    for name, value in values.items():
        if name not in FIGURES or not math.isfinite(value):
            continue
        quantity, rate = FIGURES[name]
        if quantity in ENERGY_QUANTITIES:
            out[name] = _energy_interval(
                quantity, value, engine, gpus, batch, hw, coverage, evidence, weights
            )
            continue
        band = band_for(quantity, engine, gpus, batch, hw, coverage, evidence, weights)
        out[name] = band.as_dict(value, rate)
    return out


def median_half_width(evidence: Evidence, coverage: float = DEFAULT_COVERAGE) -> dict[str, float]:
    """Median half-width (high − low)/2 of the band of each published row's own class, as a
    share of the central value, per GPU class: how wide the intervals a user sees are."""
    widths: dict[str, list[float]] = {}
    for r in evidence.residuals:
        b = evidence.band(r.key, coverage)
        widths.setdefault(gpu_class(r.gpus), []).append((b.high - b.low) / 2)
    return {k: float(np.median(v)) for k, v in sorted(widths.items())}


# ---- energy ---------------------------------------------------------------------------------
# Power per GPU and energy per output token (`roofline.calc.power`) are checked against the
# measured-power rows (`roofline/data/published-energy.csv`, `validate --published`); their
# residuals, e = ln(measured / predicted), are stored in `roofline/data/energy-residuals.csv`
# (written by `python benchmarks/derive/energy_rows.py --write-residuals`).
#
# Power: the band of the case's class over the power rows, in the classes, pooling and
# split-conformal ranks of the time bands (`Evidence.band`), then widened by the spread
# between sources: in log space h → √(h² + (z·τ_s)²) about the same centre, τ_s the standard
# deviation of the median log errors of the sources holding `MIN_CLASS_ROWS` or more power
# rows. Each source's rows share one setup (its engine build, its host, its meter), so their
# errors move together, and a new deployment is a new source: with five sources whose medians
# lie from −0.68 to +0.17 (log), a band from the pooled rows alone would be as sure as the
# number of rows, not of sources. A measured average power never exceeds the device's power
# cap (its board limit enforces it): the high end stops there.
#
# Energy per token: J = P · n / (tok/s), so ln(J_measured / J_predicted) is the power's log
# error plus the time per token's. The band adds the two centres, the power band's and the
# case's e2e time band's (`band_for`), and its half-width is √(h_P² + h_t²) (the two errors
# taken as independent). The rows that measure J per token are not in it: they check it.
ENERGY_DATA = "data/energy-residuals.csv"


def energy_path() -> Path:
    return Path(str(resources.files("roofline") / ENERGY_DATA))


def energy_source(r: Residual) -> str:
    """A measured-power row's source as one team: a GitHub address by its repository
    ('https://github.com/SemiAnalysisAI/InferenceX/issues/828' → 'SemiAnalysisAI/InferenceX'),
    so an issue and a pull request of one benchmark are held out together."""
    name = r.source_name
    if name.startswith("https://github.com/"):
        return "/".join(name.removeprefix("https://github.com/").split("/")[:2])
    return name


def source_spread(residuals: Sequence[Residual], quantity: str) -> float | None:
    """τ_s: the standard deviation of the median log errors of the sources holding
    `MIN_CLASS_ROWS` or more rows of `quantity`; None with fewer than two such sources."""
    by: dict[str, list[float]] = {}
    for r in residuals:
        if r.quantity == quantity:
            by.setdefault(energy_source(r), []).append(r.log_error)
    medians = [float(np.median(v)) for v in by.values() if len(v) >= MIN_CLASS_ROWS]
    return float(np.std(medians, ddof=1)) if len(medians) >= 2 else None


class EnergyEvidence(Evidence):
    """The power rows' residuals by class, their bands widened by the spread between sources
    (the energy comment above); the energy-per-token rows are left out, to check."""

    def __init__(self, residuals: Sequence[Residual]) -> None:
        super().__init__([r for r in residuals if r.quantity == "power"])
        self.tau_source = source_spread(self.residuals, "power") or 0.0

    def widened(self, lo: float, hi: float, coverage: float) -> tuple[float, float, str]:
        z = NormalDist().inv_cdf((1 + coverage) / 2)
        mid, h = (lo + hi) / 2, math.hypot((hi - lo) / 2, z * self.tau_source)
        sources = len({energy_source(r) for r in self.residuals})
        return (
            mid - h,
            mid + h,
            f"; widened by the spread between the {sources} sources' medians "
            f"τ_s = {self.tau_source:.2f} (log)",
        )


def energy_band_of(power: Band, time: Band) -> Band:
    """The band of J per output token from the power band and the e2e time band: centres
    added, half-widths in quadrature, in log space (the energy comment above)."""
    lp, hp, lt, ht = (math.log(x) for x in (power.low, power.high, time.low, time.high))
    mid, h = (lp + hp) / 2 + (lt + ht) / 2, math.hypot((hp - lp) / 2, (ht - lt) / 2)
    return Band(
        min(math.exp(mid - h), 1.0),
        max(math.exp(mid + h), 1.0),
        power.coverage,
        f"power: {power.basis}; times the time per token's band ({time.basis}), "
        "log centres added, half-widths in quadrature",
        power.rows,
    )


@lru_cache(maxsize=1)
def energy_bundled() -> EnergyEvidence:
    """The evidence of the bundled measured-power rows' residuals."""
    return EnergyEvidence(read_residuals(energy_path()))


def _energy_interval(
    quantity: str,
    value: float,
    engine: str,
    gpus: int,
    batch: float,
    hw: HardwareSpec,
    coverage: float,
    evidence: Evidence | None,
    weights: str,
) -> dict:
    """The interval of a case's power per GPU (`quantity` "power") or J per output token
    ("energy"), `value` the prediction (the energy comment above)."""
    from .power import power_terms

    power = energy_bundled().band(
        key_of("power", engine, gpus, batch, hw.vendor, weights), coverage
    )
    if quantity == "power":
        d = power.as_dict(value)
        d["high"] = min(d["high"], max(power_terms(hw).cap_w, value))  # never above the cap
        return d
    time = band_for("e2e", engine, gpus, batch, hw, coverage, evidence, weights)
    return energy_band_of(power, time).as_dict(value)


def energy_row_band(
    r: Residual, evidence: EnergyEvidence, time: Evidence, coverage: float = DEFAULT_COVERAGE
) -> Band:
    """The band a measured-power row gets: a power row its class's power band, an energy row
    that band with the e2e band of its class in `time` (`energy_band_of`)."""
    power = evidence.band(("power", *r.key[1:]), coverage)
    if r.quantity == "power":
        return power
    return energy_band_of(power, time.band(("e2e", *r.key[1:]), coverage))


def energy_loso_coverage(
    residuals: Sequence[Residual], time: Evidence, coverage: float = DEFAULT_COVERAGE
) -> Coverage:
    """Coverage of the `coverage` power and energy bands, each source's rows against the
    other sources' power rows (`time` holds no measured-power source, so it stays whole)."""
    check_coverage(coverage)

    def checked() -> Iterator[tuple[str, Residual, Band]]:
        for source in sorted({energy_source(r) for r in residuals}):
            evidence = EnergyEvidence([r for r in residuals if energy_source(r) != source])
            for r in (r for r in residuals if energy_source(r) == source):
                yield source, r, energy_row_band(r, evidence, time, coverage)

    return tally_coverage(coverage, checked())


def energy_half_width(
    residuals: Sequence[Residual], time: Evidence, coverage: float = DEFAULT_COVERAGE
) -> dict[str, float]:
    """Median half-width (high − low)/2 of the band of each measured-power row's own class
    (all rows in the evidence), as a share of the central value, per quantity."""
    evidence = EnergyEvidence(residuals)
    widths: dict[str, list[float]] = {}
    for r in residuals:
        b = energy_row_band(r, evidence, time, coverage)
        widths.setdefault(r.quantity, []).append((b.high - b.low) / 2)
    return {k: float(np.median(v)) for k, v in sorted(widths.items())}
