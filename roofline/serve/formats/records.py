"""Per-metric records of NVIDIA genai-perf and its successor AIPerf: each metric one record
`{"unit": "ms", "avg", "p50", "p90", "p99", ...}` (JSON), or one CSV row per metric by display
name, `Time to First Token (ms),avg,min,max,...`, then `Metric,Value` rows for the totals.

- genai-perf `profile_export_genai_perf.json` / `.csv`: no real file was found; the schema is
  the tool's documented one, the run's settings under `input_config` (`concurrency`,
  `request_rate`, `request_count`, `model`).
- AIPerf 0.8 `profile_export_aiperf.json` / `.csv` (ai-dynamo/aiperf@db4f639, checked on real
  files, tests/fixtures/serving_files/aiperf): `aiperf_version` and `schema_version` at the top,
  the settings under `input_config.loadgen` and `input_config.endpoint.model_names`, the count
  in `request_count`. Its CSV holds no settings and rounds every value to 2 decimals.

Definitions: `inter_token_latency` is per request, (E2E − TTFT) / (G − 1), which vLLM calls
TPOT, and is compared as TPOT; AIPerf's `inter_chunk_latency` (every gap between streamed
chunks, pooled) is vLLM's ITL.
"""

from __future__ import annotations

import csv
import io
import re
from typing import Any

from ...errors import InvalidInputError
from .common import (
    UNITS,
    BenchmarkRun,
    Metrics,
    cell,
    count,
    duration_limit,
    number,
    share,
    stat_label,
)

#: metric record -> quantity of the common names
LATENCIES = {
    "time_to_first_token": "ttft",
    "inter_token_latency": "tpot",
    "inter_chunk_latency": "itl",
    "request_latency": "e2el",
}
THROUGHPUTS = {
    "output_token_throughput": "output_throughput",
    "request_throughput": "request_throughput",
}
#: CSV display names (lower case, unit cut off) -> record names
CSV_NAMES = {
    "time to first token": "time_to_first_token",
    "inter token latency": "inter_token_latency",
    "inter chunk latency": "inter_chunk_latency",
    "request latency": "request_latency",
    "output sequence length": "output_sequence_length",
    "input sequence length": "input_sequence_length",
    "output token throughput": "output_token_throughput",
    "request throughput": "request_throughput",
    "request count": "request_count",
    "benchmark duration": "benchmark_duration",
    "theoretical prefix cache hit": "theoretical_prefix_cache_hit",
}
#: `Name (unit)`: the unit is the last parenthesis ("Effective Latency (CO-aware) (ms)")
_DISPLAY = re.compile(r"^\s*(.*?)\s*(?:\(([^()]*)\))?\s*$")
#: requests simulated when neither the file nor the caller gives a count
DEFAULT_REQUESTS = 1000


def is_records(d: dict) -> bool:
    return isinstance(d.get("time_to_first_token"), dict)


def _unit(rec: dict, name: str, src: str) -> float:
    """Seconds per unit of a latency record."""
    unit = str(rec.get("unit", "ms")).strip().lower()
    if unit not in UNITS:
        raise InvalidInputError(f"{src}: '{name}.unit': unknown unit {unit[:20]!r}")
    return UNITS[unit]


def record_metrics(records: dict[str, Any], src: str) -> Metrics:
    out = Metrics(src)
    for name, quantity in LATENCIES.items():
        rec = records.get(name)
        if not isinstance(rec, dict):
            continue
        scale = _unit(rec, name, src)
        for stat, value in rec.items():
            label = stat_label(stat) if stat != "unit" else None
            if label is not None and value not in (None, ""):
                out.read(f"{quantity}_{label}", value, f"{name}.{stat}", scale)
    for name, key in THROUGHPUTS.items():
        rec = records.get(name)
        if isinstance(rec, dict) and rec.get("avg") not in (None, ""):
            out.read(key, rec["avg"], f"{name}.avg")
    return out


def _avg(records: dict, name: str) -> Any:
    rec = records.get(name)
    return rec.get("avg") if isinstance(rec, dict) else None


def _section(config: dict, name: str, default: dict | None = None) -> dict:
    """AIPerf's `input_config.<name>` block; genai-perf keeps the same keys at the top."""
    block = config.get(name)
    if isinstance(block, dict):
        return block
    return config if default is None else default


