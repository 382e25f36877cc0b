"""Results of real serving benchmarks, read into one shape (`BenchmarkRun`) so that
`roofline validate --serving` can rerun each one's workload in the simulator and compare
prediction and measurement metric by metric.

Formats, told apart by their content (the schemas as the tools write them; each parser is
tested on a small file written to that schema, tests/test_serving_benchmarks.py):

- `vllm bench serve --save-result` and vLLM's benchmarks/benchmark_serving.py: one JSON object
  with `mean_/median_/std_/p<P>_{ttft,tpot,itl,e2el}_ms`, `request_throughput`,
  `output_throughput`, `completed`, `num_prompts`, `request_rate` (a number or "inf"),
  `burstiness`, `max_concurrency`, `model_id`, and with `--save-detailed` the per-request
  `input_lens` and `output_lens`. TPOT is per request, (E2E − TTFT) / (G − 1), averaged over
  requests; ITL is every gap between streamed chunks.
- NVIDIA genai-perf `profile_export_genai_perf.json` (AIPerf writes the same metric records):
  per metric `{"unit": "ms", "avg", "p50", "p90", "p99", ...}` for `time_to_first_token`,
  `inter_token_latency`, `request_latency`, `output_sequence_length`,
  `input_sequence_length`, and `output_token_throughput` / `request_throughput` (`avg`), with
  the run's settings under `input_config`. Its inter-token latency is per request,
  (E2E − TTFT) / (G − 1): vLLM's TPOT, and compared as such.
- genai-perf `profile_export_genai_perf.csv`: a table `Metric,avg,min,max,p99,...` of the same
  metrics by display name, then `Metric,Value` rows for the throughputs.

What a file cannot say (the hardware, TP, engine and its version; genai-perf's request count
when absent) comes from flags, and `BenchmarkRun.notes` says what was assumed. Metrics are in
seconds (`<quantity>_<stat>`: ttft, tpot, itl, e2el × mean, p50, p90, p95, p99) and per second
(`output_throughput` tokens/s, `request_throughput` requests/s).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InvalidInputError
from ..files import read_text
from .workload import MAX_REQUESTS, NO_PREFIX, Workload

#: Largest benchmark result read (the per-request arrays of 100k requests fit easily).
MAX_RESULT_BYTES = 256 * 2**20
QUANTITIES = ("ttft", "tpot", "itl", "e2el")
RATES = ("output_throughput", "request_throughput")
_UNITS = {"s": 1.0, "sec": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


@dataclass(frozen=True)
class BenchmarkRun:
    """One measured serving run: its workload and its metrics (seconds, or per second)."""

    source: str
    format: str
    model: str | None
    requests: int
    request_rate: float  # requests/s offered; inf: all sent at once
    metrics: dict[str, float]
    mean_input_tokens: float
    mean_output_tokens: float
    burstiness: float = 1.0  # gamma shape of the gaps (1: Poisson), as vllm bench draws them
    max_concurrency: int | None = None  # clients in flight at most (a closed loop)
    input_tokens: np.ndarray | None = None  # per request, when the file has them
    output_tokens: np.ndarray | None = None
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not 1 <= self.requests <= MAX_REQUESTS:
            raise InvalidInputError(
                f"{self.source}: {self.requests:,} requests; a run of 1 to {MAX_REQUESTS:,} "
                "is simulated (give `requests`)"
            )
        if not (self.request_rate > 0):
            raise InvalidInputError(f"{self.source}: request rate must be positive")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise InvalidInputError(f"{self.source}: max concurrency must be at least 1")
        if not (self.mean_input_tokens >= 1 and self.mean_output_tokens >= 1):
            raise InvalidInputError(
                f"{self.source}: mean input and output lengths must be at least 1 token"
            )

    def workload(self, seed: int = 0) -> Workload:
        """The requests the benchmark sent: gamma gaps of shape `burstiness` at the rate (vllm
        bench: scale 1 / (rate · burstiness), first request at 0), all at 0 for an infinite
        rate; the per-request lengths when the file lists them, else every request at the mean
        lengths."""
        n = self.requests
        if math.isinf(self.request_rate):
            arrival = np.zeros(n)
        else:
            rng = np.random.default_rng(seed)
            gaps = rng.gamma(self.burstiness, 1.0 / (self.request_rate * self.burstiness), n)
            arrival = np.concatenate(([0.0], np.cumsum(gaps[:-1])))
        inp, out = self.input_tokens, self.output_tokens
        if inp is None or out is None or inp.size != n or out.size != n:
            inp = np.full(n, max(1, round(self.mean_input_tokens)))
            out = np.full(n, max(1, round(self.mean_output_tokens)))
        return Workload(
            arrival,
            np.asarray(inp, dtype=np.int64),
            np.asarray(out, dtype=np.int64),
            np.full(n, NO_PREFIX),
            np.zeros(n, dtype=np.int64),
        )

    @property
    def lengths_label(self) -> str:
        kind = "per request" if self.input_tokens is not None else "fixed at the means"
        return f"P≈{self.mean_input_tokens:.0f} G≈{self.mean_output_tokens:.0f} ({kind})"

    @property
    def load_label(self) -> str:
        rate = "all at once" if math.isinf(self.request_rate) else f"{self.request_rate:g} req/s"
        cap = f", ≤{self.max_concurrency} in flight" if self.max_concurrency else ""
        return f"{self.requests} requests, {rate}{cap}"


def read_benchmarks(path: str | Path, requests: int | None = None) -> list[BenchmarkRun]:
    """The runs of one result file (one for vLLM and genai-perf), by its content.
    `requests` sets the request count where the file gives none."""
    text = read_text(path, "serving benchmark result", MAX_RESULT_BYTES, InvalidInputError)
    src = str(path)
    stripped = text.lstrip("\ufeff").lstrip()
    if stripped.startswith("{"):
        try:
            doc = json.loads(stripped, parse_constant=_constant)
        except (json.JSONDecodeError, RecursionError, ValueError) as e:
            raise InvalidInputError(
                f"{src}: not valid JSON ({str(e)[:80]}); give the result file"
            ) from None
        if not isinstance(doc, dict):
            raise InvalidInputError(f"{src}: a result file is one JSON object")
        if any(f"{s}_ttft_ms" in doc for s in ("mean", "median")):
            return [_vllm(doc, src)]
        if isinstance(doc.get("time_to_first_token"), dict):
            return [_genai_perf(doc, src, requests)]
        raise InvalidInputError(
            f"{src}: not a result this version reads (the JSON vllm bench serve saves, "
            "genai-perf profile_export_genai_perf.json or .csv)"
        )
    if stripped.startswith("Metric"):
        return [_genai_perf_csv(stripped, src, requests)]
    raise InvalidInputError(
        f"{src}: neither JSON nor a genai-perf CSV; give the benchmark's result file"
    )


def _constant(name: str) -> float:
    """JSON's non-standard NaN/Infinity (Python's json writes them): only Infinity is a rate."""
    if name == "Infinity":
        return math.inf
    raise ValueError(f"{name} is not a measurement")


def _number(v: Any, what: str, src: str, allow_inf: bool = False) -> float:
    if isinstance(v, bool) or v is None:
        raise InvalidInputError(f"{src}: '{what}' must be a number, got {v!r}")
    if isinstance(v, str) and allow_inf and v.strip().lower() in ("inf", "infinity"):
        return math.inf
    try:
        x = float(v)
    except (TypeError, ValueError, OverflowError):
        raise InvalidInputError(f"{src}: '{what}' must be a number, got {str(v)[:40]!r}") from None
    if math.isnan(x) or (math.isinf(x) and not allow_inf) or x < 0:
        raise InvalidInputError(f"{src}: '{what}' must be a finite number >= 0, got {v!r}")
    return x


def _count(v: Any, what: str, src: str) -> int:
    x = _number(v, what, src)
    if x != int(x):
        raise InvalidInputError(f"{src}: '{what}' must be a whole number, got {v!r}")
    return int(x)


def _lengths(v: Any, what: str, src: str) -> np.ndarray | None:
    if v is None:
        return None
    if not isinstance(v, list) or not v or len(v) > MAX_REQUESTS:
        raise InvalidInputError(f"{src}: '{what}' must be a list of token counts")
    out = np.array([_count(x, what, src) for x in v], dtype=np.int64)
    if out.min() < 1:
        raise InvalidInputError(f"{src}: '{what}' has a request of no tokens")
    return out


_VLLM_KEY = re.compile(r"^(mean|median|p(\d+(?:\.\d+)?))_(ttft|tpot|itl|e2el)_ms$")


def _vllm(d: dict, src: str) -> BenchmarkRun:
    metrics: dict[str, float] = {}
    for key, value in d.items():
        m = _VLLM_KEY.match(key)
        if m is None:
            continue
        stat = {"mean": "mean", "median": "p50"}.get(m.group(1)) or f"p{float(m.group(2)):g}"
        metrics[f"{m.group(3)}_{stat}"] = _number(value, key, src) * 1e-3
    for key in RATES:
        if key in d:
            metrics[key] = _number(d[key], key, src)
    completed = _count(d.get("completed", d.get("num_prompts")), "completed", src)
    sent = _count(d.get("num_prompts", completed), "num_prompts", src)
    notes = []
    if completed < sent:
        notes.append(f"{sent - completed} of {sent} requests failed in the benchmark")
    inp = _lengths(d.get("input_lens"), "input_lens", src)
    out = _lengths(d.get("output_lens"), "output_lens", src)
    if inp is not None and out is not None and inp.size == out.size:
        mean_in, mean_out = float(inp.mean()), float(out.mean())
        sent = inp.size
    else:
        inp = out = None
        if not completed:
            raise InvalidInputError(f"{src}: no request completed; nothing to compare")
        mean_in = _number(d.get("total_input_tokens"), "total_input_tokens", src) / completed
        mean_out = _number(d.get("total_output_tokens"), "total_output_tokens", src) / completed
        notes.append(
            "no per-request lengths in the file (saved without vLLM's save-detailed option): every "
            "request at the mean input and output lengths"
        )
    conc = d.get("max_concurrency")
    burstiness = _number(d.get("burstiness", 1.0), "burstiness", src)
    if burstiness <= 0:
        raise InvalidInputError(f"{src}: 'burstiness' must be positive (1: Poisson), got 0")
    return BenchmarkRun(
        source=src,
        format="vllm bench serve",
        model=d.get("model_id") if isinstance(d.get("model_id"), str) else None,
        requests=sent,
        request_rate=_number(d.get("request_rate", "inf"), "request_rate", src, allow_inf=True),
        metrics=metrics,
        mean_input_tokens=mean_in,
        mean_output_tokens=mean_out,
        burstiness=burstiness,
        max_concurrency=None if conc is None else _count(conc, "max_concurrency", src),
        input_tokens=inp,
        output_tokens=out,
        notes=tuple(notes),
    )


#: genai-perf metric records -> (quantity, is a latency); its inter-token latency is per
#: request, (E2E − TTFT) / (G − 1), which vLLM calls TPOT
_GENAI = {
    "time_to_first_token": "ttft",
    "inter_token_latency": "tpot",
    "request_latency": "e2el",
}
_GENAI_CSV = {
    "time to first token": "time_to_first_token",
    "inter token latency": "inter_token_latency",
    "request latency": "request_latency",
    "output sequence length": "output_sequence_length",
    "input sequence length": "input_sequence_length",
    "output token throughput": "output_token_throughput",
    "request throughput": "request_throughput",
}


def _genai_metrics(records: dict[str, dict], src: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, quantity in _GENAI.items():
        rec = records.get(name)
        if not isinstance(rec, dict):
            continue
        unit = str(rec.get("unit", "ms")).strip().lower()
        if unit not in _UNITS:
            raise InvalidInputError(f"{src}: unknown unit '{unit}' of {name}")
        for stat, value in rec.items():
            if stat == "avg" or re.fullmatch(r"p\d+", stat):
                label = "mean" if stat == "avg" else stat
                out[f"{quantity}_{label}"] = _number(value, f"{name}.{stat}", src) * _UNITS[unit]
    for name, key in (("output_token_throughput", RATES[0]), ("request_throughput", RATES[1])):
        rec = records.get(name)
        if isinstance(rec, dict) and "avg" in rec:
            out[key] = _number(rec["avg"], f"{name}.avg", src)
    return out


def _genai_run(records: dict, config: dict, src: str, requests: int | None) -> BenchmarkRun:
    notes = []
    length = {}
    for name in ("input_sequence_length", "output_sequence_length"):
        rec = records.get(name)
        if not isinstance(rec, dict) or "avg" not in rec:
            raise InvalidInputError(f"{src}: no '{name}' average; give the full profile export")
        length[name] = _number(rec["avg"], f"{name}.avg", src)
    count = config.get("request_count") or config.get("num_prompts")
    if requests is None and count is None:
        requests = 1000
        notes.append("no request count in the file: 1,000 requests simulated (`requests`)")
    n = requests if requests is not None else _count(count, "request_count", src)
    rate = config.get("request_rate")
    conc = config.get("concurrency")
    if rate is None and conc is None:
        conc = 1
        notes.append("neither request rate nor concurrency in input_config: concurrency 1")
    model = config.get("model") or config.get("model_names")
    if isinstance(model, list):
        model = model[0] if model and isinstance(model[0], str) else None
    return BenchmarkRun(
        source=src,
        format="genai-perf",
        model=model if isinstance(model, str) else None,
        requests=n,
        request_rate=math.inf if rate is None else _number(rate, "request_rate", src, True),
        metrics=_genai_metrics(records, src),
        mean_input_tokens=length["input_sequence_length"],
        mean_output_tokens=length["output_sequence_length"],
        max_concurrency=None if conc is None else _count(conc, "concurrency", src),
        notes=(*notes, "every request at the mean input and output lengths"),
    )


def _genai_perf(d: dict, src: str, requests: int | None) -> BenchmarkRun:
    config = d.get("input_config")
    return _genai_run(d, config if isinstance(config, dict) else {}, src, requests)


def _genai_perf_csv(text: str, src: str, requests: int | None) -> BenchmarkRun:
    """Rows `Time To First Token (ms),avg,min,max,p99,...` under a `Metric,...` header, then
    `Output Token Throughput (per sec),<value>` rows under `Metric,Value`."""
    records: dict[str, dict] = {}
    header: list[str] = []
    for row in csv.reader(io.StringIO(text)):
        if not row or not any(c.strip() for c in row):
            continue
        if row[0].strip() == "Metric":
            header = [c.strip().lower() for c in row]
            continue
        m = re.fullmatch(r"\s*(.*?)\s*(?:\((.*)\))?\s*", row[0])
        name = _GENAI_CSV.get((m.group(1) if m else row[0]).strip().lower())
        if name is None:
            continue
        unit = (m.group(2) or "").strip().lower() if m else ""
        rec: dict[str, Any] = {"unit": unit if unit in _UNITS else "ms"}
        if header[1:2] == ["value"]:
            rec["avg"] = row[1].replace(",", "") if len(row) > 1 else None
        else:
            for col, value in zip(header[1:], row[1:], strict=False):
                if value.strip():
                    rec[col] = value.replace(",", "").strip()
        records[name] = rec
    if "time_to_first_token" not in records:
        raise InvalidInputError(f"{src}: no 'Time To First Token' row; give the genai-perf CSV")
    return _genai_run(records, {}, src, requests)
