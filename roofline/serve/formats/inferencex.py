"""SemiAnalysis InferenceMAX / InferenceX result rows: one row per run (a JSON object, or a list
of them), the run's stack as keys (`hw`, `framework`, `precision`, `tp`, `ep`, `conc`, `isl`,
`osl`) and its latencies in **seconds**.

- `utils/process_result.py` (SemiAnalysisAI/InferenceX@843c625) writes `agg_<name>.json`: every
  `*_ms` key of the vLLM result renamed without `_ms` and divided by 1000 (`median_ttft`,
  `p99_tpot`, `mean_itl`), `tput_per_gpu` and `output_tput_per_gpu` = the deployment's
  throughput / TP, and `<stat>_intvty` = 1 / TPOT (not compared: TPOT is).
- The dashboard's ingest rows (SemiAnalysisAI/InferenceX-app@806f001
  packages/db/data/supplemental-bmk.json) hold the same under `metrics`, rounded, some
  statistics missing.
- The agentic aggregate (`utils/agentic/aggregation/process_agentic_result.py`): one row per
  AIPerf run, `mean_/p75_/p90_/p95_` statistics (no median), `num_requests_successful`, the
  measured `mean_input_tokens` / `mean_output_tokens_actual`, `output_tput_tps` for the
  deployment. Its `itl` repeats its `tpot` (AIPerf's per-request inter-token latency), so only
  TPOT is compared.

The vLLM clients InferenceX runs define TPOT and ITL as vLLM does (`formats.vllm`).
"""

from __future__ import annotations

import math
import re
from typing import Any

from ...errors import InvalidInputError
from .common import BenchmarkRun, Metrics, count, number, share, stat_label

#: `median_ttft`, `p99_tpot`, `mean_e2el` (seconds); `std_` and `intvty` are not kept
ROW_KEY = re.compile(r"^(mean|median|p\d+(?:\.\d+)?)_(ttft|tpot|itl|e2el)$")
#: prompts InferenceX's fixed-length runs send: 10 per client (benchmark scripts'
#: `--num-prompts $((CONC * 10))`, as the GLM-4.7 Gaudi 3 results show: 160 at conc 16)
PROMPTS_PER_CLIENT = 10
#: GPUs of one parallel dimension a row can name: more than any cluster benchmarked
MAX_GPUS = 10**5
HINT = "give an InferenceX result (agg_*.json) or ingest file"


def is_row(d: Any) -> bool:
    return isinstance(d, dict) and "conc" in d and ("hw" in d or "tp" in d)


def read_rows(doc: Any, src: str, requests: int | None) -> list[BenchmarkRun]:
    rows = doc if isinstance(doc, list) else [doc]
    if not rows:
        raise InvalidInputError(f"{src}: an empty list of result rows; {HINT}")
    many = isinstance(doc, list)
    out = []
    for i, row in enumerate(rows):
        if not is_row(row):
            raise InvalidInputError(f"{src}: row {i} has no 'conc' and 'hw'; {HINT}")
        label = f"{src} row {i}" if many else src
        out.append(_row(row, label, requests))
    return out


def _stack_note(row: dict) -> str:
    said = ", ".join(
        f"{k}={row[k]}"
        for k in ("hw", "framework", "precision", "tp", "ep", "dp_attention", "offloading")
        if row.get(k) not in (None, "")
    )
    return f"the row's stack: {said} (the simulated one comes from the flags)"


