"""Results of real serving benchmarks, read into one shape (`BenchmarkRun`) so that
`roofline validate --serving` can rerun each one's workload in the simulator and compare
prediction and measurement metric by metric.

Formats, told apart by their content (each reader's module says its schema and where it was
checked; tests/test_serving_real_files.py reads the real files of tests/fixtures/serving_files):

- a JSON object of `<stat>_ttft_ms`-style keys: vLLM's benchmark_serving.py / `vllm bench serve
  --save-result` (and InferenceX's copy), SGLang's bench_serving (JSON Lines, one run a line),
  InferenceX's experimental client (the same keys in seconds, no `_ms`) — `formats.vllm`;
- per-metric records `{"unit", "avg", "p50", ...}`: genai-perf and AIPerf profile exports, JSON
  or CSV — `formats.records`;
- `{"benchmarks": [...]}`: GuideLLM v0.2 reports, JSON or YAML — `formats.guidellm`;
- rows with `hw`, `conc`, `tp` and latencies in seconds: InferenceX/InferenceMAX `agg_*.json`,
  dashboard ingest rows, the agentic aggregate — `formats.inferencex`.

Every reader maps its tool's definitions onto the common names (TTFT; TPOT per request,
(E2E − TTFT) / (G − 1); ITL, every gap between streamed chunks; E2E) and converts to seconds:
GuideLLM's and AIPerf's "inter-token latency" is TPOT, not ITL. What a file cannot say (the
hardware, TP, engine; a request count some formats lack) comes from flags, and
`BenchmarkRun.notes` says what was assumed.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import yaml

from ..errors import InvalidInputError
from ..files import read_text
from .formats.common import QUANTITIES, RATES, BenchmarkRun
from .formats.guidellm import is_guidellm, read_guidellm
from .formats.inferencex import is_row, read_rows
from .formats.records import is_records, read_records_csv, read_records_json
from .formats.vllm import is_flat, read_flat

__all__ = ["MAX_RESULT_BYTES", "QUANTITIES", "RATES", "BenchmarkRun", "read_benchmarks"]

#: Largest benchmark result read (the per-request arrays of 100k requests fit easily).
MAX_RESULT_BYTES = 256 * 2**20
#: A GuideLLM YAML report: `benchmarks:` at the top, after an optional document marker
_GUIDELLM_YAML = re.compile(r"^(?:---[ \t]*\r?\n)?\s*benchmarks\s*:")
KNOWN = (
    "the JSON vllm bench serve or SGLang bench_serving saves, a genai-perf or AIPerf profile "
    "export (JSON or CSV), a GuideLLM report (JSON or YAML), an InferenceX result"
)


def read_benchmarks(path: str | Path, requests: int | None = None) -> list[BenchmarkRun]:
    """The runs of one result file, by its content (one per line of a JSON Lines file, per
    GuideLLM benchmark, per InferenceX row). `requests` sets the request count (where a format
    has none: genai-perf, InferenceX fixed-length rows)."""
    text = read_text(path, "serving benchmark result", MAX_RESULT_BYTES, InvalidInputError)
    src = str(path)
    stripped = text.lstrip("\ufeff").lstrip()
    if stripped.startswith(("{", "[")):
        return _json(stripped, src, requests)
    if stripped.startswith("Metric"):
        return [read_records_csv(stripped, src, requests)]
    if _GUIDELLM_YAML.match(stripped):
        try:
            doc = yaml.safe_load(stripped)
        except yaml.YAMLError as e:
            where = getattr(e, "problem_mark", None)
            line = f" at line {where.line + 1}" if where is not None else ""
            raise InvalidInputError(
                f"{src}: not valid YAML{line} (truncated?); give the whole GuideLLM report"
            ) from None
        if isinstance(doc, dict) and is_guidellm(doc):
            return read_guidellm(doc, src)
    raise InvalidInputError(f"{src}: neither JSON, CSV nor a GuideLLM YAML report; give {KNOWN}")


class _Constant(str):
    """JSON's non-standard NaN or -Infinity as parsed, kept until its field is found."""


