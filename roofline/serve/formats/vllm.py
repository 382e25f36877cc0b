"""Flat result objects of vLLM's benchmark_serving.py and the clients copied from it: one JSON
object of `<stat>_<quantity>_ms` keys beside the run's settings and totals.

- vLLM `benchmarks/benchmark_serving.py` / `vllm bench serve --save-result` (and InferenceX's
  copy, utils/bench_serving/benchmark_serving.py): `mean_/median_/std_/p<P>_{ttft,tpot,itl,
  e2el}_ms`, `request_rate` a number or the string "inf", `burstiness`, `max_concurrency`,
  `completed`, `num_prompts`, `model_id`; v0.8.3 and `--save-detailed` add the per-request
  `input_lens`, `output_lens`, `ttfts` (s), `itls` (s, a list per request) and `errors`. The
  goodput key is written "request_goodput:" (with the colon); it is not compared.
- SGLang `python -m sglang.bench_serving` (sgl-project/sglang@0033168): one such object per line
  (JSON Lines, one line per run), `e2e_latency` for vLLM's `e2el`, Infinity for an infinite
  rate, no `num_prompts` and no model id; `concurrency` is the measured mean in flight (not a
  setting) and `accept_length` the speculative accept length.
- InferenceX's experimental `benchmark_serving_random.py` (SemiAnalysisAI/InferenceX@5969d0a):
  the same header keys, latencies `median_ttft`, `p99_tpot`, ... in seconds (no `_ms`).

All three define TPOT per request as (E2E − TTFT) / (G − 1) and ITL as every gap between
streamed chunks, pooled over requests: the common names as they are.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from ...errors import InvalidInputError
from .common import (
    RATES,
    BenchmarkRun,
    Metrics,
    count,
    lengths,
    number,
    seconds_array,
    stat_label,
)

#: `median_ttft_ms`, `p99.9_itl_ms`, `mean_e2e_latency_ms` (SGLang), `median_ttft` (seconds)
FLAT_KEY = re.compile(r"^(mean|median|p\d+(?:\.\d+)?)_(ttft|tpot|itl|e2el|e2e_latency)(_ms)?$")


def is_flat(d: dict) -> bool:
    """A vLLM-style result: at least one TTFT statistic at the top level, no per-GPU rows."""
    return any((m := FLAT_KEY.match(k)) and m.group(2) == "ttft" for k in d) and not (
        "hw" in d and "conc" in d
    )


def flavour(d: dict) -> str:
    if any(k in d for k in ("mean_e2e_latency_ms", "total_output_tokens_retokenized")):
        return "sglang bench_serving"
    if any((m := FLAT_KEY.match(k)) and m.group(3) is None for k in d):
        return "inferencex experimental (vLLM-derived, seconds)"
    return "vllm bench serve"


def flat_metrics(d: dict, src: str) -> Metrics:
    """The latency statistics (ms keys to seconds, keys without `_ms` taken as seconds) and
    the two throughputs."""
    out = Metrics(src)
    for key, value in d.items():
        m = FLAT_KEY.match(key)
        if m is None or (label := stat_label(m.group(1))) is None:
            continue
        quantity = "e2el" if m.group(2) == "e2e_latency" else m.group(2)
        out.read(f"{quantity}_{label}", value, key, 1e-3 if m.group(3) else 1.0)
    for key in RATES:
        if d.get(key) is not None:
            out.read(key, d[key], key)
    return out


def read_flat(d: dict, src: str) -> BenchmarkRun:
    fmt = flavour(d)
    notes: list[str] = []
    if fmt.startswith("inferencex"):
        notes.append(
            "latency keys without '_ms' read as seconds (InferenceX's experimental client)"
        )
    said = "completed" if "completed" in d else "num_prompts"
    completed = count(d.get(said), said, src)
    if "num_prompts" in d:
        sent = count(d["num_prompts"], "num_prompts", src)
    else:
        sent = completed
        notes.append(f"the file does not say how many requests were sent: {completed} completed")
    if completed > sent:
        raise InvalidInputError(
            f"{src}: 'completed': {completed} requests completed of the {sent} sent ('num_prompts')"
        )
    if completed < sent:
        notes.append(f"{sent - completed} of {sent} requests failed in the benchmark")
    rate_value = d.get("request_rate", "inf")
    if isinstance(rate_value, str) and rate_value.strip().lower() == "trace":
        raise InvalidInputError(
            f"{src}: requests were sent at a trace's timestamps, which the result does not "
            "hold; simulate the trace itself"
        )
    burstiness = number(d.get("burstiness", 1.0), "burstiness", src)
    if not completed:
        raise InvalidInputError(f"{src}: '{said}': no request completed; nothing to compare")
    replay = _per_request(d, src, notes)
    paths = {"requests": "num_prompts" if "num_prompts" in d else said}
    if replay is None:
        mean_in = number(d.get("total_input_tokens"), "total_input_tokens", src) / completed
        mean_out = number(d.get("total_output_tokens"), "total_output_tokens", src) / completed
        paths |= {
            "mean_input_tokens": "total_input_tokens",
            "mean_output_tokens": "total_output_tokens",
        }
        inp = out = ttft = None
        itl: tuple[np.ndarray, ...] | None = None
        notes.append(
            "no per-request lengths in the file (vLLM writes them with save-detailed, SGLang with "
            "output-details): every request at the mean input and output lengths"
        )
    else:
        inp, out, ttft, itl = replay
        mean_in, mean_out, sent = float(inp.mean()), float(out.mean()), inp.size
        if "completed" in d and completed != sent:
            notes.append(
                f"'completed' says {completed} requests, the per-request lists ('input_lens', "
                f"'errors') {sent} that succeeded: the lists are replayed"
            )
        paths |= {
            "requests": "input_lens",
            "input_tokens": "input_lens",
            "output_tokens": "output_lens",
            "mean_input_tokens": "input_lens",
            "mean_output_tokens": "output_lens",
            "ttft_s": "ttfts",
            "itl_s": "itls",
        }
    if d.get("accept_length") is not None:
        accept = number(d["accept_length"], "accept_length", src)
        notes.append(
            f"speculative decoding in the benchmark (accept length {accept:.2f}): simulated "
            "without speculation"
        )
    conc = d.get("max_concurrency")
    model = d.get("model_id", d.get("model"))
    metrics = flat_metrics(d, src)
    if ttft is not None and "ttft_mean" in metrics and ttft.size:
        summary, per_request = metrics["ttft_mean"], float(ttft.mean())
        if not math.isclose(summary, per_request, rel_tol=1e-6):
            notes.append(
                f"the per-request TTFTs average {per_request * 1e3:.4g} ms, the summary says "
                f"{summary * 1e3:.4g} ms"
            )
    return BenchmarkRun(
        source=src,
        format=fmt,
        model=model if isinstance(model, str) else None,
        requests=sent,
        request_rate=number(rate_value, "request_rate", src, allow_inf=True),
        metrics=metrics,
        mean_input_tokens=mean_in,
        mean_output_tokens=mean_out,
        burstiness=burstiness,
        max_concurrency=None if conc is None else count(conc, "max_concurrency", src),
        input_tokens=inp,
        output_tokens=out,
        ttft_s=ttft,
        itl_s=itl,
        duration_s=None if d.get("duration") is None else number(d["duration"], "duration", src),
        notes=tuple(notes),
        paths={**metrics.paths, **paths},
    )


def _per_request(
    d: dict, src: str, notes: list[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, tuple[np.ndarray, ...] | None] | None:
    """The successful requests' input and output lengths, TTFTs and chunk gaps, when the file
    lists them (vLLM ≤0.8 always, later with save-detailed); a failed request (a non-empty
    `errors` entry: vLLM writes 0 output tokens and TTFT 0 for it) is left out."""
    errors: Any = d.get("errors")
    ok: np.ndarray | None = None
    if isinstance(errors, list) and errors:
        ok = np.array([not e for e in errors], dtype=bool)
    inp = lengths(d.get("input_lens"), "input_lens", src)
    out = lengths(d.get("output_lens"), "output_lens", src, allow_zero=ok is not None)
    if inp is None or out is None:
        return None
    n = inp.size
    if out.size != n:
        raise InvalidInputError(f"{src}: 'output_lens' lists {out.size} requests, 'input_lens' {n}")
    if "num_prompts" in d and count(d["num_prompts"], "num_prompts", src) != n:
        raise InvalidInputError(
            f"{src}: 'num_prompts' says {d['num_prompts']} requests, 'input_lens' lists {n}"
        )
    if ok is None:
        ok = np.ones(n, dtype=bool)
    elif ok.size != n:
        raise InvalidInputError(f"{src}: 'errors' lists {ok.size} requests, 'input_lens' {n}")
    if not ok.any():
        raise InvalidInputError(f"{src}: every request failed; nothing to compare")
    if (out[ok] < 1).any():
        raise InvalidInputError(f"{src}: 'output_lens' has a successful request of no tokens")
    if not ok.all():
        notes.append(f"{n - int(ok.sum())} failed requests of {n} left out of the replay")
    ttft = None
    if d.get("ttfts") is not None:
        ttft = seconds_array(d["ttfts"], "ttfts", src)
        if ttft.size != n:
            raise InvalidInputError(f"{src}: 'ttfts' lists {ttft.size} requests, not {n}")
        ttft = ttft[ok]
    itl = None
    gaps = d.get("itls")
    if gaps is not None:
        if not isinstance(gaps, list) or len(gaps) != n:
            raise InvalidInputError(f"{src}: 'itls' must be a list of {n} lists of gaps")
        itl = tuple(seconds_array(g, "itls", src) for g, keep in zip(gaps, ok, strict=True) if keep)
    return inp[ok], out[ok], ttft, itl
