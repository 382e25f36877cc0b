"""Prediction against published end-to-end measurements of real engines, row by row.

A data set is a CSV with the columns of `roofline/data/published.csv` (id, model, hardware,
weights, kv, batch, prompt, gen, tp, metric, value, engine, source, note, confidence). Each row
is predicted with `phases.estimate` on the row's model, device, formats and tensor-parallel
degree, with the engine profile its `engine` column names (first word: "tensorrt-llm 0.9.0"
→ `tensorrt-llm`), and compared with the published value: signed error = predicted / published
− 1 for rates, and the same for times (a positive error is always "too optimistic" for rates
and "too pessimistic" for times, so the sign is reported per metric).

How a row's metric is read (the conventions of the sources, stated in published-dev.md):
- decode_tokens_per_s: tokens per second of one sequence. `rate_includes_prefill` = 1 (the
  gpt-fast and torchao harness time the whole generate() call): G / E2E; otherwise 1 / TPOT.
- tpot_s, ttft_s, e2e_s: the estimate's TPOT, TTFT (all B prompts prefilled together) and E2E.
- prefill_tokens_per_s: B·P / TTFT. throughput_tokens_per_s: B·G / E2E per model copy, divided
  by the tensor-parallel GPUs when `per_gpu` = 1 (TensorRT-LLM 0.7-0.9 report per GPU).
- memory_bytes: weights + KV cache + activations of the estimate (per GPU × GPUs).
- power_w: average board power of one GPU over the run (prefill, then decode), the power
  model's (`roofline.calc.power`); joules_per_output_token: all GPUs' energy over the run / B·G.
- A prompt or generation of 0 tokens (llama-bench tg/pp runs) is costed as 1.
- Formats: `unknown` weights are fp16; weights narrower than 16 bits run against 16-bit
  activations (weight-only kernels), except fp8 on TensorRT-LLM, which runs W8A8; `unknown` KV
  is fp8 there (the FP8 build recipe quantises the GEMM inputs and the KV cache:
  kv_cache_quant_algo FP8 in the v0.9.0 performance docs' build configs) and 16-bit elsewhere;
  a format is stored the way the row's engine stores it (`EngineSpec.formats`: llama.cpp's
  Q4_0 file keeps its output layer in Q6_K, gpt-fast quantises the output layer too).
Rows the tool cannot predict (unknown model, device or format, or a configuration that does not
fit) are kept with the reason, so coverage is part of the report.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from ..calc.cost import Ceiling
from ..calc.intervals import batch_class, gpu_class
from ..calc.memory import batch_fit
from ..calc.phases import Estimate, estimate
from ..calc.placement import Parallel
from ..calc.stack import Stack
from ..errors import InvalidInputError, RooflineError
from ..files import read_text
from ..spec.catalog import load_engine, load_hardware, load_model
from ..spec.engine import EngineSpec
from ..spec.precision import Precision
from ..units import UNKNOWN_RELEASE

METRICS = (
    "decode_tokens_per_s",
    "tpot_s",
    "ttft_s",
    "prefill_tokens_per_s",
    "throughput_tokens_per_s",
    "e2e_s",
    "memory_bytes",
    "power_w",
    "joules_per_output_token",
)
#: Metrics of the power model (`roofline.calc.power`): they check the watts, not a step time, so
#: they stay out of the time intervals' residuals.
ENERGY_METRICS = ("power_w", "joules_per_output_token")
REQUIRED = (
    "id",
    "model",
    "hardware",
    "weights",
    "kv",
    "batch",
    "prompt",
    "gen",
    "tp",
    "metric",
    "value",
    "engine",
)
#: Engines whose fp8 recipe quantises the GEMM inputs too (W8A8), not only the weights.
W8A8_FP8_ENGINES = ("tensorrt-llm",)

#: |signed error| a row may show before the CI gate fails, by the row's confidence: the
#: sources' own uncertainty (rounding to 1 ms, SKU or lengths assumed, inconsistent tables).
#: A row of a known, explained gap carries its own `band` and `band_note` in the data set, so
#: the gap is gated against getting worse and listed in docs/accuracy.md.
BANDS = {"high": 0.30, "medium": 0.40, "low": 0.50}
#: No row is banded wider than this, whatever its confidence or known gap.
MAX_BAND = 0.50
#: How much worse than its first sight an open row may get before the gate fails: a policy of
#: the gate, not a measured figure; 5 points leaves room for a row's own rounding (most rows
#: are rounded to 2-4 figures) and fails a change that moves a known miss further.
OPEN_SLACK = 0.05


@dataclass(frozen=True, kw_only=True)
class Row:
    """One published number and the conditions it was measured under."""

    id: str
    model: str
    hardware: str
    weights: str
    kv: str
    batch: int
    prompt: int
    gen: int
    tp: int
    metric: str
    value: float
    engine: str
    source: str = ""
    confidence: str = "medium"
    rate_includes_prefill: bool = False
    per_gpu: bool = False
    band: float | None = None  # a known gap's own band (see `band_note`)
    band_note: str = ""
    profile: str = ""  # the engine profile to use when it differs from the engine's first word
    burst: bool = False  # `batch` counts requests sent at once; the engine runs what it can
    lengths: str = "fixed"  # the requests' lengths: all at the means, or a bundled profile's
    released: str = ""  # the source's date (YYYY-MM or YYYY-MM-DD)
    first_sight: float | None = None  # signed error when the row was first predicted
    first_sight_at: str = ""  # the commit (and note) of that first prediction
    held_at: float | None = None  # an open row's hold, re-based by a spec correction
    held_why: str = ""  # the commit and the kernel- or datasheet-level evidence that moved it

    @property
    def engine_version(self) -> str | None:
        """The release the engine column names right after the engine ('vllm 0.7.3.dev138'
        → '0.7.3.dev138'); None when it names none there."""
        words = self.engine.split()
        if len(words) > 1 and re.match(r"^v?\d+\.\d+", words[1]):
            return words[1]
        return None

    @property
    def engine_profile(self) -> str:
        if self.profile.strip():
            return self.profile.strip()
        return self.engine.split()[0].lower() if self.engine.strip() else ""


@dataclass(frozen=True)
class Prediction:
    row: Row
    predicted: float | None
    engine: str | None  # the profile used (None: hardware layer alone)
    why: str = ""  # why it could not be predicted

    @property
    def error(self) -> float | None:
        """Signed relative error, predicted / published − 1."""
        return None if self.predicted is None else self.predicted / self.row.value - 1

    @property
    def band(self) -> float:
        """The row's own band when the data set names a known gap, else its confidence's;
        never wider than `MAX_BAND`."""
        if self.row.band is not None:
            return min(self.row.band, MAX_BAND)
        return BANDS.get(self.row.confidence, BANDS["low"])

    @property
    def passed(self) -> bool | None:
        return None if self.error is None else abs(self.error) <= self.band

    @property
    def open(self) -> bool:
        """Outside its band now and at first sight: a gap found when the row came in and not
        yet closed. The gate holds it to no worse than its first sight (`OPEN_SLACK`)."""
        fs = self.row.first_sight
        return self.passed is False and fs is not None and abs(fs) > self.band

    @property
    def hold(self) -> float | None:
        """The |error| an open row is held to: its first sight's, or, where a correction from
        kernel- or datasheet-level evidence moved it (`held_at`, with `held_why`), that."""
        r = self.row
        h = r.held_at if r.held_at is not None else r.first_sight
        return None if h is None else abs(h)

    @property
    def gated_ok(self) -> bool:
        """What the CI gate asks of the row: inside its band, or, while open, no further off
        than its hold (`hold`, plus `OPEN_SLACK`); a row that cannot be predicted fails unless
        it never could."""
        if self.error is None:
            return self.row.first_sight is None and bool(self.row.first_sight_at)
        if self.open:
            assert self.hold is not None
            return abs(self.error) <= self.hold + OPEN_SLACK
        return bool(self.passed)

    def as_dict(self) -> dict:
        r = self.row
        return {
            "id": r.id,
            "model": r.model,
            "hardware": r.hardware,
            "engine": r.engine,
            "engine_profile": self.engine,
            "metric": r.metric,
            "published": r.value,
            "predicted": self.predicted,
            "error": self.error,
            "band": self.band,
            "passed": self.passed,
            "open": self.open,
            "first_sight": r.first_sight,
            "first_sight_at": r.first_sight_at or None,
            "why": self.why or None,
            "confidence": r.confidence,
            "known_gap": r.band_note or None,
        }


def bundled_csv() -> Path:
    """The data set shipped with the package."""
    return Path(str(resources.files("roofline") / "data" / "published.csv"))


def _int(text: str, what: str, row_id: str) -> int:
    try:
        v = float(text)
    except ValueError:
        raise InvalidInputError(f"row {row_id}: {what} '{text}' is not a number") from None
    if not math.isfinite(v) or v < 0 or v != int(v):
        raise InvalidInputError(f"row {row_id}: {what} must be a whole number ≥ 0, got {text}")
    return int(v)


def _signed(text: str, what: str, row_id: str) -> float | None:
    if not text.strip() or text.strip() == "none":
        return None
    try:
        v = float(text)
    except ValueError:
        raise InvalidInputError(f"row {row_id}: {what} '{text}' is not a number") from None
    if not math.isfinite(v) or v <= -1:
        raise InvalidInputError(f"row {row_id}: {what} must be a signed error above -1, got {text}")
    return v


def _date(text: str, row_id: str) -> str:
    if text and not re.fullmatch(r"\d{4}(-\d{2}){0,2}", text):
        raise InvalidInputError(
            f"row {row_id}: released '{text[:40]}' is not a date; write YYYY, YYYY-MM or YYYY-MM-DD"
        )
    return text


#: How a row's requests are sized: `fixed` (every request at the mean lengths) or a length
#: profile bundled with the serving simulator (`serve.workload.PROFILES`).
LENGTHS = ("fixed", "sharegpt")


def _lengths(text: str, row_id: str) -> str:
    if text and text not in LENGTHS:
        raise InvalidInputError(
            f"row {row_id}: lengths '{text[:40]}' is not known; use one of: {', '.join(LENGTHS)}"
        )
    return text or "fixed"


def _band(text: str, row_id: str) -> float | None:
    if not text.strip():
        return None
    try:
        v = float(text)
    except ValueError:
        raise InvalidInputError(f"row {row_id}: band '{text}' is not a number") from None
    if not math.isfinite(v) or v <= 0:
        raise InvalidInputError(f"row {row_id}: band must be a positive fraction, got {text}")
    return v


#: The largest published-measurements CSV read (the bundled one is ~60 kB).
MAX_CSV_BYTES = 64 * 2**20


def _table(path: Path) -> tuple[list[str], list[list[str]]]:
    """Header and rows of a CSV file read through the one checked reader (a regular UTF-8
    file of bounded size; a UTF-8 byte-order mark, as spreadsheets write one, is dropped); an
    unterminated quote is refused with its line."""
    text = read_text(path, "published-measurements CSV", MAX_CSV_BYTES, InvalidInputError)
    text = text.removeprefix("\ufeff")
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        table = [r for r in reader if r]
    except csv.Error as e:
        raise InvalidInputError(
            f"{path}: not a well-formed CSV at line {reader.line_num} ({e}); check its quotes"
        ) from None
    if not table:
        raise InvalidInputError(f"{path}: empty; a published-measurements CSV needs a header row")
    return [c.strip() for c in table[0]], table[1:]


def load_rows(path: str | Path) -> list[Row]:
    """Rows of a published-measurements CSV; refuses missing columns, bad numbers, batch or
    TP below 1, an unknown confidence, duplicate ids and a file with no rows."""
    path = Path(path)
    header, table = _table(path)
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise InvalidInputError(
            f"{path}: missing column(s) {', '.join(missing)}; a published-measurements "
            f"CSV needs {', '.join(REQUIRED)}"
        )
    if not table:
        raise InvalidInputError(f"{path}: a header and no rows; add at least one measurement")
    for i, r in enumerate(table, start=2):
        if len(r) != len(header):
            raise InvalidInputError(
                f"{path}: line {i} has {len(r)} fields, the header {len(header)}; "
                "quote a field that holds a comma"
            )
    raw = [dict(zip(header, r, strict=True)) for r in table]
    rows, seen = [], set()
    for d in raw:
        rid = d["id"].strip()
        if not rid:
            raise InvalidInputError(f"{path}: a row without an id; give every row one")
        if rid in seen:
            raise InvalidInputError(f"row {rid}: the id appears twice; ids must be unique")
        seen.add(rid)
        try:
            value = float(d["value"])
        except ValueError:
            raise InvalidInputError(f"row {rid}: value '{d['value']}' is not a number") from None
        if not math.isfinite(value) or value <= 0:
            raise InvalidInputError(f"row {rid}: value must be a positive number, got {value}")
        batch, tp = _int(d["batch"], "batch", rid), _int(d["tp"], "tp", rid)
        for what, n in (("batch", batch), ("tp", tp)):
            if n < 1:
                raise InvalidInputError(f"row {rid}: {what} must be at least 1, got {n}")
        confidence = (d.get("confidence", "") or "medium").strip()
        if confidence not in BANDS:
            raise InvalidInputError(
                f"row {rid}: unknown confidence '{confidence[:40]}'; use one of: {', '.join(BANDS)}"
            )
        rows.append(
            Row(
                id=rid,
                model=d["model"],
                hardware=d["hardware"],
                weights=d["weights"],
                kv=d["kv"],
                batch=batch,
                prompt=_int(d["prompt"], "prompt", rid),
                gen=_int(d["gen"], "gen", rid),
                tp=tp,
                metric=d["metric"],
                value=value,
                engine=d["engine"],
                source=d.get("source", ""),
                confidence=confidence,
                rate_includes_prefill=d.get("rate_includes_prefill", "").strip() == "1",
                per_gpu=d.get("per_gpu", "").strip() == "1",
                band=_band(d.get("band", ""), rid),
                band_note=d.get("band_note", "") or "",
                profile=d.get("profile", "") or "",
                burst=(d.get("burst", "") or "").strip() == "1",
                lengths=_lengths((d.get("lengths", "") or "").strip(), rid),
                released=_date((d.get("released", "") or "").strip(), rid),
                first_sight=_signed(d.get("first_sight", "") or "", "first_sight", rid),
                first_sight_at=(d.get("first_sight_at", "") or "").strip(),
                held_at=_signed(d.get("held_at", "") or "", "held_at", rid),
                held_why=(d.get("held_why", "") or "").strip(),
            )
        )
        if rows[-1].held_at is not None and not rows[-1].held_why:
            raise InvalidInputError(
                f"row {rid}: held_at without held_why; name the commit and the evidence that "
                "moved the row"
            )
    return rows


def release_of(row: Row, eng: EngineSpec) -> EngineSpec:
    """The profile of the release the row ran: the version its engine column names (when the
    column names this engine: NIM 1.8.0 is not TensorRT-LLM 1.8.0), else the release current
    at the source's date (`released`), else a release nobody stated (`UNKNOWN_RELEASE`: no
    kernel table measured later stands for it)."""
    word = row.engine.split()[0].lower() if row.engine.strip() else ""
    v = row.engine_version if word == eng.name.lower() else None  # not an alias's (nim) own
    if v is not None:
        try:
            return eng.at(v)
        except ValueError:
            pass
    if row.released:
        return eng.at_date(row.released)
    return eng.model_copy(update={"exact_release": UNKNOWN_RELEASE})


def precision_of(row: Row, engine: EngineSpec | None) -> Precision:
    """The row's formats under the conventions of the module docstring."""
    weights = "fp16" if row.weights in ("unknown", "") else row.weights
    w8a8 = engine is not None and engine.name in W8A8_FP8_ENGINES and weights.startswith("fp8")
    kv = row.kv
    if kv in ("unknown", ""):
        kv = "fp8" if w8a8 else "fp16"
    half = kv if kv in ("bf16", "fp16") else "fp16"
    # the engine's storage of the format (`EngineSpec.formats`) is applied by `Stack.resolve`
    return Precision(weights=weights, activations=weights if w8a8 else half, kv=kv)