def _constant(name: str) -> float | _Constant:
    """JSON's non-standard NaN/Infinity (Python's json writes them): only Infinity is a rate;
    NaN and -Infinity are marked, and `_refuse_constants` names the field that holds one."""
    return math.inf if name == "Infinity" else _Constant(name)


def _constant_at(doc: Any, path: str = "") -> tuple[str, str] | None:
    """(JSON path, constant) of the first NaN or -Infinity in `doc`, depth first."""
    if isinstance(doc, _Constant):
        return path or "$", str(doc)
    items = (
        doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    )
    for key, value in items:
        where = f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}" if path else key
        if (found := _constant_at(value, where)) is not None:
            return found
    return None


def _refuse_constants(doc: Any, src: str) -> Any:
    """`doc`, or one line naming the file and the JSON path of a NaN or -Infinity in it."""
    try:
        found = _constant_at(doc)
    except RecursionError:
        raise InvalidInputError(f"{src}: nested too deeply to read; give the result file") from None
    if found is not None:
        path, name = found
        raise InvalidInputError(
            f"{src}: '{path}' is {name}, not a measurement; give a number or leave the field out"
        )
    return doc


def _loads(text: str, src: str, what: str = "JSON") -> Any:
    """`json.loads` (Infinity allowed), or one line saying where the text stops being JSON,
    or which field holds a NaN or -Infinity."""
    try:
        doc = json.loads(text, parse_constant=_constant)
    except json.JSONDecodeError as e:
        raise InvalidInputError(
            f"{src}: not valid {what} ({e.msg}, line {e.lineno} column {e.colno}; truncated?); "
            "give the whole result file"
        ) from None
    except (RecursionError, ValueError) as e:
        raise InvalidInputError(
            f"{src}: not valid {what} ({str(e)[:80]}); give the result file"
        ) from None
    return _refuse_constants(doc, src)


def _json(text: str, src: str, requests: int | None) -> list[BenchmarkRun]:
    try:
        json.loads(text, parse_constant=_constant)
    except json.JSONDecodeError as e:
        if e.msg == "Extra data":  # several JSON values: JSON Lines (SGLang appends one a run)
            return _json_lines(text, src)
    except (RecursionError, ValueError):
        pass
    return _document(_loads(text, src), src, requests)


def _json_lines(text: str, src: str) -> list[BenchmarkRun]:
    lines = [(i, ln) for i, ln in enumerate(text.splitlines(), 1) if ln.strip()]
    runs = []
    for i, ln in lines:
        where = f"{src} line {i}"
        obj = _loads(ln, where, "JSON Lines")
        if not (isinstance(obj, dict) and is_flat(obj)):
            raise InvalidInputError(
                f"{where}: not a bench_serving result line (no TTFT statistics); give {KNOWN}"
            )
        runs.append(read_flat(obj, where))
    return runs


def _document(doc: Any, src: str, requests: int | None) -> list[BenchmarkRun]:
    if isinstance(doc, list):
        if doc and all(is_row(r) for r in doc):
            return read_rows(doc, src, requests)
        raise InvalidInputError(
            f"{src}: a JSON list, but not of InferenceX result rows (each with 'hw' and "
            f"'conc'); give {KNOWN}"
        )
    if not isinstance(doc, dict):
        raise InvalidInputError(f"{src}: a result file is a JSON object or list; give {KNOWN}")
    if is_guidellm(doc):
        return read_guidellm(doc, src)
    if is_records(doc):
        return [read_records_json(doc, src, requests)]
    if is_row(doc):
        return read_rows(doc, src, requests)
    if is_flat(doc):
        return [read_flat(doc, src)]
    raise InvalidInputError(f"{src}: not a result this version reads; give {KNOWN}")