def _row(row: dict, src: str, requests: int | None) -> BenchmarkRun:
    agentic = "num_requests_successful" in row or "scenario_type" in row
    nested = isinstance(row.get("metrics"), dict)
    values = row["metrics"] if nested else row
    prefix = "metrics." if nested else ""
    metrics = Metrics(src)
    for key, value in values.items():
        m = ROW_KEY.match(key)
        if m is None or value is None or (label := stat_label(m.group(1))) is None:
            continue
        if agentic and m.group(2) == "itl":
            continue
        metrics.read(f"{m.group(2)}_{label}", value, f"{prefix}{key}")
    if "ttft_mean" not in metrics and "ttft_p50" not in metrics:
        raise InvalidInputError(f"{src}: no 'mean_ttft' or 'median_ttft'; {HINT}")
    conc = count(row["conc"], "conc", src)
    for key in ("tp", "ep"):  # the stack the row ran on, said in a note and used for per-GPU
        if row.get(key) is not None and not 1 <= count(row[key], key, src) <= MAX_GPUS:
            raise InvalidInputError(f"{src}: '{key}': {row[key]} GPUs; 1 to {MAX_GPUS:,}")
    paths = {"max_concurrency": "conc", "requests": "conc", "duration_s": "duration_seconds"}
    notes = [_stack_note(row), "latencies in seconds, as InferenceX writes them"]
    if row.get("disagg") is True or row.get("is_multinode") is True:
        notes.append("the benchmark ran disaggregated or on several nodes")
    if agentic:
        n = count(_need(row, "num_requests_successful", src), "num_requests_successful", src)
        paths |= {
            "requests": "num_requests_successful",
            "mean_input_tokens": "mean_input_tokens",
            "mean_output_tokens": "mean_output_tokens_actual",
        }
        mean_in = number(_need(row, "mean_input_tokens", src), "mean_input_tokens", src)
        mean_out = number(
            _need(row, "mean_output_tokens_actual", src), "mean_output_tokens_actual", src
        )
        if row.get("output_tput_tps") is not None:
            metrics.read("output_throughput", row["output_tput_tps"], "output_tput_tps")
        hit = row.get("server_gpu_cache_hit_rate")
        if hit is not None:
            notes.append(
                f"agentic trace: the server's prefix-cache hit rate was "
                f"{share(hit, 'server_gpu_cache_hit_rate', src):.0%}, the simulation shares no "
                "prefixes; every request at the mean lengths"
            )
        notes.append("the agentic row's itl repeats its tpot: compared as TPOT only")
    else:
        if requests is None:
            n = PROMPTS_PER_CLIENT * conc
            notes.append(
                f"no request count in the row: {n} ({PROMPTS_PER_CLIENT} per client, InferenceX's "
                "rule) simulated (`requests`)"
            )
        else:
            n = requests
            paths["requests"] = "requests (the caller's)"
        paths |= {"mean_input_tokens": "isl", "mean_output_tokens": "osl"}
        if row.get("isl") is None or row.get("osl") is None:
            raise InvalidInputError(f"{src}: no 'isl' and 'osl'; the request lengths are unknown")
        mean_in, mean_out = number(row["isl"], "isl", src), number(row["osl"], "osl", src)
        notes.append(
            "every request at the nominal isl and osl (the row holds no measured lengths; a run "
            "without ignore-eos stops earlier)"
        )
        gpus = _gpus(row, src)
        per_gpu = values.get("output_tput_per_gpu")
        if per_gpu is not None and gpus is not None:
            metrics.read("output_throughput", per_gpu, f"{prefix}output_tput_per_gpu × tp", gpus)
            notes.append(f"output throughput = output_tput_per_gpu × {gpus} GPUs")
    return BenchmarkRun(
        source=src,
        format="inferencex agentic row" if agentic else "inferencex result row",
        model=row.get("model") if isinstance(row.get("model"), str) else None,
        requests=n,
        request_rate=math.inf,
        metrics=metrics,
        mean_input_tokens=mean_in,
        mean_output_tokens=mean_out,
        max_concurrency=conc,
        duration_s=(
            None
            if row.get("duration_seconds") is None
            else number(row["duration_seconds"], "duration_seconds", src)
        ),
        notes=tuple(notes),
        paths={**metrics.paths, **paths},
    )


def _need(row: dict, key: str, src: str) -> Any:
    if row.get(key) is None:
        raise InvalidInputError(f"{src}: no '{key}' (truncated?); {HINT}")
    return row[key]


def _gpus(row: dict, src: str) -> int | None:
    """GPUs the per-GPU throughputs were divided by: TP on one node (process_result.py), the
    prefill and decode GPUs of a multi-node run."""
    if row.get("is_multinode") is True:
        parts = [row.get("num_prefill_gpu"), row.get("num_decode_gpu")]
        if any(p is None for p in parts):
            return None
        return sum(count(p, "num_gpu", src) for p in parts)
    return count(row["tp"], "tp", src) if row.get("tp") is not None else None