def _metric(row: Row, est: Estimate, tp: int) -> float:
    m, c = row.metric, est.cases[0]
    if m in ENERGY_METRICS:
        from ..studies.economics import case_power_w, joules_per_token

        power = case_power_w(est)
        if power is None:
            raise InvalidInputError(
                f"row {row.id}: {est.hardware.name}'s spec has no tdp_w, so its power is unknown"
            )
        if m == "power_w":
            return float(power[0])
        return float(joules_per_token(power[0], c.gpus, c.throughput_tokens_per_s))
    if m == "decode_tokens_per_s":
        return row.gen / c.e2e_s if row.rate_includes_prefill else 1 / c.tpot_s
    if m == "tpot_s":
        return c.tpot_s
    if m == "ttft_s":
        return c.ttft_s
    if m == "e2e_s":
        return c.e2e_s
    if m == "prefill_tokens_per_s":
        return c.batch * c.prompt_tokens / c.ttft_s
    if m == "throughput_tokens_per_s":
        return c.throughput_tokens_per_s / (tp if row.per_gpu else 1)
    if m == "memory_bytes":
        return c.memory_bytes
    raise InvalidInputError(f"row {row.id}: unknown metric '{m}'; use one of: {', '.join(METRICS)}")


def predict(
    row: Row,
    ceiling: Ceiling = "achievable",
    engine: str | None = None,
    specs_dirs: Sequence[str | Path] = (),
) -> Prediction:
    """One row's prediction; `engine` overrides the row's own (`none`: hardware layer)."""
    name = engine or row.engine_profile
    try:
        eng = None if name.lower() == "none" else load_engine(name, specs_dirs)
        if eng is not None and engine is None and "@" not in name:
            eng = release_of(row, eng)
        m = load_model(row.model, specs_dirs)
        hw = load_hardware(row.hardware, specs_dirs)
        p = precision_of(row, eng)
        prompt, gen = max(row.prompt, 1), max(row.gen, 1)
        stack = Stack.resolve(m, hw, p, ceiling, eng, Parallel(tp=row.tp))
        if (
            row.burst
            and row.lengths != "fixed"
            and row.metric == "throughput_tokens_per_s"
            and stack.engine is not None
        ):
            value = _served(row, m, stack)
        else:
            batch = row.batch
            if row.burst:  # the engine runs what its scheduler and KV pool take of the burst
                batch = min(batch, max(batch_fit(m, stack, prompt + gen, prompt).runnable, 1))
            value = _metric(row, estimate(m, stack, [batch], prompt, gen), row.tp)
    except RooflineError as err:
        return Prediction(row, None, name, str(err).split(";")[0])
    return Prediction(row, value, stack.engine.flag if stack.engine else None)