def _run(
    records: dict, config: dict, fmt: str, src: str, requests: int | None, notes: list[str]
) -> BenchmarkRun:
    length = {}
    for name in ("input_sequence_length", "output_sequence_length"):
        if _avg(records, name) in (None, ""):
            raise InvalidInputError(f"{src}: no '{name}' average; give the full profile export")
        length[name] = number(_avg(records, name), f"{name}.avg", src)
    aiperf = fmt.startswith("aiperf")
    loadgen = _section(config, "loadgen")
    where = "input_config.loadgen" if loadgen is not config else "input_config"
    counted, count_path = loadgen.get("request_count"), f"{where}.request_count"
    if counted is None:
        counted, count_path = config.get("num_prompts"), "input_config.num_prompts"
    if counted is None and _avg(records, "request_count") not in (None, ""):
        counted, count_path = _avg(records, "request_count"), "request_count.avg"
    if requests is None and counted is None:
        requests = DEFAULT_REQUESTS
        notes.append(
            f"no request count in the file: {DEFAULT_REQUESTS:,} requests simulated (`requests`)"
        )
    n = requests if requests is not None else count(counted, count_path, src)
    rate, conc = loadgen.get("request_rate"), loadgen.get("concurrency")
    if rate is None and conc is None:
        conc = 1
        said = "input_config" if config else "the CSV (the JSON export holds the settings)"
        notes.append(f"neither request rate nor concurrency in {said}: concurrency 1")
    errored = _avg(records, "error_request_count")
    if errored not in (None, "") and number(errored, "error_request_count.avg", src) > 0:
        k = count(errored, "error_request_count.avg", src)
        notes.append(
            f"{k} request{'s' if k > 1 else ''} errored in the benchmark; the {n} that "
            "completed are simulated"
        )
    if loadgen.get("benchmark_duration") is not None:
        limit_s = duration_limit(loadgen["benchmark_duration"], f"{where}.benchmark_duration", src)
        notes.append(f"the run ended on its {limit_s:g} s duration, not on a request count")
    data = _section(config, "input", {})
    dataset = data.get("public_dataset") or data.get("detected_loader")
    if isinstance(dataset, str):
        notes.append(f"requests replayed from the dataset '{dataset}'")
    hit = _avg(records, "theoretical_prefix_cache_hit")
    if hit not in (None, ""):
        notes.append(
            "the requests share prefixes (theoretical prefix-cache hit "
            f"{share(hit, 'theoretical_prefix_cache_hit.avg', src, 100):.0f}%), which the "
            "simulation does not: it prefills every prompt whole"
        )
    if aiperf:
        notes.append(
            "AIPerf's inter_token_latency, (E2E − TTFT) / (G − 1) per request, compared as TPOT; "
            "its inter_chunk_latency as ITL"
        )
    endpoint = _section(config, "endpoint")
    model = endpoint.get("model_names") or endpoint.get("model") or config.get("model")
    if isinstance(model, list):
        model = model[0] if model and isinstance(model[0], str) else None
    metrics = record_metrics(records, src)
    duration = records.get("benchmark_duration")
    duration_s = None
    if isinstance(duration, dict) and duration.get("avg") not in (None, ""):
        scale = _unit({"unit": "s", **duration}, "benchmark_duration", src)
        duration_s = number(duration["avg"], "benchmark_duration.avg", src) * scale
    return BenchmarkRun(
        source=src,
        format=fmt,
        model=model if isinstance(model, str) else None,
        requests=n,
        request_rate=(
            number(rate, f"{where}.request_rate", src, True) if rate is not None else float("inf")
        ),
        metrics=metrics,
        mean_input_tokens=length["input_sequence_length"],
        mean_output_tokens=length["output_sequence_length"],
        max_concurrency=None if conc is None else count(conc, f"{where}.concurrency", src),
        duration_s=duration_s,
        notes=(*notes, "every request at the mean input and output lengths"),
        paths={
            **metrics.paths,
            "requests": "requests (the caller's)" if requests is not None else count_path,
            "request_rate": f"{where}.request_rate",
            "max_concurrency": f"{where}.concurrency",
            "mean_input_tokens": "input_sequence_length.avg",
            "mean_output_tokens": "output_sequence_length.avg",
            "duration_s": "benchmark_duration.avg",
        },
    )


def read_records_json(d: dict, src: str, requests: int | None) -> BenchmarkRun:
    config = d.get("input_config")
    version = d.get("aiperf_version")
    fmt = f"aiperf {version}" if isinstance(version, str) else "genai-perf"
    return _run(d, config if isinstance(config, dict) else {}, fmt, src, requests, [])


def read_records_csv(text: str, src: str, requests: int | None) -> BenchmarkRun:
    """Rows `Time To First Token (ms),avg,min,max,p99,...` under a `Metric,...` header, then
    `Output Token Throughput (per sec),<value>` rows under `Metric,Value`."""
    records: dict[str, dict] = {}
    header: list[str] = []
    aiperf = False
    for row in csv.reader(io.StringIO(text)):
        if not row or not any(c.strip() for c in row):
            continue
        if row[0].strip() in ("Metric", "Endpoint"):  # AIPerf ends with a GPU telemetry table
            header = [c.strip().lower() for c in row]
            aiperf = aiperf or "sum" in header
            continue
        m = _DISPLAY.match(row[0])
        name = CSV_NAMES.get((m.group(1) if m else row[0]).strip().lower())
        if name is None or not header or header[0] != "metric":
            continue
        aiperf = aiperf or name == "inter_chunk_latency"
        unit = ((m.group(2) if m else None) or "").strip().lower()
        rec: dict[str, Any] = {"unit": unit if unit in UNITS else "ms"}
        if header[1:2] == ["value"]:
            rec["avg"] = cell(row[1]) if len(row) > 1 else None
        else:
            for col, value in zip(header[1:], row[1:], strict=False):
                if value.strip():
                    rec[col] = cell(value)
        records[name] = rec
    if "time_to_first_token" not in records:
        raise InvalidInputError(
            f"{src}: no 'Time To First Token' row; give the genai-perf or AIPerf profile CSV"
        )
    notes = ["the CSV rounds every value to 2 decimals; the JSON export is exact"] if aiperf else []
    return _run(records, {}, "aiperf (CSV)" if aiperf else "genai-perf", src, requests, notes)