#: Metrics a served (simulated) row can report: the run's means and its output throughput.
SERVED_METRICS = ("throughput_tokens_per_s", "tpot_s", "ttft_s", "e2e_s")


def _served(row: Row, m, stack: Stack) -> float:
    """A burst of `row.batch` requests with the spread of the row's length profile, all sent
    at once, served by the simulator under the engine's default policy (its scheduler caps,
    token budget and KV pool): the run's output throughput, or its mean TPOT, TTFT or E2E.

    `predict` serves a burst row's output throughput only: a burst lasts until its longest
    outputs finish on a thinning batch, which the spread of the lengths sets and a batch of
    equal requests misses. Its per-request means (TPOT, TTFT) stay on `estimate` for now: at
    ~1,000 sequences they are set by per-step host work (API server, scheduler, output
    processing) that the step model does not carry, and serving them moves those open rows by
    10-15 points either way (docs/accuracy.md, "Bursts")."""
    from .metrics import Summary
    from .policy import engine_default, policy
    from .simulate import build_deployment, simulate
    from .workload import burst_of_profile

    if row.metric not in SERVED_METRICS:
        raise InvalidInputError(
            f"row {row.id}: a served burst reports {', '.join(SERVED_METRICS)}, not {row.metric}"
        )
    w = burst_of_profile(row.lengths, row.batch, row.prompt, row.gen)
    w.check(m.max_context, m.name)
    p = policy(engine_default(stack.engine), stack.engine).on(stack.memory)
    s = Summary(simulate(w, p, build_deployment(m, stack, p)), math.inf, math.inf)
    if row.metric == "throughput_tokens_per_s":
        return s.throughput_tokens_per_s / (row.tp if row.per_gpu else 1)
    x = {"tpot_s": s.tpot_s, "ttft_s": s.ttft_s, "e2e_s": s.e2e_s}[row.metric]
    return float(np.nanmean(x))


def residuals(preds: Sequence[Prediction], specs_dirs: Sequence[str | Path] = ()) -> list:
    """The predicted rows as `intervals.Residual`s (class: engine profile, GPUs, batch and the
    device's vendor)."""
    from ..calc.intervals import Residual

    out = []
    for p in preds:
        if p.predicted is None or p.predicted <= 0 or p.row.value <= 0:
            continue
        if p.row.metric in ENERGY_METRICS:  # a power row does not bound a step time
            continue
        r = p.row
        out.append(
            Residual(
                id=r.id,
                source=r.source,
                metric=r.metric,
                engine=(p.engine or "none").split("@")[0],
                gpus=r.tp,
                batch=float(r.batch),
                vendor=load_hardware(r.hardware, specs_dirs).vendor,
                predicted=float(p.predicted),
                published=float(r.value),
                weights=r.weights,
            )
        )
    return out


def predict_all(
    rows: Iterable[Row],
    ceiling: Ceiling = "achievable",
    engine: str | None = None,
    specs_dirs: Sequence[str | Path] = (),
) -> list[Prediction]:
    return [predict(r, ceiling, engine, specs_dirs) for r in rows]


@dataclass(frozen=True, kw_only=True)
class Summary:
    """Accuracy of one group of predictions: |error| median and p90 and signed median, now and
    at first sight (each row's error when it entered the set), and rows outside their band."""

    group: str
    rows: int
    predicted: int
    median_abs_error: float | None
    p90_abs_error: float | None
    median_signed_error: float | None
    failed: int
    first_sight_rows: int = 0
    first_sight_median_abs: float | None = None
    first_sight_p90_abs: float | None = None
    first_sight_median_signed: float | None = None
    open: int = 0

    def as_dict(self) -> dict:
        return dict(vars(self))


def _stats(errs: np.ndarray) -> tuple[float | None, float | None, float | None]:
    if not errs.size:
        return None, None, None
    a = np.abs(errs)
    return float(np.median(a)), float(np.quantile(a, 0.9)), float(np.median(errs))


def summarise(preds: Sequence[Prediction], group: str) -> Summary:
    errs = np.array([p.error for p in preds if p.error is not None], dtype=float)
    first = np.array(
        [p.row.first_sight for p in preds if p.row.first_sight is not None and _seen(p.row)],
        dtype=float,
    )
    med, p90, signed = _stats(errs)
    fmed, fp90, fsigned = _stats(first)
    return Summary(
        group=group,
        rows=len(preds),
        predicted=int(errs.size),
        median_abs_error=med,
        p90_abs_error=p90,
        median_signed_error=signed,
        failed=sum(p.passed is False for p in preds),
        first_sight_rows=int(first.size),
        first_sight_median_abs=fmed,
        first_sight_p90_abs=fp90,
        first_sight_median_signed=fsigned,
        open=sum(p.open for p in preds),
    )


def _seen(row: Row) -> bool:
    """A first sight taken before the model saw the row (not an in-sample row's)."""
    return "in-sample" not in row.first_sight_at


def vendor_of(hardware: str, specs_dirs: Sequence[str | Path] = ()) -> str:
    try:
        return load_hardware(hardware, specs_dirs).vendor
    except RooflineError:
        return "not in the catalog"


#: The groupings of the accuracy report, each a function of a prediction.
GROUPINGS = ("set", "metric", "engine", "tp", "batch", "vendor", "source")


def summaries(
    preds: Sequence[Prediction], specs_dirs: Sequence[str | Path] = ()
) -> dict[str, list[Summary]]:
    """The whole set, then per `GROUPINGS`: in-sample rows against rows first seen after the
    model was built, metric, engine column (first word), and the classes of the intervals
    (`intervals.gpu_class`: 1, 2, 4+ GPUs; `intervals.batch_class`: <= 8, 9-128, > 128), the
    device's vendor and the source."""
    vendors = {h: vendor_of(h, specs_dirs) for h in {p.row.hardware for p in preds}}
    of = {
        "set": lambda p: "first seen after the model" if _seen(p.row) else "in-sample",
        "metric": lambda p: p.row.metric,
        "engine": lambda p: p.row.engine.split()[0].lower() if p.row.engine.strip() else "",
        "tp": lambda p: gpu_class(p.row.tp),
        "batch": lambda p: "batch " + batch_class(p.row.batch),
        "vendor": lambda p: vendors[p.row.hardware],
        "source": lambda p: p.row.source.split(" (")[0][:60],
    }
    out: dict[str, list[Summary]] = {"all": [summarise(preds, "all rows")]}
    for key in GROUPINGS:
        groups: dict[str, list[Prediction]] = {}
        for p in preds:
            groups.setdefault(of[key](p), []).append(p)
        out[key] = [summarise(v, k) for k, v in sorted(groups.items())]
    return out
